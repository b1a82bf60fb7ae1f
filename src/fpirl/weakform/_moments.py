"""The banded data moments of the sum-factorised assembly (:mod:`fpirl.weakform.assembly`).

``S[n, delta] = sum_k bar p_k[n] bar p_k[n + delta]`` (``5^d`` offsets per node) and the first moments
``Z[j, l] = sum_k h_k[j] bar p_k[j + l]`` (``3^d``): length-``K`` dot products between a node and its
neighbours, the snapshot axis contiguous, one first-axis slice at a time on two threads. The
moments run over the time modes of the data (:func:`time_modes`) instead of the ``K`` time pairs.
"""

from __future__ import annotations

import itertools

import numpy as np
from numpy.lib.stride_tricks import as_strided, sliding_window_view

from ..core._threads import threaded
from ._contraction import touched_empty

OFFSETS_S = (-2, -1, 0, 1, 2)  # n' - n for two density nodes under one test function


def _shift(a: np.ndarray, shift: int, axis: int, periodic: bool) -> np.ndarray:
    """``out[..., n, ...] = a[..., n - shift, ...]`` (wrapped, or zero-filled outside)."""
    if periodic:
        return np.roll(a, shift, axis=axis)
    out = np.zeros_like(a)
    n = a.shape[axis]
    if abs(shift) >= n:
        return out
    src = [slice(None)] * a.ndim
    dst = [slice(None)] * a.ndim
    if shift >= 0:
        src[axis], dst[axis] = slice(0, n - shift), slice(shift, n)
    else:
        src[axis], dst[axis] = slice(-shift, n), slice(0, n + shift)
    out[tuple(dst)] = a[tuple(src)]
    return out


def _shifted_copy(dst: np.ndarray, src: np.ndarray, shifts, periodic: bool) -> None:
    """``dst[n] = src[n - shifts]`` along the leading ``len(shifts)`` axes (wrapped, or zero outside), block
    by block into ``dst`` (no shifted temporary, unlike :func:`_shift_nd`)."""
    parts = []
    for s, n in zip(shifts, src.shape):
        if periodic:
            s %= n
            parts.append([(slice(s, n), slice(0, n - s))] + ([(slice(0, s), slice(n - s, n))] if s else []))
        elif abs(s) >= n:
            dst[...] = 0.0
            return
        else:
            parts.append([(slice(s, n), slice(0, n - s)) if s >= 0 else (slice(0, n + s), slice(-s, n))])
    if not periodic and any(shifts):
        dst[...] = 0.0
    for blocks in itertools.product(*parts):
        dst[tuple(b[0] for b in blocks)] = src[tuple(b[1] for b in blocks)]


def _shift_nd(a: np.ndarray, shifts, periodic: bool, first_axis: int = 0) -> np.ndarray:
    if periodic and len(shifts):
        return np.roll(a, tuple(shifts), axis=tuple(range(first_axis, first_axis + len(shifts))))
    for b, s in enumerate(shifts):
        if s:
            a = _shift(a, s, first_axis + b, False)
    return a


#: With at most this many snapshots (or time modes) the snapshot axis stays first in the banded products:
#: one elementwise pass per snapshot beats the short dot products (measured 7 vs 50 us per slice and
#: offset at 2 modes, 15^3-node slices; the dot products win from about 16).
SNAPSHOTS_FIRST_MAX = 8


def _padded(pbar: np.ndarray, periodic: bool, halo: int) -> tuple[np.ndarray, np.ndarray]:
    """``(Q, Qp)``: the snapshots in the layout of :func:`_banded_products` (snapshot axis last, or
    first for at most :data:`SNAPSHOTS_FIRST_MAX` snapshots), and the same padded by ``halo`` nodes per axis."""
    d = pbar.ndim - 1
    mode = "wrap" if periodic else "constant"
    if pbar.shape[0] <= SNAPSHOTS_FIRST_MAX:
        Q = np.ascontiguousarray(pbar)
        return Q, np.pad(Q, [(0, 0)] + [(halo, halo)] * d, mode=mode)
    Q = np.ascontiguousarray(np.moveaxis(pbar, 0, -1))
    return Q, np.pad(Q, [(halo, halo)] * d + [(0, 0)], mode=mode)


