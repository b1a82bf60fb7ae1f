"""The one table, ``peers.md``, ``peers.json`` and the figures of the peer comparison (no numerics)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from fpirl.io import atomic_write

TITLES = {
    "tracks": "1. Tracks -> drift / potential",
    "pde": "2. Density snapshots -> PDE",
    "irl": "3. Classical IRL on the 2-D grid world",
    "forward": "4. Forward solvers",
    "assembly": "5. VSI assembly",
    "transfer": "6. Transfer of the recovered reward to changed dynamics (T1/T2)",
}


def _pct(x) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{100 * x:.2f}%"


def _s(x) -> str:
    if x is None or not np.isfinite(x):
        return "n/a"
    return f"{x:.3g} s" if x < 100 else f"{x:.0f} s"


def unified_rows(results: dict) -> list[dict]:
    """One list of rows ``part, case, tool, settings, result, wall, note`` over all parts."""
    rows = []
    parts = results["parts"]
    if "tracks" in parts:
        for r in parts["tracks"]["rows"]:
            rows.append({"part": "1 tracks", "case": r["case"], "tool": r["tool"], "settings": r["settings"],
                         "result": f"drift {_pct(r['error'])} (data-weighted {_pct(r['error_weighted'])})",
                         "wall": _s(r["wall_s"]), "note": r.get("note", "")})
    if "pde" in parts:
        for r in parts["pde"]["rows"]:
            rows.append({"part": "2 pde", "case": r["data"], "tool": r["tool"], "settings": r["settings"],
                         "result": f"drift {_pct(r['error'])}, beta {r['beta']:.3g}", "wall": _s(r["wall_s"]),
                         "note": r.get("note", "")})
    if "irl" in parts:
        for r in parts["irl"]["rows"]:
            rows.append({"part": "3 irl", "case": r["case"], "tool": r["tool"], "settings": r["settings"],
                         "result": f"policy KL {r['policy_kl']:.3g}, max_t KL(rho) {r['density_kl_max']:.3g}",
                         "wall": _s(r["wall_s"]), "note": r.get("note", "")})
    if "transfer" in parts:
        for r in parts["transfer"]["rows"]:
            rows.append({"part": "6 transfer", "case": r["case"], "tool": r["tool"], "settings": "",
                         "result": f"policy KL {r['policy_kl']:.3g}, value gap {r['value_gap']:.3g}",
                         "wall": _s(r["wall_s"]), "note": ""})
    if "forward" in parts:
        for r in parts["forward"]["rows"]:
            rows.append({"part": "4 forward", "case": r["case"], "tool": r["tool"], "settings": r["resolution"],
                         "result": f"rel. L2 {r['error']:.2e}", "wall": _s(r["wall_s"]), "note": r.get("note", "")})
    if "assembly" in parts:
        a = parts["assembly"]
        for r in a["rows"]:
            rows.append({"part": "5 assembly", "case": f"4-D N={r['N']}, {r['n_coef']} coef., K={r['K']}",
                         "tool": "reference / sum-factorised", "settings": "",
                         "result": f"{r['speedup']:.0f}x (agree to {r['max_rel_diff']:.0e})",
                         "wall": f"{_s(r['reference_s'])} / {_s(r['fast_s'])}", "note": ""})
        g = a["gridworld"]
        rows.append({"part": "5 assembly", "case": "4-D Grid World (15^4, 4,096 coef., K=50)",
                     "tool": "reference (extrapolated) / sum-factorised", "settings": "",
                     "result": f"{g['speedup']:.3g}x",
                     "wall": f"{_s(g['reference_extrapolated_s'])} / {_s(g['fast_s'])}",
                     "note": "fast measured" if g["fast_measured"] else "both extrapolated"})
    return rows


def table(results: dict) -> str:
    rows = unified_rows(results)
    cols = ["part", "case", "tool", "settings", "result", "wall"]
    width = {c: min(60, max(len(c), *(len(str(r[c])) for r in rows))) if rows else len(c) for c in cols}
    line = "  ".join(c.ljust(width[c]) for c in cols)
    out = [line, "-" * len(line)]
    for r in rows:
        out.append("  ".join(str(r[c])[: width[c]].ljust(width[c]) for c in cols))
    return "\n".join(out)


def _md_table(rows: list[dict], cols: list[str]) -> list[str]:
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        out.append("| " + " | ".join(str(r[c]).replace("|", "/") for c in cols) + " |")
    return out


# --------------------------------------------------------------------------------------------
# figures
# --------------------------------------------------------------------------------------------
def _save(fig: Figure, path: Path) -> str:
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=100))
    return path.name


def _fig_forward(res: dict, outdir: Path) -> str:
    cases = sorted({r["case"] for r in res["rows"]})
    fig = Figure(figsize=(5 * len(cases), 4), layout="constrained")
    for i, case in enumerate(cases):
        ax = fig.add_subplot(1, len(cases), i + 1)
        for tool in sorted({r["tool"] for r in res["rows"] if r["case"] == case}):
            rr = [r for r in res["rows"] if r["case"] == case and r["tool"] == tool]
            ax.loglog([r["wall_s"] for r in rr], [r["error"] for r in rr], "o-", label=tool)
            for r in rr:
                ax.annotate(r["resolution"].split()[0], (r["wall_s"], r["error"]), fontsize=7)
        ax.set_xlabel("wall time [s]")
        ax.set_ylabel("relative L2 error vs reference")
        ax.set_title(f"forward solvers: {case}")
        ax.legend(fontsize=8)
    return _save(fig, outdir / "peers_forward.png")


def _fig_assembly(res: dict, outdir: Path) -> str:
    fig = Figure(figsize=(6, 4), layout="constrained")
    ax = fig.add_subplot(1, 1, 1)
    rows = res["rows"]
    x = [r["K"] * r["n_coef"] * r["quad_points"] for r in rows]
    ax.loglog(x, [r["reference_s"] for r in rows], "s", label="dense reference (measured)")
    ax.loglog(x, [r["fast_s"] for r in rows], "o", label="sum-factorised (measured)")
    g = res["gridworld"]
    gx = 50 * g["n_coef"] * g["quad_points"]
    ax.loglog([gx], [g["reference_extrapolated_s"]], "s", mfc="none", ms=10, label="reference, Grid World (extrap.)")
    ax.loglog([gx], [g["fast_s"]], "o", mfc="none", ms=10, label="sum-factorised, Grid World")
    ax.set_xlabel("snapshots x coefficients x quadrature points")
    ax.set_ylabel("assembly wall time [s]")
    ax.set_title("VSI normal equations, 4-D periodic")
    ax.legend(fontsize=8)
    return _save(fig, outdir / "peers_assembly.png")


def _fig_bars(rows: list[dict], key_case: str, outdir: Path, name: str, title: str, value="error") -> str:
    cases = list(dict.fromkeys(r[key_case] for r in rows))
    fig = Figure(figsize=(5.5 * len(cases), 4.5), layout="constrained")
    for i, case in enumerate(cases):
        ax = fig.add_subplot(1, len(cases), i + 1)
        rr = [r for r in rows if r[key_case] == case]
        vals = [100 * r[value] for r in rr]
        labels = [f"{r['tool'].split(' (')[0]}\n{r['settings'][:38]}" for r in rr]
        ax.barh(range(len(rr)), vals, color=["C0" if r["tool"].startswith("fpirl") else "C1" for r in rr])
        ax.set_yticks(range(len(rr)), labels, fontsize=6)
        for k, v in enumerate(vals):
            ax.text(v, k, f" {v:.1f}%", va="center", fontsize=6)
        ax.set_xlim(0, 1.2 * max(vals))
        ax.set_xlabel("relative L2 drift error [%]")
        ax.set_title(f"{title}: {case}", fontsize=9)
        ax.invert_yaxis()
    return _save(fig, outdir / name)


def _fig_irl(res: dict, outdir: Path) -> str:
    fig = Figure(figsize=(6, 4), layout="constrained")
    ax = fig.add_subplot(1, 1, 1)
    for r in res["rows"]:
        ax.semilogy(np.arange(1, len(r["density_kl"]) + 1), np.maximum(r["density_kl"], 1e-12),
                    label=f"{r['tool']} ({r['case']})")
    ax.set_xlabel("MDP step")
    ax.set_ylabel("KL(rho_expert,t || rho_model,t)")
    ax.set_title("simulated state densities vs the expert's")
    ax.legend(fontsize=7)
    return _save(fig, outdir / "peers_irl.png")


# --------------------------------------------------------------------------------------------
def write(results: dict, outdir: Path) -> None:
    outdir = Path(outdir)
    parts = results["parts"]
    figs = {}
    if "forward" in parts:
        figs["forward"] = _fig_forward(parts["forward"], outdir)
    if "assembly" in parts:
        figs["assembly"] = _fig_assembly(parts["assembly"], outdir)
    if "tracks" in parts:
        figs["tracks"] = _fig_bars(parts["tracks"]["rows"], "case", outdir, "peers_tracks.png", "tracks")
    if "pde" in parts:
        figs["pde"] = _fig_bars(parts["pde"]["rows"], "data", outdir, "peers_pde.png", "snapshots")
    if "irl" in parts:
        figs["irl"] = _fig_irl(parts["irl"], outdir)
    m = results["machine"]
    lines = [
        "# fpirl and its peers",
        "",
        f"Command: `{results['command']}` (seed {results['seed']}{', quick mode' if results['quick'] else ''}).",
        (f"Machine: {m['cpus']} CPUs, Python {m['python']}; load average at start {m['load_start']}, "
         f"at end {m['load_end']} (shared machine: timings are upper bounds)."),
        (f"Total {results['total_wall_s']:.0f} s, of which {results['install_wall_s']:.0f} s making/checking the "
         "peers' virtual environments."),
        "",
        "Peer versions: " + "; ".join(f"{k}: " + ", ".join(f"{a} {b}" for a, b in v.items())
                                     for k, v in results["versions"].items()),
        "",
        "## All numbers",
        "",
    ]
    lines += _md_table(unified_rows(results), ["part", "case", "tool", "settings", "result", "wall", "note"])
    for part, res in parts.items():
        lines += ["", f"## {TITLES[part]}", ""]
        if res.get("notes"):
            lines += [f"* {n}" for n in res["notes"]] + [""]
        if part in figs:
            lines += [f"![{part}]({figs[part]})", ""]
        lines.append(f"Part wall time {res['part_wall_s']:.0f} s.")
    text = "\n".join(lines) + "\n"
    atomic_write(outdir / "peers.md", lambda tmp: tmp.write_text(text))
    blob = json.dumps(results, indent=1, default=_jsonable)
    atomic_write(outdir / "peers.json", lambda tmp: tmp.write_text(blob))


def _jsonable(x):
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    return str(x)
