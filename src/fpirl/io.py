"""Reading and writing fpirl files (docs/formats.md is the contract).

Density dataset (netCDF)
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
    ``solver_<setting>`` for every solver setting, ``fpirl_version``.

Every write is atomic: the file is written to a temporary file in the destination directory and
moved into place with :func:`os.replace`; on any failure the temporary file is removed, so a failed
run never leaves a half-written file behind.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Callable, Mapping

import numpy as np
import xarray as xr

from ._errors import FpirlInputError
from .density import DensitySnapshots
from .grid import BOUNDARIES, ROLES, Grid

__all__ = [
    "NETCDF_SUFFIXES",
    "TABLE_SUFFIXES",
    "atomic_path",
    "atomic_write",
    "data_kind",
    "grid_coords",
    "grid_from_dataset",
    "read_density",
    "read_result",
    "result_dataset",
    "write_density",
    "write_result",
]

NETCDF_SUFFIXES = (".nc", ".nc4", ".netcdf", ".cdf")
TABLE_SUFFIXES = (".csv", ".parquet", ".pq")

#: variables a result may carry on the FE nodes
RESULT_FIELDS = ("potential", "q_value", "policy", "reward", "density_fit_residual")


# --------------------------------------------------------------------------------------------
# atomic writes
# --------------------------------------------------------------------------------------------
def _check_destination(path: Path) -> None:
    parent = path.parent
    if not parent.exists():
        raise FpirlInputError(f"output directory does not exist: {str(parent)!r}")
    if not parent.is_dir():
        raise FpirlInputError(f"output location is not a directory: {str(parent)!r}")
    if path.is_dir():
        raise FpirlInputError(f"output path is a directory: {str(path)!r}")


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path):
    """Context manager yielding a temporary path next to ``path``; moved onto ``path`` on success.

    The temporary file lives in the destination directory (so :func:`os.replace` is atomic) and is
    removed if the body raises (any exception, including ``KeyboardInterrupt``).
    """
    path = Path(path)
    _check_destination(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_current_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write(path, writer: Callable[[Path], None]) -> Path:
    """Call ``writer(tmp_path)`` and move the temporary file onto ``path`` atomically."""
    with atomic_path(path) as tmp:
        writer(tmp)
    return Path(path)


def _to_netcdf_atomic(ds: xr.Dataset, path) -> Path:
    path = Path(path)
    if path.suffix.lower() not in NETCDF_SUFFIXES:
        raise FpirlInputError(
            f"cannot write {str(path)!r}: unknown file type {path.suffix or '(none)'!r}, use a .nc file"
        )
    return atomic_write(path, lambda tmp: ds.to_netcdf(tmp, mode="w"))


# --------------------------------------------------------------------------------------------
# grids <-> coordinates
# --------------------------------------------------------------------------------------------
def grid_coords(grid: Grid) -> dict:
    """xarray coordinates (node positions with ``role``/``lower``/``upper`` attrs) of ``grid``."""
    return {
        a.name: xr.Variable(
            a.name,
            a.nodes,
            attrs={"role": a.role, "lower": float(a.lower), "upper": float(a.upper)},
        )
        for a in grid.axes
    }


def _attr_float(attrs, key, where):
    if key not in attrs:
        raise FpirlInputError(f"{where} has no {key!r} attribute")
    try:
        value = float(np.asarray(attrs[key]).reshape(()))
    except (TypeError, ValueError):
        raise FpirlInputError(f"{where}: attribute {key!r} must be a number, got {attrs[key]!r}") from None
    if not np.isfinite(value):
        raise FpirlInputError(f"{where}: attribute {key!r} must be finite, got {value}")
    return value


def grid_from_dataset(ds: xr.Dataset, variable: str = "density", leading: tuple[str, ...] = ()) -> Grid:
    """Rebuild the :class:`Grid` of ``ds[variable]`` from its axis coordinates and attrs.

    ``leading`` names dims that come first and are not grid axes (e.g. ``('time',)``).
    Raises :class:`FpirlInputError` on any inconsistency (missing coordinate or attrs, non-uniform
    nodes, nodes that disagree with ``lower``/``upper`` and the boundary's node placement).
    """
    if variable not in ds.data_vars:
        raise FpirlInputError(f"dataset has no {variable!r} variable (found: {', '.join(map(str, ds.data_vars)) or 'none'})")
    da = ds[variable]
    dims = tuple(map(str, da.dims))
    if dims[: len(leading)] != tuple(leading):
        want = ", ".join(leading + ("<axes...>",))
        raise FpirlInputError(f"variable {variable!r} has dims ({', '.join(dims)}), expected ({want})")
    axes = dims[len(leading):]
    if not axes:
        raise FpirlInputError(f"variable {variable!r} has no spatial axes (dims: {', '.join(dims)})")
    boundary = ds.attrs.get("boundary")
    if boundary is None:
        raise FpirlInputError("dataset has no 'boundary' attribute ('periodic' or 'reflecting')")
    boundary = str(boundary)
    if boundary not in BOUNDARIES:
        raise FpirlInputError(f"dataset attribute 'boundary' must be 'periodic' or 'reflecting', got {boundary!r}")

    lower, upper, elements, roles = [], [], [], []
    for name in axes:
        if name not in ds.coords:
            raise FpirlInputError(f"axis {name!r} has no coordinate with the node positions")
        coord = ds.coords[name]
        where = f"axis {name!r}"
        if coord.dims != (name,):
            raise FpirlInputError(f"{where}: coordinate must be 1-D along {name!r}")
        role = coord.attrs.get("role")
        if role is None:
            raise FpirlInputError(f"{where} has no 'role' attribute ('state' or 'action')")
        role = str(role)
        if role not in ROLES:
            raise FpirlInputError(f"{where}: role must be 'state' or 'action', got {role!r}")
        lo = _attr_float(coord.attrs, "lower", where)
        hi = _attr_float(coord.attrs, "upper", where)
        if not hi > lo:
            raise FpirlInputError(f"{where}: need lower < upper, got [{lo:g}, {hi:g}]")
        try:
            x = np.asarray(coord.values, dtype=float)
        except (TypeError, ValueError):
            raise FpirlInputError(f"{where}: node coordinates must be numbers") from None
        n = x.size
        n_el = n if boundary == "periodic" else n - 1
        if n_el < 2:
            raise FpirlInputError(f"{where}: too few nodes ({n}) for a {boundary} axis")
        if not np.all(np.isfinite(x)):
            raise FpirlInputError(f"{where}: node coordinates contain NaN or infinite values")
        h = (hi - lo) / n_el
        steps = np.diff(x)
        tol = 1e-6 * h
        if np.any(np.abs(steps - steps.mean()) > tol) or np.any(steps <= 0):
            raise FpirlInputError(f"{where}: node coordinates are not uniformly spaced and increasing")
        expected = lo + h * np.arange(n)
        if np.max(np.abs(x - expected)) > tol:
            placement = (
                f"{n} periodic nodes lower + j*(upper-lower)/{n}, j = 0..{n - 1}"
                if boundary == "periodic"
                else f"{n} reflecting nodes from lower to upper inclusive"
            )
            raise FpirlInputError(
                f"{where}: nodes [{x[0]:g} .. {x[-1]:g}] do not match lower={lo:g}, upper={hi:g} "
                f"({placement})"
            )
        lower.append(lo)
        upper.append(hi)
        elements.append(n_el)
        roles.append(role)
    return Grid(lower, upper, elements, names=axes, roles=roles, boundary=boundary)


# --------------------------------------------------------------------------------------------
# file-type dispatch
# --------------------------------------------------------------------------------------------
def data_kind(path) -> str:
    """'netcdf' or 'table' from the file suffix; :class:`FpirlInputError` for anything else."""
    suffix = Path(path).suffix.lower()
    if suffix in NETCDF_SUFFIXES:
        return "netcdf"
    if suffix in TABLE_SUFFIXES:
        return "table"
    raise FpirlInputError(
        f"unknown file type {suffix or '(none)'!r} for {str(path)!r}: expected a density dataset "
        f"({', '.join(NETCDF_SUFFIXES)}) or a trajectory table ({', '.join(TABLE_SUFFIXES)})"
    )


def _check_readable(path: Path) -> None:
    if not path.exists():
        raise FpirlInputError(f"no such file: {str(path)!r}")
    if path.is_dir():
        raise FpirlInputError(f"{str(path)!r} is a directory, not a file")
    if not os.access(path, os.R_OK):
        raise FpirlInputError(f"cannot read {str(path)!r}: permission denied")


def _open_netcdf(path: Path) -> xr.Dataset:
    _check_readable(path)
    try:
        with xr.open_dataset(path) as ds:
            return ds.load()
    except FpirlInputError:
        raise
    except Exception as exc:  # netCDF4/HDF5/xarray raise many types for corrupt files
        msg = " ".join(str(exc).split())
        if "did not find a match" in msg or "Unknown file format" in msg:
            msg = "not a netCDF file"
        msg = msg.split(". ")[0][:200] or type(exc).__name__
        raise FpirlInputError(f"cannot read {str(path)!r} as netCDF: {msg}") from None


# --------------------------------------------------------------------------------------------
# density datasets
# --------------------------------------------------------------------------------------------
def density_from_dataset(ds: xr.Dataset) -> DensitySnapshots:
    """Validate a density dataset (already opened) and return :class:`DensitySnapshots`."""
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
    try:
        times = np.asarray(ds["time"].values, dtype=float)
    except (TypeError, ValueError):
        raise FpirlInputError("'time' coordinate must be numeric (model time units, not dates)") from None
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
    """Read a density dataset (netCDF) into validated :class:`DensitySnapshots`.

    Raises :class:`FpirlInputError` with a one-line message for missing or unreadable files,
    unknown file types, trajectory tables (read those with :func:`fpirl.tracks_io.read_tracks`),
    missing variables or attributes, wrong dims, coordinates that are non-uniform or disagree with
    ``lower``/``upper``, NaN or negative density, fewer than two snapshots and non-uniform times.
    """
    path = Path(path)
    kind = data_kind(path)
    if kind == "table":
        raise FpirlInputError(
            f"{str(path)!r} is a trajectory table, not a density dataset: read it with "
            "fpirl.tracks_io.read_tracks ('fpirl fit' does so given --track, --time and --state)"
        )
    return density_from_dataset(_open_netcdf(path))


def write_density(path, snapshots: DensitySnapshots) -> Path:
    """Write ``snapshots`` to ``path`` (netCDF, atomically)."""
    return _to_netcdf_atomic(density_dataset(snapshots), path)


# --------------------------------------------------------------------------------------------
# result datasets
# --------------------------------------------------------------------------------------------
def _version() -> str:
    from ._version import __version__

    return str(__version__)


def _attr_value(value):
    """Convert a Python value into something netCDF accepts as an attribute (or None to drop)."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (str, bytes)):
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    arr = np.asarray(value)
    if arr.dtype.kind in "biuf" and arr.ndim <= 1:
        return arr.astype(float if arr.dtype.kind == "f" else np.int64)
    return str(value)


def result_dataset(estimator, mdp=None, extra: Mapping | None = None, *, dt=None, gamma=None) -> xr.Dataset:
    """Collect a fitted :class:`~fpirl.identify.PotentialEstimator` (and MDP) into a result dataset.

    Parameters
    ----------
    estimator
        fitted estimator (``coef_``, ``beta_``, ``grid_``, ``hermite_``, ``ridge_``, ``residual_``,
        ``settings_``, ``potential_on_grid()``).
    mdp : optional
        object with nodal arrays ``q_value``, ``policy``, ``reward`` on the FE grid (and optionally
        ``gamma``); each present one becomes a variable.
    extra : mapping, optional
        more content: arrays of the FE grid's shape or :class:`xarray.DataArray` become variables,
        scalars and strings become attributes.
    dt, gamma : float, optional
        snapshot spacing and discount factor for the attrs (``dt`` defaults to the estimator's
        ``dt_`` or ``settings_['dt']``, ``gamma`` to ``mdp.gamma``; NaN when unknown).
    """
    grid: Grid = estimator.grid_
    dims = grid.names
    psi = np.asarray(estimator.potential_on_grid(), dtype=float)
    if psi.shape != grid.shape:
        raise ValueError(f"potential_on_grid() has shape {psi.shape}, expected {grid.shape}")
    data_vars = {
        "potential": (dims, psi, {"long_name": "potential psi (zero mean)"}),
    }
    coef = np.asarray(estimator.coef_, dtype=float)
    herm_dims = tuple(f"hermite_{n}" for n in dims)
    if coef.ndim != len(herm_dims):
        coef = coef.reshape(tuple(getattr(estimator.hermite_, "shape", coef.shape)))
    data_vars["hermite_coefficients"] = (
        herm_dims,
        coef,
        {
            "long_name": "coefficients of psi in the tensor-product cubic Hermite basis",
            "layout": "per axis: value and slope dofs of each Hermite node, as fpirl.hermite.HermiteSpace",
        },
    )
    if mdp is not None:
        for name, long_name in (
            ("q_value", "Q(s, a) = -psi"),
            ("policy", "Boltzmann policy pi(a | s)"),
            ("reward", "reward R(s, a) by the inverse Bellman equation"),
        ):
            value = getattr(mdp, name, None)
            if value is None:
                continue
            value = np.asarray(value, dtype=float)
            if value.shape != grid.shape:
                raise ValueError(f"mdp.{name} has shape {value.shape}, expected {grid.shape}")
            data_vars[name] = (dims, value, {"long_name": long_name})

    settings = dict(getattr(estimator, "settings_", {}) or {})
    if dt is None:
        dt = getattr(estimator, "dt_", None)
    if dt is None:
        dt = settings.get("dt")
    if gamma is None and mdp is not None:
        gamma = getattr(mdp, "gamma", None)
    herm_el = getattr(estimator.hermite_, "elements", None)
    attrs = {
        "title": "fpirl result",
        "beta": float(estimator.beta_),
        "dt": float(dt) if dt is not None else float("nan"),
        "gamma": float(gamma) if gamma is not None else float("nan"),
        "boundary": grid.boundary,
        "state_dims": ",".join(grid.names[i] for i in grid.state_axes),
        "action_dims": ",".join(grid.names[i] for i in grid.action_axes),
        "fe_elements": np.asarray(grid.elements, dtype=np.int64),
        "hermite_elements": np.asarray(np.broadcast_to(herm_el, (grid.ndim,)), dtype=np.int64)
        if herm_el is not None
        else np.zeros(grid.ndim, dtype=np.int64),
        "ridge": float(getattr(estimator, "ridge_", float("nan"))),
        "residual": float(getattr(estimator, "residual_", float("nan"))),
        "fpirl_version": _version(),
    }
    for key, value in settings.items():
        value = _attr_value(value)
        if value is not None:
            attrs[f"solver_{key}"] = value

    extra_attrs = {}
    for key, value in (extra or {}).items():
        if isinstance(value, xr.DataArray):
            data_vars[key] = value
        elif isinstance(value, np.ndarray) and value.shape == grid.shape:
            data_vars[key] = (dims, value)
        else:
            value = _attr_value(value)
            if value is not None:
                extra_attrs[key] = value
    attrs.update(extra_attrs)
    return xr.Dataset(data_vars, coords=grid_coords(grid), attrs=attrs)


def write_result(path, dataset: xr.Dataset) -> Path:
    """Write a result dataset to ``path`` (netCDF, atomically)."""
    return _to_netcdf_atomic(dataset, path)


def read_result(path) -> xr.Dataset:
    """Read and check a result dataset; returns the (loaded, closed) :class:`xarray.Dataset`.

    The FE grid of the result is available as ``grid_from_dataset(ds, 'potential')``.
    """
    path = Path(path)
    if data_kind(path) != "netcdf":
        raise FpirlInputError(f"a result must be a netCDF file (.nc), got {str(path)!r}")
    ds = _open_netcdf(path)
    if "potential" not in ds.data_vars:
        raise FpirlInputError(f"{str(path)!r} is not an fpirl result: no 'potential' variable")
    grid_from_dataset(ds, "potential")  # validates the coordinates
    missing = [k for k in ("beta", "boundary", "state_dims", "action_dims") if k not in ds.attrs]
    if missing:
        raise FpirlInputError(f"{str(path)!r} is not an fpirl result: missing attrs {', '.join(missing)}")
    return ds
