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
node, indices cyclic, ``x_m = x_0 + P``). The ``m x m`` system (banded; two corners when periodic) is solved
once for the identity, so the matrix
``R = H_y + H_s D`` maps any nodal values to the spline's values. Fewer than 4 nodes: the interpolating
polynomial (degree ``m - 1``), as for not-a-knot splines of that degree. Points outside the nodes are
extrapolated by the end pieces (periodic: taken modulo the period). Tested against polynomials the spline
reproduces and against SciPy's ``make_interp_spline`` / ``CubicSpline``.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from .grid import wrap_into


def _hermite_rows(nodes: np.ndarray, h: np.ndarray, x: np.ndarray, cell: np.ndarray, D: np.ndarray) -> np.ndarray:
    """``R (len(x), m)`` of the Hermite form (module doc): each point's weights on the values and (through the
    slopes ``D``, ``m x m``) on the slopes at the two ends of its interval ``cell``; the right end is node
    ``(cell + 1) mod m`` (node 0 for the closing interval of a periodic axis)."""
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


def _slope_system(h: np.ndarray, periodic: bool) -> tuple[tuple, np.ndarray]:
    """``(A, B)`` with ``A s = B y`` the slope conditions of the module doc (``m`` nodes, ``h`` the ``m - 1``
    intervals, or ``m`` with the closing one when periodic): ``A`` as triplets ``(rows, cols, values)`` (at most
    five entries a row), ``B`` dense ``m x m`` (the right-hand sides of the spline of the identity)."""
    m = h.size if periodic else h.size + 1
    i = np.arange(m) if periodic else np.arange(1, m - 1)  # S'' continuous at node i
    a, b = (i - 1) % m, (i + 1) % m
    ha, hb = h[i - 1], h[i % h.size]
    rows, cols = [i, i, i], [a, i, b]
    vals = [1 / ha, 2 / ha + 2 / hb, 1 / hb]
    B = np.zeros((m, m))
    np.add.at(B, (np.concatenate(rows), np.concatenate(cols)),
              np.concatenate([-3 / ha**2, 3 / ha**2 - 3 / hb**2, 3 / hb**2]))
    if not periodic:  # not-a-knot: the third derivative continuous at x_1 and x_{m-2}
        for row, (k0, k1) in ((0, (0, 1)), (m - 1, (m - 3, m - 2))):
            # (s_k0 + s_k0+1 - 2 delta_k0) / h_k0^2 = (s_k1 + s_k1+1 - 2 delta_k1) / h_k1^2
            for k, sign in ((k0, 1.0), (k1, -1.0)):
                c = sign / h[k] ** 2
                rows.append(np.array([row, row]))
                cols.append(np.array([k, k + 1]))
                vals.append(np.array([c, c]))
                B[row, k + 1] += 2 * c / h[k]
                B[row, k] -= 2 * c / h[k]
    return (np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)), B


def _solve_slopes(A: tuple, B: np.ndarray) -> np.ndarray:
    """``D = A^{-1} B`` for ``A`` given as triplets: its band ``|i - j| <= 2`` by a banded solve (``O(m^2)`` for
    the ``m`` right-hand sides), the corners of a periodic system (``A[0, m-1]``, ``A[m-1, 0]``) by the Woodbury
    identity (rank 2)."""
    rows, cols, vals = A
    m = B.shape[0]
    band = np.abs(rows - cols) <= 2
    ab = np.zeros((5, m))
    np.add.at(ab, (2 + rows[band] - cols[band], cols[band]), vals[band])
    Y = scipy.linalg.solve_banded((2, 2), ab, B, check_finite=False)
    if band.all():
        return Y
    corner = np.zeros((2, 2))  # A = T + U C U^T with U = [e_0, e_{m-1}]
    np.add.at(corner, ((rows[~band] > 0).astype(int), (cols[~band] > 0).astype(int)), vals[~band])
    U = np.zeros((m, 2))
    U[0, 0] = U[m - 1, 1] = 1.0
    Z = scipy.linalg.solve_banded((2, 2), ab, U, check_finite=False)
    inner = np.linalg.inv(corner) + Z[[0, m - 1]]
    return Y - Z @ np.linalg.solve(inner, Y[[0, m - 1]])


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
        return _hermite_rows(nodes, h, x, cell, _solve_slopes(A, B))
    if m == 1:
        return np.ones((x.size, 1))
    h = np.diff(np.append(nodes, nodes[0] + period))
    A, B = _slope_system(h, True)
    xw = wrap_into(x, nodes[0], nodes[0] + period)
    cell = np.clip(np.searchsorted(nodes, xw, side="right") - 1, 0, m - 1)
    return _hermite_rows(nodes, h, xw, cell, _solve_slopes(A, B))
