"""Gauss-Legendre rules on the unit interval and composite rules on 1-D break points.

An ``n``-point Gauss-Legendre rule integrates polynomials of degree ``2n - 1`` exactly.
Every integrand of the weak form (docs/method.md, "Discretisation") is, on each cell of the union of the
finite-element and Hermite break points, a polynomial of degree at most 5 per axis
(hat x Hermite cubic x hat), so the default ``n = 3`` is exact.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np


@lru_cache(maxsize=32)
def _gauss_legendre_cached(n: int) -> tuple[np.ndarray, np.ndarray]:
    x, w = np.polynomial.legendre.leggauss(n)
    return 0.5 * (x + 1.0), 0.5 * w


def gauss_legendre(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre points and weights on ``[0, 1]``.

    Parameters
    ----------
    n : int
        Number of points (>= 1); exact for polynomials of degree ``2n - 1``.

    Returns
    -------
    points, weights : ndarray, shape (n,)
        ``sum(weights * f(points)) = int_0^1 f`` for polynomial ``f`` of degree <= 2n-1.
    """
    if int(n) != n or n < 1:
        raise ValueError(f"number of Gauss points must be a positive integer, got {n}")
    x, w = _gauss_legendre_cached(int(n))
    return x.copy(), w.copy()


def degree_of_exactness(n: int) -> int:
    """Highest polynomial degree integrated exactly by the ``n``-point rule (``2n - 1``)."""
    return 2 * int(n) - 1


def merged_breakpoints(*sets: np.ndarray, rtol: float = 1e-12) -> np.ndarray:
    """Sorted union of 1-D break points, merging points closer than ``rtol`` x span."""
    pts = np.sort(np.concatenate([np.asarray(s, dtype=float).ravel() for s in sets]))
    span = pts[-1] - pts[0]
    keep = np.concatenate([[True], np.diff(pts) > rtol * max(span, 1.0)])
    return pts[keep]


def composite_rule(breakpoints: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n``-point Gauss-Legendre rule on every sub-interval of ``breakpoints``.

    Returns
    -------
    points, weights : ndarray, shape ((len(breakpoints) - 1) * n,)
        Exact for piecewise polynomials of degree ``2n - 1`` with breaks only at ``breakpoints``.
    """
    b = np.asarray(breakpoints, dtype=float)
    xi, w = gauss_legendre(n)
    width = np.diff(b)
    points = b[:-1, None] + width[:, None] * xi[None, :]
    weights = width[:, None] * w[None, :]
    return points.ravel(), weights.ravel()
