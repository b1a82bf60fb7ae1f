"""Cubic interpolating splines as matrices: nodal values -> values at other points (one axis)."""

from __future__ import annotations

import numpy as np
from scipy.interpolate import CubicSpline, make_interp_spline

from .grid import wrap_into


def spline_matrix(nodes: np.ndarray, x: np.ndarray, period: float | None = None) -> np.ndarray:
    """``R`` (``len(x) x len(nodes)``): the cubic interpolating spline through values at ``nodes``,
    evaluated at ``x``; splines are linear in the values, so ``R`` is the spline of the identity.

    Not-a-knot end conditions (degree ``min(3, n - 1)`` for fewer than 4 nodes), or, with ``period``,
    the periodic spline through ``nodes`` and ``nodes[0] + period`` (``x`` then taken modulo the period).
    """
    nodes = np.asarray(nodes, dtype=float)
    x = np.asarray(x, dtype=float)
    m = nodes.size
    if period is None:
        return np.asarray(make_interp_spline(nodes, np.eye(m), k=min(3, m - 1), axis=0)(x))
    y = np.eye(m)
    spline = CubicSpline(np.append(nodes, nodes[0] + period), np.concatenate([y, y[:1]]), axis=0, bc_type="periodic")
    return np.asarray(spline(wrap_into(x, nodes[0], nodes[0] + period)))