def _banded_products(left: np.ndarray, right_padded: np.ndarray, offsets, halo: int, out: np.ndarray,
                     first: bool = False) -> None:
    """``out[n_1, i_1, ..., n_d, i_d] = sum_k left[n, k] right[n + delta(i), k]`` for the offset indices ``i``.

    ``left`` and ``right_padded`` come from :func:`_padded` (same layout, the snapshot axis ``first``
    or last; ``right_padded`` padded by ``halo`` per axis), ``offsets`` lists index tuples ``i`` with
    ``delta = i - halo``; ``out`` is in the interleaved layout (the offset after the node, per axis)
    that the contractions read. The loop runs over slices of the first node axis, all offsets of one
    slice together, so that each product and the slice of ``out`` it writes stay in cache.
    """
    shape = left.shape[1:] if first else left.shape[:-1]
    d = len(shape)
    if not first and d >= 2:
        _banded_windows(left, right_padded, offsets, halo, out)
        return
    sub = "".join(chr(ord("a") + b) for b in range(d - 1))
    expr = f"k{sub},k{sub}->{sub}" if first else f"{sub}k,{sub}k->{sub}"
    lead = (slice(None),) if first else ()

    def work(slices):
        for a in slices:
            la, oa = left[lead + (a,)], out[a]
            for idx in offsets:
                sl = lead + (a + idx[0],) + tuple(slice(i, i + n) for i, n in zip(idx[1:], shape[1:]))
                np.einsum(expr, la, right_padded[sl], out=oa[_interleaved_index(idx)])

    threaded(work, list(range(shape[0])))


def _banded_windows(left: np.ndarray, right_padded: np.ndarray, offsets, halo: int, out: np.ndarray) -> None:
    """:func:`_banded_products` (snapshot axis last, ``d >= 2``) with all ``2 halo + 1`` offsets of the last
    axis at once: per node a ``(1, K) @ (K, 2 halo + 1)`` product against a sliding window of the padded
    neighbours (a view), written to the offsets of that node, which lie side by side in ``out``.

    Measured (4-D, 15^4 nodes, 49 modes, one thread): 2-3x faster than one product per offset, whose
    strided writes touch every cache line of ``out`` once per offset of the last axis.
    """
    stacked = out.ndim == 2 * (left.ndim - 2) + 1  # several left operands (n..., m, K) into out (m, ...)
    shape = left.shape[: -2 if stacked else -1]
    w = 2 * halo + 1
    prefixes = sorted({tuple(idx[:-1]) for idx in offsets})

    def work(slices):
        for a in slices:
            la = left[a] if stacked else left[a][..., None, :]
            # per first-axis offset the windows of its padded slice: (n_2 + 2 halo, ..., n_d, K, w), a view
            slabs = {i: sliding_window_view(right_padded[a + i], w, axis=-2) for i in {p[0] for p in prefixes}}
            for p in prefixes:
                win = slabs[p[0]][tuple(slice(i, i + n) for i, n in zip(p[1:], shape[1:-1]))]  # (n_2, ..., K, w)
                if stacked:
                    dst = np.moveaxis(out[:, a][(slice(None),) + _interleaved_index(p + (slice(None),))], 0, -2)
                else:
                    dst = out[a][_interleaved_index(p + (slice(None),))][..., None, :]
                np.matmul(la, win, out=dst)

    threaded(work, list(range(shape[0])))


def _interleaved_index(idx) -> tuple:
    """Index of the offsets ``idx`` in one first-axis slice ``(w, n_2, w, ..., n_d, w)`` of an interleaved array."""
    return (idx[0],) + tuple(x for i in idx[1:] for x in (slice(None), i)) + (Ellipsis,)  # a view, also in 1-D


