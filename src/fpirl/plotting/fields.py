"""Figures for fpirl results (matplotlib, Agg-safe: :class:`~matplotlib.figure.Figure` objects only).

No numerics here beyond reshaping, colour limits and the least-squares slope of
:func:`plot_convergence` (:func:`fpirl.evaluation.metrics.log_log_slope`).

Colour limits are robust: unless given, a panel's scale spans the 0.5th to 99.5th percentile of
its finite values (a few spikes do not wash out the rest; the colour bar then extends past the
limits); differences use a symmetric scale.
Every figure is written atomically (temporary file + rename), the format taken from the suffix.

Functions over 3 or 4 axes are drawn as a *nested grid* as in the paper's figures: an outer grid
over two state axes (or the first two axes when there are fewer than two state axes) and, inside
each outer cell, an inner sub-grid over the remaining (action) axes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

from ..core._errors import FpirlInputError
from ..core.grid import Grid
from ..evaluation.metrics import log_log_slope
from ..io.netcdf import grid_from_dataset
from ._common import _draw_cv_curve, _extend, _grey_out, _plain, _save, robust_range, save_figure, symmetric_range
from .slices import plot_slices
from .actions import draw_action_map, plot_action_result, policy_title
from ..mdp.maps import action_maps

__all__ = [
    "nested_grid_image",
    "nested_grid_layout",
    "plot_convergence",
    "plot_fields",
    "plot_kl",
    "plot_potential_comparison",
    "plot_result",
    "robust_range",
    "save_figure",
    "symmetric_range",
]

_RESULT_PANELS = (
    ("potential", "potential $\\psi$", "viridis"),
    ("policy", "policy $\\pi(a\\,|\\,s)$", "magma"),
    ("reward", "reward $R$", "coolwarm"),
)


# --------------------------------------------------------------------------------------------
# nested grids
# --------------------------------------------------------------------------------------------
def nested_grid_layout(grid: Grid) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(outer axes, inner axes) for a nested-grid picture of a function on ``grid``.

    Outer: the first two state axes, or the first two axes when there are fewer than two state
    axes. Inner: all remaining axes in order (1 or 2 of them).
    """
    d = grid.ndim
    if d not in (3, 4):
        raise FpirlInputError(f"nested grid plots need 3 or 4 axes, got {d}")
    states = grid.state_axes
    outer = tuple(states[:2]) if len(states) >= 2 else (0, 1)
    inner = tuple(i for i in range(d) if i not in outer)
    return outer, inner


def nested_grid_image(values, grid: Grid, gap: int = 1) -> np.ndarray:
    """Arrange a 3-D or 4-D nodal array as one 2-D image (outer grid of inner sub-grids).

    The image is meant for ``imshow(image, origin='lower')``: columns run along the first outer
    axis, rows along the second. Each outer cell ``(i, j)`` holds the inner sub-grid: with one
    inner axis ``k`` a horizontal strip of ``n_k`` pixels, with two inner axes ``(k, l)`` a block of
    ``n_l`` rows and ``n_k`` columns. Outer cells are separated by ``gap`` NaN pixels (blank).
    """
    values = np.asarray(values, dtype=float)
    if values.shape != grid.shape:
        raise FpirlInputError(f"values have shape {values.shape}, expected {grid.shape}")
    outer, inner = nested_grid_layout(grid)
    v = np.transpose(values, outer + inner)
    if len(inner) == 1:
        v = v[..., None]  # inner sub-grid: n_k columns x 1 row
    n0, n1, nk, nl = v.shape
    row_gap = gap if nl > 1 else 0
    # pad every inner block with its gap, lay blocks out as (rows: n1 x (nl + gap), cols: n0 x (nk + gap))
    padded = np.pad(v, [(0, 0), (0, 0), (0, gap), (0, row_gap)], constant_values=np.nan)
    image = padded.transpose(1, 3, 0, 2).reshape(n1 * (nl + row_gap), n0 * (nk + gap))
    image = image[: image.shape[0] - row_gap, : image.shape[1] - gap]
    return image


