r"""gymnasium interface (the ``gym`` extra): a recovered policy, a reward wrapper and rollouts.

Units: a result lives on its grid box ``[lower_k, upper_k]`` per axis. When the result has the
attrs ``physical_lower`` / ``physical_upper`` (one value per grid axis, e.g. the Mountain Car
benchmark), grid axis ``k`` maps linearly onto the environment's units,

.. math:: p_k = p^{lo}_k + (x_k - \mathrm{lower}_k)\,\frac{p^{hi}_k - p^{lo}_k}{\mathrm{upper}_k - \mathrm{lower}_k};

otherwise the environment's observations and actions are taken to be in the grid's units.

The policy is the Boltzmann policy of a nodal Q on the action nodes,
``P(a_j | s) = w_j exp(beta Q(s, a_j)) / sum_l w_l exp(beta Q(s, a_l))`` (``w`` the action
quadrature weights, so ``P`` is the grid's ``pi(a|s) da``), with ``Q(s, .)`` multilinear in the
state between the nodes (wrapped on periodic grids, clamped at walls).
"""

from __future__ import annotations

import warnings

import numpy as np

from ..core._errors import FpirlInputError
from ._results import nodal_field, open_result, result_grid
from .reward import reward_function
from .solved import solve_result

__all__ = ["RecoveredPolicy", "check_spaces", "reward_wrapper", "rollout"]


class _Units:
    """Linear map between a grid's box and the environment's (physical) units."""

    def __init__(self, grid, ds=None):
        self.lower = np.array([a.lower for a in grid.axes])
        self.upper = np.array([a.upper for a in grid.axes])
        lo = None if ds is None else ds.attrs.get("physical_lower")
        hi = None if ds is None else ds.attrs.get("physical_upper")
        self.mapped = lo is not None and hi is not None  # the environment's units mapped onto the box
        if not self.mapped:
            self.plower, self.pupper = self.lower.copy(), self.upper.copy()
        else:
            self.plower, self.pupper = (np.asarray(v, dtype=float).ravel() for v in (lo, hi))
            if self.plower.size != grid.ndim or self.pupper.size != grid.ndim or np.any(self.pupper <= self.plower):
                raise FpirlInputError("the result's physical_lower / physical_upper attrs do not match its grid")

    def to_grid(self, p, axes):
        axes = list(axes)
        return self.lower[axes] + (np.asarray(p, dtype=float) - self.plower[axes]) * (
            (self.upper[axes] - self.lower[axes]) / (self.pupper[axes] - self.plower[axes]))

    def to_physical(self, x, axes):
        axes = list(axes)
        return self.plower[axes] + (np.asarray(x, dtype=float) - self.lower[axes]) * (
            (self.pupper[axes] - self.plower[axes]) / (self.upper[axes] - self.lower[axes]))


