r"""Matrix-free normal operator of the VSI regression (for high dimension), beside :mod:`fpirl.assembly`.

The assembled path forms ``A = sum_k Xi_k^T Xi_k`` from the banded second moment of the data
(``5^d`` numbers per node) and a dense ``n_coef x n_coef`` matrix; both grow out of reach in
5-D and 6-D. Here ``A`` is only *applied*, by sum factorisation, and the regularised system is
solved by preconditioned conjugate gradients.

Applying ``A``
--------------
With the exact 1-D tables ``t_b^u[j, i, l] = int N_{j+l} (d^u h_i)(d^u w_j) dx`` of
:func:`fpirl.assembly.axis_tables` (``u = [b = a]`` for the direction ``a``), the residual of step
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
For a uniform density ``rho`` the residual is ``rho`` times the FE-tested Laplacian of ``psi``,
so ``A ~ rho^2 K M^{-1} K`` with the Hermite stiffness ``K = sum_a kron_b G_b^{[b=a]}`` and mass
``M = kron_b G_b^0`` (``G^0, G^1`` the 1-D Gram matrices of values and slopes): a biharmonic
operator. The 1-D generalized eigenproblems ``G^1 x = lambda G^0 x`` diagonalise it by a Kronecker
product ("fast diagonalization"):

.. math::
    P^{-1} = (\otimes_b X_b)\,\mathrm{diag}\Big(1 \big/ \big(\alpha (\textstyle\sum_b \lambda_{b})^2
    + \lambda_{ridge} \textstyle\sum_b \lambda_b\big)\Big)\,(\otimes_b X_b)^T,

with the constant mode (all ``lambda = 0``) weighted by the zero-mean term and ``alpha`` fitted by a
Rayleigh quotient of ``A`` on a random vector. Each application costs ``2 d`` small contractions.
"""

from __future__ import annotations

import itertools
import os
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator

import numpy as np
import scipy.linalg

from ._errors import FpirlInputError
from ._tensor import apply_along_axes
from .assembly import NormalEquations, build_tables, time_pairs
from .density import DensitySnapshots
from .grid import Grid

#: snapshots held at once by a pass over the data (a chunk of time pairs)
DEFAULT_CHUNK_BYTES = 1 << 28
#: threads for the passes over the data (the elementwise loops release the GIL)
_THREADS = min(2, os.cpu_count() or 1)
_SLAB_BYTES = 1 << 20


class StreamingSnapshots:
    """Density snapshots read chunk by chunk from a sliceable array (never all in memory).

    Parameters
    ----------
    grid : Grid
    times : array_like, shape (n_t,)
        Uniformly spaced, increasing.
    values : array-like, shape (n_t, *grid.shape)
        Anything that supports ``values[start:stop]`` returning an array (numpy memmap, a
        lazily opened ``xarray.DataArray``, a netCDF4 or h5py variable). Each chunk is checked
        (finite, non-negative) when it is read.
    """

    def __init__(self, grid: Grid, times, values):
        times = np.asarray(times, dtype=float).ravel()
        shape = tuple(values.shape)
        if len(shape) != grid.ndim + 1 or shape[1:] != grid.shape:
            raise FpirlInputError(f"density has shape {shape}, expected (time, {', '.join(map(str, grid.shape))})")
        if shape[0] < 2 or times.size != shape[0]:
            raise FpirlInputError(f"need at least two snapshots with one time each, got {shape[0]} and {times.size}")
        steps = np.diff(times)
        if np.any(steps <= 0) or not np.allclose(steps, steps[0], rtol=1e-6, atol=0):
            raise FpirlInputError("snapshot times must be strictly increasing and uniformly spaced")
        self.grid, self.times, self.values = grid, times, values
        self._scale = None

    @classmethod
    def from_snapshots(cls, snapshots: DensitySnapshots) -> "StreamingSnapshots":
        return cls(snapshots.grid, snapshots.times, snapshots.values)

    @property
    def dt(self) -> float:
        return float(self.times[1] - self.times[0])

    @property
    def n_times(self) -> int:
        return int(self.times.size)

    def read(self, start: int, stop: int) -> np.ndarray:
        """Snapshots ``start:stop`` as a float array (scaled to unit mass after :meth:`normalize`)."""
        v = np.asarray(self.values[start:stop], dtype=float)
        if not np.all(np.isfinite(v)):
            raise FpirlInputError("density contains NaN or infinite values")
        if np.any(v < 0):
            raise FpirlInputError(f"density has negative values (min {v.min():.3g})")
        if self._scale is not None:
            v = v * self._scale[start:stop].reshape((-1,) + (1,) * self.grid.ndim)
        return v

    def normalize(self, chunk: int = 8) -> "StreamingSnapshots":
        """Scale every snapshot to unit mass (one pass over the data, done lazily afterwards)."""
        out = StreamingSnapshots(self.grid, self.times, self.values)
        mass = np.concatenate([self.grid.integrate(self.read(s, min(s + chunk, self.n_times)))
                               for s in range(0, self.n_times, chunk)])
        if np.any(mass <= 0):
            raise FpirlInputError("a density snapshot has zero total mass")
        out._scale = 1.0 / mass
        return out

    def pair_chunks(self, chunk: int) -> Iterator[np.ndarray]:
        """Consecutive overlapping blocks of ``chunk + 1`` snapshots (``chunk`` time pairs each)."""
        for start in range(0, self.n_times - 1, chunk):
            yield self.read(start, min(start + chunk + 1, self.n_times))


