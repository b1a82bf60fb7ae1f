r"""Mountain Car, the RL step (paper section 5.2): gymnasium dynamics and soft Q-iteration.

Step 1 -- the RL problem. Dynamics and reward of gymnasium's ``MountainCarContinuous-v0``:

.. math::

    v' = \mathrm{clip}\big(v + 0.0015\, a - 0.0025 \cos(3x),\ -0.07,\ 0.07\big),\qquad
    x' = \mathrm{clip}(x + v',\ -1.2,\ 0.6),\quad v' \leftarrow 0 \text{ if } x' = -1.2,\ v' < 0,

terminal when ``x' >= 0.45`` and ``v' >= 0``; reward ``100 [terminal] - 0.1 a^2`` per step,
``a in [-1, 1]``. The paper solves it with soft actor-critic (SAC). We compute instead the
entropy-regularised optimal Q-function that SAC approximates, exactly up to discretisation, by
**soft Q-iteration** (:func:`fpirl.rl.soft_q.soft_value_iteration`) on a fine tensor grid
of (position, velocity, action):

.. math::

    Q(s, a) = r(s, a) + \gamma\, (1 - d(s'))\, V(s'),\qquad
    V(s) = \alpha \log \int_{-1}^{1} \exp\big(Q(s, a)/\alpha\big)\, da,

with the deterministic next state ``s' = f(s, a)``, ``V(s')`` by bilinear interpolation of the
nodal ``V`` (a fixed sparse matrix, built once), and the action integral by the trapezoid rule.
Temperature :data:`ALPHA` and discount :data:`GAMMA` are documented there. The Boltzmann
policy ``pi(a|s) = exp((Q - V)/alpha)`` of that Q is validated by rolling it out in gymnasium's
own environment (:func:`rollout_gymnasium`).

Step 2 -- the modified (Fokker-Planck) problem: :mod:`fpirl.problems.mountain_car`.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..core._errors import FpirlInputError
from ..rl.gym import rollout
from ..rl.soft_q import soft_policy, soft_state_value, soft_value_iteration

# --- gymnasium MountainCarContinuous-v0 constants ---------------------------------------------
MIN_POSITION = -1.2
MAX_POSITION = 0.6
MAX_SPEED = 0.07
GOAL_POSITION = 0.45
GOAL_VELOCITY = 0.0
POWER = 0.0015
GOAL_REWARD = 100.0
ACTION_COST = 0.1

#: Soft Q-iteration temperature ``alpha`` (entropy weight, reward units). The only scale in the
#: reward besides the goal bonus 100 is the action cost ``0.1 a^2 <= 0.1``; one step's worth of
#: action changes ``Q`` by well under 1 near most states, so ``alpha`` must be small against that
#: for a decisive policy, yet not zero (the potential should stay smooth in ``a``). ``alpha = 0.1``
#: gives a policy that reaches the goal in every validation episode (see the tests/benchmark).
ALPHA = 0.1
#: Discount (SAC's customary default). Episodes of the optimal policy take ~100-200 steps.
GAMMA = 0.99


def mountain_car_step(x, v, a):
    r"""Vectorised ``MountainCarContinuous-v0`` step (same operations as gymnasium's ``step``).

    Parameters
    ----------
    x, v, a : array_like (broadcast)
        Position, velocity and force (clipped to ``[-1, 1]``).

    Returns
    -------
    x_next, v_next : ndarray
    terminal : ndarray of bool
        ``x' >= 0.45`` and ``v' >= 0``.
    reward : ndarray
        ``100 * terminal - 0.1 a^2``.
    """
    x, v, a = np.broadcast_arrays(*(np.asarray(t, dtype=float) for t in (x, v, a)))
    force = np.clip(a, -1.0, 1.0)
    v1 = np.clip(v + force * POWER - 0.0025 * np.cos(3.0 * x), -MAX_SPEED, MAX_SPEED)
    x1 = np.clip(x + v1, MIN_POSITION, MAX_POSITION)
    v1 = np.where((x1 == MIN_POSITION) & (v1 < 0), 0.0, v1)
    terminal = (x1 >= GOAL_POSITION) & (v1 >= GOAL_VELOCITY)
    reward = GOAL_REWARD * terminal - ACTION_COST * a**2
    return x1, v1, terminal, reward


def _trapezoid(n: int, lower: float, upper: float) -> np.ndarray:
    w = np.full(n, (upper - lower) / (n - 1))
    w[[0, -1]] *= 0.5
    return w


def _bilinear(xg: np.ndarray, yg: np.ndarray, x: np.ndarray, y: np.ndarray):
    """Cell indices and weights of bilinear interpolation on the tensor grid ``xg x yg`` (clamped).

    Returns ``(flat_index (n, 4), weight (n, 4))`` into the C-ordered ``(len(xg), len(yg))`` array.
    """
    x = np.clip(np.asarray(x, dtype=float).ravel(), xg[0], xg[-1])
    y = np.clip(np.asarray(y, dtype=float).ravel(), yg[0], yg[-1])
    hx = (xg[-1] - xg[0]) / (xg.size - 1)
    hy = (yg[-1] - yg[0]) / (yg.size - 1)
    i = np.clip(np.floor((x - xg[0]) / hx).astype(np.intp), 0, xg.size - 2)
    j = np.clip(np.floor((y - yg[0]) / hy).astype(np.intp), 0, yg.size - 2)
    fx = np.clip((x - xg[i]) / hx, 0.0, 1.0)
    fy = np.clip((y - yg[j]) / hy, 0.0, 1.0)
    ny = yg.size
    idx = np.stack([i * ny + j, i * ny + j + 1, (i + 1) * ny + j, (i + 1) * ny + j + 1], axis=1)
    w = np.stack([(1 - fx) * (1 - fy), (1 - fx) * fy, fx * (1 - fy), fx * fy], axis=1)
    return idx, w


@dataclass(frozen=True)
class SoftQSettings:
    """Discretisation and parameters of the Mountain Car soft Q-iteration.

    Attributes
    ----------
    n_position, n_velocity, n_action : int
        Nodes on ``[-1.2, 0.6] x [-0.07, 0.07] x [-1, 1]`` (both ends included).
    alpha : float
        Temperature (:data:`ALPHA`).
    gamma : float
        Discount (:data:`GAMMA`).
    tol : float
        Sup-norm error bound of the value iteration.
    """

    n_position: int = 181
    n_velocity: int = 141
    n_action: int = 21
    alpha: float = ALPHA
    gamma: float = GAMMA
    tol: float = 1e-6

    def key(self) -> str:
        return hashlib.sha1(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:12]


@dataclass
class MountainCarQ:
    """Soft-optimal Q of Mountain Car on a (position, velocity, action) grid.

    Attributes
    ----------
    position, velocity, action : ndarray
        Grid nodes.
    q : ndarray, shape (n_position, n_velocity, n_action)
    settings : SoftQSettings
    iterations : int
    error_bound : float
    seconds : float
    """

    position: np.ndarray
    velocity: np.ndarray
    action: np.ndarray
    q: np.ndarray
    settings: SoftQSettings
    iterations: int = 0
    error_bound: float = 0.0
    seconds: float = 0.0

    @property
    def action_weights(self) -> np.ndarray:
        return _trapezoid(self.action.size, -1.0, 1.0)

    @property
    def v(self) -> np.ndarray:
        """Soft value ``V(s) = alpha log int exp(Q/alpha) da``, shape (n_position, n_velocity)."""
        return soft_state_value(self.q, self.action_weights, self.settings.alpha)

    def q_at(self, x, v) -> np.ndarray:
        """``Q`` at states ``(x, v)`` (bilinear in the state, clamped to the box), shape ``(n, n_action)``."""
        idx, w = _bilinear(self.position, self.velocity, x, v)
        qf = self.q.reshape(-1, self.action.size)
        return np.einsum("pk,pka->pa", w, qf[idx])

    def policy_at(self, x, v) -> np.ndarray:
        """Boltzmann policy ``pi(a_j | s)`` (density values at the action nodes), shape ``(n, n_action)``."""
        return soft_policy(self.q_at(x, v), self.action_weights, self.settings.alpha)

    def sample_action(self, x, v, rng) -> np.ndarray:
        """Sample actions from the Boltzmann policy: action node ``a_j`` with probability ``w_j pi(a_j|s)``."""
        prob = self.policy_at(x, v) * self.action_weights
        prob /= prob.sum(axis=1, keepdims=True)
        u = rng.uniform(size=(prob.shape[0], 1))
        j = np.minimum((np.cumsum(prob, axis=1) < u).sum(axis=1), self.action.size - 1)
        return self.action[j]


def solve_mountain_car(settings: SoftQSettings = SoftQSettings(), reward=None, continuing: bool = False,
                       progress: bool = False) -> MountainCarQ:
    r"""Soft Q-iteration for Mountain Car (see the module docstring).

    The Bellman backup is ``Q <- r + gamma P V`` with the sparse matrix ``P`` (rows: grid nodes
    ``(x, v, a)``; columns: state nodes) holding the bilinear-interpolation weights at the
    deterministic next state ``f(x, v, a)``, and zero rows where the step terminates.

    Parameters
    ----------
    settings : SoftQSettings
    reward : callable, optional
        ``r(points)`` of physical ``(x, v, a)`` points ``(..., 3)`` instead of gymnasium's reward
        (e.g. a recovered reward, :func:`fpirl.rl.reward_function` composed with the box map).
    continuing : bool
        No terminal states (the step at the goal continues from the next state): the recovered
        reward's MDP is a continuing task.
    progress : bool
        tqdm bar over the backups.
    """
    t0 = time.perf_counter()
    s = settings
    if min(s.n_position, s.n_velocity, s.n_action) < 3:
        raise FpirlInputError("need at least 3 nodes per axis")
    xg = np.linspace(MIN_POSITION, MAX_POSITION, s.n_position)
    vg = np.linspace(-MAX_SPEED, MAX_SPEED, s.n_velocity)
    ag = np.linspace(-1.0, 1.0, s.n_action)
    X, V, A = np.meshgrid(xg, vg, ag, indexing="ij")
    x1, v1, terminal, r_env = mountain_car_step(X, V, A)
    if reward is None:
        reward = r_env
    else:
        reward = np.asarray(reward(np.stack([X, V, A], axis=-1)), dtype=float).reshape(X.shape)
    idx, w = _bilinear(xg, vg, x1, v1)
    if not continuing:
        w = w * (~terminal.ravel())[:, None]
    n = X.size
    P = sp.csr_matrix((w.ravel(), (np.repeat(np.arange(n), 4), idx.ravel())), shape=(n, xg.size * vg.size))
    shape = X.shape

    def expect_next(vs):
        return (P @ vs.ravel()).reshape(shape)

    sol = soft_value_iteration(reward, expect_next, _trapezoid(s.n_action, -1.0, 1.0), s.alpha, s.gamma,
                               action_axes=(2,), tol=s.tol, progress=progress)
    return MountainCarQ(xg, vg, ag, sol.q, settings, sol.iterations, sol.error_bound, time.perf_counter() - t0)


def load_or_solve_mountain_car(settings: SoftQSettings = SoftQSettings(), cache_dir=None) -> MountainCarQ:
    """:func:`solve_mountain_car` with an on-disk cache (``cache_dir/mountain_car_q_<key>.npz``)."""
    if cache_dir is None:
        return solve_mountain_car(settings)
    cache_dir = Path(cache_dir)
    path = cache_dir / f"mountain_car_q_{settings.key()}.npz"
    if path.exists():
        try:
            with np.load(path) as z:
                return MountainCarQ(z["position"], z["velocity"], z["action"], z["q"], settings,
                                    int(z["iterations"]), float(z["error_bound"]), float(z["seconds"]))
        except (OSError, KeyError, ValueError):
            pass  # unreadable cache: recompute
    mq = solve_mountain_car(settings)
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{np.random.randint(1 << 30)}.npz")
    np.savez(tmp, position=mq.position, velocity=mq.velocity, action=mq.action, q=mq.q,
             iterations=mq.iterations, error_bound=mq.error_bound, seconds=mq.seconds)
    tmp.replace(path)
    return mq


def rollout_gymnasium(mq: MountainCarQ, episodes: int = 100, seed: int = 0, max_steps: int | None = None) -> dict:
    """Roll out the Boltzmann policy of ``mq`` in gymnasium's ``MountainCarContinuous-v0``.

    Each episode starts from the environment's reset distribution (``x ~ U[-0.6, -0.4]``,
    ``v = 0``; reset seed ``seed + i``) and ends at the goal (``terminated``) or at the time limit
    of 999 steps (``truncated``). Actions are sampled with ``numpy.random.default_rng(seed)``.

    Returns
    -------
    dict
        ``goals`` (episodes that reached the goal), ``episodes``, ``steps`` (per episode),
        ``returns`` (undiscounted, per episode).
    """
    rng = np.random.default_rng(seed)  # the action draws (the same stream as rollout's own for a sampler)
    return rollout("MountainCarContinuous-v0", lambda obs: mq.sample_action(obs[0:1], obs[1:2], rng)[:1], episodes,
                   seed, max_steps)


# =============================================================================================
# Step 2: the modified (Fokker-Planck) Mountain Car
# =============================================================================================
#: Physical box of (position, velocity, action) and its map onto the normalised box [-1, 1]^3.