class RecoveredPolicy:
    """The Boltzmann policy of a result's Q, acting on environment observations (module docstring).

    Parameters
    ----------
    result : xarray.Dataset or path
    policy : {'recovered', 'resolved'}
        'recovered': ``Q = -psi`` (the fitted policy). 'resolved': the soft-optimal policy of the
        result's reward under its recovered transition: the ``q_value`` of a file written by
        ``fpirl solve`` (attr ``solve_method``), else solved here (:func:`fpirl.rl.solve_result`).
    seed : int, optional
        Seed of the sampling generator of :meth:`predict`.
    """

    def __init__(self, result, policy: str = "recovered", seed=None):
        ds = open_result(result)
        if policy not in ("recovered", "resolved"):
            raise FpirlInputError(f"policy must be 'recovered' or 'resolved', got {policy!r}")
        self.grid = g = result_grid(ds)
        if not (g.state_axes and g.action_axes):
            raise FpirlInputError("the result has no state or no action axis: it has no policy")
        if policy == "recovered":
            q = -nodal_field(ds, "potential", g)
        elif "solve_method" in ds.attrs:
            q = nodal_field(ds, "q_value", g)
        else:

            q = nodal_field(solve_result(ds), "q_value", g)
        self.beta = float(ds.attrs["beta"])
        self.units = _Units(g, ds)
        self.observations = self.outside = 0  # observations seen, and those outside the grid's box (rollout warns)
        perm = list(g.state_axes) + list(g.action_axes)
        n_s = int(np.prod([g.shape[i] for i in g.state_axes]))
        self._q = np.transpose(q, perm).reshape(n_s, -1)
        w = np.ones(())
        nodes = []
        for i in g.action_axes:
            w = np.multiply.outer(w, g.axes[i].node_weights)
            nodes.append(g.axes[i].nodes)
        self._logw = np.log(w.ravel())
        self.action_nodes = np.stack([m.ravel() for m in np.meshgrid(*nodes, indexing="ij")], axis=-1)
        self.rng = np.random.default_rng(seed)

    def _state_q(self, obs) -> np.ndarray:
        g = self.grid
        obs = np.atleast_2d(np.asarray(obs, dtype=float))
        if obs.shape[-1] != len(g.state_axes):
            raise FpirlInputError(f"observations have {obs.shape[-1]} components, the result has {len(g.state_axes)} "
                                  "state axes")
        s = self.units.to_grid(obs, g.state_axes)
        lo, hi = self.units.lower[list(g.state_axes)], self.units.upper[list(g.state_axes)]
        self.observations += s.shape[0]
        self.outside += int(np.sum(np.any((s < lo - 1e-9 * (hi - lo)) | (s > hi + 1e-9 * (hi - lo)), axis=1)))
        idx = np.zeros((s.shape[0], 1), dtype=np.intp)
        wts = np.ones((s.shape[0], 1))
        for k, i in enumerate(g.state_axes):
            ax = g.axes[i]
            n = ax.nodes.size
            t = (s[:, k] - ax.nodes[0]) / ax.spacing
            if g.periodic:
                j0 = np.floor(t).astype(np.intp)
                f = t - j0
                j0, j1 = j0 % n, (j0 + 1) % n
            else:
                t = np.clip(t, 0.0, n - 1.0)
                j0 = np.minimum(np.floor(t).astype(np.intp), n - 2)
                f = t - j0
                j1 = j0 + 1
            idx = np.concatenate([idx * n + j0[:, None], idx * n + j1[:, None]], axis=1)
            wts = np.concatenate([wts * (1 - f)[:, None], wts * f[:, None]], axis=1)
        return np.einsum("nc,nca->na", wts, self._q[idx])

    def probabilities(self, obs) -> np.ndarray:
        """``P(a_j | s)`` over the action nodes, shape ``(n_obs, n_action_nodes)`` (rows sum to 1)."""
        logits = self.beta * self._state_q(obs) + self._logw
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        return p / p.sum(axis=1, keepdims=True)

    def sample(self, obs, rng=None) -> np.ndarray:
        """Actions drawn from the policy, in environment units, shape ``(n_obs, n_action_axes)``."""
        rng = self.rng if rng is None else rng
        p = self.probabilities(obs)
        u = rng.uniform(size=(p.shape[0], 1))
        j = np.minimum((np.cumsum(p, axis=1) < u).sum(axis=1), p.shape[1] - 1)
        return self.units.to_physical(self.action_nodes[j], self.grid.action_axes)

    def predict(self, obs, deterministic: bool = False) -> np.ndarray:
        """The action for one observation (environment units, shape ``(n_action_axes,)``): a sample
        of the policy, or its most probable action node when ``deterministic``."""
        if deterministic:
            j = int(np.argmax(self.probabilities(obs)[0]))
            return self.units.to_physical(self.action_nodes[j], self.grid.action_axes)
        return self.sample(obs)[0]


def check_spaces(env, grid) -> None:
    """One-line :class:`~fpirl.FpirlInputError` unless ``env`` observes the result's state axes and acts on
    its action axes: a ``Box`` of one component per axis each (the policy and reward are continuous)."""
    from gymnasium.spaces import Box

    name = getattr(getattr(env, "spec", None), "id", None) or type(env).__name__
    for what, space, axes in (("observation", env.observation_space, grid.state_axes),
                              ("action", env.action_space, grid.action_axes)):
        if not (isinstance(space, Box) and tuple(space.shape) == (len(axes),)):
            names = ", ".join(grid.names[i] for i in axes)
            raise FpirlInputError(f"{name}: its {what} space is {space}, the result has {len(axes)} continuous "
                                  f"{'state' if what == 'observation' else what} axes ({names}): the env needs a Box "
                                  f"{what} space of shape ({len(axes)},)")


