r"""Exact second moments of the snapshot-noise residual (issue 20), in place of Monte Carlo pilots.

:func:`fpirl.uncertainty._snapshot_noise.snapshot_posterior` needs three expectations of the
residual ``r_k(e)`` of independent snapshot noise ``e_i`` (unit scale, all ``K + 1`` snapshots):
the energy per node ``E_j = E sum_k r_k(e)[j]^2`` (the shape choice), its sum ``E||r(e)||^2``
(the noise level) and the second-order (bias) band ``W[l, j] = E sum_k r_k(e)[j] bar e_k[j + l]``.
They are second moments of a linear map of Gaussian noise and are computed exactly here.

The residual is ``r_k = A dot e_k + B bar e_k`` with the ``3^d``-band operators ``A = M`` (mass)
and ``B = Xi(.) theta + gamma C``, the same for every pair; the time pairs are fixed mixes
``dot e_k = sum_i T_d[k, i] e_i``, ``bar e_k = sum_i T_b[k, i] e_i``. With the per-snapshot
weights ``alpha_i = sum_k T_d[k, i]^2``, ``beta_i = sum_k T_d[k, i] T_b[k, i]``,
``c_i = sum_k T_b[k, i]^2`` and the noise covariance of snapshot ``i``

.. math::
    \operatorname{Cov}(e_i) = D_i - v_i p_i^T - p_i v_i^T + \kappa_i p_i p_i^T,\qquad
    D_i = \operatorname{diag}(s_i^2),\ v_i = w \odot s_i^2,\ \kappa_i = \textstyle\sum_j w_j^2 s_i[j]^2

(``s_i = p_i`` or ``1``; the terms in ``p_i`` only with ``normalize``, ``w`` the node weights), the
variances summed over time first (``S_a = sum_i alpha_i s_i^2``, likewise ``S_b``, ``S_c``) give

.. math::
    E_j = \sum_l \big(A_l[j]^2 S_a + 2 A_l[j] B_l[j] S_b + B_l[j]^2 S_c\big)[j + l]
    + \sum_i \Big(\kappa_i\, q_i(a_i, b_i; a_i, b_i) - 2\, q_i(a_i, b_i; a'_i, b'_i)\Big)[j],

    W[l, j] = A_l[j] S_b[j + l] + B_l[j] S_c[j + l]
    + \sum_i (\beta_i a_i + c_i b_i)[j]\,(\kappa_i p_i - v_i)[j + l] - (\beta_i a'_i + c_i b'_i)[j]\, p_i[j + l],

with ``X_l[j] = X[j, j + l]`` the bands, ``a_i = A p_i``, ``b_i = B p_i``, ``a'_i = A v_i``,
``b'_i = B v_i`` and ``q_i(a, b; a', b') = alpha_i a a' + beta_i (a b' + b a') + c_i b b'``. The
fields ``p_i`` and ``v_i`` enter through their POD modes, so the operators act on a few fields, not on all
snapshots. The gamma row of the bias is ``E sum_k C bar e_k . r_k = sum_{l, j} C_l[j] W[l, j]``.
Test: the dense covariance of the noise pushed through the residual (brute force).

**Modes kept** (:data:`NORMALIZE_RTOL`). The terms in ``p_i`` and ``v_i`` are the normalisation's, a small part of the
expectations (4-D Fokker-Planck snapshots with 2% noise, 15^4 nodes: 0.3% of ``E||r(e)||^2``, at most 0.7% of a
node's energy, 0.1% of the bias). Measured data put every snapshot's noise into ``p_i``, so all ``K + 1`` modes
stand above any rounding cut (there: 50 of 50 above ``1e-6`` of the largest eigenvalue, 5 above ``1e-4``), and those
terms then cost more than the rest of the posterior's exact moments together (1.3 of 1.8 s). Modes whose eigenvalue is
below ``1e-4`` of the largest (amplitude below 1% of the leading mode's, at or below the noise of the snapshots that
the noise shape ``s_i = p_i`` is itself read from) are dropped: there the nodal energies moved by at most ``2e-6``
(multiplicative) and ``7e-5`` (additive) of the largest, their sum by ``8e-7``, the bias by ``2e-6`` in norm, against
the draws' Monte Carlo error ``1 / sqrt(2 S)`` (9% at 64 draws). ``rtol=EIG_RTOL`` gives the exact expectations (tests).
"""

