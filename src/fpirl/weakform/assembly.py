r"""Sum-factorised assembly of the VSI normal equations (paper section 4.3).

For snapshots ``p_k`` on the finite-element nodes the weak-form residual of eq.
fokker_planck_residual_1 for the hat test function ``w_j`` is

.. math::
    \mathcal R_{kj} = \underbrace{\int \dot p_k w_j}_{g_{kj}}
        + \sum_i \theta_i \underbrace{\int \bar p_k \nabla\phi_i\cdot\nabla w_j}_{\Xi_{k,ji}}
        + \beta^{-1} \underbrace{\int \nabla \bar p_k \cdot \nabla w_j}_{c_{kj}},

with ``dot p_k = (p_{k+1} - p_k)/dt`` and ``bar p_k = (p_k + p_{k+1})/2`` (midpoint, default),
``bar p_k = p_k`` (explicit, the paper's literal form) or, over two steps, ``dot p_k = (p_{k+2} - p_k)/(2 dt)``
and ``bar p_k = (p_k + 4 p_{k+1} + p_{k+2})/6`` (Simpson, :func:`time_pairs`). The least-squares problem
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
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
from tqdm.auto import tqdm

from ..core._errors import FpirlInputError
from ..core._threads import one_blas_thread
from ..core.density import DensitySnapshots
from ..core.grid import Axis
from ..core.hermite import HermiteAxis, HermiteSpace
from ..core._tensor import apply_along_axes, apply_along_axis
from ..core.quadrature import composite_rule, merged_breakpoints
from ._moments import (  # noqa: F401 (re-exported)
    MODE_RTOL, OFFSETS_S, _first_moment, _first_moments, _padded, _second_moment, _shift, _shift_nd, time_modes)
from ._contraction import normal_matrix, placement_contraction

OFFSETS_T = (-1, 0, 1)  # n - j for a hat test function w_j and a density node n


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


#: Time discretisations of the residual rows (:func:`time_pairs`).
TIME_SCHEMES = ("midpoint", "explicit", "simpson")
#: Order in ``dt`` of each scheme's row error (tests/test_assembly.py checks it).
TIME_ORDER = {"explicit": 1, "midpoint": 2, "simpson": 4}


def _unknown_scheme(time_scheme) -> FpirlInputError:
    return FpirlInputError(f"time_scheme must be one of {', '.join(TIME_SCHEMES)}, got {time_scheme!r}")


def time_overlap(time_scheme: str) -> int:
    """Snapshots a residual row reaches beyond its first: 1 (midpoint, explicit) or 2 (Simpson). Chunks of
    snapshots that share this many boundary snapshots give every row exactly once. Checks the scheme's name."""
    if time_scheme not in TIME_SCHEMES:
        raise _unknown_scheme(time_scheme)
    return 2 if time_scheme == "simpson" else 1


def time_pairs(values: np.ndarray, dt: float, time_scheme: str) -> tuple[np.ndarray, np.ndarray]:
    r"""``(bar p_k, dot p_k)``, the residual rows' time discretisation of eq. fokker_planck_residual_1.

    The row ``k`` integrates ``dot p = F(p)`` (``F`` linear) over its window and divides by the window's length:

    * ``'midpoint'`` (trapezoidal rule over ``[t_k, t_{k+1}]``, order 2 in ``dt``): ``dot p_k = (p_{k+1} - p_k)/dt``,
      ``bar p_k = (p_k + p_{k+1})/2``, ``k = 0..K-2``;
    * ``'explicit'`` (order 1, the paper's literal form): the same ``dot p_k``, ``bar p_k = p_k``;
    * ``'simpson'`` (Simpson's rule over ``[t_k, t_{k+2}]``, order 4): ``dot p_k = (p_{k+2} - p_k)/(2 dt)``,
      ``bar p_k = (p_k + 4 p_{k+1} + p_{k+2})/6``, ``k = 0..K-3`` (overlapping windows; at least 3 snapshots).

    A mode ``exp(-lambda t)`` of the data leaves the relative row error ``(lambda dt)^2 / 12`` (midpoint) and
    ``(lambda dt)^4 / 180`` (Simpson): coarse snapshot spacing biases beta and psi under the midpoint rule
    (docs/benchmarks.md, "Time step").
    """
    if time_scheme == "midpoint":
        pbar = 0.5 * (values[1:] + values[:-1])
    elif time_scheme == "explicit":
        pbar = values[:-1]
    elif time_scheme == "simpson":
        if values.shape[0] < 3:
            raise FpirlInputError(f"time_scheme 'simpson' needs at least 3 snapshots, got {values.shape[0]}")
        return (values[:-2] + 4.0 * values[1:-1] + values[2:]) / 6.0, (values[2:] - values[:-2]) / (2.0 * dt)
    else:
        raise _unknown_scheme(time_scheme)
    return pbar, (values[1:] - values[:-1]) / dt


