r"""Deposit scattered points onto the nodes of a finite-element grid (cloud-in-cell).

For a :class:`~fpirl.core.grid.Grid` with nodal hat functions :math:`w_j` (multilinear on every cell,
:math:`w_j(x_k) = \delta_{jk}`, :math:`\sum_j w_j \equiv 1`), the cloud-in-cell deposit of points
:math:`x_p` with weights :math:`m_p` is

.. math::

    M_j = \sum_p m_p \, w_j(x_p),

i.e. every point spreads its mass over the :math:`2^d` corners of its cell with the multilinear
(tensor product of 1-D linear) interpolation weights. This is the linear-FE projection of the
empirical measure onto the test functions, exactly what the weak form ``int p w_j dx`` needs
when ``p`` is replaced by the empirical distribution of the points. Properties:

* mass conservation: :math:`\sum_j M_j = \sum_p m_p`;
* first moments: :math:`\sum_j M_j x_j = \sum_p m_p x_p` on reflecting boxes (hat functions
  reproduce linear functions), and on periodic boxes for points whose cell does not straddle the seam;
* periodic axes wrap: a point in the last cell deposits on the last node and on node 0.

Dividing by :meth:`~fpirl.core.grid.Grid.node_weights` and the total mass gives a nodal density
estimate.
"""

from __future__ import annotations

import numpy as np

from ..core._errors import FpirlInputError
from ..core.grid import Grid

__all__ = ["cloud_in_cell"]

#: points processed per block (bounds the temporary memory to a few tens of MB per block)
_BLOCK = 1 << 20


def _cell_coordinates(grid: Grid, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cell index ``i`` (int64) and fractional position ``f`` in ``[0, 1]`` of every point, per axis."""
    lower = grid.lower
    h = grid.spacing
    n_el = np.asarray(grid.elements)
    u = (x - lower) / h
    if grid.periodic:
        u = np.mod(u, n_el)
    else:
        # tiny round-off outside the box (e.g. a point at 'upper' computed in another unit) is clipped
        u = np.clip(u, 0.0, n_el)
    i = np.minimum(np.floor(u).astype(np.int64), n_el - 1)
    i = np.maximum(i, 0)
    f = u - i
    return i, f


def cloud_in_cell(grid: Grid, points, weights=None, *, labels=None, n_labels: int | None = None) -> np.ndarray:
    r"""Multilinear (cloud-in-cell) deposit of points onto the FE nodes.

    Computes :math:`M_j = \sum_p m_p w_j(x_p)` with the nodal hat functions :math:`w_j` of
    ``grid`` (see the module docstring), vectorised with :func:`numpy.bincount` over the
    :math:`2^d` corners of each point's cell, in blocks of points to bound memory.

    Parameters
    ----------
    grid : Grid
        The FE grid (periodic axes wrap).
    points : array_like, shape (n, d)
        Point coordinates in the grid's units. On reflecting boxes they must lie in
        ``[lower, upper]`` (up to round-off of ``1e-9`` of the axis length).
    weights : array_like, shape (n,), optional
        Mass per point (default 1).
    labels : array_like of int, shape (n,), optional
        Deposit each point into the field of its label (``0 .. n_labels - 1``), all fields in one pass (e.g. one
        field per snapshot, without a Python loop over snapshots).
    n_labels : int, optional
        The number of fields with ``labels`` (default ``max(labels) + 1``).

    Returns
    -------
    ndarray, shape ``grid.shape`` (``(n_labels,) + grid.shape`` with ``labels``)
        Deposited mass per node; sums to ``sum(weights)`` (or ``n``), per label with ``labels``.

    Raises
    ------
    FpirlInputError
        Wrong shape, non-finite coordinates or weights, or points outside a reflecting box.
    """
    x = np.asarray(points, dtype=float)
    d = grid.ndim
    if x.ndim == 1 and d == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[1] != d:
        raise FpirlInputError(f"points must have shape (n, {d}), got {x.shape}")
    n = x.shape[0]
    if weights is not None:
        weights = np.asarray(weights, dtype=float)
        if weights.shape != (n,):
            raise FpirlInputError(f"weights must have shape ({n},), got {weights.shape}")
    finite = np.all(np.isfinite(x), axis=1)
    if not np.all(finite):
        raise FpirlInputError(f"point {int(np.flatnonzero(~finite)[0])} has a NaN or infinite coordinate")
    if weights is not None and not np.all(np.isfinite(weights)):
        raise FpirlInputError("weights contain NaN or infinite values")
    fields = 1
    if labels is not None:
        labels = np.asarray(labels)
        fields = int(n_labels) if n_labels is not None else (int(labels.max()) + 1 if n else 0)
        if (labels.shape != (n,) or not np.issubdtype(labels.dtype, np.integer)
                or (n and (labels.min() < 0 or labels.max() >= fields))):
            raise FpirlInputError(f"labels must be {n} integers in [0, {fields})")
        labels = labels.astype(np.int64) * grid.size
    if not grid.periodic and n:
        length = grid.upper - grid.lower
        tol = 1e-9 * length
        low = np.min(x, axis=0)
        high = np.max(x, axis=0)
        bad = (low < grid.lower - tol) | (high > grid.upper + tol)
        if np.any(bad):
            outside = np.count_nonzero(np.any((x < grid.lower - tol) | (x > grid.upper + tol), axis=1))
            raise FpirlInputError(f"{outside} of {n} points lie outside the reflecting box {grid!r}")
    shape = grid.shape
    strides = np.array([int(np.prod(shape[k + 1:])) for k in range(d)], dtype=np.int64)
    n_nodes = np.asarray(shape, dtype=np.int64)
    corners = np.array(np.meshgrid(*([[0, 1]] * d), indexing="ij")).reshape(d, -1).T  # (2^d, d)
    out = np.zeros(fields * grid.size)
    for start in range(0, n, _BLOCK):
        xb = x[start:start + _BLOCK]
        wb = None if weights is None else weights[start:start + _BLOCK]
        i, f = _cell_coordinates(grid, xb)
        for c in corners:
            idx = np.zeros(xb.shape[0], dtype=np.int64) if labels is None else labels[start:start + _BLOCK].copy()
            w = np.ones(xb.shape[0]) if wb is None else wb.copy()
            for k in range(d):
                node = i[:, k] + c[k]
                if grid.periodic:
                    node = np.where(node == n_nodes[k], 0, node)
                idx += node * strides[k]
                w *= f[:, k] if c[k] else 1.0 - f[:, k]
            out += np.bincount(idx, weights=w, minlength=out.size)
    return out.reshape(shape if labels is None else (fields,) + shape)
