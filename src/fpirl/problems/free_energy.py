r"""Empirical free-energy minimisation in the 2-D Grid World MDP (paper section 3.2.3).

The paper's setting: state ``s = (x, y)`` in ``[-1, 1]^2`` (walls at the box edges), action
``a = (v_x, v_y)`` in ``[-a_max, a_max]^2`` (the paper gives no action bound; ``a_max = 1``),

.. math::

    R(s, a) = |x| - y - \sqrt{v_x^2 + v_y^2},\qquad
    s' \sim \mathcal{N}\big(s + a\,\Delta t,\ \sigma^2 I\big).

Walls: the Gaussian is **reflected** at the walls (method of images, i.e. the next position is
mirrored back into the box), as in :class:`fpirl.mdp.GaussianTransition` on a reflecting grid,
whose kernel this module uses (``GaussianTransition(grid, grad_s_psi=-a, beta=2 dt / sigma^2,
dt)`` has mean ``s + a dt`` and variance ``sigma^2``). No probability leaves the box.

Steps:

1. the optimal entropy-regularised policy by soft value iteration
   (:func:`fpirl.rl.soft_q.soft_value_iteration`) with temperature ``1 / beta`` and
   discount ``gamma``: ``Q = R + gamma E[V(s')]``, ``V = beta^{-1} log int exp(beta Q) da``,
   ``pi* = exp(beta (Q - V))``;
2. the state-action density evolved under ``pi*`` from a uniform state density by the MDP map
   (eq. ``density_evolution``), ``p_n(s', a') = pi*(a'|s') int int p_{n-1}(s, a) T(s'|s, a) da ds``;
3. the free energy of eq. ``free_energy_mdp`` along the evolution,

   .. math:: F(\rho, \pi) = -\int_S \rho \int_A \pi Q\, da\, ds - \beta^{-1}\big(H_s(\rho) + H_{a|s}(\pi)\big)
             = \int_S \rho(s)\big(-V(s) + \beta^{-1}\log\rho(s)\big)\, ds

   (the second form because ``pi*`` is the Boltzmann policy of ``Q``), computed with
   :func:`fpirl.evaluation.metrics.free_energy_mdp`. Its lower bound over all state densities is
   ``F_min = -beta^{-1} log int exp(beta V) ds``, attained at the Gibbs density
   ``rho_G ~ exp(beta V)``; ``F - F_min = beta^{-1} KL(rho || rho_G)``.

Whether ``F`` falls **monotonically** is the paper's empirical claim, not a theorem: the MDP
map's stationary density is not ``rho_G`` in general, and only ``KL(rho_n || rho_inf)`` (to the
chain's own stationary density) is guaranteed not to increase (data-processing inequality).
:func:`scan_parameters` measures both over one-at-a-time parameter changes;
:func:`fpirl.problems.free_energy_report.run_free_energy` writes the figure and the report.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np
from tqdm.auto import tqdm

from ..core._errors import FpirlInputError
from ..core.grid import Grid
from ..mdp.recovery import GaussianTransition, boltzmann_policy
from ..evaluation.metrics import free_energy_mdp, kl_divergence
from ..rl.soft_q import soft_value_iteration

__all__ = [
    "QUICK_PARAMS",
    "SCAN",
    "FreeEnergyCurve",
    "FreeEnergyParams",
    "GridWorldMDP",
    "free_energy_curve",
    "gridworld_mdp",
    "scan_parameters",
    "state_grid",
]


@dataclass(frozen=True)
class FreeEnergyParams:
    """Parameters of the free-energy demonstration (defaults: the reported run).

    Attributes
    ----------
    state_elements, action_elements : int
        Grid elements per state / action axis (reflecting grid: ``elements + 1`` nodes).
    action_bound : float
        ``a in [-action_bound, action_bound]^2``.
    dt : float
        MDP time step in the mean ``s + a dt``.
    sigma : float
        Standard deviation of the Gaussian transition per axis.
    gamma : float
        Discount of the soft value iteration.
    beta : float
        Inverse temperature: the soft value iteration uses temperature ``1 / beta`` and the free
        energy the same ``beta``.
    steps : int
        MDP steps of the density evolution.
    """

    state_elements: int = 20
    action_elements: int = 10
    action_bound: float = 1.0
    dt: float = 0.1
    sigma: float = 0.1
    gamma: float = 0.9
    beta: float = 1.0
    steps: int = 200

    def label(self) -> str:
        return (f"dt={self.dt:g}, sigma={self.sigma:g}, gamma={self.gamma:g}, beta={self.beta:g}, "
                f"grid {self.state_elements}^2 x {self.action_elements}^2")


@dataclass
class GridWorldMDP:
    r"""The Grid World MDP on a reflecting 4-D grid ``(x, y, vx, vy)``.

    The transition factorises per state axis, and the factor of axis ``x`` depends only on
    ``(x, v_x)`` (mean ``x + v_x dt``), so with ``Kx[i, k, p] = T_x(x'_p | x_i, vx_k)`` (and
    ``Ky`` alike)

    .. math::
        E[V(s')|s, a] = \sum_{p,q} w_p w_q\, K_x[i,k,p]\, K_y[j,l,q]\, V(x'_p, y'_q),
        \qquad
        \rho'(x'_p, y'_q) = \sum_{ijkl} W_{ijkl}\, p_{ijkl}\, K_x[i,k,p]\, K_y[j,l,q],

    with trapezoid weights ``w`` (state) and ``W`` (joint): two small tensor contractions.
    The factors are those of :class:`fpirl.mdp.GaussianTransition` (nodal, normalised in the
    grid quadrature, reflected at the walls), so both maps equal its ``expect`` / ``push``.
    """

    grid: Grid
    reward: np.ndarray
    kx: np.ndarray
    ky: np.ndarray
    dt: float
    sigma: float

    def expect(self, v: np.ndarray) -> np.ndarray:
        """``E_{s'~T(.|s,a)}[v(s')]`` for every joint node, shape ``grid.shape``."""
        ws = np.outer(self.grid.axes[0].node_weights, self.grid.axes[1].node_weights)
        return np.einsum("ikp,jlq,pq->ijkl", self.kx, self.ky, v * ws, optimize=True)

    def push(self, p: np.ndarray) -> np.ndarray:
        """Next-state density ``int int p(s, a) T(s'|s, a) da ds``, shape ``(nx, ny)``."""
        return np.einsum("ijkl,ikp,jlq->pq", p * self.grid.node_weights(), self.kx, self.ky, optimize=True)


def gridworld_mdp(state_elements: int = 20, action_elements: int = 10, dt: float = 0.1, sigma: float = 0.1,
                  action_bound: float = 1.0) -> GridWorldMDP:
    r"""Build the Grid World MDP of paper section 3.2.3 on a reflecting grid.

    ``R(s, a) = |x| - y - sqrt(vx^2 + vy^2)`` at the nodes; ``T(s'|s, a) = N(s + a dt, sigma^2 I)``
    reflected at the walls ``x, y = +-1``.
    """
    if not (dt > 0 and sigma > 0 and action_bound > 0):
        raise FpirlInputError(f"need dt, sigma, action_bound > 0, got {dt}, {sigma}, {action_bound}")
    b = float(action_bound)
    grid = Grid([-1.0, -1.0, -b, -b], [1.0, 1.0, b, b], [state_elements, state_elements, action_elements, action_elements],
                names=["x", "y", "vx", "vy"], roles=["state", "state", "action", "action"], boundary="reflecting")
    x, y, vx, vy = np.meshgrid(*grid.coords, indexing="ij", sparse=True)
    reward = np.abs(x) - y - np.sqrt(vx**2 + vy**2)
    # GaussianTransition has mean s - grad_s(psi) dt and variance 2 dt / beta: choose
    # grad_s(psi) = -a and beta = 2 dt / sigma^2.
    grad = -np.stack(np.broadcast_arrays(vx, vy, np.zeros(grid.shape))[:2])
    trans = GaussianTransition(grid, grad, 2.0 * dt / sigma**2, dt)
    nx, ny = grid.shape[0], grid.shape[1]
    kx = trans.factors[0].reshape(grid.shape + (nx,))[:, 0, :, 0, :]
    ky = trans.factors[1].reshape(grid.shape + (ny,))[0, :, 0, :, :]
    return GridWorldMDP(grid, np.broadcast_to(reward, grid.shape).copy(), kx, ky, float(dt), float(sigma))


@dataclass
class FreeEnergyCurve:
    """Free energy along the density evolution (output of :func:`free_energy_curve`).

    Attributes
    ----------
    params : FreeEnergyParams
    mdp : GridWorldMDP
    q, v, policy : ndarray
        Soft-optimal Q, V and Boltzmann policy.
    iterations : int
        Soft value iterations.
    rho : ndarray, shape (steps + 1, nx, ny)
        State densities ``rho_n``.
    free_energy : ndarray, shape (steps + 1,)
        ``F(rho_n, pi*)`` (eq. ``free_energy_mdp``).
    free_energy_min : float
        ``-beta^{-1} log int exp(beta V) ds``, the minimum over all state densities.
    kl_stationary : ndarray, shape (steps + 1,)
        ``KL(rho_n || rho_inf)`` to the chain's stationary density (monotone by theory).
    increments : ndarray
        ``F_{n+1} - F_n``.
    seconds : dict
    """

    params: FreeEnergyParams
    mdp: GridWorldMDP
    q: np.ndarray
    v: np.ndarray
    policy: np.ndarray
    iterations: int
    rho: np.ndarray
    free_energy: np.ndarray
    free_energy_min: float
    rho_stationary: np.ndarray
    kl_stationary: np.ndarray
    seconds: dict = field(default_factory=dict)

    @property
    def increments(self) -> np.ndarray:
        return np.diff(self.free_energy)

    @property
    def tolerance(self) -> float:
        """Round-off level of an increment: ``1e-12 * max|F|``."""
        return 1e-12 * float(np.max(np.abs(self.free_energy)))

    @property
    def monotone(self) -> bool:
        """No increment larger than round-off."""
        return bool(np.all(self.increments <= self.tolerance))

    @property
    def max_increase(self) -> float:
        return float(max(self.increments.max(), 0.0))

    @property
    def n_increases(self) -> int:
        return int(np.sum(self.increments > self.tolerance))

    @property
    def drop(self) -> float:
        """``F_0 - F_end``."""
        return float(self.free_energy[0] - self.free_energy[-1])

    def plateau_change(self, fraction: float = 0.1) -> float:
        """``|F_end - F_{end - k}| / (F_0 - F_end)`` over the last ``fraction`` of the steps."""
        k = max(1, round(fraction * (self.free_energy.size - 1)))
        drop = self.drop
        return float(abs(self.free_energy[-1] - self.free_energy[-1 - k]) / drop) if drop > 0 else np.inf

    def gap_to_minimum(self) -> float:
        """``F_end - F_min = beta^{-1} KL(rho_end || rho_Gibbs)``."""
        return float(self.free_energy[-1] - self.free_energy_min)


def state_grid(grid: Grid) -> Grid:
    """The grid of the two state axes ``(x, y)`` of the joint Grid World grid."""
    return Grid(grid.lower[:2], grid.upper[:2], grid.elements[:2], names=grid.names[:2], roles=grid.roles[:2],
                boundary=grid.boundary)


def free_energy_curve(params: FreeEnergyParams = FreeEnergyParams(), progress: bool = False) -> FreeEnergyCurve:
    r"""Soft-optimal policy, density evolution from a uniform start, and the free energy curve.

    See the module docstring for the equations. The evolution starts from
    ``rho_0 = 1 / |S| = 1/4``, ``p_0 = rho_0 pi*``; the stationary density ``rho_inf`` is the
    fixed point of ``rho -> push(rho pi*)`` (power iteration to a relative change of 1e-12).
    """
    t0 = time.perf_counter()
    mdp = gridworld_mdp(params.state_elements, params.action_elements, params.dt, params.sigma, params.action_bound)
    grid = mdp.grid
    wa = np.outer(grid.axes[2].node_weights, grid.axes[3].node_weights)
    alpha = 1.0 / params.beta
    sol = soft_value_iteration(mdp.reward, mdp.expect, wa, alpha, params.gamma, action_axes=(2, 3), tol=1e-9)
    policy = boltzmann_policy(grid, -sol.q, params.beta)
    t1 = time.perf_counter()

    rho = np.empty((params.steps + 1,) + grid.shape[:2])
    rho[0] = 0.25
    it = range(1, params.steps + 1)
    if progress:
        it = tqdm(it, desc="free energy: MDP map", unit="step")
    for n in it:
        rho[n] = mdp.push(rho[n - 1][:, :, None, None] * policy)
    fe = free_energy_mdp(rho, policy, sol.q, params.beta, grid)
    # the minimum over rho: -1/beta log int exp(beta V) ds (log-sum-exp)
    bv = params.beta * sol.v
    fmin = -(bv.max() + np.log(float(state_grid(grid).integrate(np.exp(bv - bv.max()))))) / params.beta

    # stationary density of the chain rho -> push(rho pi)
    r = rho[-1].copy()
    for _ in range(200_000):
        r_new = mdp.push(r[:, :, None, None] * policy)
        change = np.max(np.abs(r_new - r)) / np.max(r_new)
        r = r_new
        if change < 1e-12:
            break
    kl_stat = kl_divergence(rho, r, state_grid(grid))
    t2 = time.perf_counter()
    return FreeEnergyCurve(params, mdp, sol.q, sol.v, policy, sol.iterations, rho, np.asarray(fe), float(fmin), r,
                           kl_stat, {"soft value iteration": t1 - t0, "evolution": t2 - t1})


#: ``--quick``: a coarser grid (13^2 x 7^2 nodes) and no parameter scan (a pipeline check).
QUICK_PARAMS = FreeEnergyParams(state_elements=12, action_elements=6)

#: One-at-a-time variations around the default parameters, for the monotonicity scan.
SCAN = (
    {},
    {"dt": 0.05},
    {"dt": 0.2},
    {"dt": 0.3},
    {"sigma": 0.05},
    {"sigma": 0.2},
    {"gamma": 0.5},
    {"gamma": 0.95},
    {"beta": 0.2},
    {"beta": 5.0},
    {"dt": 0.3, "sigma": 0.2},
)


def scan_parameters(curve: FreeEnergyCurve, changes=SCAN) -> list[dict]:
    """Monotonicity of F for one-at-a-time changes of ``curve.params`` (``{}`` reuses ``curve``).

    Returns one dict per change: ``change`` (text), ``params``, ``monotone``, ``n_increases``,
    ``max_increase``, ``drop``, ``plateau``, ``gap`` (``F_end - F_min``) and ``kl_monotone``
    (``KL(rho_n || rho_inf)`` non-increasing).
    """
    rows = []
    for change in changes:
        p = replace(curve.params, **change)
        c = curve if not change else free_energy_curve(p)
        rows.append({"change": ", ".join(f"{k}={v:g}" for k, v in change.items()) or "(default)",
                     "params": p, "monotone": c.monotone, "n_increases": c.n_increases,
                     "max_increase": c.max_increase, "drop": c.drop, "plateau": c.plateau_change(),
                     "gap": c.gap_to_minimum(), "kl_monotone": bool(np.all(np.diff(c.kl_stationary) <= 1e-12))})
    return rows