def _second_moment(pbar: np.ndarray, periodic: bool, padded=None) -> np.ndarray:
    """Banded ``S[n_1, delta_1, ..., n_d, delta_d] = sum_k pbar_k[n] pbar_k[n + delta]``.

    With more than :data:`SNAPSHOTS_FIRST_MAX` snapshots (time modes), half of the ``5^d`` offsets
    come from the mirror relation ``S[n, -delta] = S[n - delta, delta]``, slice by slice of the first
    axis (the slices ``n_1 - delta_1`` it reads are in cache).
    Returned flattened per axis, ``(5 n_1, ..., 5 n_d)`` with the offset fastest, written in
    place (no transposed copy). ``padded``: ``_padded(pbar, periodic, 2)`` when the caller has it.
    """
    d = pbar.ndim - 1
    n5 = len(OFFSETS_S)
    shape = pbar.shape[1:]
    S = touched_empty(tuple(x for n in shape for x in (n, n5)))
    Q, Qp = _padded(pbar, periodic, 2) if padded is None else padded
    first = pbar.shape[0] <= SNAPSHOTS_FIRST_MAX
    offsets = list(itertools.product(range(n5), repeat=d))
    half = offsets if first else [idx for idx in offsets if idx <= tuple(n5 - 1 - i for i in idx)]
    _banded_products(Q, Qp, half, 2, S, first)
    del Q, Qp
    if first:  # few snapshots: the direct products are cheaper than the mirror's copies
        return S.reshape(tuple(n * n5 for n in shape))
    if d >= 2:  # the products took all offsets of the last axis: mirror them together
        _mirror_windows(S, shape, sorted({idx[:-1] for idx in half}), periodic)
        return S.reshape(tuple(n * n5 for n in shape))
    pairs = [(idx, tuple(n5 - 1 - i for i in idx)) for idx in half if tuple(n5 - 1 - i for i in idx) != idx]

    def work(slices):
        for a in slices:
            for idx, mirror in pairs:
                delta = tuple(OFFSETS_S[i] for i in idx)
                src = a - delta[0]
                dst = S[a][_interleaved_index(mirror)]
                if not periodic and not 0 <= src < shape[0]:
                    dst[...] = 0.0
                else:
                    _shifted_copy(dst, S[src % shape[0]][_interleaved_index(idx)], delta[1:], periodic)

    threaded(work, list(range(shape[0])))
    return S.reshape(tuple(n * n5 for n in shape))


