"""Observed one-step transitions of a track table, as used by held-out scoring and the baselines.

A scored transition is a run of three consecutive raw observations ``s_{k-1}, s_k, s_{k+1}`` of one
track (no missing frame): the previous step gives the observed velocity ``v_k``, the current row
gives the model's point ``x_k = (s_k, a_k)``, and the next state ``s_{k+1}`` is predicted.

* tables with explicit actions or without actions: rows ``(k-1, k, k+1)`` of
  :meth:`TrackTable.triples`;
* tables whose actions are velocities (``a_k = (s_k - s_{k-1}) / dt``, the first row of each
  segment dropped): rows ``(k, k+1)`` of :meth:`TrackTable.pairs` already span three raw
  observations; ``s_{k-1} = s_k - a_k dt``.

Differences are minimal images on periodic boxes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core._errors import FpirlInputError

ACTION_KINDS = ("velocity", "explicit", "none")


@dataclass(frozen=True)
class Transitions:
    """Scored transitions of a table (all arrays have ``n`` rows).

    Attributes
    ----------
    x : ndarray, shape (n, d)
        The model's point ``x_k = (s_k, a_k)`` (the table row at step ``k``).
    v_prev, v_next : ndarray, shape (n, d_s)
        Observed velocities ``(s_k - s_{k-1}) / dt`` and ``(s_{k+1} - s_k) / dt``.
    track : ndarray of int, shape (n,)
        Original track of each transition.
    dt : float
    kind : {'velocity', 'explicit', 'none'}
        How the table's actions were obtained.
    x_prev : ndarray, shape (n, d), optional
        The model's point one step earlier, ``x_{k-1}`` (NaN rows where the track has none): the
        previous step of a second-lag model (:mod:`fpirl.estimators.lag`).
    """

    x: np.ndarray
    v_prev: np.ndarray
    v_next: np.ndarray
    track: np.ndarray
    dt: float
    kind: str
    x_prev: np.ndarray | None = None

    @property
    def n(self) -> int:
        return self.x.shape[0]

    @property
    def step(self) -> np.ndarray:
        """Observed displacements ``s_{k+1} - s_k``."""
        return self.v_next * self.dt


def _minimal_image(table, diff: np.ndarray, axes) -> np.ndarray:
    if not table.periodic:
        return diff
    length = (table.upper - table.lower)[list(axes)]
    return diff - length * np.round(diff / length)


def infer_action_kind(table) -> str:
    """'none' without action axes; 'velocity' when the table was read with velocity actions
    (``table.source['action']``) or, for tables built from arrays, when every action equals the
    backward difference of the states (checked on every row with a previous row in its segment);
    else 'explicit'."""
    S, A = list(table.state_axes), list(table.action_axes)
    if not A:
        return "none"
    source = getattr(table, "source", None) or {}
    if "action" in source:
        return "velocity" if source["action"] == "velocity" else "explicit"
    if len(A) != len(S):
        return "explicit"
    i0, i1 = table.pairs()
    if i0.size == 0:
        return "explicit"
    ds = _minimal_image(table, table.values[i1][:, S] - table.values[i0][:, S], S)
    a = table.values[i1][:, A] * table.dt
    scale = np.abs(ds).max()
    return "velocity" if scale > 0 and np.max(np.abs(a - ds)) <= 1e-6 * scale else "explicit"


def observed_transitions(table, kind: str | None = None) -> Transitions:
    """The transitions of ``table`` to score or to fit the baselines on (see module docstring).

    Parameters
    ----------
    table : TrackTable
    kind : {'velocity', 'explicit', 'none'}, optional
        How the actions were made (default: :func:`infer_action_kind`).
    """
    kind = infer_action_kind(table) if kind is None else kind
    if kind not in ACTION_KINDS:
        raise FpirlInputError(f"action kind must be one of {ACTION_KINDS}, got {kind!r}")
    S, A = list(table.state_axes), list(table.action_axes)
    if not S:
        raise FpirlInputError("the table has no state axes")
    vals, dt = table.values, table.dt
    if kind == "velocity":
        if len(A) != len(S):
            raise FpirlInputError(f"velocity actions need one action per state axis, got {len(A)} and {len(S)}")
        i0, i1 = table.pairs()
        v_prev = vals[i0][:, A]
        v_next = _minimal_image(table, vals[i1][:, S] - vals[i0][:, S], S) / dt
        has = (i0 > 0) & (table.segment[np.maximum(i0 - 1, 0)] == table.segment[i0])
        x_prev = np.where(has[:, None], vals[np.maximum(i0 - 1, 0)], np.nan)
    else:
        if kind == "none" and A:
            raise FpirlInputError("the table has action axes; use kind='explicit' or 'velocity'")
        im, i0, ip = table.triples()
        v_prev = _minimal_image(table, vals[i0][:, S] - vals[im][:, S], S) / dt
        v_next = _minimal_image(table, vals[ip][:, S] - vals[i0][:, S], S) / dt
        x_prev = vals[im]
    return Transitions(vals[i0], v_prev, v_next, table.track[i0], dt, kind, x_prev)


def gaussian_logpdf(x: np.ndarray, mean: np.ndarray, var) -> np.ndarray:
    """Row-wise log-density of ``N(mean, var I)`` at ``x`` (shape ``(n, k)``); ``var`` scalar or ``(n,)``."""
    x = np.asarray(x, dtype=float)
    k = x.shape[1]
    var = np.asarray(var, dtype=float)
    r2 = np.sum((x - mean) ** 2, axis=1)
    return -0.5 * (r2 / var + k * np.log(2.0 * np.pi * var))
