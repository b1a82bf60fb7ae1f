r"""Generic synthetic-experiment pipeline: known potential -> data -> fits -> metrics -> report.

Used by the Grid World benchmark (:mod:`fpirl.problems.gridworld`, paper section 5.1) and
reusable by other problems (Mountain Car). Given a ground-truth potential in a Hermite space
(:class:`ExperimentSpec`) and a list of finite-element resolutions ``N``, :func:`run_experiment`

1. makes two kinds of data on every ``N^d`` grid (DESIGN section 4), cached on disk:

   * **FP PDE data**: one accurate solve of eq. ``fokker_planck_eq`` with the independent
     forward solver (:class:`~fpirl.forward.SpectralSolver` on periodic boxes,
     :class:`~fpirl.forward.FiniteVolumeSolver` with walls) at a resolution of its own, cached
     once, then brought onto each grid with the solver's own interpolant (trigonometric, exact
     for the spectral representation; resp. the cubic spline). Tiny negative values of the
     interpolant (ringing, ~1e-6 of the maximum) are clipped to 0 and every snapshot is
     renormalised to unit mass with the grid's quadrature; the largest clipped value is reported;
   * **MDP-map data** (eq. ``density_evolution``): ``p_n = pi(a'|s') int int p_{n-1} T`` with the
     ground-truth policy and transition recovered on the grid itself (:func:`fpirl.mdp.recover_mdp`);

2. fits psi on each data set (beta fixed, :class:`~fpirl.identify.PotentialEstimator`), recovers
   Q, pi, T and R (:func:`fpirl.mdp.recover_mdp`);
3. measures (DESIGN section 5): the paper's L2 error of psi (each function's mean removed) and of
   ``d psi / d s`` on a fine evaluation grid, also relative to the standard deviation of the
   truth; ``KL(p_t || q_t)`` for ``t = 0..steps`` where ``p_t`` is the MDP-map evolution under the
   ground truth and ``q_t`` under the recovered policy and transition, both from the same
   ``p_0``; the per-state policy KL; the relative error of the reward;
4. writes ``result_N{N}.nc`` (fit on FP data) and ``result_N{N}_mdp.nc`` (fit on MDP-map data)
   following the result contract (DESIGN section 6), the figures and ``report.md``.

Conventions
-----------
* Gradient error: ``sqrt(mean_x sum_k (d_k psi - d_k psi_GT)^2)`` over the state axes ``k``
  (Euclidean norm of the gradient error, RMS over the evaluation grid); its relative version
  divides by the same norm of ``grad_s psi_GT`` (which has zero mean on a periodic box).
* Ground-truth MDP quantities use ``psi_GT`` with its mean removed, exactly like the fit (the
  reward depends on the additive constant of Q through ``(1 - gamma) c``).
* The initial density of the MDP map is ``spec.initial`` at the grid nodes, scaled to unit mass
  with the grid's quadrature.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.linalg

from .._errors import FpirlInputError
from ..density import DensitySnapshots
from ..grid import Grid
from ..hermite import HermiteSpace
from ..mdp import DEFAULT_GAMMA, recover_mdp

__all__ = [
    "ExperimentSpec",
    "HermitePotential",
    "boltzmann_initial_density",
    "fp_data",
    "fp_solution",
    "mdp_map_data",
    "potential_errors",
    "run_experiment",
]

#: KL(p_t || q_t) acceptance threshold relative to KL(p_T || p_0) (paper-faithful check at the finest N).
KL_RATIO_LIMIT = 0.10


# --------------------------------------------------------------------------------------------
# the experiment definition
# --------------------------------------------------------------------------------------------
@dataclass
class ExperimentSpec:
    """Everything that defines a synthetic experiment with a known potential.

    Attributes
    ----------
    name : str
        Short identifier (file names, cache directory).
    lower, upper, names, roles, boundary
        The joint state-action box, as for :class:`~fpirl.grid.Grid`.
    hermite : HermiteSpace
        Space of the ground-truth potential.
    coef : ndarray, shape hermite.shape
        Coefficients of ``psi_GT`` (any additive constant; errors remove the mean).
    beta, dt : float
        Inverse temperature and snapshot spacing (= MDP time step).
    steps : int
        Number of steps; snapshots at ``t_k = k dt``, ``k = 0..steps``.
    initial : callable
        Unnormalised initial joint density ``p_0(points)`` for points of shape ``(..., d)``.
    hermite_elements : int or tuple
        Hermite elements per axis of the inference.
    gamma : float
        Discount factor of the recovered reward.
    solver_points : int or tuple, optional
        Points per axis of the forward FP solver (spectral: collocation points; finite volumes:
        nodes including the walls). Default: :func:`fpirl.forward.default_resolution` of the
        finest grid.
    solver_max_step : float, optional
        Internal step of the spectral solver (default: its CFL choice).
    transition_discretization : {'nodal', 'projection'}
        Discretisation of ``T`` on the grids (:class:`fpirl.mdp.GaussianTransition`).
    eval_elements : int
        Points per axis of the evaluation grid of the L2 errors (uniform grid nodes).
    ridge : float, optional
        Relative Tikhonov weight of the fit (default: the estimator's).
    kl_zoom : (float, float), optional
        Step window of the zoomed KL panel (default ``(0.4 steps, steps)``, the paper's [20, 50]).
    figure_steps : tuple of int, optional
        Steps of the joint-density figure (default ``0, steps/2, steps``).
    title, description, initial_description : str
        Text for the report.
    """

    name: str
    lower: Sequence[float]
    upper: Sequence[float]
    names: Sequence[str]
    roles: Sequence[str]
    boundary: str
    hermite: HermiteSpace
    coef: np.ndarray
    beta: float
    dt: float
    steps: int
    initial: Callable[[np.ndarray], np.ndarray]
    hermite_elements: int | tuple = 4
    gamma: float = DEFAULT_GAMMA
    solver_points: int | tuple | None = None
    solver_max_step: float | None = None
    transition_discretization: str = "nodal"
    eval_elements: int = 20
    ridge: float | None = None
    kl_zoom: tuple | None = None
    figure_steps: tuple | None = None
    title: str = ""
    description: str = ""
    initial_description: str = ""

    def __post_init__(self):
        self.coef = np.asarray(self.coef, dtype=float).reshape(self.hermite.shape)
        if int(self.steps) != self.steps or self.steps < 1:
            raise FpirlInputError(f"steps must be a positive integer, got {self.steps}")
        self.steps = int(self.steps)
        if not (self.beta > 0 and self.dt > 0):
            raise FpirlInputError("beta and dt must be positive")
        if self.boundary not in ("periodic", "reflecting"):
            raise FpirlInputError(f"boundary must be 'periodic' or 'reflecting', got {self.boundary!r}")
        if self.hermite.periodic != (self.boundary == "periodic"):
            raise FpirlInputError("the ground-truth Hermite space must be periodic iff the box is")

    # --- derived --------------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.names)

    @property
    def times(self) -> np.ndarray:
        return self.dt * np.arange(self.steps + 1)

    def grid(self, elements) -> Grid:
        return Grid(self.lower, self.upper, elements, self.names, self.roles, self.boundary)

    @property
    def potential(self) -> HermitePotential:
        return HermitePotential(self.hermite, self.coef)

    def data_key(self) -> str:
        """Hash of everything the generated data depend on (the cache key)."""
        h = hashlib.sha256()
        h.update(np.ascontiguousarray(self.coef, dtype=np.float64).tobytes())
        meta = {
            "name": self.name, "lower": list(map(float, self.lower)), "upper": list(map(float, self.upper)),
            "names": list(self.names), "roles": list(self.roles), "boundary": self.boundary,
            "hermite": list(self.hermite.elements), "beta": float(self.beta), "dt": float(self.dt),
            "steps": self.steps, "solver_points": _jsonable(self.solver_points),
            "solver_max_step": self.solver_max_step, "transition": self.transition_discretization,
        }
        h.update(json.dumps(meta, sort_keys=True).encode())
        probe = self.grid(5).mesh()  # the initial density is a callable: hash its values on a probe grid
        h.update(np.ascontiguousarray(np.asarray(self.initial(probe), dtype=np.float64)).tobytes())
        return h.hexdigest()[:16]


def _jsonable(value):
    if value is None:
        return None
    return np.asarray(value).tolist()


# --------------------------------------------------------------------------------------------
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
    from ..quadrature import composite_rule

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
    from ..io import atomic_path

    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.save(fh, array)


def _solver_points(spec: ExperimentSpec, elements: Sequence[int]):
    if spec.solver_points is not None:
        return spec.solver_points
    from ..forward import default_resolution

    return default_resolution(spec.grid(max(elements)))


def make_solver(spec: ExperimentSpec, points):
    """The independent forward solver of the spec's box at ``points`` per axis."""
    from ..forward import FiniteVolumeSolver, SpectralSolver

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
    from ..io import atomic_write

    atomic_write(path, lambda tmp: Path(tmp).write_text(json.dumps(obj, indent=1, default=_json_default)))


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
    from ..simulate import mdp_density_map

    p = mdp_density_map(grid, truth_mdp.policy, truth_mdp.transition, initial_on_grid(spec, grid),
                        spec.steps, progress=progress)
    return DensitySnapshots(grid, spec.times, np.maximum(p, 0.0))


# --------------------------------------------------------------------------------------------
# metrics
# --------------------------------------------------------------------------------------------
def _grad_norm_error(g, g_true) -> tuple[float, float]:
    """(RMS Euclidean norm of g - g_true, same relative to the RMS norm of g_true); leading axis = components."""
    err = float(np.sqrt(np.mean(np.sum((g - g_true) ** 2, axis=0))))
    ref = float(np.sqrt(np.mean(np.sum(g_true**2, axis=0))))
    return err, (err / ref if ref > 0 else float("nan"))


def potential_errors(spec: ExperimentSpec, hermite: HermiteSpace, coef, eval_grid: Grid) -> dict:
    """Paper's L2 errors of psi (means removed) and of ``d psi / d s`` on ``eval_grid``."""
    from ..metrics import l2_error, relative_l2_error

    coords = eval_grid.coords
    psi = hermite.evaluate_grid(coef, coords)
    psi_true = spec.hermite.evaluate_grid(spec.coef, coords)
    axes = eval_grid.state_axes
    g = hermite.gradient_grid(coef, coords, axes)
    g_true = spec.hermite.gradient_grid(spec.coef, coords, axes)
    ge, gr = _grad_norm_error(g, g_true)
    return {
        "psi_error": l2_error(psi, psi_true, subtract_mean=True),
        "psi_relative_error": relative_l2_error(psi, psi_true, subtract_mean=True),
        "grad_error": ge,
        "grad_relative_error": gr,
    }


@dataclass
class _Truth:
    """Ground truth on one FE grid."""

    grid: Grid
    psi: np.ndarray  # zero mean over the domain
    mdp: object
    p0: np.ndarray


def _truth_on_grid(spec: ExperimentSpec, grid: Grid) -> _Truth:
    coef0 = spec.hermite.remove_mean(spec.coef)
    psi = spec.hermite.evaluate_grid(coef0, grid.coords)
    grad = spec.hermite.gradient_grid(coef0, grid.coords, grid.state_axes)
    mdp = recover_mdp(grid, psi, grad, spec.beta, spec.dt, spec.gamma, spec.transition_discretization)
    return _Truth(grid, psi, mdp, initial_on_grid(spec, grid))


@dataclass
class FitOutcome:
    """One fit (one N, one data kind) with its recovered MDP, simulated densities and numbers."""

    estimator: object
    mdp: object
    q: np.ndarray  # MDP-map evolution under the recovered model, (steps + 1, *grid.shape)
    kl: np.ndarray  # KL(p_t || q_t)
    policy_kl: np.ndarray  # per state
    metrics: dict = field(default_factory=dict)


def fit_and_evaluate(spec: ExperimentSpec, snapshots: DensitySnapshots, truth: _Truth, p_ref: np.ndarray,
                     eval_grid: Grid, progress: bool = False) -> FitOutcome:
    """Fit psi on ``snapshots`` (beta fixed), recover the MDP and compute every metric.

    ``p_ref`` is the MDP-map evolution under the ground truth (the KL reference).
    """
    from ..identify import PotentialEstimator
    from ..metrics import kl_divergence, policy_kl, relative_l2_error
    from ..simulate import mdp_density_map

    grid = snapshots.grid
    t0 = time.perf_counter()
    est = PotentialEstimator(hermite_elements=spec.hermite_elements, beta=spec.beta, ridge=spec.ridge,
                             progress=progress)
    with warnings.catch_warnings(record=True) as caught:
        # On coarse grids (fewer FE nodes than Hermite coefficients) the normal matrix is singular
        # up to the ridge and scipy warns; recorded as a number instead of printed.
        warnings.simplefilter("always", scipy.linalg.LinAlgWarning)
        est.fit(snapshots)
    ill = [w for w in caught if issubclass(w.category, scipy.linalg.LinAlgWarning)]
    for w in caught:
        if not issubclass(w.category, scipy.linalg.LinAlgWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    fit_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    mdp = recover_mdp(grid, est.potential_on_grid(grid), est.gradient_on_grid(grid, axes=grid.state_axes),
                      est.beta_, spec.dt, spec.gamma, spec.transition_discretization)
    q = mdp_density_map(grid, mdp.policy, mdp.transition, truth.p0, spec.steps)
    kl = np.atleast_1d(kl_divergence(p_ref, q, grid))
    kl_ref = float(kl_divergence(p_ref[-1], p_ref[0], grid))
    pkl = policy_kl(truth.mdp.policy, mdp.policy, grid)
    state_w = grid.integrate(np.ones(grid.shape), axes=grid.action_axes)
    m = potential_errors(spec, est.hermite_, est.coef_, eval_grid)
    m.update({
        "residual": float(est.residual_),
        "ill_conditioned": bool(ill),
        "n_coef": int(est.hermite_.n_coef),
        "n_nodes": int(grid.size),
        "kl_max": float(kl.max()),
        "kl_final": float(kl[-1]),
        "kl_reference": kl_ref,
        "kl_ratio": float(kl.max() / kl_ref) if kl_ref > 0 else float("nan"),
        "policy_kl_mean": float(np.sum(state_w * pkl) / np.sum(state_w)),
        "policy_kl_max": float(pkl.max()),
        "reward_relative_error": relative_l2_error(mdp.reward, truth.mdp.reward),
        "fit_seconds": fit_seconds,
        "evaluate_seconds": time.perf_counter() - t0,
    })
    return FitOutcome(est, mdp, q, kl, pkl, m)


def _fit_difference(spec: ExperimentSpec, a, b, eval_grid: Grid) -> float:
    """RMS difference of two fitted potentials (means removed) relative to the std of psi_GT."""
    pa = a.hermite_.evaluate_grid(a.coef_, eval_grid.coords)
    pb = b.hermite_.evaluate_grid(b.coef_, eval_grid.coords)
    ref = float(np.std(spec.hermite.evaluate_grid(spec.coef, eval_grid.coords)))
    return float(np.sqrt(np.mean(((pa - pa.mean()) - (pb - pb.mean())) ** 2)) / ref)


def _slope(N, err) -> float:
    N, err = np.asarray(N, float), np.asarray(err, float)
    ok = np.isfinite(err) & (err > 0)
    if ok.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(N[ok]), np.log(err[ok]), 1)[0])


# --------------------------------------------------------------------------------------------
# outputs
# --------------------------------------------------------------------------------------------
def _write_result(path: Path, spec: ExperimentSpec, outcome: FitOutcome, truth: _Truth, data_kind: str,
                  data_info: dict) -> Path:
    import xarray as xr

    from ..io import result_dataset, write_result

    grid = truth.grid
    state_dims = tuple(grid.names[i] for i in grid.state_axes)
    extra = {
        "potential_true": truth.psi,
        "q_value_true": truth.mdp.q_value,
        "policy_true": truth.mdp.policy,
        "reward_true": truth.mdp.reward,
        "kl_divergence": xr.DataArray(outcome.kl, dims=("time",), coords={"time": spec.times},
                                      attrs={"long_name": "KL(p_t || q_t), MDP map under truth vs recovered model"}),
        "policy_kl": xr.DataArray(outcome.policy_kl, dims=state_dims,
                                  attrs={"long_name": "KL(pi_GT(.|s) || pi_hat(.|s))"}),
        "experiment": spec.name,
        "data_kind": data_kind,
        "transition_discretization": spec.transition_discretization,
    }
    for k, v in {**outcome.metrics, **data_info}.items():
        if isinstance(v, (bool, int, float, np.floating, np.integer, str)):
            extra[f"metric_{k}"] = v
    ds = result_dataset(outcome.estimator, mdp=outcome.mdp, extra=extra, dt=spec.dt, gamma=spec.gamma)
    return write_result(path, ds)


def _nested_figure(grid: Grid, panels, path: Path, suptitle: str, cmap="viridis", shared=True, ncols=None):
    """Nested-grid images (outer s1, s2; inner a1, a2) side by side; ``panels = [(title, values), ...]``."""
    from matplotlib.figure import Figure

    from ..io import atomic_path
    from ..plotting import _draw_field

    ncols = len(panels) if ncols is None else ncols
    nrows = int(np.ceil(len(panels) / ncols))
    fig = Figure(figsize=(5.2 * ncols, 4.4 * nrows), layout="constrained")
    axes = np.atleast_1d(fig.subplots(nrows, ncols)).ravel()
    vals = np.concatenate([np.ravel(v) for _, v in panels])
    vlim = (float(np.nanmin(vals)), float(np.nanmax(vals))) if shared else None
    for ax, (title, values) in zip(axes, panels):
        _draw_field(fig, ax, grid, values, title, cmap=cmap, vlim=vlim)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    fig.suptitle(suptitle, fontsize=10)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    return path


def _convergence_figure(Ns, curves: dict, fit_range, path: Path, ylabel: str) -> Path:
    """Log-log errors vs N (all points) with the least-squares line over ``fit_range`` and its slope."""
    from matplotlib.figure import Figure

    from ..io import atomic_path

    fig = Figure(figsize=(5.4, 4.2), layout="constrained")
    ax = fig.subplots()
    Ns = np.asarray(Ns, float)
    sel = np.isin(Ns, fit_range)
    for i, (label, err) in enumerate(curves.items()):
        err = np.asarray(err, float)
        ax.plot(Ns, err, "o-", color=f"C{i}", label=label)
        k = _slope(Ns[sel], err[sel])
        if np.isfinite(k):
            c = np.polyfit(np.log(Ns[sel]), np.log(err[sel]), 1)
            xs = np.linspace(Ns[sel].min(), Ns[sel].max(), 20)
            ax.plot(xs, np.exp(np.polyval(c, np.log(xs))), "--", color=f"C{i}", alpha=0.7,
                    label=f"fit N = {int(Ns[sel].min())}..{int(Ns[sel].max())}: slope {k:.2f}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(Ns)
    ax.set_xticklabels([str(int(n)) for n in Ns])
    ax.minorticks_off()
    ax.set_xlabel("FE elements per axis N")
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    return path


def _figures(spec: ExperimentSpec, outdir: Path, N: int, truth: _Truth, fit: FitOutcome, p_ref, eval_grid,
             Ns, table, fit_range) -> dict:
    from ..plotting import plot_kl, plot_potential_comparison

    grid = truth.grid
    files = {}
    if grid.ndim in (3, 4):
        psi_hat = fit.mdp.q_value * -1.0
        files["q_value"] = _nested_figure(
            grid, [("ground-truth Q = -psi_GT", truth.mdp.q_value), ("FP-IRL inferred Q = -psi", -psi_hat)],
            outdir / f"fig_q_value_N{N}.png", f"{spec.name}: Q-function, N = {N} (zero mean)")
        files["reward"] = _nested_figure(
            grid, [("ground-truth reward", truth.mdp.reward), ("FP-IRL inferred reward", fit.mdp.reward)],
            outdir / f"fig_reward_N{N}.png", f"{spec.name}: reward, N = {N}, gamma = {spec.gamma:g}", cmap="coolwarm")
        files["policy"] = _nested_figure(
            grid, [("ground-truth policy", truth.mdp.policy), ("FP-IRL inferred policy", fit.mdp.policy)],
            outdir / f"fig_policy_N{N}.png", f"{spec.name}: policy pi(a|s), N = {N}", cmap="magma")
        steps = spec.figure_steps or (0, spec.steps // 2, spec.steps)
        panels = [(f"data (MDP map, truth) t = {k}", p_ref[k]) for k in steps]
        panels += [(f"simulated (recovered model) t = {k}", fit.q[k]) for k in steps]
        files["density"] = _nested_figure(grid, panels, outdir / f"fig_density_N{N}.png",
                                          f"{spec.name}: joint density p_t, N = {N}", cmap="viridis",
                                          ncols=len(steps))
        psi_true_eval = spec.hermite.evaluate_grid(spec.hermite.remove_mean(spec.coef), eval_grid.coords)
        psi_eval = fit.estimator.hermite_.evaluate_grid(fit.estimator.coef_, eval_grid.coords)
        files["potential"] = plot_potential_comparison(
            eval_grid, psi_true_eval, psi_eval - psi_eval.mean(), outdir / f"fig_potential_N{N}.png",
            title=f"{spec.name}: psi on the {spec.eval_elements}^{grid.ndim} evaluation grid, fit on FP data, N = {N}")
    zoom = spec.kl_zoom or (round(0.4 * spec.steps), spec.steps)
    files["kl"] = plot_kl(np.arange(spec.steps + 1), fit.kl, outdir / f"fig_kl_N{N}.png", zoom=zoom,
                          label=f"KL(p_t || q_t), fit on FP data, N = {N}")
    if len(Ns) >= 2:
        files["convergence_psi"] = _convergence_figure(
            Ns, {"psi, FP data": [table[n]["fp"]["psi_error"] for n in Ns],
                 "psi, MDP-map data": [table[n]["mdp"]["psi_error"] for n in Ns]},
            fit_range, outdir / "fig_convergence_psi.png", "L2 error of psi")
        files["convergence_grad"] = _convergence_figure(
            Ns, {"d psi / d s, FP data": [table[n]["fp"]["grad_error"] for n in Ns],
                 "d psi / d s, MDP-map data": [table[n]["mdp"]["grad_error"] for n in Ns]},
            fit_range, outdir / "fig_convergence_grad.png", "L2 error of d psi / d s")
    return {k: Path(v).name for k, v in files.items()}


def _fmt(x, pct=False) -> str:
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "n/a"
    if pct:
        return f"{100 * x:.2f}%"
    return f"{x:.3e}" if (abs(x) < 1e-2 or abs(x) >= 1e4) and x != 0 else f"{x:.4f}"


def _state_length(spec: ExperimentSpec) -> float:
    return min(float(u) - float(lo) for u, lo, r in zip(spec.upper, spec.lower, spec.roles) if r == "state")


def _report(spec: ExperimentSpec, summary: dict) -> str:
    Ns = summary["elements"]
    per = summary["per_N"]
    data = summary["data"]
    L = []
    L.append(f"# {spec.title or spec.name}: FP-IRL benchmark report\n")
    L.append("## Setting\n")
    L.append(f"* Ground truth: {spec.description}" if spec.description else "* Ground truth: see the spec")
    L.append(f"* Domain {list(spec.lower)} .. {list(spec.upper)}, {spec.boundary}; axes "
             + ", ".join(f"{n} ({r})" for n, r in zip(spec.names, spec.roles)))
    L.append(f"* beta = {spec.beta:g} (fixed in the fit), dt = {spec.dt:g}, snapshots t = 0..{spec.steps}, "
             f"gamma = {spec.gamma:g}, transition discretisation '{spec.transition_discretization}'")
    L.append(f"* Initial density: {spec.initial_description or 'spec.initial'}")
    L.append(f"* Inference: Hermite elements {spec.hermite_elements} per axis (same space as psi_GT), "
             f"FE grids N = {', '.join(map(str, Ns))} elements per axis")
    n_coef = per[Ns[0]]["fp"]["n_coef"]
    few = [n for n in Ns if per[n]["fp"]["n_nodes"] < n_coef]
    L.append(f"* Identifiability: psi has {n_coef} Hermite coefficients; "
             + (f"grids with fewer FE nodes than that (N = {', '.join(map(str, few))}) have fewer test functions per "
                "snapshot than unknowns, the normal matrix is then singular up to the ridge (scipy warns: "
                "'ill-conditioned'), and psi is only weakly identified where the data carry little mass, so large "
                "errors there are expected." if few else "every grid has more FE nodes than that."))
    L.append(f"* Errors: paper's L2 norm (RMS) on the {spec.eval_elements}^{spec.ndim} evaluation grid; psi with "
             "each function's mean removed; relative = divided by the std of psi_GT (resp. the RMS norm of "
             "grad_s psi_GT). Gradient error = RMS of the Euclidean norm of the error of d psi / d s.")
    L.append("")
    L.append("## Data\n")
    fp = data["fp_solver"]
    how = ("all grid data were cached, the solution was not even loaded" if fp.get("not_loaded")
           else "loaded from the cache" if fp["cache_hit"] else "solved in this run")
    L.append(f"* FP PDE data: {fp.get('solver', 'forward solver')} with {fp['points']} points, solved once "
             f"({float(fp.get('solve_seconds', float('nan'))):.1f} s, {fp.get('internal_steps', '?')} internal steps; "
             f"{how}), "
             f"spectral tail ratio {_fmt(fp.get('tail_ratio'))} (largest Fourier amplitude with |k| > M/3 relative "
             "to the mean; psi_GT is only C^1, so the spectrum decays algebraically); brought onto each grid by the solver's interpolant (trigonometric: exact "
             "for the spectral representation). Negative values of the interpolant are clipped to 0 and every "
             "snapshot renormalised to unit mass (grid quadrature); largest clipped value relative to the maximum "
             "per N: " + ", ".join(f"N={n}: {_fmt(per[n]['fp_clipped_min'])}" for n in Ns) + ".")
    if "resolution_check" in data:
        rc = data["resolution_check"]
        L.append(f"* Resolution check of the FP data on the N = {rc['N']} grid: max |p(M={rc['coarse']}) - "
                 f"p(M={rc['fine']})| / max p = {_fmt(rc['relative_max_difference'])}.")
    L.append("* MDP-map data: eq. density_evolution with the ground-truth policy and transition on each grid "
             "(p_0 = initial density at the nodes, unit mass).")
    L.append(f"* Cache: `{data['cache_dir']}`; hits this run: {data['cache_hits']} of {data['cache_lookups']}.")
    L.append("")
    L.append("## Results\n")
    hdr = ("| N | data | psi error | psi rel. | dpsi/ds error | dpsi/ds rel. | residual | max_t KL(p_t‖q_t) | "
           "KL(p_T‖p_0) | ratio | policy KL mean | policy KL max | reward rel. err | fit s |")
    L.append(hdr)
    L.append("|" + "---|" * (hdr.count("|") - 1))
    for n in Ns:
        for kind, label in (("fp", "FP PDE"), ("mdp", "MDP map")):
            m = per[n][kind]
            L.append(f"| {n} | {label} | {_fmt(m['psi_error'])} | {_fmt(m['psi_relative_error'], True)} | "
                     f"{_fmt(m['grad_error'])} | {_fmt(m['grad_relative_error'], True)} | {_fmt(m['residual'])} | "
                     f"{_fmt(m['kl_max'])} | {_fmt(m['kl_reference'])} | {_fmt(m['kl_ratio'], True)} | "
                     f"{_fmt(m['policy_kl_mean'])} | {_fmt(m['policy_kl_max'])} | "
                     f"{_fmt(m['reward_relative_error'], True)} | {m['fit_seconds']:.1f} |")
    L.append("")
    sl = summary["slopes"]
    fr = sl["fit_range"]
    L.append(f"Least-squares slopes of log(error) vs log(N) over N = {', '.join(map(str, fr))} (grids with at least "
             f"as many FE nodes as Hermite coefficients): FP data psi {_fmt(sl['fp_psi'])}, d psi/d s "
             f"{_fmt(sl['fp_grad'])}; MDP-map data psi {_fmt(sl['mdp_psi'])}, d psi/d s {_fmt(sl['mdp_grad'])}. "
             f"Over all N: FP psi {_fmt(sl['fp_psi_all_N'])}, d psi/d s {_fmt(sl['fp_grad_all_N'])}; MDP-map psi "
             f"{_fmt(sl['mdp_psi_all_N'])}, d psi/d s {_fmt(sl['mdp_grad_all_N'])}.")
    L.append("")
    n_last = Ns[-1]
    curve = summary["kl_curve_fp"]
    every = max(1, spec.steps // 10)
    L.append(f"KL(p_t ‖ q_t) at N = {n_last} (fit on FP data), maximum {max(curve):.3e} at t = "
             f"{int(np.argmax(curve))}; every {every} steps: "
             + ", ".join(f"t={k}: {curve[k]:.2e}" for k in range(0, len(curve), every))
             + f". Reference KL(p_{spec.steps} ‖ p_0) = {per[n_last]['fp']['kl_reference']:.3e}.")
    L.append("")
    L.append("## Acceptance checks\n")
    for item in summary["acceptance"]:
        L.append(f"* [{'x' if item['passed'] else ' '}] {item['check']}: {item['value']}")
    L.append("")
    L.append("## MDP-map data: the error floor\n")
    mdp_rel = [per[n]["mdp"]["psi_relative_error"] for n in Ns]
    fp_rel = [per[n]["fp"]["psi_relative_error"] for n in Ns]
    diff = [per[n]["mdp_fp_difference"] for n in Ns]
    L.append("| N | psi rel. error, FP data | psi rel. error, MDP-map data | ‖psi_MDP − psi_FP‖ / std(psi_GT) |")
    L.append("|---|---|---|---|")
    for n, a, b, c in zip(Ns, fp_rel, mdp_rel, diff):
        L.append(f"| {n} | {_fmt(a, True)} | {_fmt(b, True)} | {_fmt(c, True)} |")
    L.append("")
    L.append(f"The fit on FP data converges to psi_GT, so the distance between the two fits estimates the limit of the "
             f"MDP-map fit as N grows: the error floor of MDP-map data is about {_fmt(diff[-1], True)} of std(psi_GT) "
             f"(at N = {Ns[-1]}; the MDP-map error itself is {_fmt(mdp_rel[-1], True)} there and decreases ever more "
             "slowly). On the coarsest grids the nodal Gaussian kernel (standard deviation sqrt(2 dt / beta) = "
             f"{np.sqrt(2 * spec.dt / spec.beta):.3g}, below half the node spacing for N < "
             f"{int(np.ceil(_state_length(spec) / (2 * np.sqrt(2 * spec.dt / spec.beta))))}) hardly moves "
             "mass between nodes, so the MDP-map data there barely evolve (tiny KL(p_T || p_0)). The MDP map (eq. density_evolution) is not an exact "
             "solution of the joint FP PDE: after each step the actions are re-drawn from pi(a'|s'), i.e. they "
             "re-equilibrate instantly instead of relaxing with the FP dynamics, and the Gaussian transition of one "
             "step differs from the FP flow by O(dt) terms. The VSI regression fits the FP PDE, so refining the grid "
             "removes only the discretisation error and the error stalls at this model mismatch (DESIGN section 4). "
             "Convergence studies therefore use FP PDE data; the MDP map is the reference for the KL checks.")
    L.append("")
    L.append("## Timings\n")
    tm = summary["timings"]
    L.append("| stage | seconds |\n|---|---|")
    for k, v in tm.items():
        L.append(f"| {k} | {v:.1f} |")
    L.append("")
    L.append("## Figures\n")
    for k, f in summary["figures"].items():
        L.append(f"### {k}\n\n![{k}]({f})\n")
    L.append("## Files\n")
    for n in Ns:
        L.append(f"* `result_N{n}.nc` (fit on FP data), `result_N{n}_mdp.nc` (fit on MDP-map data)")
    return "\n".join(L) + "\n"


# --------------------------------------------------------------------------------------------
# the pipeline
# --------------------------------------------------------------------------------------------
def run_experiment(spec: ExperimentSpec, elements: Sequence[int], outdir, cache_dir=None,
                   progress: bool = True, verbose: bool = True, resolution_check: int | None = None) -> dict:
    """Run the whole experiment (data, fits, metrics, result files, figures, report).

    Parameters
    ----------
    spec : ExperimentSpec
    elements : sequence of int
        FE elements per axis, one grid per value (sorted ascending).
    outdir : path
        Output directory (created).
    cache_dir : path, optional
        Data cache (default ``outdir / 'cache'``); a second run with the same spec reuses the FP
        solution and the per-grid data.
    progress, verbose : bool
        tqdm bars; one status line per stage.
    resolution_check : int, optional
        Also solve at this coarser solver resolution and report the largest difference of the FP
        data on the finest grid (the accuracy of the data).

    Returns
    -------
    dict
        ``elements``, ``per_N`` ({N: {'fp': metrics, 'mdp': metrics, ...}}), ``slopes``,
        ``acceptance`` (list of {check, value, passed}), ``kl_curve_fp`` (finest N), ``data``
        (solver info, cache hits), ``timings``, ``figures``, ``files``.
    """
    from tqdm.auto import tqdm

    from ..io import atomic_write

    t_start = time.perf_counter()
    Ns = sorted({int(n) for n in np.atleast_1d(elements)})
    if not Ns or Ns[0] < 2:
        raise FpirlInputError(f"need element counts >= 2, got {[int(n) for n in np.atleast_1d(elements)]}")
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    cache_dir = outdir / "cache" if cache_dir is None else Path(cache_dir)
    cdir = _cache_dir(spec, cache_dir)

    def say(msg):
        if verbose:
            (tqdm.write if progress else print)(f"fpirl benchmark {spec.name}: {msg}")

    timings = {"FP solve (or cache load)": 0.0}
    cache = {"lookups": 0, "hits": 0}
    points = _solver_points(spec, Ns)
    tag = _points_tag(spec, points)
    fp_state: dict = {}

    def solution():
        """The FP solution on the solver grid, solved or loaded only when a grid's data are missing."""
        if "values" not in fp_state:
            t0 = time.perf_counter()
            say(f"FP PDE data: solving once at {tag} points (cached in {cdir}) ...")
            with warnings.catch_warnings():
                # psi_GT is only C^1 (cubic Hermite), so its spectrum decays algebraically and the
                # solver's resolution heuristic fires although the data error is far below the fit
                # error (measured: resolution_check, benchmarks/bench_gridworld.py).
                warnings.filterwarnings("ignore", message="spectral solution may be under-resolved")
                solver, values, info = fp_solution(spec, cache_dir, points, progress=progress)
            info["solver"] = type(solver).__name__
            fp_state.update(solver=solver, values=values, info=info)
            cache["lookups"] += 1
            cache["hits"] += int(info["cache_hit"])
            timings["FP solve (or cache load)"] += time.perf_counter() - t0
        return fp_state["solver"], fp_state["values"]

    def cached(path: Path, make):
        cache["lookups"] += 1
        meta = path.with_suffix(".json")
        if path.exists() and meta.exists():
            cache["hits"] += 1
            from ..io import read_density

            return read_density(path), _read_json(meta)
        from ..io import write_density

        snaps, info = make()
        write_density(path, snaps)
        _write_json(meta, info)
        return snaps, info

    def make_fp(grid):
        solver, values = solution()
        return fp_data(grid, solver, values, spec.times)

    data_info = {"cache_dir": str(cdir)}
    if resolution_check:
        t0 = time.perf_counter()
        solver, values = solution()
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="spectral solution may be under-resolved")
            s2, sol2, _ = fp_solution(spec, cache_dir, resolution_check, progress=progress)
        g = spec.grid(Ns[-1])
        a, b = solver.evaluate(values, g.coords), s2.evaluate(sol2, g.coords)
        data_info["resolution_check"] = {
            "N": Ns[-1], "fine": tag, "coarse": _points_tag(spec, resolution_check),
            "relative_max_difference": float(np.abs(a - b).max() / np.abs(a).max()),
        }
        del sol2, a, b
        timings["resolution check"] = time.perf_counter() - t0

    eval_grid = spec.grid(spec.eval_elements)
    per_N, outcomes = {}, {}
    t_data = t_fit = 0.0
    bar = tqdm(Ns, desc=f"{spec.name} sweep", unit="grid", disable=not progress)
    for N in bar:
        bar.set_postfix(N=N)
        grid = spec.grid(N)
        t0 = time.perf_counter()
        solve0 = timings["FP solve (or cache load)"]
        truth = _truth_on_grid(spec, grid)
        fp_snap, info = cached(cdir / f"fp_N{N}_M{tag}.nc", lambda g=grid: make_fp(g))
        mdp_snap, _ = cached(cdir / f"mdp_N{N}.nc",
                             lambda g=grid, t=truth: (mdp_map_data(spec, g, t.mdp), {}))
        info = {f"fp_{k}": v for k, v in info.items()}
        t_data += time.perf_counter() - t0 - (timings["FP solve (or cache load)"] - solve0)
        p_ref = mdp_snap.values
        res, fits = {}, {}
        for kind, snaps in (("fp", fp_snap), ("mdp", mdp_snap)):
            t0 = time.perf_counter()
            say(f"N = {N}: fitting on {'FP PDE' if kind == 'fp' else 'MDP-map'} data ...")
            out = fit_and_evaluate(spec, snaps, truth, p_ref, eval_grid, progress=progress)
            suffix = "" if kind == "fp" else "_mdp"
            _write_result(outdir / f"result_N{N}{suffix}.nc", spec, out, truth, kind,
                          {"fp_clipped_min": info["fp_clipped_min"]} if kind == "fp" else {})
            res[kind] = out.metrics
            fits[kind] = out.estimator
            t_fit += time.perf_counter() - t0
            if kind == "fp":
                outcomes[N] = (truth, out, p_ref)
            say(f"N = {N} ({kind}): psi rel. error {100 * out.metrics['psi_relative_error']:.2f}%, "
                f"d psi/ds rel. error {100 * out.metrics['grad_relative_error']:.2f}%, "
                f"KL ratio {100 * out.metrics['kl_ratio']:.2f}%")
        res.update(info)
        res["mdp_fp_difference"] = _fit_difference(spec, fits["fp"], fits["mdp"], eval_grid)
        per_N[N] = res
        # keep only what the figures need (finest grid)
        for n in list(outcomes):
            if n != N:
                del outcomes[n]
    bar.close()
    timings["data on the grids (interpolation / MDP map, or cache load)"] = t_data
    timings["fits + MDP recovery + metrics + result files"] = t_fit

    identified = [n for n in Ns if per_N[n]["fp"]["n_nodes"] >= per_N[n]["fp"]["n_coef"]]
    fit_range = identified if len(identified) >= 2 else Ns
    slopes = {}
    for kind in ("fp", "mdp"):
        for q in ("psi", "grad"):
            slopes[f"{kind}_{q}"] = _slope(fit_range, [per_N[n][kind][f"{q}_error"] for n in fit_range])
            slopes[f"{kind}_{q}_all_N"] = _slope(Ns, [per_N[n][kind][f"{q}_error"] for n in Ns])
    slopes["fit_range"] = fit_range
    N_last = Ns[-1]
    truth, fit, p_ref = outcomes[N_last]
    t0 = time.perf_counter()
    figures = _figures(spec, outdir, N_last, truth, fit, p_ref, eval_grid, Ns, per_N, fit_range)
    timings["figures"] = time.perf_counter() - t0

    fp_psi = [per_N[n]["fp"]["psi_error"] for n in Ns]
    fp_grad = [per_N[n]["fp"]["grad_error"] for n in Ns]
    acceptance = [
        {"check": f"FP data: psi error decreases monotonically over N = {', '.join(map(str, Ns))}",
         "value": ", ".join(_fmt(e) for e in fp_psi), "passed": bool(np.all(np.diff(fp_psi) < 0))},
        {"check": f"FP data: d psi/d s error decreases monotonically over N = {', '.join(map(str, Ns))}",
         "value": ", ".join(_fmt(e) for e in fp_grad), "passed": bool(np.all(np.diff(fp_grad) < 0))},
        {"check": f"FP data: relative psi error at N = {N_last} <= 12%",
         "value": _fmt(per_N[N_last]["fp"]["psi_relative_error"], True),
         "passed": bool(per_N[N_last]["fp"]["psi_relative_error"] <= 0.12)},
        {"check": f"FP data, N = {N_last}: max_t KL(p_t || q_t) < {KL_RATIO_LIMIT:.0%} of KL(p_{spec.steps} || p_0)",
         "value": _fmt(per_N[N_last]["fp"]["kl_ratio"], True),
         "passed": bool(per_N[N_last]["fp"]["kl_ratio"] < KL_RATIO_LIMIT)},
    ]
    timings["total"] = time.perf_counter() - t_start
    solver_info = fp_state.get("info") or {
        "points": tag, "cache_hit": True, "not_loaded": True,
        "solver": "SpectralSolver" if spec.boundary == "periodic" else "FiniteVolumeSolver"}
    if "solve_seconds" not in solver_info:
        solver_info.update(_read_json(cdir / f"fp_solver_{tag}.json"))
    data_info.update({"fp_solver": solver_info, "cache_hits": cache["hits"], "cache_lookups": cache["lookups"]})
    summary = {
        "experiment": spec.name,
        "elements": Ns,
        "per_N": per_N,
        "slopes": slopes,
        "acceptance": acceptance,
        "kl_curve_fp": [float(v) for v in fit.kl],
        "data": data_info,
        "timings": timings,
        "figures": figures,
        "files": {"results": [f"result_N{n}.nc" for n in Ns] + [f"result_N{n}_mdp.nc" for n in Ns],
                  "report": "report.md", "summary": "summary.json"},
    }
    report = _report(spec, summary)
    atomic_write(outdir / "report.md", lambda tmp: Path(tmp).write_text(report))
    atomic_write(outdir / "summary.json",
                 lambda tmp: Path(tmp).write_text(json.dumps(summary, indent=1, default=_json_default)))
    say(f"wrote {outdir / 'report.md'} ({timings['total']:.1f} s)")
    return summary


def _json_default(obj):
    if isinstance(obj, (np.floating, np.integer)):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    return str(obj)
