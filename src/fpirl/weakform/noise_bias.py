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
``V = sum_k v_k``; explicit: ``bar w = V - v_last``, ``dot w = -bar w / dt``). The potential block
``X^T X`` is left as it is (its noise term is ~0.15% of it at 5% noise and does not involve gamma),
so the matrix-free and assembled paths apply the same correction.

**Noise variance.** ``v_k[n]`` is estimated from the data by a difference-based estimator (Hall,
Kay and Titterington, 1990) in time and space: the third differences along time
``d_j = (p_j - 3 p_{j+1} + 3 p_{j+2} - p_{j+3}) / sqrt(20)`` followed by the discrete Laplacian
``sum_b (d[n - e_b] - 2 d[n] + d[n + e_b]) / sqrt(4 d^2 + 2 d)`` (unit norm). For noise independent
over nodes and snapshots, with a variance that varies slowly, the filtered value ``f`` has
``E f^2 = v``; the smooth signal is annihilated up to ``O(dt^3 h^2)`` (the time filter alone
leaves the fast early transients of spectral-solver data, which moved beta by 0.6%). ``v_k`` is
the mean of ``f_j^2`` over the windows containing snapshot ``k``; without periodic boundaries an
axis takes the one-sided second difference at its end nodes. No noise shape (multiplicative or
additive) is assumed. Fewer than :data:`MIN_SNAPSHOTS` snapshots or 3 nodes on an axis: no correction.

What it does not do: the corrected estimator is consistent but not more precise. At 5% noise on
32^2 nodes the noise part of ``c.c`` is ~17 times its share that fixes gamma (the Schur complement),
and its random fluctuation moves beta by tens of percent (docs/benchmarks.md, "Beta from noisy
density snapshots").
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce

import numpy as np

from .assembly import NormalEquations, build_tables, placement_contraction

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
    """

    total: np.ndarray
    first: np.ndarray
    last: np.ndarray


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
    if n_t < q or min(source.grid.shape) < 3:
        return None
    n_w = n_t - q + 1
    k = np.arange(n_t)
    counts = np.minimum(k, n_w - 1) - np.maximum(0, k - q + 1) + 1
    weight = np.array([np.sum(1.0 / counts[j:j + q]) for j in range(n_w)])  # sum_k v_k = sum_j weight_j d_j^2
    values = None if hasattr(source, "read") else source.values  # streamed: read() applies the normalisation
    total = first = last = None
    for j0 in range(0, n_w, _CHUNK):
        j1 = min(j0 + _CHUNK, n_w)
        block = values[j0:j1 + q - 1] if values is not None else source.read(j0, j1 + q - 1)
        d = _laplacian(sum(a * block[i:i + j1 - j0] for i, a in enumerate(DIFFERENCE_FILTER)), periodic)
        d2 = d * d
        part = np.tensordot(weight[j0:j1], d2, axes=(0, 0))
        total = part if total is None else total + part
        if j0 == 0:
            first = d2[0] / counts[0]
        if j1 == n_w:
            last = d2[-1] / counts[-1]
    return NoiseVariance(total, first, last)


def _second_difference(d: np.ndarray, axis: int) -> np.ndarray:
    """``d[n-1] - 2 d[n] + d[n+1]`` along ``axis``, one-sided (``n, n+1, n+2``) at the two ends."""
    n = d.shape[axis]
    take = lambda a, b: d.take(np.arange(a, b), axis=axis)  # noqa: E731
    inner = take(0, n - 2) - 2.0 * take(1, n - 1) + take(2, n)
    return np.concatenate([inner.take([0], axis=axis), inner, inner.take([-1], axis=axis)], axis=axis)


def _laplacian(d: np.ndarray, periodic: bool) -> np.ndarray:
    """Unit-norm discrete Laplacian over the grid axes (``1..``) of ``d`` (module doc).

    Without periodic boundaries an axis takes the one-sided second difference at its two end
    nodes; each node is scaled by the norm of its own stencil (``m`` one-sided axes of ``D``:
    ``(m - 2 (D - m))^2 + 5 m + 2 (D - m)``).
    """
    nd = d.ndim - 1
    if periodic:
        out = -2.0 * nd * d
        for b in range(1, d.ndim):
            out += np.roll(d, 1, axis=b) + np.roll(d, -1, axis=b)
        return out / np.sqrt(4.0 * nd**2 + 2.0 * nd)
    out = sum(_second_difference(d, b) for b in range(1, d.ndim))
    ends = 0
    for b, n in enumerate(d.shape[1:]):
        e = np.zeros(n)
        e[[0, -1]] = 1.0
        ends = ends + e.reshape((-1,) + (1,) * (nd - 1 - b))
    m = np.asarray(ends, dtype=float)
    return out / np.sqrt((m - 2.0 * (nd - m)) ** 2 + 5.0 * m + 2.0 * (nd - m))


def _step_weights(var: NoiseVariance, dt: float, time_scheme: str):
    """``(bar w, dot w, ddot w)`` per node: the noise moments of ``bar e``, ``dot e`` summed over the steps."""
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


def expected_noise_terms(var: NoiseVariance, dt: float, tables, time_scheme: str = "midpoint") -> dict:
    """Expected noise contributions to the gamma-related blocks of the normal equations (module doc).

    Parameters
    ----------
    var : NoiseVariance
    dt : float
    tables : list of :class:`fpirl.weakform.assembly.AxisTables`
    time_scheme : {'midpoint', 'explicit'}

    Returns
    -------
    dict
        ``xtg``, ``xtc`` (vectors over the Hermite coefficients), ``gg``, ``gc``, ``cc`` (floats).
    """
    periodic = tables[0].fe.periodic
    wbar, wdot, wdd = _step_weights(var, dt, time_scheme)
    K, M = _operator_terms(tables)
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


def correct_normal_equations(ne: NormalEquations, source, hermite, *, time_scheme: str = "midpoint",
                             quadrature_points: int = 3) -> NormalEquations:
    """``ne`` minus the expected snapshot-noise terms of its gamma blocks (corrected least squares).

    Returns ``ne`` unchanged when it is already corrected or the variance cannot be estimated
    (:func:`snapshot_noise_variance`).
    """
    if isinstance(ne, CorrectedNormalEquations):
        return ne
    var = snapshot_noise_variance(source)
    if var is None:
        return ne
    tables = build_tables(source.grid, hermite, quadrature_points)
    corr = expected_noise_terms(var, source.dt, tables, time_scheme)
    return CorrectedNormalEquations(
        xtx=ne.xtx, xtg=ne.xtg - corr["xtg"], xtc=ne.xtc - corr["xtc"], gg=ne.gg - corr["gg"],
        gc=ne.gc - corr["gc"], cc=ne.cc - corr["cc"], n_rows=ne.n_rows, correction=corr,
    )
