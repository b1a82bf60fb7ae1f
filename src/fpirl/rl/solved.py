r"""Re-solve the reward of a result under its own or changed dynamics (``fpirl solve``).

.. math::

    Q^*(s,a) = R(s,a) + \gamma\, E_{s'\sim T_c(\cdot|s,a)}\big[V^*(s')\big],\qquad
    V^*(s) = \beta^{-1}\log\int_A e^{\beta Q^*(s,a)}da,\qquad \pi^* = e^{\beta(Q^* - V^*)},

with ``R`` the result's ``reward`` (or another result's, on the same grid), ``T_c`` the result's
recovered transition under the change ``c`` (:mod:`fpirl.rl.dynamics`), and the result's ``beta``
and ``gamma``; solved by soft policy iteration (:func:`fpirl.rl.solve_soft`).
"""

from __future__ import annotations

import warnings

import numpy as np

from ..core._errors import FpirlInputError
from ._results import nodal_field, open_result, result_gamma, result_grid, reward_convention
from .dynamics import DynamicsChange, transition_from_result
from .solver import solve_soft
import xarray as xr

__all__ = ["solve_result"]

#: variables of a result that describe the fitted policy and no longer apply after a re-solve
_STALE = ("policy_lower", "policy_upper", "policy_true", "policy_kl", "q_value_true")


def _warn_other_model(source, beta: float, gamma: float, dt: float) -> None:
    """A warning where the --reward-from result's reward was recovered with another discount, beta or dt: the
    inverse Bellman equation ties a reward to them, and the solve uses this result's."""
    theirs = {"gamma": result_gamma(source), "beta": float(source.attrs.get("beta", beta)),
              "dt": float(source.attrs.get("dt", dt))}
    ours = {"gamma": gamma, "beta": beta, "dt": dt}
    differ = [k for k in ours if not np.isclose(theirs[k], ours[k], rtol=1e-9, atol=0.0)]
    if differ:
        warnings.warn("the --reward-from reward was recovered with " + ", ".join(f"{k}={theirs[k]:.6g}" for k in differ)
                      + " and is solved with this result's " + ", ".join(f"{k}={ours[k]:.6g}" for k in differ)
                      + ": its own agents' policy is not what comes back even under their dynamics", UserWarning,
                      stacklevel=3)


def _same_grid(a, b) -> bool:
    return (a.names == b.names and a.roles == b.roles and a.shape == b.shape and a.boundary == b.boundary
            and all(np.allclose(x, y, rtol=0, atol=1e-12 * max(1.0, np.abs(x).max())) for x, y in zip(a.coords, b.coords)))


def solve_result(result, change: DynamicsChange | None = None, reward_from=None, method: str = "policy",
                 tol: float = 1e-9):
    """Soft-optimal control of a result's reward under its (changed) transition (module docstring).

    Parameters
    ----------
    result : xarray.Dataset or path
        A result with ``policy``, ``reward``, ``hermite_coefficients``, ``beta`` and ``dt``.
    change : DynamicsChange, optional
        Change of the dynamics (default none: the result's own transition).
    reward_from : xarray.Dataset or path, optional
        Take the reward from this result instead (it must be on the same grid).
    method : {'policy', 'value'}
    tol : float

    Returns
    -------
    xarray.Dataset
        The result with ``q_value`` and ``policy`` replaced by the soft-optimal ones, ``value``
        (``V*``, state dims) added, and attrs ``solve_noise_scale``, ``solve_drift_scale``,
        ``solve_action_drift``, ``solve_drift_callable``, ``solve_reward_from``,
        ``solve_reward_convention``, ``solve_method``, ``solve_iterations``, ``solve_error``.

    Raises
    ------
    FpirlInputError
        Result without a policy or reward, a reward file on another grid, or a bad change.
    """

    ds = open_result(result)
    change = DynamicsChange() if change is None else change
    grid = result_grid(ds)
    if not (grid.state_axes and grid.action_axes):
        raise FpirlInputError("the result has no state or no action axis: there is no policy to re-solve")
    if "policy" not in ds.data_vars:
        raise FpirlInputError("the result has no policy (fit data with state and action axes to get one)")
    source = ds
    if reward_from is not None:
        source = open_result(reward_from)
        if not _same_grid(result_grid(source), grid):
            raise FpirlInputError("the --reward-from result is on another grid than the result (axes, roles, nodes "
                                  "and boundary must be the same)")
    reward = nodal_field(source, "reward", grid)
    transition = transition_from_result(ds, change)
    beta, gamma = float(ds.attrs["beta"]), result_gamma(ds)
    if reward_from is not None:
        _warn_other_model(source, beta, gamma, float(ds.attrs["dt"]))
    sol = solve_soft(grid, reward, transition, beta, gamma, method=method, tol=tol)
    out = ds.drop_vars([v for v in _STALE if v in ds.data_vars]).copy()
    dims = grid.names
    state_dims = tuple(grid.names[i] for i in grid.state_axes)
    out["q_value"] = xr.Variable(dims, sol.q, {"long_name": "soft-optimal Q*(s, a) of the reward under the dynamics "
                                               "of the solve_* attrs"})
    out["policy"] = xr.Variable(dims, sol.policy, {"long_name": "soft-optimal policy pi*(a | s) = exp(beta (Q* - V*))"})
    out["value"] = xr.Variable(state_dims, sol.value, {"long_name": "soft value V*(s) = log int exp(beta Q*) da / beta"})
    if reward_from is not None:
        out["reward"] = xr.Variable(dims, reward, {"long_name": "reward R(s, a) of the --reward-from result"})
    attrs = dict(out.attrs)
    attrs.update(change.attrs())
    attrs.update({
        "title": "fpirl solved result",
        "solve_reward_from": str(reward_from) if reward_from is not None and not isinstance(reward_from, xr.Dataset)
        else ("dataset" if reward_from is not None else "result"),
        "solve_reward_convention": reward_convention(source),
        "solve_method": sol.method, "solve_iterations": int(sol.iterations), "solve_error": float(sol.error_bound),
        "gamma": gamma,
    })
    out.attrs = attrs
    return out
