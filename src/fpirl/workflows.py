"""End-to-end steps behind the CLI: recover the MDP of a fit, simulate a fitted model forward and
compare simulated with observed densities. No I/O here (a result is read back into a model by
:func:`fpirl.io.model_from_result`)."""

from __future__ import annotations

import numpy as np
from scipy.interpolate import RegularGridInterpolator

from .core._errors import FpirlInputError
from .core.density import DensitySnapshots
from .core.grid import Grid, into_box, wrap_into
from .io.netcdf import FittedModel, model_from_result  # noqa: F401 (model_from_result: re-exported, it lived here)
from .mdp.recovery import DEFAULT_GAMMA, MDP, boltzmann_policy, recover_mdp, recover_mdp_from_fit  # noqa: F401 (re-exported)
from .evaluation.metrics import kl_divergence
from .forward.markov import mdp_density_map
from .forward import simulate_density
import pandas as pd
from .forward.track_paths import sample_joint_tracks, sample_velocity_tracks
from .estimators.mobility import Mobility
from .estimators.track_noise import TrackNoise
from .tracks.result_attrs import table_columns

MODELS = ("mdp", "fp")
#: The most values a simulation holds (snapshots x nodes, or track rows x columns): 2 GB of float64.
MAX_SIMULATED_VALUES = 250_000_000


def _check_size(values: int, what: str) -> None:
    """A one-line error before a simulation that would hold more than :data:`MAX_SIMULATED_VALUES` values."""
    if values > MAX_SIMULATED_VALUES:
        raise FpirlInputError(f"the simulation would hold {values:.3g} values ({8 * values / 1e9:.3g} GB), more than "
                              f"{MAX_SIMULATED_VALUES:.3g}: {what}")


def nodal_interpolant(grid: Grid, values: np.ndarray):
    """Multilinear interpolant of nodal values (wrapped on periodic grids), a callable of points."""
    coords, vals = list(grid.coords), np.asarray(values, dtype=float)
    if grid.periodic:
        coords = [np.append(c, a.upper) for c, a in zip(coords, grid.axes)]
        vals = np.pad(vals, [(0, 1)] * grid.ndim, mode="wrap")
    interp = RegularGridInterpolator(coords, vals, bounds_error=False, fill_value=None)

    def f(points):
        pts = np.asarray(points, dtype=float)
        if grid.periodic:
            pts = wrap_into(pts, grid.lower, grid.upper)
        return np.clip(interp(pts.reshape(-1, grid.ndim)), 0.0, None).reshape(pts.shape[:-1])

    return f


def default_initial(model: FittedModel) -> np.ndarray:
    """The paper's start ``p_0(s, a) = pi(a|s) / |S|`` (uniform states), or uniform without actions."""
    grid = model.grid
    if grid.state_axes and grid.action_axes:
        psi = model.hermite.evaluate_grid(model.coef, grid.coords)
        p0 = boltzmann_policy(grid, psi, model.beta)
    else:
        p0 = np.ones(grid.shape)
    return p0 / grid.integrate(p0)


def simulate_model(model: FittedModel, steps: int, kind: str = "mdp", initial=None, progress=False) -> DensitySnapshots:
    """Evolve a density ``steps`` snapshots of ``model.dt`` forward.

    ``kind='mdp'``: eq. density_evolution with the recovered pi and T; ``kind='fp'``: the
    Fokker-Planck equation (eq. fokker_planck_eq) by :func:`fpirl.forward.simulate_density`.
    """
    if kind not in MODELS:
        raise FpirlInputError(f"model must be 'mdp' or 'fp', got {kind!r}")
    if int(steps) != steps or steps < 1:
        raise FpirlInputError(f"steps must be a positive integer, got {steps}")
    grid = model.grid
    p0 = default_initial(model) if initial is None else np.asarray(initial, dtype=float)
    if p0.shape != grid.shape:
        raise FpirlInputError(f"initial density has shape {p0.shape}, the model grid {grid.shape}")
    if not np.all(np.isfinite(p0)) or np.any(p0 < 0) or not grid.integrate(p0) > 0:
        raise FpirlInputError("initial density must be finite, non-negative and of positive mass")
    p0 = p0 / grid.integrate(p0)
    _check_size((int(steps) + 1) * grid.size, f"fewer steps (at most {MAX_SIMULATED_VALUES // grid.size - 1} "
                f"snapshots of {grid.size} nodes)")
    times = model.dt * np.arange(steps + 1)
    if kind == "mdp":
        if not (grid.state_axes and grid.action_axes):
            raise FpirlInputError("the MDP model needs state and action axes; use --model fp")
        psi = model.hermite.evaluate_grid(model.coef, grid.coords)
        grad_s = model.hermite.gradient_grid(model.coef, grid.coords, grid.state_axes)
        mdp = recover_mdp(grid, psi, grad_s, model.beta, model.dt)
        values = mdp_density_map(grid, mdp.policy, mdp.transition, p0, steps, progress=progress)
    else:
        values = simulate_density(grid, model.potential, model.gradient, model.beta,
                                  nodal_interpolant(grid, p0), times, progress=progress)
        values[0] = p0
    return DensitySnapshots(grid, times, np.clip(values, 0.0, None))


