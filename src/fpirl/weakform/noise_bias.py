r"""Errors-in-variables correction of the diffusion column for noisy density snapshots (issue 20).

With ``beta`` estimated, ``gamma = 1/beta`` is fitted from the diffusion column
``c_k = K bar p_k`` of eq. vsi_regression. Snapshot noise ``p_k^{obs} = p_k + e_k`` (independent
over nodes and snapshots, variance ``v_k[n]``) enters ``c_k`` amplified by the stiffness matrix
(``~1/h^2``) and the rate ``g_k = M dot p_k`` by ``1/dt``, so the sums ``c.c``, ``X^T c``,
``g.c``, ``X^T g`` and ``g.g`` of the normal equations carry the noise's second moments, which do
not vanish with more data: least squares is inconsistent (the classical errors-in-variables bias;
measured: 2-D spectral-solver data, 32^2 nodes, 5% multiplicative noise, beta = 4 came out 77).

The rule here is **corrected least squares** (the moment-corrected normal equations of
Fuller, *Measurement Error Models*, 1987, sect. 2.2): every sum is replaced by its unbiased
estimate of the noise-free sum, ``S(p^{obs}) - E[S(e)]``. Because every block is a quadratic form
in the snapshots and the noise is independent of the signal, ``E[S(p + e)] = S(p) + E[S(e)]`` and

.. math::
    E[c.c] &= \sum_n \mathrm{diag}(K^T K)_n \bar w_n,\qquad
    E[g.c] = \sum_n \mathrm{diag}(M^T K)_n \dot w_n,\qquad
    E[g.g] = \sum_n \mathrm{diag}(M^T M)_n \ddot w_n,\\
    E[(X^T c)_i] &= \sum_{j,l} T_{j,i,j+l}\, K_{j,j+l}\, \bar w_{j+l},\qquad
    E[(X^T g)_i] = \sum_{j,l} T_{j,i,j+l}\, M_{j,j+l}\, \dot w_{j+l},

``T`` the potential columns' tensor (``X_k[j, i] = sum_n bar p_k[n] T[j, i, n]``) and, summed over
the steps, ``bar w = sum_k Var(bar e_k)``, ``dot w = sum_k Cov(dot e_k, bar e_k)`` and
``ddot w = sum_k Var(dot e_k)`` per node (midpoint: ``bar w = (V - (v_0 + v_last)/2)/2``,
``dot w = (v_last - v_0)/(2 dt)``, ``ddot w = (2 V - v_0 - v_last)/dt^2`` with
``V = sum_k v_k``; explicit: ``bar w = V - v_last``, ``dot w = -bar w / dt``; Simpson:
``bar w = (18 V - 17 (v_0 + v_last) - v_1 - v_{last-1}) / 36``, ``dot w = (v_last + v_{last-1} - v_0 - v_1) / (12 dt)``,
``ddot w = (2 V - v_0 - v_1 - v_{last-1} - v_last) / (4 dt^2)``). The potential block
``X^T X`` is left as it is (its noise term is ~0.15% of it at 5% noise and does not involve gamma),
so the matrix-free and assembled paths apply the same correction.

**Noise variance.** ``v_k[n]`` is estimated from the data by a difference-based estimator (Hall,
Kay and Titterington, 1990) in time and space: the third differences along time
``d_j = (p_j - 3 p_{j+1} + 3 p_{j+2} - p_{j+3}) / sqrt(20)`` followed by the sum over the axes of
the second differences ``(1, -2, 1)`` or the fourth differences ``(1, -4, 6, -4, 1)`` (shifted
inwards at walls), scaled to a unit-norm stencil per node. For noise independent over nodes and
snapshots, with a variance that varies slowly, the filtered value ``f`` has ``E f^2 = v``; the
smooth signal is annihilated to ``O(dt^3 h^2)`` or ``O(dt^3 h^4)``. With time differences alone the
fast early transients of spectral-solver data moved beta by 0.6%; with the second difference,
coarse time steps (``dt = 0.2``, 5 snapshots) moved noise-free beta by 18% (signal leaking through),
with the fourth by 1.7%; but the fourth difference's wide one-sided stencils at walls miss the
variance there (finite-volume data with walls, 5% noise: estimated 85% of the total). So the
second-difference estimate is used unless its total exceeds the fourth-difference one by
:data:`LEAK_RATIO` (for pure noise both totals agree up to the walls' share), else the fourth's.
``v_k`` is the mean of ``f_j^2`` over the windows containing snapshot ``k``. No noise shape (multiplicative or
additive) is assumed. Fewer than :data:`MIN_SNAPSHOTS` snapshots or 5 nodes on an axis: no
correction.

What it does not do: the corrected estimator is consistent but not more precise. At 5% noise on
32^2 nodes the noise part of ``c.c`` is ~17 times its share that fixes gamma (the Schur complement),
and its random fluctuation moves beta by tens of percent (docs/benchmarks.md, "Beta from noisy
density snapshots").
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import reduce

import numpy as np

from .assembly import NormalEquations, build_tables, placement_contraction
from .matfree import band_bytes

#: Third-difference filter of the variance estimator (unit norm, annihilates quadratics in time).
DIFFERENCE_FILTER = np.array([1.0, -3.0, 3.0, -1.0]) / np.sqrt(20.0)
#: Snapshots needed for the variance estimate (one window of :data:`DIFFERENCE_FILTER`).
MIN_SNAPSHOTS = DIFFERENCE_FILTER.size
#: Snapshots read per chunk from a streamed source.
_CHUNK = 16


@dataclass
class NoiseVariance:
    """Per-node sums of the estimated snapshot-noise variance ``v_k[n]`` (module doc).

    Attributes
    ----------
    total : ndarray, grid shape   ``V = sum_k v_k``
    first, last : ndarray          ``v_0`` and ``v_{K-1}``
    second, penultimate : ndarray  ``v_1`` and ``v_{K-2}`` (the Simpson rule's end weights; None: ``first``, ``last``)
    """

    total: np.ndarray
    first: np.ndarray
    last: np.ndarray
    second: np.ndarray | None = None
    penultimate: np.ndarray | None = None


def snapshot_noise_variance(source) -> NoiseVariance | None:
    r"""Difference-based estimate of the snapshot noise variance per node (module doc).

    Parameters
    ----------
    source : DensitySnapshots or StreamingSnapshots
        The snapshots as they are fitted (normalised if the fit normalises).

    Returns
    -------
    NoiseVariance or None
        ``None`` with fewer than :data:`MIN_SNAPSHOTS` snapshots. With ``d_j`` the third differences
        and ``c_k`` the number of windows containing snapshot ``k``,
        ``v_k = (1/c_k) sum_{j: k in window j} d_j^2``.
    """
    n_t = source.n_times
    q = DIFFERENCE_FILTER.size
    periodic = source.grid.periodic
    if n_t < q or min(source.grid.shape) < SPACE_FILTER.size:  # noqa: E501
        return None
    n_w = n_t - q + 1
    k = np.arange(n_t)
    counts = np.minimum(k, n_w - 1) - np.maximum(0, k - q + 1) + 1
    weight = np.array([np.sum(1.0 / counts[j:j + q]) for j in range(n_w)])  # sum_k v_k = sum_j weight_j d_j^2
    values = None if hasattr(source, "read") else source.values  # streamed: read() applies the normalisation
    ends = sorted({0, 1, n_w - 2, n_w - 1} & set(range(n_w)))  # the windows holding snapshots 0, 1, K-2, K-1
    sums = {}  # per spatial filter: [total, {window: d_j^2} at the ends]
    for j0 in range(0, n_w, _CHUNK):
        j1 = min(j0 + _CHUNK, n_w)
        block = values[j0:j1 + q - 1] if values is not None else source.read(j0, j1 + q - 1)
        dt3 = sum(a * block[i:i + j1 - j0] for i, a in enumerate(DIFFERENCE_FILTER))
        for key, filt in ((4, SPACE_FILTER), (2, SPACE_FILTER_2)):
            d2 = _spatial_filter(dt3, periodic, filt) ** 2
            acc = sums.setdefault(key, [0.0, {}])
            acc[0] = acc[0] + np.tensordot(weight[j0:j1], d2, axes=(0, 0))
            acc[1].update({j: d2[j - j0] for j in ends if j0 <= j < j1})
    # the second difference localises better at walls; smooth signal leaks into it first (module doc)
    use = 2 if np.sum(sums[2][0]) <= LEAK_RATIO * np.sum(sums[4][0]) else 4
    total, d2 = sums[use]

    def v(k):  # v_k = (1/c_k) sum over the windows j containing snapshot k of d_j^2
        return sum(d2[j] for j in range(max(0, k - q + 1), min(k, n_w - 1) + 1)) / counts[k]

    return NoiseVariance(total, v(0), v(n_t - 1), v(1), v(n_t - 2))


#: Spatial filter of the variance estimator along each axis: the fourth difference (annihilates cubics).
SPACE_FILTER = np.array([1.0, -4.0, 6.0, -4.0, 1.0])
#: The second difference: better localised at walls, more of the smooth signal leaks through.
SPACE_FILTER_2 = np.array([1.0, -2.0, 1.0])
#: The second-difference estimate is used unless its total exceeds the fourth-difference one by this factor.
LEAK_RATIO = 1.25


def _difference_matrix(n: int, periodic: bool, filt: np.ndarray) -> np.ndarray:
    """``(n, n)``: the filter ``filt`` centred on each node (wrapped, or shifted inwards at the ends)."""
    q = filt.size
    j = np.arange(n)
    start = j - q // 2 if periodic else np.clip(j - q // 2, 0, n - q)
    cols = (start[:, None] + np.arange(q)[None, :]) % n
    D = np.zeros((n, n))
    np.add.at(D, (np.broadcast_to(j[:, None], cols.shape), cols), np.broadcast_to(filt, cols.shape))
    return D


def _spatial_filter(d: np.ndarray, periodic: bool, filt: np.ndarray) -> np.ndarray:
    """``sum_b D_b d`` over the grid axes (``1..``) of ``d``, each node scaled to a unit-norm stencil.

    The stencils of different axes share only the node itself, so the squared norm at node ``n`` is
    ``sum_b (|row_b|^2 - D_b[n_b, n_b]^2) + (sum_b D_b[n_b, n_b])^2``.
    """
    mats = [_difference_matrix(n, periodic, filt) for n in d.shape[1:]]
    nd = len(mats)
    out = 0.0
    for b, D in enumerate(mats):
        out = out + np.moveaxis(np.tensordot(D, d, axes=(1, b + 1)), 0, b + 1)
    shape = lambda b: (-1,) + (1,) * (nd - 1 - b)  # noqa: E731
    rows = sum((np.sum(D * D, axis=1) - np.diag(D) ** 2).reshape(shape(b)) for b, D in enumerate(mats))
    diag = sum(np.diag(D).reshape(shape(b)) for b, D in enumerate(mats))
    return out / np.sqrt(rows + diag**2)


def _step_weights(var: NoiseVariance, dt: float, time_scheme: str):
    """``(bar w, dot w, ddot w)`` per node: the noise moments of ``bar e``, ``dot e`` summed over the steps."""
    if time_scheme == "simpson":  # bar e_k = (e_k + 4 e_{k+1} + e_{k+2}) / 6, dot e_k = (e_{k+2} - e_k) / (2 dt)
        v0, vl = var.first, var.last
        v1 = v0 if var.second is None else var.second
        vp = vl if var.penultimate is None else var.penultimate
        wbar = (18.0 * var.total - 17.0 * (v0 + vl) - v1 - vp) / 36.0
        wdot = (vl + vp - v0 - v1) / (12.0 * dt)
        wdd = (2.0 * var.total - v0 - v1 - vp - vl) / (4.0 * dt**2)
        return wbar, wdot, wdd
    if time_scheme == "midpoint":
        wbar = 0.5 * (var.total - 0.5 * (var.first + var.last))
        wdot = (var.last - var.first) / (2.0 * dt)
    else:  # explicit: bar e_k = e_k, dot e_k = (e_{k+1} - e_k) / dt
        wbar = var.total - var.last
        wdot = -wbar / dt
    wdd = (2.0 * var.total - var.first - var.last) / dt**2
    return wbar, wdot, wdd


def _band(T: np.ndarray, offset: int, periodic: bool) -> np.ndarray:
    """``out[j] = T[j, j + offset]`` (wrapped, or zero outside)."""
    n = T.shape[0]
    j = np.arange(n)
    cols = j + offset
    if periodic:
        return T[j, cols % n]
    out = np.zeros(n)
    ok = (cols >= 0) & (cols < n)
    out[ok] = T[j[ok], cols[ok]]
    return out


def _shifted(a: np.ndarray, offsets, periodic: bool) -> np.ndarray:
    """``out[j] = a[j + offsets]`` per axis (wrapped, or zero outside)."""
    for b, s in enumerate(offsets):
        if not s:
            continue
        if periodic:
            a = np.roll(a, -s, axis=b)
        else:
            out = np.zeros_like(a)
            n = a.shape[b]
            src = [slice(None)] * a.ndim
            dst = [slice(None)] * a.ndim
            src[b], dst[b] = (slice(s, n), slice(0, n - s)) if s > 0 else (slice(0, n + s), slice(-s, n))
            out[tuple(dst)] = a[tuple(src)]
            a = out
    return a


def _outer(vectors) -> np.ndarray:
    return reduce(np.multiply.outer, vectors)


def _operator_terms(tables):
    """Factors of ``K = sum_a kron_b T_b^{(a)}`` (stiffness on axis ``a``, mass elsewhere) and ``M = kron_b mass_b``."""
    d = len(tables)
    K = [[tb.stiffness if b == a else tb.mass for b, tb in enumerate(tables)] for a in range(d)]
    M = [[tb.mass for tb in tables]]
    return K, M


def _diag_product(left, right) -> np.ndarray:
    """``diag(L^T R)`` of two Kronecker sums (lists of per-axis factor lists), on the grid."""
    out = 0.0
    for fl in left:
        for fr in right:
            out = out + _outer([np.sum(a * b, axis=0) for a, b in zip(fl, fr)])
    return out


def _first_moment_expectation(op_terms, w: np.ndarray, periodic: bool) -> np.ndarray:
    """``E[Z[j, l]] = O[j, j + l] w[j + l]`` for a Kronecker sum ``O``, interleaved as ``(3 n_1, ..., 3 n_d)``."""
    d = w.ndim
    Z = np.empty((3,) * d + w.shape)
    for idx in np.ndindex(*(3,) * d):
        offs = tuple(i - 1 for i in idx)
        band = sum(_outer([_band(T, o, periodic) for T, o in zip(f, offs)]) for f in op_terms)
        Z[idx] = band * _shifted(w, offs, periodic)
    order = [ax for b in range(d) for ax in (d + b, b)]
    return np.ascontiguousarray(Z.transpose(order)).reshape(tuple(3 * n for n in w.shape))


def _scalar_parts(var: NoiseVariance, dt: float, tables, time_scheme: str):
    """``(K, M, wbar, wdot, wdd)``: the operator terms and step weights of :func:`expected_noise_terms`."""
    wbar, wdot, wdd = _step_weights(var, dt, time_scheme)
    K, M = _operator_terms(tables)
    return K, M, wbar, wdot, wdd


def expected_cc(var: NoiseVariance, dt: float, tables, time_scheme: str = "midpoint") -> float:
    """``E[c.c]``, the expected noise energy of the diffusion column (module doc): no ``3^d`` bands, cheap."""
    K, _, wbar, _, _ = _scalar_parts(var, dt, tables, time_scheme)
    return float(np.sum(_diag_product(K, K) * wbar))


def expected_noise_terms(var: NoiseVariance, dt: float, tables, time_scheme: str = "midpoint") -> dict:
    """Expected noise contributions to the gamma-related blocks of the normal equations (module doc).

    Parameters
    ----------
    var : NoiseVariance
    dt : float
    tables : list of :class:`fpirl.weakform.assembly.AxisTables`
    time_scheme : {'midpoint', 'explicit', 'simpson'}

    Returns
    -------
    dict
        ``xtg``, ``xtc`` (vectors over the Hermite coefficients), ``gg``, ``gc``, ``cc`` (floats).
    """
    periodic = tables[0].fe.periodic
    K, M, wbar, wdot, wdd = _scalar_parts(var, dt, tables, time_scheme)
    flat = [tb.t_flat for tb in tables]
    return {
        "xtc": placement_contraction(_first_moment_expectation(K, wbar, periodic), flat, 1).ravel(),
        "xtg": placement_contraction(_first_moment_expectation(M, wdot, periodic), flat, 1).ravel(),
        "cc": float(np.sum(_diag_product(K, K) * wbar)),
        "gc": float(np.sum(_diag_product(M, K) * wdot)),
        "gg": float(np.sum(_diag_product(M, M) * wdd)),
    }


@dataclass
class CorrectedNormalEquations(NormalEquations):
    """Normal equations with the expected snapshot noise removed from the gamma blocks (module doc).

    ``correction`` holds the subtracted expectations (``xtg``, ``xtc``, ``gg``, ``gc``, ``cc``);
    re-using these equations in a fit does not correct them again.
    """

    correction: dict | None = None


#: With beta given, the correction is made only where the expected noise energy of the diffusion column ``c = K p``
#: (the column the noise enters most amplified, ``~1/h^2``) is at least this share of ``c.c``. Below it the correction's
#: effect on psi is negligible either way (``benchmarks/bench_noise_given.py --shares``: it moved psi by at most 0.25%;
#: over 4-6 noise seeds it lowered psi's error by 0.002-0.05 points on 2-D sets at 0.2-0.5% noise and raised it by
#: 0.001-0.05 points on coarse 3-D sets, against errors of 2-6%), so its cost is saved: on 6-D grids of 7 nodes per
#: axis 7 s of an 18-24 s fit (docs/benchmarks.md, issue 20, fourteenth pass). With beta estimated the correction is
#: always made (beta's noise share is measured against its Schur complement instead).
GIVEN_MIN_SHARE = 0.01

#: Most bytes of the expected first moments (``3^d`` numbers per node, and their interleaved copy:
#: :func:`fpirl.weakform.matfree.band_bytes`) for the correction to be made; above (6-D grids of about 10^6 nodes:
#: 11.7 GB) the sums stay raw, with a warning.
CORRECTION_MEMORY_LIMIT = 3e9


def _too_large(ne, grid):
    """``ne`` as it is, with the warning that the correction would exceed :data:`CORRECTION_MEMORY_LIMIT`."""
    warnings.warn(f"no snapshot-noise correction: on this {grid.ndim}-D grid it would need "
                  f"{band_bytes(grid) / 1e9:.1f} GB; psi (and beta) come from the raw sums, "
                  "biased where the snapshots are noisy", RuntimeWarning, stacklevel=4)
    return ne


def correct_normal_equations(ne: NormalEquations, source, hermite, *, time_scheme: str = "midpoint",
                             quadrature_points: int = 3, variance=False, beta_given: bool = False) -> NormalEquations:
    """``ne`` minus the expected snapshot-noise terms of its gamma blocks (corrected least squares).

    Returns ``ne`` unchanged when it is already corrected, the variance cannot be estimated
    (:func:`snapshot_noise_variance`), ``beta_given`` and the expected noise energy of the diffusion column is below
    :data:`GIVEN_MIN_SHARE` of ``ne.cc``, or the correction would exceed
    :data:`CORRECTION_MEMORY_LIMIT` (a warning: the noise matters there and is left in).
    ``variance``: the result of :func:`snapshot_noise_variance` for ``source`` when already known (a
    :class:`NoiseVariance` or None), estimated here by default.
    """
    if isinstance(ne, CorrectedNormalEquations):
        return ne
    too_large = band_bytes(source.grid) > CORRECTION_MEMORY_LIMIT
    if too_large and not beta_given:
        return _too_large(ne, source.grid)
    var = snapshot_noise_variance(source) if variance is False else variance
    if var is None:
        return ne
    tables = build_tables(source.grid, hermite, quadrature_points)
    if beta_given and expected_cc(var, source.dt, tables, time_scheme) < GIVEN_MIN_SHARE * ne.cc:
        return ne  # the noise is negligible (no warning where the correction could not be made anyway)
    if too_large:
        return _too_large(ne, source.grid)
    corr = expected_noise_terms(var, source.dt, tables, time_scheme)
    return CorrectedNormalEquations(
        xtx=ne.xtx, xtg=ne.xtg - corr["xtg"], xtc=ne.xtc - corr["xtc"], gg=ne.gg - corr["gg"],
        gc=ne.gc - corr["gc"], cc=ne.cc - corr["cc"], n_rows=ne.n_rows, correction=corr,
    )
