r"""The mixed-flux product ``c -> A c`` with all POD modes at once, on any array namespace (NumPy or CuPy).

:class:`fpirl.weakform.matfree_mixed.MixedFluxOperator` applies, per POD mode ``q_m`` (or streamed
time pair), the factored flux rules of its module docstring,

.. math::
    u_m = \sum_a \tilde T_a (X_{a,m} \odot g_a),\qquad
    r_m = (\otimes_b N_b^T N_b)\, u_m,\qquad
    h_a = \sum_m X_{a,m} \odot \tilde T_a^T r_m,\qquad
    A c = \sum_a G_a^T h_a,

with ``g_a = G_a c`` and ``X_{a,m}`` the density of mode ``m`` at the points of axis ``a``'s rule.
Here the modes are a leading batch axis: every one-axis product is one batched GEMM over all modes,
and the sum over ``m`` a reduction, which is what a GPU wants (thousands of threads, no Python
loop over modes). The densities at the points are computed once and kept on the device. The set-up's
pass over the time pairs (right-hand sides ``X^T g``, ``X^T c``, ``g.g``, ``g.c``, ``c.c`` and the
trace of ``A``, as :meth:`fpirl.weakform.matfree_flux.FluxOperator._flux_right_hand_sides`) runs
batched on the device too; reading the data and the POD stay on the host. The same
code runs on NumPy (the tests compare it with the per-mode loop) and on CuPy (``device='cuda'``:
an optional dependency, imported only when asked for). Only ``c`` and ``A c`` cross between host
and device in a product (``n_coef`` numbers each way).
"""

from __future__ import annotations

import numpy as np

from ..core._errors import FpirlInputError
from ..core._tensor import apply_along_axes, apply_along_axis
from ._krylov import Marginals
from .assembly import NormalEquations

__all__ = ["DEVICES", "BatchedMixedFlux", "array_namespace"]

#: Where the mixed-flux product may run.
DEVICES = ("cpu", "cuda")
#: Memory for the temporaries of one block of modes (several arrays of the size of ``X_a`` each).
BLOCK_BYTES = 1 << 30


def array_namespace(device: str):
    """The array module for ``device``: NumPy for ``'cpu'``, CuPy for ``'cuda'`` (one-line error when
    CuPy or a CUDA device is missing)."""
    if device not in DEVICES:
        raise FpirlInputError(f"device must be one of {', '.join(DEVICES)}, got {device!r}")
    if device == "cpu":
        return np
    try:
        import cupy
    except ImportError:
        raise FpirlInputError("device='cuda' needs CuPy (pip install cupy-cuda12x or cupy-cuda13x, to match "
                              "the CUDA driver); it is not installed") from None
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDA runtime errors carry no common base class
        raise FpirlInputError(f"device='cuda': no usable CUDA device ({type(exc).__name__}: {exc})") from None
    if n < 1:
        raise FpirlInputError("device='cuda': CuPy sees no CUDA device")
    return cupy


def _host(x) -> np.ndarray:
    """``x`` as a NumPy array (a device array is copied back)."""
    return x if isinstance(x, np.ndarray) else x.get()