def _mirror_windows(S: np.ndarray, shape, prefixes, periodic: bool) -> None:
    """The mirror ``S[n, -delta] = S[n - delta, delta]`` of :func:`_second_moment` after
    :func:`_banded_windows`, which computed all offsets of the last axis for the offset ``prefixes`` of
    the other axes: per slice of the first axis and mirrored prefix one strided copy.

    For the offset ``j`` (``delta = j - 2``) of the last axis and its node ``m``, the source sits at
    ``5 (m + j - 2) + 4 - j = 5 m + 4 j - 6`` of the flattened ``(node, offset)`` pairs, so the mirror of
    the last axis is a view with strides ``(5, 4)`` of those pairs extended by 6 wrapped (or zero)
    values at each end.
    """
    n5 = len(OFFSETS_S)
    n = shape[-1] * n5
    pad = n5 * (n5 // 2) - n5 + 1  # 6: the source of (m, j) is n5 m + (n5 - 1) j - pad
    pairs = [(p, tuple(n5 - 1 - i for i in p)) for p in prefixes if tuple(n5 - 1 - i for i in p) != p]
    wrapped = np.arange(-pad, n + pad) % n

    def work(slices):
        lead = tuple(shape[1:-1])
        ext = np.empty(lead + (n + 2 * pad,))
        step = ext.strides[-1]
        for a in slices:
            for p, mirror in pairs:
                delta = tuple(OFFSETS_S[i] for i in p)
                src = a - delta[0]
                dst = S[a][_interleaved_index(mirror + (slice(None),))]  # (n_2, ..., n_d, 5)
                if not periodic and not 0 <= src < shape[0]:
                    dst[...] = 0.0
                    continue
                flat = S[src % shape[0]][_interleaved_index(p + (slice(None),))].reshape(lead + (n,))
                if periodic:  # wrapped, also when the axis has fewer than pad / 5 nodes
                    np.take(flat, wrapped, axis=-1, out=ext, mode="clip")
                else:
                    ext[..., pad : pad + n] = flat
                    ext[..., :pad] = ext[..., pad + n :] = 0.0
                view = as_strided(ext, lead + (shape[-1], n5), ext.strides[:-1] + (n5 * step, (n5 - 1) * step),
                                  writeable=False)
                _shifted_copy(dst, view, delta[1:], periodic)

    threaded(work, list(range(shape[0])))


def _first_moment(h: np.ndarray, pbar: np.ndarray, periodic: bool) -> np.ndarray:
    """Banded ``Z[j_1, l_1, ...] = sum_k h_k[j] pbar_k[j + l]``, flattened per axis to ``3 n_b``."""
    return _first_moments([h], pbar, periodic)[0]


def _first_moments(hs, pbar: np.ndarray, periodic: bool, padded=None) -> list:
    """:func:`_first_moment` of each ``h`` in ``hs`` against the same ``pbar``; with many snapshots in one
    pass over the neighbours (the ``h`` stacked). ``padded``: ``_padded(pbar, periodic, 2)`` when the
    caller has it (its inner part is the padding by one node needed here)."""
    d = pbar.ndim - 1
    shape = pbar.shape[1:]
    first = pbar.shape[0] <= SNAPSHOTS_FIRST_MAX
    Qp = _padded(pbar, periodic, 1)[1] if padded is None else padded[1][
        ((slice(None),) if first else ()) + (slice(1, -1),) * d]
    offsets = list(itertools.product(range(3), repeat=d))
    if first or d < 2:
        out = []
        for h in hs:
            Z = touched_empty(tuple(x for n in shape for x in (n, 3)))
            _banded_products(np.ascontiguousarray(h if first else np.moveaxis(h, 0, -1)), Qp, offsets, 1, Z, first)
            out.append(Z.reshape(tuple(n * 3 for n in shape)))
        return out
    Z = touched_empty((len(hs),) + tuple(x for n in shape for x in (n, 3)))
    H = np.empty(shape + (len(hs), pbar.shape[0]))
    for i, h in enumerate(hs):
        np.copyto(H[..., i, :], np.moveaxis(h, 0, -1))
    _banded_products(H, Qp, offsets, 1, Z)
    return list(Z.reshape((len(hs),) + tuple(n * 3 for n in shape)))


#: Time modes of the snapshots whose singular value is below this fraction of the largest are dropped
#: from the moments: the second moment changes by less than its square, the first moments by less than
#: this, relative (rounding level; the matrix-free path's POD drops eigenvalues below 1e-13, i.e.
#: singular values below 3e-7, in the second moment only).
MODE_RTOL = 1e-14


def time_modes(pbar: np.ndarray, rtol: float = MODE_RTOL) -> tuple[np.ndarray | None, np.ndarray]:
    """``(W, Q)``: time vectors ``W (K, M)`` and modes ``Q = W^T Pbar`` (``M <= K``) of the time pairs.

    ``Pbar^T = Q_r R`` (QR of the ``K`` snapshots as columns) and the SVD ``R^T = W Sigma U^T`` give the
    singular values of ``Pbar`` to rounding relative to the largest (a Gram matrix would square the
    rounding); ``W`` keeps the ``M`` left singular vectors with ``sigma_m > rtol sigma_max``. Then
    ``Pbar = W Q`` up to the dropped modes, so ``sum_k pbar_k pbar_k^T = Q^T Q`` and
    ``sum_k h_k pbar_k^T = (W^T H)^T Q``: the moments cost ``M / K`` as much (smooth relaxations have
    few modes). Returns ``(None, pbar)`` when no mode can be dropped.
    """
    K = pbar.shape[0]
    P = pbar.reshape(K, -1)
    if K < 2 or P.shape[1] < K:
        return None, pbar
    R = np.linalg.qr(P.T, mode="r")
    W, sigma, _ = np.linalg.svd(R.T)
    if not sigma[0] > 0:
        return None, pbar
    keep = sigma > rtol * sigma[0]
    if keep.all():
        return None, pbar
    W = W[:, keep]
    return W, (W.T @ P).reshape((-1,) + pbar.shape[1:])
