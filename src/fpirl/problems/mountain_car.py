"""Modified Mountain Car (paper section 5.2): from the soft-optimal Q to a Fokker-Planck problem.

The entropy-regularised optimal Q of gymnasium's ``MountainCarContinuous-v0``
(:mod:`fpirl.problems.mountain_car_rl`) is normalised to ``[-1, 1]^3``, fitted onto the periodic
cubic Hermite basis by least squares (:func:`fit_q_hermite`), and ``psi_GT = -(scaled fitted Q)``,
with separate scales for its state and action parts, defines a Fokker-Planck problem
(:func:`mountain_car_spec`). The benchmark that runs it through the shared experiment pipeline is
:func:`fpirl.problems.mountain_car_report.run_mountaincar`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .mountain_car_rl import (ALPHA, GAMMA, MAX_POSITION, MAX_SPEED, MIN_POSITION,
                              MountainCarQ, SoftQSettings, load_or_solve_mountain_car, mountain_car_step,
                              rollout_gymnasium, solve_mountain_car)
from ..core.hermite import HermiteSpace
from .experiment import ExperimentSpec

__all__ = [
    "ALPHA",
    "GAMMA",
    "MountainCarQ",
    "QFit",
    "SoftQSettings",
    "fit_q_hermite",
    "load_or_solve_mountain_car",
    "mountain_car_spec",
    "mountain_car_step",
    "normalise",
    "rollout_gymnasium",
    "solve_mountain_car",
    "split_action_part",
]

PHYSICAL_LOWER = (MIN_POSITION, -MAX_SPEED, -1.0)
PHYSICAL_UPPER = (MAX_POSITION, MAX_SPEED, 1.0)
NORMALISED_LOWER = (-1.0, -1.0, -1.0)
NORMALISED_UPPER = (1.0, 1.0, 1.0)
MC_NAMES = ("position", "velocity", "force")
MC_ROLES = ("state", "state", "action")


def normalise(points) -> np.ndarray:
    """Map physical ``(x, v, a)`` (last axis) onto ``[-1, 1]^3``: ``2 (p - lower) / (upper - lower) - 1``."""
    lo, hi = np.array(PHYSICAL_LOWER), np.array(PHYSICAL_UPPER)
    return 2.0 * (np.asarray(points, dtype=float) - lo) / (hi - lo) - 1.0


@dataclass
class QFit:
    """Least-squares fit of Q onto the periodic Hermite space on the normalised box.

    Attributes
    ----------
    hermite : HermiteSpace
    coef : ndarray, shape hermite.shape
        Coefficients of the fitted Q (not mean-shifted).
    rms_error, relative_error, max_error : float
        Fit error on the soft-Q grid nodes: RMS, RMS / std(Q), max abs.
    """

    hermite: object
    coef: np.ndarray
    rms_error: float
    relative_error: float
    max_error: float


def fit_q_hermite(mq: MountainCarQ, hermite_elements=(8, 8, 2)) -> QFit:
    r"""Least-squares fit of the soft Q onto the periodic cubic Hermite basis of ``[-1, 1]^3``.

    With the 1-D collocation matrices ``B_b[p, i] = h_i(xi_{b,p})`` of the (normalised) node
    coordinates of the soft-Q grid, the tensor-grid least-squares problem

    .. math:: \min_c \big\| (B_1 \otimes B_2 \otimes B_3)\, c - \mathrm{vec}\, Q \big\|_2

    separates because ``(B_1 x B_2 x B_3)^+ = B_1^+ x B_2^+ x B_3^+``: ``c = Q x_1 B_1^+ x_2
    B_2^+ x_3 B_3^+`` (one 1-D pseudo-inverse per axis, applied by sum factorisation). The basis
    is periodic, so it identifies ``x = -1.2`` with ``x = 0.6``, ``v = -0.07`` with ``v = 0.07``
    and ``a = -1`` with ``a = 1``: the fit is a periodised, smoothed Q (the paper's construction).

    Parameters
    ----------
    mq : MountainCarQ
    hermite_elements : int or tuple of 3 int
        Periodic Hermite elements per normalised axis.

    Returns
    -------
    QFit
    """
    hermite = HermiteSpace(NORMALISED_LOWER, NORMALISED_UPPER, hermite_elements, periodic=True)
    coords = [np.linspace(-1.0, 1.0, n) for n in mq.q.shape]
    coef = mq.q
    for ax, x in zip(hermite.axes, coords):
        coef = np.tensordot(coef, np.linalg.pinv(ax.matrix(x)), axes=([0], [1]))
    err = hermite.evaluate_grid(coef, coords) - mq.q
    rms = float(np.sqrt(np.mean(err**2)))
    return QFit(hermite, coef, rms, rms / float(np.std(mq.q)), float(np.abs(err).max()))


#: Hermite elements per normalised axis (position, velocity, force) of psi_GT and of the inference
#: (the choice and the fit errors it costs: docs/benchmarks.md, "Modified Mountain Car").
MC_HERMITE_ELEMENTS = (4, 4, 2)
#: Range of the state part of psi_GT after scaling (see :func:`mountain_car_spec`).
MC_PSI_RANGE = 1.0
#: Inverse temperature of the FP problem: beta * (state range of psi) = 6 (as in the built-in
#: demo): the density concentrates visibly yet keeps mass everywhere, so psi stays identifiable.
MC_BETA = 6.0
#: Strength of the action dependence: the 90th percentile over the states of the policy contrast
#: ``beta (max_a psi - min_a psi)``. Q varies far more over the states than over the force, so one
#: scale for all of Q leaves the policy nearly uniform in the force (contrast at most 0.5); a
#: separate scale for the action part makes the ground-truth policy peaked (``pi_max / pi_min >=
#: e^3``) where the force matters most. The force dependence of Q varies ~50x over the states, so
#: the percentile keeps the sharpest states (contrast ~7) resolvable on the coarse grids.
MC_ACTION_CONTRAST = 3.0
MC_ACTION_CONTRAST_PERCENTILE = 90.0
#: Snapshot spacing = MDP step; 50 snapshots cover t in [0, 1].
MC_DT = 0.02
MC_STEPS = 50
#: ``--quick``: snapshots t = 0..0.5 (the cost of the FP data is linear in it).
MC_QUICK_STEPS = 25
#: FE elements per axis of the convergence study; ``--quick``.
MC_ELEMENTS = (10, 20, 30, 40, 50)
MC_QUICK_ELEMENTS = (10, 20)
#: Points per axis of the spectral FP solver (full run / quick).
MC_SOLVER_POINTS = 64
MC_QUICK_SOLVER_POINTS = 32
#: Coarser solver resolution compared with MC_SOLVER_POINTS on the finest grid (data accuracy).
MC_RESOLUTION_CHECK = 48
#: Soft-Q grid of the full run and of ``--quick`` / the tests.
MC_SOFTQ = SoftQSettings()
MC_QUICK_SOFTQ = SoftQSettings(n_position=91, n_velocity=71, n_action=11)


def physical_box_attrs() -> dict:
    """Result attrs that map the normalised box onto gymnasium's units: grid axis ``k`` with box
    ``[lower_k, upper_k]`` maps linearly onto ``[physical_lower[k], physical_upper[k]]``,
    ``p = physical_lower + (x - lower) (physical_upper - physical_lower) / (upper - lower)``
    (docs/formats.md; what :class:`fpirl.rl.gym.RecoveredPolicy` acts with)."""
    return {"physical_lower": np.array(PHYSICAL_LOWER), "physical_upper": np.array(PHYSICAL_UPPER),
            "physical_env": "MountainCarContinuous-v0"}


def split_action_part(qfit: QFit) -> tuple[np.ndarray, np.ndarray]:
    r"""Split the fitted Q into a state part and a zero-action-mean action part (both Hermite).

    .. math:: Q_s(s) = \frac{1}{|A|}\int_A Q_{fit}(s, a)\, da,\qquad Q_a(s, a) = Q_{fit}(s, a) - Q_s(s)

    The action mean is exact in the Hermite space: it contracts the force axis's coefficients with
    the integrals of its basis functions, and a function constant in the force has equal value
    dofs and zero slope dofs along that axis. Returns the coefficients ``(Q_s, Q_a)``, both of
    the shape of ``qfit.coef``.
    """
    hermite, coef = qfit.hermite, qfit.coef
    axis = hermite.axes[-1]
    mean = np.tensordot(coef, axis.integrals() / (axis.upper - axis.lower), axes=([coef.ndim - 1], [0]))
    q_state = np.zeros_like(coef)
    q_state[..., 0::2] = mean[..., None]
    return q_state, coef - q_state


def mountain_car_spec(qfit: QFit, beta: float = MC_BETA, dt: float = MC_DT, steps: int = MC_STEPS,
                      psi_range: float = MC_PSI_RANGE, action_contrast: float = MC_ACTION_CONTRAST,
                      solver_points=MC_SOLVER_POINTS, description: str = ""):
    r"""The :class:`~fpirl.problems.experiment.ExperimentSpec` of the modified Mountain Car.

    .. math:: \psi_{GT} = -\big(c_s\,(Q_s - \overline{Q_s}) + c_a\,Q_a\big)

    with the split of :func:`split_action_part`; ``c_s`` gives the state part the range
    ``psi_range`` and ``c_a`` makes the :data:`MC_ACTION_CONTRAST_PERCENTILE` percentile over the
    states of ``beta (max_a psi_GT - min_a psi_GT)`` equal ``action_contrast`` (ranges and
    percentiles on a 41^3 grid of the normalised periodic box ``[-1, 1]^3`` of position,
    velocity, force). Initial density ``p_0(s, a) =
    rho_0(s) pi_GT(a|s)`` with uniform ``rho_0`` (the paper's uniform start, section 5.1),
    inference in the same Hermite space with ``beta`` fixed.
    """
    hermite = qfit.hermite
    coords = [np.linspace(-1.0, 1.0, 41)] * 3
    q_state, q_action = split_action_part(qfit)
    qs = hermite.evaluate_grid(q_state, coords)
    qa = hermite.evaluate_grid(q_action, coords)
    c_s = float(psi_range) / float(qs.max() - qs.min())
    spread = np.percentile(qa.max(axis=2) - qa.min(axis=2), MC_ACTION_CONTRAST_PERCENTILE)
    c_a = float(action_contrast) / (float(beta) * float(spread))
    coef = -(c_s * hermite.remove_mean(q_state) + c_a * q_action)
    return ExperimentSpec.with_boltzmann_start(
        hermite=hermite, coef=coef, beta=beta, names=MC_NAMES, roles=MC_ROLES, name="mountaincar",
        title="Modified Mountain Car (paper section 5.2)", dt=float(dt), steps=int(steps),
        hermite_elements=tuple(hermite.elements), solver_points=solver_points,
        result_attrs=physical_box_attrs(),
        description=description or (
            f"psi_GT = -({c_s:.4g} (Q_s - mean) + {c_a:.4g} Q_a), Q_s(s) = force mean and Q_a = Q_fit - Q_s of "
            "Q_fit = least-squares fit of the soft-optimal Q of MountainCarContinuous-v0 onto the periodic Hermite "
            f"space {tuple(hermite.elements)} on the normalised box"
        ),
    )
