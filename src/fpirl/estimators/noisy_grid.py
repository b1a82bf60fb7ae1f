r"""Density snapshots with per-node noise on fine grids: fit them on a coarser grid (``fpirl fit --coarsen``).

Noise that is independent from node to node enters the weak form's known term ``(1/beta) K p`` through the
stiffness matrix ``K``, which amplifies it like ``1/h^2`` against the mass terms; more rows only average it
like ``h^d``. On a fine grid the noise then dominates the fit: 2% multiplicative noise on a 200^2 periodic grid
gave psi 15.2% off (8 Hermite elements), against 1.4% after averaging pairs of nodes per axis (100^2) and
0.3% after averaging four (50^2); the rule below, which keeps every second node instead, 1.1% (through
``fpirl fit``).

**Rule** (``coarsen='auto'``): where the snapshots carry measurable noise, a relative noise level
``sigma = sqrt(sum V / sum_k ||p_k||^2)`` of at least :data:`NOISE_MIN` (``V`` the difference-based nodal noise
variance of :func:`fpirl.weakform.noise_bias.snapshot_noise_variance`; it recovered 2.00% and 0.201% on data
with 2% and 0.2% noise and gave at most 3.4e-5 on noise-free solver output), the grid is halved per axis
(:func:`every_second_node`: the box, its node placement and the walls are kept, so the Hermite space is the same,
and the noise stays independent from node to node, as the snapshot-noise posterior takes it) while every axis
keeps at least :data:`MIN_ELEMENTS` elements and has an even number of them. Averaging instead of taking every
second node (weights 1/4, 1/2, 1/4) was more accurate on some sets but left the neighbouring coarse nodes'
noise correlated, and the 90% band covered 0.75-0.78 of the nodes on two of them (0.94-0.99 with every second
node).
Measured with ``hermite_elements='auto'`` and beta given (psi error before -> after; docs/benchmarks.md, issue 20
twelfth pass): 64^2 periodic, 2% noise, 2.41% -> 0.63%; 96^2 cold (beta = 10), 1%, 1.43% -> 0.56%; 64^2 walls, 2%,
17.2% -> 8.3%; a 64^2 walled double well, 2%, 19.4% -> 14.3%; an 80^2 walled mixture, 1%, 4.7% -> 3.0%. Halving
again below 32 elements was mixed (the mixture 3.0% -> 1.9%; a cosine 0.6% -> 2.7%; the walls 8.3% -> 9.8%).
Noise-free data are not touched: there halving lost on two of four sets (0.30% -> 0.60%, 0.41% -> 1.55%).
Through ``fpirl fit`` (the numbers above are the API's, with pair means) the rule as shipped was better on all 12
noisy sets tried (1-D to 3-D, 64 to 256 nodes per axis; e.g. 200^2 at 2%: 15.2% -> 1.1%; 1-D walled at 2%:
40.1% -> 6.8%), the 90% band covering 0.94-1.0 of the nodes.

The potential fitted on the coarse grid is a Hermite function on the same box: the result is written on the
data's own grid (:func:`on_grid`), so that simulations and comparisons with the data stay on one grid.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from ..core._errors import FpirlInputError
from ..core.density import DensitySnapshots
from ..core.grid import Grid
from ..core._tensor import apply_along_axes
from ..weakform.noise_bias import snapshot_noise_variance

#: Relative snapshot noise from which ``'auto'`` coarsens (noise-free solver output: at most 3.4e-5 measured).
NOISE_MIN = 1e-3
#: ``'auto'`` halves the grid only while every axis keeps at least this many elements.
MIN_ELEMENTS = 32
#: Axes up to which ``'auto'`` applies (grids of 64 or more elements per axis in 4-D would not be in memory).
MAX_AXES = 3


@dataclass
class Coarsening:
    """What :func:`coarsened` did: the ``factor`` (the fit takes every ``factor``-th node per axis; 1: the data as given),
    the data's own grid and the relative noise level it measured (None where not measured)."""

    factor: int
    grid: Grid
    noise: float | None = None