def reward_wrapper(env, result):
    """Wrap a gymnasium env so that its reward is the recovered ``R(s, a)`` (:func:`fpirl.rl.reward_function`).

    The reward of a step is ``R(obs, action)`` at the observation before the step, mapped into the
    result's units (module docstring). The task is **continuing**: termination adds no reward
    (no goal bonus, no jump), the env's own reward is kept in ``info['env_reward']``.
    """
    import gymnasium as gym


    ds = open_result(result)
    reward = reward_function(ds)
    check_spaces(env, reward.grid)
    units = _Units(reward.grid, ds)

    class RecoveredRewardWrapper(gym.Wrapper):
        def reset(self, **kwargs):
            obs, info = self.env.reset(**kwargs)
            self._obs = obs
            return obs, info

        def step(self, action):
            g = reward.grid
            s = units.to_grid(np.asarray(self._obs, dtype=float), g.state_axes)
            a = units.to_grid(np.atleast_1d(np.asarray(action, dtype=float)), g.action_axes)
            obs, r_env, terminated, truncated, info = self.env.step(action)
            info = dict(info, env_reward=r_env)
            self._obs = obs
            return obs, float(reward(s, a)), terminated, truncated, info

    return RecoveredRewardWrapper(env)


def rollout(env, policy, episodes: int = 100, seed: int = 0, max_steps: int | None = None) -> dict:
    """Roll ``policy`` out in a gymnasium env for ``episodes`` seeded episodes.

    Episode ``i`` resets with ``seed + i``; actions are sampled with ``numpy.random.default_rng(seed)``.

    Parameters
    ----------
    env : gymnasium.Env or str
        An env, or an id for ``gymnasium.make``.
    policy : RecoveredPolicy or callable
        ``policy.sample(obs, rng)`` or ``policy(obs) -> action``.
    episodes, seed : int
    max_steps : int, optional
        Time limit of ``gymnasium.make`` (with an id).

    Returns
    -------
    dict
        ``episodes``, ``goals`` (episodes that ended by ``terminated``), ``steps`` and ``returns``
        (undiscounted sum of the env's reward) per episode.
    """
    import gymnasium as gym

    own = isinstance(env, str)
    if own:
        env = gym.make(env, max_episode_steps=max_steps) if max_steps else gym.make(env)
    if hasattr(policy, "grid"):
        try:
            check_spaces(env, policy.grid)
        except FpirlInputError:
            if own:
                env.close()
            raise
    rng = np.random.default_rng(seed)
    act = (lambda o: policy.sample(o, rng)[0]) if hasattr(policy, "sample") else policy
    goals, steps, returns = 0, [], []
    try:
        for i in range(int(episodes)):
            obs, _ = env.reset(seed=int(seed) + i)
            total, k = 0.0, 0
            while True:
                a = np.asarray(act(obs), dtype=getattr(env.action_space, "dtype", np.float32))
                obs, r, terminated, truncated, _ = env.step(a)
                total += float(r)
                k += 1
                if terminated or truncated:
                    break
            goals += int(terminated)
            steps.append(k)
            returns.append(total)
    finally:
        if own:
            env.close()
    if getattr(policy, "outside", 0) and not policy.units.mapped:  # (mapped units: excursions at the box's edge)
        warnings.warn(f"{policy.outside} of {policy.observations} observations lay outside the result's box "
                      f"({'wrapped' if policy.grid.periodic else 'clamped'} onto it) and the result has no "
                      "physical_lower / physical_upper attrs mapping the environment's units onto it: are the units "
                      "the same?", UserWarning, stacklevel=2)
    return {"episodes": int(episodes), "goals": goals, "steps": np.array(steps), "returns": np.array(returns)}
