"""The modified Mountain Car benchmark end to end (``fpirl benchmark mountaincar``).

RL step (:mod:`fpirl.problems.mountain_car_rl`), Hermite fit and problem definition
(:mod:`fpirl.problems.mountain_car`), the shared experiment pipeline
(:func:`fpirl.problems.experiment.run_experiment`), the soft-Q figure
(:func:`fpirl.problems.figures.soft_q_figure`) and the Mountain Car section of ``report.md``.
Measured numbers are recorded in docs/benchmarks.md, not here.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from ..core._errors import FpirlInputError
from .mountain_car import (MAX_POSITION, MAX_SPEED, MC_ACTION_CONTRAST, MC_ELEMENTS, MC_HERMITE_ELEMENTS,
                           MC_PSI_RANGE, MC_QUICK_ELEMENTS, MC_QUICK_SOFTQ, MC_QUICK_SOLVER_POINTS, MC_QUICK_STEPS,
                           MC_RESOLUTION_CHECK, MC_SOFTQ, MC_SOLVER_POINTS, MC_STEPS, MIN_POSITION, fit_q_hermite,
                           mountain_car_spec)
from ..core._progress import status_line
from ..io.netcdf import atomic_write
from .experiment import json_default, run_experiment
from .experiment._report import markdown_table
from .figures import soft_q_figure
from .mountain_car_rl import load_or_solve_mountain_car, rollout_gymnasium

__all__ = ["run_mountaincar"]

#: What the report of ``--quick`` says about the run.
QUICK_NOTE = (
    "**Quick run** (`--quick`): a check that the pipeline runs end to end, with a coarser soft-Q grid, a coarser "
    "FP solver, half the snapshots (t = 0..0.5) and the two coarsest FE grids (N = 10, 20), not a measurement of "
    "accuracy. Expect errors well "
    "above those of the full run (N up to 50; docs/benchmarks.md); what to check is that the run completes and "
    "that the errors fall from the first grid to the second."
)

#: Hermite resolutions whose Q fit error the report tabulates.
FIT_TABLE = ((4, 4, 2), (6, 6, 2), (8, 8, 2), (6, 6, 4), (10, 10, 2))


def _fit_error_table(mq, resolutions) -> list[dict]:
    rows = []
    for nh in resolutions:
        f = fit_q_hermite(mq, nh)
        rows.append({"hermite_elements": tuple(int(n) for n in np.broadcast_to(nh, (3,))),
                     "relative_error": f.relative_error, "rms_error": f.rms_error, "max_error": f.max_error})
    return rows


def run_mountaincar(outdir, elements=None, quick: bool = False, progress: bool = True, cache_dir=None,
                    verbose: bool = True, episodes: int = 100) -> dict:
    """Run the modified Mountain Car benchmark (``fpirl benchmark mountaincar``).

    1. soft Q-iteration for ``MountainCarContinuous-v0`` (cached in ``cache_dir``) and its
       validation: the Boltzmann policy rolled out in gymnasium's environment (``episodes``
       episodes from the reset distribution, seeded);
    2. least-squares fit of Q onto the periodic Hermite space :data:`MC_HERMITE_ELEMENTS` of the
       normalised box, ``psi_GT`` from its state and action parts
       (:func:`~fpirl.problems.mountain_car.mountain_car_spec`);
    3. the generic experiment :func:`fpirl.problems.experiment.run_experiment`: FP PDE and MDP-map
       data, fits for every ``N``, errors (psi, d psi / d s, per-state policy KL), KL, figures,
       ``result_N{N}.nc`` and ``report.md``, to which a Mountain Car section is appended.

    Parameters
    ----------
    outdir : path
        Output directory (created).
    elements : sequence of int, optional
        FE elements per axis (default :data:`MC_ELEMENTS`; ``quick``: :data:`MC_QUICK_ELEMENTS`).
    quick : bool
        Pipeline check: coarser soft-Q grid and FP solver, N = 10, 20 (unless ``elements``); the
        report says what to expect of it.
    progress, verbose : bool
    cache_dir : path, optional
        Cache of the soft Q and of the generated data (default ``outdir / 'cache'``).
    episodes : int
        Validation episodes in gymnasium (0 skips the validation).

    Returns
    -------
    dict
        The summary of :func:`~fpirl.problems.experiment.run_experiment` plus ``mountain_car``
        (goal rate, fit errors, scaling, policy contrast, timings).
    """
    t_start = time.perf_counter()
    outdir = Path(outdir)
    if elements is None:
        elements = MC_QUICK_ELEMENTS if quick else MC_ELEMENTS
    elements = [int(n) for n in np.atleast_1d(elements)]
    if not elements or min(elements) < 2:
        raise FpirlInputError(f"need FE element counts >= 2, got {elements}")
    outdir.mkdir(parents=True, exist_ok=True)
    cache_dir = outdir / "cache" if cache_dir is None else Path(cache_dir)
    settings = MC_QUICK_SOFTQ if quick else MC_SOFTQ

    def say(msg):
        if verbose:
            status_line(f"fpirl benchmark mountaincar: {msg}")

    say(f"soft Q-iteration on a {settings.n_position} x {settings.n_velocity} x {settings.n_action} grid "
        f"(alpha={settings.alpha:g}, gamma={settings.gamma:g}; cached in {cache_dir}) ...")
    t0 = time.perf_counter()
    mq = load_or_solve_mountain_car(settings, cache_dir)
    t_q = time.perf_counter() - t0
    info: dict = {"quick": bool(quick),
                  "soft_q": {**asdict(settings), "iterations": mq.iterations, "error_bound": mq.error_bound,
                             "solve_seconds": mq.seconds, "load_or_solve_seconds": t_q}}
    if episodes:
        t0 = time.perf_counter()
        try:
            roll = rollout_gymnasium(mq, episodes, seed=0)
        except ImportError:
            info["validation"] = None
            say("gymnasium is not installed: skipping the rollout validation")
        else:
            info["validation"] = {"goals": roll["goals"], "episodes": roll["episodes"],
                                  "median_steps": float(np.median(roll["steps"])), "max_steps": int(roll["steps"].max()),
                                  "mean_return": float(roll["returns"].mean()), "seconds": time.perf_counter() - t0}
            say(f"Boltzmann policy in gymnasium: {roll['goals']}/{roll['episodes']} episodes reach the goal "
                f"(median {np.median(roll['steps']):.0f} steps, mean return {roll['returns'].mean():.1f})")
    t0 = time.perf_counter()
    qfit = fit_q_hermite(mq, MC_HERMITE_ELEMENTS)
    info["fit"] = {"hermite_elements": MC_HERMITE_ELEMENTS, "relative_error": qfit.relative_error,
                   "rms_error": qfit.rms_error, "max_error": qfit.max_error, "q_std": float(np.std(mq.q)),
                   "q_min": float(mq.q.min()), "q_max": float(mq.q.max()),
                   "table": _fit_error_table(mq, FIT_TABLE)}
    info["fit"]["seconds"] = time.perf_counter() - t0
    say(f"Hermite LS fit {MC_HERMITE_ELEMENTS}: relative RMS error {100 * qfit.relative_error:.1f}% of std(Q)")
    spec = mountain_car_spec(qfit, steps=MC_QUICK_STEPS if quick else MC_STEPS,
                             solver_points=MC_QUICK_SOLVER_POINTS if quick else MC_SOLVER_POINTS)
    coords = [np.linspace(-1.0, 1.0, 41)] * 3
    psi = spec.hermite.evaluate_grid(spec.coef, coords)
    contrast = spec.beta * (psi.max(axis=2) - psi.min(axis=2))
    info["scaling"] = {"psi_range": MC_PSI_RANGE, "action_contrast": MC_ACTION_CONTRAST, "beta": spec.beta,
                       "dt": spec.dt, "steps": spec.steps, "description": spec.description}
    info["policy_contrast"] = {"median": float(np.median(contrast)), "p90": float(np.percentile(contrast, 90)),
                               "max": float(contrast.max())}
    fig = soft_q_figure(mq, qfit, spec, outdir / "fig_soft_q.png", (MIN_POSITION, MAX_POSITION),
                        (-MAX_SPEED, MAX_SPEED))

    summary = run_experiment(spec, elements, outdir, cache_dir, progress=progress, verbose=verbose,
                             resolution_check=None if quick else MC_RESOLUTION_CHECK, note=QUICK_NOTE if quick else "")
    info["kl_reference"] = {n: summary["per_N"][n]["fp"]["kl_reference"] for n in summary["elements"]}
    info["seconds_total"] = time.perf_counter() - t_start
    summary["mountain_car"] = info
    summary["figures"]["soft_q"] = fig.name
    report = (outdir / "report.md").read_text() + _report_section(info, summary)
    atomic_write(outdir / "report.md", lambda tmp: Path(tmp).write_text(report))
    atomic_write(outdir / "summary.json",
                 lambda tmp: Path(tmp).write_text(json.dumps(summary, indent=1, default=json_default)))
    return summary


def _report_section(info: dict, summary: dict) -> str:
    sq, fit, sc = info["soft_q"], info["fit"], info["scaling"]
    val = info.get("validation")
    Ns, per = summary["elements"], summary["per_N"]
    L = ["", "## Mountain Car: the RL step and the modified problem", ""]
    L.append(
        "**RL step.** Dynamics and reward of gymnasium's `MountainCarContinuous-v0` (power 0.0015, gravity "
        "0.0025 cos(3x), x in [-1.2, 0.6] with an inelastic left wall, v in [-0.07, 0.07], goal x >= 0.45 "
        "with v >= 0, reward 100 at the goal minus 0.1 a^2 per step). The paper trains SAC; instead we compute "
        "the entropy-regularised optimal Q that SAC approximates by **soft Q-iteration** "
        "Q = r + gamma (1 - done) V(s'), V = alpha log int exp(Q/alpha) da, on a "
        f"{sq['n_position']} x {sq['n_velocity']} x {sq['n_action']} grid of (position, velocity, force) with "
        f"bilinear interpolation of V at the deterministic next state and the trapezoid rule in the force; "
        f"temperature alpha = {sq['alpha']:g}, discount gamma = {sq['gamma']:g}; {sq['iterations']} backups to a "
        f"sup-norm error bound of {sq['error_bound']:.1e} ({sq['solve_seconds']:.1f} s when not cached).")
    if val:
        L.append("")
        L.append(f"**Validation.** The Boltzmann policy pi(a|s) = exp((Q - V)/alpha) (bilinear in the state, sampled "
                 f"on the force nodes), rolled out in gymnasium's own environment from its reset distribution "
                 f"(seeds 0..{val['episodes'] - 1}): **{val['goals']}/{val['episodes']} episodes reach the goal**, "
                 f"median {val['median_steps']:.0f} steps (max {val['max_steps']}), mean return "
                 f"{val['mean_return']:.1f}.")
    L.append("")
    L.append(f"**Hermite fit.** State-action normalised to [-1, 1]^3; Q fitted by least squares onto the periodic "
             f"cubic Hermite space with {tuple(fit['hermite_elements'])} elements per axis (position, velocity, "
             "force), solved per axis with the 1-D pseudo-inverses (Kronecker structure). Fit error on the soft-Q "
             f"grid: RMS {fit['rms_error']:.3g} = **{100 * fit['relative_error']:.1f}% of std(Q)** = {fit['q_std']:.3g} "
             f"(Q in [{fit['q_min']:.1f}, {fit['q_max']:.1f}]), max {fit['max_error']:.3g}. Q has sharp fronts (the "
             "boundaries between regions needing one more swing) and the periodic basis identifies x = -1.2 with "
             "x = 0.6, v = -0.07 with v = 0.07 and a = -1 with a = +1; the error falls slowly with the resolution:")
    L.append("")
    L += markdown_table(["Hermite elements", "relative RMS error", "max error"],
                        [[r["hermite_elements"], f"{100 * r['relative_error']:.1f}%", f"{r['max_error']:.3g}"]
                         for r in fit["table"]])
    L.append("")
    kl = info["kl_reference"]
    pc = info["policy_contrast"]
    L.append(f"**Modified problem.** {sc['description']}: the state part has range {sc['psi_range']:g} (beta * range = "
             f"{sc['beta'] * sc['psi_range']:g}: the density concentrates visibly yet keeps mass everywhere) and the "
             f"action part its own scale, so that the policy contrast beta * (max_a psi - min_a psi) has 90th "
             f"percentile {pc['p90']:.3g} over the states (median {pc['median']:.3g}, maximum {pc['max']:.3g}): the "
             "ground-truth policy is peaked in the force where the force matters (pi_max / pi_min >= "
             f"{np.exp(pc['p90']):.0f} on a tenth of the states) and mild elsewhere, like the soft-optimal policy "
             "itself. With one scale for all of Q it would be nearly uniform everywhere, since Q varies far more "
             "over the states than over the force. "
             f"dt = {sc['dt']:g}, {sc['steps']} steps; KL(p_T || p_0) of the MDP-map data = "
             + ", ".join(f"{kl[n]:.3f} (N={n})" for n in kl) + ".")
    L.append("")
    L.append("**Potential and policy.** Per grid, fit on FP data: the relative L2 error of psi next to the per-state "
             "policy KL, KL(pi_GT(.|s) || pi_hat(.|s)) averaged over the states (and its maximum):")
    L.append("")
    L += markdown_table(["N", "psi rel. error", "d psi/ds rel. error", "policy KL mean", "policy KL max"],
                        [[n, f"{100 * m['psi_relative_error']:.2f}%", f"{100 * m['grad_relative_error']:.2f}%",
                          f"{m['policy_kl_mean']:.3g}", f"{m['policy_kl_max']:.3g}"]
                         for n, m in ((n, per[n]["fp"]) for n in Ns)])
    L.append("")
    L.append(f"Mountain Car wall time (soft Q, validation, fit, experiment): {info['seconds_total']:.1f} s.")
    L.append("")
    return "\n".join(L)
