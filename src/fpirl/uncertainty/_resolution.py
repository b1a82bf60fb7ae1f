"""The resolution column of the snapshot-noise posterior: the FE discretisation error by Richardson.

Used by :func:`fpirl.uncertainty._snapshot_noise.snapshot_posterior` (docs/method.md, "Discretisation error").
"""

from __future__ import annotations

import warnings

import numpy as np

from ..core._tensor import apply_along_axes
from ..core.density import DensitySnapshots
from ..weakform.matfree import StreamingSnapshots
from ._bootstrap import refit_params


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


def noise_shrinkage(column: np.ndarray, noise_factor: np.ndarray, hermite, grid) -> float:
    """Factor ``s`` removing the noise from the Richardson column (James-Stein style, on the nodes).

    ``x_h - x_2h`` carries noise as well as the discretisation error: with independent nodal noise
    the estimator's variance grows like ``1 / n_nodes``, and ``x_2h`` uses a ``2^-d`` subset of the
    nodes, so ``Var(x_h - x_2h) ~ (2^d - 1) Var(x_h)``. With ``V = sum_nodes Var_h`` (from the
    noise columns) and ``E = sum_nodes col^2``, ``s = sqrt(max(0, 1 - (2^d - 1) V / (9 E)))``.
    """
    mats = [ax.matrix(c) for ax, c in zip(hermite.axes, grid.coords)]

    def nodal(cols):
        v = apply_along_axes(cols.T.reshape((-1,) + hermite.shape), mats)
        return v - v.reshape(v.shape[0], -1).mean(axis=1).reshape((-1,) + (1,) * grid.ndim)

    energy = float(np.sum(nodal(column[:, None]) ** 2))
    noise = float(np.sum(nodal(noise_factor) ** 2))
    if energy <= 0:
        return 0.0
    return float(np.sqrt(max(0.0, 1.0 - (2**grid.ndim - 1) * noise / (9.0 * energy))))


def resolution_column(inner, snapshots, estimated: bool) -> np.ndarray | None:
    """Richardson estimate ``(x_h - x_{2h}) / 3`` of the FE discretisation error of ``x = [theta; gamma]``.

    ``x_{2h}`` is the same estimator (same Hermite space and settings) refitted on every second node
    of the grid. The weak-form residual is second order in ``h``, so ``x_h - x = (x_{2h} - x_h) / 3``
    to leading order. Returns None when an axis has an odd number of elements or the coarse grid
    would have fewer than 2 elements per axis (or fewer nodes than Hermite coefficients).
    """
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
        if isinstance(data, StreamingSnapshots) and params.get("solver") == "assembled":
            params["solver"] = "auto"  # streamed data take a matrix-free path
        est2h = type(inner)(**params).fit(data)
    x = np.append(np.asarray(inner.coef_, dtype=float).ravel(), 1.0 / inner.beta_)
    x2h = np.append(np.asarray(est2h.coef_, dtype=float).ravel(), 1.0 / est2h.beta_)
    col = (x - x2h) / 3.0
    if not estimated:
        col = col[:-1]
    return col
