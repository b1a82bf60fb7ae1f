r"""Matrix-free normal operator of the VSI regression (for high dimension), beside :mod:`fpirl.weakform.assembly`.

The assembled path forms ``A = sum_k Xi_k^T Xi_k`` from the banded second moment of the data
(``5^d`` numbers per node) and a dense ``n_coef x n_coef`` matrix; both grow out of reach in
5-D and 6-D. Here ``A`` is only *applied*, by sum factorisation, and the regularised system is
solved by preconditioned conjugate gradients.

Applying ``A``
--------------
With the exact 1-D tables ``t_b^u[j, i, l] = int N_{j+l} (d^u h_i)(d^u w_j) dx`` of
:func:`fpirl.weakform.assembly.axis_tables` (``u = [b = a]`` for the direction ``a``), the residual of step
``k`` is ``(Xi_k c)[j] = sum_l pbar_k[j + l] U[j, l]`` with

.. math::
    U[j, l] = \sum_a \sum_i c_i \prod_b t_b^{[b=a]}[j_b, i_b, l_b],\qquad l \in \{-1, 0, 1\}^d,

i.e. ``grad psi`` weighted by every test gradient and data hat that overlap (``U`` does not depend on
the data). The adjoint is ``(Xi_k^T r)_i = sum_a sum_{j,l} W[j, l] prod_b t_b^{[b=a]}[j_b, i_b, l_b]``
with ``W[j, l] = sum_k r_k[j] pbar_k[j + l]``. So one product ``A c`` is

1. ``U`` from ``c``: a walk over the axes with two states (derivative placed or not), 3 small
   contractions per axis;
2. one pass over the snapshots, chunk by chunk: ``r_k = sum_l shift_l(pbar_k) U[., l]`` and
   ``W += r_k shift_l(pbar_k)`` (``3^d`` multiply-adds per node and snapshot, each twice);
3. the adjoint walk from ``W`` to the coefficients.

Memory is ``O(3^d n_nodes)`` for ``U`` and ``W`` plus one chunk of snapshots; the ``5^d``-banded
moments and the dense matrix are never formed, and the snapshots need not be in memory together
(:class:`StreamingSnapshots` reads them chunk by chunk from any sliceable array, e.g. a lazily
opened xarray variable). The result equals the assembled ``A c`` to rounding (tests: 2-D and 3-D,
periodic and reflecting).

Preconditioner
--------------
Fast diagonalization by per-axis generalized eigenproblems (:class:`fpirl.weakform.matfree.KroneckerPreconditioner`,
whose docstring states the model).
"""

from __future__ import annotations

import itertools

import numpy as np
import scipy.linalg
import scipy.sparse

from ..core._tensor import apply_along_axis
from ..core._threads import one_blas_thread
from ._krylov import Marginals
from ..core._threads import threaded
from .assembly import NormalEquations, build_tables, time_overlap, time_pairs
from ..core.density import DensitySnapshots
from ._streaming import StreamingSnapshots

__all__ = ["KroneckerPreconditioner", "NormalOperator", "StreamingSnapshots", "conjugate_gradient", "h1_apply",
           "solve_regression", "trace_h1"]

#: snapshots held at once by a pass over the data (a chunk of time pairs)
DEFAULT_CHUNK_BYTES = 1 << 28
#: threads for the passes over the data (the elementwise loops release the GIL)
_SLAB_BYTES = 1 << 20
_SPARSE_PATTERN_BYTES = 1 << 29
#: most memory for the POD modes of :meth:`NormalOperator._compress` before it streams instead
_MODE_BYTES = 1 << 28


def band_bytes(grid) -> float:
    """Memory of two ``3^d``-per-node fields in float64: the exact product's band ``U`` and its adjoint ``W``
    (also the size of the noise correction's expected first moments and their interleaved copy,
    :mod:`fpirl.weakform.noise_bias`)."""
    return 2.0 * 8.0 * 3.0**grid.ndim * grid.size


