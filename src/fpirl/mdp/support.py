r"""Where the data are, and summaries of the policy taken only there.

A fitted potential is defined on the whole box, but it is informed only where observations lie.
A policy whose mass sits at actions the data never show (e.g. a velocity no agent had) is an
extrapolation of the basis, not a finding, so its summaries are taken within the data's support:

* **Density snapshots** (:func:`snapshot_support`): the time-mean snapshot, scaled to integrate to 1, and the
  nodes where it is at least :data:`SUPPORT_RELATIVE` of its largest value.
* **Data density and support** (:func:`data_support`): the observations deposited onto the FE
  nodes by cloud-in-cell (:func:`fpirl.tracks.binning.cloud_in_cell`, mass conserving); the
  density is that mass over ``n`` times the node's quadrature weight (integrates to 1), and a node
  belongs to the *support* when its mass is at least one observation and at least
  :data:`SUPPORT_RELATIVE` of the largest node mass.
* **Policy summaries** (:func:`policy_summary`): the policy averaged over the observed states,
  :math:`\bar\pi(a) = \sum_s w(s)\,\pi(a|s) / \sum_s w(s)` with :math:`w(s)` the data's mass at state
  node ``s``; its *action support* is where the data's action marginal has support (same rule).
  The reported mode is the arg-max of :math:`\bar\pi` over the action nodes in the support, the
  mean action :math:`\int_{supp} a\,\bar\pi\,da / \int_{supp} \bar\pi\,da`, and
  ``mass_outside`` :math:`= 1 - \int_{supp}\bar\pi\,da`; above :data:`OUTSIDE_WARNING` a warning says
  so (and names the mode the policy would have without the restriction).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from ..core._errors import FpirlInputError
from ..core.grid import Grid
from ..tracks.binning import cloud_in_cell
import xarray as xr

__all__ = ["OUTSIDE_WARNING", "SUPPORT_RELATIVE", "PolicySummary", "data_support", "policy_summary",
           "snapshot_support", "snapshot_support_extra", "support_extra"]

#: a node is in the support when its deposited mass is >= this fraction of the largest node mass (and >= 1)
SUPPORT_RELATIVE = 1e-3
#: warn when more than this share of the (state-averaged) policy's mass lies outside the action support
OUTSIDE_WARNING = 0.5


def relative_support(field: np.ndarray) -> np.ndarray:
    """The nodes where a non-negative ``field`` (a time-mean density) is at least :data:`SUPPORT_RELATIVE` of its
    largest value."""
    return field >= SUPPORT_RELATIVE * float(field.max())


def _mask(counts: np.ndarray) -> np.ndarray:
    return counts >= max(1.0, SUPPORT_RELATIVE * float(counts.max()))


def data_support(grid: Grid, points) -> tuple[np.ndarray, np.ndarray]:
    """Data density on the nodes of ``grid`` and the support mask (module docstring).

    Parameters
    ----------
    grid : Grid
    points : array_like, shape (n, grid.ndim)
        Observations inside the box (e.g. ``TrackTable.values``).

    Returns
    -------
    density : ndarray, shape grid.shape
        Cloud-in-cell mass over ``n`` times the node weights (integrates to 1 over the box).
    mask : ndarray of bool, shape grid.shape
    """

    points = np.asarray(points, dtype=float)
    if points.ndim != 2 or points.shape[0] == 0:
        raise FpirlInputError("data support needs at least one observation")
    counts = cloud_in_cell(grid, points)
    return counts / (points.shape[0] * grid.node_weights()), _mask(counts)


def snapshot_support(snapshots) -> tuple[np.ndarray, np.ndarray]:
    """Data density and support mask of density snapshots: the time-mean of the snapshots scaled to integrate
    to 1, and the nodes where it is at least :data:`SUPPORT_RELATIVE` of its largest value (the time mean, not
    each snapshot, so that per-node noise does not enter the support).

    Parameters
    ----------
    snapshots : DensitySnapshots

    Returns
    -------
    density : ndarray, shape grid.shape
    mask : ndarray of bool, shape grid.shape
    """
    grid = snapshots.grid
    mean = np.mean(snapshots.values, axis=0)
    mass = float(grid.integrate(mean))
    if not mass > 0:
        raise FpirlInputError("data support needs snapshots with positive mass")
    density = mean / mass
    return density, relative_support(density)


def snapshot_support_extra(snapshots) -> dict:
    """Result variables ``data_density`` and ``data_support`` of density snapshots (:func:`snapshot_support`;
    docs/formats.md) and the attr ``data_support_share`` (the share of the nodes in the support)."""
    density, mask = snapshot_support(snapshots)
    dims = snapshots.grid.names
    return {
        "data_density": xr.DataArray(density, dims=dims, attrs={
            "long_name": "time-mean density of the snapshots (integrates to 1)"}),
        "data_support": xr.DataArray(mask.astype(np.int8), dims=dims, attrs={
            "long_name": "1 where the time-mean density is >= 1e-3 of its largest value, else 0"}),
        "data_support_share": float(np.mean(mask)),
    }


@dataclass
class PolicySummary:
    """The policy averaged over the observed states, summarised within the data's action support."""

    mode: np.ndarray  # action at the mode within the support
    mean: np.ndarray  # mean action within the support
    mass_outside: float  # share of the averaged policy's mass outside the support
    unrestricted_mode: np.ndarray  # arg-max of the averaged policy over all action nodes
    action_support: np.ndarray  # bool, shape of the action axes
    averaged_policy: np.ndarray  # \bar pi(a), shape of the action axes