#: Bytes of 1-D tables :func:`build_tables` keeps for reuse (least recently used dropped first; a table over a
#: quarter of this is never kept): refits on the same axes (cross-validation, Monte Carlo loops, the posterior's
#: refits, every axis of a cube) tabulate each axis once, where a small fit spent half its time tabulating.
TABLE_CACHE_BYTES = 64 << 20
_TABLES: OrderedDict = OrderedDict()  # (fe, hermite, quadrature points) -> read-only AxisTables
_TABLES_LOCK = threading.Lock()


def _table_arrays(tb: AxisTables) -> list:
    return [tb.mass, tb.stiffness, tb.t, *tb.v.values(), *tb.t_flat.values()]


def build_tables(grid, hermite: HermiteSpace, quadrature_points: int = 3) -> list[AxisTables]:
    """One :class:`AxisTables` per axis of the FE grid and Hermite space (read-only arrays, shared with other
    callers on the same axes: :data:`TABLE_CACHE_BYTES`)."""
    if hermite.ndim != grid.ndim:
        raise FpirlInputError(f"Hermite space has {hermite.ndim} axes, the grid {grid.ndim}")
    if hermite.periodic != grid.periodic:
        raise FpirlInputError("Hermite space and grid disagree on periodicity")
    out = []
    for fe, ha in zip(grid.axes, hermite.axes):
        key = (fe, ha, int(quadrature_points))
        with _TABLES_LOCK:
            tb = _TABLES.get(key)
            if tb is not None:
                _TABLES.move_to_end(key)
        if tb is None:
            tb = axis_tables(fe, ha, quadrature_points)
            arrays = _table_arrays(tb)
            for a in arrays:
                a.flags.writeable = False
            size = sum(a.nbytes for a in arrays)
            with _TABLES_LOCK:
                if size <= TABLE_CACHE_BYTES // 4:
                    _TABLES[key] = tb
                while sum(a.nbytes for t in _TABLES.values() for a in _table_arrays(t)) > TABLE_CACHE_BYTES:
                    _TABLES.popitem(last=False)
        out.append(tb)
    return out