def _outer_ticks(ax, grid: Grid, outer, inner, gap=1, max_ticks=6):
    shape = grid.shape
    nk = shape[inner[0]]
    nl = shape[inner[1]] if len(inner) == 2 else 1
    col_gap, row_gap = gap, (gap if nl > 1 else 0)
    for setter, labeler, axis, n_in, g in (
        (ax.set_xticks, ax.set_xticklabels, outer[0], nk, col_gap),
        (ax.set_yticks, ax.set_yticklabels, outer[1], nl, row_gap),
    ):
        x = grid.axes[axis].nodes
        step = max(1, int(np.ceil(len(x) / max_ticks)))
        idx = np.arange(0, len(x), step)
        setter(idx * (n_in + g) + (n_in - 1) / 2)
        labeler([f"{x[i]:.3g}" for i in idx], fontsize=7)
    if row_gap == 0:  # strips touch vertically: thin separators between outer rows
        for j in range(1, shape[outer[1]]):
            ax.axhline(j - 0.5, color="white", linewidth=0.8)
    names = grid.names
    arrows = ("\u2192", "\u2191")  # inner axes: first left to right, second bottom to top
    inner_txt = ", ".join(f"{names[i]} {arrows[k]} [{grid.lower[i]:.3g}, {grid.upper[i]:.3g}]"
                          for k, i in enumerate(inner))
    ax.set_xlabel(f"{names[outer[0]]} (outer)  |  inner: {inner_txt}", fontsize=8)
    ax.set_ylabel(f"{names[outer[1]]} (outer)")


# --------------------------------------------------------------------------------------------
# drawing one field on one axes
# --------------------------------------------------------------------------------------------


def _draw_field(fig: Figure, ax, grid: Grid, values, title: str, cmap="viridis", label=None, vlim=None,
                no_data=None):
    """One field on one axes; ``no_data`` (bool, grid shape, optional): nodes without data, greyed out."""
    values = np.asarray(values, dtype=float)
    if values.shape != grid.shape:
        raise FpirlInputError(f"{title}: values have shape {values.shape}, expected {grid.shape}")
    d = grid.ndim
    if vlim is None and d >= 2:  # the colour scale from the nodes with data (where there are any)
        inside = values if no_data is None or np.all(no_data) else values[~np.asarray(no_data, bool)]
        vlim = robust_range(inside)
    kw = {} if vlim is None else {"vmin": vlim[0], "vmax": vlim[1]}
    if d == 1:
        a = grid.axes[0]
        ax.plot(a.nodes, values, label=label)
        ax.set_xlabel(_plain(a.name))
        ax.set_xlim(a.lower, a.upper)
        ax.grid(True, alpha=0.3)
    elif d == 2:
        a0, a1 = grid.axes
        # cell-centred pixels over the node positions
        ext = [
            a0.nodes[0] - a0.spacing / 2,
            a0.nodes[-1] + a0.spacing / 2,
            a1.nodes[0] - a1.spacing / 2,
            a1.nodes[-1] + a1.spacing / 2,
        ]
        im = ax.imshow(values.T, origin="lower", extent=ext, aspect="auto", cmap=cmap, **kw)
        if no_data is not None and np.any(no_data):
            _grey_out(ax, np.asarray(no_data, dtype=float).T, ext)
        ax.set_xlabel(_plain(f"{a0.name} ({a0.role})"))
        ax.set_ylabel(_plain(f"{a1.name} ({a1.role})"))
        fig.colorbar(im, ax=ax, extend=_extend(values, vlim))
    elif d in (3, 4):
        outer, inner = nested_grid_layout(grid)
        image = nested_grid_image(values, grid)
        im = ax.imshow(image, origin="lower", aspect="auto", cmap=cmap, interpolation="nearest", **kw)
        if no_data is not None and np.any(no_data):
            _grey_out(ax, nested_grid_image(np.asarray(no_data, dtype=float), grid))
        _outer_ticks(ax, grid, outer, inner)
        fig.colorbar(im, ax=ax, extend=_extend(values, vlim))
    else:
        raise FpirlInputError(f"cannot plot a function of {d} variables (at most 4)")
    ax.set_title(title, fontsize=10)


def _panel_size(grid: Grid) -> tuple[float, float]:
    return (4.8, 3.6) if grid.ndim <= 2 else (6.0, 4.8)




