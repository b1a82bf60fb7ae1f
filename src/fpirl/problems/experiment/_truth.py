"""The ground truth of an experiment as callables: a Hermite potential ``psi`` (and its gradient)
and the paper's Boltzmann initial density ``p_0(s, a) = rho_0(s) pi(a|s)``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ...core._errors import FpirlInputError
from ...core.hermite import HermiteSpace
from ...core.quadrature import composite_rule


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
