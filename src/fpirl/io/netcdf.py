"""Reading and writing fpirl files (docs/formats.md is the contract).

Density dataset (netCDF; or a Zarr store, read with the ``zarr`` package)
    variable ``density`` with dims ``(time, axis names...)``; one coordinate per axis holding the
    node positions, with attrs ``role`` ('state'|'action'), ``lower``, ``upper``; a ``time``
    coordinate (uniformly spaced); dataset attr ``boundary`` ('periodic'|'reflecting').
    Periodic axes have ``N`` nodes ``lower + j h`` (``h = (upper - lower)/N``), reflecting axes
    ``N + 1`` nodes from ``lower`` to ``upper``.

Result dataset (netCDF)
    on the FE nodes (same axis coordinates and attrs as the density dataset): ``potential``
    (zero mean), and when an MDP was recovered ``q_value``, ``policy``, ``reward``;
    ``hermite_coefficients`` with dims ``hermite_<axis>``; attrs ``beta``, ``dt``, ``gamma``,
    ``boundary``, ``state_dims``, ``action_dims`` (comma-separated axis names),
    ``hermite_elements`` and ``fe_elements`` (one int per axis), ``ridge``, ``residual``,
    ``reward_convention`` ('soft'|'expected', when an MDP was recovered; absent means 'expected'),
    ``solver_<setting>`` for every solver setting, ``fpirl_version``.

Every write is atomic: the file is written to a temporary file in the destination directory and
moved into place with :func:`os.replace`; on any failure the temporary file is removed, so a failed
run never leaves a half-written file behind.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Protocol, runtime_checkable

import numpy as np
import xarray as xr

from ..core._errors import FpirlInputError
from ._files import (NETCDF_SUFFIXES, TABLE_SUFFIXES, _attr_value, _open_netcdf, _to_netcdf_atomic, _version,
                     load_or_error,
                     atomic_path, atomic_write, check_output_path, data_kind, grid_coords, grid_from_dataset,
                     time_first_increasing)
from ..core.density import DensitySnapshots
from ..core.grid import Grid
from ..core.hermite import HermiteSpace
from ._zarr import is_zarr, open_zarr
from ..core.validation import numeric_times

__all__ = [
    "NETCDF_SUFFIXES",
    "TABLE_SUFFIXES",
    "FittedModel",
    "FittedPotential",
    "atomic_path",
    "atomic_write",
    "check_output_path",
    "data_kind",
    "grid_coords",
    "grid_from_dataset",
    "model_from_result",
    "read_attrs",
    "read_density",
    "read_result",
    "result_dataset",
    "write_density",
    "write_result",
]


# --------------------------------------------------------------------------------------------
# density datasets
# --------------------------------------------------------------------------------------------
def density_from_dataset(ds: xr.Dataset) -> DensitySnapshots:
    """Validate a density dataset (already opened) and return :class:`DensitySnapshots` (``time`` moved
    first and descending axes reversed, :func:`fpirl.io._files.time_first_increasing`)."""
    ds = time_first_increasing(ds)
    if "density" not in ds.data_vars:
        raise FpirlInputError(
            f"dataset has no 'density' variable (found: {', '.join(map(str, ds.data_vars)) or 'none'})"
        )
    dims = tuple(map(str, ds["density"].dims))
    if not dims or dims[0] != "time":
        raise FpirlInputError(f"variable 'density' has dims ({', '.join(dims)}), expected (time, <axes...>)")
    grid = grid_from_dataset(ds, "density", leading=("time",))
    if "time" not in ds.coords:
        raise FpirlInputError("density dataset has no 'time' coordinate with the snapshot times")

    times = numeric_times(ds["time"].values, "the 'time' coordinate")
    values = np.asarray(ds["density"].values)
    if not np.issubdtype(values.dtype, np.number) or np.issubdtype(values.dtype, np.complexfloating):
        raise FpirlInputError(f"density must be real numbers, got dtype {values.dtype}")
    return DensitySnapshots(grid, times, values)


def density_dataset(snapshots: DensitySnapshots) -> xr.Dataset:
    """The :class:`DensitySnapshots` as an xarray dataset following the density contract."""
    grid = snapshots.grid
    coords = {"time": xr.Variable("time", snapshots.times, attrs={"long_name": "snapshot time"})}
    coords.update(grid_coords(grid))
    ds = xr.Dataset(
        {"density": (("time",) + grid.names, snapshots.values, {"long_name": "probability density"})},
        coords=coords,
        attrs={"boundary": grid.boundary, "dt": snapshots.dt, "fpirl_version": _version()},
    )
    return ds


def read_density(path) -> DensitySnapshots:
    """Read a density dataset (netCDF, or a Zarr store) into validated :class:`DensitySnapshots`.

    Raises :class:`FpirlInputError` with a one-line message for missing or unreadable files,
    unknown file types, trajectory tables (read those with :func:`fpirl.tracks.reading.read_tracks`),
    missing variables or attributes, wrong dims, coordinates that are non-uniform or disagree with
    ``lower``/``upper``, NaN or negative density, fewer than two snapshots and non-uniform times.
    """
    path = Path(path)
    if is_zarr(path):
        with open_zarr(path) as ds:
            return _named(path, lambda: density_from_dataset(load_or_error(ds, path)))
    kind = data_kind(path)
    if kind == "table":
        raise FpirlInputError(
            f"{str(path)!r} is a trajectory table, not a density dataset: read it with "
            "fpirl.tracks.reading.read_tracks ('fpirl fit' does so given --track, --time and --state)"
        )
    return _named(path, lambda: density_from_dataset(_open_netcdf(path)))


#: Attributes of a density dataset's axis coordinates carried to the result's axes: what the numbers mean (fpirl
#: reads none of them; the values stay in the data's units).
DESCRIPTIVE_ATTRS = ("units", "long_name", "standard_name")


def axis_attrs(path) -> dict:
    """``{axis name: {attr: value}}``: the :data:`DESCRIPTIVE_ATTRS` of a density dataset's axis coordinates (the time
    coordinate apart), for a file :func:`read_density` has read; empty where there are none or the file cannot be
    opened again."""
    path = Path(path)
    try:
        with (open_zarr(path) if is_zarr(path) else xr.open_dataset(path, decode_times=False)) as ds:
            return {str(name): {k: ds[name].attrs[k] for k in DESCRIPTIVE_ATTRS if k in ds[name].attrs}
                    for name in ds.coords if name != "time"}
    except (OSError, ValueError, KeyError, FpirlInputError):  # decoration only: the data were read already
        return {}


def copy_axis_attrs(result: xr.Dataset, path) -> xr.Dataset:
    """``result`` with the :func:`axis_attrs` of the density dataset at ``path`` on its axes of the same names."""
    for name, attrs in axis_attrs(path).items():
        if name in result.coords:
            result[name].attrs.update(attrs)
    return result


def _named(path: Path, read):
    """``read()``, with the file named in its one-line errors (commands that read two files)."""
    try:
        return read()
    except FpirlInputError as exc:
        if str(path) in str(exc) or path.name in str(exc):
            raise
        raise FpirlInputError(f"{str(path)!r}: {exc}") from None


def write_density(path, snapshots: DensitySnapshots, attrs: Mapping | None = None) -> Path:
    """Write ``snapshots`` to ``path`` (netCDF, atomically).

    ``attrs``: extra dataset attributes (numbers, booleans, strings), e.g. where the data come from.
    """
    ds = density_dataset(snapshots)
    for key, value in (attrs or {}).items():
        value = _attr_value(value)
        if value is not None:
            ds.attrs[key] = value
    return _to_netcdf_atomic(ds, path)


def read_attrs(path) -> dict:
    """The dataset attributes of a netCDF file (e.g. how ``fpirl simulate`` made it)."""
    return dict(_open_netcdf(Path(path)).attrs)


# --------------------------------------------------------------------------------------------
# result datasets
# --------------------------------------------------------------------------------------------
@runtime_checkable
class FittedPotential(Protocol):
    """What :func:`result_dataset` reads from a fitted estimator (every fpirl estimator has it:
    :class:`~fpirl.estimators.identify.PotentialEstimator` and the track estimators of :mod:`fpirl.estimators`).

    ``coef_`` (shape ``hermite_.shape``), ``beta_``, ``grid_`` (the FE grid the result is written
    on), ``hermite_``, ``penalty_`` (the absolute Tikhonov weight used), ``residual_``, ``settings_``
    (scalars and strings, written as ``solver_<key>`` attrs) and ``potential_on_grid()`` (nodal
    ``psi`` on ``grid_``, zero mean).
    """

    coef_: np.ndarray
    beta_: float
    grid_: Grid
    hermite_: "HermiteSpace"
    penalty_: float
    residual_: float
    settings_: dict

    def potential_on_grid(self) -> np.ndarray: ...


@runtime_checkable
class MDPFields(Protocol):
    """What :func:`result_dataset` reads from an MDP (:class:`fpirl.mdp.MDP` has it): the fields
    ``q_value``, ``policy`` and ``reward`` on the grid, and the discount ``gamma``. io reads the
    fields only, so it does not import the MDP room."""

    q_value: np.ndarray
    policy: np.ndarray
    reward: np.ndarray
    gamma: float


_MDP_FIELDS = (
    ("q_value", "Q(s, a) = -psi"),
    ("policy", "Boltzmann policy pi(a | s)"),
    ("reward", "reward R(s, a) = Q(s, a) - gamma E[V(s')] by the inverse Bellman equation"),
)


def result_dataset(estimator: FittedPotential, mdp: MDPFields | None = None, extra: Mapping | None = None, *,
                   dt: float | None = None, gamma: float | None = None) -> xr.Dataset:
    """Collect a fitted estimator (and the recovered MDP) into a result dataset (docs/formats.md).

    Parameters
    ----------
    estimator : FittedPotential
        A fitted estimator.
    mdp : fpirl.mdp.MDP, optional
        The recovered MDP on ``estimator.grid_``: ``q_value``, ``policy`` and ``reward`` become
        variables.
    extra : mapping, optional
        More content: :class:`xarray.DataArray` values and arrays of the FE grid's shape become
        variables; numbers, booleans, strings and 1-D numeric arrays become attributes.
    dt : float, optional
        Snapshot spacing (``dt`` attr). Default: the estimator's ``dt_`` (track estimators have
        one), else NaN.
    gamma : float, optional
        Discount factor (``gamma`` attr). Default: ``mdp.gamma``, else NaN.

    Raises
    ------
    TypeError
        If ``estimator`` is not a fitted estimator or ``mdp`` not an :class:`~fpirl.mdp.MDP`.
    """
    if not isinstance(estimator, FittedPotential):
        missing = [k for k in ("coef_", "beta_", "grid_", "hermite_", "penalty_", "residual_", "settings_",
                               "potential_on_grid") if not hasattr(estimator, k)]
        raise TypeError(f"result_dataset needs a fitted estimator; {type(estimator).__name__} lacks "
                        f"{', '.join(missing)}")
    if mdp is not None and not isinstance(mdp, MDPFields):
        raise TypeError(f"mdp must be a fpirl.mdp.MDP, got {type(mdp).__name__}")
    grid: Grid = estimator.grid_
    dims = grid.names
    psi = np.asarray(estimator.potential_on_grid(), dtype=float)
    if psi.shape != grid.shape:
        raise ValueError(f"potential_on_grid() has shape {psi.shape}, expected {grid.shape}")
    if not np.all(np.isfinite(psi)):
        raise FpirlInputError("the fitted potential is not finite (NaN or inf): the data's scales or the options are "
                              "out of the range the least squares can represent; nothing written")
    hermite = estimator.hermite_
    data_vars = {
        "potential": (dims, psi, {"long_name": "potential psi (zero mean)"}),
        "hermite_coefficients": (
            tuple(f"hermite_{n}" for n in dims),
            np.asarray(estimator.coef_, dtype=float).reshape(hermite.shape),
            {"long_name": "coefficients of psi in the tensor-product cubic Hermite basis",
             "layout": "per axis: value and slope dofs of each Hermite node, as fpirl.core.hermite.HermiteSpace"},
        ),
    }
    if mdp is not None:
        for name, long_name in _MDP_FIELDS:
            value = np.asarray(getattr(mdp, name), dtype=float)
            if value.shape != grid.shape:
                raise ValueError(f"mdp.{name} has shape {value.shape}, expected {grid.shape}")
            data_vars[name] = (dims, value, {"long_name": long_name})
        gamma = mdp.gamma if gamma is None else gamma
    if dt is None:
        dt = getattr(estimator, "dt_", None)  # the documented default: track estimators know their dt
    attrs = {
        "title": "fpirl result",
        "beta": float(estimator.beta_),
        "dt": float("nan") if dt is None else float(dt),
        "gamma": float("nan") if gamma is None else float(gamma),
        "boundary": grid.boundary,
        "state_dims": ",".join(grid.names[i] for i in grid.state_axes),
        "action_dims": ",".join(grid.names[i] for i in grid.action_axes),
        "fe_elements": np.asarray(grid.elements, dtype=np.int64),
        "hermite_elements": np.asarray(np.broadcast_to(hermite.elements, (grid.ndim,)), dtype=np.int64),
        "ridge": float(estimator.penalty_),
        "residual": float(estimator.residual_),
        "fpirl_version": _version(),
    }
    if mdp is not None:
        attrs["reward_convention"] = str(getattr(mdp, "reward_convention", "expected"))
    for key, value in dict(estimator.settings_).items():
        value = _attr_value(value)
        if value is not None:
            attrs[f"solver_{key}"] = value
    for key, value in (extra or {}).items():
        if isinstance(value, xr.DataArray):
            data_vars[key] = value
        elif isinstance(value, np.ndarray) and value.shape == grid.shape:
            data_vars[key] = (dims, value)
        else:
            value = _attr_value(value)
            if value is not None:
                attrs[key] = value
    return xr.Dataset(data_vars, coords=grid_coords(grid), attrs=attrs)


def write_result(path, dataset: xr.Dataset) -> Path:
    """Write a result dataset to ``path`` (netCDF, atomically)."""
    return _to_netcdf_atomic(dataset, path)


def read_result(path) -> xr.Dataset:
    """Read and check a result dataset; returns the (loaded, closed) :class:`xarray.Dataset`.

    The FE grid of the result is available as ``grid_from_dataset(ds, 'potential')``.
    """
    path = Path(path)
    if path.suffix.lower() not in NETCDF_SUFFIXES:
        raise FpirlInputError(f"a result must be a netCDF file written by 'fpirl fit' (.nc), got {str(path)!r}")
    ds = _open_netcdf(path)
    if "potential" not in ds.data_vars:
        raise FpirlInputError(f"{str(path)!r} is not an fpirl result: no 'potential' variable")
    grid_from_dataset(ds, "potential")  # validates the coordinates
    missing = [k for k in ("beta", "boundary", "state_dims", "action_dims") if k not in ds.attrs]
    if missing:
        raise FpirlInputError(f"{str(path)!r} is not an fpirl result: missing attrs {', '.join(missing)}")
    _float_attr(ds.attrs, "beta")  # a number (text would fail later, in the plot or the simulation)
    if not np.any(np.isfinite(ds["potential"].values)):
        raise FpirlInputError(f"{str(path)!r}: the result's 'potential' has no finite value (all NaN or infinite)")
    return ds


# --------------------------------------------------------------------------------------------
# a result back into a model
# --------------------------------------------------------------------------------------------
@dataclass
class FittedModel:
    """A fitted potential read back from a result: Hermite ``psi`` on the domain of an FE grid,
    with ``beta`` and ``dt`` (what ``fpirl simulate`` and the evaluations run forward)."""

    grid: Grid
    hermite: "HermiteSpace"
    coef: np.ndarray
    beta: float
    dt: float

    def potential(self, points):
        return self.hermite.evaluate(self.coef, points)

    def gradient(self, points):
        return self.hermite.gradient(self.coef, points)


def _float_attr(attrs, key: str) -> float:
    """A numeric attr as a float (NaN when missing); a one-line error when it is text or an array."""
    value = attrs.get(key, np.nan)
    try:
        return float(np.asarray(value).reshape(()))
    except (TypeError, ValueError):
        raise FpirlInputError(f"result attr {key!r} must be a number, got {str(value)[:40]!r}") from None


def model_from_result(ds: xr.Dataset, grid: Grid | None = None) -> FittedModel:
    """Rebuild the fitted model of a result dataset (docs/formats.md) on its FE grid.

    ``grid`` defaults to the result's own (``grid_from_dataset(ds, 'potential')``). One-line
    :class:`FpirlInputError` when the coefficients, ``hermite_elements``, ``beta`` or ``dt`` are
    missing or inconsistent.
    """
    grid = grid_from_dataset(ds, "potential") if grid is None else grid
    if "hermite_coefficients" not in ds:
        raise FpirlInputError("result has no 'hermite_coefficients' variable")
    try:
        elements = np.asarray(ds.attrs.get("hermite_elements", []), dtype=float).ravel()
    except (TypeError, ValueError):
        elements = np.zeros(0)  # e.g. a string attr: reported below
    if elements.size != grid.ndim or np.any(~np.isfinite(elements)) or np.any(elements < 1) \
            or np.any(elements != np.round(elements)):
        raise FpirlInputError("result attr 'hermite_elements' is missing or inconsistent with the grid")
    hermite = HermiteSpace.on_grid(grid, elements.astype(int))
    coef = np.asarray(ds["hermite_coefficients"].values, dtype=float)
    if coef.shape != hermite.shape:
        raise FpirlInputError(f"hermite_coefficients have shape {coef.shape}, expected {hermite.shape}")
    beta, dt = (_float_attr(ds.attrs, key) for key in ("beta", "dt"))
    if not (np.isfinite(beta) and beta > 0):
        raise FpirlInputError(f"result has an invalid beta ({beta})")
    if not (np.isfinite(dt) and dt > 0):
        raise FpirlInputError(f"result has no valid 'dt' attr (a positive time step, got {dt}): the model's transition needs it")
    return FittedModel(grid, hermite, coef, beta, dt)
