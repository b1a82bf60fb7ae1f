"""Ground-truth callables, initial densities and the cached FP PDE and MDP-map data."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...core._errors import FpirlInputError
from ...core.density import DensitySnapshots
from ...core.grid import Grid
from ...core.hermite import HermiteSpace
from ._spec import ExperimentSpec, json_default


# ground-truth callables that exploit tensor grids
# --------------------------------------------------------------------------------------------
def _tensor_coords(points: np.ndarray) -> list[np.ndarray] | None:
    """Per-axis coordinates if ``points`` (shape ``(n_1, ..., n_d, d)``) is a tensor mesh, else None."""
    d = points.shape[-1]
    if points.ndim != d + 1:
        return None
    coords = []
    for i in range(d):
        index = (0,) * i + (slice(None),) + (0,) * (d - 1 - i) + (i,)
        coords.append(np.array(points[index]))
    shape = [1] * d
    for i, c in enumerate(coords):
        s = list(shape)
        s[i] = -1
        if not np.array_equal(points[..., i], np.broadcast_to(c.reshape(s), points.shape[:-1])):
            return None
    return coords


_BLOCK = 20_000


@dataclass
class HermitePotential:
    """A Hermite potential as callables ``psi(points)`` and ``grad psi(points)``.

    Tensor meshes (as the forward solvers pass) are evaluated by sum factorisation; scattered
    points in blocks.
    """

    hermite: HermiteSpace
    coef: np.ndarray

    def __call__(self, points) -> np.ndarray:
        points = np.asarray(points, dtype=float)
        coords = _tensor_coords(points)
        if coords is not None:
            return self.hermite.evaluate_grid(self.coef, coords)
        flat = points.reshape(-1, points.shape[-1])
        out = np.concatenate([self.hermite.evaluate(self.coef, flat[i:i + _BLOCK])
                              for i in range(0, flat.shape[0], _BLOCK)] or [np.zeros(0)])
        return out.reshape(points.shape[:-1])

    def gradient(self, points) -> np.ndarray:
        points = np.asarray(points, dtype=float)
        coords = _tensor_coords(points)
        if coords is not None:
            return np.moveaxis(self.hermite.gradient_grid(self.coef, coords), 0, -1)
        flat = points.reshape(-1, points.shape[-1])
        out = np.concatenate([self.hermite.gradient(self.coef, flat[i:i + _BLOCK])
                              for i in range(0, flat.shape[0], _BLOCK)] or [np.zeros((0, points.shape[-1]))])
        return out.reshape(points.shape)


def boltzmann_initial_density(hermite: HermiteSpace, coef, beta: float, roles: Sequence[str],
                              rho0: Callable | None = None, quadrature_points: int = 8) -> Callable:
    r"""Initial density ``p_0(s, a) = rho_0(s) pi(a|s)`` with the Boltzmann policy of a Hermite potential.

    ``pi(a|s) = exp(-beta psi(s,a)) / Z(s)``, ``Z(s) = int_A exp(-beta psi(s,a')) da'``, the action
    integral by composite Gauss-Legendre (``quadrature_points`` per Hermite cell and action axis;
    ``psi`` is a cubic on each cell, so this is accurate to ~1e-10). The policy integrates to 1 in
    the continuum, not in a grid's trapezoid rule.

    Parameters
    ----------
    hermite, coef
        The potential.
    beta : float
    roles : sequence of {'state', 'action'}
    rho0 : callable, optional
        State density ``rho_0(states)`` for states of shape ``(..., d_s)``; default uniform
        ``1 / |S|``.
    quadrature_points : int

    Returns
    -------
    callable
        ``p0(points)`` for points of shape ``(..., d)``. The distinct values of each state
        coordinate are treated as a tensor grid of states (cheap for meshes; fine for a few
        thousand scattered points).
    """
    from ...core.quadrature import composite_rule

    roles = tuple(roles)
    state_axes = tuple(i for i, r in enumerate(roles) if r == "state")
    action_axes = tuple(i for i, r in enumerate(roles) if r == "action")
    if not state_axes or not action_axes:
        raise FpirlInputError("a Boltzmann initial density needs state and action axes")
    coef = np.asarray(coef, dtype=float).reshape(hermite.shape)
    potential = HermitePotential(hermite, coef)
    rules = {i: composite_rule(hermite.axes[i].breakpoints, quadrature_points) for i in action_axes}
    state_volume = float(np.prod([hermite.axes[i].upper - hermite.axes[i].lower for i in state_axes]))

    def log_partition(points):
        """log Z at every point's state (shape points.shape[:-1])."""
        uniq, inverse = [], []
        for i in state_axes:
            u, inv = np.unique(points[..., i], return_inverse=True)
            uniq.append(u)
            inverse.append(inv.reshape(points.shape[:-1]))
        if np.prod([u.size for u in uniq]) * np.prod([rules[i][0].size for i in action_axes]) > 5e7:
            raise FpirlInputError("too many distinct state values for the initial density (use a tensor grid)")
        coords = [None] * hermite.ndim
        for k, i in enumerate(state_axes):
            coords[i] = uniq[k]
        for i in action_axes:
            coords[i] = rules[i][0]
        logits = -beta * hermite.evaluate_grid(coef, coords)
        shift = logits.max(axis=action_axes, keepdims=True)
        z = np.exp(logits - shift)
        for i in sorted(action_axes, reverse=True):
            z = np.tensordot(z, rules[i][1], axes=([i], [0]))
        logz = np.log(z) + shift.reshape(z.shape)  # shape: state axes in order
        return logz[tuple(inverse)]

    def p0(points):
        points = np.asarray(points, dtype=float)
        logp = -beta * potential(points) - log_partition(points)
        states = points[..., list(state_axes)]
        rho = np.full(points.shape[:-1], 1.0 / state_volume) if rho0 is None else np.asarray(rho0(states), float)
        return rho * np.exp(logp)

    return p0


# --------------------------------------------------------------------------------------------
# data generation (cached)
# --------------------------------------------------------------------------------------------
def _cache_dir(spec: ExperimentSpec, cache_dir) -> Path:
    path = Path(cache_dir) / f"{spec.name}-{spec.data_key()}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _save_npy(path: Path, array: np.ndarray) -> None:
    from ...io.netcdf import atomic_path

    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.save(fh, array)


def _solver_points(spec: ExperimentSpec, elements: Sequence[int]):
    if spec.solver_points is not None:
        return spec.solver_points
    from ...forward import default_resolution

    return default_resolution(spec.grid(max(elements)))


def make_solver(spec: ExperimentSpec, points):
    """The independent forward solver of the spec's box at ``points`` per axis."""
    from ...forward import FiniteVolumeSolver, SpectralSolver

    psi = spec.potential
    if spec.boundary == "periodic":
        return SpectralSolver(spec.lower, spec.upper, points, psi.gradient, spec.beta,
                              max_step=spec.solver_max_step, workers=os.cpu_count())
    return FiniteVolumeSolver(spec.lower, spec.upper, points, psi, spec.beta)


def _points_tag(spec: ExperimentSpec, points) -> str:
    pts = np.broadcast_to(np.asarray(points, dtype=int), (spec.ndim,))
    return "x".join(str(int(m)) for m in pts)


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _write_json(path: Path, obj: dict) -> None:
    from ...io.netcdf import atomic_write

    atomic_write(path, lambda tmp: Path(tmp).write_text(json.dumps(obj, indent=1, default=json_default)))


def fp_solution(spec: ExperimentSpec, cache_dir, points, progress: bool = False):
    """Solve eq. ``fokker_planck_eq`` once on the solver's grid (cached as ``fp_solver_<points>.npy``).

    Returns
    -------
    solver, values (shape ``(steps + 1, *solver.shape)``), info (dict: ``cache_hit``,
    ``seconds``, ``solve_seconds``, ``tail_ratio``, ``internal_steps``, ``points``)
    """
    tag = _points_tag(spec, points)
    path = _cache_dir(spec, cache_dir) / f"fp_solver_{tag}.npy"
    meta_path = path.with_suffix(".json")
    info = {"points": tag, "path": str(path)}
    t0 = time.perf_counter()
    solver = make_solver(spec, points)
    if path.exists():
        values = np.load(path)
        info["cache_hit"] = True
        info.update({k: v for k, v in _read_json(meta_path).items() if k not in info})
    else:
        values = solver.solve(spec.initial, spec.times, progress=progress)
        _save_npy(path, values)
        info["cache_hit"] = False
        info["solve_seconds"] = time.perf_counter() - t0
        info["tail_ratio"] = float(getattr(solver, "tail_ratio", float("nan")))
        info["internal_steps"] = int(getattr(solver, "steps_taken", 0))
        _write_json(meta_path, {k: info[k] for k in ("solve_seconds", "tail_ratio", "internal_steps")})
    info["seconds"] = time.perf_counter() - t0
    return solver, values, info


def fp_data(grid: Grid, solver, values, times) -> tuple[DensitySnapshots, dict]:
    """FP solution brought onto ``grid`` with the solver's interpolant; negatives clipped, unit mass.

    Returns the snapshots and ``{'clipped_min': most negative value / max value (<= 0)}``.
    """
    q = solver.evaluate(values, grid.coords)
    scale = float(np.abs(q).max())
    clipped = float(min(q.min(), 0.0) / scale) if scale > 0 else 0.0
    q = np.maximum(q, 0.0)
    mass = grid.integrate(q)
    if np.any(mass <= 0):
        raise FpirlInputError("simulated density vanished on the grid nodes")
    q /= mass.reshape((-1,) + (1,) * grid.ndim)
    return DensitySnapshots(grid, times, q), {"clipped_min": clipped}


def initial_on_grid(spec: ExperimentSpec, grid: Grid) -> np.ndarray:
    """``spec.initial`` at the grid nodes, unit mass with the grid quadrature."""
    p0 = np.asarray(spec.initial(grid.mesh()), dtype=float)
    return p0 / float(grid.integrate(p0))


def mdp_map_data(spec: ExperimentSpec, grid: Grid, truth_mdp, progress: bool = False) -> DensitySnapshots:
    """MDP-map data (eq. ``density_evolution``) under the ground-truth policy and transition."""
    from ...forward.markov import mdp_density_map

    p = mdp_density_map(grid, truth_mdp.policy, truth_mdp.transition, initial_on_grid(spec, grid),
                        spec.steps, progress=progress)
    return DensitySnapshots(grid, spec.times, np.maximum(p, 0.0))


