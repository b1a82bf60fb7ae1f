r"""Entropy-regularised (soft) value iteration on a tensor grid of actions.

The soft Bellman optimality equation with temperature ``alpha = 1 / beta`` and discount
``gamma`` (Haarnoja et al. 2017/2018; what soft actor-critic approximates with neural networks):

.. math::

    Q(s, a) = R(s, a) + \gamma\, E_{s' \sim T(\cdot|s,a)}\big[(1 - d(s'))\, V(s')\big],
    \qquad
    V(s) = \alpha \log \int_A \exp\big(Q(s, a) / \alpha\big)\, da,

with ``d(s') = 1`` for terminal next states. Its unique fixed point (a ``gamma``-contraction in
the sup norm) is the optimal soft Q-function; the optimal policy is the Boltzmann policy

.. math:: \pi^*(a|s) = \exp\big((Q(s,a) - V(s)) / \alpha\big),

a probability density over ``A`` (``int_A pi da = 1``). The action integral is a quadrature with
given non-negative weights (trapezoid weights of the action nodes), evaluated by a log-sum-exp so
that it is stable for any ``Q / alpha``.

The expectation over the next state is problem specific and passed in as a callable: a Gaussian
kernel for the Grid World (:mod:`fpirl.problems.free_energy`), an interpolation matrix at the
deterministic next state for Mountain Car (:mod:`fpirl.problems.mountain_car_rl`). It is the
forward (RL) solver the benchmarks use to make ground truths; the inverse method does not need it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..core._errors import FpirlInputError
from ..core._progress import progress_bar

__all__ = ["SoftQSolution", "soft_policy", "soft_state_value", "soft_value_iteration"]


def _action_log_weights(q_shape, action_weights: np.ndarray, action_axes: Sequence[int]) -> np.ndarray:
    """log of the quadrature weights, broadcastable to ``q_shape`` (action axes last or anywhere)."""
    w = np.asarray(action_weights, dtype=float)
    if w.ndim != len(action_axes) or any(w.shape[k] != q_shape[ax] for k, ax in enumerate(action_axes)):
        raise FpirlInputError(
            f"action weights of shape {w.shape} do not match the action axes {tuple(action_axes)} of {q_shape}"
        )
    if np.any(w < 0) or not np.all(np.isfinite(w)) or w.sum() <= 0:
        raise FpirlInputError("action weights must be finite, non-negative and not all zero")
    shape = [1] * len(q_shape)
    for k, ax in enumerate(action_axes):
        shape[ax] = w.shape[k]
    with np.errstate(divide="ignore"):
        return np.log(w).reshape(shape)


def soft_state_value(q, action_weights, alpha: float, action_axes: Sequence[int] = (-1,)) -> np.ndarray:
    r"""Soft state value ``V(s) = alpha log int_A exp(Q(s,a)/alpha) da`` by log-sum-exp.

    .. math:: V(s) = m(s) + \alpha \log \sum_j w_j \exp\big((Q(s,a_j) - m(s))/\alpha\big),
              \quad m(s) = \max_j Q(s, a_j)

    Parameters
    ----------
    q : ndarray
        Q-function on a tensor grid.
    action_weights : ndarray
        Quadrature weights of the action nodes, shape of the action axes of ``q``.
    alpha : float
        Temperature, > 0.
    action_axes : sequence of int
        Axes of ``q`` that are actions.

    Returns
    -------
    ndarray
        ``q`` with the action axes removed.
    """
    q = np.asarray(q, dtype=float)
    axes = tuple(ax % q.ndim for ax in action_axes)
    logw = _action_log_weights(q.shape, action_weights, axes)
    m = q.max(axis=axes, keepdims=True)
    s = np.sum(np.exp((q - m) / alpha + logw), axis=axes, keepdims=True)
    return np.squeeze(m + alpha * np.log(s), axis=axes)


def soft_policy(q, action_weights, alpha: float, action_axes: Sequence[int] = (-1,)) -> np.ndarray:
    r"""Boltzmann policy ``pi(a|s) = exp((Q(s,a) - V(s)) / alpha)`` of a soft Q-function.

    Normalised in the given quadrature: ``sum_j w_j pi(a_j|s) = 1`` for every state.
    """
    q = np.asarray(q, dtype=float)
    axes = tuple(ax % q.ndim for ax in action_axes)
    v = np.expand_dims(soft_state_value(q, action_weights, alpha, axes), axes)
    return np.exp((q - v) / alpha)


@dataclass
class SoftQSolution:
    """Result of :func:`soft_value_iteration`.

    Attributes
    ----------
    q : ndarray
        Soft Q-function ``Q(s, a)``.
    v : ndarray
        Soft state value ``V(s)``.
    iterations : int
        Bellman backups performed.
    error_bound : float
        A posteriori bound of the sup-norm error of ``q``: ``gamma / (1 - gamma) * ||Q_k - Q_{k-1}||``.
    alpha, gamma : float
    """

    q: np.ndarray
    v: np.ndarray
    iterations: int
    error_bound: float
    alpha: float
    gamma: float


def soft_value_iteration(
    reward,
    expect_next: Callable[[np.ndarray], np.ndarray],
    action_weights,
    alpha: float,
    gamma: float,
    action_axes: Sequence[int] = (-1,),
    tol: float = 1e-6,
    max_iter: int = 100_000,
    q0=None,
    progress: bool = False,
) -> SoftQSolution:
    r"""Solve the soft Bellman optimality equation by fixed-point iteration.

    .. math:: Q_{k+1} = R + \gamma\, \mathcal{E}\big[V_k\big],\qquad
              V_k(s) = \alpha \log \int_A e^{Q_k(s,a)/\alpha} da

    where ``expect_next(V)`` returns ``E_{s'~T(.|s,a)}[(1 - d(s')) V(s')]`` for every ``(s, a)``
    (shape of ``reward``). The map is a ``gamma``-contraction in the sup norm, so the iteration
    stops when the a posteriori bound ``gamma / (1 - gamma) * ||Q_{k+1} - Q_k||_inf <= tol``.

    Parameters
    ----------
    reward : ndarray
        ``R(s, a)`` on the grid (state axes and action axes).
    expect_next : callable
        ``V(s) -> E[(1 - d(s')) V(s') | s, a]``, returns the shape of ``reward``.
    action_weights : ndarray
        Quadrature weights of the action nodes.
    alpha : float
        Temperature ``1 / beta`` (> 0).
    gamma : float
        Discount in ``[0, 1)``.
    action_axes : sequence of int
        Action axes of ``reward``.
    tol : float
        Bound on the sup-norm error of the returned ``Q``.
    max_iter : int
    q0 : ndarray, optional
        Starting guess (default ``reward``).
    progress : bool
        tqdm bar over the backups (the error bound as postfix).

    Returns
    -------
    SoftQSolution

    Raises
    ------
    FpirlInputError
        On bad parameters, or if the iteration does not reach ``tol`` within ``max_iter``.
    """
    reward = np.asarray(reward, dtype=float)
    if not np.all(np.isfinite(reward)):
        raise FpirlInputError("reward contains NaN or infinite values")
    alpha = float(alpha)
    gamma = float(gamma)
    if not (np.isfinite(alpha) and alpha > 0):
        raise FpirlInputError(f"temperature alpha must be positive, got {alpha}")
    if not 0 <= gamma < 1:
        raise FpirlInputError(f"discount gamma must lie in [0, 1), got {gamma}")
    q = reward.copy() if q0 is None else np.asarray(q0, dtype=float).copy()
    factor = gamma / (1.0 - gamma)
    bound = np.inf

    bar = progress_bar(total=int(max_iter), enabled=progress, desc="soft value iteration", unit="backup", leave=False)
    for k in range(1, int(max_iter) + 1):
        v = soft_state_value(q, action_weights, alpha, action_axes)
        q_new = reward + gamma * np.asarray(expect_next(v)).reshape(reward.shape)
        delta = float(np.max(np.abs(q_new - q)))
        q = q_new
        bound = factor * delta
        bar.update(1)
        if k % 50 == 0:
            bar.set_postfix(bound=f"{bound:.2g}")
        if bound <= tol:
            break
    else:
        bar.close()
        raise FpirlInputError(f"soft value iteration did not converge in {max_iter} iterations (bound {bound:.3g})")
    bar.close()
    v = soft_state_value(q, action_weights, alpha, action_axes)
    return SoftQSolution(q=q, v=v, iterations=k, error_bound=bound, alpha=alpha, gamma=gamma)
