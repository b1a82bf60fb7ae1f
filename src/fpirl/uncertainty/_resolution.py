r"""The resolution column of the snapshot-noise posterior: the FE discretisation error by Richardson.

Used by :func:`fpirl.uncertainty._snapshot_noise.snapshot_posterior` (docs/method.md, "Discretisation error").

The coarse grid ``H`` (:func:`coarse_grid`) has every second node where every axis has an even number of
elements (at least 4) and that halved grid has at least as many nodes as Hermite coefficients: the data
are subsampled, ``H = 2h``. Otherwise (an odd count on some axis, e.g. a periodic axis of 15 nodes or a
walled one of 31 elements, or a grid too coarse to halve) every axis gets ``round(e / 1.5)`` elements
(:data:`RESAMPLE_RATIO`) and in-memory data are *resampled* onto it by cubic splines along each axis
(periodic splines on periodic axes; error ``O(h^4)``, below the ``O(h^2)`` being estimated; values clipped
at 0); streamed data then get no column. The ratio 1.5 rather than 2 keeps the coarse fit resolved: on
the 4-D benchmark (15^4 nodes, 4,096 coefficients) a ratio of 2 leaves 8^4 = 4,096 nodes, the coarse fit's
noise swamped the difference and the shrinkage removed the column (coverage 0.77 at 2% noise, unchanged);
at 1.5 (10^4 nodes) coverage was 0.94 (docs/benchmarks.md). The resampled grid must also have twice as many
nodes as coefficients (:data:`RESAMPLE_NODES_PER_COEF`): resampling mixes neighbouring nodes, so the
coarse posterior (independent nodal noise) underrates the coarse fit's noise, and on a barely resolved
coarse grid the column kept it (24^2 nodes, 8 elements, 16^2 = 256 resampled nodes for 256 coefficients:
coverage 0.99, over the 0.98 limit). A grid too coarse for that is *refined* instead: resampled
onto ``round(1.5 e)`` elements (at most :data:`REFINE_MAX_NODES` nodes) and refitted, with the same formula
(``r = 1/1.5``, ``k < 0``); the spline error ``O(h^4)`` is again below the ``O(h^2)`` being estimated.
Against the discretisation error itself (the same fit on independent data on 64^2 nodes minus the fit):
norm ratio 1.00 and correlation 0.99 on 12^2 with walls, 1.23 and 0.95 on 14^2 with walls; 1.09 and
0.91 periodic on 12^2 (docs/method.md). With walls the total error is often much smaller than the
column, the Hermite basis error there having the opposite sign (12^2: discretisation error 2.5 times the
total), so the band is wide; coverage 0.61-0.93 without the column, 0.94-0.99 with it. With the spacing
ratios ``r_b = e_b / e_{H,b}`` the weak form's second order gives ``x_h - x ~ (x_H - x_h) / (r^2 - 1)``,
``r^2`` the mean of ``r_b^2`` (``k = 1/3`` for ``H = 2h``): :func:`richardson_factor`.

The column ``k (x_h - x_H)``, ``k = 1 / (r^2 - 1)``, carries the noise of both fits. It is shrunk
James-Stein style, ``s = sqrt(max(0, 1 - k^2 N / E))`` with ``E`` the nodal energy of the column and ``N``
the expected nodal energy of the noise part of ``psi_h - psi_H``,

.. math::
    N = \lvert V_{2h} - V_h \rvert + \lVert b_h - b_{2h} \rVert^2,

``V`` the nodal noise variance summed over the nodes (``Var(x_h - x_{2h}) = Var(x_{2h}) - Var(x_h)``
for nested estimators, ``x_{2h}`` seeing a subset of the data; for a refined fit, which sees the same
data interpolated and whose posterior takes the interpolated noise as independent, the fine fit's
excess ``V_h - V_f``: on 24^2 periodic nodes with 8 Hermite elements at 5% noise the refined column kept
the coverage at 0.976 with it, 0.982 without) and ``b`` the errors-in-variables
bias of each fit (systematic, and different at ``h`` and ``2h``). ``V_{2h}`` and ``b_{2h}`` come from
the snapshot-noise posterior of the ``2h`` fit itself (:data:`COARSE_DRAWS` draws, same noise shape),
not from a scaling of ``V_h``: on a ``2h`` grid that barely resolves the Hermite space (8 elements on
16² nodes, as many nodes as coefficients) the ``2h`` fit's noise variance was 100-150 times the fine
fit's, not the ``2^d = 4`` times of well-resolved fits, and at 5% noise the bias, not the spread, is
most of each fit's noise error; the earlier rule ``N = (2^d - 1) V_h`` (kept as the fallback when the
``2h`` posterior cannot be formed) left that noise in the column and over-covered at fine
resolution (docs/benchmarks.md, "Basis error: calibration at fine resolution").

Where the fit's beta came from block means (``beta_coarsening_ > 1``: the snapshot noise dominated its
estimate), the coarse fit takes that beta instead of estimating its own, so the column's ``1/beta`` entry is 0.
With ``H = 2h`` the block means *are* the ``2h`` data, and the two estimates were equal anyway; on a resampled
or refined grid the coarse fit's own noise correction sees spline-interpolated noise, which is not independent
from node to node, and its beta means nothing (30 x 18 walled elements, 6 Hermite elements, 2% noise: beta 7.3 on
the refined grid for 2.0 on the fit's grid, which made beta's interval [0.65, inf] through this column, and psi's
part of the column, fitted at that beta, was several times psi's error). docs/benchmarks.md, "Issue 20, tenth pass".

**Misfit taken for noise.** The posteriors' noise level ``sigma^2`` comes from the fits' residuals, so on noise-free
data it is the misfit (grid, basis, time step), and ``N`` above, computed from it, is not noise at all: on 30 x 18
walled elements with 6 Hermite elements the two fits' errors-in-variables biases differed by half the column's
energy and shrank it to zero, although its ``1/beta`` entry (0.0117) matched the fit's error (0.0129), and beta's
interval missed. ``N`` is therefore scaled by what the snapshots' own time differences confirm of that level
(:func:`confirmed_noise`: ``min(1, rho)`` for the spread, its square for the biases, which are quadratic in
``sigma``), ``rho`` the difference-based noise energy (the estimator of the beta noise correction) over the
posterior's ``sigma^2 sum s_k^2``. Measured on the sweep of docs/benchmarks.md: ``rho`` 0.79-1.03 on data with
2-5% noise, 0.0001-0.065 noise-free.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.linalg

from ..core._linalg import solve_spd
from ..core._splines import spline_matrix
from ..core._tensor import apply_along_axes
from ..core.density import DensitySnapshots
from ..weakform.matfree import StreamingSnapshots
from ..core._errors import FpirlInputError
from ..weakform.noise_bias import snapshot_noise_variance
from ._bootstrap import refit_params
from ._reduced_noise import support_shape

#: Spacing ratio of the resampled coarse grid (odd element counts; module doc).
RESAMPLE_RATIO = 1.5
#: Nodes per Hermite coefficient the resampled coarse grid needs (module doc).
RESAMPLE_NODES_PER_COEF = 2
#: Most nodes of the refined grid a grid too coarse to coarsen is resampled onto (module doc): the refit costs
#: about as much as the benchmark's 4-D fit (15^4 = 50,625 nodes) at most.
REFINE_MAX_NODES = 65536
#: Noise draws of the ``2h`` fit's snapshot-noise posterior (its noise variance and bias for the shrinkage).
COARSE_DRAWS = 16
#: Relative residual of that posterior's CG solves (matrix-free path): a shrinkage factor needs no more.
COARSE_RTOL = 1e-4


class _EverySecondNode:
    """Lazy ``(n_t, *coarse)`` view of snapshots on every second node (time slices only)."""

    def __init__(self, source):
        self.source = source
        self.shape = (source.n_times,) + tuple(len(range(0, n, 2)) for n in source.grid.shape)

    def __getitem__(self, key):
        if not isinstance(key, slice):
            raise TypeError("only time slices are supported")
        start, stop, _ = key.indices(self.source.n_times)
        return self.source.read(start, stop)[(slice(None),) + (slice(None, None, 2),) * self.source.grid.ndim]


def _nodal_energy(cols: np.ndarray, hermite, grid) -> float:
    """Sum over the FE nodes and the columns of the squared zero-mean potential of each coefficient column."""
    mats = [ax.matrix(c) for ax, c in zip(hermite.axes, grid.coords)]
    cols = np.asarray(cols, dtype=float).reshape(hermite.n_coef, -1)
    v = apply_along_axes(np.ascontiguousarray(cols.T).reshape((-1,) + hermite.shape), mats)
    v = v - v.reshape(v.shape[0], -1).mean(axis=1).reshape((-1,) + (1,) * grid.ndim)
    return float(np.sum(v**2))


def noise_shrinkage(column: np.ndarray, noise_factor: np.ndarray, hermite, grid, k: float = 1.0 / 3.0,
                    node_ratio: float | None = None) -> float:
    """Fallback factor ``s`` removing the noise from the Richardson column (James-Stein style, on the nodes).

    ``x_h - x_H`` carries noise as well as the discretisation error: with independent nodal noise
    and a well-resolved ``H`` fit the estimator's variance grows like ``1 / n_nodes``, and ``x_H``
    sees ``1 / rho`` of the nodes (``rho = node_ratio``, ``2^d`` for ``H = 2h``), so
    ``Var(x_h - x_H) ~ (rho - 1) Var(x_h)``. With ``V = sum_nodes Var_h`` (from the noise columns),
    ``E = sum_nodes col^2`` and the column ``k (x_h - x_H)``, ``s = sqrt(max(0, 1 - k^2 (rho - 1) V / E))``.
    Used when the ``H`` fit's own posterior cannot be formed (:func:`resolution_error`).
    """
    energy = _nodal_energy(column, hermite, grid)
    if energy <= 0:
        return 0.0
    noise = _nodal_energy(noise_factor, hermite, grid)
    rho = 2.0**grid.ndim if node_ratio is None else float(node_ratio)
    return float(np.sqrt(max(0.0, 1.0 - k**2 * max(rho - 1.0, 0.0) * noise / energy)))


def coarse_grid(grid, n_coef: int):
    """``(H, subsampled)``: the other grid of the resolution column (module doc) and whether it is every
    second node of ``grid``. Coarser where it keeps enough nodes (``n_coef`` Hermite coefficients, twice as
    many when resampled); else the grid refined by :data:`RESAMPLE_RATIO` when that has at most
    :data:`REFINE_MAX_NODES` nodes; None when an axis has fewer than 4 elements or neither applies."""
    elements = np.asarray(grid.elements)
    if np.any(elements < 4):
        return None
    if not np.any(elements % 2):
        half = grid.with_elements(tuple(int(e) // 2 for e in elements))
        if half.size >= n_coef:
            return half, True
    coarse = grid.with_elements(tuple(max(2, int(round(e / RESAMPLE_RATIO))) for e in elements))
    if coarse.size >= RESAMPLE_NODES_PER_COEF * n_coef:
        return coarse, False
    fine = grid.with_elements(tuple(int(round(e * RESAMPLE_RATIO)) for e in elements))
    return (fine, False) if fine.size <= REFINE_MAX_NODES else None


def richardson_factor(grid, coarse) -> float:
    """``k = 1 / (r^2 - 1)``, ``r^2`` the mean over the axes of ``(e_b / e_{H,b})^2`` (1/3 for ``H = 2h``)."""
    r2 = np.mean((np.asarray(grid.elements, dtype=float) / np.asarray(coarse.elements, dtype=float)) ** 2)
    return float(1.0 / (r2 - 1.0))


def resample(snapshots: DensitySnapshots, coarse) -> DensitySnapshots:
    """The snapshots' nodal values carried to the nodes of ``coarse`` (same domain) by cubic splines along
    each axis (:func:`fpirl.core._splines.spline_matrix`: periodic splines on a periodic grid, not-a-knot
    otherwise; one matrix per axis applied by sum factorisation); clipped at 0."""
    grid = snapshots.grid
    mats = [spline_matrix(f.nodes, c.nodes, f.upper - f.lower if grid.periodic else None)
            for f, c in zip(grid.axes, coarse.axes)]
    return DensitySnapshots(coarse, snapshots.times, np.clip(apply_along_axes(snapshots.values, mats), 0.0, None))


def coarse_grid_fit(inner, snapshots):
    """``(est_H, data_H, k)``: the estimator refitted on the coarse grid of :func:`coarse_grid` (same Hermite
    space and settings) and the Richardson factor ``k``; None when :func:`coarse_grid` is None, the coarse
    grid would have fewer nodes than Hermite coefficients, or the data are streamed and cannot be
    subsampled."""
    grid = snapshots.grid
    found = coarse_grid(grid, inner.hermite_.n_coef)
    if found is None:
        return None
    coarse, subsampled = found
    if subsampled and isinstance(snapshots, DensitySnapshots):
        values = snapshots.values[(slice(None),) + (slice(None, None, 2),) * grid.ndim]
        data = DensitySnapshots(coarse, snapshots.times, values)
    elif subsampled:
        data = StreamingSnapshots(coarse, snapshots.times, _EverySecondNode(snapshots))
    elif isinstance(snapshots, DensitySnapshots):
        data = resample(snapshots, coarse)
    else:
        return None

    with warnings.catch_warnings():  # e.g. "fewer nodes than coefficients": the estimate is still usable
        warnings.simplefilter("ignore")
        params = refit_params(inner)
        if params.get("solver") in ("assembled", "matrix-free"):
            # streamed data take a matrix-free path; in memory the 2^-d smaller system is assembled
            # where it fits (the same estimate to the CG tolerance, and its posterior by Cholesky)
            params["solver"] = "auto"
        if raw_sums(inner):  # beta given, psi from corrected sums: the column compares the raw sums' fits
            params["correct_noise"] = False
        if params.get("estimate_beta") and int(getattr(inner, "beta_coarsening_", 1)) > 1:
            # beta from block means: the coarse fit takes the fit's beta (module doc, last paragraph)
            params["estimate_beta"], params["beta"] = False, float(inner.beta_)
        fitted = type(inner)(**params).fit(data)
    fitted._moments = None  # no refits at other Hermite resolutions of the coarse data: not held
    return fitted, data, richardson_factor(grid, coarse)


def _state(est) -> np.ndarray:
    return np.append(np.asarray(est.coef_, dtype=float).ravel(), 1.0 / est.beta_)


def raw_sums(inner) -> bool:
    """Whether the resolution column compares fits from the raw sums: beta given and ``psi`` fitted from
    noise-corrected sums on the assembled path (:mod:`fpirl.weakform.noise_bias`). The other grid of the column
    is often resampled by splines (odd element counts, or too few nodes at ``2h``), whose noise is correlated
    from node to node, which the correction's variance estimate does not model (24^2 periodic nodes, 8 Hermite
    elements, 5% noise: the corrected fit on the refined grid doubled the column, and the bands over-covered);
    the raw sums' difference is the column as calibrated, its noise removed by the shrinkage."""
    return (not getattr(inner, "estimate_beta", False) and bool(inner.settings_.get("noise_corrected", 0))
            and getattr(inner, "normal_equations_", None) is not None and inner.noise_correction_ is not None)


