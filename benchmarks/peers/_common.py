"""Helpers shared by the parts of the peer comparison (run in fpirl's environment)."""

from __future__ import annotations

import numpy as np

from fpirl import HermiteSpace


def hermite_gradient_basis(hermite: HermiteSpace, points: np.ndarray) -> np.ndarray:
    """``B[p, i, k] = d_k phi_i(x_p)`` for every Hermite basis function ``phi_i`` (C order over dofs).

    Parameters
    ----------
    hermite : HermiteSpace
    points : ndarray, shape (n, d)

    Returns
    -------
    ndarray, shape (n, n_coef, d)
    """
    pts = np.asarray(points, dtype=float)
    n, d = pts.shape
    vals = [ax.matrix(pts[:, a], 0) for a, ax in enumerate(hermite.axes)]
    ders = [ax.matrix(pts[:, a], 1) for a, ax in enumerate(hermite.axes)]
    out = np.empty((n, hermite.n_coef, d))
    for k in range(d):
        prod = np.ones((n, 1))
        for a in range(d):
            m = ders[a] if a == k else vals[a]
            prod = (prod[:, :, None] * m[:, None, :]).reshape(n, -1)
        out[:, :, k] = prod
    return out


def drift_error(b, b_true, weights=None) -> float:
    """Relative L2 error of a drift field, each component's (weighted) mean removed first.

    ``sqrt(sum_p w_p |b~ - b~_true|^2 / sum_p w_p |b~_true|^2)`` with ``b~ = b - mean_w(b)``; uniform
    weights on an evaluation grid give the paper's L2 norm over the domain.
    """
    b = np.asarray(b, dtype=float).reshape(-1, np.shape(b)[-1])
    bt = np.asarray(b_true, dtype=float).reshape(b.shape)
    w = np.ones(b.shape[0]) if weights is None else np.asarray(weights, dtype=float).ravel()
    w = w / w.sum()
    b = b - w @ b
    bt = bt - w @ bt
    return float(np.sqrt((w @ np.sum((b - bt) ** 2, axis=1)) / (w @ np.sum(bt**2, axis=1))))


def eval_points(lower, upper, n: int = 64, periodic: bool = True) -> np.ndarray:
    """Uniform evaluation grid ``(n^2, 2)`` (cell centres, so it is the same for both boundary kinds)."""
    axes = [lo + (hi - lo) * (np.arange(n) + 0.5) / n for lo, hi in zip(lower, upper)]
    return np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, len(axes))
