r"""The bands of many time modes, for all draws of a batch per slab of nodes (issue 20).

:meth:`fpirl.uncertainty._batched.BatchedDraws.batch_vectors` needs, for a batch of ``S`` draws, the
adjoint walks ``u_s = adj(W_u[s])`` and ``b_s = adj(W_b[s])`` of the two ``3^d`` bands

.. math::
    W_u[s, j, l] = \sum_m \rho_m[s, j]\, q_m[j + l - 1], \qquad
    W_b[s, j, l] = \sum_m \hat r_m[j]\, \bar e_m[s, j + l - 1].

With many modes (more than :data:`fpirl.uncertainty._batched.SMALL_MODES`) each band is a GEMM per
node: ``W_u[:, j, :] = rho[:, :, j] (S x M) @ Q_j (M x 3^d)`` with ``Q_j[m, l] = q_m[j + l - 1]``, and
``W_b`` per *data* node ``n = j + l - 1``: ``ē[:, :, n] (S x M_r) @ R_n`` with
``R_n[m, l] = r̂_m[n - l + 1]``. Here

* the nodes are taken a slab of rows of axis 0 at a time, the data side of the slab (``Q_j``, ``R_n``,
  ``3^d`` shifted copies) gathered **once** for all draws of the batch (``(rows, *rest, 3^d, M)``,
  contiguous runs of ``M``), then one stacked GEMM per chunk of draws; the slabs split between two
  threads (one BLAS thread each);
* the band of a slab is never formed for all nodes: the adjoint walk runs on it at once, first over
  the axes after the first (whole within the slab; two states, derivative placed or not, as in
  :meth:`fpirl.weakform.matfree.NormalOperator._walk`), then axis 0 on the slab's columns of its
  matrices, accumulated over the slabs (the walk is linear and its axes commute);
* ``W_b`` is walked in its data-node labelling: the walk's matrix of axis ``b``, column
  ``(l, j)``, becomes column ``(l, n = j + l - 1)`` (periodic: modulo ``n_b``; otherwise the columns
  whose test node falls off the grid are zero, where the band reads the zero halo), so it needs no
  move to the test nodes;
* bands and walk in :data:`fpirl.uncertainty._batched.BAND_DTYPE` (single precision by default,
  rounding about ``1e-7`` of the vectors), the accumulation over slabs in double.
"""

from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..core._tensor import apply_along_axis
from ..core._threads import one_blas_thread

#: Bytes of the band and the node-major draws of one slab of rows and chunk of draws (per thread).
BAND_BYTES = 1 << 25
#: Threads the slabs are split between.
THREADS = 2


def data_node_columns(T: np.ndarray, n: int, periodic: bool) -> np.ndarray:
    """The walk's matrix ``T`` ``(n_dofs, 3 n)`` (column ``l n + j``) relabelled by data node:
    column ``l n + m`` of the result is column ``l n + (m - l + 1)`` of ``T`` (modulo ``n`` when
    ``periodic``, else zero where ``m - l + 1`` is off the axis)."""
    T3 = T.reshape(T.shape[0], 3, n)
    out = np.zeros_like(T3)
    m = np.arange(n)
    for l in range(3):
        src = m - l + 1
        ok = np.ones(n, bool) if periodic else (src >= 0) & (src < n)
        out[:, l, m[ok]] = T3[:, l, src[ok] % n]
    return out.reshape(T.shape)


