"""Maps over the actions for results with state and action axes (drawing only; the arrays come from
:func:`fpirl.mdp.maps.action_maps`): one heatmap or line per field, labelled and ticked axes, the
region without data greyed out, the policy's mode and mean marked."""

from __future__ import annotations


import numpy as np
from matplotlib.figure import Figure

from ..core.grid import Grid
from ._common import _draw_cv_curve, _extend, _grey_out, robust_range

__all__ = ["draw_action_map", "plot_action_result", "policy_title"]


def draw_action_map(fig: Figure, ax, coords, names, values, title: str, cmap="viridis", support=None, mode=None,
                     mean=None, nodal: bool = False) -> None:
    """A function of the action(s) alone: a line (one axis) or a heatmap with labelled, ticked axes
    (two); the region without data greyed out (``support`` False) and the policy's mode and mean marked."""
    values = np.asarray(values, dtype=float)
    within = " (within the data)" if support is not None else ""
    if len(coords) == 1:
        x = coords[0]
        ax.plot(x, values, color="k")
        if support is not None and not np.all(support):
            ax.fill_between(x, 0, 1, where=~np.asarray(support), transform=ax.get_xaxis_transform(), color="0.6",
                            alpha=0.5, linewidth=0, label="no data")
        for point, marker, label in ((mode, "v", "mode" + within), (mean, "|", "mean" + within)):
            if point is not None:
                ax.axvline(point[0], color="C3" if marker == "v" else "C0", ls="--", lw=1, label=label)
        ax.set_xlabel(names[0])
        ax.set_xlim(x[0], x[-1])
        if support is not None or mode is not None:
            ax.legend(fontsize=7)
    else:
        c0, c1 = coords
        h0 = (c0[1] - c0[0]) / 2 if nodal else 0.0
        h1 = (c1[1] - c1[0]) / 2 if nodal else 0.0
        ext = [c0[0] - h0, c0[-1] + h0, c1[0] - h1, c1[-1] + h1]
        vlim = robust_range(values)
        im = ax.imshow(values.T, origin="lower", extent=ext, aspect="auto", cmap=cmap, vmin=vlim[0], vmax=vlim[1],
                       interpolation="nearest" if nodal else "antialiased")
        if support is not None and not np.all(support):
            _grey_out(ax, (~np.asarray(support)).astype(float).T, ext)
            if not nodal:  # outline of the support on fine maps (nodal maps: the grey pixels say it)
                ax.contour(c0, c1, np.asarray(support, dtype=float).T, levels=[0.5], colors="w", linewidths=0.8)
        for point, marker, label in ((mode, "x", "mode" + within), (mean, "+", "mean" + within)):
            if point is not None:
                ax.plot([point[0]], [point[1]], marker, color="cyan", ms=9, mew=2, label=label)
        if mode is not None or mean is not None:
            ax.legend(fontsize=7, loc="upper right")
        ax.set_xlabel(names[0])
        ax.set_ylabel(names[1])
        fig.colorbar(im, ax=ax, extend=_extend(values, vlim))
    ax.set_title(title, fontsize=10)


def policy_title(maps, averaged: bool) -> str:
    where = "grey: no data; " if maps["support"] is not None else ""
    over = "averaged over the observed states, " if averaged else ""
    return f"policy $\\pi(a\\,|\\,s)$ over the actions\n({over}{where}fine evaluation of $\\psi$)"


def plot_action_result(result, grid: Grid, maps: dict) -> Figure:
    """psi independent of the state: potential, policy and reward drawn once, as maps over the actions
    (the figure; :func:`fpirl.plotting.fields.plot_result` saves it)."""
    names, coords = maps["names"], maps["coords"]
    panels = [("potential", "potential $\\psi(a)$ (zero minimum)", maps["potential"], coords, "viridis", False),
              ("policy", policy_title(maps, False), maps["policy"], coords, "magma", False)]
    if "reward" in maps:
        panels.append(("reward", "reward $R(a)$ (nodes)", maps["reward"], maps["reward_coords"], "coolwarm", True))
    has_cv = "cv_score" in result.data_vars
    n_panels = len(panels) + int(has_cv)
    ncols = 2 if n_panels > 1 else 1
    nrows = int(np.ceil(n_panels / ncols))
    fig = Figure(figsize=(5.6 * ncols, 4.4 * nrows), layout="constrained")
    axes = np.atleast_1d(fig.subplots(nrows, ncols)).ravel()
    for ax, (key, title, values, c, cmap, nodal) in zip(axes, panels):
        pol = key == "policy"
        draw_action_map(fig, ax, c, names, values, title, cmap,
                         support=maps["support"] if key != "reward" else maps["node_support"],
                         mode=maps["mode"] if pol else None, mean=maps["mean"] if pol else None, nodal=nodal)
    if has_cv:
        _draw_cv_curve(axes[len(panels)], result)
    for ax in axes[n_panels:]:
        ax.set_visible(False)
    states = ", ".join(grid.names[i] for i in grid.state_axes)
    sup = (f"fpirl result: psi does not depend on {states}, so it is drawn once, over {', '.join(names)}; "
           f"beta = {float(result.attrs.get('beta', float('nan'))):.4g}")
    fig.suptitle(sup, fontsize=9)
    return fig
