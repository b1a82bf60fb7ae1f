r"""The policy as a map over the actions, for figures of results with state and action axes.

On the FE nodes a sharp policy is one bright node (a "dot"). The fitted ``psi`` is a Hermite
expansion, defined everywhere, so the policy (eq. ``boltzmann_policy``)
:math:`\pi(a|s) = e^{-\beta\psi(s,a)} / \int_A e^{-\beta\psi(s,a')}\,da'` is evaluated here on a fine
action grid (``n`` points per action axis, trapezoid rule) and averaged over the observed states,
:math:`\bar\pi(a) = \sum_s w(s)\,\pi(a|s) / \sum_s w(s)`, with ``w(s)`` the result's
``data_density`` summed over the actions at state node ``s`` (uniform when the result has none).
When ``psi`` does not depend on the state (its nodal values vary along the state axes by less than
1e-9 of their range), one state is enough and the potential and reward are maps over the actions
too. The data's action support (:mod:`fpirl.mdp.support`) is carried to the fine grid by nearest
node; mode and mean of :math:`\bar\pi` are taken within it.
"""

from __future__ import annotations

import numpy as np
from ..core._errors import FpirlInputError
from ..io.netcdf import grid_from_dataset, model_from_result
from .support import _mask

__all__ = ["action_maps", "psi_constant_in_state"]


def psi_constant_in_state(grid, psi, rtol: float = 1e-9) -> bool:
    """Whether the nodal ``psi`` varies along the state axes by less than ``rtol`` of its range."""
    S = tuple(grid.state_axes)
    psi = np.asarray(psi, dtype=float)
    span = float(np.ptp(psi))
    if not S or span == 0.0:
        return bool(S)
    return float(np.max(np.ptp(psi, axis=S))) <= rtol * span


def _trapezoid(n: int, h: float) -> np.ndarray:
    w = np.full(n, h)
    w[[0, -1]] *= 0.5
    return w


def action_maps(result, n: int = 81, max_states: int = 400) -> dict | None:
    """Fine action-space maps of a result (module docstring); None without state and action axes or
    with more than two action axes.

    Returns
    -------
    dict
        ``names`` (action axis names), ``coords`` (fine action coordinates per axis), ``policy``
        (:math:`\\bar\\pi`, shape ``(n,)*d_a``), ``support`` (bool, same shape, or None; on the
        action nodes: ``node_support``), ``mode``
        and ``mean`` (within the support when there is one), ``constant`` (psi independent of the
        state), and when ``constant``: ``potential`` (fine, zero minimum) and ``reward`` with its
        ``reward_coords`` (nodal, averaged over the state nodes). None also when the result
        has no Hermite coefficients.
    """

    grid = grid_from_dataset(result, "potential")
    S, A = list(grid.state_axes), list(grid.action_axes)
    if not S or not A or len(A) > 2:
        return None
    try:
        model = model_from_result(result, grid)
    except FpirlInputError:  # no Hermite coefficients (or no dt): only the nodal fields can be drawn
        return None
    psi_nodes = np.asarray(result["potential"].transpose(*grid.names).values, dtype=float)
    constant = psi_constant_in_state(grid, psi_nodes)
    density = None
    if "data_density" in result.data_vars:
        density = np.asarray(result["data_density"].transpose(*grid.names).values, dtype=float)
    mass = (density if density is not None else np.ones(grid.shape)) * grid.node_weights()
    w_state = mass.sum(axis=tuple(A)).ravel()  # state nodes in C order
    state_nodes = np.stack(np.meshgrid(*[grid.coords[i] for i in S], indexing="ij"), -1).reshape(-1, len(S))
    if constant:
        keep = np.array([int(np.argmax(w_state))])
    else:
        keep = np.flatnonzero(w_state > 0)
        if keep.size > max_states:  # the heaviest states carry the average
            keep = keep[np.argsort(w_state[keep])[::-1][:max_states]]
    fine = [np.linspace(grid.lower[i], grid.upper[i], n) for i in A]
    act = np.stack(np.meshgrid(*fine, indexing="ij"), -1).reshape(-1, len(A))
    quad = np.ones(())
    for c in fine:
        quad = np.multiply.outer(quad, _trapezoid(n, c[1] - c[0]))
    quad = quad.ravel()
    pts = np.empty((keep.size, act.shape[0], grid.ndim))
    pts[..., S] = state_nodes[keep][:, None, :]
    pts[..., A] = act[None]
    psi = np.asarray(model.potential(pts.reshape(-1, grid.ndim))).reshape(keep.size, -1)
    logits = -model.beta * (psi - psi.min(axis=1, keepdims=True))
    pi = np.exp(logits)
    pi /= (pi * quad).sum(axis=1, keepdims=True)
    weights = w_state[keep] if w_state[keep].sum() > 0 else np.ones(keep.size)
    pbar = (weights[:, None] * pi).sum(0) / weights.sum()
    shape = (n,) * len(A)
    out = {"names": [grid.names[i] for i in A], "coords": fine, "policy": pbar.reshape(shape), "constant": constant,
           "support": None, "node_support": None}
    inside = np.ones(act.shape[0], dtype=bool)
    if "data_support" in result.data_vars and density is not None:

        n_obs = float(result.attrs.get("data_observations", 0))
        if n_obs > 0:  # the data's action marginal, the rule of fpirl.mdp.support
            node_supp = _mask(mass.sum(axis=tuple(S)) * n_obs)
        else:  # an action node where any state node has data
            joint = np.asarray(result["data_support"].transpose(*grid.names).values) > 0
            node_supp = joint.any(axis=tuple(S))
        idx = [np.clip(np.rint((act[:, k] - grid.lower[i]) / grid.spacing[i]).astype(int), 0, grid.shape[i] - 1)
               for k, i in enumerate(A)]
        inside = node_supp[tuple(idx)]
        out["support"] = inside.reshape(shape)
        out["node_support"] = node_supp
        if not inside.any():  # no support recorded: summarise the whole box
            inside = np.ones(act.shape[0], dtype=bool)
    masked = np.where(inside, pbar, -np.inf)
    out["mode"] = act[int(np.argmax(masked))]
    w_in = pbar * quad * inside
    out["mean"] = (w_in[:, None] * act).sum(0) / max(w_in.sum(), 1e-300)
    if constant:
        out["potential"] = (psi[0] - psi[0].min()).reshape(shape)
        if "reward" in result.data_vars:
            reward = np.asarray(result["reward"].transpose(*grid.names).values, dtype=float)
            out["reward"] = reward.mean(axis=tuple(S))
            out["reward_coords"] = [grid.coords[i] for i in A]
    return out