from __future__ import annotations

import numpy as np

from ..core._tensor import apply_along_axis
from ..core._threads import halves, one_blas_thread
from ..weakform.assembly import time_pairs
from ..weakform.matfree import _pad
from ._reduced_noise import noise_shape, pod_modes

#: The ``3^d`` band fields of the operators are kept between the expectations below this size.
_BAND_CACHE_BYTES = 1 << 28
#: Entries of a stack of fields from which the operators act on it in two threads.
_THREAD_MIN_SIZE = 1 << 20
#: Relative eigenvalue cut of the POD modes of ``p_i`` and ``v_i`` in the normalisation terms (module doc, "Modes kept").
NORMALIZE_RTOL = 1e-4


def mass_and_stiffness(X: np.ndarray, tables, need_mass: bool = True):
    """``(M X, C X)`` for a stack of fields ``X`` ``(m, *grid)``: ``M = kron_b M_b`` (mass),
    ``C = sum_a kron_b (K_a if b = a else M_b)`` (stiffness), by one walk over the axes with two states
    (stiffness placed or not): ``3 d - 1`` one-axis products instead of ``d^2 + d`` (``M X`` None unless asked)."""
    x0, x1 = X, None
    d = len(tables)
    for b, tb in enumerate(tables):
        n1 = apply_along_axis(x0, 1 + b, tb.stiffness)
        if x1 is not None:
            n1 += apply_along_axis(x1, 1 + b, tb.mass)
        x0 = apply_along_axis(x0, 1 + b, tb.mass) if need_mass or b < d - 1 else None
        x1 = n1
    return x0, x1


def _axis_bands(T: np.ndarray, periodic: bool) -> np.ndarray:
    """``(3, n)``: ``band[o, j] = T[j, j + o - 1]`` (wrapped on a periodic axis, 0 past a wall)."""
    n = T.shape[0]
    j = np.arange(n)
    out = np.zeros((3, n))
    for o in range(3):
        cols = j + o - 1
        ok = np.ones(n, bool) if periodic else (cols >= 0) & (cols < n)
        out[o, ok] = T[j[ok], cols[ok] % n]
    return out


def _outer(vectors) -> np.ndarray:
    out = np.ones(())
    for v in vectors:
        out = np.multiply.outer(out, v)
    return out


def _bilinear(F1: np.ndarray, G: np.ndarray, F2: np.ndarray) -> np.ndarray:
    """``sum_{m, m'} G[m, m'] F1_m F2_m'`` (fields ``F`` stacked on the first axis)."""
    return np.einsum("m...,m...->...", F1, np.tensordot(G, F2, axes=(1, 0)))


