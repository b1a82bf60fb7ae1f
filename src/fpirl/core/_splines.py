r"""Cubic interpolating splines as matrices: nodal values -> values at other points (one axis).

The spline is held in Hermite form: on ``[x_i, x_{i+1}]`` (``h_i = x_{i+1} - x_i``, ``t = (x - x_i) / h_i``)

.. math::
    S(x) = H_{00}(t)\, y_i + h_i H_{10}(t)\, s_i + H_{01}(t)\, y_{i+1} + h_i H_{11}(t)\, s_{i+1},

with the nodal slopes ``s = D y`` fixed by continuity of ``S''`` at the interior nodes,

.. math::
    \frac{s_{i-1}}{h_{i-1}} + 2\Big(\frac{1}{h_{i-1}} + \frac{1}{h_i}\Big) s_i + \frac{s_{i+1}}{h_i}
    = 3\Big(\frac{\delta_{i-1}}{h_{i-1}} + \frac{\delta_i}{h_i}\Big),\qquad \delta_i = \frac{y_{i+1} - y_i}{h_i},

and the end conditions: *not-a-knot* (``S'''`` continuous at ``x_1`` and ``x_{m-2}``, with
``S''' = 6 (s_i + s_{i+1} - 2 \delta_i) / h_i^2`` on interval ``i``), or *periodic* (the same equation at every
node, indices cyclic, ``x_m = x_0 + P``). The ``m x m`` system is solved once for the identity, so the matrix
``R = H_y + H_s D`` maps any nodal values to the spline's values. Fewer than 4 nodes: the interpolating
polynomial (degree ``m - 1``), as for not-a-knot splines of that degree. Points outside the nodes are
extrapolated by the end pieces (periodic: taken modulo the period). Tested against polynomials the spline
reproduces and against SciPy's ``make_interp_spline`` / ``CubicSpline``.
"""

from __future__ import annotations

import numpy as np

from .grid import wrap_into


def _hermite_rows(nodes: np.ndarray, h: np.ndarray, x: np.ndarray, cell: np.ndarray, D: np.ndarray) -> np.ndarray:
    """``R (len(x), m)`` of the Hermite form (module doc): the values' and slopes' weights of the cell of each
    point; ``cell`` the interval index, ``nodes[cell + 1]`` taken cyclically (periodic) by the caller's ``D``."""
    m = D.shape[0]
    hc = h[cell]
    t = (x - nodes[cell]) / hc
    t2, t3 = t * t, t * t * t
    right = (cell + 1) % m
    R = np.zeros((x.size, m))
    rows = np.arange(x.size)
    np.add.at(R, (rows, cell), 2 * t3 - 3 * t2 + 1)
    np.add.at(R, (rows, right), -2 * t3 + 3 * t2)
    slopes = (hc * (t3 - 2 * t2 + t))[:, None] * D[cell] + (hc * (t3 - t2))[:, None] * D[right]
    return R + slopes


def _slope_system(h: np.ndarray, periodic: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(A, B)`` with ``A s = B y`` the slope conditions of the module doc (``m`` nodes, ``h`` the ``m - 1``
    intervals, or ``m`` with the closing one when periodic)."""
    m = h.size if periodic else h.size + 1
    A, B = np.zeros((m, m)), np.zeros((m, m))
    inner = range(m) if periodic else range(1, m - 1)
    for i in inner:  # S'' continuous at node i (small m x m system, built once per axis)
        a, b = (i - 1) % m, (i + 1) % m
        ha, hb = h[i - 1], h[i % h.size]
        A[i, a] += 1 / ha
        A[i, i] += 2 / ha + 2 / hb
        A[i, b] += 1 / hb
        for j, w in ((a, -3 / ha**2), (i, 3 / ha**2 - 3 / hb**2), (b, 3 / hb**2)):
            B[i, j] += w
    if not periodic:  # not-a-knot: S''' continuous at x_1 and x_{m-2}
        for row, (k0, k1) in ((0, (0, 1)), (m - 1, (m - 3, m - 2))):
            # (s_k0 + s_k0+1 - 2 delta_k0) / h_k0^2 = (s_k1 + s_k1+1 - 2 delta_k1) / h_k1^2
            for k, sign in ((k0, 1.0), (k1, -1.0)):
                c = sign / h[k] ** 2
                A[row, k] += c
                A[row, k + 1] += c
                B[row, k + 1] += 2 * c / h[k]
                B[row, k] -= 2 * c / h[k]
    return A, B


def _polynomial_matrix(nodes: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Lagrange basis of the interpolating polynomial through ``nodes`` (degree ``m - 1``) at ``x``."""
    R = np.ones((x.size, nodes.size))
    for i, xi in enumerate(nodes):
        for j, xj in enumerate(nodes):
            if j != i:
                R[:, i] *= (x - xj) / (xi - xj)
    return R


def spline_matrix(nodes: np.ndarray, x: np.ndarray, period: float | None = None) -> np.ndarray:
    """``R`` (``len(x) x len(nodes)``): the cubic interpolating spline through values at ``nodes``,
    evaluated at ``x``; splines are linear in the values, so ``R`` is the spline of the identity.

    Not-a-knot end conditions (degree ``min(3, n - 1)`` for fewer than 4 nodes), or, with ``period``,
    the periodic spline through ``nodes`` and ``nodes[0] + period`` (``x`` then taken modulo the period).
    """
    nodes = np.asarray(nodes, dtype=float)
    x = np.asarray(x, dtype=float).ravel()
    m = nodes.size
    if period is None:
        if m < 4:
            return _polynomial_matrix(nodes, x)
        h = np.diff(nodes)
        A, B = _slope_system(h, False)
        cell = np.clip(np.searchsorted(nodes, x, side="right") - 1, 0, m - 2)
        return _hermite_rows(nodes, h, x, cell, np.linalg.solve(A, B))
    if m == 1:
        return np.ones((x.size, 1))
    h = np.diff(np.append(nodes, nodes[0] + period))
    A, B = _slope_system(h, True)
    xw = wrap_into(x, nodes[0], nodes[0] + period)
    cell = np.clip(np.searchsorted(nodes, xw, side="right") - 1, 0, m - 1)
    return _hermite_rows(nodes, h, xw, cell, np.linalg.solve(A, B))