# --------------------------------------------------------------------------------------------
# public figures
# --------------------------------------------------------------------------------------------
def plot_potential_comparison(grid: Grid, psi_true, psi_fit, path, title: str | None = None) -> Path:
    """True vs recovered potential and their difference (1-D lines, 2-D heatmaps, 3-D/4-D nested).

    Pass both potentials with the same normalisation (e.g. zero mean).
    """
    psi_true = np.asarray(psi_true, dtype=float)
    psi_fit = np.asarray(psi_fit, dtype=float)
    for name, v in (("psi_true", psi_true), ("psi_fit", psi_fit)):
        if v.shape != grid.shape:
            raise FpirlInputError(f"{name} has shape {v.shape}, expected {grid.shape}")
    diff = psi_fit - psi_true
    w, h = _panel_size(grid)
    if grid.ndim == 1:
        fig = Figure(figsize=(2 * w, h), layout="constrained")
        ax0, ax1 = fig.subplots(1, 2)
        _draw_field(fig, ax0, grid, psi_true, "potential", label="true")
        ax0.plot(grid.axes[0].nodes, psi_fit, "--", label="recovered")
        ax0.legend()
        _draw_field(fig, ax1, grid, diff, "recovered - true")
    else:
        fig = Figure(figsize=(3 * w, h), layout="constrained")
        axes = fig.subplots(1, 3)
        vlim = robust_range(psi_true)  # the truth sets the scale: a spiky fit shows as out of range
        _draw_field(fig, axes[0], grid, psi_true, "true $\\psi$", vlim=vlim)
        _draw_field(fig, axes[1], grid, psi_fit, "recovered $\\psi$", vlim=vlim)
        _draw_field(fig, axes[2], grid, diff, "recovered - true", cmap="coolwarm", vlim=symmetric_range(diff))
    if title:
        fig.suptitle(title)
    return _save(fig, path)


def plot_fields(grid: Grid, panels, path, title: str | None = None, cmap: str = "viridis", ncols: int | None = None,
                reference: int | str | None = 0) -> Path:
    """Several functions on one grid side by side (lines, heatmaps or nested grids).

    Parameters
    ----------
    grid : Grid
    panels : sequence of (title, values)
        ``values`` of shape ``grid.shape``.
    path : path
        Figure file (format from the suffix).
    title : str, optional
    cmap : str
    ncols : int, optional
        Panels per row (default: all in one row).
    reference : int, 'all' or None
        Index of the panel whose robust range sets one colour scale for all panels (e.g. the
        ground truth); ``'all'``: the robust range of all panels together; ``None``: each panel
        its own robust range.
    """
    panels = list(panels)
    if not panels:
        raise FpirlInputError("no panels to plot")
    ncols = len(panels) if ncols is None else int(ncols)
    nrows = int(np.ceil(len(panels) / ncols))
    w, h = _panel_size(grid)
    fig = Figure(figsize=(w * ncols, h * nrows), layout="constrained")
    axes = np.atleast_1d(fig.subplots(nrows, ncols)).ravel()
    if reference is None:
        vlim = None
    elif reference == "all":
        vlim = robust_range(*(v for _, v in panels))
    else:
        vlim = robust_range(panels[reference][1])
    for ax, (label, values) in zip(axes, panels):
        _draw_field(fig, ax, grid, values, label, cmap=cmap, vlim=vlim)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    if title:
        fig.suptitle(title, fontsize=10)
    return _save(fig, path)




def _draw_band(ax, result, key: str, grid: Grid) -> None:
    """Shade the uncertainty of a 1-D panel: ``potential +- 1.645 potential_std`` (90%) or the
    ``<key>_lower`` .. ``<key>_upper`` band, when the result has them."""
    if key == "potential" and "potential_std" in result.data_vars:
        mid = np.asarray(result["potential"].values, dtype=float)
        half = 1.645 * np.asarray(result["potential_std"].values, dtype=float)
        lo, hi = mid - half, mid + half
    elif f"{key}_lower" in result.data_vars and f"{key}_upper" in result.data_vars:
        lo, hi = result[f"{key}_lower"].values, result[f"{key}_upper"].values
    else:
        return
    ax.fill_between(grid.axes[0].nodes, lo, hi, alpha=0.3, label="90% band")
    ax.legend(fontsize=7)


