"""Figures of results in five and more dimensions: 2-D slices of the potential through one point.

A nested grid (3-D and 4-D, :mod:`fpirl.plotting`) stops being readable beyond four axes, so a 5-D
or 6-D result is drawn as a corner plot: for every pair of axes ``(i, j)`` the potential on the
``(x_i, x_j)`` plane with the other coordinates held at a reference node (by default the node of
lowest ``psi``, the most preferred state-action), and on the diagonal the 1-D cuts through it. All
panels share one colour range (that of the slices drawn), so their values compare directly.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from ..core._errors import FpirlInputError
from ..io.netcdf import grid_from_dataset
from ._common import _save, robust_range


def reference_node(values: np.ndarray) -> tuple[int, ...]:
    """Index of the smallest value (the potential's minimum on the nodes)."""
    return tuple(int(i) for i in np.unravel_index(int(np.argmin(values)), values.shape))


def slice_through(values: np.ndarray, ref: tuple[int, ...], axes: tuple[int, ...]) -> np.ndarray:
    """``values`` with every axis not in ``axes`` fixed at ``ref`` (the kept axes in their order)."""
    index = tuple(slice(None) if b in axes else ref[b] for b in range(values.ndim))
    return values[index]


def plot_slices(result, path, key: str = "potential", ref: tuple[int, ...] | None = None) -> Path:
    """Corner plot of ``result[key]`` for ``d >= 2`` axes (used by ``fpirl plot`` from 5-D on)."""
    if key not in result.data_vars:
        raise FpirlInputError(f"the result has no {key!r} variable to plot")
    grid = grid_from_dataset(result, key)
    values = np.asarray(result[key].transpose(*grid.names).values, dtype=float)
    d = grid.ndim
    if d < 2:
        raise FpirlInputError("slices need at least two axes")
    ref = reference_node(values) if ref is None else tuple(ref)
    planes = [slice_through(values, ref, (j, i)) for i in range(d) for j in range(i)]
    lim = robust_range(*planes, percentiles=(0.0, 100.0))  # the range of what is drawn (None: constant)
    vmin, vmax = lim if lim is not None else (None, None)
    size = 1.9
    fig = Figure(figsize=(size * d + 1.0, size * d), layout="constrained")
    axes = fig.subplots(d, d, squeeze=False)
    image = None
    for i in range(d):
        for j in range(d):
            ax = axes[i, j]
            ai, aj = grid.axes[i], grid.axes[j]
            if j > i:
                ax.set_visible(False)
                continue
            if i == j:
                ax.plot(ai.nodes, slice_through(values, ref, (i,)), color="k", lw=1.2)
                ax.axvline(ai.nodes[ref[i]], color="r", lw=0.6)
                if lim is not None:
                    ax.set_ylim(vmin, vmax)
            else:  # row i (vertical axis x_i) against column j (horizontal axis x_j), j < i
                plane = slice_through(values, ref, (j, i))
                ext = [aj.nodes[0] - aj.spacing / 2, aj.nodes[-1] + aj.spacing / 2,
                       ai.nodes[0] - ai.spacing / 2, ai.nodes[-1] + ai.spacing / 2]
                image = ax.imshow(plane.T, origin="lower", extent=ext, aspect="auto", cmap="viridis",
                                  vmin=vmin, vmax=vmax, interpolation="nearest")
                ax.plot(aj.nodes[ref[j]], ai.nodes[ref[i]], "r+", ms=6)
            ax.tick_params(labelsize=6)
            if i == d - 1:
                ax.set_xlabel(f"{aj.name} ({aj.role})", fontsize=7)
            if j == 0 and i > 0:
                ax.set_ylabel(f"{ai.name} ({ai.role})", fontsize=7)
    if image is not None:
        fig.colorbar(image, ax=axes[:, -1].tolist(), shrink=0.6, label=key)
    point = ", ".join(f"{a.name}={a.nodes[r]:.3g}" for a, r in zip(grid.axes, ref))
    beta = result.attrs.get("beta")
    sup = f"fpirl result: {key} on 2-D slices through its minimum ({point})"
    if beta is not None:
        sup += f"; beta = {float(beta):.4g}"
    fig.suptitle(textwrap.fill(f"{sup}; {grid!r}", 150), fontsize=8)
    return _save(fig, path)