class ExpectedResidual:
    """The exact expectations of the module doc for the residual ``r`` of ``res``
    (:class:`fpirl.uncertainty._snapshot_noise._Residuals`) and the fitted snapshots ``pfull`` ``(K + 1, *grid)``
    (read from ``res`` when not given); ``rtol``: the eigenvalue cut of the modes of the normalisation terms
    (:data:`NORMALIZE_RTOL`; :data:`fpirl.uncertainty._reduced_noise.EIG_RTOL` for the exact expectations)."""

    def __init__(self, res, pfull: np.ndarray | None = None, rtol: float = NORMALIZE_RTOL):
        self.res, self.op, self.rtol = res, res.op, float(rtol)
        if pfull is None:  # the blocks of the fitted data overlap by op.overlap snapshots
            ov = res.op.overlap
            pfull = np.concatenate([b if i == 0 else b[ov:] for i, (b, *_) in enumerate(res.fitted())])
        self.pfull = pfull
        op = self.op
        self.d, self.shape, self.periodic = op.d, op.shape, op.grid.periodic
        k1 = pfull.shape[0]
        Tb, Td = time_pairs(np.eye(k1), op.source.dt, res.scheme)
        self.alpha, self.beta, self.c = (np.sum(x * y, axis=0) for x, y in ((Td, Td), (Td, Tb), (Tb, Tb)))
        self.mass = [_axis_bands(tb.mass, self.periodic) for tb in op.tables]
        self.stiff = [_axis_bands(tb.stiffness, self.periodic) for tb in op.tables]
        self.w = op.grid.node_weights()
        self._band_list = [] if 3 * 8 * op.grid.size * 3**self.d <= _BAND_CACHE_BYTES else None
        self._cache = {}

    # --- the band operators -------------------------------------------------------------
    def _bands(self):
        """``(idx, A_l, C_l, B_l)`` for every shift ``l = idx`` (fields on the grid; kept when small)."""
        if self._band_list:
            yield from self._band_list
            return
        for idx in self.op._shifts:
            A = _outer([m[i] for m, i in zip(self.mass, idx)])
            C = sum(_outer([(self.stiff if b == a else self.mass)[b][i] for b, i in enumerate(idx)])
                    for a in range(self.d))
            item = (idx, A, C, self.res.U[self.op._key(idx)] + self.res.gamma * C)
            if self._band_list is not None:
                self._band_list.append(item)
            yield item

    def _apply(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(A X, B X)`` for a stack of fields ``(m, *grid)`` (large stacks in two halves on two threads, one
        BLAS thread each: thin one-axis products)."""
        m = X.shape[0]
        if m < 2 or X.size < _THREAD_MIN_SIZE:
            return self._apply_one(X)
        self.res.xi_band()  # built once, before the threads
        with one_blas_thread():
            outs = halves(lambda sl: self._apply_one(X[sl]), m)
        return tuple(np.concatenate(xs) for xs in zip(*outs))

    def _apply_one(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`_apply` on one thread."""
        op, res = self.op, self.res
        AX, CX = mass_and_stiffness(X, op.tables)
        BX = res.gamma * CX
        P = _pad(X, self.periodic)
        return AX, BX + np.moveaxis(res.xi_theta(P), -1, 0)

    def _shift(self, P: np.ndarray, idx) -> np.ndarray:
        """``x[j + idx - 1]`` from the padded ``P``."""
        return P[tuple(slice(i, i + n) for i, n in zip(idx, self.shape))]

    def _sums(self, model):
        """``s_i^2`` and the padded ``(S_a, S_b, S_c)`` (the variances summed over time with the weights)."""
        s2 = noise_shape(model, self.pfull) ** 2
        S = [np.tensordot(x, s2, axes=(0, 0)) for x in (self.alpha, self.beta, self.c)]
        return s2, [_pad(x[None], self.periodic)[..., 0] for x in S]

    def _modes_of(self, key, X):
        """``(V, Y, A Y, B Y)``: ``X_i = sum_m V[i, m] Y_m`` (POD modes) and the operators on the modes."""
        if key not in self._cache:
            V, Y = pod_modes(X, self.rtol)
            self._cache[key] = (V, Y) + self._apply(Y)
        return self._cache[key]

    def _rank_one(self, model, s2):
        """The normalisation's terms: ``kappa`` and the modes of ``p_i`` and ``v_i = w s_i^2``."""
        kappa = np.tensordot(s2, self.w**2, axes=self.d)  # (K + 1,)
        return kappa, self._modes_of("p", self.pfull), self._modes_of(("v", model), s2 * self.w[None])

    # --- the expectations -----------------------------------------------------------------
    def energy(self, model: str, normalize: bool) -> np.ndarray:
        """``E sum_k r_k(e)[j]^2`` per node (module doc)."""
        key = ("energy", model, bool(normalize))
        if key in self._cache:
            return self._cache[key]
        s2, (Sa, Sb, Sc) = self._sums(model)
        out = np.zeros(self.shape)
        for idx, A, _, B in self._bands():
            out += A * (A * self._shift(Sa, idx) + 2 * B * self._shift(Sb, idx)) + B * B * self._shift(Sc, idx)
        if normalize:
            kappa, (Vp, _, Ap, Bp), (Vv, _, Av, Bv) = self._rank_one(model, s2)

            def gp(x):  # sum_i x_i a_i a'_i = sum_{m, m'} (V^T diag(x) V')[m, m'] (modes m, m')
                return Vp.T @ (x[:, None] * Vp)

            def gx(x):
                return Vp.T @ (x[:, None] * Vv)

            al, be, c = self.alpha, self.beta, self.c
            out += (_bilinear(Ap, gp(kappa * al), Ap) + 2 * _bilinear(Ap, gp(kappa * be), Bp)
                    + _bilinear(Bp, gp(kappa * c), Bp))
            out -= 2 * (_bilinear(Ap, gx(al), Av) + _bilinear(Ap, gx(be), Bv) + _bilinear(Bp, gx(be), Av)
                        + _bilinear(Bp, gx(c), Bv))
        self._cache[key] = out
        return out

    def bias(self, model: str, normalize: bool, estimated: bool, xi_only: bool = False) -> tuple[np.ndarray, float]:
        """``(adj(W), sum_{l, j} C_l[j] W[l, j])``: ``E D(bar e)^T r(e)`` (the second-order band ``W``, module doc).

        ``xi_only``: the part of ``r = A dot e + B bar e`` through ``Xi(bar e) theta`` alone (``A`` and ``gamma C``
        left out), i.e. ``E Xi(bar e)^T Xi(bar e) theta``: what a fit from noise-corrected sums still carries
        (:mod:`fpirl.weakform.noise_bias` removes the expected noise of ``X^T g`` and ``X^T c``, not of ``X^T X``).
        """
        op, g = self.op, self.res.gamma
        s2, (_, Sb, Sc) = self._sums(model)
        W = np.zeros(op._band_shape())
        for idx, A, C, B in self._bands():
            W[op._key(idx)] = ((B - g * C) * self._shift(Sc, idx) if xi_only else
                               A * self._shift(Sb, idx) + B * self._shift(Sc, idx))
        if normalize:
            kappa, (Vp, Yp, Ap, Bp), (Vv, Yv, Av, Bv) = self._rank_one(model, s2)
            if xi_only:  # a -> 0, b -> Xi(.) theta: B minus gamma C on the modes
                Ap, Av = np.zeros_like(Ap), np.zeros_like(Av)
                Bp, Bv = (BY - g * mass_and_stiffness(Y, op.tables, need_mass=False)[1] for BY, Y in ((Bp, Yp), (Bv, Yv)))

            def coef(x, V1, V2):
                return V1.T @ (x[:, None] * V2)

            def mix(G, F):
                return np.tensordot(G, F, axes=(1, 0))

            be, c = self.beta, self.c
            # sum_i (be_i a_i + c_i b_i) (x) (kappa_i p_i - v_i) - (be_i a'_i + c_i b'_i) (x) p_i: in modes, a sum of
            # (operator on a mode of p or v) (x) (a mode of p or v); gathered by the second factor, two stacks of
            # fields against the modes Yp and Yv (one group at a time: with many modes they are hundreds of MB)
            groups = ((lambda: mix(coef(be * kappa, Vp, Vp).T, Ap) + mix(coef(c * kappa, Vp, Vp).T, Bp)
                       - mix(coef(be, Vv, Vp).T, Av) - mix(coef(c, Vv, Vp).T, Bv), Yp),
                      (lambda: -mix(coef(be, Vp, Vv).T, Ap) - mix(coef(c, Vp, Vv).T, Bp), Yv))
            for F, Y in groups:
                self.res.accumulate(W, F(), Y)
        qg = 0.0
        if estimated:
            qg = float(sum(np.vdot(C, W[op._key(idx)]) for idx, _, C, _ in self._bands()))
        return op._adjoint(W).ravel(), qg
