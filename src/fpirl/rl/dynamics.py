r"""The transition of a fitted model, optionally changed (new dynamics for the recovered reward).

The recovered transition (eq. ``mdp_transition``, :class:`fpirl.mdp.GaussianTransition`) is a
Gaussian step with mean ``s - grad_s psi(s, a) dt`` and standard deviation
``sigma = sqrt(2 dt / beta)`` per state axis. A *change of dynamics* rewrites it as

.. math::

    s' \sim \mathcal{N}\Big(s + \big[\kappa_d\,(-\nabla_s\psi(s,a)) + \kappa_a\, a + f(s,a)\big]\,\Delta t,\;
    (\kappa_\sigma \sigma)^2 I\Big),

with ``kappa_d`` the drift scale (on the model's own state drift ``-grad_s psi``), ``kappa_a`` the
action push (action ``i`` pushes state axis ``i``: ``K a_i dt`` added to the mean step of state
axis ``i``; needs as many action axes as state axes), ``f`` an optional extra drift given as a
callable and ``kappa_sigma`` the noise scale. ``kappa_d = 1, kappa_a = 0, f = 0, kappa_sigma = 1``
is the recovered transition itself. The kernel is discretised exactly as the recovered one
(wrapped on periodic axes, folded at walls, moment-matched by default).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from ..core._errors import FpirlInputError
from ..core.grid import Grid
from ..core.validation import positive
from ..mdp.transition import GaussianTransition
from ..io.netcdf import model_from_result
from ._results import open_result

__all__ = ["DynamicsChange", "changed_transition", "transition_from_result"]




@dataclass(frozen=True)
class DynamicsChange:
    """A change of the recovered dynamics (module docstring).

    Attributes
    ----------
    noise_scale : float
        Factor on the transition's standard deviation (finite, > 0).
    drift_scale : float
        Factor on the model's own state drift ``-grad_s psi`` (finite, > 0).
    action_drift : float
        ``K``: ``K a_i dt`` is added to the mean step of state axis ``i`` (finite; 0 = none).
    drift : callable, optional
        Extra drift ``f(points) -> (..., n_state)`` of joint points ``(..., d)`` in data units
        (grid axis order); ``f dt`` is added to the mean step.
    """

    noise_scale: float = 1.0
    drift_scale: float = 1.0
    action_drift: float = 0.0
    drift: Callable | None = None

    def __post_init__(self):
        object.__setattr__(self, "noise_scale", positive(self.noise_scale, "noise scale"))
        object.__setattr__(self, "drift_scale", positive(self.drift_scale, "drift scale"))
        k = float(self.action_drift)
        if not np.isfinite(k):
            raise FpirlInputError(f"action drift must be finite, got {k:g}")
        object.__setattr__(self, "action_drift", k)

    @property
    def is_identity(self) -> bool:
        return (self.noise_scale == 1.0 and self.drift_scale == 1.0 and self.action_drift == 0.0
                and self.drift is None)

    def attrs(self) -> dict:
        """The change as dataset attributes (``solve_<name>``)."""
        out = {f"solve_{k}": v for k, v in asdict(self).items() if k != "drift"}
        out["solve_drift_callable"] = int(self.drift is not None)
        return out


def changed_transition(grid: Grid, grad_s_psi, beta: float, dt: float, change: DynamicsChange | None = None,
                       discretization: str = "moment") -> GaussianTransition:
    r"""The transition of ``psi`` under a change of dynamics.

    .. math::

        \mu(s,a) = s + \big[\kappa_d(-\nabla_s\psi) + \kappa_a a + f(s,a)\big]\Delta t,\qquad
        \mathrm{sd} = \kappa_\sigma \sqrt{2\Delta t/\beta}

    built as a :class:`~fpirl.mdp.GaussianTransition` with the state gradient
    ``-(kappa_d (-grad_s psi) + kappa_a a + f)`` and the inverse temperature ``beta / kappa_sigma^2``
    (which enters the transition only through its standard deviation).

    Parameters
    ----------
    grid : Grid
    grad_s_psi : array_like
        Shape ``(n_state, *grid.shape)``.
    beta, dt : float
    change : DynamicsChange, optional
        Default: no change.
    discretization : {'moment', 'nodal', 'projection'}

    Returns
    -------
    GaussianTransition
    """
    change = DynamicsChange() if change is None else change
    grad = np.asarray(grad_s_psi, dtype=float)
    drift = -change.drift_scale * grad
    ds, acts = grid.state_axes, grid.action_axes
    if change.action_drift != 0.0:
        if len(acts) != len(ds):
            raise FpirlInputError(f"an action push (--action-drift) needs as many action axes as state axes (action i pushes state i); "
                                  f"the grid has {len(ds)} state and {len(acts)} action axes")
        for k, i in enumerate(acts):
            a = grid.axes[i].nodes.reshape([-1 if j == i else 1 for j in range(grid.ndim)])
            drift[k] = drift[k] + change.action_drift * a
    if change.drift is not None:
        pts = np.stack(np.meshgrid(*grid.coords, indexing="ij"), axis=-1)
        extra = np.asarray(change.drift(pts), dtype=float)
        if extra.shape != grid.shape + (len(ds),):
            raise FpirlInputError(f"the drift callable returned shape {extra.shape}, expected {grid.shape + (len(ds),)}")
        if not np.all(np.isfinite(extra)):
            raise FpirlInputError("the drift callable returned non-finite values")
        drift = drift + np.moveaxis(extra, -1, 0)
    return GaussianTransition(grid, -drift, beta / change.noise_scale**2, dt, discretization=discretization)


def transition_from_result(result, change: DynamicsChange | None = None,
                           discretization: str | None = None) -> GaussianTransition:
    """The (changed) transition of a result dataset (or path): its Hermite ``psi``, ``beta`` and ``dt``.

    ``discretization`` defaults to the result's ``transition_discretization`` attr, else 'moment'.
    See :func:`changed_transition`.
    """

    ds = open_result(result)
    model = model_from_result(ds)
    grid = model.grid
    if not (grid.state_axes and grid.action_axes):
        raise FpirlInputError("the result has no state or no action axis: there is no MDP to solve")
    grad = model.hermite.gradient_grid(model.coef, grid.coords, grid.state_axes)
    disc = discretization or str(ds.attrs.get("transition_discretization", "moment"))
    return changed_transition(grid, grad, model.beta, model.dt, change, disc)