def relative_noise(snapshots: DensitySnapshots) -> float | None:
    """``sigma`` of the module doc on the snapshots scaled to unit mass; None with too few snapshots."""
    s = snapshots.normalized()
    nv = snapshot_noise_variance(s)
    if nv is None:
        return None
    energy = float(np.sum(s.values ** 2))
    return float(np.sqrt(np.sum(nv.total) / energy)) if energy > 0 else None


def every_second_node(n: int, periodic: bool) -> np.ndarray:
    """The 1-D map from ``n`` (even) elements to ``n / 2``: coarse node ``j`` is fine node ``2j`` (the box, the node
    placement and the walls kept; the noise stays independent from node to node). Shape ``(coarse, fine nodes)``."""
    nodes, m = (n, n // 2) if periodic else (n + 1, n // 2 + 1)
    R = np.zeros((m, nodes))
    R[np.arange(m), 2 * np.arange(m)] = 1.0
    return R


def _halved(snapshots: DensitySnapshots) -> DensitySnapshots:
    grid = snapshots.grid
    if any(n % 2 or n // 2 < 8 for n in grid.elements):
        raise FpirlInputError(f"cannot halve {grid!r} (every axis needs an even number of elements, at least 16)")
    coarse = Grid(grid.lower, grid.upper, tuple(n // 2 for n in grid.elements), grid.names, grid.roles, grid.boundary)
    maps = [every_second_node(int(n), grid.periodic) for n in grid.elements]
    return DensitySnapshots(coarse, snapshots.times, apply_along_axes(snapshots.values, maps))


def coarsened(snapshots, factor="auto") -> tuple[object, Coarsening]:
    """``(snapshots to fit, Coarsening)``: the snapshots at every ``factor``-th node per axis.

    Parameters
    ----------
    snapshots : DensitySnapshots or StreamingSnapshots
        Streamed snapshots are returned as they are (the rule needs them in memory).
    factor : 'auto' or int
        ``'auto'``: the rule of the module doc; an int: a power of two (1: as given).
    """
    grid = snapshots.grid
    if factor == "auto":
        if not isinstance(snapshots, DensitySnapshots) or grid.ndim > MAX_AXES or min(grid.elements) < 2 * MIN_ELEMENTS:
            return snapshots, Coarsening(1, grid)
        noise = relative_noise(snapshots)
        if noise is None or noise < NOISE_MIN:
            return snapshots, Coarsening(1, grid, noise)
        factor = 1
        while min(snapshots.grid.elements) >= 2 * MIN_ELEMENTS and not any(n % 2 for n in snapshots.grid.elements):
            snapshots, factor = _halved(snapshots), 2 * factor
        return snapshots, Coarsening(factor, grid, noise)
    if not (isinstance(factor, (int, np.integer)) and factor >= 1 and factor & (factor - 1) == 0):
        raise FpirlInputError(f"coarsen must be 'auto' or a power of two (1, 2, 4, ...), got {factor!r}")
    if factor > 1 and not isinstance(snapshots, DensitySnapshots):
        raise FpirlInputError("coarsening needs the snapshots in memory (this file is streamed)")
    steps = int(np.log2(factor))
    if steps and any(n % factor or n // factor < 8 for n in grid.elements):
        raise FpirlInputError(f"cannot coarsen {grid!r} by {factor}: every axis needs a multiple of {factor} "
                              f"elements, at least {8 * factor}")
    for _ in range(steps):
        snapshots = _halved(snapshots)
    return snapshots, Coarsening(int(factor), grid)


def on_grid(est, grid: Grid):
    """A shallow copy of the fitted estimator ``est`` whose result grid ``grid_`` is ``grid`` (the potential is a
    Hermite function on the same box: its nodal values, gradient, MDP and bands are evaluated there)."""
    out = copy.copy(est)
    out.grid_ = grid
    return out
