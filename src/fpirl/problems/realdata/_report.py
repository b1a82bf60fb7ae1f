"""Figures and report.md of the real-data benchmark (drawing only; the arrays come from ``_model``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from ...io.netcdf import atomic_write
from ...plotting._common import _save


def _image(fig, ax, grid, values, title, cmap, axes_idx):
    a0, a1 = (grid.axes[i] for i in axes_idx)
    ext = [a0.lower, a0.upper, a1.lower, a1.upper]
    values = np.asarray(values, dtype=float)
    lo, hi = float(np.nanmin(values)), float(np.nanmax(values))
    scale = max(abs(lo), abs(hi), 1e-300)
    kw = {}
    if hi - lo <= 1e-7 * scale:  # constant up to round-off (e.g. a velocity-only psi): one colour
        kw = {"vmin": lo - 1e-3 * scale - 1e-12, "vmax": hi + 1e-3 * scale + 1e-12}
    im = ax.imshow(values.T, origin="lower", extent=ext, aspect="equal", cmap=cmap, **kw)
    ax.set_xlabel(a0.name)
    ax.set_ylabel(a1.name)
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, shrink=0.8)


def set_figure(path: Path, name: str, grid, maps: dict, observed, simulated, units: str) -> Path:
    """Six panels: marginal potential, policy mean velocity, mean reward, reward vs velocity,
    observed and simulated tracks (positions, same axes)."""

    S, A = grid.state_axes, grid.action_axes
    fig = Figure(figsize=(15, 9), layout="constrained")
    ax = fig.subplots(2, 3).ravel()
    _image(fig, ax[0], grid, maps["free_energy"], "potential over the arena, marginal over velocity\n"
           r"$F(s) = -\beta^{-1}\log\int e^{-\beta\psi(s,a)}da$", "viridis", S)
    if "mean_velocity" in maps:
        speed = np.hypot(*maps["mean_velocity"])
        _image(fig, ax[1], grid, speed, "policy mean velocity $E_\\pi[a|s]$\n"
               f"(arrows; colour: its length, max {speed.max():.3g})", "Greys", S)
        xs, ys = (grid.axes[i].nodes for i in S)
        step = max(1, len(xs) // 12)
        X, Y = np.meshgrid(xs[::step], ys[::step], indexing="ij")
        u, v = maps["mean_velocity"][0][::step, ::step], maps["mean_velocity"][1][::step, ::step]
        ax[1].quiver(X, Y, u, v, color="C3", angles="xy")
        _image(fig, ax[2], grid, maps["mean_reward"], r"reward over the arena $\int\pi(a|s)R(s,a)\,da$",
               "coolwarm", S)
        _image(fig, ax[3], grid, maps["reward_of_velocity"], r"reward vs velocity $R(a)$ (arena average)",
               "coolwarm", A)
    for i, (title, paths) in enumerate((("observed held-out tracks", observed), ("simulated from the fitted model "
                                                                                  "(same starts and lengths)",
                                                                                  simulated))):
        a = ax[4 + i]
        for p in paths:
            a.plot(p[:, 0], p[:, 1], lw=0.7)
        a.set_xlim(grid.lower[S[0]], grid.upper[S[0]])
        a.set_ylim(grid.lower[S[1]], grid.upper[S[1]])
        a.set_aspect("equal")
        a.set_title(title, fontsize=9)
        a.set_xlabel(grid.names[S[0]])
        a.set_ylabel(grid.names[S[1]])
    fig.suptitle(f"{name}: FP-IRL with state = position, action = velocity ({units})", fontsize=11)
    return _save(fig, path)


#: what the columns mean and why the models differ (method facts, true for any data)
NOTES = [
    "## How to read this",
    "",
    "- **fpirl (increments)**: psi fitted from the velocity increments only, "
    "`a_{k+1} - a_k = -grad_a psi(s_k, a_k) dt + sqrt(2 dt / beta) xi`; the positions are kinematic "
    "(`s_{k+1} = s_k + a_{k+1} dt`), never the gradient of a potential, so their increments carry no "
    "information on psi. This is `fpirl fit ... --action velocity` with its defaults: Hermite elements per "
    "axis (candidates `n_x,n_y,n_vx,n_vy`; 0 position elements = psi constant in position) and the ridge are "
    "chosen by 5-fold cross-validation over whole training tracks with the held-out increment log-likelihood "
    "(the same ranking as the next-position metric). psi constant in position contains the persistent random "
    "walk (psi = c |a|^2), so fpirl can lose to it only by estimation variance or by choosing a shape that "
    "does not generalise.",
    "- **fpirl (density)**: the density estimator (cloud-in-cell snapshots + the weak form) fits the joint "
    "Fokker-Planck equation, in which positions would move by `-grad_s psi` plus diffusion with the same beta "
    "as the velocities. Kinematic positions violate that, so its beta and velocity drift are not the action "
    "dynamics and it scores far below; reported as is.",
    "- **fpirl** is the default fit: besides psi and the resolution, the cross-validation over training tracks "
    "chooses a state-dependent mobility g (degree of log g, 0 = the paper's constant beta) in front of drift and "
    "noise on the velocity axes, `da = [-g grad psi + grad g / beta] dt + sqrt(2 g / beta) dW`, which keeps "
    "exp(-beta psi) stationary (psi, the policy and the reward keep their meaning), and a second lag rho "
    "(AR(1) residuals from smoothed or quantised positions), and a per-track noise scale (each track's "
    "motility, a Student t predictive given the track's own earlier steps); each is kept only when it wins its "
    "CV by two paired standard errors over tracks and 0.01 nats per transition. **constant beta** is the "
    "paper's model (no mobility, no second lag, no track noise) at the same CV of psi; **previous default** "
    "is mobility and second lag by CV with one noise scale for all tracks.",
    "- **non-gradient fraction**: share of the fitted velocity drift (cubic polynomial field, training tracks) "
    "that is not a gradient in velocity space (Helmholtz split, noise-corrected, bootstrap over tracks).",
    "- Remaining structure none of these models has: localisation noise, correlations beyond the second "
    "lag, and cells that each live in their own region (position-dependent terms in absolute coordinates "
    "rarely generalise to held-out tracks).",
    "",
]


def track_check_lines(rows: list) -> list:
    """Section of the report: observed held-out tracks against tracks simulated from the fitted model."""
    have = [r for r in rows if r.get("track_check")]
    if not have:
        return []
    names = ("msd", "vacf", "speed", "turning_angle")
    lines = ["", "## Track-level checks (held-out tracks against simulated ones)", "",
             "Every held-out track simulated from its first observation for as many frames as it has "
             "(`fpirl simulate --tracks`, `fpirl compare` on the command line). Per statistic: the share of lags "
             "or bins where the simulation lies inside the data's 95% band over tracks, and the discrepancy "
             "(mean |sim - obs| / joint band half-width; about 1 or less: they agree within their noise).", "",
             "| set | MSD | velocity autocorrelation | speed | turning angle |", "|---|---|---|---|---|"]
    for r in have:
        c = r["track_check"]
        lines.append(f"| {r['set']} | " + " | ".join(
            f"{100 * c[k]['inside_band']:.0f}% in band, {c[k]['discrepancy']:.2f}" for k in names) + " |")
    return lines


def _fmt(x, nd=3):
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.{nd}f}"


def write_report(path: Path, rows: list, settings: dict) -> Path:
    """report.md: one table over the sets, the chosen models, and what the numbers say."""
    lines = [
        "# Real tracks: held-out prediction and model adequacy",
        "",
        "State = position, action = velocity (backward differences), reflecting walls; a seeded "
        f"{settings['train_fraction']:.0%}/{1 - settings['train_fraction']:.0%} split by whole tracks "
        f"(seed {settings['seed']}). Every number below is on the held-out tracks, except the adequacy "
        "fraction (training tracks) and the cross-validation (training tracks only).",
        "",
        "Log-likelihood: mean over held-out transitions (three consecutive observations) of the log-density "
        "of the next position in nats, in the set's units (so values differ between sets; differences "
        "between models of one set are what matter). Standard errors are over tracks.",
        "",
        "| set | tracks (train/test) | transitions | fpirl (increments) | fpirl (density) | diffusion | PRW "
        "| fpirl - PRW | constant beta (paper's model) | fpirl - constant | mobility degree, rho (CV) "
        "| fpirl - previous default (no track noise) | track noise (CV) "
        "| non-gradient fraction [90% CI] | chosen model (CV) | fit time [s] |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['set']} | {r['train_tracks']}/{r['test_tracks']} | {r['transitions']} | {_fmt(r['fpirl'])} "
            f"| {_fmt(r['fpirl_density'])} | {_fmt(r['diffusion'])} | {_fmt(r['persistent_random_walk'])} "
            f"| {r['fpirl'] - r['persistent_random_walk']:+.3f} ± {r['se_vs_prw']:.3f} "
            f"| {_fmt(r['constant'])} | {r['fpirl'] - r['constant']:+.3f} ± {r['se_vs_constant']:.3f} "
            f"| {r['mobility_degree']}, {r['second_lag']:.2f} "
            f"| {r['fpirl'] - r['no_track_noise']:+.3f} ± {r['se_vs_no_track_noise']:.3f} | {r['track_noise']} "
            f"| {_fmt(r['adequacy'])} [{_fmt(r['adequacy_lo'])}, {_fmt(r['adequacy_hi'])}] | {r['chosen']} "
            f"| {r['fit_time']:.1f} (incl. CV; density {r['density_time']:.1f}; "
            f"constant beta {r['mobility_time']:.1f}; previous default {r.get('previous_time', float('nan')):.1f}) |"
        )
    lines += ["", "## Against the baselines", ""]
    for r in rows:
        d_diff = r["fpirl"] - r["diffusion"]
        d_prw = r["fpirl"] - r["persistent_random_walk"]
        se = r["se_vs_prw"]
        verdict = ("beats" if d_prw > 2 * se else "ties with (within two standard errors)" if d_prw > -2 * se
                   else "loses to")
        text = (f"- **{r['set']}**: fpirl beats diffusion by {d_diff:.3f} ± {r['se_vs_diffusion']:.3f} nats per "
                f"transition and {verdict} the persistent random walk ({d_prw:+.3f} ± {se:.3f}).")
        text += (f" Against the paper's constant-beta model: {r['fpirl'] - r['constant']:+.3f} ± "
                 f"{r['se_vs_constant']:.3f} (mobility degree {r['mobility_degree']}, second lag "
                 f"{r['second_lag']:.2f}, track noise {r['track_noise']}, all by CV; track-noise CV gain "
                 f"{r['track_noise_cv'][0]:+.3f} ± {r['track_noise_cv'][1]:.3f}). Against the previous default "
                 f"(mobility and second lag by CV, one noise scale for all tracks: degree "
                 f"{r['previous_mobility'][0]}, rho {r['previous_mobility'][1]:.2f}): "
                 f"{r['fpirl'] - r['no_track_noise']:+.3f} ± {r['se_vs_no_track_noise']:.3f}.")
        lines.append(text)
    lines += track_check_lines(rows)
    lines += ["", "## Per set", ""]
    for r in rows:
        lines += [f"### {r['set']}: {r['what']}", "",
                  f"Units: {r['units']}; dt = {r['dt']:g}. Fitted beta = {r['beta']:.4g}. "
                  f"Baselines: D = {r['D']:.4g}, PRW alpha = {r['alpha']:.3f}, sigma = {r['sigma']:.4g}.", "",
                  *([f"Policy averaged over the observed positions, within the training data's support: mode velocity "
                     f"({', '.join(f'{v:.3g}' for v in r['policy_mode'])}), mean "
                     f"({', '.join(f'{v:.3g}' for v in r['policy_mean'])}); "
                     f"{100 * r['policy_outside']:.1f}% of its mass lies at velocities without data"
                     + (" (**most of the policy is an extrapolation**: read the mode and mean only as the best "
                        "supported velocity)." if r["policy_outside"] > 0.5 else "."), ""]
                    if "policy_mode" in r else []),
                  "Cross-validated candidates (mean log-likelihood on held-out folds of the training tracks):", ""]
        lines += [f"- {k}: {v:.4f}" + ("  **(chosen)**" if k == r["chosen"] else "") for k, v in r["cv"].items()]
        lines += ["", "Mobility, CV log-likelihood by degree of log g: "
                  + (", ".join(f"{k}: {v:.4f}" for k, v in r["mobility_cv"].items()) or "not run")
                  + f"; density estimator beta = {r['density_beta']:.4g}.", ""]
        lines += ["", f"Refit the chosen model from the command line: `{r['command']}`", "",
                  f"![{r['set']}]({r['figure']})", ""]
        if r.get("track_figure"):
            lines += [f"![{r['set']}: track-level checks]({r['track_figure']})", ""]
        lines += r.get("notes", [])
    lines += NOTES
    lines += settings.get("closing", [])
    text = "\n".join(lines) + "\n"
    return atomic_write(path, lambda tmp: Path(tmp).write_text(text))
