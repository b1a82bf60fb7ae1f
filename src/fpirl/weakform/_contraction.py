"""The contractions of the sum-factorised assembly (:mod:`fpirl.weakform.assembly`): the banded data
moments against the 1-D tables, one axis at a time (BLAS GEMMs, no d-dimensional operator)."""

from __future__ import annotations

import itertools

import numpy as np

from ..core._threads import one_blas_thread, threaded


def _prod(xs) -> int:
    """The product of the sizes ``xs`` as a Python int (int64 arithmetic)."""
    return int(np.prod(xs, dtype=np.int64))


#: Arrays of at least this many doubles (32 MB) are touched by two threads (:func:`touched_empty`).
TOUCH_SPLIT_DOUBLES = 2**22


def touched_empty(shape) -> np.ndarray:
    """``np.empty(shape)`` with every page written once, in order (one store per 4 KiB page).

    The GEMMs and einsums here write their outputs in strided patterns; on fresh memory each first
    touch is a page fault in the middle of a BLAS kernel, which cost more than the products
    themselves (measured: the 4-D contraction 3.5 s -> 1.8 s on one thread with its two large
    outputs pre-touched). Touching the pages in order first is cheap; from
    :data:`TOUCH_SPLIT_DOUBLES` on the two halves are touched on two threads (the first touch of memory
    new to the process is the cost: 253 MB took 0.11-0.16 s on one thread, 0.08-0.10 s on two).
    """
    out = np.empty(shape)
    flat = out.reshape(-1)
    if flat.size < TOUCH_SPLIT_DOUBLES:
        flat[::512] = 0.0
        return out
    half = flat.size // 1024 * 512

    def work(parts):
        for lo, hi in parts:
            flat[lo:hi:512] = 0.0

    threaded(work, [(0, half), (half, flat.size)])
    return out


def placement_contraction(X: np.ndarray, tables, n_marks: int, progress=None) -> np.ndarray:
    """``sum over placements of n_marks derivative marks on the axes`` of a sum-factorised contraction.

    ``X`` has one (combined) index per axis. ``tables[b][variant]`` is the matrix applied along axis
    ``b`` when the marks in ``variant`` (tuple of 0/1, one per mark) are placed on it. Each mark is
    placed on exactly one axis; several marks may share an axis. Returns the tensor of output
    indices (one per axis).
    """
    d = X.ndim
    states = {(0,) * n_marks: X}
    for b in range(d):
        last = b == d - 1
        new: dict = {}
        for state, T in states.items():
            for variant in itertools.product((0, 1), repeat=n_marks):
                if any(s and v for s, v in zip(state, variant)):
                    continue
                ns = tuple(s | v for s, v in zip(state, variant))
                if last and not all(ns):
                    continue
                Y = np.tensordot(T, tables[b][variant], axes=([0], [1]))
                if ns in new:
                    new[ns] += Y
                else:
                    new[ns] = Y
        states = new
        if progress is not None:
            progress.update(1)
    return states[(1,) * n_marks]


def _nonzero_rows(v: dict) -> np.ndarray:
    """Rows ``(i, i')`` of the 1-D pair tables that are not identically zero (overlapping supports)."""
    return np.flatnonzero(np.any(np.stack([m != 0 for m in v.values()]), axis=(0, 2)))


#: Most doubles of the array between the two halves of the walk of :func:`normal_matrix` (256 MB):
#: larger ones are filled block by block of the first axis's rows (fresh pages cost ~1 s per GB here).
_BETWEEN_DOUBLES = 2**25
#: ... and at most this many times the moment's size: a small moment (a coarse grid, :mod:`fpirl.uncertainty._resolution`)
#: is cheap to read once per block, fresh pages for a large array between the halves are not.
_BETWEEN_PER_MOMENT = 1


#: The states of the walk over the axes (:func:`_walk`), in the order they are stacked: the first mark placed,
#: none placed, the second mark placed, both placed. Each new state reads a contiguous run of the incoming
#: ones (A: A, N; N: N; B: N, B; AB: all), so that it is one GEMM on a slice of the work array.
STATES = 4