def _along(x: np.ndarray, axis: int, M: np.ndarray) -> np.ndarray:
    """``M`` applied to ``axis`` of a block of snapshots: one large GEMM (``tensordot``) and a view.

    For ``(K, n, ...)`` blocks this is several times faster than the batched small GEMMs of
    :func:`fpirl.core._tensor.apply_along_axis` on a busy machine (measured 0.23 s vs 2.7 s for
    ``549 x 101 x 101``, axis 1, two shared cores).
    """
    return np.moveaxis(np.tensordot(M, x, axes=([1], [axis])), 0, axis)


def _along_axes(x: np.ndarray, mats) -> np.ndarray:
    """``(M_1 kron ... kron M_d)`` on the trailing axes of a block of snapshots (see :func:`_along`)."""
    lead = x.ndim - len(mats)
    for i, M in enumerate(mats):
        x = _along(x, lead + i, M)
    return np.ascontiguousarray(x)


def _pad(values: np.ndarray, periodic: bool) -> np.ndarray:
    """``(K, *shape)`` -> ``(*shape + 2, K)``: snapshot axis last, one halo node per side."""
    d = values.ndim - 1
    q = np.moveaxis(values, 0, -1)
    return np.pad(q, [(1, 1)] * d + [(0, 0)], mode="wrap" if periodic else "constant")


