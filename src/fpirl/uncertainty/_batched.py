r"""All snapshot-noise draws of the posterior through batched contractions (issue 20).

:func:`fpirl.uncertainty._snapshot_noise.snapshot_posterior` needs, per unit-scale noise draw
``e_s`` (all snapshots), the two coefficient vectors

.. math::
    u_s = D(\bar p)^T r(e_s) = \mathrm{adj}\Big(\sum_k r_k(e_s) \otimes \mathrm{shift}(\bar p_k)\Big),\qquad
    b_s = D(\bar e_s)^T \hat r = \mathrm{adj}\Big(\sum_k \hat r_k \otimes \mathrm{shift}(\bar e_{s,k})\Big),

(``adj`` the adjoint walk of :class:`fpirl.weakform.matfree.NormalOperator`, ``⊗ shift`` the
``3^d`` band ``W[l, j] = a[j] b[j + l]``); docs/method.md ("Cost of the snapshot-noise draws") has the
measurements. Instead of ``3^d`` elementwise passes per draw:

* **linearity in time**: the residual of pair ``k`` is ``R_+ e_{k+1} + R_- e_k``, and with
  ``Pbar Pbar^T = V Λ V^T`` (modes below ``1e-13 λ_max`` dropped) ``Σ_k r_k(e) ⊗ shift(bar p_k) =
  Σ_m ρ_m ⊗ shift(q_m)``, ``ρ_m = R_+ (Σ_k V_km e_{k+1}) + R_- (Σ_k V_km e_k)``: the noise is summed
  over time first (used when ``2M < K + 1``; else the ``K`` residuals are projected on the modes);
* **one contraction for all draws of a batch**: with many modes per node by GEMMs
  (:mod:`fpirl.uncertainty._many_modes`); with few (``M, M_r <=`` :data:`SMALL_MODES`,
  :meth:`BatchedDraws._walk_small`) the band is never formed in full: per shift of the axes after the
  first, the bands of all draws are formed in a small block by elementwise products (in
  :data:`BAND_DTYPE`, rounding about ``1e-7``) and axis 0 of the adjoint walk is one GEMM;
* the residual operators by one two-state walk over the axes, the ``Xi(.) theta`` band as one sparse
  matrix (:meth:`fpirl.uncertainty._snapshot_noise._Residuals.xi_theta`), split between two threads;
  the next draw's noise drawn on a second thread meanwhile (same generator calls, same order);
* the modes whose terms carry less than ``(0.3 / sqrt(2 S))^2`` of the draws' energy are dropped first
  (:meth:`BatchedDraws.truncate`, :mod:`fpirl.uncertainty._truncation`);
* the bias band and ``||r(e)||^2`` are expectations, given exactly by :mod:`fpirl.uncertainty._expected`.

With :data:`REDUCED_NOISE` off the noise is drawn exactly as by the per-draw code, so the result equals
it to rounding (test). With it on (the default) and few mixes (``2 (2M + M_r) <= K + 1``) the time mixes
are drawn directly with the same law (:mod:`fpirl.uncertainty._reduced_noise`), so the result differs
from the per-draw code by Monte Carlo error only.
"""

from __future__ import annotations

import itertools

import numpy as np

from ..core._tensor import apply_along_axes, apply_along_axis
from ..core._threads import halves, one_blas_thread, threaded
from ..weakform.assembly import time_pairs
from tqdm.auto import tqdm

from ._many_modes import ManyModeWalk
from ._reduced_noise import EIG_RTOL, PrefetchedNoise, ReducedNoise, noise_shape, pod_spectrum
from ._truncation import energy_tolerance, kept_modes, mode_energies