def plot_result(result, path) -> Path:
    """Plot a result dataset: potential, policy and reward (whichever are present).

    1-D: lines; 2-D: heatmaps; 3-D and 4-D: nested grids (outer: state axes, inner: action axes,
    their ranges in the axis label); 5-D and more: 2-D slices of the potential through its minimum
    (:mod:`fpirl.plotting.slices`). With state and action axes the policy is also drawn as a map
    over the actions (:func:`fpirl.mdp.maps.action_maps`: psi evaluated finely, averaged over the
    observed states), and when psi does not depend on the state the figure shows the maps over the
    actions once instead of one identical panel per state. Nodes without data (``data_support`` of
    track fits) are greyed out; the policy's mode and mean are marked within the data. The Q-value
    is not drawn separately (it is ``-psi``). With uncertainty variables (``potential_std``,
    ``<field>_lower``/``_upper``): a 90% band in 1-D, otherwise a map of ``potential_std`` as one
    more panel; beta's interval in the title.
    """
    grid = grid_from_dataset(result, "potential")
    if grid.ndim > 4:  # 5-D, 6-D: a corner plot of 2-D slices through the potential's minimum
        return plot_slices(result, path)
    maps = None
    if grid.ndim >= 2 and grid.state_axes and grid.action_axes and "solve_method" not in result.attrs:
        maps = action_maps(result)  # (from psi: the fitted policy, not a re-solved one)

    if maps is not None and maps["constant"] and grid.ndim >= 3:
        return _save(plot_action_result(result, grid, maps), path)
    no_data = None
    if "data_support" in result.data_vars:
        no_data = np.asarray(result["data_support"].transpose(*grid.names).values) == 0
    panels = [(k, t, c) for k, t, c in _RESULT_PANELS if k in result.data_vars]
    if grid.ndim >= 2 and "potential_std" in result.data_vars:  # 1-D: a band on the potential instead
        panels.append(("potential_std", "posterior std of $\\psi$", "cividis"))
    has_cv = "cv_score" in result.data_vars  # track fits with automatic resolution
    has_map = maps is not None and grid.ndim >= 3 and "policy" in result.data_vars
    n_panels = len(panels) + int(has_cv) + int(has_map)
    w, h = _panel_size(grid)
    ncols = min(2, n_panels) if grid.ndim >= 3 else n_panels
    nrows = int(np.ceil(n_panels / ncols))
    fig = Figure(figsize=(ncols * w, nrows * h), layout="constrained")
    axes = np.atleast_1d(fig.subplots(nrows, ncols)).ravel()
    for ax, (key, title, cmap) in zip(axes, panels):
        values = np.asarray(result[key].transpose(*grid.names).values)
        _draw_field(fig, ax, grid, values, title, cmap=cmap, no_data=no_data)
        if grid.ndim == 1:
            _draw_band(ax, result, key, grid)
    k = len(panels)
    if has_map:
        draw_action_map(fig, axes[k], maps["coords"], maps["names"], maps["policy"], policy_title(maps, True),
                         "magma", support=maps["support"], mode=maps["mode"], mean=maps["mean"])
        k += 1
    if has_cv:
        _draw_cv_curve(axes[k], result)
    for ax in axes[n_panels:]:
        ax.set_visible(False)
    beta = result.attrs.get("beta")
    sup = _plain(f"fpirl result: {grid!r}")
    if "solve_method" in result.attrs:  # written by fpirl solve: its policy and Q are the re-solved ones
        sup = sup.replace("fpirl result", "fpirl solved result (soft-optimal policy of the reward, noise x "
                          f"{float(result.attrs.get('solve_noise_scale', 1)):g}, drift x "
                          f"{float(result.attrs.get('solve_drift_scale', 1)):g}, action push "
                          f"{float(result.attrs.get('solve_action_drift', 0)):g})", 1)
    if len(sup) > 120:  # long grid descriptions: one line per axis group
        sup = sup.replace("], ", "],\n", 1)
    if beta is not None:
        sup += f", beta = {float(beta):.4g}"
        if "beta_lower" in result.attrs and "beta_upper" in result.attrs:
            sup += f"\n90% interval of beta: [{float(result.attrs['beta_lower']):.4g}, {float(result.attrs['beta_upper']):.4g}]"
    fig.suptitle(sup, fontsize=9)
    return _save(fig, path)