def policy_summary(grid: Grid, policy, density, n_obs: int) -> PolicySummary:
    """Mode, mean action and mass outside the support of the state-averaged policy (module docstring).

    Parameters
    ----------
    grid : Grid
        Joint grid with state and action axes.
    policy : array_like, shape grid.shape
        ``pi(a|s)`` on the nodes.
    density : array_like, shape grid.shape
        Data density on the nodes (:func:`data_support`).
    n_obs : int
        Number of observations behind ``density``.
    """
    S, A = list(grid.state_axes), list(grid.action_axes)
    if not S or not A:
        raise FpirlInputError("a policy summary needs state and action axes")
    policy, density = np.asarray(policy, dtype=float), np.asarray(density, dtype=float)
    counts = density * grid.node_weights() * float(n_obs)  # deposited observations per node
    w = counts.sum(axis=tuple(A), keepdims=True)  # data mass per state node
    pbar = (policy * w).sum(axis=tuple(S)) / w.sum()
    supp = _mask(counts.sum(axis=tuple(S)))
    act_grid = Grid(grid.lower[A], grid.upper[A], [grid.elements[i] for i in A],
                    names=[grid.names[i] for i in A], boundary=grid.boundary)
    total = float(act_grid.integrate(pbar))
    inside = float(act_grid.integrate(pbar * supp))
    coords = act_grid.mesh()
    masked = np.where(supp, pbar, -np.inf)
    mode = coords[np.unravel_index(int(np.argmax(masked)), pbar.shape)]
    mean = np.array([act_grid.integrate(pbar * supp * coords[..., k]) for k in range(len(A))]) / max(inside, 1e-300)
    free = coords[np.unravel_index(int(np.argmax(pbar)), pbar.shape)]
    return PolicySummary(mode, mean, max(0.0, 1.0 - inside / total), free, supp, pbar)


def support_extra(grid: Grid, points, mdp=None, warn: bool = True) -> tuple[dict, PolicySummary | None]:
    """Result variables and attrs of the data support (docs/formats.md) and the policy summary.

    Returns ``(extra, summary)``: ``data_density`` and ``data_support`` variables and the attr
    ``data_observations`` (the number of observations behind them); with an MDP the
    attrs ``policy_mode``, ``policy_mean_action``, ``policy_mass_outside_support``. Warns (when
    ``warn``) if the policy's mass outside the support exceeds :data:`OUTSIDE_WARNING`.
    """

    density, mask = data_support(grid, points)
    dims = grid.names
    extra = {
        "data_density": xr.DataArray(density, dims=dims, attrs={
            "long_name": "density of the fitted observations (cloud-in-cell on the nodes, integrates to 1)"}),
        "data_support": xr.DataArray(mask.astype(np.int8), dims=dims, attrs={
            "long_name": "1 where the data are (node mass >= 1 observation and >= 1e-3 of the largest), else 0"}),
        "data_observations": int(len(points)),
    }
    if mdp is None or not (grid.state_axes and grid.action_axes):
        return extra, None
    summary = policy_summary(grid, mdp.policy, density, len(points))
    extra.update({"policy_mode": summary.mode, "policy_mean_action": summary.mean,
                  "policy_mass_outside_support": float(summary.mass_outside)})
    if warn and summary.mass_outside > OUTSIDE_WARNING:
        fmt = lambda v: "(" + ", ".join(f"{x:.3g}" for x in v) + ")"  # noqa: E731
        warnings.warn(f"{summary.mass_outside:.0%} of the policy's mass (averaged over the observed states) lies at "
                      f"actions where the data have no observations (its mode there, {fmt(summary.unrestricted_mode)},"
                      f" is an extrapolation and is not reported); within the data the mode is {fmt(summary.mode)}",
                      stacklevel=2)
    return extra, summary
