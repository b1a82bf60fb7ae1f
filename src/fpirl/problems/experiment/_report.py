"""Result files, figures and report.md of an experiment."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

from ...io.netcdf import result_dataset, write_result
from ...plotting.fields import plot_convergence, plot_fields, plot_kl, plot_potential_comparison
from ._evaluate import FitOutcome, _Truth
from ._spec import ExperimentSpec


# --------------------------------------------------------------------------------------------
# outputs
# --------------------------------------------------------------------------------------------
def _write_result(path: Path, spec: ExperimentSpec, outcome: FitOutcome, truth: _Truth, data_kind: str,
                  data_info: dict) -> Path:
    grid = truth.grid
    state_dims = tuple(grid.names[i] for i in grid.state_axes)
    extra = {
        "potential_true": truth.psi,
        "q_value_true": truth.mdp.q_value,
        "policy_true": truth.mdp.policy,
        "reward_true": truth.mdp.reward,
        "kl_divergence": xr.DataArray(outcome.kl, dims=("time",), coords={"time": spec.times},
                                      attrs={"long_name": "KL(p_t || q_t), MDP map under truth vs recovered model"}),
        "policy_kl": xr.DataArray(outcome.policy_kl, dims=state_dims,
                                  attrs={"long_name": "KL(pi_GT(.|s) || pi_hat(.|s))"}),
        "experiment": spec.name,
        "data_kind": data_kind,
        "transition_discretization": spec.transition_discretization,
        **spec.result_attrs,
    }
    for k, v in {**outcome.metrics, **data_info}.items():
        if isinstance(v, (bool, int, float, np.floating, np.integer, str)):
            extra[f"metric_{k}"] = v
    ds = result_dataset(outcome.estimator, mdp=outcome.mdp, extra=extra, dt=spec.dt, gamma=spec.gamma)
    return write_result(path, ds)


def _figures(spec: ExperimentSpec, outdir: Path, N: int, truth: _Truth, fit: FitOutcome, p_ref, eval_grid,
             Ns, table, fit_range) -> dict:
    grid = truth.grid
    files = {}
    if grid.ndim in (3, 4):
        files["q_value"] = plot_fields(
            grid, [("ground-truth Q = -psi_GT", truth.mdp.q_value), ("FP-IRL inferred Q = -psi", fit.mdp.q_value)],
            outdir / f"fig_q_value_N{N}.png", f"{spec.name}: Q-function, N = {N} (zero mean; colour scale of the truth)")
        files["reward"] = plot_fields(
            grid, [("ground-truth reward", truth.mdp.reward), ("FP-IRL inferred reward", fit.mdp.reward)],
            outdir / f"fig_reward_N{N}.png", f"{spec.name}: reward, N = {N}, gamma = {spec.gamma:g}", cmap="coolwarm")
        files["policy"] = plot_fields(
            grid, [("ground-truth policy", truth.mdp.policy), ("FP-IRL inferred policy", fit.mdp.policy)],
            outdir / f"fig_policy_N{N}.png", f"{spec.name}: policy pi(a|s), N = {N}", cmap="magma")
        steps = spec.figure_steps or (0, spec.steps // 2, spec.steps)
        panels = [(f"data (MDP map, truth) t = {k}", p_ref[k]) for k in steps]
        panels += [(f"simulated (recovered model) t = {k}", fit.q[k]) for k in steps]
        files["density"] = plot_fields(grid, panels, outdir / f"fig_density_N{N}.png",
                                       f"{spec.name}: joint density p_t, N = {N}", ncols=len(steps), reference="all")
        psi_true_eval = spec.hermite.evaluate_grid(spec.hermite.remove_mean(spec.coef), eval_grid.coords)
        psi_eval = fit.estimator.hermite_.evaluate_grid(fit.estimator.coef_, eval_grid.coords)
        files["potential"] = plot_potential_comparison(
            eval_grid, psi_true_eval, psi_eval - psi_eval.mean(), outdir / f"fig_potential_N{N}.png",
            title=f"{spec.name}: psi on the {spec.eval_elements}^{grid.ndim} evaluation grid, fit on FP data, N = {N}")
    zoom = spec.kl_zoom or (round(0.4 * spec.steps), spec.steps)
    files["kl"] = plot_kl(np.arange(spec.steps + 1), fit.kl, outdir / f"fig_kl_N{N}.png", zoom=zoom,
                          label=f"KL(p_t || q_t), fit on FP data, N = {N}")
    if len(Ns) >= 2:
        for q, what in (("psi", "psi"), ("grad", "d psi / d s")):
            files[f"convergence_{q}"] = plot_convergence(
                Ns, {f"{what}, FP data": [table[n]["fp"][f"{q}_error"] for n in Ns],
                     f"{what}, MDP-map data": [table[n]["mdp"][f"{q}_error"] for n in Ns]},
                outdir / f"fig_convergence_{q}.png", xlabel="FE elements per axis N", ylabel=f"L2 error of {what}",
                fit_range=fit_range)
    return {k: Path(v).name for k, v in files.items()}


def markdown_table(header, rows) -> list[str]:
    """Lines of a markdown table: ``header`` (column titles) and ``rows`` (cells as text)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]


