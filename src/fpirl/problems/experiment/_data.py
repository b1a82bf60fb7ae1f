"""Ground-truth callables, initial densities and the cached FP PDE and MDP-map data."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ...core._errors import FpirlInputError
from ...core.density import DensitySnapshots
from ...core.grid import Grid
from ._spec import ExperimentSpec, json_default
from ._truth import HermitePotential, boltzmann_initial_density  # noqa: F401 (re-exported)
from ...forward import FiniteVolumeSolver, SpectralSolver, default_resolution
from ...forward.markov import mdp_density_map
from ...io.netcdf import atomic_path, atomic_write


# --------------------------------------------------------------------------------------------
# data generation (cached)
# --------------------------------------------------------------------------------------------
def _cache_dir(spec: ExperimentSpec, cache_dir) -> Path:
    path = Path(cache_dir) / f"{spec.name}-{spec.data_key()}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _save_npy(path: Path, array: np.ndarray) -> None:
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.save(fh, array)


def _solver_points(spec: ExperimentSpec, elements: Sequence[int]):
    if spec.solver_points is not None:
        return spec.solver_points

    return default_resolution(spec.grid(max(elements)))


def make_solver(spec: ExperimentSpec, points):
    """The independent forward solver of the spec's box at ``points`` per axis."""
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
    p = mdp_density_map(grid, truth_mdp.policy, truth_mdp.transition, initial_on_grid(spec, grid),
                        spec.steps, progress=progress)
    return DensitySnapshots(grid, spec.times, np.maximum(p, 0.0))


