"""Shared interface of the track estimators (evaluation of the fitted potential, parameter checks)."""

from __future__ import annotations

import numpy as np

from ..core._errors import FpirlInputError
from ..core._linalg import solve_spd  # noqa: F401  (re-exported for the track estimators)
from ..core.hermite import HermiteSpace
from ..core.hermite import embed_constant_axes as embed_constant
from ..core.validation import check_elements  # noqa: F401  (re-exported for the track estimators)
from ..core.validation import non_negative, optional_positive
from ..mdp._fitted import FittedPotentialMixin
from ..tracks.steps import infer_action_kind
from ..tracks.table import TrackTable

#: Largest FE grid (nodes) the result is written on by default.
MAX_RESULT_NODES = 1 << 16


def default_result_elements(tracks: TrackTable, hermite_elements) -> tuple[int, ...]:
    """FE elements per axis of the result grid: ``max(8 n_h, 32)`` per axis, halved until ``<= 2^16`` nodes.

    The result grid only carries the fitted ``psi`` (and the MDP derived from it) at its nodes, so
    it should resolve the cubic pieces (8 nodes per Hermite element show them smoothly) without
    making the MDP recovery on it expensive in 3-D and 4-D.
    """
    el = np.maximum(8 * np.broadcast_to(np.asarray(hermite_elements), (tracks.ndim,)), 32)
    while np.prod(el + (0 if tracks.periodic else 1)) > MAX_RESULT_NODES and np.any(el > 4):
        el = np.where(el > 4, np.maximum(el // 2, 4), el)
    return tuple(int(e) for e in el)


def embed_constant_axes(space: HermiteSpace, coef, kept, lower, upper, periodic: bool):
    """psi of ``space`` (on the axes ``kept``) as a function on the whole box, constant along the other axes.

    Those axes get the smallest Hermite axis (1 element, 2 if periodic) with the coefficients of a
    constant (:func:`fpirl.core.hermite.embed_constant_axes`), so the result is an ordinary
    tensor-product Hermite function: ``psi(x) = psi_kept(x[kept])`` exactly, with the same mean.
    Returns ``(HermiteSpace, coef)``.
    """
    d = len(np.atleast_1d(lower))
    kept = list(kept)
    low = 2 if periodic else 1
    full = HermiteSpace(lower, upper, [space.elements[kept.index(i)] if i in kept else low for i in range(d)],
                        periodic)
    return full, embed_constant(coef, space, kept, full)


def check_beta(beta):
    """None (estimate beta) or a positive finite number."""
    return optional_positive(beta, "beta")


def check_ridge(ridge):
    """A non-negative finite number."""
    return non_negative(ridge, "ridge")


def check_tracks(tracks) -> TrackTable:
    if not isinstance(tracks, TrackTable):
        raise FpirlInputError(f"fit expects a TrackTable, got {type(tracks).__name__}")
    return tracks


class TrackEstimatorMixin(FittedPotentialMixin):
    """The shared interface of the track estimators (evaluation of the fitted potential, result extras)."""

    def result_extra(self) -> dict:
        """Extra variables and attrs for the result file (none by default)."""
        self._check_fitted()
        return {}


def resolve_drift_axes(drift_axes, tracks: TrackTable) -> list[int]:
    """Sorted drift axes of ``drift_axes`` (indices, names, 'all', 'actions' or None = the documented
    default: the action axes when the actions are velocities, else all; see ``IncrementsEstimator``)."""
    spec = drift_axes
    if isinstance(spec, str) and spec.strip().lower() in ("all", "actions", "auto"):
        spec = spec.strip().lower()
        if spec == "auto":
            spec = None
        elif spec == "all" or not tracks.action_axes:
            return list(range(tracks.ndim))
        else:
            return list(tracks.action_axes)
    if spec is None:  # the documented rule: velocity actions -> only their increments carry the drift
        velocity = bool(tracks.action_axes) and infer_action_kind(tracks) == "velocity"
        return list(tracks.action_axes) if velocity else list(range(tracks.ndim))
    axes = []
    for a in np.atleast_1d(np.asarray(drift_axes, dtype=object)):
        if isinstance(a, str):
            if a not in tracks.names:
                raise FpirlInputError(f"drift axis {a!r} is not an axis of the table ({', '.join(tracks.names)})")
            a = tracks.names.index(a)
        if not isinstance(a, (int, np.integer)) or not 0 <= a < tracks.ndim:
            raise FpirlInputError(f"drift_axes must be axis indices 0..{tracks.ndim - 1} or names, got {a!r}")
        axes.append(int(a))
    if not axes or len(set(axes)) != len(axes):
        raise FpirlInputError(f"drift_axes must name distinct axes, got {drift_axes!r}")
    return sorted(axes)