def compare_snapshots(data: DensitySnapshots, sim: DensitySnapshots) -> tuple[np.ndarray, np.ndarray]:
    """``(times, KL(p_data,t || q_t))`` over the snapshots the two series share (same grid, same dt)."""
    if data.grid != sim.grid:
        raise FpirlInputError(f"grids differ: data {data.grid!r}, simulation {sim.grid!r}")
    if not np.isclose(data.dt, sim.dt, rtol=1e-6):
        raise FpirlInputError(f"time steps differ: data dt={data.dt:g}, simulation dt={sim.dt:g}")
    n = min(data.n_times, sim.n_times)
    p = data.normalized().values[:n]
    q = sim.normalized().values[:n]
    # unit-mass densities: KL >= 0 (Gibbs); rounding left -4e-17 where they agree
    return data.times[:n] - data.times[0], np.maximum(np.asarray(kl_divergence(p, q, data.grid)), 0.0)


def kl_reference(data: DensitySnapshots) -> float:
    """``KL(p_last || p_first)`` of the data: how far the observed density moves over the run.

    The scale for :func:`compare_snapshots`: a model that explains the data keeps
    ``KL(p_data,t || q_t)`` well below it (the benchmarks accept < 10%).
    """
    p = data.normalized().values
    return max(float(kl_divergence(p[-1], p[0], data.grid)), 0.0)


# --------------------------------------------------------------------------------------------
# tracks from a result fitted on a track table (``fpirl simulate --tracks``)
# --------------------------------------------------------------------------------------------
def result_table_columns(attrs) -> dict:
    """``{track, time, state: [...], action: 'velocity' | [...] | None, stride}`` recorded by ``fpirl fit`` on a
    table (:func:`fpirl.tracks.result_attrs.table_columns`, the lists split)."""
    cols = table_columns(attrs)
    if any(cols[k] is None for k in ("track", "time", "state")):
        raise FpirlInputError("the result was not fitted on a track table (no table columns in its attrs); "
                              "comparing or simulating tracks needs one")
    cols["state"] = [c for c in cols["state"].split(",") if c]
    act = cols["action"]
    cols["action"] = None if act is None else ("velocity" if act.strip() == "velocity" else act.split(","))
    return cols


def _default_starts(ds, model: FittedModel, n: int, rng) -> tuple[np.ndarray, str]:
    """``(points, what)``: ``n`` start points drawn on the FE nodes (node weights), jittered in a cell, from the
    data's occupation density (the result's ``data_density``, the observations deposited on the nodes) where the
    result has it, else from ``exp(-beta psi)``. The fitted model's stationary law can sit where the data have few
    tracks (a potential tilted by a drift the box cuts off): on T cells its starts lay in one corner of the field."""
    grid = model.grid
    density = ds.data_vars.get("data_density") if hasattr(ds, "data_vars") else None
    w = None
    if density is not None and tuple(density.dims) == tuple(grid.names):
        w = np.clip(np.nan_to_num(np.asarray(density.values, dtype=float)), 0.0, None) * grid.node_weights()
        what = "the data's occupation density (data_density) on the result's grid"
    if w is None or not w.sum() > 0:
        psi = model.hermite.evaluate_grid(model.coef, grid.coords)
        w = np.exp(-model.beta * (psi - psi.min())) * grid.node_weights()
        what = "exp(-beta psi) on the result's grid"
    idx = rng.choice(w.size, size=n, p=(w / w.sum()).ravel())
    x = grid.mesh().reshape(-1, grid.ndim)[idx] + (rng.random((n, grid.ndim)) - 0.5) * grid.spacing
    return into_box(x, grid.lower, grid.upper, grid.periodic), what


