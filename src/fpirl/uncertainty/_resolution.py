r"""The resolution column of the snapshot-noise posterior: the FE discretisation error by Richardson.

Used by :func:`fpirl.uncertainty._snapshot_noise.snapshot_posterior` (docs/method.md, "Discretisation error").

The column ``(x_h - x_{2h}) / 3`` carries the noise of both fits. It is shrunk James-Stein style,
``s = sqrt(max(0, 1 - N / (9 E)))`` with ``E`` the nodal energy of ``psi_h - psi_{2h}`` and ``N``
the expected nodal energy of its noise part,

.. math::
    N = \max\big(0,\ V_{2h} - V_h\big) + \lVert b_h - b_{2h} \rVert^2,

``V`` the nodal noise variance summed over the nodes (``Var(x_h - x_{2h}) = Var(x_{2h}) - Var(x_h)``
for nested estimators, ``x_{2h}`` seeing a subset of the data) and ``b`` the errors-in-variables
bias of each fit (systematic, and different at ``h`` and ``2h``). ``V_{2h}`` and ``b_{2h}`` come from
the snapshot-noise posterior of the ``2h`` fit itself (:data:`COARSE_DRAWS` draws, same noise shape),
not from a scaling of ``V_h``: on a ``2h`` grid that barely resolves the Hermite space (8 elements on
16² nodes, as many nodes as coefficients) the ``2h`` fit's noise variance was 100-150 times the fine
fit's, not the ``2^d = 4`` times of well-resolved fits, and at 5% noise the bias, not the spread, is
most of each fit's noise error; the earlier rule ``N = (2^d - 1) V_h`` (kept as the fallback when the
``2h`` posterior cannot be formed) left that noise in the column and over-covered at fine
resolution (docs/benchmarks.md, "Basis error: calibration at fine resolution").
"""

from __future__ import annotations

import warnings

import numpy as np

from ..core._tensor import apply_along_axes
from ..core.density import DensitySnapshots
from ..weakform.matfree import StreamingSnapshots
from ..core._errors import FpirlInputError
from ._bootstrap import refit_params

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


def noise_shrinkage(column: np.ndarray, noise_factor: np.ndarray, hermite, grid) -> float:
    """Fallback factor ``s`` removing the noise from the Richardson column (James-Stein style, on the nodes).

    ``x_h - x_2h`` carries noise as well as the discretisation error: with independent nodal noise
    and a well-resolved ``2h`` fit the estimator's variance grows like ``1 / n_nodes``, and ``x_2h``
    uses a ``2^-d`` subset of the nodes, so ``Var(x_h - x_2h) ~ (2^d - 1) Var(x_h)``. With
    ``V = sum_nodes Var_h`` (from the noise columns) and ``E = sum_nodes col^2``,
    ``s = sqrt(max(0, 1 - (2^d - 1) V / (9 E)))``. Used when the ``2h`` fit's own posterior cannot be
    formed (:func:`resolution_error`).
    """
    energy = _nodal_energy(column, hermite, grid)
    if energy <= 0:
        return 0.0
    noise = _nodal_energy(noise_factor, hermite, grid)
    return float(np.sqrt(max(0.0, 1.0 - (2**grid.ndim - 1) * noise / (9.0 * energy))))


def coarse_grid_fit(inner, snapshots):
    """``(est_2h, data_2h)``: the estimator refitted on every second node (same Hermite space and
    settings), or None when an axis has an odd number of elements or fewer than 4, or the coarse grid
    would have fewer nodes than Hermite coefficients."""
    grid = snapshots.grid
    elements = np.asarray(grid.elements)
    if np.any(elements % 2) or np.any(elements < 4):
        return None
    coarse = grid.with_elements(tuple(int(e) // 2 for e in elements))
    if coarse.size < inner.hermite_.n_coef:
        return None
    if isinstance(snapshots, DensitySnapshots):
        values = snapshots.values[(slice(None),) + (slice(None, None, 2),) * grid.ndim]
        data = DensitySnapshots(coarse, snapshots.times, values)
    else:
        data = StreamingSnapshots(coarse, snapshots.times, _EverySecondNode(snapshots))

    with warnings.catch_warnings():  # e.g. "fewer nodes than coefficients": the estimate is still usable
        warnings.simplefilter("ignore")
        params = refit_params(inner)
        if params.get("solver") in ("assembled", "matrix-free"):
            # streamed data take a matrix-free path; in memory the 2^-d smaller system is assembled
            # where it fits (the same estimate to the CG tolerance, and its posterior by Cholesky)
            params["solver"] = "auto"
        return type(inner)(**params).fit(data), data


def _state(est) -> np.ndarray:
    return np.append(np.asarray(est.coef_, dtype=float).ravel(), 1.0 / est.beta_)


def resolution_column(inner, snapshots, estimated: bool) -> np.ndarray | None:
    """Richardson estimate ``(x_h - x_{2h}) / 3`` of the FE discretisation error of ``x = [theta; gamma]``.

    ``x_{2h}`` is the same estimator (same Hermite space and settings) refitted on every second node
    of the grid (:func:`coarse_grid_fit`). The weak-form residual is second order in ``h``, so
    ``x_h - x = (x_{2h} - x_h) / 3`` to leading order. Returns None when :func:`coarse_grid_fit` does.
    No noise removed (:func:`resolution_error` does that).
    """
    fit = coarse_grid_fit(inner, snapshots)
    if fit is None:
        return None
    col = (_state(inner) - _state(fit[0])) / 3.0
    return col if estimated else col[:-1]


def resolution_error(inner, snapshots, estimated: bool, noise_factor: np.ndarray, bias: np.ndarray, posterior,
                     noise: str, rng) -> np.ndarray | None:
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
        The fine fit's errors-in-variables bias (coefficients).
    posterior : callable
        :func:`fpirl.uncertainty._snapshot_noise.snapshot_posterior` (passed in: it calls this function).
    noise : str
        The noise shape of the fine posterior.
    rng : seed or Generator
        For the ``2h`` posterior's draws.

    Returns
    -------
    ndarray (n_coef + [estimated],) or None
        ``s (x_h - x_{2h}) / 3``; None when :func:`coarse_grid_fit` is None.
    """
    fit = coarse_grid_fit(inner, snapshots)
    if fit is None:
        return None
    est2h, data = fit
    h, grid = inner.hermite_, snapshots.grid
    n = h.n_coef
    col = (_state(inner) - _state(est2h)) / 3.0
    if not estimated:
        col = col[:-1]
    try:
        post2h = posterior(est2h, data, noise=noise, n_draws=COARSE_DRAWS, rng=rng, rtol=COARSE_RTOL, resolve=False)
    except FpirlInputError:
        return col * noise_shrinkage(col[:n], noise_factor, h, grid)
    f2 = post2h.factor
    n_noise = f2.shape[1] - 1  # the noise columns, then the bias column
    energy = _nodal_energy(col[:n], h, grid)
    if energy <= 0:
        return col * 0.0
    spread = max(0.0, _nodal_energy(f2[:n, :n_noise], h, grid) - _nodal_energy(noise_factor, h, grid))
    shift = _nodal_energy(np.asarray(bias, dtype=float)[:n] - f2[:n, n_noise], h, grid)
    return col * float(np.sqrt(max(0.0, 1.0 - (spread + shift) / (9.0 * energy))))