class BatchedMixedFlux:
    """The product of a set-up :class:`~fpirl.weakform.matfree_mixed.MixedFluxOperator` with the modes batched.

    Parameters
    ----------
    op : MixedFluxOperator
        Set up, with factored rules (transverse rule ``'nodal'`` or ``'corrected'``).
    xp : module
        ``numpy`` or ``cupy`` (see :func:`array_namespace`).

    Notes
    -----
    Same ``A c`` as the operator's own loop to rounding (tests). With POD modes, their densities at
    the rules' points live on the device (``d`` arrays of ``2 n^d`` numbers per mode); without (the
    POD gave up on noisy data), every product sends the time pairs over, a chunk at a time.
    """

    def __init__(self, op, xp=np):
        if not op._factored:
            raise FpirlInputError("the batched mixed-flux product needs a 'nodal' or 'corrected' transverse rule")
        self.op, self.xp, self.d = op, xp, op.d
        put = xp.asarray
        self._Ta = [put(t) for t in op._Ta]
        self._TaT = [put(t) for t in op._TaT]
        self._NtN = [put(t) for t in op._NtN]
        self._Pt = None if op._identity_density else [put(t) for t in op._Pt]
        self._Xa = [put(t) for t in op._Xa]
        self._mass = [put(m) for m in op._mass]
        self._lap = [put(m) for m in op._lap]
        self._Nt = [put(m) for m in op._Nt]
        self._H = [[put(r[2]) for r in rules] for rules in op._rules]
        self._HT = [[put(np.ascontiguousarray(r[2].T)) for r in rules] for rules in op._rules]
        self._points_per_mode = sum(int(np.prod([r[1].shape[0] for r in rules])) for rules in op._rules)
        self._cache = None

    def _block(self) -> int:
        """Modes per batch: the temporaries of a batch within :data:`BLOCK_BYTES`."""
        return max(1, int(BLOCK_BYTES // (8 * 3 * max(1, self._points_per_mode // self.d))))

    def points(self, Q):
        """``X_a`` for every axis ``a``: the densities of the batch ``Q`` (``(K, *grid.shape)``) at the rule's points."""
        xp = self.xp
        Y = xp.asarray(Q, dtype=float)
        if self._Pt is not None:
            Y = apply_along_axes(Y, self._Pt)
        return [apply_along_axis(Y, a + 1, self._Xa[a]) for a in range(self.d)]

    def _batches(self):
        """``(K, *shape)`` arrays of modes (their points cached) or streamed time pairs, as lists ``X_a``."""
        op, K = self.op, self._block()
        if op._modes is not None:
            if self._cache is None:
                self._cache = [self.points(op._modes[s:s + K]) for s in range(0, op.n_modes, K)]
            yield from self._cache
            return
        for _, (pbar, _) in op._pbar_chunks():
            for s in range(0, pbar.shape[0], K):
                yield self.points(pbar[s:s + K])

    def _accumulate(self, X, r, h) -> None:
        """``h_a += sum_m X_{a,m} * tilde T_a^T r_m`` for every axis ``a`` (``r``: a batch on the FE nodes)."""
        for a in range(self.d):
            t = apply_along_axis(r, a + 1, self._TaT[a])
            t *= X[a]
            s = t.sum(axis=0)
            h[a] = s if h[a] is None else h[a] + s

    def _adjoint(self, h) -> np.ndarray:
        """``sum_a G_a^T h_a`` (flat, on the host)."""
        out = None
        for a in range(self.d):
            v = apply_along_axes(h[a], self._HT[a])
            out = v if out is None else out + v
        return _host(out).ravel()

    def matvec(self, c: np.ndarray) -> np.ndarray:
        """``A c`` (flat, on the host); see the module docstring."""
        xp, d = self.xp, self.d
        x = xp.asarray(np.asarray(c, dtype=float).reshape(self.op.hermite.shape))
        g = [apply_along_axes(x, self._H[a]) for a in range(d)]
        h = [None] * d
        for X in self._batches():
            u = None
            for a in range(d):
                v = apply_along_axis(X[a] * g[a], a + 1, self._Ta[a])
                u = v if u is None else u + v
            self._accumulate(X, apply_along_axes(u, self._NtN), h)
        return self._adjoint(h)

    def right_hand_sides(self):
        """The set-up's pass over the time pairs, batched: ``(NormalEquations, trace of A, marginals)``.

        Per pair ``k``: ``g_k = (otimes M) dot q_k``, ``c_k = (otimes M) sum_a L_a q_k`` (``L = M^{-1} K``),
        ``X^T g += Xi(q_k)^T g_k`` and ``X^T c += Xi(q_k)^T c_k``, the sums ``g.g``, ``g.c``, ``c.c``, and
        ``tr A += q_k^T T q_k`` (:meth:`fpirl.weakform.matfree.NormalOperator._trace_term`).
        """
        op, xp, d = self.op, self.xp, self.d
        tmats = [{k: xp.asarray(v) for k, v in m.items()} for m in op._flux_trace_matrices()]
        hg, hc = [None] * d, [None] * d
        gg = gc = cc = trace = 0.0
        n_rows, K = 0, self._block()
        marg = Marginals(op.shape)
        for _, (pbar, pdot) in op._pbar_chunks():
            marg.add(pbar)
            if op._pod is not None:  # the POD in the same pass (NormalOperator._setup); the trace stays here
                op._pod.add(pbar)
            for s in range(0, pbar.shape[0], K):
                q, qdot = xp.asarray(pbar[s:s + K]), xp.asarray(pdot[s:s + K])
                trace += op._trace_term(q, tmats, along=apply_along_axis)
                g = apply_along_axes(qdot, self._mass)
                lap = None
                for a in range(d):
                    v = apply_along_axis(q, a + 1, self._lap[a])
                    lap = v if lap is None else lap + v
                c = apply_along_axes(lap, self._mass)
                gg += float((g * g).sum())
                gc += float((g * c).sum())
                cc += float((c * c).sum())
                n_rows += int(g.size)
                X = self.points(q)
                self._accumulate(X, apply_along_axes(g, self._Nt), hg)
                self._accumulate(X, apply_along_axes(c, self._Nt), hc)
        ne = NormalEquations(None, self._adjoint(hg), self._adjoint(hc), gg, gc, cc, n_rows)
        return ne, float(trace), marg.normalised()