def raw_state(inner) -> np.ndarray:
    """``[theta; gamma]`` of the fit from the raw sums, from the corrected fit ``inner`` (:func:`raw_sums`) by one
    solve: ``theta_raw = theta - K^{-1} (E_xtg + gamma E_xtc)`` with the subtracted expectations ``E`` (the fit's
    Cholesky factor of ``K`` where it kept one)."""
    h, corr, gamma = inner.hermite_, inner.noise_correction_, 1.0 / inner.beta_
    rhs = corr["xtg"] + gamma * corr["xtc"]
    lam, factor = getattr(inner, "_factor", (None, None))
    if factor is not None and lam == inner.penalty_:
        d = scipy.linalg.cho_solve(factor, rhs, check_finite=False)
    else:
        A = inner.normal_equations_.xtx
        m = h.mean_functional().ravel()
        M = h.add_h1_seminorm(np.empty_like(A), inner.penalty_, src=A, rank_one=(np.trace(A) / A.shape[0], m))
        d = solve_spd(M, rhs, overwrite=True)
    theta = h.remove_mean(np.asarray(inner.coef_, dtype=float).ravel() - d)
    return np.append(np.asarray(theta, dtype=float).ravel(), gamma)


def resolution_column(inner, snapshots, estimated: bool) -> np.ndarray | None:
    """Richardson estimate ``k (x_h - x_H)`` of the FE discretisation error of ``x = [theta; gamma]``.

    ``x_H`` is the same estimator (same Hermite space and settings) refitted on the coarse grid
    (:func:`coarse_grid_fit`: every second node, ``k = 1/3``, or resampled data). The weak-form residual
    is second order in ``h``, so ``x_h - x = k (x_H - x_h)`` to leading order. Returns None when
    :func:`coarse_grid_fit` does. No noise removed (:func:`resolution_error` does that).
    """
    fit = coarse_grid_fit(inner, snapshots)
    if fit is None:
        return None
    col = fit[2] * ((raw_state(inner) if raw_sums(inner) else _state(inner)) - _state(fit[0]))
    return col if estimated else col[:-1]