def _pad(values: np.ndarray, periodic: bool) -> np.ndarray:
    """``(K, *shape)`` -> ``(*shape + 2, K)``: snapshot axis last, one halo node per side."""
    d = values.ndim - 1
    q = np.moveaxis(values, 0, -1)
    return np.pad(q, [(1, 1)] * d + [(0, 0)], mode="wrap" if periodic else "constant")


class NormalOperator:
    """``c -> A c`` with ``A = sum_k Xi_k^T Xi_k`` (see the module docstring), and the right-hand sides.

    Parameters
    ----------
    source : StreamingSnapshots or DensitySnapshots
    hermite : HermiteSpace
    time_scheme : {'midpoint', 'explicit'}
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
        time_pairs(np.zeros((2, 1)), 1.0, time_scheme)  # validates the scheme
        self.tables = build_tables(self.grid, hermite, quadrature_points)
        self.d = self.grid.ndim
        self.shape = self.grid.shape
        # (nd_b, 3 n_b) matrices: T[u][i, l * n + j] = t[u, j, i, l]
        self._T = [[np.ascontiguousarray(tb.t[u].transpose(1, 2, 0).reshape(tb.hermite.n_dofs, -1)) for u in (0, 1)]
                   for tb in self.tables]
        self._shifts = list(itertools.product(range(3), repeat=self.d))
        per_snapshot = 8 * self.grid.size * 6  # block, pbar, padded copy, r, temporary
        self.chunk = int(max(1, min(source.n_times - 1, chunk_bytes // per_snapshot)))
        self.n_matvec = 0
        self.rhs = self._right_hand_sides()
        self._modes, self.n_modes = None, None
        if compress is not None:
            self._compress(compress)

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
        shape = x.shape
        L, R = int(np.prod(shape[:b], dtype=np.int64)), int(np.prod(shape[b + 1 :], dtype=np.int64))
        if R == 1:
            y = x.reshape(L, shape[b]) @ M.T
        else:
            y = np.matmul(M, x.reshape(L, shape[b], R))
        return y.reshape(shape[:b] + (M.shape[0],) + shape[b + 1 :])

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
        for block in self.source.pair_chunks(self.chunk):
            yield block, time_pairs(block, self.source.dt, self.time_scheme)

    # --- products ---------------------------------------------------------------------------
    def _compress(self, rtol: float) -> None:
        """Replace the snapshots by the POD "pseudo-snapshots" ``q_m = sum_k U_km pbar_k``.

        With ``G = Pbar Pbar^T = U Lambda U^T`` (the ``K x K`` Gram matrix of the time pairs, one
        streamed pass over pairs of chunks), ``sum_k Xi(pbar_k)^T Xi(pbar_k) =
        sum_m Xi(q_m)^T Xi(q_m)`` exactly because ``Xi`` is linear and ``U`` orthogonal; modes with
        ``lambda_m < rtol lambda_max`` change ``A`` by less than ``rtol`` relative and are dropped.
        Smooth Fokker-Planck data need ~11 of 19 modes at ``rtol = 1e-13``. The ``r x n_nodes``
        modes stay in memory; later products with ``A`` no longer read the data.
        """
        chunks = list(range(0, self.source.n_times - 1, self.chunk))
        K = self.source.n_times - 1
        G = np.zeros((K, K))
        for i, (_, (pi, _)) in zip(chunks, self._pbar_chunks()):
            pi = pi.reshape(pi.shape[0], -1)
            for j, (_, (pj, _)) in zip(chunks, self._pbar_chunks()):
                if j >= i:
                    G[i : i + len(pi), j : j + len(pj)] = pi @ pj.reshape(pj.shape[0], -1).T
        G = np.triu(G) + np.triu(G, 1).T
        lam, vec = scipy.linalg.eigh(G)
        keep = lam > rtol * lam[-1]
        vec = vec[:, keep]
        Q = np.zeros((vec.shape[1], self.grid.size))
        for i, (_, (pi, _)) in zip(chunks, self._pbar_chunks()):
            Q += vec[i : i + len(pi)].T @ pi.reshape(pi.shape[0], -1)
        self._modes = Q.reshape((-1,) + self.shape)
        self.n_modes = int(vec.shape[1])

    def matvec(self, c: np.ndarray) -> np.ndarray:
        """``A c`` (flat): one pass over the snapshots (or over the POD modes, see :meth:`_compress`)."""
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

        def work(part):
            r = np.empty(tail + (K,))
            tmp = np.empty_like(r)
            for slab in part:
                r.fill(0.0)
                views = []
                for idx in self._shifts:
                    view = P[tuple(s + i for s, i in zip(slab, idx[:lead]))
                             + tuple(slice(i, i + n) for i, n in zip(idx[lead:], tail))]
                    views.append(view)
                    np.multiply(view, U[self._key(idx, slab)][..., None], out=tmp)
                    r += tmp
                for idx, view in zip(self._shifts, views):
                    W[self._key(idx, slab)] += np.einsum(expr, r, view)

        n_threads = min(_THREADS, len(slabs))
        if n_threads <= 1:
            work(slabs)
            return
        with ThreadPoolExecutor(n_threads) as pool:
            list(pool.map(work, [slabs[t::n_threads] for t in range(n_threads)]))

    def _right_hand_sides(self) -> NormalEquations:
        d = self.d
        Wg = np.zeros(self._band_shape())
        Wc = np.zeros_like(Wg)
        gg = gc = cc = 0.0
        n_rows = 0
        mass = [tb.mass for tb in self.tables]
        trace_mats = self._trace_matrices()
        trace = 0.0
        marg = [np.zeros(n) for n in self.shape]
        marg2 = [np.zeros(n) for n in self.shape]
        for _, (pbar, pdot) in self._pbar_chunks():
            trace += self._trace_term(pbar, trace_mats)
            for b in range(d):
                other = tuple(a for a in range(d + 1) if a != b + 1)
                marg[b] += pbar.sum(axis=other)
                marg2[b] += (pbar * pbar).sum(axis=other)
            g = apply_along_axes(pdot, mass)
            c = np.zeros_like(pbar)
            for a in range(d):
                c += apply_along_axes(pbar, [tb.stiffness if b == a else tb.mass for b, tb in enumerate(self.tables)])
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
        self.trace = trace
        self.marginals = [m / m.mean() if m.mean() > 0 else np.ones_like(m) for m in marg]
        self.marginals_sq = [m / m.mean() if m.mean() > 0 else np.ones_like(m) for m in marg2]
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

    def _trace_term(self, pbar: np.ndarray, mats) -> float:
        """``sum_k sum_{a,a'} pbar_k . (kron_b Vt_b^{[b=a][b=a']}) pbar_k``: the trace of ``A`` (walk, 3 states)."""
        d = self.d
        s0, s1, s2 = pbar, None, None  # no mark, one mark (first of a < a'), both marks
        for b in range(d):
            m = [mats[b][k] for k in ((0, 0), (1, 0), (0, 1), (1, 1))]
            ap = lambda M, x: np.moveaxis(np.tensordot(M, x, axes=([1], [1 + b])), 0, 1 + b)  # noqa: E731
            n2 = ap(m[3], s0)  # both marks on this axis
            if s1 is not None:
                n2 += 2.0 * ap(m[2], s1)  # second mark here: (a, a') and (a', a) give equal traces
            if s2 is not None:
                n2 += ap(m[0], s2)
            n1 = ap(m[1], s0) + (ap(m[0], s1) if s1 is not None else 0.0)
            s0, s1, s2 = ap(m[0], s0), n1, n2
        return float(np.vdot(pbar, s2))


class KroneckerPreconditioner:
    """Fast-diagonalization preconditioner for ``A + lam P + mu m m^T`` (see the module docstring).

    Parameters
    ----------
    hermite : HermiteSpace
    operator_matvec : callable
        ``c -> A c`` (used once, for the scale ``alpha``).
    mu : float
        Weight of the zero-mean term.
    weights, weights_sq : list of ndarray, optional
        Per-axis nodal marginals of the data ``rho_b`` and of ``rho^2`` (FE axis nodes); uniform
        when omitted.
    fe_axes : list of Axis, optional
        The FE axes carrying ``weights``.
    """

    def __init__(self, hermite, operator_matvec, mu: float, weights=None, weights_sq=None, fe_axes=None, rng_seed=0):
        self.hermite = hermite
        X, lams, G2 = [], [], []
        for b, ax in enumerate(hermite.axes):
            if weights is None:
                K, M, M2 = ax.gram(1), ax.gram(0), ax.gram(0)
            else:
                K, M, M2 = _weighted_grams(ax, fe_axes[b], weights[b], weights_sq[b])
            ev, vec = scipy.linalg.eigh(K, M)
            X.append(vec)
            lams.append(np.clip(ev, 0.0, None))
            G2.append(vec.T @ M2 @ vec)
        self.X = X
        self._G2inv = [np.linalg.inv(g) for g in G2]
        total = np.zeros(())
        for ev in lams:
            total = np.add.outer(total, ev)
        self._const = tuple(int(np.argmin(ev)) for ev in lams)
        lam_inv = np.zeros_like(total)
        np.divide(1.0, total, out=lam_inv, where=total > 0)
        lam_inv[self._const] = 0.0
        self._lam_inv = lam_inv
        v0 = np.ones(())
        for xb, i in zip(X, self._const):
            v0 = np.multiply.outer(v0, xb[:, i])
        self._d0 = max(mu * float(np.sum(hermite.mean_functional() * v0)) ** 2, 1e-300)
        rng = np.random.default_rng(rng_seed)
        z = rng.standard_normal(hermite.shape)
        z[self._const] = 0.0
        v = apply_along_axes(z, X)
        lz = z * total
        model = float(np.sum(lz * apply_along_axes(lz, G2)))
        self.alpha = float(v.ravel() @ operator_matvec(v.ravel())) / model if model > 0 else 1.0

    def __call__(self, r: np.ndarray) -> np.ndarray:
        z = apply_along_axes(r.reshape(self.hermite.shape), [x.T for x in self.X])
        z0 = z[self._const]
        y = self._lam_inv * apply_along_axes(self._lam_inv * z, self._G2inv) / self.alpha
        y[self._const] = z0 / self._d0
        return apply_along_axes(y, self.X).ravel()


def _weighted_grams(hax, fe_axis, w, w2):
    """``int rho h_i' h_j'``, ``int rho h_i h_j``, ``int rho^2 h_i h_j`` with nodal ``rho`` (hat interpolant)."""
    from .assembly import hat_matrix
    from .quadrature import composite_rule, merged_breakpoints

    breaks = merged_breakpoints(fe_axis.lower + fe_axis.spacing * np.arange(fe_axis.elements + 1), hax.breakpoints)
    x, wq = composite_rule(breaks, 4)
    N = hat_matrix(fe_axis, x)
    rho, rho2 = np.maximum(N @ w, 0.0) * wq, np.maximum(N @ w2, 0.0) * wq
    H0, H1 = hax.matrix(x, 0), hax.matrix(x, 1)
    floor = 1e-3  # keeps the 1-D matrices definite where an axis carries almost no mass
    K = (H1 * (rho + floor * wq * rho.sum() / wq.sum())[:, None]).T @ H1
    M = (H0 * (rho + floor * wq * rho.sum() / wq.sum())[:, None]).T @ H0
    M2 = (H0 * (rho2 + floor * wq * rho2.sum() / wq.sum())[:, None]).T @ H0
    return K, M, M2


def h1_apply(hermite, c: np.ndarray) -> np.ndarray:
    """``P c`` for the H1-seminorm Gram matrix ``P = sum_a kron_b (G1 if b == a else G0)``, by sum factorisation."""
    g0 = [ax.gram(0) for ax in hermite.axes]
    g1 = [ax.gram(1) for ax in hermite.axes]
    c = c.reshape(hermite.shape)
    out = np.zeros(hermite.shape)
    for a in range(hermite.ndim):
        out += apply_along_axes(c, [g1[b] if b == a else g0[b] for b in range(hermite.ndim)])
    return out.ravel()


def conjugate_gradient(matvec, b: np.ndarray, precond, *, rtol: float = 1e-10, maxiter: int = 500, x0=None):
    """Preconditioned conjugate gradients for an SPD operator; returns ``(x, iterations, relative residual)``.

    Stops when ``||b - A x|| <= rtol ||b||``.
    """
    x = np.zeros_like(b) if x0 is None else x0.copy()
    r = b - matvec(x) if x0 is not None else b.copy()
    bnorm = float(np.linalg.norm(b))
    if bnorm == 0:
        return x, 0, 0.0
    z = precond(r)
    p = z.copy()
    rz = float(r @ z)
    for it in range(1, maxiter + 1):
        Ap = matvec(p)
        alpha = rz / float(p @ Ap)
        x += alpha * p
        r -= alpha * Ap
        res = float(np.linalg.norm(r)) / bnorm
        if res <= rtol:
            return x, it, res
        z = precond(r)
        rz_new = float(r @ z)
        p = z + (rz_new / rz) * p
        rz = rz_new
    return x, maxiter, res


def trace_h1(hermite) -> float:
    """``trace(P)`` of the H1-seminorm Gram matrix (a sum of Kronecker products: products of traces)."""
    g0 = [np.trace(ax.gram(0)) for ax in hermite.axes]
    g1 = [np.trace(ax.gram(1)) for ax in hermite.axes]
    return float(sum(np.prod([g1[b] if b == a else g0[b] for b in range(hermite.ndim)]) for a in range(hermite.ndim)))


def solve_regression(op: NormalOperator, ridge: float, gamma=None, *, rtol: float = 1e-10, maxiter: int = 1000):
    """Solve eq. vsi_regression with the matrix-free operator (same system as the assembled path).

    ``(A + lam P + mu m m^T) theta = -(X^T g + gamma X^T c)`` with ``lam = ridge trace(A) / trace(P)``
    and ``mu = trace(A) / n_coef``; with ``gamma = None`` (``1/beta`` estimated) the bordered system
    is solved by its Schur complement: two CG solves ``M y_1 = X^T g``, ``M y_2 = X^T c``, then
    ``gamma = (c^T X y_1 - g.c) / (c.c - c^T X y_2)`` and ``theta = -(y_1 + gamma y_2)``.

    Returns
    -------
    theta, gamma, lam, info : ndarray, float, float, dict
        ``info``: CG ``iterations`` (list, one per solve), ``relative_residual``, ``schur`` (or None),
        ``matvecs``.
    """
    hermite = op.hermite
    ne = op.rhs
    if not op.trace > 0:
        raise FpirlInputError("the data carry no information on psi (all-zero density?)")
    lam = ridge * op.trace / trace_h1(hermite)
    mu = op.trace / hermite.n_coef
    m = hermite.mean_functional().ravel()

    def M(c):
        return op.matvec(c) + lam * h1_apply(hermite, c) + mu * m * float(m @ c)

    pre = KroneckerPreconditioner(hermite, op.matvec, mu, op.marginals, op.marginals_sq, list(op.grid.axes))
    its, res = [], []

    def cg(b):
        x, it, r = conjugate_gradient(M, b, pre, rtol=rtol, maxiter=maxiter)
        its.append(it)
        res.append(r)
        if r > rtol:
            warnings.warn(f"conjugate gradients stopped after {it} iterations at relative residual {r:.2g} "
                          f"(asked {rtol:.2g}); the system may be nearly singular: raise the ridge",
                          RuntimeWarning, stacklevel=3)
        return x

    schur = None
    if gamma is not None:
        theta = cg(-(ne.xtg + gamma * ne.xtc))
    else:
        y1, y2 = cg(ne.xtg), cg(ne.xtc)
        schur = ne.cc - float(ne.xtc @ y2)
        gamma = (float(ne.xtc @ y1) - ne.gc) / schur if schur != 0 else float("nan")
        theta = -(y1 + gamma * y2)
    return theta, float(gamma), float(lam), {"iterations": its, "relative_residual": res, "schur": schur,
                                              "matvecs": op.n_matvec}
