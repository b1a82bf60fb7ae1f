r"""The recovered reward as a function of continuous ``(s, a)`` in the data's units.

.. math:: R(s,a) = Q(s,a) - \gamma\, E_{s'\sim T(\cdot|s,a)}\big[V(s')\big],\qquad Q = -\psi,

with ``psi`` the fitted Hermite potential (exact at any point), ``V`` the nodal state value of
the result's reward convention (``'soft'``: ``beta^-1 log int exp(beta Q) da``; ``'expected'``:
``int pi Q da``) and ``T`` the recovered Gaussian transition evaluated at the point's own mean
``s - grad_s psi(s, a) dt`` with the same discretisation as on the grid (so that at the grid nodes
the function equals the result's ``reward`` variable).
"""

from __future__ import annotations

import numpy as np

from ..core._errors import FpirlInputError
from ..core.grid import into_box
from ..core.validation import _state_weights
from ._results import open_result, result_gamma, reward_convention
from ..io.netcdf import model_from_result
from ..mdp.recovery import boltzmann_policy, soft_state_value
from ..mdp._kernel_1d import _kernel_1d

__all__ = ["RecoveredReward", "reward_function"]

_BLOCK_ENTRIES = 1 << 22  # points x state nodes per block (~32 MB of float64)


class RecoveredReward:
    """Callable ``R(s, a)`` of a result (:func:`reward_function`).

    Call as ``reward(points)`` with joint points of shape ``(..., d)`` in grid axis order, or
    ``reward(s, a)`` with states ``(..., n_state)`` and actions ``(..., n_action)``. Points are
    wrapped into the box on periodic axes and clipped on reflecting ones.

    Attributes
    ----------
    grid, beta, dt, gamma, convention
        Of the result.
    """

    def __init__(self, ds):

        model = model_from_result(ds)
        self.grid = g = model.grid
        if not (g.state_axes and g.action_axes):
            raise FpirlInputError("the result has no state or no action axis: it has no reward")
        self.hermite, self.coef, self.beta, self.dt = model.hermite, model.coef, model.beta, model.dt
        self.gamma = result_gamma(ds)
        self.convention = reward_convention(ds)
        self.discretization = str(ds.attrs.get("transition_discretization", "moment"))
        q = -self.hermite.evaluate_grid(self.coef, g.coords)
        if self.convention == "soft":
            v = soft_state_value(g, q, self.beta)
        else:
            v = g.integrate(boltzmann_policy(g, -q, self.beta) * q, axes=g.action_axes)
        self.value = v
        self._vw = v * _state_weights(g)
        self.sigma = float(np.sqrt(2.0 * self.dt / self.beta))

    def _into_box(self, pts: np.ndarray) -> np.ndarray:
        lo = np.array([a.lower for a in self.grid.axes])
        hi = np.array([a.upper for a in self.grid.axes])
        return into_box(pts, lo, hi, self.grid.periodic)

    def __call__(self, s, a=None) -> np.ndarray:

        g = self.grid
        if a is None:
            pts = np.asarray(s, dtype=float)
        else:
            s, a = np.atleast_1d(np.asarray(s, dtype=float)), np.atleast_1d(np.asarray(a, dtype=float))
            lead = np.broadcast_shapes(s.shape[:-1], a.shape[:-1])
            s, a = np.broadcast_to(s, lead + s.shape[-1:]), np.broadcast_to(a, lead + a.shape[-1:])
            pts = np.empty(s.shape[:-1] + (g.ndim,))
            pts[..., list(g.state_axes)] = s
            pts[..., list(g.action_axes)] = a
        if pts.shape[-1] != g.ndim:
            raise FpirlInputError(f"points must have {g.ndim} coordinates (grid axis order), got {pts.shape[-1]}")
        shape = pts.shape[:-1]
        pts = self._into_box(pts.reshape(-1, g.ndim))
        out = np.empty(pts.shape[0])
        block = max(1, _BLOCK_ENTRIES // self._vw.size)
        for start in range(0, pts.shape[0], block):
            p = pts[start:start + block]
            q = -self.hermite.evaluate(self.coef, p)
            grad = self.hermite.gradient(self.coef, p)
            acc = None
            for k, i in enumerate(g.state_axes):
                f = _kernel_1d(g.axes[i], p[:, i] - grad[:, i] * self.dt, self.sigma, self.discretization)
                acc = f if acc is None else (acc[:, :, None] * f[:, None, :]).reshape(p.shape[0], -1)
            out[start:start + block] = q - self.gamma * acc @ self._vw.ravel()
        return out.reshape(shape)


def reward_function(result) -> RecoveredReward:
    r"""The recovered reward of a result as a callable of ``(s, a)`` in data units (module docstring).

    .. math:: R(s,a) = -\psi(s,a) - \gamma\, E_{s'\sim T(\cdot|s,a)}\big[V(s')\big]

    Parameters
    ----------
    result : xarray.Dataset or path
        A result dataset with ``hermite_coefficients``, ``beta`` and ``dt`` (``fpirl fit``).

    Returns
    -------
    RecoveredReward
        ``reward(points)`` or ``reward(s, a)``; at the grid nodes it equals the result's ``reward``.
    """
    return RecoveredReward(open_result(result))