def _blocks(source, chunk: int = 8):
    """The snapshots' values in blocks of ``chunk`` snapshots (streamed data read one block at a time)."""
    if not hasattr(source, "read"):
        yield source.values
        return
    for start in range(0, source.n_times, chunk):
        yield source.read(start, min(source.n_times, start + chunk))


def confirmed_noise(source, noise: str, sigma2: float, variance=False) -> float:
    """``min(1, rho)``: the share of the posterior's noise level that the snapshots' own time differences confirm
    (module doc), ``rho = sum_n V_n / (sigma^2 sum_n sum_k s_k[n]^2)`` with ``V`` the difference-based nodal noise
    variance (:func:`fpirl.weakform.noise_bias.snapshot_noise_variance`, summed over the snapshots) and ``s_k`` the
    noise shape (:func:`fpirl.uncertainty._reduced_noise.noise_shape`). ``source``: the snapshots as fitted (normalised where the fit normalises; in memory
    or streamed). 1 where ``V`` cannot be estimated."""
    nv = snapshot_noise_variance(source) if variance is False else variance  # (the fit's, where it kept it)
    if nv is None or not sigma2 > 0:
        return 1.0
    if noise == "multiplicative":
        shape2 = sum(float(np.vdot(block, block)) for block in _blocks(source))
    else:  # 1 on the data's support (fpirl.uncertainty._reduced_noise.noise_shape)
        total = sum(np.sum(block, axis=0) for block in _blocks(source))
        shape2 = float(source.n_times * np.sum(support_shape(total[None])))
    return float(min(1.0, np.sum(nv.total) / (sigma2 * shape2))) if shape2 > 0 else 1.0