class _IncrementalPOD:
    """Rows ``Q`` with ``Q^T Q = sum of P^T P`` over the blocks ``P`` added (see
    :meth:`NormalOperator._compress`); gives up (``modes`` returns None) past :data:`_MODE_BYTES`."""

    def __init__(self, n: int, rtol: float):
        self.rtol, self.Q, self.fed, self.full = float(rtol), np.zeros((0, n)), False, False
        self.max_modes = max(1, _MODE_BYTES // (8 * n))

    def add(self, block: np.ndarray) -> None:
        """Fold the rows of ``block`` in, a few at a time: with ``r`` modes, ``s`` rows cost
        ``(r + s)^2 n`` for the Gram matrix and an ``(r + s)``-square ``eigh``, so sub-blocks of about
        ``max(64, r)`` rows keep both small (the whole chunk at once: ~4x the flops, and a slow eigh)."""
        self.fed = True
        block = block.reshape(block.shape[0], -1)
        start = 0
        while start < block.shape[0] and not self.full:
            stop = start + max(64, self.Q.shape[0])
            self._fold(block[start:stop])
            start = stop

    def _fold(self, rows: np.ndarray) -> None:
        M = np.concatenate([self.Q, rows])
        lam, vec = scipy.linalg.eigh(M @ M.T)
        if not lam[-1] > 0:
            return
        keep = lam > self.rtol * lam[-1]
        if np.count_nonzero(keep) > self.max_modes:
            self.full, self.Q = True, None
            return
        self.Q = vec[:, keep].T @ M

    def modes(self, shape):
        if self.full:
            return None, None
        return self.Q.reshape((-1,) + tuple(shape)), int(self.Q.shape[0])


class NormalOperator:
    """``c -> A c`` with ``A = sum_k Xi_k^T Xi_k`` (see the module docstring), and the right-hand sides.

    Parameters
    ----------
    source : StreamingSnapshots or DensitySnapshots
    hermite : HermiteSpace
    time_scheme : {'midpoint', 'explicit', 'simpson'}
    quadrature_points : int
    chunk_bytes : int
        Memory for one chunk of snapshots in a pass over the data.
    compress : float or None
        Relative eigenvalue cut-off of the exact POD compression of the time pairs
        (:meth:`_compress`); ``None`` streams the snapshots in every product instead.

    Attributes
    ----------
    rhs : NormalEquations
        ``xtg``, ``xtc``, ``gg``, ``gc``, ``cc``, ``n_rows`` (``xtx`` is None).
    n_matvec : int
        Products with ``A`` so far.
    """

    def __init__(self, source, hermite, *, time_scheme="midpoint", quadrature_points=3, chunk_bytes=DEFAULT_CHUNK_BYTES,
                 compress: float | None = 1e-13):
        if isinstance(source, DensitySnapshots):
            source = StreamingSnapshots.from_snapshots(source)
        self.source = source
        self.grid = source.grid
        self.hermite = hermite
        self.time_scheme = time_scheme
        self.overlap = time_overlap(time_scheme)  # (checks the scheme's name)
        self.tables = build_tables(self.grid, hermite, quadrature_points)
        self.d = self.grid.ndim
        self.shape = self.grid.shape
        # (nd_b, 3 n_b) matrices: T[u][i, l * n + j] = t[u, j, i, l]
        self._T = [[np.ascontiguousarray(tb.t[u].transpose(1, 2, 0).reshape(tb.hermite.n_dofs, -1)) for u in (0, 1)]
                   for tb in self.tables]
        self._shifts = list(itertools.product(range(3), repeat=self.d))
        per_snapshot = 8 * self.grid.size * 6  # block, pbar, padded copy, r, temporary
        self.chunk = int(max(1, min(source.n_times - self.overlap, chunk_bytes // per_snapshot)))
        self.n_matvec = 0
        self._modes, self.n_modes = None, None
        self._pod = None if compress is None else _IncrementalPOD(self.grid.size, compress)
        with one_blas_thread():  # thin one-axis GEMMs (see matvec)
            self._setup(compress)

    def _setup(self, compress) -> None:
        """Right-hand sides, POD modes and trace: one pass over the data (two when the POD gives up)."""
        self.rhs = self._right_hand_sides()  # feeds the POD in the same pass over the data
        if self._pod is not None:
            if self._pod.fed:
                self._modes, self.n_modes = self._pod.modes(self.shape)
            else:  # a subclass with its own right-hand sides
                self._compress(compress)
            if getattr(self, "trace", None) is None:
                # tr A = sum_k pbar_k^T T pbar_k = sum_m q_m^T T q_m (Q^T Q = Pbar^T Pbar): from the modes,
                # or, when the POD gave up (noisy data), one more pass over the snapshots
                mats = self._trace_matrices()
                parts = [self._modes] if self._modes is not None else (p for _, (p, _) in self._pbar_chunks())
                self.trace = float(sum(self._trace_term(p, mats) for p in parts))
            self._pod = None

    # --- coefficient <-> (j, l) band --------------------------------------------------------
    # U and W are stored interleaved, shape (3, n_1, 3, n_2, ..., 3, n_d): entry [l_1, j_1, ...].
    def _band_shape(self):
        return tuple(v for n in self.shape for v in (3, n))

    @staticmethod
    def _key(idx, slab=()):
        """Index of ``[l, j]`` in the interleaved layout: ``j`` fixed on the slab axes, all elsewhere."""
        lead = len(slab)
        return tuple(v for b in range(lead) for v in (idx[b], slab[b])) + \
            tuple(v for b in range(lead, len(idx)) for v in (idx[b], slice(None)))

    @staticmethod
    def _apply_axis(x: np.ndarray, b: int, M: np.ndarray) -> np.ndarray:
        """``M`` applied to axis ``b`` of ``x`` (order kept): one (batched) NN GEMM, no transposes."""
        return apply_along_axis(x, b, M)

    def _walk(self, x: np.ndarray, mats, order) -> np.ndarray:
        """``sum_a kron_b mats[b][[b == a]]`` applied to ``x`` (two states: derivative placed or not)."""
        x0, x1 = x, None
        for n, b in enumerate(order):
            M0, M1 = mats[b]
            n1 = self._apply_axis(x0, b, M1)
            if x1 is not None:
                n1 += self._apply_axis(x1, b, M0)
            x0 = self._apply_axis(x0, b, M0) if n < len(order) - 1 else None
            x1 = n1
        return x1

    def _forward(self, c: np.ndarray) -> np.ndarray:
        """``U[l, j]`` (interleaved layout) from the coefficients ``c``; the last axis first, so the
        largest products are single GEMMs with a long row dimension."""
        x = np.asarray(c, dtype=float).reshape(self.hermite.shape)
        U = self._walk(x, [(T0.T, T1.T) for T0, T1 in self._T], range(self.d - 1, -1, -1))
        return U.reshape(self._band_shape())

    def _adjoint(self, W: np.ndarray) -> np.ndarray:
        """``sum_a sum_{j,l} W[l, j] prod_b t_b^{[b=a]}[j_b, i_b, l_b]``, shape ``hermite.shape``."""
        x = W.reshape(tuple(3 * n for n in self.shape))
        return self._walk(x, self._T, range(self.d))

    def _views(self, padded: np.ndarray):
        """``shift_l(pbar)`` for every ``l``: views of the padded chunk, shape ``(*grid.shape, K)``."""
        for idx in self._shifts:
            yield idx, padded[tuple(slice(i, i + n) for i, n in zip(idx, self.shape))]

    def _pbar_chunks(self):
        for block in self.source.pair_chunks(self.chunk, self.overlap):
            yield block, time_pairs(block, self.source.dt, self.time_scheme)

    # --- products ---------------------------------------------------------------------------
    def _compress(self, rtol: float) -> None:
        """Replace the snapshots by POD "pseudo-snapshots" ``q_m`` with ``sum_m q_m q_m^T = Pbar^T Pbar``.

        ``sum_k Xi(pbar_k)^T Xi(pbar_k)`` depends on the time pairs only through ``Pbar^T Pbar``
        (``Xi`` is linear), so any rows ``Q`` with ``Q^T Q = Pbar^T Pbar`` give the same ``A``.
        They are built incrementally, one streamed pass over the chunks: with ``Q`` the modes so
        far (orthogonal rows) and ``P`` the next chunk, ``M = [Q; P]`` has the small Gram matrix
        ``M M^T = V Lambda V^T`` and ``Q' = V^T M`` satisfies ``Q'^T Q' = M^T M = Q^T Q + P^T P``;
        rows with ``lambda_m < rtol lambda_max`` are dropped (each changes ``A`` by less than
        ``rtol`` relative). Time is linear in the number of snapshots and memory holds one chunk
        plus the modes (smooth Fokker-Planck data need a few tens at ``rtol = 1e-13``). Should the
        modes outgrow :data:`_MODE_BYTES` (noisy data of high rank), compression is abandoned and
        every product with ``A`` streams the snapshots instead (same ``A``, memory still one chunk).
        """
        pod = _IncrementalPOD(self.grid.size, rtol)
        for _, (pbar, _) in self._pbar_chunks():
            pod.add(pbar)
        self._modes, self.n_modes = pod.modes(self.shape)

    def matvec(self, c: np.ndarray) -> np.ndarray:
        """``A c`` (flat): one pass over the snapshots (or over the POD modes, see :meth:`_compress`).

        Runs with BLAS on one thread (``fpirl.core._threads.one_blas_thread``): the walks are many
        thin one-axis GEMMs, 3-10x faster so on two shared cores (docs/benchmarks.md, issue 20); the
        pass over the data keeps its two work threads.
        """
        with one_blas_thread():
            return self._matvec(c)

    def _matvec(self, c: np.ndarray) -> np.ndarray:
        U = self._forward(c)
        W = np.zeros_like(U)
        if self._modes is not None:
            self._band_pass(U, _pad(self._modes, self.grid.periodic), W)
        else:
            for _, (pbar, _) in self._pbar_chunks():
                self._band_pass(U, _pad(pbar, self.grid.periodic), W)
        self.n_matvec += 1
        return self._adjoint(W).ravel()

    def _band_pass(self, U: np.ndarray, P: np.ndarray, W: np.ndarray) -> None:
        """``W[l] += sum_k r_k shift_l(pbar_k)`` with ``r_k = sum_l shift_l(pbar_k) U[l]``.

        Runs over slabs of the leading axes (so that each slab's arrays stay in cache), split
        between threads (numpy releases the GIL in the elementwise loops).
        """
        d, shape = self.d, self.shape
        K = P.shape[-1]
        lead = 0  # leading axes looped over: the rest of a slab (with all snapshots) fits in ~1 MB
        while lead < d - 1 and 8 * K * int(np.prod(shape[lead:])) > _SLAB_BYTES:
            lead += 1
        slabs = list(itertools.product(*[range(n) for n in shape[:lead]]))
        tail = shape[lead:]
        sub = "".join(chr(ord("a") + b) for b in range(len(tail)))
        expr = f"{sub}k,{sub}k->{sub}"

        r_all = self._residuals_sparse(U, P)

        def work(part):
            r = np.empty(tail + (K,))
            tmp = np.empty_like(r)
            for slab in part:
                views = [P[tuple(s + i for s, i in zip(slab, idx[:lead]))
                           + tuple(slice(i, i + n) for i, n in zip(idx[lead:], tail))] for idx in self._shifts]
                if r_all is not None:
                    r = r_all[slab]
                else:
                    r.fill(0.0)
                    for idx, view in zip(self._shifts, views):
                        np.multiply(view, U[self._key(idx, slab)][..., None], out=tmp)
                        r += tmp
                for idx, view in zip(self._shifts, views):
                    W[self._key(idx, slab)] += np.einsum(expr, r, view)

        threaded(work, slabs)

    def _band_matrix(self, U: np.ndarray, pshape):
        """The band ``U`` as a sparse ``n_nodes x n_padded`` CSR matrix (``3^d`` entries per row, on the
        padded grid of shape ``pshape``; the column pattern is fixed and cached), or None when the
        pattern would exceed ``_SPARSE_PATTERN_BYTES``."""
        d, shape = self.d, self.shape
        n_band = 3**d * self.grid.size
        if 4 * n_band > _SPARSE_PATTERN_BYTES:
            return None
        pshape = tuple(pshape)
        if getattr(self, "_pattern", None) is None or self._pattern[0] != pshape:
            j = np.indices(shape).reshape(d, -1)
            cols = np.stack([np.ravel_multi_index(tuple(j[b] + idx[b] for b in range(d)), pshape)
                             for idx in self._shifts], axis=1).astype(np.int32)
            self._pattern = (pshape, cols.ravel(), np.arange(0, n_band + 1, 3**d))
        _, cols, indptr = self._pattern
        # U[l_1, j_1, ..., l_d, j_d] -> data[(j_1..j_d), (l_1..l_d)]
        data = U.transpose(list(range(1, 2 * d, 2)) + list(range(0, 2 * d, 2))).ravel()
        return scipy.sparse.csr_matrix((data, cols, indptr), shape=(self.grid.size, int(np.prod(pshape))))

    def _residuals_sparse(self, U: np.ndarray, P: np.ndarray):
        """All ``r_k = sum_l shift_l(pbar_k) U[l]`` as one sparse-times-dense product (:meth:`_band_matrix`),
        or None: scipy's compiled CSR product replaces ``3^d`` elementwise passes (2-3x less CPU)."""
        B = self._band_matrix(U, P.shape[:-1])
        if B is None:
            return None
        return (B @ P.reshape(-1, P.shape[-1])).reshape(self.shape + (P.shape[-1],))

    def _right_hand_sides(self) -> NormalEquations:
        d = self.d
        Wg = np.zeros(self._band_shape())
        Wc = np.zeros_like(Wg)
        gg = gc = cc = 0.0
        n_rows = 0
        mass = [tb.mass for tb in self.tables]
        trace_mats = self._trace_matrices()
        trace = 0.0
        marg = Marginals(self.shape)
        for _, (pbar, pdot) in self._pbar_chunks():
            if self._pod is not None:  # the trace then follows from the modes (see __init__)
                self._pod.add(pbar)
            else:
                trace += self._trace_term(pbar, trace_mats)
            marg.add(pbar)
            g = _along_axes(pdot, mass)
            c = np.zeros_like(pbar)
            for a in range(d):
                c += _along_axes(pbar, [tb.stiffness if b == a else tb.mass for b, tb in enumerate(self.tables)])
            gg += float(np.vdot(g, g))
            gc += float(np.vdot(g, c))
            cc += float(np.vdot(c, c))
            n_rows += g.size
            P = _pad(pbar, self.grid.periodic)
            G, C = np.moveaxis(g, 0, -1), np.moveaxis(c, 0, -1)
            sub = "".join(chr(ord("a") + b) for b in range(d))
            expr = f"{sub}k,{sub}k->{sub}"
            for idx, view in self._views(P):
                Wg[self._key(idx)] += np.einsum(expr, G, view)
                Wc[self._key(idx)] += np.einsum(expr, C, view)
        self.trace = trace if self._pod is None else None  # None: from the modes (see _setup)
        self.marginals = marg.normalised()
        return NormalEquations(None, self._adjoint(Wg).ravel(), self._adjoint(Wc).ravel(), gg, gc, cc, n_rows)

    def _trace_matrices(self):
        """Per axis and ``(u, v)``: the pentadiagonal ``Vt[n, n + delta] = sum_i V^{uv}[(i, i), (n, delta)]``."""
        out = []
        for tb in self.tables:
            nd, n = tb.hermite.n_dofs, tb.fe.n_nodes
            diag = np.arange(nd) * (nd + 1)
            mats = {}
            for key, V in tb.v.items():
                band = V[diag].sum(axis=0).reshape(n, 5)
                M = np.zeros((n, n))
                for di in range(5):
                    cols = np.arange(n) + di - 2
                    ok = (cols >= 0) & (cols < n) if not tb.fe.periodic else np.ones(n, bool)
                    M[np.arange(n)[ok], cols[ok] % n] += band[ok, di]
                mats[key] = M
            out.append(mats)
        return out

    def _trace_term(self, pbar: np.ndarray, mats, along=_along) -> float:
        """``sum_k sum_{a,a'} pbar_k . (kron_b Vt_b^{[b=a][b=a']}) pbar_k``: the trace of ``A`` (walk, 3 states).

        ``along(x, axis, M)`` applies ``M`` to one axis (another array namespace: :mod:`fpirl.weakform._device`).
        """
        d = self.d
        s0, s1, s2 = pbar, None, None  # no mark, one mark (first of a < a'), both marks
        for b in range(d):
            m = [mats[b][k] for k in ((0, 0), (1, 0), (0, 1), (1, 1))]
            ap = lambda M, x: along(x, 1 + b, M)  # noqa: E731
            n2 = ap(m[3], s0)  # both marks on this axis
            if s1 is not None:
                n2 += 2.0 * ap(m[2], s1)  # second mark here: (a, a') and (a', a) give equal traces
            if s2 is not None:
                n2 += ap(m[0], s2)
            n1 = ap(m[1], s0) + (ap(m[0], s1) if s1 is not None else 0.0)
            s0, s1, s2 = ap(m[0], s0), n1, n2
        return float(np.vdot(pbar, s2)) if isinstance(pbar, np.ndarray) else float((pbar * s2).sum())


# the solver lives in a private module; re-exported here as the public entry points
from ._krylov import (  # noqa: E402
    KroneckerPreconditioner, conjugate_gradient, h1_apply, solve_regression, trace_h1,
)
