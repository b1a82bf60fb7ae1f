"""Fits per resolution and their errors against the ground truth."""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg

from ...core.density import DensitySnapshots
from ...core.grid import Grid
from ...core.hermite import HermiteSpace
from ...estimators.identify import PotentialEstimator
from ...evaluation.metrics import gradient_l2_error, kl_divergence, l2_error, policy_kl, relative_l2_error
from ...forward.markov import mdp_density_map
from ...mdp.recovery import recover_mdp
from ._data import initial_on_grid
from ._spec import ExperimentSpec


# --------------------------------------------------------------------------------------------
# metrics
# --------------------------------------------------------------------------------------------
def potential_errors(spec: ExperimentSpec, hermite: HermiteSpace, coef, eval_grid: Grid) -> dict:
    """Paper's L2 errors of psi (means removed) and of ``d psi / d s`` on ``eval_grid``."""
    coords = eval_grid.coords
    psi = hermite.evaluate_grid(coef, coords)
    psi_true = spec.hermite.evaluate_grid(spec.coef, coords)
    axes = eval_grid.state_axes
    g = hermite.gradient_grid(coef, coords, axes)
    g_true = spec.hermite.gradient_grid(spec.coef, coords, axes)
    return {
        "psi_error": l2_error(psi, psi_true, subtract_mean=True),
        "psi_relative_error": relative_l2_error(psi, psi_true, subtract_mean=True),
        "grad_error": gradient_l2_error(g, g_true),
        "grad_relative_error": gradient_l2_error(g, g_true, relative=True),
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
    mdp = recover_mdp(grid, psi, grad, spec.beta, spec.dt, spec.gamma, spec.transition_discretization, spec.reward)
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
                      est.beta_, spec.dt, spec.gamma, spec.transition_discretization, spec.reward)
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
    return l2_error(pa, pb, subtract_mean=True) / ref