def fe_matrices(fe: Axis, quadrature_points: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """``(mass, stiffness)`` of the hat functions of one FE axis, ``int N_j N_n`` and ``int N_j' N_n'``,
    by the composite Gauss-Legendre rule on the FE cells (exact from 2 points on: degree <= 2)."""
    fe_breaks = fe.lower + fe.spacing * np.arange(fe.elements + 1)
    x, w = composite_rule(fe_breaks, quadrature_points)
    W0, W1 = hat_matrix(fe, x, 0), hat_matrix(fe, x, 1)
    return (W0 * w[:, None]).T @ W0, (W1 * w[:, None]).T @ W1


def _operators(tables) -> tuple[list, list]:
    """Per axis the mass and stiffness matrices: from :class:`AxisTables` or ``(mass, stiffness)`` pairs."""
    pairs = [(tb.mass, tb.stiffness) if isinstance(tb, AxisTables) else tb for tb in tables]
    return [m for m, _ in pairs], [k for _, k in pairs]


def diffusion_and_rate(values: np.ndarray, dt: float, tables, time_scheme: str):
    """Return ``bar p``, ``g = M dot p`` and ``c = K bar p`` for all steps (nodal arrays).

    ``tables``: one :class:`AxisTables` or ``(mass, stiffness)`` pair per axis. ``c = sum_a (K_a
    kron M_{b != a}) bar p`` is one walk over the axes with two states (stiffness placed or not):
    ``3 d - 2`` one-axis products instead of ``d^2``.
    """
    pbar, pdot = time_pairs(values, dt, time_scheme)
    mass, stiff = _operators(tables)
    g = apply_along_axes(pdot, mass)
    lead = pbar.ndim - len(mass)
    none, one = pbar, None
    for a, (m, k) in enumerate(zip(mass, stiff)):
        last = a == len(mass) - 1
        placed = apply_along_axis(none, lead + a, k)
        if one is not None:
            placed += apply_along_axis(one, lead + a, m)
        none, one = (None if last else apply_along_axis(none, lead + a, m)), placed
    return pbar, g, one


@dataclass(eq=False)
class DataMoments:
    """The Hermite-independent part of the assembly: the banded moments of one data set.

    ``A``, ``X^T g`` and ``X^T c`` of the normal equations are contractions of these with the 1-D
    tables of a Hermite space (:func:`contract_moments`), so fits of the same snapshots at other
    Hermite resolutions (the posterior's basis-error refits) reuse them (:func:`data_moments`).

    Attributes
    ----------
    second : ndarray, ``(5 n_1, ..., 5 n_d)``
        ``S[n, delta] = sum_k bar p_k[n] bar p_k[n + delta]`` (offset fastest per axis).
    first_g, first_c : ndarray, ``(3 n_1, ..., 3 n_d)``
        ``Z[j, l] = sum_k h_k[j] bar p_k[j + l]`` for ``h = g`` and ``h = c``.
    gg, gc, cc : float
    n_rows : int
    source : object
        The snapshots the moments were computed from (before normalisation), for :meth:`matches`.
    settings : tuple
        ``(normalize, time_scheme, quadrature_points)``.
    noise_variance : NoiseVariance, None or False
        The snapshot-noise variance of the data (:func:`fpirl.weakform.noise_bias.snapshot_noise_variance`)
        once a fit with beta estimated has needed it; False before.
    """

    second: np.ndarray = field(repr=False)
    first_g: np.ndarray = field(repr=False)
    first_c: np.ndarray = field(repr=False)
    gg: float
    gc: float
    cc: float
    n_rows: int
    source: object = field(repr=False, default=None)
    settings: tuple = ()
    noise_variance: object = field(repr=False, default=False)

    def matches(self, source, settings) -> bool:
        """Whether these are the moments of ``source`` (the same object) under ``settings``; the
        moments never depend on the Hermite space when ``quadrature_points >= 2`` (:func:`data_moments`)."""
        return self.source is source and tuple(settings) == tuple(self.settings) and settings[2] >= 2

    @property
    def nbytes(self) -> int:
        """Bytes held by the moment arrays."""
        return int(self.second.nbytes + self.first_g.nbytes + self.first_c.nbytes)


def data_moments(snapshots: DensitySnapshots, *, time_scheme: str = "midpoint", quadrature_points: int = 3,
                 tables=None, source=None, normalize: bool = False) -> DataMoments:
    """The banded data moments of :class:`DataMoments`.

    Cost ``O(M 5^d n)``, ``M <= K`` the time modes of the data (:func:`time_modes`).

    The mass and stiffness matrices come from the FE cells alone (:func:`fe_matrices`, exact), so the
    moments do not depend on the Hermite space, except with one quadrature point, where they are
    taken from ``tables`` (the merged FE/Hermite rule, as the 1-D tables). ``source`` and
    ``normalize`` are recorded for :meth:`DataMoments.matches`.
    """
    return block_moments(snapshots, 1, time_scheme=time_scheme, quadrature_points=quadrature_points, tables=tables,
                         source=source, normalize=normalize)[0]


def block_moments(snapshots: DensitySnapshots, blocks: int, *, time_scheme: str = "midpoint",
                  quadrature_points: int = 3, tables=None, source=None, normalize: bool = False) -> list[DataMoments]:
    """:func:`data_moments` of ``blocks`` contiguous blocks of the residual's time rows (``numpy.array_split``
    of the ``K`` rows of :func:`time_pairs`), for cross-validation over time
    (:mod:`fpirl.estimators.hermite_cv`). The moments are sums over the rows, so the blocks' moments
    add up to the moments of all rows (:func:`summed_moments`)."""
    grid = snapshots.grid
    if quadrature_points >= 2 or tables is None:
        ops = [fe_matrices(ax, max(int(quadrature_points), 2)) for ax in grid.axes]
    else:
        ops = tables
    settings = (bool(normalize), time_scheme, int(quadrature_points))
    out = []
    with one_blas_thread():
        pbar_all, g_all, c_all = diffusion_and_rate(snapshots.values, snapshots.dt, ops, time_scheme)
        size, extra = divmod(pbar_all.shape[0], blocks)  # numpy.array_split's partition
        bounds = [k * size + min(k, extra) for k in range(blocks + 1)]
        for k0, k1 in zip(bounds[:-1], bounds[1:]):
            pbar, g, c = pbar_all[k0:k1], g_all[k0:k1], c_all[k0:k1]  # views
            gg, gc, cc, n_rows = float(np.vdot(g, g)), float(np.vdot(g, c)), float(np.vdot(c, c)), int(g.size)
            W, q = time_modes(pbar)
            padded = _padded(q, grid.periodic, 2)  # for both moments
            second = _second_moment(q, grid.periodic, padded)
            if W is not None:  # sum_k h_k pbar_k^T = sum_m (W^T h)_m q_m^T
                g, c = (np.tensordot(W, h, axes=(0, 0)) for h in (g, c))
            first_g, first_c = _first_moments([g, c], q, grid.periodic, padded)
            del padded
            out.append(DataMoments(second, first_g, first_c, gg=gg, gc=gc, cc=cc, n_rows=n_rows, source=source,
                                   settings=settings))
    return out


def summed_moments(parts: list[DataMoments]) -> DataMoments:
    """The moments of all rows from those of disjoint blocks of rows (:func:`block_moments`): their sum."""
    first = parts[0]
    return DataMoments(sum(m.second for m in parts), sum(m.first_g for m in parts), sum(m.first_c for m in parts),
                       gg=sum(m.gg for m in parts), gc=sum(m.gc for m in parts), cc=sum(m.cc for m in parts),
                       n_rows=sum(m.n_rows for m in parts), source=first.source, settings=first.settings)


def reusable_moments(given: DataMoments | None, source, snapshots: DensitySnapshots, *, normalize: bool,
                     time_scheme: str, quadrature_points: int) -> DataMoments | None:
    """``given`` when it holds the moments of ``source`` (the caller's snapshots object, before
    normalisation) under these settings, else fresh :func:`data_moments` of ``snapshots`` (the data
    as fitted); None with one quadrature point (moments that depend on the Hermite space)."""
    key = (bool(normalize), time_scheme, int(quadrature_points))
    if given is not None and given.matches(source, key):
        return given
    if quadrature_points < 2:
        return None
    return data_moments(snapshots, time_scheme=time_scheme, quadrature_points=quadrature_points, source=source,
                        normalize=normalize)


def contract_moments(moments: DataMoments, tables, progress=None) -> NormalEquations:
    """The normal equations of the Hermite space of ``tables`` from the data moments (paper section 4.3)."""
    with one_blas_thread():
        A = normal_matrix(moments.second, [tb.v for tb in tables], [tb.hermite.n_dofs for tb in tables], progress)
        flat = [tb.t_flat for tb in tables]
        xtg = placement_contraction(moments.first_g, flat, 1, progress).ravel()
        xtc = placement_contraction(moments.first_c, flat, 1, progress).ravel()
    return NormalEquations(xtx=A, xtg=xtg, xtc=xtc, gg=moments.gg, gc=moments.gc, cc=moments.cc,
                           n_rows=moments.n_rows)


def assemble_normal_equations(
    snapshots: DensitySnapshots,
    hermite: HermiteSpace,
    *,
    time_scheme: str = "midpoint",
    quadrature_points: int = 3,
    progress: bool = False,
    moments: DataMoments | None = None,
) -> NormalEquations:
    """Assemble the normal equations of eq. vsi_regression by sum factorisation.

    Implements the residual of eqs. fokker_planck_residual_1 / fokker_planck_residual_y summed
    over all hat test functions and time steps. Cost: ``O(K 5^d n)`` for the data moments
    (:func:`data_moments`; not recomputed when ``moments`` of the same snapshots are given) plus
    about ``9 d`` GEMMs with 1-D matrices (:func:`contract_moments`); memory ``O(5^d n + n_coef^2)``.
    """
    grid = snapshots.grid
    tables = build_tables(grid, hermite, quadrature_points)
    d = grid.ndim
    # every BLAS call here is small (batched 1-D matrices) or runs in our own two threads: one BLAS
    # thread each (OpenBLAS's threads on small products cost more than they give, above all on busy cores)
    with tqdm(total=1 + 3 * d, desc="assemble", disable=not progress, leave=False) as bar:
        if moments is None:
            moments = data_moments(snapshots, time_scheme=time_scheme, quadrature_points=quadrature_points,
                                   tables=tables)
        bar.update(1)
        return contract_moments(moments, tables, bar)