def simulate_track_table(ds, n_tracks: int, steps: int, rng=0, start=None):
    r"""Sample ``n_tracks`` tracks of ``steps`` transitions from a result fitted on a track table.

    Velocity actions: the kinematic model of :func:`fpirl.forward.track_paths.sample_velocity_tracks`;
    otherwise the Euler-Maruyama step of the joint SDE :math:`dx = -\nabla\psi\,dt + \sqrt{2/\beta}\,dW`
    (eq. ``SDE``) with step ``dt`` by :func:`fpirl.forward.track_paths.sample_joint_tracks`; both with the
    fitted ``psi``, ``beta``, ``dt`` and, when the result has them, the mobility ``g`` (attrs
    ``mobility_*``), the second lag (attr ``second_lag_rho``) and the per-track noise scale (attrs
    ``track_noise_*``, a scale drawn per simulated track): the one-step model that
    ``fpirl evaluate`` scores (:func:`fpirl.evaluation.heldout.fpirl_loglik`).

    Parameters
    ----------
    ds : xarray.Dataset
        A result written by ``fpirl fit`` on a table (its ``table_*`` attrs name the columns).
    n_tracks, steps : int
    rng : int or numpy.random.Generator
    start : TrackTable, optional
        Observed tracks (same axes): the starts are the first observations of its segments, drawn
        at random (without replacement while there are enough). Default: points drawn from the data's
        occupation density (the result's ``data_density``), or from ``exp(-beta psi)`` where the result has none.

    Returns
    -------
    pandas.DataFrame
        Long format with the result's column names (track, time, states, explicit actions), so
        ``read_tracks`` with the same columns reads it back; ``attrs['starts']`` says where the starts came
        from. Velocity tracks get ``steps + 2`` positions (the first one, ``s_0 - a_0 dt``, carries the initial
        velocity).
    """


    if int(n_tracks) != n_tracks or n_tracks < 1 or int(steps) != steps or steps < 1:
        raise FpirlInputError(f"need a positive number of tracks and steps, got {n_tracks} and {steps}")
    rng = np.random.default_rng(rng)
    cols = result_table_columns(ds.attrs)
    model = model_from_result(ds)
    grid = model.grid
    _check_size((int(steps) + 2) * int(n_tracks) * (grid.ndim + 2), "fewer tracks or steps")
    if start is not None:
        if tuple(start.names) != grid.names:
            raise FpirlInputError(f"the start tracks have axes {', '.join(start.names)}, the result "
                                  f"{', '.join(grid.names)}")
        first = np.flatnonzero(np.diff(start.segment, prepend=-1) != 0)  # first row of every segment
        x0 = start.values[rng.choice(first, size=int(n_tracks), replace=int(n_tracks) > first.size)]
        starts = "first observations of the given tracks"
    else:
        x0, starts = _default_starts(ds, model, int(n_tracks), rng)
    S = list(grid.state_axes)
    mobility = Mobility.from_attrs(ds.attrs, grid.names)
    rho = ds.attrs.get("second_lag_rho")
    rho = None if rho is None else float(np.asarray(rho).reshape(()))
    noise = TrackNoise.from_attrs(ds.attrs)
    if cols["action"] == "velocity":
        pos = sample_velocity_tracks(model.gradient, model.beta, model.dt, x0, steps, grid.lower, grid.upper,
                                     grid.boundary, rng, mobility, rho, noise)
        first = x0[:, :len(S)] - x0[:, len(S):] * model.dt
        if grid.periodic:
            first = wrap_into(first, grid.lower[S], grid.upper[S])
        paths, names = np.concatenate([first[None], pos]), cols["state"]
    else:
        paths = sample_joint_tracks(model.gradient, model.beta, model.dt, x0, steps, grid.lower, grid.upper,
                                    grid.boundary, rng, mobility, rho, noise)
        names = cols["state"] + (cols["action"] or [])
    frames, n, _ = paths.shape
    data = {cols["track"]: np.tile(np.arange(n), frames), cols["time"]: np.repeat(model.dt * np.arange(frames), n)}
    data.update({c: paths[..., k].ravel() for k, c in enumerate(names)})
    out = pd.DataFrame(data).sort_values([cols["track"], cols["time"]], kind="stable").reset_index(drop=True)
    out.attrs["starts"] = starts  # where the starts were drawn (for the command's message)
    return out