def plot_kl(times, kl, path, zoom=None, label: str = "KL(data || model)", reference: float | None = None,
            title: str | None = None) -> Path:
    """KL divergence over time; ``zoom=(t0, t1)`` adds a second panel on that time window.

    ``reference``: the size to compare with, e.g. ``KL(p_last || p_first)`` of the data (drawn as a
    dashed line with a dotted line at 10% of it, the benchmarks' acceptance level).
    """
    times = np.asarray(times, dtype=float).ravel()
    kl = np.asarray(kl, dtype=float).ravel()
    if times.shape != kl.shape:
        raise FpirlInputError(f"times ({times.size}) and kl ({kl.size}) differ in length")
    npanel = 1 if zoom is None else 2
    fig = Figure(figsize=(5.5 * npanel, 3.8), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, npanel))
    axes[0].plot(times, kl, marker=".", label=_plain(label))
    axes[0].set_title("KL divergence")
    if reference is not None and np.isfinite(reference) and reference > 0:
        axes[0].axhline(reference, color="k", ls="--", lw=1, label=f"data change KL(p_last || p_first) = {reference:.3g}")
        axes[0].axhline(0.1 * reference, color="k", ls=":", lw=1, label="10% of it (a good model stays below)")
    if zoom is not None:
        t0, t1 = map(float, zoom)
        sel = (times >= t0) & (times <= t1)
        axes[1].plot(times[sel], kl[sel], marker=".", color="C1")
        axes[1].set_xlim(t0, t1)
        axes[1].set_title(f"zoom: t in [{t0:g}, {t1:g}]")
    for ax in axes:
        ax.set_xlabel("time")
        ax.set_ylabel("KL")
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=8)
    if title:
        fig.suptitle(_plain(title), fontsize=9)
    return _save(fig, path)


def plot_convergence(N, errors: Mapping[str, Sequence[float]], path, xlabel: str = "elements N",
                     ylabel: str = "error", fit_range: Sequence[float] | None = None) -> Path:
    """Log-log convergence plot with each curve's fitted line drawn and labelled with its slope.

    The least-squares line of ``log(error)`` against ``log(N)`` over ``fit_range`` (default: all
    ``N``; :func:`fpirl.evaluation.metrics.log_log_slope`) is drawn dashed in the curve's colour over that
    range, and the legend gives its slope.
    """
    N = np.asarray(N, dtype=float).ravel()
    sel = np.ones(N.shape, bool) if fit_range is None else np.isin(N, np.asarray(fit_range, dtype=float))
    fig = Figure(figsize=(5.6, 4.2), layout="constrained")
    ax = fig.subplots()
    for i, (label, err) in enumerate(errors.items()):
        err = np.asarray(err, dtype=float).ravel()
        if err.shape != N.shape:
            raise FpirlInputError(f"{label!r}: {err.size} errors for {N.size} resolutions")
        ok = np.isfinite(err) & (err > 0) & np.isfinite(N) & (N > 0)
        ax.plot(N[ok], err[ok], "o-", color=f"C{i}", label=str(label))
        fit = ok & sel
        slope = log_log_slope(N[fit], err[fit])
        if np.isfinite(slope):
            c = np.polyfit(np.log(N[fit]), np.log(err[fit]), 1)
            xs = np.geomspace(N[fit].min(), N[fit].max(), 20)
            ax.plot(xs, np.exp(np.polyval(c, np.log(xs))), "--", color=f"C{i}", lw=2.0,
                    label=f"fit N = {N[fit].min():g}..{N[fit].max():g}: slope {slope:.2f}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    if N.size <= 12:
        ax.set_xticks(N)
        ax.set_xticklabels([f"{n:g}" for n in N])
        ax.minorticks_off()
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)
