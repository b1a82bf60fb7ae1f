"""Figures of the built-in benchmarks that are not plain fields on a grid (those use
:mod:`fpirl.plotting`): the free-energy curve and the Mountain Car soft-Q overview.

Drawing only (no numerics): every function takes computed results and writes one image
atomically through :func:`fpirl.plotting.save_figure`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from ..rl.soft_q import soft_policy
from ..plotting.fields import robust_range, save_figure


def free_energy_figure(curve, path) -> Path:
    """Free energy along the MDP map, its per-step change, KL to the stationary density and four
    state densities (a :class:`fpirl.problems.free_energy.FreeEnergyCurve`)."""

    grid = curve.mdp.grid
    steps = np.arange(curve.free_energy.size)
    snaps = [0, min(10, steps[-1]), min(50, steps[-1]), int(steps[-1])]
    fig = Figure(figsize=(12, 6.5), layout="constrained")
    gs = fig.add_gridspec(2, 4)
    ax = fig.add_subplot(gs[0, :2])
    ax.plot(steps, curve.free_energy, lw=2, label=r"$F(\rho_n, \pi^*)$")
    ax.axhline(curve.free_energy_min, color="k", ls="--", lw=1, label=r"$F_{min} = -\beta^{-1}\log\int e^{\beta V}ds$")
    ax.set_xlabel("MDP step n")
    ax.set_ylabel("free energy")
    ax.set_title("free energy (eq. free_energy_mdp) under the soft-optimal policy")
    ax.legend()
    ax2 = fig.add_subplot(gs[0, 2:])
    inc = curve.increments
    ax2.semilogy(steps[1:], np.maximum(-inc, 1e-18), label="decrease  $F_{n-1} - F_n$")
    if np.any(inc > curve.tolerance):
        ax2.semilogy(steps[1:], np.where(inc > curve.tolerance, inc, np.nan), "r.", label="increase")
    ax2.semilogy(steps, np.maximum(curve.kl_stationary, 1e-18), label=r"KL$(\rho_n \| \rho_\infty)$")
    ax2.set_xlabel("MDP step n")
    ax2.set_title("per-step change of F; KL to the stationary density")
    ax2.legend()
    x, y = grid.coords[0], grid.coords[1]
    vlim = robust_range(*(curve.rho[n] for n in snaps))
    for k, n in enumerate(snaps):
        a = fig.add_subplot(gs[1, k])
        im = a.imshow(curve.rho[n].T, origin="lower", extent=(x[0], x[-1], y[0], y[-1]), vmin=0,
                      vmax=vlim[1] if vlim else None, cmap="viridis")
        a.set_title(rf"$\rho_{{{n}}}(x, y)$")
        a.set_xlabel("x")
        if k == 0:
            a.set_ylabel("y")
    fig.colorbar(im, ax=fig.axes[-1], shrink=0.8)
    fig.suptitle(f"Grid World free energy: {curve.params.label()}")
    return save_figure(fig, path, dpi=110)


def soft_q_figure(mq, qfit, spec, path, position_range, velocity_range) -> Path:
    """Soft-optimal V, the Hermite fit of Q and psi_GT at force 0, and the mean force of the policy.

    ``mq``: :class:`fpirl.problems.mountain_car_rl.MountainCarQ`; ``qfit``: the Hermite fit of Q;
    ``spec``: the experiment spec (psi_GT); the ranges label the physical axes.
    """
    coords = [np.linspace(-1.0, 1.0, n) for n in mq.q.shape]
    fit = qfit.hermite.evaluate_grid(qfit.coef, coords)
    ext = (*position_range, *velocity_range)
    w = mq.action_weights
    pi = soft_policy(mq.q, w, mq.settings.alpha)
    mean_a = np.sum(pi * w * mq.action, axis=-1)
    fig = Figure(figsize=(17, 4.0), layout="constrained")
    axs = fig.subplots(1, 4)
    j0 = mq.action.size // 2
    panels = [
        (mq.v, "soft value V(x, v) (soft Q-iteration)", "viridis"),
        (fit[:, :, j0], f"Hermite LS fit of Q at force 0 {tuple(qfit.hermite.elements)}", "viridis"),
        (mean_a, "mean force of the Boltzmann policy", "coolwarm"),
        (spec.hermite.evaluate_grid(spec.coef, coords)[:, :, j0], "psi_GT at force 0 (normalised)", "viridis_r"),
    ]
    for ax, (val, title, cmap) in zip(axs, panels):
        lim = robust_range(val)
        im = ax.imshow(val.T, origin="lower", extent=ext, aspect="auto", cmap=cmap,
                       **({} if lim is None else {"vmin": lim[0], "vmax": lim[1]}))
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("position x")
        ax.set_ylabel("velocity v")
        fig.colorbar(im, ax=ax, shrink=0.85)
    fig.suptitle(f"Mountain Car: soft-optimal Q (alpha={mq.settings.alpha:g}, gamma={mq.settings.gamma:g}) "
                 "and the modified problem", fontsize=10)
    return save_figure(fig, path, dpi=90)
