r"""Soft (entropy-regularised) control on the grid of a fitted model: solve and evaluate.

With temperature ``1 / beta``, discount ``gamma`` and a transition ``T`` on a joint state-action
:class:`~fpirl.core.grid.Grid` (:class:`fpirl.mdp.GaussianTransition`), the MDP is a **continuing**
task (no terminal state). For a policy ``pi``:

.. math::

    V^\pi(s) = \int_A \pi(a|s)\big[R(s,a) - \beta^{-1}\log\pi(a|s) + \gamma\, E_{s'\sim T(\cdot|s,a)}V^\pi(s')\big]da,
    \qquad Q^\pi(s,a) = R(s,a) + \gamma\, E_{s'\sim T(\cdot|s,a)} V^\pi(s'),

and the soft-optimal ``Q*`` solves ``Q* = R + gamma E[V*(s')]``, ``V*(s) = beta^-1 log int_A
exp(beta Q*(s,a)) da``, with the optimal policy ``pi* = exp(beta (Q* - V*))``. Action integrals
are the grid's trapezoid quadrature, state expectations :meth:`GaussianTransition.expect`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core._errors import FpirlInputError
from ..core.grid import Grid
from ..core.validation import _check_gamma, _expand_state, _nodal, _positive, _state_weights, state_shape
from ..mdp.recovery import soft_state_value
from ..mdp.transition import GaussianTransition
from .soft_q import soft_value_iteration
from scipy.sparse.linalg import LinearOperator, gmres

__all__ = ["PolicyEvaluation", "SoftSolution", "evaluate_policy", "soft_optimal_policy", "solve_soft"]

#: dense linear solve of policy evaluation up to this many states (else GMRES on the operator)
_DENSE_STATES = 4096


@dataclass
class PolicyEvaluation:
    """Value of a policy (:func:`evaluate_policy`).

    Attributes
    ----------
    value : ndarray, shape state_shape
        ``V^pi(s)`` (entropy-regularised unless ``entropy=False``).
    q : ndarray, shape grid.shape
        ``Q^pi(s, a) = R + gamma E[V^pi(s')]``.
    mean_return : float
        ``J = int rho0 V^pi ds / int rho0 ds`` (``rho0`` uniform by default).
    """

    value: np.ndarray
    q: np.ndarray
    mean_return: float


@dataclass
class SoftSolution:
    """Soft-optimal control of a reward (:func:`solve_soft`).

    Attributes
    ----------
    q, policy : ndarray, shape grid.shape
        ``Q*`` and ``pi* = exp(beta (Q* - V*))`` (normalised in the action quadrature).
    value : ndarray, shape state_shape
        ``V* = beta^-1 log int exp(beta Q*) da``.
    method : str
    iterations : int
    error_bound : float
        Sup-norm change of ``Q`` in the last iteration (policy iteration) or the a posteriori
        bound ``gamma / (1 - gamma) ||Q_k - Q_{k-1}||`` (value iteration).
    """

    q: np.ndarray
    policy: np.ndarray
    value: np.ndarray
    method: str
    iterations: int
    error_bound: float


def soft_optimal_policy(grid: Grid, q, beta: float) -> np.ndarray:
    r"""Boltzmann policy ``pi(a|s) = exp(beta (Q(s,a) - V(s)))`` with ``V`` the soft value of ``Q``."""
    v = soft_state_value(grid, q, beta)
    return np.exp(_positive(beta, "beta") * (np.asarray(q, dtype=float) - _expand_state(grid, v)))


def _action_weights(grid: Grid) -> np.ndarray:
    w = np.ones(())
    for i in grid.action_axes:
        w = np.multiply.outer(w, grid.axes[i].node_weights)
    return w


def _check(grid, reward, transition, gamma):
    if transition.grid != grid:
        raise FpirlInputError("the transition was built on a different grid")
    reward = _nodal(grid, reward, "reward")
    if not np.all(np.isfinite(reward)):
        raise FpirlInputError("reward has non-finite values")
    return reward, _check_gamma(gamma)


def evaluate_policy(grid: Grid, policy, reward, transition: GaussianTransition, beta: float, gamma: float,
                    rho0=None, entropy: bool = True) -> PolicyEvaluation:
    r"""Entropy-regularised value of a policy and its mean return (module docstring).

    Solves the linear policy-evaluation equation ``(I - gamma P_pi) V = r_pi`` with
    ``r_pi(s) = int pi (R - beta^-1 log pi) da`` (``entropy=False``: without the entropy term) and
    ``(P_pi V)(s) = int pi(a|s) E[V(s')|s,a] da``: a dense solve on the policy's state kernel
    (:meth:`GaussianTransition.state_kernel`) up to 4,096 states, GMRES above.

    Parameters
    ----------
    grid : Grid
    policy, reward : array_like, shape grid.shape
        ``pi(a|s)`` (normalised in the action quadrature) and ``R(s, a)``.
    transition : GaussianTransition
    beta : float
        Inverse temperature (weight ``1 / beta`` of the entropy).
    gamma : float
        Discount in ``[0, 1)``.
    rho0 : array_like, shape state_shape, optional
        Start-state weights of the mean return ``J`` (default uniform).
    entropy : bool
        Include the entropy bonus ``beta^-1 H(pi(.|s))``.

    Returns
    -------
    PolicyEvaluation
    """
    reward, gamma = _check(grid, reward, transition, gamma)
    beta = _positive(beta, "beta")
    policy = _nodal(grid, policy, "policy")
    acts = grid.action_axes
    with np.errstate(divide="ignore", invalid="ignore"):
        logp = np.where(policy > 0, np.log(np.where(policy > 0, policy, 1.0)), 0.0)
    r_pi = grid.integrate(policy * (reward - (logp / beta if entropy else 0.0)), axes=acts)
    ss = state_shape(grid)
    n_s = int(np.prod(ss))
    if n_s <= _DENSE_STATES:
        m = transition.state_kernel(policy).reshape(n_s, n_s) * _state_weights(grid).reshape(1, -1)
        value = np.linalg.solve(np.eye(n_s) - gamma * m, r_pi.ravel()).reshape(ss)
    else:

        def matvec(x):
            x = np.asarray(x).reshape(ss)
            return (x - gamma * grid.integrate(policy * transition.expect(x), axes=acts)).ravel()

        op = LinearOperator((n_s, n_s), matvec=matvec, dtype=float)
        sol, info = gmres(op, r_pi.ravel(), rtol=1e-12, atol=0.0, restart=200, maxiter=50)
        if info != 0:
            raise FpirlInputError(f"policy evaluation (GMRES) did not converge (info {info})")
        value = sol.reshape(ss)
    q = reward + gamma * transition.expect(value)
    w = _state_weights(grid) * (np.ones(ss) if rho0 is None else np.asarray(rho0, dtype=float))
    return PolicyEvaluation(value, q, float(np.sum(w * value) / np.sum(w)))


def solve_soft(grid: Grid, reward, transition: GaussianTransition, beta: float, gamma: float,
               method: str = "policy", tol: float = 1e-9, max_iter: int | None = None) -> SoftSolution:
    r"""Soft-optimal control of ``reward`` under ``transition`` (module docstring).

    * ``'policy'`` (default): soft policy iteration. Evaluate ``pi_k`` exactly
      (:func:`evaluate_policy`), improve ``pi_{k+1} = exp(beta (Q^{pi_k} - V(Q^{pi_k})))``,
      starting from the uniform policy, until ``||Q^{pi_{k+1}} - Q^{pi_k}||_inf <= tol max(1, ||Q||_inf)``
      (relative where ``|Q|`` is large: ``Q`` grows like ``R / (1 - gamma)`` and the exact evaluation's rounding
      with it, so an absolute 1e-9 was out of reach at ``gamma = 0.99999``). Each step does not decrease the soft
      value; it converges in a few tens of steps.
    * ``'value'``: soft value iteration ``Q_{k+1} = R + gamma E[V_k(s')]``
      (:func:`fpirl.rl.soft_q.soft_value_iteration`), a ``gamma``-contraction, until
      ``gamma / (1 - gamma) ||Q_{k+1} - Q_k||_inf <= tol``.

    Both solve the same equation and agree to ``tol`` (test).

    Parameters
    ----------
    grid : Grid
    reward : array_like, shape grid.shape
    transition : GaussianTransition
    beta : float
        Inverse temperature (temperature ``1 / beta``).
    gamma : float
        Discount in ``[0, 1)``.
    method : {'policy', 'value'}
    tol : float
    max_iter : int, optional
        Default 200 (policy iteration) or 200,000 (value iteration).

    Returns
    -------
    SoftSolution
    """
    reward, gamma = _check(grid, reward, transition, gamma)
    beta = _positive(beta, "beta")
    if method == "value":
        sol = soft_value_iteration(reward, transition.expect, _action_weights(grid), 1.0 / beta, gamma,
                                   action_axes=grid.action_axes, tol=tol, max_iter=max_iter or 200_000)
        q = sol.q
        return SoftSolution(q, soft_optimal_policy(grid, q, beta), soft_state_value(grid, q, beta), "value",
                            sol.iterations, sol.error_bound)
    if method != "policy":
        raise FpirlInputError(f"method must be 'policy' or 'value', got {method!r}")
    acts = grid.action_axes
    policy = np.ones(grid.shape) / _expand_state(grid, grid.integrate(np.ones(grid.shape), axes=acts))
    q_old, delta = None, np.inf
    for k in range(1, (max_iter or 200) + 1):
        q = evaluate_policy(grid, policy, reward, transition, beta, gamma).q
        policy = soft_optimal_policy(grid, q, beta)
        if q_old is not None:
            delta = float(np.max(np.abs(q - q_old)))
            if delta <= tol * max(1.0, float(np.max(np.abs(q)))):
                break
        q_old = q
    else:
        raise FpirlInputError(f"soft policy iteration did not converge in {k} iterations (change {delta:.3g})")
    return SoftSolution(q, policy, soft_state_value(grid, q, beta), "policy", k, delta)