#: Relative eigenvalue cut of the time compression (exact to this level, as the matrix-free path's).
COMPRESS_RTOL = EIG_RTOL
#: Memory for the arrays of one batch of draws, few modes and many (4-D ``15^4``: 10 draws a batch, 1.89 GB for
#: the fit, against 31 draws and 2.16 GB at three times this, no faster; 49 modes: 13 draws, 20 s, 1.95 GB, against
#: 40 draws, 23 s, 2.45 GB).
BATCH_BYTES = MANY_BATCH_BYTES = 1 << 28
#: Modes (``M`` and ``M_r``) up to which the bands are formed by elementwise products
#: (:meth:`BatchedDraws._walk_small`); above, per node by GEMMs (:mod:`fpirl.uncertainty._many_modes`).
SMALL_MODES = 8
#: Precision of the band blocks and their adjoint walk (:meth:`BatchedDraws._walk_small`): single
#: precision halves the memory traffic and doubles the SIMD width, rounding about 1e-7 of the
#: vectors (measured, 4-D), far below their Monte Carlo error ``1 / sqrt(2 S)``.
BAND_DTYPE = np.float32
#: Bytes of the arrays of one elementwise pass of the band blocks (kept in cache).
_CHUNK_BYTES = 1 << 20
#: The data modes of every shift are kept as contiguous copies (:meth:`BatchedDraws._walk_small`) up to this size.
GATHER_BYTES = 1 << 27
#: Band entries per draw from which the shifts of the small-mode bands are split between two threads (and grid
#: values of a stack of residuals, :meth:`BatchedDraws._split`).
_THREAD_MIN_SIZE = 1 << 18
#: Draw the time-mixed noise directly (:mod:`fpirl.uncertainty._reduced_noise`, same law) when the
#: mixes are at most half the snapshots; False: every draw from all its normal numbers (tests).
REDUCED_NOISE = True


def _pad_grid(x: np.ndarray, d: int, periodic: bool, lead: int = 0) -> np.ndarray:
    """One halo node per side on the ``d`` grid axes that follow ``lead`` leading axes."""
    width = [(0, 0)] * lead + [(1, 1)] * d + [(0, 0)] * (x.ndim - lead - d)
    return np.pad(x, width, mode="wrap" if periodic else "constant")


