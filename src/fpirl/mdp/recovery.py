"""Recover the MDP (Q-function, policy, transition, reward) from a Fokker-Planck potential.

Paper section 3 (docs/method.md, "From the potential to the MDP"). With ``x = (s, a)`` the joint state-action variable and
``psi`` the potential of the Fokker-Planck PDE on a :class:`~fpirl.core.grid.Grid`:

* ``Q(s, a) = -psi(s, a)`` (Value-Potential Equivalence, eq. ``conjecture_equivalence``);
* ``pi(a|s) = exp(beta Q(s,a)) / int_A exp(beta Q(s,a')) da'`` (eq. ``boltzmann_policy``);
* ``T(s'|s,a)`` Gaussian in ``s'`` with mean ``s - grad_s psi(s,a) dt`` and covariance
  ``(2 dt / beta) I`` (eq. ``gaussian_transition`` marginalised over ``a'``, eq. ``mdp_transition``);
* ``R(s,a) = Q(s,a) - gamma E_{s'~T(.|s,a)} V(s')``, the inverse Bellman equation, with one of two
  state values (``recover_mdp(..., reward=...)``):

  - ``'soft'`` (default): ``V(s) = beta^-1 log int_A exp(beta Q(s,a)) da``, the soft (entropy-
    regularised) value, so that the soft-optimal control of ``R`` under ``T`` at temperature
    ``1 / beta`` is exactly ``pi`` (:func:`soft_inverse_bellman_reward`);
  - ``'expected'``: ``V(s') = int_A pi(a'|s') Q(s',a') da'``, the paper's eq. ``inverse_bellman``
    (:func:`inverse_bellman_reward`), which drops the entropy term ``beta^-1 H(pi(.|s'))``.

Everything acts on NODAL arrays of shape ``grid.shape``; functions of the state only have the
shape of the state axes (``state_shape(grid)``, in the order of ``grid.state_axes``). Integrals
use the grid's own trapezoid quadrature (:meth:`Grid.integrate`), also over the actions.

The transition kernel is separable (a product of 1-D Gaussians, one per state axis), so it is
stored as one factor matrix of shape ``(n_sources, n_nodes_axis)`` per state axis, where
``n_sources = grid.size`` enumerates all joint nodes ``(s, a)`` in C order. No dense
``(n_s n_a) x n_s`` matrix is formed except by :meth:`GaussianTransition.dense` (tests only).
"""

from __future__ import annotations

import warnings

from dataclasses import dataclass

import numpy as np

from ..core._errors import FpirlInputError
from ..core.grid import Grid
from ..core.validation import _check_gamma, _expand_state, _nodal, _positive, _require_axes, state_marginal, state_shape
from .transition import GaussianTransition

#: Default discount factor. The paper only requires ``gamma in [0, 1)`` and states no value.
DEFAULT_GAMMA = 0.99
#: Reward conventions of :func:`recover_mdp`; the first is the default (docs/method.md, "Reward").
REWARD_CONVENTIONS = ("soft", "expected")


__all__ = [
    "DEFAULT_GAMMA",
    "GaussianTransition",
    "MDP",
    "boltzmann_policy",
    "REWARD_CONVENTIONS",
    "inverse_bellman_reward",
    "recover_mdp",
    "recover_mdp_from_fit",
    "soft_inverse_bellman_reward",
    "soft_state_value",
    "state_marginal",
    "state_shape",
]


# --------------------------------------------------------------------------------------------
# policy
# --------------------------------------------------------------------------------------------
def boltzmann_policy(grid: Grid, psi, beta: float) -> np.ndarray:
    r"""Boltzmann policy of the potential on the grid nodes (eq. ``boltzmann_policy``).

    .. math::

        \pi(a|s) = \frac{\exp(\beta Q(s,a))}{\int_A \exp(\beta Q(s,a'))\,da'},
        \qquad Q = -\psi,

    evaluated with a log-sum-exp shift (the per-state maximum of ``beta Q`` over the actions), so
    it is stable for arbitrarily large ``beta * psi``. The action integral is the grid's
    trapezoid quadrature over ``grid.action_axes``; hence ``grid.integrate(pi, action_axes) == 1``
    for every state node, to round-off.

    Parameters
    ----------
    grid : Grid
        Joint grid with at least one state and one action axis.
    psi : array_like, shape grid.shape
        Potential at the nodes.
    beta : float
        Inverse temperature, > 0.

    Returns
    -------
    ndarray, shape grid.shape
        ``pi(a|s)``, a density in ``a`` for every state node.
    """
    _require_axes(grid)
    psi = _nodal(grid, psi, "psi")
    beta = _positive(beta, "beta")
    acts = grid.action_axes
    logits = -beta * psi
    shift = logits.max(axis=acts, keepdims=True)
    unnorm = np.exp(logits - shift)  # in (0, 1], equal to 1 at the arg-max: Z > 0 always
    z = grid.integrate(unnorm, axes=acts)
    return unnorm / _expand_state(grid, z)