def resolution_error(inner, snapshots, estimated: bool, noise_factor: np.ndarray, bias: np.ndarray, posterior,
                     noise: str, rng, confirmed: float = 1.0) -> np.ndarray | None:
    """The resolution column, shrunk by the noise of ``x_h - x_{2h}`` (module doc).

    Parameters
    ----------
    inner : PotentialEstimator
        The fit at ``h``.
    snapshots : DensitySnapshots or StreamingSnapshots
        Its data.
    estimated : bool
        beta estimated (the column then has a ``gamma`` entry).
    noise_factor : ndarray (n_coef, S)
        The noise columns of the fine posterior's factor (coefficients).
    bias : ndarray (n_coef,)
        The fine fit's errors-in-variables bias (coefficients; of the fit from the raw sums where
        :func:`raw_sums`, like the difference).
    posterior : callable
        :func:`fpirl.uncertainty._snapshot_noise.snapshot_posterior` (passed in: it calls this function).
    noise : str
        The noise shape of the fine posterior.
    rng : seed or Generator
        For the ``2h`` posterior's draws.
    confirmed : float
        :func:`confirmed_noise` of the fine posterior: the noise terms of the shrinkage are scaled by it (its square
        for the biases), so that misfit taken for noise does not remove the column (module doc).

    Returns
    -------
    ndarray (n_coef + [estimated],) or None
        ``s (x_h - x_{2h}) / 3``; None when :func:`coarse_grid_fit` is None.
    """
    fit = coarse_grid_fit(inner, snapshots)
    if fit is None:
        return None
    est2h, data, k = fit
    h, grid = inner.hermite_, snapshots.grid
    n = h.n_coef
    col = k * ((raw_state(inner) if raw_sums(inner) else _state(inner)) - _state(est2h))
    if not estimated:
        col = col[:-1]
    c = float(confirmed)
    try:
        post2h = posterior(est2h, data, noise=noise, n_draws=COARSE_DRAWS, rng=rng, rtol=COARSE_RTOL, resolve=False)
    except FpirlInputError:
        return col * noise_shrinkage(col[:n], np.sqrt(c) * noise_factor, h, grid, k, grid.size / data.grid.size)
    f2 = post2h.factor
    n_noise = f2.shape[1] - 1  # the noise columns, then the bias column
    energy = _nodal_energy(col[:n], h, grid)
    if energy <= 0:
        return col * 0.0
    spread = abs(_nodal_energy(f2[:n, :n_noise], h, grid) - _nodal_energy(noise_factor, h, grid))
    shift = _nodal_energy(np.asarray(bias, dtype=float)[:n] - f2[:n, n_noise], h, grid)
    return col * float(np.sqrt(max(0.0, 1.0 - k**2 * (c * spread + c**2 * shift) / energy)))