class BatchedDraws:
    """The fitted data (time-compressed) and the per-batch contractions of :func:`draw_vectors`."""

    def __init__(self, res, estimated: bool):
        op = res.op
        self.res, self.op, self.estimated = res, op, estimated
        self.d, self.shape, self.periodic = op.d, op.shape, op.grid.periodic
        self.shifts = list(itertools.product(range(3), repeat=self.d))
        blocks, pbar, c, rhat = [], [], [], []
        for block, pb, cc, rh in res.fitted():
            blocks.append(block)
            pbar.append(pb)
            c.append(cc)
            rhat.append(rh)
        # the fitted snapshots once (blocks overlap by op.overlap snapshots) and the generator's draw sizes per block
        ov = self.overlap = op.overlap
        self.counts = [b.shape[0] - ov * (i > 0) for i, b in enumerate(blocks)]
        self.pfull = np.concatenate([b if i == 0 else b[ov:] for i, b in enumerate(blocks)])
        del blocks
        pbar, c, rhat = (np.concatenate(a) for a in (pbar, c, rhat))
        self.K = pbar.shape[0]
        self._fields = (pbar, c, rhat)
        self._shapes = {}  # the noise shape by model (noise_into)
        # the POD of the averaged data and of the fitted residual: (eigenvalues, time vectors), all kept modes
        self.spectra = (pod_spectrum(pbar, COMPRESS_RTOL), pod_spectrum(rhat, COMPRESS_RTOL))
        self.crhat = None
        if estimated:  # C r_hat_k (C symmetric): the gamma row of b is sum_k ebar_k . C r_hat_k
            tabs = op.tables
            self.crhat = sum(apply_along_axes(rhat, [tb.stiffness if b == a else tb.mass for b, tb in enumerate(tabs)])
                             for a in range(self.d))
        # every noise field the batched contractions need is a fixed combination of the snapshots'
        # noise: bar e = Tb e, dot e = Td e (time_pairs is linear), projected on the modes
        self.Tb, self.Td = time_pairs(np.eye(len(self.pfull)), op.source.dt, res.scheme)
        self._buffers = {}
        self._set_modes(self.spectra[0][1], self.spectra[1][1])

    def truncate(self, expected, model: str, n_draws: int) -> None:
        """Drop the time modes whose terms carry less than :func:`fpirl.uncertainty._truncation.energy_tolerance`
        of the draws' energy (:mod:`fpirl.uncertainty._truncation`; ``expected`` the
        :class:`fpirl.uncertainty._expected.ExpectedResidual` of the same residual, ``model`` the noise shape)."""
        (lq, V), (lr, W) = self.spectra
        wu, wb = mode_energies(expected, model, V, lq, W, lr, self.Tb, self.Td)
        ku, kb = kept_modes(wu, wb, energy_tolerance(n_draws))
        if not (ku.all() and kb.all()):
            self._set_modes(V[:, ku], W[:, kb])

    def _set_modes(self, V: np.ndarray, Wr: np.ndarray) -> None:
        """The data side of the draws for the time vectors ``V`` ``(K, M)`` of the data and ``Wr`` ``(K, M_r)`` of
        the residual (all modes: the time compression, exact to :data:`COMPRESS_RTOL`; fewer: :meth:`truncate`)."""
        pbar, c, rhat = self._fields
        for name in ("crc", "_many", "_small"):
            self.__dict__.pop(name, None)
        self.compressed = 2 * V.shape[1] < len(self.pfull)
        # not compressed (the noise is drawn per snapshot) but fewer modes than pairs: the residuals of
        # a draw projected on the modes, r_m = sum_k V_km r_k (fewer modes in the many-mode bands)
        self.Vp = V if not self.compressed and V.shape[1] < self.K else None
        if self.compressed or self.Vp is not None:
            self.V = V  # (K, M)
            q = np.tensordot(self.V, pbar, axes=(0, 0))
            cq = np.tensordot(self.V, c, axes=(0, 0))
        else:
            self.V, q, cq = None, pbar, c
        self.M = q.shape[0]
        self.cq = cq  # C q_m: the gamma row of u
        self.Pq = _pad_grid(np.moveaxis(q, 0, -1), self.d, self.periodic)  # (*grid + 2, M)
        # the residual side of b, compressed the same way: r_hat_k = sum_m Wr_km rho_hat_m
        self.Wr = Wr if Wr.shape[1] < self.K else None  # (K, M_r)
        rc = rhat if self.Wr is None else np.tensordot(self.Wr, rhat, axes=(0, 0))
        self.Mr = rc.shape[0]
        self.rc = np.moveaxis(rc, 0, -1)  # (*grid, M_r)
        self.Pr = _pad_grid(self.rc, self.d, self.periodic)  # (*grid + 2, M_r)
        Tb, Td = self.Tb, self.Td
        self.mix = None
        if self.compressed:
            eb = Tb if self.Wr is None else self.Wr.T @ Tb
            self.mix = np.vstack([self.V.T @ Tb, self.V.T @ Td, eb])  # (2M + M_r, K + 1)
            self.ce = None if self.crhat is None else np.tensordot(Tb, self.crhat, axes=(0, 0))  # e . ce = ebar . C r_hat
        self.reduced = None
        if REDUCED_NOISE and self.mix is not None and 2 * self.mix.shape[0] <= len(self.pfull) and self.Wr is not None:
            # C rho_hat_m (r_hat = Wr rho_hat): the gamma row of b from the residual modes of bar e
            self.crc = None if self.crhat is None else np.tensordot(self.Wr, self.crhat, axes=(0, 0))
        n = int(np.prod(self.shape))
        item = np.dtype(BAND_DTYPE).itemsize
        if max(self.M, self.Mr) <= SMALL_MODES:  # the time mixes (sampled, mapped, normalised), residual modes and
            # averaged noise (and their copies in the walk), the band block, and axis 0 walked (two states, u + b and u)
            L = 0 if self.mix is None else self.mix.shape[0]
            walked = 4 * 3 ** (self.d - 1) * self.op._T[0][0].shape[0] * (n // self.shape[0])
            per_draw = item * (n * (4 * L + 3 * (self.M + self.Mr) + 6) + walked)
        else:  # the residual modes and averaged noise of a draw (and its time mixes when drawn directly)
            per_draw = n * (np.dtype(BAND_DTYPE).itemsize * (self.M + self.Mr)
                            + (8 * self.mix.shape[0] if hasattr(self, "crc") else 0))
        self.batch = int(max(1, (BATCH_BYTES if max(self.M, self.Mr) <= SMALL_MODES
                                 else min(BATCH_BYTES, MANY_BATCH_BYTES)) // per_draw))

    def reduced_noise(self, model, normalize):
        """The direct sampler of the time mixes (:class:`fpirl.uncertainty._reduced_noise.ReducedNoise`) or None."""
        if not hasattr(self, "crc"):
            return None
        if self.reduced is None or self.reduced[0] != (model, normalize):
            self.reduced = ((model, normalize), ReducedNoise(self.mix, self.pfull, model, normalize,
                                                             self.op.grid.node_weights()))
        return self.reduced[1]

    def _buffer(self, name, shape, dtype=float):
        """A work array kept from batch to batch (fresh large arrays cost a page fault per page)."""
        buf = self._buffers.get(name)
        if buf is None or buf.shape[1:] != shape[1:] or buf.shape[0] < shape[0] or buf.dtype != dtype:
            buf = self._buffers[name] = np.empty(shape, dtype)
        return buf[: shape[0]]

    # --- noise --------------------------------------------------------------------------
    def noise(self, model, normalize, rng) -> np.ndarray:
        """One unit-scale draw of all snapshots, ``(K + 1, *grid)``, with the generator calls of the per-draw code."""
        return self.noise_into(np.empty(self.pfull.shape), model, normalize, rng)

    def noise_into(self, out, model, normalize, rng) -> np.ndarray:
        """:meth:`noise` written into ``out``: the same generator calls (one per block of the fitted
        data, the first snapshot of a block carried over from the last one), in place."""
        pos = 0
        for cnt in self.counts:
            rng.standard_normal(out=out[pos : pos + cnt])
            pos += cnt
        if model not in self._shapes:  # the noise shape (module doc), None where it is 1 everywhere
            shape = noise_shape(model, self.pfull)
            self._shapes[model] = None if model != "multiplicative" and np.all(shape[0] == 1.0) else shape
        if self._shapes[model] is not None:
            out *= self._shapes[model]
        if normalize:  # the fit scales each snapshot to unit mass: first-order effect on the noise
            out -= self.pfull * self.op.grid.integrate(out).reshape((-1,) + (1,) * self.op.grid.ndim)
        return out

    def _residual(self, qbar: np.ndarray, qdot: np.ndarray) -> np.ndarray:
        """``r = M qdot + Xi(qbar) theta + gamma C qbar`` for a stack of pairs ``(m, *grid)``: the stack
        split between two threads, one BLAS thread each (thin one-axis products: measured 4-D, 49 pairs
        of ``15^4``, 0.48 s on two BLAS threads, 0.14 s on one, 0.07 s split between two threads)."""
        return self._split(qbar.shape[0], lambda sl: (self._residual_one(qbar[sl], qdot[sl]),))[0]

    def _noise_residual(self, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(r, bar e)`` of the ``K`` pairs of one draw's noise ``e`` ``(K + 1, *grid)``: its time pairs and
        their residuals (:meth:`_residual`) in :data:`BAND_DTYPE`, the pairs split between two threads."""
        dt, scheme = float(self.op.source.dt), self.res.scheme

        def part(sl):
            eb, ed = time_pairs(e[sl.start:sl.stop + self.overlap].astype(BAND_DTYPE), dt, scheme)
            return self._residual_one(eb, ed), eb

        return self._split(self.K, part)

    def _split(self, m: int, part) -> list:
        """The outputs of ``part(slice)`` (arrays ``(len, *grid)``) over ``slice(0, m)``, in two halves on two threads
        (in one piece below :data:`_THREAD_MIN_SIZE` grid values: a thread pool per call cost more than the work on
        1-D and 2-D grids, e.g. 2.8 of 3.9 s in 30 one-dimensional posteriors)."""
        self._residual_ops()  # built before the threads
        if m < 2 or m * int(np.prod(self.shape)) < _THREAD_MIN_SIZE:
            return list(part(slice(0, m)))
        with one_blas_thread():
            outs = halves(part, m)
        return [np.concatenate(xs) for xs in zip(*outs)]

    def _residual_ops(self):
        """``(dtype, [(M_b, K_b)], csr)``: the residual's operators in :data:`BAND_DTYPE`, built once (``csr``:
        the sparse band of ``Xi(.) theta``, None where its pattern is too large)."""
        res, dt_ = self.res, BAND_DTYPE
        if getattr(self, "_res_ops", (None,))[0] != dt_:
            csr = res.xi_band()
            csr = None if csr is None else csr.astype(dt_)
            self._res_ops = (dt_, [(tb.mass.astype(dt_), tb.stiffness.astype(dt_)) for tb in self.op.tables], csr)
        return self._res_ops

    def _residual_one(self, qbar: np.ndarray, qdot: np.ndarray) -> np.ndarray:
        """:meth:`_residual` on one thread, in :data:`BAND_DTYPE` (the precision the residuals are kept in).
        ``M qdot + gamma C qbar`` by one two-state walk
        (:func:`fpirl.uncertainty._expected.mass_and_stiffness` with ``qdot`` as the initial
        derivative-placed state: ``3 d - 1`` one-axis products), ``Xi(qbar) theta`` by the sparse band."""
        res, op, dt_ = self.res, self.op, BAND_DTYPE
        _, tabs, csr = self._residual_ops()
        qbar = np.asarray(qbar, dt_)
        x0, x1 = qbar * dt_(res.gamma), np.asarray(qdot, dt_)
        for b, (Mb, Kb) in enumerate(tabs):
            n1 = apply_along_axis(x0, 1 + b, Kb)
            n1 += apply_along_axis(x1, 1 + b, Mb)
            x0 = apply_along_axis(x0, 1 + b, Mb) if b < self.d - 1 else None
            x1 = n1
        P = res._pad(qbar)
        xi = res.xi_theta(P) if csr is None else (csr @ P.reshape(-1, P.shape[-1])).reshape(op.shape + (-1,))
        x1 += np.moveaxis(xi, -1, 0)
        return x1

    def _walk_small(self, rho: np.ndarray, ebar: np.ndarray, n_u: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """``(adj(W_u + W_b), adj(W_u))`` of a batch of draws (``(S, n_coef)`` and the first ``n_u`` draws)
        when ``M`` and ``M_r`` are at most :data:`SMALL_MODES`, the band never formed in full.

        Per shift ``l' = (l_1, ..., l_{d-1})`` of the other axes, the three bands ``l = (l_0, l')`` are
        formed into a small block ``(S, 3, *grid)`` (in :data:`BAND_DTYPE`) by one elementwise product per mode over all draws
        and a few rows of axis 0 at a time (in cache; ``W_u[s, l, j] = sum_m rho_m[s, j] q_m[j + l]``, ``W_b[s, l, j] = sum_m r_m[j]
        e_m[s, j + l]``, read straight from the padded arrays), and axis 0 of the adjoint walk
        contracts ``(l_0, j_0)`` of the block at once by one GEMM of inner size ``3 n_0`` with both matrices
        of the axis (two GEMMs, one per state: derivative placed or not, as in the interleaved walk); the shifts ``l'``
        split between two threads. The other axes: :meth:`_walk_rest`."""
        S, d, shape = rho.shape[0], self.d, self.shape
        M0, M1 = self.op._T[0]
        R0 = int(np.prod(shape[1:], dtype=np.int64))
        dt_ = BAND_DTYPE
        rest = list(itertools.product(range(3), repeat=d - 1))
        if getattr(self, "_small", (None,))[0] != dt_:  # the data side in that precision, once
            Pq = np.moveaxis(self.Pq, -1, 0).astype(dt_)
            Qs = None
            if 3**d * rho[0, 0].size * self.M * np.dtype(dt_).itemsize <= GATHER_BYTES:  # every shift's copy, contiguous
                Qs = np.empty((len(rest), 3, self.M) + shape, dt_)
                for p, lr in enumerate(rest):
                    for l0 in range(3):
                        Qs[p, l0] = Pq[(slice(None), slice(l0, l0 + shape[0]))
                                       + tuple(slice(i, i + n) for i, n in zip(lr, shape[1:]))]
            self._small = (dt_, Pq, np.moveaxis(self.rc, -1, 0).astype(dt_),
                           [[M.astype(dt_) for M in pair] for pair in self.op._T], Qs)
        _, Pq, rc, T, Qs = self._small  # (M, *grid + 2), (M_r, *grid), the walk's matrices, the shifted data
        Pe = _pad_grid(ebar.astype(dt_), d, self.periodic, lead=2)  # (S, M_r, *grid + 2)
        rho = rho.astype(dt_)
        rho2 = rho.reshape(S, self.M, -1)
        M0, M1 = T[0]
        # axis 0 walked: one array per state (derivative on axis 0 placed or not)
        Y = [np.empty((S, len(rest), M0.shape[0], R0), dt_) for k in (0, 1)]
        Yu = [np.empty((n_u, len(rest), M0.shape[0], R0), dt_) for k in (0, 1)]

        rows = int(max(1, _CHUNK_BYTES // (8 * S * R0)))  # rows of axis 0 per elementwise pass (in cache)
        chunks = [(lo, min(shape[0], lo + rows)) for lo in range(0, shape[0], rows)]

        def work(part):
            blk, tmp = np.empty((S, 3) + shape, dt_), np.empty((S, rows) + shape[1:], dt_)

            def add(out, t, a, b):  # out += a * b (t: scratch)
                np.multiply(a, b, out=t)
                out += t

            for p, lr in part:
                tail = tuple(slice(i, i + n) for i, n in zip(lr, shape[1:]))
                for l0, (lo, hi) in itertools.product(range(3), chunks if Qs is None else [(0, shape[0])]):
                    sl, out, t = (slice(lo + l0, hi + l0),) + tail, blk[:, l0, lo:hi], tmp[:, :hi - lo]
                    if Qs is not None:  # contiguous operands: one pass summing over the modes
                        np.einsum("smn,mn->sn", rho2, Qs[p, l0].reshape(self.M, -1), out=out.reshape(S, -1))
                        continue
                    np.multiply(rho[:, 0, lo:hi], Pq[(0,) + sl], out=out)
                    for m in range(1, self.M):
                        add(out, t, rho[:, m, lo:hi], Pq[(m,) + sl])
                for k, Mk in enumerate((M0, M1) if n_u else ()):
                    np.matmul(Mk, blk[:n_u].reshape(n_u, -1, R0), out=Yu[k][:, p])
                for l0, (lo, hi) in itertools.product(range(3), chunks):
                    sl, out, t = (slice(lo + l0, hi + l0),) + tail, blk[:, l0, lo:hi], tmp[:, :hi - lo]
                    for m in range(self.Mr):
                        add(out, t, Pe[(slice(None), m) + sl], rc[m, lo:hi])
                for k, Mk in enumerate((M0, M1)):
                    np.matmul(Mk, blk.reshape(S, -1, R0), out=Y[k][:, p])

        items = list(enumerate(rest))
        with one_blas_thread():  # the two threads here, one BLAS thread each
            (threaded if S * rho[0, 0].size * 3 >= _THREAD_MIN_SIZE and len(items) > 1
             else lambda w, it: w(it))(work, items)
        return self._walk_rest(*Y, T).astype(float), self._walk_rest(*Yu, T).astype(float)

    def _walk_rest(self, x0: np.ndarray, x1: np.ndarray, T) -> np.ndarray:
        """The adjoint walk after axis 0 (:meth:`_walk_small`): the two states ``x0``, ``x1``, each
        ``(S, [l_1, ..., l_{d-1}], i_0, [j_1, ..., j_{d-1}])``, to ``(S, n_coef)``; axis ``b > 0`` contracts ``(l_b, j_b)`` into ``i_b`` by one
        stacked GEMM per ``l_b`` (``(S, l_b, [l_>b, i_<b], j_b, [j_>b]) -> (S, [l_>b, i_<=b], [j_>b])``)."""
        d, shape, S = self.d, self.shape, x0.shape[0]
        if d == 1:
            return x1[:, 0, :, 0].copy()
        done = T[0][0].shape[0]

        def contract(x, M, view):  # (S, 3, P, n_b, R) -> (S, P, m, R)
            n_b = view[3]
            x = x.reshape(view)
            out = np.matmul(M[:, :n_b], x[:, 0])
            for lb in (1, 2):
                out += np.matmul(M[:, lb * n_b:(lb + 1) * n_b], x[:, lb])
            return out

        for b in range(1, d):
            view = (S, 3, 3 ** (d - b - 1) * done, shape[b], int(np.prod(shape[b + 1:], dtype=np.int64)))
            M0, M1 = T[b]
            n1 = contract(x0, M1, view)
            n1 += contract(x1, M0, view)
            x0 = contract(x0, M0, view) if b < d - 1 else None
            x1, done = n1, done * M0.shape[0]
        return x1.reshape(S, self.op.hermite.n_coef)

    def batch_vectors(self, noises, n_u: int = 0, mixed=None):
        """``(u + b, u)`` of a list of draws: ``(nx, S)`` and ``(nx, n_u)`` for the first ``n_u`` draws
        (``nx = n_coef + [gamma]``); or of their time mixes ``mixed`` ``(S, 2M + M_r, *grid)`` (then
        ``noises`` is not used)."""
        S = len(noises) if mixed is None else mixed.shape[0]
        # in the precision of the band walks (the gamma rows from the double-precision values)
        rho = self._buffer("rho", (S, self.M) + self.shape, BAND_DTYPE)
        ebar = self._buffer("ebar", (S, self.Mr) + self.shape, BAND_DTYPE)
        ug, bg = np.zeros(S), np.zeros(S)
        for s, e in enumerate(noises if self.mix is None else ()):  # (not compressed: the noise per snapshot)
            r, eb = self._noise_residual(e)
            ebar[s] = eb if self.Wr is None else np.tensordot(self.Wr, eb, axes=(0, 0))
            if self.Vp is not None:
                r = np.tensordot(self.Vp, r, axes=(0, 0))
            rho[s] = r
            if self.estimated:
                ug[s] = float(np.vdot(self.cq, r))
                bg[s] = float(np.vdot(eb, self.crhat))
        M = self.M
        if self.mix is not None and mixed is None:  # each draw mixed as it comes, then the residual of its M modes
            for s, e in enumerate(noises):
                y = (self.mix @ e.reshape(len(self.pfull), -1)).reshape((-1,) + self.shape)  # (2M + M_r, *grid)
                ebar[s] = y[2 * M:]
                rho[s] = self._residual(y[:M], y[M:2 * M])
                if self.estimated:
                    ug[s] = float(np.vdot(self.cq, rho[s]))
                    bg[s] = float(np.vdot(e, self.ce))
        elif self.mix is not None:  # the batch's time mixes drawn directly: the residual of all its modes at once
            mixed = mixed.reshape(S, self.mix.shape[0], -1)
            ebar[:] = mixed[:, 2 * M:].reshape(ebar.shape)
            r = self._residual(mixed[:, :M].reshape((S * M,) + self.shape),
                               mixed[:, M:2 * M].reshape((S * M,) + self.shape)).reshape((S,) + rho.shape[1:])
            rho[:] = r
            for s in range(S):
                if self.estimated:
                    ug[s] = float(np.vdot(self.cq, r[s]))
                    bg[s] = float(np.vdot(mixed[s, 2 * M:], self.crc))
            del mixed, r
        n = self.op.hermite.n_coef
        nx = n + int(self.estimated)
        UB, U = np.zeros((nx, S)), np.zeros((nx, min(n_u, S)))
        if max(self.M, self.Mr) <= SMALL_MODES:
            ub, u = self._walk_small(rho, ebar, U.shape[1])
            UB[:n], U[:n] = ub.T, u.T
        else:  # many modes: per slab of nodes, all draws (fpirl.uncertainty._many_modes)
            if getattr(self, "_many", None) is None or self._many.dtype != BAND_DTYPE:
                self._many = ManyModeWalk(self.Pq, self.Pr, self.op._T, self.shape, self.periodic, BAND_DTYPE)
            u, b = self._many(rho, ebar)
            U[:n] = u[: U.shape[1]].T
            UB[:n] = (u + b).T
        del rho, ebar
        if self.estimated:
            UB[n] = ug + bg
            U[n] = ug[: U.shape[1]]
        return UB, U


def draw_vectors(res, model, normalize, rng, n_draws, estimated, progress=False, n_u=0, bd=None, expected=None):
    """``(UB, U)`` for :func:`fpirl.uncertainty._snapshot_noise.snapshot_posterior`: ``UB = u + b`` of
    ``n_draws`` draws ``(nx, n_draws)`` and ``U = u`` of the first ``n_u`` draws (``bd``: a
    :class:`BatchedDraws` of ``res`` already built; with ``expected``, its
    :class:`fpirl.uncertainty._expected.ExpectedResidual`, the modes below the Monte Carlo error are
    dropped first, :meth:`BatchedDraws.truncate`)."""
    bd = BatchedDraws(res, estimated) if bd is None else bd
    if expected is not None:
        bd.truncate(expected, model, n_draws)
    n = res.op.hermite.n_coef
    nx = n + int(estimated)
    UB, U = np.empty((nx, n_draws)), np.empty((nx, min(n_u, n_draws)))
    reduced = bd.reduced_noise(model, normalize)
    with tqdm(total=n_draws, desc="posterior: snapshot-noise draws", unit="draw", disable=not progress,
              leave=False) as bar:
        for start in range(0, n_draws, bd.batch):
            stop = min(n_draws, start + bd.batch)
            noises, mixed = (), None
            if reduced is None:  # every normal number, one draw at a time, as it is used
                noises = PrefetchedNoise(bd, stop - start, model, normalize, rng)
            else:  # their time mixes directly
                mixed = reduced.sample(rng, stop - start)
            UB[:, start:stop], u = bd.batch_vectors(noises, max(0, min(n_u, stop) - start), mixed=mixed)
            U[:, start:start + u.shape[1]] = u
            bar.update(stop - start)
    bd._buffers.clear()  # the batch's work arrays: not held through the caller's next steps
    bd.__dict__.pop("_small", None)  # (and the shifted copies of the data)
    return UB, U