def _first_half(S: np.ndarray, tables, shape, r, h: int, P: np.ndarray) -> None:
    """Axes ``0 .. h-1`` of the moment ``S`` into ``P (L_h, STATES, T)``, in chunks of the trailing index ``T``."""
    T = _prod(shape[h:])
    S2 = S.reshape(_prod(shape[:h]), T)
    P4 = P.reshape(P.shape[0] // r[h - 1], r[h - 1], P.shape[1], T)
    inter = max([_prod(r[: b + 1]) * STATES * _prod(shape[b + 1 : h]) for b in range(h - 1)], default=0)
    step = max(1, _CHUNK_DOUBLES // max(_prod(shape[:h]), inter))

    def work_on(starts):
        xbuf, work = touched_empty(_prod(shape[:h]) * step), [touched_empty(inter * step) for _ in range(2)]
        for t0 in starts:
            w = min(step, T - t0)
            Xc = xbuf[: _prod(shape[:h]) * w].reshape(-1, w)
            np.copyto(Xc, S2[:, t0 : t0 + w])
            _walk(Xc.reshape(1, shape[0], -1), tables, shape, r, 0, h, P4[:, :, :, t0 : t0 + w], work)

    with one_blas_thread():  # small GEMMs: one BLAS thread each, chunks on two threads
        threaded(work_on, list(range(0, T, step)))


def _second_half(P: np.ndarray, tables, shape, r, h: int, out4: np.ndarray) -> None:
    """Axes ``h .. d-1`` of ``P (L_h, states, T)`` into ``out4``, in chunks of the leading index."""
    d = len(shape)
    n_h, T, L = P.shape[1], P.shape[2], P.shape[0]
    inter = max([_prod(r[h : b + 1]) * STATES * _prod(shape[b + 1 :]) for b in range(h, d - 1)], default=0)
    step = max(1, _CHUNK_DOUBLES // max(n_h * T, inter))

    def work_on(starts):
        work = [touched_empty(inter * step) for _ in range(2)]
        for l0 in starts:
            Xc = P[l0 : l0 + step].reshape(-1, n_h * shape[h], T // shape[h])
            _walk(Xc, tables, shape, r, h, d, out4[l0 : l0 + step].reshape(-1, r[d - 1], 1, 1), work)

    with one_blas_thread():
        threaded(work_on, list(range(0, L, step)))


#: Doubles per work array of the blocked contraction (4 MB: the chunks reuse their pages; the work arrays
#: of both threads stay small; 2**17 .. 2**22 ran within 3% of each other).
_CHUNK_DOUBLES = 2**19


def _state_tables(v: dict, first: bool, last: bool):
    """The tables of one axis for the walk of :func:`_walk` over the states of :data:`STATES`.

    ``v[(x, y)]``: the 1-D table with the first mark's derivative ``x`` and the second's ``y`` on this axis.
    On the first axis (one incoming state, none placed) one array, the new states' rows interleaved
    (row ``i * STATES + state``): one GEMM writes all new states. On the later axes per new state
    ``(table, first incoming state)``: the tables of the incoming states it reads side by side. The last
    axis writes only "both placed".
    """
    both = (np.hstack([v[(0, 1)], v[(1, 1)], v[(1, 0)], v[(0, 0)]]), 0)  # from A, N, B, AB
    if first:
        if last:
            return [(v[(1, 1)], 0)]
        return np.stack([v[(1, 0)], v[(0, 0)], v[(0, 1)], v[(1, 1)]], axis=1).reshape(-1, v[(0, 0)].shape[1])
    if last:
        return [both]
    k = v[(0, 0)].shape[1]
    return [(np.hstack([v[(0, 0)], v[(1, 0)]]), 0), (v[(0, 0)], k), (np.hstack([v[(0, 1)], v[(0, 0)]]), k), both]


def _walk(X: np.ndarray, tables, shape, r, first: int, stop: int, out_last: np.ndarray, work) -> None:
    """Axes ``first .. stop-1`` of ``X (L, states x K_first, R)`` in place; the last writes into ``out_last``.

    Each new state is one GEMM ``W (r x c K_b) @ X[l, s K_b : (s + c) K_b] (c K_b x R)`` batched over ``L``
    (one plain GEMM when ``R = 1``; ``s`` the first incoming state it reads), written into its slot of the
    next work array ``(L, r_b, states, R)``: no copies (all states in one GEMM where :func:`_state_tables`
    gave one array). The work arrays between the axes are cut from the two flat buffers ``work`` (kept
    from chunk to chunk: fresh pages are costly).
    """
    for b in range(first, stop):
        L, R = X.shape[0], X.shape[2]
        joint = isinstance(tables[b], np.ndarray)  # all states in one table, rows (i, state)
        n = tables[b].shape[0] // r[b] if joint else len(tables[b])
        out = out_last if b == stop - 1 else work[(b - first) % 2][: L * r[b] * n * R].reshape(L, r[b], n, R)
        parts = [(tables[b], 0, _view(out, (L, r[b] * n, R)))] if joint else \
            [(w, s0, out[:, :, s]) for s, (w, s0) in enumerate(tables[b])]
        for w, s0, dst in parts:
            src = X[:, s0 : s0 + w.shape[1]]
            if R == 1:
                np.matmul(src[..., 0], w.T, out=dst[..., 0])
            else:
                np.matmul(w, src, out=dst)
        if b < stop - 1:
            X = out.reshape(L * r[b], n * shape[b + 1], -1)


def normal_matrix(S: np.ndarray, vtables, dofs, progress=None) -> np.ndarray:
    """The normal matrix ``A = sum_{a,a'} sum_{n,delta} S[n, delta] prod_b V_b^{[b=a][b=a']}``, ``(n_coef, n_coef)``
    with ``n_coef = prod(dofs)`` (``dofs``: the Hermite dofs per axis), row ``(i_1, ..., i_d)`` and column
    ``(i'_1, ..., i'_d)`` in C order.

    ``V_b^{xy}`` is the 1-D table of axis ``b`` at the pair index ``(i_b, i'_b)`` (rows) and the moment's
    ``(n_b, delta_b)`` (columns) with the first mark's derivative ``x`` and the second's ``y``.

    ``A`` is symmetric (the Gram matrix of eq. vsi_regression's design), so only the blocks with first-axis
    dofs ``i_1 <= i'_1`` are contracted (``(n_1 + 1) / (2 n_1)`` of the first axis's pairs, and every later
    product shrinks with them) and the others are their transposes. A walk over the axes with four states
    (:data:`STATES`) places both marks (9 products per axis; 4-D benchmark: 47 GFLOP, against 58 for the
    earlier walk over all pairs with three states and ``A = X + X^T``). Rows of ``V_b`` that vanish
    identically (Hermite dof pairs more than two Hermite elements apart: no test function reaches both
    supports) are dropped, so the later products are smaller.

    Layout: the axes are contracted from the first to the last, each in place: before axis ``b`` the work
    array is ``(L, states x K_b, R)`` (``L`` the finished pair indices, ``R`` the axes still to come).
    Blocked in two halves: the first ``d // 2`` axes in chunks of the trailing index ``R``, the rest in
    chunks of the leading index ``L``, so that only the moment, the array between the halves and the
    result are large (fresh memory is costly; the chunks' work arrays stay in cache). The pair indices
    ``(i_b, i'_b)`` are then regrouped into ``(i, i')`` block by block of the first axis
    (:func:`_regrouped`): no full-size array in the pair layout.
    """
    Y, upper, rows = _upper_contraction(S, vtables, dofs, progress)
    n = _prod(dofs)
    return _regrouped(Y, upper, rows, dofs, np.empty((n, n)))  # after the contraction's work arrays are freed


def _view(a: np.ndarray, shape) -> np.ndarray:
    """``a`` reshaped without a copy (an error where a copy would be needed: the GEMMs write into it)."""
    v = a.reshape(shape)
    if not np.may_share_memory(v, a):  # reshape copied (setting .shape, which refused, is deprecated in NumPy 2.5)
        raise ValueError(f"an array of shape {a.shape} and strides {a.strides} cannot be viewed as {tuple(shape)}")
    return v


def _rows(tables, i0: int, i1: int, r: int):
    """Rows ``i0:i1`` of the first axis's tables (the joint table's ``(i, state)`` rows, or each state's)."""
    if isinstance(tables, np.ndarray):
        n = tables.shape[0] // r
        return tables[i0 * n : i1 * n]
    return [(w[i0:i1], s0) for w, s0 in tables]


def _regrouped(Y: np.ndarray, upper: np.ndarray, rows, dofs, A: np.ndarray) -> np.ndarray:
    """``A`` from the contraction ``Y`` at the first-axis pairs ``upper`` (``i_1 <= i'_1``) and the pair indices
    ``rows[b]`` of the other axes: the block of first-axis dofs ``(i_1, i'_1)`` regrouped from the pair layout
    ``(i_2 i'_2, ..., i_d i'_d)`` into ``(i_2..i_d, i'_2..i'_d)``, and the block ``(i'_1, i_1)`` its transpose
    (the diagonal blocks symmetrised, so that ``A`` is exactly symmetric)."""
    d = len(dofs)
    m = d - 1
    A8 = A.reshape(tuple(dofs) * 2)
    rest = (slice(None),) * m
    full = all(rb.size == nb * nb for rb, nb in zip(rows[1:], dofs[1:]))
    to_blocks = list(range(0, 2 * m, 2)) + list(range(1, 2 * m, 2))  # (i_2, i'_2, ...) -> (i_2.., i'_2..)
    swap = list(range(m, 2 * m)) + list(range(m))  # a block's transpose
    interleave = [k for b in range(m) for k in (b, m + b)]
    if not full or len(upper) < dofs[0] * (dofs[0] + 1) // 2:  # pairs without overlap stay zero
        A.fill(0.0)
    if full:
        Yp = Y.reshape((Y.shape[0],) + tuple(x for nb in dofs[1:] for x in (nb, nb)))
    else:
        index = []
        for b, (rb, nb) in enumerate(zip(rows[1:], dofs[1:])):
            shape = [1] * m
            shape[b] = rb.size
            index += [(rb // nb).reshape(shape), (rb % nb).reshape(shape)]
        index = tuple(index)

    def work(items):
        for u in items:
            i, j = divmod(int(upper[u]), dofs[0])
            block = A8[(i,) + rest + (j,) + rest + (Ellipsis,)]  # a view also in 1-D
            if full:
                block[...] = Yp[u].transpose(to_blocks)
            else:
                block.transpose(interleave)[index] = Y[u]
            if i != j:
                A8[(j,) + rest + (i,) + rest + (Ellipsis,)] = block.transpose(swap)
            else:  # symmetric to rounding: made exactly so (numpy buffers the overlapping operand)
                np.add(block, block.transpose(swap), out=block)
                block *= 0.5

    threaded(work, list(range(len(upper))))  # disjoint blocks (numpy's strided copies release the GIL)
    return A


def _upper_contraction(S: np.ndarray, vtables, dofs, progress=None):
    """``(Y, upper, rows)``: the contraction of :func:`normal_matrix` at the first-axis pairs ``upper``
    (``i_1 <= i'_1``, not identically zero) and the pair indices ``rows[b]`` of the other axes that are not
    identically zero, in the pair layout ``(len(upper), r_2, ..., r_d)``."""
    d, shape = S.ndim, S.shape
    rows = [_nonzero_rows(v) for v in vtables]
    upper = rows[0][rows[0] // dofs[0] <= rows[0] % dofs[0]]
    r = [upper.size] + [x.size for x in rows[1:]]
    if min(r) == 0:
        return np.zeros(tuple(r)), upper, rows
    keep = [upper] + rows[1:]
    tables = [_state_tables({k: m[keep[b]] for k, m in vtables[b].items()}, b == 0, b == d - 1) for b in range(d)]
    h = d // 2
    T, n_h = _prod(shape[h:]), STATES if h else 1
    between = None
    if h:
        # the array between the halves for a block of rows of the first axis at a time (the moment is
        # read once per block): at most _BETWEEN_DOUBLES, kept from block to block. Allocated before the
        # output: freed, its memory joins the output's once that is freed too, where the next large array
        # (the solver's copy of the normal matrix) fits (allocated after the output, the two holes stayed
        # apart: the 5-D bare fit's peak 2.13 -> 2.37 GB)
        per_row = _prod(r[1:h]) * n_h * T
        c0 = max(1, min(r[0], int(min(_BETWEEN_DOUBLES, _BETWEEN_PER_MOMENT * S.size)) // per_row))
        c0 = -(-r[0] // -(-r[0] // c0))  # equal blocks
        between = touched_empty(c0 * per_row)
    out = touched_empty(_prod(r))
    inner = _prod(r[h : d - 1])
    out4 = out.reshape(_prod(r[:h]), inner, r[d - 1], 1, 1)
    if not h:
        _second_half(S.reshape(1, 1, -1), tables, shape, r, 0, out4)
    else:
        for i0 in range(0, r[0], c0):
            i1 = min(i0 + c0, r[0])
            rc = [i1 - i0] + list(r[1:])
            tabs = [_rows(tables[0], i0, i1, r[0])] + tables[1:]
            Pc = between[: (i1 - i0) * per_row].reshape(-1, n_h, T)
            _first_half(S, tabs, shape, rc, h, Pc)
            rows_per = _prod(r[1:h])
            _second_half(Pc, tabs, shape, rc, h, out4[i0 * rows_per : i1 * rows_per])
    if progress is not None:
        progress.update(d)
    return out.reshape(tuple(r)), upper, rows