# --------------------------------------------------------------------------------------------
# reward and container
# --------------------------------------------------------------------------------------------
def inverse_bellman_reward(q, policy, transition: GaussianTransition, grid: Grid, gamma: float = DEFAULT_GAMMA):
    r"""Reward from the inverse Bellman equation (eq. ``inverse_bellman``).

    .. math::

        R(s,a) = Q(s,a) - \gamma\, E_{s'\sim T(\cdot|s,a),\, a'\sim\pi(\cdot|s')}\big[Q(s',a')\big],

    i.e. ``r = (I - gamma T_MP) q`` on the nodes, computed without a matrix as
    ``V(s') = int_A pi(a'|s') Q(s',a') da'`` (grid quadrature) followed by
    ``R = Q - gamma * transition.expect(V)``.

    Parameters
    ----------
    q : array_like, shape grid.shape
        Q-function at the nodes (``-psi`` under the Value-Potential Equivalence).
    policy : array_like, shape grid.shape
        ``pi(a|s)`` at the nodes (normalised over the action axes).
    transition : GaussianTransition
    grid : Grid
    gamma : float, default 0.99
        Discount factor in ``[0, 1)`` (the paper fixes no value).

    Returns
    -------
    ndarray, shape grid.shape
    """
    q = _nodal(grid, q, "q")
    policy = _nodal(grid, policy, "policy")
    gamma = _check_gamma(gamma)
    if transition.grid != grid:
        raise FpirlInputError("transition was built on a different grid")
    value = grid.integrate(policy * q, axes=grid.action_axes)
    return q - gamma * transition.expect(value)


def soft_state_value(grid: Grid, q, beta: float) -> np.ndarray:
    r"""Soft state value of a Q-function on the grid nodes.

    .. math:: V(s) = \beta^{-1} \log \int_A \exp\big(\beta Q(s,a)\big)\, da

    with the grid's trapezoid quadrature over the action axes (the quadrature that normalises
    :func:`boltzmann_policy`, so that ``pi = exp(beta (Q - V))`` exactly), by a log-sum-exp.

    Parameters
    ----------
    grid : Grid
    q : array_like, shape grid.shape
    beta : float
        Inverse temperature, > 0.

    Returns
    -------
    ndarray, shape state_shape(grid)
    """
    _require_axes(grid)
    q = _nodal(grid, q, "q")
    beta = _positive(beta, "beta")
    acts = grid.action_axes
    m = q.max(axis=acts, keepdims=True)
    z = grid.integrate(np.exp(beta * (q - m)), axes=acts)
    return np.squeeze(m, axis=acts) + np.log(z) / beta


def soft_inverse_bellman_reward(q, transition: GaussianTransition, grid: Grid, beta: float,
                                gamma: float = DEFAULT_GAMMA) -> np.ndarray:
    r"""Reward of the soft (entropy-regularised) inverse Bellman equation.

    .. math::

        R(s,a) = Q(s,a) - \gamma\, E_{s'\sim T(\cdot|s,a)}\big[V(s')\big],\qquad
        V(s) = \beta^{-1} \log \int_A e^{\beta Q(s,a)}\, da

    (:func:`soft_state_value`). ``Q`` is then the fixed point of the soft Bellman optimality
    equation ``Q = R + gamma E[V_Q(s')]`` under ``transition`` at temperature ``1 / beta``, so the
    soft-optimal policy of ``R`` is the Boltzmann policy of ``Q`` (eq. ``boltzmann_policy``). It
    differs from :func:`inverse_bellman_reward` by ``-gamma beta^-1 E_{s'}[H(pi(.|s'))]``.

    Parameters
    ----------
    q : array_like, shape grid.shape
    transition : GaussianTransition
    grid : Grid
    beta : float
    gamma : float, default 0.99

    Returns
    -------
    ndarray, shape grid.shape
    """
    q = _nodal(grid, q, "q")
    gamma = _check_gamma(gamma)
    if transition.grid != grid:
        raise FpirlInputError("transition was built on a different grid")
    return q - gamma * transition.expect(soft_state_value(grid, q, beta))


@dataclass
class MDP:
    """The MDP recovered from a potential (paper section 3).

    Attributes
    ----------
    grid : Grid
    beta, dt, gamma : float
    q_value : ndarray, shape grid.shape
        ``Q = -psi``.
    policy : ndarray, shape grid.shape
        Boltzmann policy ``pi(a|s)``.
    transition : GaussianTransition
        ``T(s'|s,a)``.
    reward : ndarray, shape grid.shape
        ``R`` from the inverse Bellman equation.
    reward_convention : {'soft', 'expected'}
        Which inverse Bellman equation gave ``reward`` (see :func:`recover_mdp`).
    """

    grid: Grid
    beta: float
    dt: float
    gamma: float
    q_value: np.ndarray
    policy: np.ndarray
    transition: GaussianTransition
    reward: np.ndarray
    reward_convention: str = "soft"