def _fmt(x, pct=False) -> str:
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "n/a"
    if pct:
        return f"{100 * x:.2f}%"
    return f"{x:.3e}" if (abs(x) < 1e-2 or abs(x) >= 1e4) and x != 0 else f"{x:.4f}"


def _state_length(spec: ExperimentSpec) -> float:
    return min(float(u) - float(lo) for u, lo, r in zip(spec.upper, spec.lower, spec.roles) if r == "state")


def _report(spec: ExperimentSpec, summary: dict) -> str:
    Ns = summary["elements"]
    per = summary["per_N"]
    data = summary["data"]
    L = []
    L.append(f"# {spec.title or spec.name}: FP-IRL benchmark report\n")
    if summary.get("note"):
        L.append(summary["note"] + "\n")
    L.append("## Setting\n")
    L.append(f"* Ground truth: {spec.description}" if spec.description else "* Ground truth: see the spec")
    L.append(f"* Domain {list(spec.lower)} .. {list(spec.upper)}, {spec.boundary}; axes "
             + ", ".join(f"{n} ({r})" for n, r in zip(spec.names, spec.roles)))
    L.append(f"* beta = {spec.beta:g} (fixed in the fit), dt = {spec.dt:g}, snapshots t = 0..{spec.steps}, "
             f"gamma = {spec.gamma:g}, transition discretisation '{spec.transition_discretization}'")
    L.append(f"* Initial density: {spec.initial_description or 'spec.initial'}")
    L.append(f"* Inference: Hermite elements {spec.hermite_elements} per axis (same space as psi_GT), "
             f"FE grids N = {', '.join(map(str, Ns))} elements per axis")
    n_coef = per[Ns[0]]["fp"]["n_coef"]
    few = [n for n in Ns if per[n]["fp"]["n_nodes"] < n_coef]
    L.append(f"* Identifiability: psi has {n_coef} Hermite coefficients; "
             + (f"grids with fewer FE nodes than that (N = {', '.join(map(str, few))}) have fewer test functions per "
                "snapshot than unknowns, the normal matrix is then singular up to the ridge (scipy warns: "
                "'ill-conditioned'), and psi is only weakly identified where the data carry little mass, so large "
                "errors there are expected." if few else "every grid has more FE nodes than that."))
    L.append(f"* Errors: paper's L2 norm (RMS) on the {spec.eval_elements}^{spec.ndim} evaluation grid; psi with "
             "each function's mean removed; relative = divided by the std of psi_GT (resp. the RMS norm of "
             "grad_s psi_GT). Gradient error = RMS of the Euclidean norm of the error of d psi / d s.")
    L.append("")
    L.append("## Data\n")
    fp = data["fp_solver"]
    how = ("all grid data were cached, the solution was not even loaded" if fp.get("not_loaded")
           else "loaded from the cache" if fp["cache_hit"] else "solved in this run")
    L.append(f"* FP PDE data: {fp.get('solver', 'forward solver')} with {fp['points']} points, solved once "
             f"({float(fp.get('solve_seconds', float('nan'))):.1f} s, {fp.get('internal_steps', '?')} internal steps; "
             f"{how}), "
             f"spectral tail ratio {_fmt(fp.get('tail_ratio'))} (largest Fourier amplitude with |k| > M/3 relative "
             "to the mean; psi_GT is only C^1, so the spectrum decays algebraically); brought onto each grid by the solver's interpolant (trigonometric: exact "
             "for the spectral representation). Negative values of the interpolant are clipped to 0 and every "
             "snapshot renormalised to unit mass (grid quadrature); largest clipped value relative to the maximum "
             "per N: " + ", ".join(f"N={n}: {_fmt(per[n]['fp_clipped_min'])}" for n in Ns) + ".")
    if "resolution_check" in data:
        rc = data["resolution_check"]
        L.append(f"* Resolution check of the FP data on the N = {rc['N']} grid: max |p(M={rc['coarse']}) - "
                 f"p(M={rc['fine']})| / max p = {_fmt(rc['relative_max_difference'])}.")
    L.append("* MDP-map data: eq. density_evolution with the ground-truth policy and transition on each grid "
             "(p_0 = initial density at the nodes, unit mass).")
    L.append(f"* Cache: `{data['cache_dir']}`; hits this run: {data['cache_hits']} of {data['cache_lookups']}.")
    L.append("")
    L.append("## Results\n")
    rows = []
    for n in Ns:
        for kind, label in (("fp", "FP PDE"), ("mdp", "MDP map")):
            m = per[n][kind]
            rows.append([n, label, _fmt(m["psi_error"]), _fmt(m["psi_relative_error"], True), _fmt(m["grad_error"]),
                         _fmt(m["grad_relative_error"], True), _fmt(m["residual"]), _fmt(m["kl_max"]),
                         _fmt(m["kl_reference"]), _fmt(m["kl_ratio"], True), _fmt(m["policy_kl_mean"]),
                         _fmt(m["policy_kl_max"]), _fmt(m["reward_relative_error"], True), f"{m['fit_seconds']:.1f}"])
    L += markdown_table(["N", "data", "psi error", "psi rel.", "dpsi/ds error", "dpsi/ds rel.", "residual",
                         "max_t KL(p_t‖q_t)", "KL(p_T‖p_0)", "ratio", "policy KL mean", "policy KL max",
                         "reward rel. err", "fit s"], rows)
    L.append("")
    sl = summary["slopes"]
    fr = sl["fit_range"]
    L.append(f"Least-squares slopes of log(error) against log(N); fit range N = {', '.join(map(str, fr))} (the grids "
             "with at least as many FE nodes as Hermite coefficients):\n")
    L += markdown_table(["data", "psi (fit range)", "d psi/d s (fit range)", "psi (all N)", "d psi/d s (all N)"],
                        [[label] + [_fmt(sl[f"{kind}_{q}{tail}"]) for tail in ("", "_all_N") for q in ("psi", "grad")]
                         for kind, label in (("fp", "FP PDE"), ("mdp", "MDP map"))])
    L.append("")
    n_last = Ns[-1]
    curve = summary["kl_curve_fp"]
    every = max(1, spec.steps // 10)
    L.append(f"KL(p_t ‖ q_t) at N = {n_last} (fit on FP data), maximum {max(curve):.3e} at t = "
             f"{int(np.argmax(curve))}; every {every} steps: "
             + ", ".join(f"t={k}: {curve[k]:.2e}" for k in range(0, len(curve), every))
             + f". Reference KL(p_{spec.steps} ‖ p_0) = {per[n_last]['fp']['kl_reference']:.3e}.")
    L.append("")
    L.append("## Acceptance checks\n")
    for item in summary["acceptance"]:
        L.append(f"* [{'x' if item['passed'] else ' '}] {item['check']}: {item['value']}")
    L.append("")
    L.append("## MDP-map data: the error floor\n")
    mdp_rel = [per[n]["mdp"]["psi_relative_error"] for n in Ns]
    fp_rel = [per[n]["fp"]["psi_relative_error"] for n in Ns]
    diff = [per[n]["mdp_fp_difference"] for n in Ns]
    L += markdown_table(["N", "psi rel. error, FP data", "psi rel. error, MDP-map data",
                         "‖psi_MDP − psi_FP‖ / std(psi_GT)"],
                        [[n, _fmt(a, True), _fmt(b, True), _fmt(c, True)] for n, a, b, c in zip(Ns, fp_rel, mdp_rel, diff)])
    L.append("")
    L.append(f"The fit on FP data converges to psi_GT, so the distance between the two fits estimates the limit of the "
             f"MDP-map fit as N grows: the error floor of MDP-map data is about {_fmt(diff[-1], True)} of std(psi_GT) "
             f"(at N = {Ns[-1]}; the MDP-map error itself is {_fmt(mdp_rel[-1], True)} there and decreases ever more "
             "slowly). "
             + ("On the coarsest grids the nodal Gaussian kernel (standard deviation sqrt(2 dt / beta) = "
                f"{np.sqrt(2 * spec.dt / spec.beta):.3g}, below half the node spacing for N < "
                f"{int(np.ceil(_state_length(spec) / (2 * np.sqrt(2 * spec.dt / spec.beta))))}) hardly moves "
                "mass between nodes, so the MDP-map data there barely evolve (tiny KL(p_T || p_0)). "
                if spec.transition_discretization == "nodal" else "")
             + "The MDP map (eq. density_evolution) is not an exact "
             "solution of the joint FP PDE: after each step the actions are re-drawn from pi(a'|s'), i.e. they "
             "re-equilibrate instantly instead of relaxing with the FP dynamics, and the Gaussian transition of one "
             "step differs from the FP flow by O(dt) terms. The VSI regression fits the FP PDE, so refining the grid "
             "removes only the discretisation error and the error stalls at this model mismatch (docs/method.md, \"Benchmark data\"). "
             "Convergence studies therefore use FP PDE data; the MDP map is the reference for the KL checks.")
    L.append("")
    L.append("## Timings\n")
    tm = summary["timings"]
    L += markdown_table(["stage", "seconds"], [[k, f"{v:.1f}"] for k, v in tm.items()])
    L.append("")
    L.append("## Figures\n")
    for k, f in summary["figures"].items():
        L.append(f"### {k}\n\n![{k}]({f})\n")
    L.append("## Files\n")
    for n in Ns:
        L.append(f"* `result_N{n}.nc` (fit on FP data), `result_N{n}_mdp.nc` (fit on MDP-map data)")
    return "\n".join(L) + "\n"


