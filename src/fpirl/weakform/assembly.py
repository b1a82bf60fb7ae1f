r"""Sum-factorised assembly of the VSI normal equations (paper section 4.3).

For snapshots ``p_k`` on the finite-element nodes the weak-form residual of eq.
fokker_planck_residual_1 for the hat test function ``w_j`` is

.. math::
    \mathcal R_{kj} = \underbrace{\int \dot p_k w_j}_{g_{kj}}
        + \sum_i \theta_i \underbrace{\int \bar p_k \nabla\phi_i\cdot\nabla w_j}_{\Xi_{k,ji}}
        + \beta^{-1} \underbrace{\int \nabla \bar p_k \cdot \nabla w_j}_{c_{kj}},

with ``dot p_k = (p_{k+1} - p_k)/dt`` and ``bar p_k = (p_k + p_{k+1})/2`` (midpoint, default) or
``bar p_k = p_k`` (explicit, the paper's literal form). The least-squares problem
eq. vsi_regression needs ``A = sum_k Xi_k^T Xi_k``, ``sum_k Xi_k^T g_k``, ``sum_k Xi_k^T c_k`` and
a few scalars.

How it is computed without ever forming ``Xi_k``
------------------------------------------------
``Xi_k`` is linear in the nodal values, ``Xi_k[j, i] = sum_n bar p_k[n] T[j, i, n]``, and the
3-tensor ``T`` is a sum over directions ``a`` of tensor products of 1-D tables
``t_u[j_b, i_b, n_b] = int N_n (d^u h_i)(d^u w_j) dx`` with ``u = [b == a]``. Writing
``n = j + l`` (``l in {-1, 0, 1}``) and ``delta = l' - l``:

.. math::
    A_{ii'} = \sum_{a,a'} \sum_{n,\delta} S[n, \delta]\,
              \prod_b V_b^{[b=a][b=a']}[(i_b, i'_b), (n_b, \delta_b)],\qquad
    S[n, \delta] = \sum_k \bar p_k[n]\,\bar p_k[n + \delta],

because the sum over all test nodes ``j`` of a tensor grid factorises axis by axis. ``S`` (the
banded second moment of the data, ``5^d`` offsets per node) is the only d-dimensional object;
the contraction with the 1-D matrices ``V_b`` is a sequence of BLAS GEMMs, and the sum over
``(a, a')`` is organised as a walk over axes that remembers which of the two derivative marks have
been placed (9 contractions per axis instead of ``d^2``). The right-hand sides use the first
moment ``Z[j, l] = sum_k h_k[j] bar p_k[j + l]`` in the same way. All 1-D integrals are exact
(Gauss-Legendre on the union of FE and Hermite break points, degree <= 5 with 3 points).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
from tqdm.auto import tqdm

from ..core._errors import FpirlInputError
from ..core._threads import one_blas_thread
from ..core.density import DensitySnapshots
from ..core.grid import Axis
from ..core.hermite import HermiteAxis, HermiteSpace
from ..core._tensor import apply_along_axes
from ..core.quadrature import composite_rule, merged_breakpoints
from ._contraction import _symmetrised, _threaded, normal_matrix_contraction, placement_contraction  # noqa: F401 (re-exported)

OFFSETS_T = (-1, 0, 1)  # n - j for a hat test function w_j and a density node n
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


def _shift_nd(a: np.ndarray, shifts, periodic: bool, first_axis: int = 0) -> np.ndarray:
    if periodic and len(shifts):
        return np.roll(a, tuple(shifts), axis=tuple(range(first_axis, first_axis + len(shifts))))
    for b, s in enumerate(shifts):
        if s:
            a = _shift(a, s, first_axis + b, False)
    return a


def hat_matrix(axis: Axis, x: np.ndarray, deriv: int = 0) -> np.ndarray:
    """Dense ``W[p, j] = d^deriv N_j(x_p)`` for the nodal hat functions of a FE axis."""
    x = np.asarray(x, dtype=float).ravel()
    h = axis.spacing
    t = (x - axis.lower) / h
    cell = np.clip(np.floor(t).astype(np.intp), 0, axis.elements - 1)
    xi = t - cell
    right = (cell + 1) % axis.n_nodes if axis.periodic else cell + 1
    vals = np.stack([1 - xi, xi], -1) if deriv == 0 else np.stack([-np.ones_like(xi), np.ones_like(xi)], -1) / h
    W = np.zeros((x.size, axis.n_nodes))
    rows = np.arange(x.size)
    np.add.at(W, (rows, cell), vals[:, 0])
    np.add.at(W, (rows, right), vals[:, 1])
    return W


@dataclass
class AxisTables:
    """Exact 1-D integrals for one axis (FE axis ``fe`` and Hermite axis ``hermite``).

    Attributes
    ----------
    mass, stiffness : ndarray (n, n)
        ``int w_j N_n`` and ``int w_j' N_n'``.
    t : ndarray (2, n, n_dofs, 3)
        ``t[u, j, i, l] = int N_{j+l} (d^u h_i)(d^u w_j) dx``.
    v : dict
        ``v[(u, v)]`` of shape ``(n_dofs**2, 5 n)``: ``sum_l t[u, n-l, i, l] t[v, n-l, i', l+delta]``
        at row ``i * n_dofs + i'`` and column ``5 n + delta + 2``.
    t_flat : dict
        ``t_flat[(u,)]`` of shape ``(n_dofs, 3 n)``: ``t[u, j, i, l]`` at column ``3 j + l + 1``.
    """

    fe: Axis
    hermite: HermiteAxis
    mass: np.ndarray
    stiffness: np.ndarray
    t: np.ndarray
    v: dict = field(repr=False)
    t_flat: dict = field(repr=False)


def axis_tables(fe: Axis, hermite: HermiteAxis, quadrature_points: int = 3) -> AxisTables:
    """Tabulate the 1-D integrals of one axis with a composite Gauss-Legendre rule.

    With ``quadrature_points = 3`` every integral is exact (degree <= 5 on each cell of the
    merged FE/Hermite break points).
    """
    if fe.periodic and fe.elements < 3:
        raise FpirlInputError(f"axis {fe.name!r}: periodic assembly needs at least 3 elements, got {fe.elements}")
    fe_breaks = fe.lower + fe.spacing * np.arange(fe.elements + 1)
    x, w = composite_rule(merged_breakpoints(fe_breaks, hermite.breakpoints), quadrature_points)
    W = [hat_matrix(fe, x, 0), hat_matrix(fe, x, 1)]
    H = [hermite.matrix(x, 0), hermite.matrix(x, 1)]
    n, nd = fe.n_nodes, hermite.n_dofs
    mass = (W[0] * w[:, None]).T @ W[0]
    stiffness = (W[1] * w[:, None]).T @ W[1]
    t = np.empty((2, n, nd, 3))
    for li, l in enumerate(OFFSETS_T):
        N_shift = _shift(W[0], -l, 1, fe.periodic)  # N_shift[g, j] = N_{j+l}(x_g)
        for u in (0, 1):
            t[u, :, :, li] = np.einsum("g,gj,gi->ji", w, W[u] * N_shift, H[u])
    # t indexed by the density node n = j + l instead of the test node j
    by_node = {(u, li): _shift(t[u, :, :, li], OFFSETS_T[li], 0, fe.periodic) for u in (0, 1) for li in range(3)}
    v = {}
    for u, vv in itertools.product((0, 1), repeat=2):
        V = np.zeros((nd, nd, n, len(OFFSETS_S)))
        for li, l in enumerate(OFFSETS_T):
            for di, delta in enumerate(OFFSETS_S):
                if l + delta not in OFFSETS_T:
                    continue
                lj = OFFSETS_T.index(l + delta)
                # both factors belong to the same test node j = n - l
                second = _shift(t[vv, :, :, lj], l, 0, fe.periodic)
                V[:, :, :, di] += np.einsum("ni,nk->ikn", by_node[(u, li)], second)
        v[(u, vv)] = V.reshape(nd * nd, n * len(OFFSETS_S))
    t_flat = {(u,): t[u].transpose(1, 0, 2).reshape(nd, n * 3) for u in (0, 1)}
    return AxisTables(fe, hermite, mass, stiffness, t, v, t_flat)


@dataclass
class NormalEquations:
    """Normal equations of eq. vsi_regression.

    With ``Xi_k`` the potential columns, ``c_k`` the diffusion column and ``g_k`` the time-derivative
    term, the residual of step ``k`` is ``g_k + Xi_k theta + gamma c_k`` (``gamma = 1/beta``).

    Attributes
    ----------
    xtx : (n_coef, n_coef)   ``sum_k Xi_k^T Xi_k``
    xtg, xtc : (n_coef,)     ``sum_k Xi_k^T g_k``, ``sum_k Xi_k^T c_k``
    gg, gc, cc : float       ``sum_k g.g``, ``g.c``, ``c.c``
    n_rows : int             number of residual equations (test functions x time steps)
    """

    xtx: np.ndarray
    xtg: np.ndarray
    xtc: np.ndarray
    gg: float
    gc: float
    cc: float
    n_rows: int


def time_pairs(values: np.ndarray, dt: float, time_scheme: str) -> tuple[np.ndarray, np.ndarray]:
    """``(bar p_k, dot p_k)`` for ``k = 0..K-2`` (midpoint or explicit scheme)."""
    if time_scheme == "midpoint":
        pbar = 0.5 * (values[1:] + values[:-1])
    elif time_scheme == "explicit":
        pbar = values[:-1]
    else:
        raise FpirlInputError(f"time_scheme must be 'midpoint' or 'explicit', got {time_scheme!r}")
    return pbar, (values[1:] - values[:-1]) / dt


def _padded_last(pbar: np.ndarray, periodic: bool, halo: int) -> tuple[np.ndarray, np.ndarray]:
    """``(Q, Qp)``: snapshots moved to the last axis, and the same padded by ``halo`` nodes per axis."""
    d = pbar.ndim - 1
    Q = np.ascontiguousarray(np.moveaxis(pbar, 0, -1))
    Qp = np.pad(Q, [(halo, halo)] * d + [(0, 0)], mode="wrap" if periodic else "constant")
    return Q, Qp


def _banded_products(left: np.ndarray, right_padded: np.ndarray, offsets, halo: int, out: np.ndarray) -> None:
    """``out[n_1, i_1, ..., n_d, i_d] = sum_k left[n, k] right[n + delta(i), k]`` for the offset indices ``i``.

    ``left`` has shape ``(*shape, K)`` and ``right_padded`` the same padded by ``halo`` per axis;
    ``offsets`` lists index tuples ``i`` with ``delta = i - halo``; ``out`` is in the interleaved
    layout (the offset after the node, per axis) that the contractions read. The loop runs over
    slices of the first axis, all offsets of one slice together, so that each product and the
    slice of ``out`` it writes stay in cache (the snapshot axis is contiguous).
    """
    shape = left.shape[:-1]
    d = len(shape)
    sub = "".join(chr(ord("a") + b) for b in range(d - 1))
    expr = f"{sub}k,{sub}k->{sub}"

    def work(slices):
        for a in slices:
            la, oa = left[a], out[a]
            for idx in offsets:
                sl = (a + idx[0],) + tuple(slice(i, i + n) for i, n in zip(idx[1:], shape[1:]))
                np.einsum(expr, la, right_padded[sl], out=oa[_interleaved_index(idx)])

    _threaded(work, list(range(shape[0])))


def _interleaved_index(idx) -> tuple:
    """Index of the offsets ``idx`` in one first-axis slice ``(w, n_2, w, ..., n_d, w)`` of an interleaved array."""
    return (idx[0],) + tuple(x for i in idx[1:] for x in (slice(None), i)) + (Ellipsis,)  # a view, also in 1-D


def _second_moment(pbar: np.ndarray, periodic: bool) -> np.ndarray:
    """Banded ``S[n_1, delta_1, ..., n_d, delta_d] = sum_k pbar_k[n] pbar_k[n + delta]``.

    Half of the ``5^d`` offsets come from the mirror relation ``S[n, -delta] = S[n - delta, delta]``,
    slice by slice of the first axis (the slices ``n_1 - delta_1`` it reads are in cache).
    Returned flattened per axis, ``(5 n_1, ..., 5 n_d)`` with the offset fastest, written in
    place (no transposed copy).
    """
    d = pbar.ndim - 1
    n5 = len(OFFSETS_S)
    shape = pbar.shape[1:]
    S = np.empty(tuple(x for n in shape for x in (n, n5)))
    Q, Qp = _padded_last(pbar, periodic, 2)
    half = [idx for idx in itertools.product(range(n5), repeat=d) if idx <= tuple(n5 - 1 - i for i in idx)]
    _banded_products(Q, Qp, half, 2, S)
    del Q, Qp
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
                    dst[...] = _shift_nd(S[src % shape[0]][_interleaved_index(idx)], delta[1:], periodic)

    _threaded(work, list(range(shape[0])))
    return S.reshape(tuple(n * n5 for n in shape))


def _first_moment(h: np.ndarray, pbar: np.ndarray, periodic: bool) -> np.ndarray:
    """Banded ``Z[j_1, l_1, ...] = sum_k h_k[j] pbar_k[j + l]``, flattened per axis to ``3 n_b``."""
    d = pbar.ndim - 1
    Z = np.empty(tuple(x for n in pbar.shape[1:] for x in (n, 3)))
    _, Qp = _padded_last(pbar, periodic, 1)
    H = np.ascontiguousarray(np.moveaxis(h, 0, -1))
    _banded_products(H, Qp, list(itertools.product(range(3), repeat=d)), 1, Z)
    return Z.reshape(tuple(n * 3 for n in pbar.shape[1:]))


def build_tables(grid, hermite: HermiteSpace, quadrature_points: int = 3) -> list[AxisTables]:
    """One :class:`AxisTables` per axis of the FE grid and Hermite space."""
    if hermite.ndim != grid.ndim:
        raise FpirlInputError(f"Hermite space has {hermite.ndim} axes, the grid {grid.ndim}")
    if hermite.periodic != grid.periodic:
        raise FpirlInputError("Hermite space and grid disagree on periodicity")
    return [axis_tables(fe, ha, quadrature_points) for fe, ha in zip(grid.axes, hermite.axes)]


def diffusion_and_rate(values: np.ndarray, dt: float, tables, time_scheme: str):
    """Return ``bar p``, ``g = M dot p`` and ``c = K bar p`` for all steps (nodal arrays)."""
    pbar, pdot = time_pairs(values, dt, time_scheme)
    d = len(tables)
    g = apply_along_axes(pdot, [tb.mass for tb in tables])
    c = np.zeros_like(pbar)
    for a in range(d):
        c += apply_along_axes(pbar, [tb.stiffness if b == a else tb.mass for b, tb in enumerate(tables)])
    return pbar, g, c


def assemble_normal_equations(
    snapshots: DensitySnapshots,
    hermite: HermiteSpace,
    *,
    time_scheme: str = "midpoint",
    quadrature_points: int = 3,
    progress: bool = False,
) -> NormalEquations:
    """Assemble the normal equations of eq. vsi_regression by sum factorisation.

    Implements the residual of eqs. fokker_planck_residual_1 / fokker_planck_residual_y summed
    over all hat test functions and time steps. Cost: ``O(K 5^d n)`` for the data moments plus
    about ``9 d`` GEMMs with 1-D matrices; memory ``O(5^d n + n_coef^2)``.
    """
    grid = snapshots.grid
    tables = build_tables(grid, hermite, quadrature_points)
    d = grid.ndim
    steps = 3 + d + 2 * d
    # every BLAS call here is small (batched 1-D matrices) or runs in our own two threads: one BLAS
    # thread each (OpenBLAS's threads on small products cost more than they give, above all on busy cores)
    with tqdm(total=steps, desc="assemble", disable=not progress, leave=False) as bar, \
            one_blas_thread():
        pbar, g, c = diffusion_and_rate(snapshots.values, snapshots.dt, tables, time_scheme)
        bar.update(1)
        bar.update(1)
        X = normal_matrix_contraction(_second_moment(pbar, grid.periodic), [tb.v for tb in tables], bar)
        # indices are (i_1, i'_1, i_2, i'_2, ...): regroup into (i, i')
        X = X.reshape(tuple(x for tb in tables for x in (tb.hermite.n_dofs,) * 2))
        # (the regrouped copy, or a view of the contraction's own result: either is free to overwrite)
        A = _symmetrised(X.transpose(list(range(0, 2 * d, 2)) + list(range(1, 2 * d, 2))).reshape(
            hermite.n_coef, hermite.n_coef))
        del X
        Zg = _first_moment(g, pbar, grid.periodic)
        Zc = _first_moment(c, pbar, grid.periodic)
        bar.update(1)
        flat = [tb.t_flat for tb in tables]
        xtg = placement_contraction(Zg, flat, 1, bar).ravel()
        xtc = placement_contraction(Zc, flat, 1, bar).ravel()
    return NormalEquations(
        xtx=A,
        xtg=xtg,
        xtc=xtc,
        gg=float(np.vdot(g, g)),
        gc=float(np.vdot(g, c)),
        cc=float(np.vdot(c, c)),
        n_rows=int(g.size),
    )