class ManyModeWalk:
    """``(adj W_u, adj W_b)`` of batches of draws with many modes (module docstring).

    Parameters
    ----------
    Pq, Pr : ndarray
        The data modes ``q`` and residual modes ``r̂`` with one halo node per side, ``(*grid + 2, M)``
        and ``(*grid + 2, M_r)``.
    T : list of (ndarray, ndarray)
        Per axis the walk's two matrices (derivative not placed, placed), ``(n_dofs_b, 3 n_b)``.
    shape : tuple of int
        The grid.
    periodic : bool
        Periodic grid.
    dtype : numpy dtype
        Precision of the bands and the walk.
    """

    def __init__(self, Pq, Pr, T, shape, periodic, dtype):
        self.shape, self.d, self.dtype = tuple(shape), len(shape), dtype
        self.P = [np.ascontiguousarray(Pq, dtype=dtype), np.ascontiguousarray(Pr, dtype=dtype)]
        self.T = [[M.astype(dtype) for M in pair] for pair in T]
        self.shifts = list(itertools.product(range(3), repeat=self.d))
        d = self.d
        # band (rows, n_1.., S, l_0, l_1, ..) -> (S, l_0, rows, l_1, n_1, ..): the walk's interleaved layout
        self.perm = [d, d + 1, 0] + [v for b in range(1, d) for v in (d + 1 + b, b)]
        # the matrices relabelled by data node, for W_b
        self.Tb = [[data_node_columns(M, n, periodic).astype(dtype) for M in pair] for pair, n in zip(T, shape)]

    def _gather(self, side: int, lo: int, hi: int, c0: int, c1: int) -> np.ndarray:
        """``P[j + sign (l - 1)]`` for the nodes of rows ``lo:hi`` of axis 0 and ``c0:c1`` of axis 1 (sign
        ``+1`` for ``q``, ``-1`` for ``r̂``): ``(rows, c1 - c0, *rest, 3^d, m)``, contiguous runs of ``m``."""
        P, sign, shape = self.P[side], 1 - 2 * side, self.shape
        box = [(lo, hi)] + ([(c0, c1)] if self.d > 1 else []) + [(0, n) for n in shape[2:]]
        out = np.empty(tuple(e - b for b, e in box) + (len(self.shifts), P.shape[-1]), self.dtype)
        for f, idx in enumerate(self.shifts):
            o = [1 + sign * (i - 1) for i in idx]
            out[..., f, :] = P[tuple(slice(b + oi, e + oi) for (b, e), oi in zip(box, o))]
        return out

    def _walk_slab(self, W: np.ndarray, T, lo: int, hi: int) -> np.ndarray:
        """The adjoint walk of the band ``W`` ``(rows * rest, S, 3^d)`` of rows ``lo:hi``:
        ``(S, n_dofs_0, rest dofs)``."""
        d, shape, rows = self.d, self.shape, hi - lo
        S = W.shape[1]
        x = np.ascontiguousarray(W.reshape((rows,) + shape[1:] + (S,) + (3,) * d).transpose(self.perm))
        x0, x1 = x.reshape((S, 3, rows) + tuple(3 * n for n in shape[1:])), None
        for b in range(1, d):
            M0, M1 = T[b]
            n1 = apply_along_axis(x0, 2 + b, M1)
            if x1 is not None:
                n1 += apply_along_axis(x1, 2 + b, M0)
            x0, x1 = apply_along_axis(x0, 2 + b, M0), n1
        n0 = shape[0]
        cols = (np.arange(3)[:, None] * n0 + np.arange(lo, hi)[None]).ravel()
        M0, M1 = (M[:, cols] for M in T[0])
        y = np.matmul(M1, x0.reshape(S, 3 * rows, -1))
        if x1 is not None:
            y += np.matmul(M0, x1.reshape(S, 3 * rows, -1))
        return y

    def __call__(self, rho: np.ndarray, ebar: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(adj W_u, adj W_b)``, each ``(S, n_coef)`` in double, of the residual modes ``rho``
        ``(S, M, *grid)`` and the projected averaged noise ``ebar`` ``(S, M_r, *grid)``."""
        S, shape = rho.shape[0], self.shape
        R0 = int(np.prod(shape[1:], dtype=np.int64))
        item = np.dtype(self.dtype).itemsize
        m = max(P.shape[-1] for P in self.P)
        per_row = item * R0 * (len(self.shifts) + m)  # the band and the node-major draws, per draw
        rows = int(min(shape[0], max(1, BAND_BYTES // (per_row * S))))
        slabs = [(lo, min(shape[0], lo + rows)) for lo in range(0, shape[0], rows)]
        chunk = int(max(1, BAND_BYTES // (per_row * rows)))
        data = (rho, ebar)

        # nodes of a slab: (rows, n_1, rest); the data side gathered per row of axis 1 (in cache), for a
        # chunk of draws at once
        n1 = shape[1] if self.d > 1 else 1
        sub = (shape[0], n1, R0 // n1)

        def work(part):
            acc = None
            for lo, hi in part:
                for side, T in ((0, self.T), (1, self.Tb)):
                    X = data[side]
                    for a in range(0, S, chunk):
                        b = min(S, a + chunk)
                        A = X[a:b, :, lo:hi].reshape((b - a, X.shape[1], hi - lo) + sub[1:])
                        A = np.ascontiguousarray(A.transpose(2, 3, 4, 0, 1), dtype=self.dtype)  # (rows, n_1, R, s, m)
                        W = np.empty(A.shape[:-1] + (len(self.shifts),), self.dtype)
                        for c in range(n1):
                            G = self._gather(side, lo, hi, c, c + 1)
                            G = G.reshape((hi - lo, 1, sub[2]) + W.shape[-1:] + (-1,))
                            np.matmul(A[:, c:c + 1], G.swapaxes(-1, -2), out=W[:, c:c + 1])
                        y = self._walk_slab(W.reshape(-1, b - a, W.shape[-1]), T, lo, hi)
                        if acc is None:
                            acc = np.zeros((2, S) + y.shape[1:])
                        acc[side, a:b] += y
            return acc

        n = min(THREADS, len(slabs))
        with one_blas_thread():
            if n <= 1:
                parts = [work(slabs)]
            else:  # the threads' sums added in a fixed order: the same result run to run
                with ThreadPoolExecutor(n) as pool:
                    parts = list(pool.map(work, [slabs[t::n] for t in range(n)]))
        acc = sum(p for p in parts if p is not None)
        return acc[0].reshape(S, -1), acc[1].reshape(S, -1)
