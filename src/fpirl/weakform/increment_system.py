r"""Normal equations of the increments regression, accumulated cell by cell.

For transitions ``x_p -> x_p + dx_p`` and the drift axes ``a in D`` the regression (eq. ``SDE``
with the Euler-Maruyama likelihood) is

.. math::
    \min_\theta \sum_p \sum_{a \in D} \big( v_{p,a} + \partial_a \psi_\theta(x_p) \big)^2,
    \qquad v_{p,a} = dx_{p,a} / \Delta t,

with ``psi_theta = sum_i theta_i phi_i`` in the tensor-product cubic Hermite basis. Its normal
equations are ``A theta = -b`` with

.. math::
    A = \sum_a G_a^T G_a,\quad b = \sum_a G_a^T v_a,\quad c = \sum_{p,a} v_{p,a}^2,
    \quad G_a[p, i] = \partial_a \phi_i(x_p).

A row of ``G_a`` has only the ``4^d`` basis functions of the Hermite cell of ``x_p`` non-zero, so
points are sorted by (group, cell) and each cell contributes a dense ``4^d x 4^d`` block
``W^T W`` (one BLAS call on the stacked rows of all drift axes) that is scattered into the global
matrix. No design matrix over all points is ever formed; the cost is ``O(n |D| 16^d)`` flops.
Groups (e.g. cross-validation folds of whole tracks) get separate systems in the same pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.hermite import HermiteSpace, element_cubics

#: rows per BLAS block (bounds the temporary ``W`` to a few tens of MB)
_CHUNK = 1 << 15


@dataclass
class IncrementSystem:
    """Sufficient statistics of one group of transitions: ``A``, ``b``, ``c`` and the counts."""

    A: np.ndarray
    b: np.ndarray
    c: float
    n_rows: int
    n_transitions: int

    def __add__(self, other: "IncrementSystem") -> "IncrementSystem":
        return IncrementSystem(self.A + other.A, self.b + other.b, self.c + other.c,
                               self.n_rows + other.n_rows, self.n_transitions + other.n_transitions)

    def __sub__(self, other: "IncrementSystem") -> "IncrementSystem":
        return IncrementSystem(self.A - other.A, self.b - other.b, self.c - other.c,
                               self.n_rows - other.n_rows, self.n_transitions - other.n_transitions)

    def rss(self, theta: np.ndarray) -> float:
        """``sum_p sum_a (v + d_a psi_theta)^2`` from the statistics (exact quadratic form)."""
        t = np.ravel(theta)
        return float(max(t @ self.A @ t + 2.0 * t @ self.b + self.c, 0.0))


def candidate_space(lower, upper, periodic: bool, elements) -> tuple[HermiteSpace, list[int]]:
    """The Hermite space of a candidate on its axes with elements (``kept``), and those axes."""
    kept = [i for i, e in enumerate(elements) if e > 0]
    lower, upper = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    return HermiteSpace(lower[kept], upper[kept], [elements[i] for i in kept], periodic), kept


def _row_kron(tables: list[np.ndarray]) -> np.ndarray:
    """Row-wise Kronecker product of ``(m, 4)`` tables: ``(m, 4^d)`` in C order of the axes."""
    out = tables[0]
    for t in tables[1:]:
        out = (out[:, :, None] * t[:, None, :]).reshape(out.shape[0], -1)
    return out


def _cell_dofs(space: HermiteSpace, cell_index) -> np.ndarray:
    """Flat indices of the ``4^d`` dofs of one Hermite cell (C order, as :func:`_row_kron`)."""
    dofs = np.zeros(1, dtype=np.int64)
    for b, (ax, k) in enumerate(zip(space.axes, cell_index)):
        right = (k + 1) % ax.n_nodes if ax.periodic else k + 1
        stride = int(np.prod(space.shape[b + 1:]))
        dofs = (dofs[:, None] + stride * np.array([2 * k, 2 * k + 1, 2 * right, 2 * right + 1])[None, :]).ravel()
    return dofs


def assemble_increments(space: HermiteSpace, points: np.ndarray, velocity: np.ndarray, drift_axes,
                        groups: np.ndarray | None = None, n_groups: int = 1,
                        row_weights: np.ndarray | None = None) -> list[IncrementSystem]:
    """Normal equations of the increments regression, one system per group.

    Parameters
    ----------
    space : HermiteSpace
    points : ndarray, shape (n, d)
        Regressor points (where ``grad psi`` is evaluated).
    velocity : ndarray, shape (n, len(drift_axes))
        ``dx / dt`` on the drift axes.
    drift_axes : sequence of int
        Axes whose increments enter the regression.
    groups : ndarray of int, shape (n,), optional
        Group index ``0 .. n_groups - 1`` of every transition (default: one group).
    n_groups : int
    row_weights : ndarray, shape (n, len(drift_axes)), optional
        Factor ``f_{p,a}`` multiplying row ``(p, a)`` of ``G_a`` (the model is
        ``v_{p,a} = -f_{p,a} d_a psi(x_p) + noise``; used for the attenuation of the drift at
        reflecting walls).

    Returns
    -------
    list of IncrementSystem
    """
    d = space.ndim
    drift_axes = list(drift_axes)
    elements = tuple(space.elements)
    n_cells = int(np.prod(elements))
    cells, xis = [], []
    for b, ax in enumerate(space.axes):
        cell, xi = ax.locate(points[:, b])
        cells.append(cell)
        xis.append(xi)
    key = np.ravel_multi_index(cells, elements) if d > 1 else cells[0].astype(np.int64)
    if groups is not None:
        key = np.asarray(groups, dtype=np.int64) * n_cells + key
    order = np.argsort(key, kind="stable")
    counts = np.bincount(key, minlength=n_groups * n_cells)
    bounds = np.concatenate([[0], np.cumsum(counts)])
    xis = [x[order] for x in xis]
    vel = np.ascontiguousarray(velocity[order])
    rw = None if row_weights is None else np.ascontiguousarray(np.asarray(row_weights, dtype=float)[order])
    spacing = [ax.spacing for ax in space.axes]
    systems = []
    for g in range(n_groups):
        A = np.zeros((space.n_coef, space.n_coef))
        bvec = np.zeros(space.n_coef)
        lo, hi = bounds[g * n_cells], bounds[(g + 1) * n_cells]
        c = float(np.einsum("ij,ij->", vel[lo:hi], vel[lo:hi]))
        for k in np.flatnonzero(counts[g * n_cells:(g + 1) * n_cells]):
            start, stop = bounds[g * n_cells + k], bounds[g * n_cells + k + 1]
            dofs = _cell_dofs(space, np.unravel_index(k, elements))
            block = np.zeros((dofs.size, dofs.size))
            rhs = np.zeros(dofs.size)
            for s in range(start, stop, _CHUNK):
                e = min(s + _CHUNK, stop)
                tabs = [(element_cubics(xis[b][s:e], spacing[b], 0), element_cubics(xis[b][s:e], spacing[b], 1))
                        for b in range(d)]
                W = np.concatenate([_row_kron([tabs[b][int(b == a)] for b in range(d)])
                                    * (1.0 if rw is None else rw[s:e, j, None]) for j, a in enumerate(drift_axes)])
                block += W.T @ W
                rhs += W.T @ vel[s:e].T.ravel()
            A[np.ix_(dofs, dofs)] += block
            bvec[dofs] += rhs
        systems.append(IncrementSystem(A, bvec, c, int(hi - lo) * len(drift_axes), int(hi - lo)))
    return systems