def recover_mdp(
    grid: Grid,
    psi,
    grad_s_psi,
    beta: float,
    dt: float,
    gamma: float = DEFAULT_GAMMA,
    discretization: str = "moment",
    reward: str = "soft",
    tabulated: bool = False,
) -> MDP:
    """Q-function, policy, transition and reward of a potential (paper section 3).

    ``Q = -psi`` (eq. ``conjecture_equivalence``), ``pi`` by eq. ``boltzmann_policy``
    (:func:`boltzmann_policy`), ``T`` by eqs. ``gaussian_transition`` / ``mdp_transition``
    (:class:`GaussianTransition`) and ``R`` by the inverse Bellman equation
    ``R = Q - gamma E_{s'}[V(s')]`` with the state value of ``reward``.

    ``R`` is a reward of a **continuing** (infinite-horizon, discounted) task: no state is
    terminal. It is determined up to an additive constant: ``psi -> psi + c`` (psi has zero mean
    by convention, nothing fixes its level) gives ``R -> R - (1 - gamma) c`` and leaves every
    policy's ranking unchanged in a continuing task (docs/method.md, "Reward").

    Parameters
    ----------
    grid : Grid
    psi : array_like, shape grid.shape
    grad_s_psi : array_like, shape ``(len(grid.state_axes), *grid.shape)``
    beta, dt : float
        Inverse temperature and MDP time step, both > 0.
    gamma : float, default 0.99
        Discount factor in ``[0, 1)``.
    discretization : {'moment', 'nodal', 'projection'}
        Transition discretisation, see :class:`GaussianTransition` (default 'moment': mean and
        variance exact at every sigma / h).
    reward : {'soft', 'expected'}
        ``'soft'`` (default): ``V(s) = beta^-1 log int_A exp(beta Q) da``
        (:func:`soft_inverse_bellman_reward`); the soft-optimal control of ``R`` under ``T`` at
        temperature ``1 / beta`` gives back ``pi`` exactly, which is what re-solving or
        transferring the reward needs. ``'expected'``: the paper's eq. ``inverse_bellman``,
        ``V(s') = int_A pi(a'|s') Q(s',a') da'`` (:func:`inverse_bellman_reward`; reproduces the
        paper's figures). They differ by ``gamma beta^-1 E_{s'}[H(pi(.|s'))]``.
    tabulated : bool, default False
        Interpolate the transition's rows in a table of exact ones (``GaussianTransition(...,
        tabulated=True)``: within 1e-8 of the exact rows, several times faster on large grids).

    Returns
    -------
    MDP
    """
    gamma = _check_gamma(gamma)
    if reward not in REWARD_CONVENTIONS:
        raise FpirlInputError(f"reward must be one of {REWARD_CONVENTIONS}, got {reward!r}")
    psi = _nodal(grid, psi, "psi")
    q = -psi
    policy = boltzmann_policy(grid, psi, beta)
    with warnings.catch_warnings():  # the accuracy warning points at the caller of recover_mdp
        warnings.simplefilter("ignore", RuntimeWarning)
        transition = GaussianTransition(grid, grad_s_psi, beta, dt, discretization=discretization,
                                        tabulated=tabulated)
    transition.warn_if_poor(stacklevel=3)
    if reward == "soft":
        r = soft_inverse_bellman_reward(q, transition, grid, beta, gamma)
    else:
        r = inverse_bellman_reward(q, policy, transition, grid, gamma)
    return MDP(grid, float(beta), float(dt), gamma, q, policy, transition, r, reward)


def recover_mdp_from_fit(estimator, dt: float, gamma: float | None = None, reward: str = "soft") -> MDP | None:
    """The MDP (Q, pi, T, R; paper section 3) of a fitted :class:`~fpirl.estimators.identify.PotentialEstimator`.

    ``reward``: the inverse Bellman convention (:func:`fpirl.mdp.recover_mdp`).

    Returns ``None`` when the grid lacks state or action axes (then ``gamma`` must be ``None``).
    """
    grid = estimator.grid_
    if not (grid.state_axes and grid.action_axes):
        if gamma is not None:
            raise FpirlInputError(f"gamma needs state and action axes; the data have roles {', '.join(grid.roles)}")
        return None
    return recover_mdp(
        grid, estimator.potential_on_grid(), estimator.gradient_on_grid(axes=grid.state_axes),
        estimator.beta_, dt, gamma=DEFAULT_GAMMA if gamma is None else gamma, reward=reward,
    )
