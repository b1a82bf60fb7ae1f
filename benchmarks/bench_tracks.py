"""Track estimators on simulated tracks (issue: trajectories in; docs/benchmarks.md, section "Track estimators").

Acceptance case: 2-D periodic box [-1, 1]^2, beta = 4, dt = 2e-3, 2000 tracks x 400 steps, uniform
start, psi = 0.45 sin(pi x) + 0.35 cos(pi y) + 0.2 cos(pi (x + y)), positions wrapped, tracks made
by the Euler-Maruyama sampler fpirl.forward.markov.sample_sde (independent of the estimators).
Error: relative L2 of psi (means removed) on a 100 x 100 grid.

Parts (``--part``):
  acceptance  increments with automatic resolution, every fixed resolution, density estimator
              (defaults, beta given, beta from the VSI, FE x Hermite grid sweep)
  cvrule      the '1se' and 'min' CV rules against the best fixed resolution, several seeds and sizes
  tracks      error against the number of tracks (10^2 .. 10^5) for both estimators
  stride      density estimator: error against the snapshot stride
  walls       2-D reflecting box: wall treatments 'none', 'drop', 'mirror'
  noise       1-D tracks with position noise: raw against noise-corrected increments
  fourd       4-D reflecting box, 10^5 transitions: fit times
  all         everything

Usage::

    .venv/bin/python benchmarks/bench_tracks.py --part all   # numbers: benchmarks/results/bench_tracks.json
                                                             # figure: docs/figures/bench_tracks.png
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from fpirl.estimators import IncrementsEstimator, TrackDensityEstimator
from fpirl.forward.markov import sample_sde
from fpirl.tracks import TrackTable

PI = np.pi
BETA, DT, LOWER, UPPER = 4.0, 2e-3, np.array([-1.0, -1.0]), np.array([1.0, 1.0])


def psi(x):
    return 0.45 * np.sin(PI * x[..., 0]) + 0.35 * np.cos(PI * x[..., 1]) + 0.2 * np.cos(PI * (x[..., 0] + x[..., 1]))


def grad(x):
    s = 0.2 * PI * np.sin(PI * (x[..., 0] + x[..., 1]))
    return np.stack([0.45 * PI * np.cos(PI * x[..., 0]) - s, -0.35 * PI * np.sin(PI * x[..., 1]) - s], axis=-1)


def simulate(n_tracks, steps, seed):
    rng = np.random.default_rng(seed)
    x = sample_sde(grad, BETA, rng.uniform(LOWER, UPPER, (n_tracks, 2)), DT, steps, rng, LOWER, UPPER, "periodic")
    values = x.transpose(1, 0, 2).reshape(-1, 2)
    seg = np.repeat(np.arange(n_tracks), steps + 1)
    time_ = np.tile(np.arange(steps + 1) * DT, n_tracks)
    return TrackTable(values, seg, seg, time_, DT, ("x", "y"), ("state", "state"), LOWER, UPPER, "periodic")


_G = np.linspace(-1, 1, 101)[:-1]
_MESH = np.stack(np.meshgrid(_G, _G, indexing="ij"), axis=-1)
_TRUE = psi(_MESH) - psi(_MESH).mean()


def error(est) -> float:
    p = est.potential(_MESH)
    p = p - p.mean()
    return float(np.sqrt(np.mean((p - _TRUE) ** 2) / np.mean(_TRUE**2)))


def timed(factory, tracks):
    t = time.perf_counter()
    est = factory().fit(tracks)
    return est, time.perf_counter() - t


def load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def part_acceptance(out: Path) -> dict:
    tracks = simulate(2000, 400, 1)
    res = {"load_before": load(), "fixed": {}}
    for e in range(2, 9):
        est, t = timed(lambda: IncrementsEstimator(hermite_elements=e), tracks)
        res["fixed"][e] = {"error": error(est), "beta": est.beta_, "seconds": t}
    est, t = timed(lambda: IncrementsEstimator(), tracks)
    cv = est.cv_
    res["auto"] = {"error": error(est), "beta": est.beta_, "seconds": t, "elements": cv["chosen_elements"],
                   "ridge": cv["chosen_ridge"], "best_cv_elements": cv["best_elements"]}
    best = min(v["error"] for v in res["fixed"].values())
    res["auto"]["vs_best_fixed"] = res["auto"]["error"] / best
    den, t = timed(lambda: TrackDensityEstimator(), tracks)
    res["density"] = {"error": error(den), "beta": den.beta_, "seconds": t,
                      "settings": {k: den.settings_[k] for k in ("fe_elements", "hermite_elements", "snapshot_stride")}}
    den_fixed, t = timed(lambda: TrackDensityEstimator(beta=BETA), tracks)
    res["density_beta_given"] = {"error": error(den_fixed), "seconds": t}
    den_vsi, t = timed(lambda: TrackDensityEstimator(beta_from="vsi"), tracks)
    res["density_beta_vsi"] = {"error": error(den_vsi), "beta": den_vsi.beta_, "seconds": t}
    res["density_grid"] = []
    for fe in (10, 14, 20, 28):
        for nh in (2, 3, 4, 5):
            den = TrackDensityEstimator(fe_elements=fe, hermite_elements=nh).fit(tracks)
            res["density_grid"].append({"fe": fe, "hermite": nh, "error": error(den)})
    res["load_after"] = load()
    res["cv_curve"] = {"elements": cv["elements"].tolist(), "ridge": cv["ridge"].tolist(),
                       "score": cv["score"].tolist(), "std": cv["std"].tolist(), "se": cv["se_paired"].tolist()}
    return res


def part_cvrule(out: Path) -> dict:
    rows = []
    for n_tracks, steps in ((100, 400), (300, 400), (2000, 400)):
        for seed in range(3):
            tracks = simulate(n_tracks, steps, 100 + seed)
            fixed = {e: error(IncrementsEstimator(hermite_elements=e, ridge=r).fit(tracks))
                     for e in range(2, 9) for r in (1e-4,)}
            row = {"n_tracks": n_tracks, "seed": seed, "best_fixed": min(fixed.values()),
                   "best_fixed_elements": min(fixed, key=fixed.get)}
            for rule in ("1se", "min"):
                est = IncrementsEstimator(cv_rule=rule).fit(tracks)
                row[rule] = error(est)
                row[rule + "_elements"] = est.cv_["chosen_elements"]
            rows.append(row)
            print(row, flush=True)
    return {"rows": rows}


def part_tracks(out: Path) -> dict:
    rows = []
    for n_tracks, steps in ((100, 400), (300, 400), (1000, 400), (3000, 400), (10000, 400), (100000, 40)):
        tracks = simulate(n_tracks, steps, 7)
        inc, ti = timed(lambda: IncrementsEstimator(), tracks)
        den, td = timed(lambda: TrackDensityEstimator(), tracks)
        row = {"n_tracks": n_tracks, "steps": steps, "increments": error(inc), "increments_s": ti,
               "increments_elements": inc.cv_["chosen_elements"], "density": error(den), "density_s": td,
               "density_stride": den.settings_["snapshot_stride"], "load": load()}
        rows.append(row)
        print(row, flush=True)
    return {"rows": rows}


def part_stride(out: Path) -> dict:
    rows = []
    for n_tracks in (300, 2000):
        for seed in range(3):
            tracks = simulate(n_tracks, 400, 200 + seed)
            for stride in (1, 2, 5, 10, 20, 40):
                den = TrackDensityEstimator(stride=stride).fit(tracks)
                rows.append({"n_tracks": n_tracks, "seed": seed, "stride": stride, "error": error(den),
                             "pool": den.pool_})
            print(rows[-6:], flush=True)
    return {"rows": rows}


def part_walls(out: Path) -> dict:
    """2-D reflecting box: the three wall treatments (tracks from the folding Euler-Maruyama sampler)."""
    def psi_w(x):
        return 0.5 * x[..., 0] ** 2 + 0.3 * np.sin(PI * x[..., 1]) + 0.2 * x[..., 0] * x[..., 1]

    def grad_w(x):
        return np.stack([x[..., 0] + 0.2 * x[..., 1], 0.3 * PI * np.cos(PI * x[..., 1]) + 0.2 * x[..., 0]], axis=-1)

    rng = np.random.default_rng(12)
    n, steps, dt, beta = 2000, 250, 1e-2, 2.0
    x = sample_sde(grad_w, beta, rng.uniform(LOWER, UPPER, (n, 2)), dt, steps, rng, LOWER, UPPER, "reflecting")
    seg = np.repeat(np.arange(n), steps + 1)
    tracks = TrackTable(x.transpose(1, 0, 2).reshape(-1, 2), seg, seg, np.tile(np.arange(steps + 1) * dt, n), dt,
                        ("x", "y"), ("state", "state"), LOWER, UPPER, "reflecting")
    true = psi_w(_MESH) - psi_w(_MESH).mean()
    rows = []
    for walls in ("none", "drop", "mirror"):
        for e in (2, 3, 4):
            est = IncrementsEstimator(hermite_elements=e, walls=walls).fit(tracks)
            p = est.potential(_MESH)
            p = p - p.mean()
            rows.append({"walls": walls, "elements": e, "beta": est.beta_,
                         "error": float(np.sqrt(np.mean((p - true) ** 2) / np.mean(true**2)))})
            print(rows[-1], flush=True)
    return {"rows": rows, "setup": f"{n} tracks x {steps} steps, dt={dt}, beta={beta}, [-1,1]^2 reflecting"}


def part_noise(out: Path) -> dict:
    """1-D periodic tracks with Gaussian position noise: raw against corrected increments."""
    def psi_n(x):
        return 0.6 * np.cos(PI * x[..., 0]) + 0.3 * np.sin(2 * PI * x[..., 0])

    def grad_n(x):
        return np.stack([-0.6 * PI * np.sin(PI * x[..., 0]) + 0.6 * PI * np.cos(2 * PI * x[..., 0])], axis=-1)

    g = np.linspace(-1, 1, 201)[:-1, None]
    true = psi_n(g) - psi_n(g).mean()
    rows = []
    for dt, steps, s in ((1e-2, 400, 0.05), (5e-3, 800, 0.03), (5e-3, 800, 0.05), (2e-3, 1000, 0.02)):
        rng = np.random.default_rng(14)
        x = sample_sde(grad_n, 3.0, rng.uniform(-1, 1, (300, 1)), dt, steps, rng, -1.0, 1.0, "periodic")
        clean = x.transpose(1, 0, 2).reshape(-1, 1)
        noisy = -1.0 + np.mod(clean + s * rng.standard_normal(clean.shape) + 1.0, 2.0)
        seg = np.repeat(np.arange(300), steps + 1)
        row = {"dt": dt, "s": s}
        for name, vals in (("clean", clean), ("noisy", noisy)):
            tr = TrackTable(vals, seg, seg, np.tile(np.arange(steps + 1) * dt, 300), dt, ("x",), ("state",), -1.0,
                            1.0, "periodic")
            for nc in (False, True):
                est = IncrementsEstimator(hermite_elements=6, noise_correction=nc).fit(tr)
                p = est.potential(g)
                p = p - p.mean()
                key = f"{name}_{'corrected' if nc else 'raw'}"
                row[key] = float(np.sqrt(np.mean((p - true) ** 2) / np.mean(true**2)))
                row[key + "_beta"] = est.beta_
        rows.append(row)
        print(row, flush=True)
    return {"rows": rows, "setup": "300 tracks, beta=3, 6 Hermite elements, true beta 3"}


def part_fourd(out: Path) -> dict:
    """4-D reflecting box (2 states, 2 actions), 1000 tracks x 100 steps = 10^5 transitions: fit times."""
    lo4, hi4 = -1.5 * np.ones(4), 1.5 * np.ones(4)

    def grad4(x):
        return np.stack([x[:, 0] + 0.3 * x[:, 2], x[:, 1] + 0.3 * x[:, 3],
                         2 * x[:, 2] + 0.3 * x[:, 0], 2 * x[:, 3] + 0.3 * x[:, 1]], axis=1)

    rng = np.random.default_rng(4)
    n, steps, dt = 1000, 100, 1e-2
    x = sample_sde(grad4, 2.0, rng.uniform(lo4, hi4, (n, 4)), dt, steps, rng, lo4, hi4, "reflecting")
    seg = np.repeat(np.arange(n), steps + 1)
    tracks = TrackTable(x.transpose(1, 0, 2).reshape(-1, 4), seg, seg, np.tile(np.arange(steps + 1) * dt, n), dt,
                        ("s0", "s1", "a0", "a1"), ("state", "state", "action", "action"), lo4, hi4, "reflecting")
    rows = []
    for e in (2, 3):
        for drift in (None, [2, 3]):
            est, t = timed(lambda: IncrementsEstimator(hermite_elements=e, drift_axes=drift), tracks)
            rows.append({"elements": e, "n_coef": est.hermite_.n_coef, "drift_axes": "all" if drift is None else "actions",
                         "seconds": t, "beta": est.beta_, "load": load()})
            print(rows[-1], flush=True)
    est, t = timed(lambda: IncrementsEstimator(), tracks)
    rows.append({"elements": "auto", "chosen": est.cv_["chosen_elements"], "drift_axes": "all", "seconds": t,
                 "beta": est.beta_, "load": load()})
    print(rows[-1], flush=True)
    return {"rows": rows, "setup": f"{n} tracks x {steps} steps, dt={dt}, beta=2, [-1.5,1.5]^4 reflecting"}


def figure(results: dict, path: Path):
    from matplotlib.figure import Figure

    panels = [k for k in ("acceptance", "tracks", "stride") if k in results]
    fig = Figure(figsize=(4.2 * len(panels), 3.4), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(panels)))
    for ax, key in zip(axes, panels):
        r = results[key]
        if key == "acceptance":
            cv = r["cv_curve"]
            score = np.asarray(cv["score"])
            se = np.asarray(cv["se"])
            for j, ridge in enumerate(cv["ridge"]):
                ax.errorbar(cv["elements"], 1e3 * (score[:, j] - score.max()), yerr=1e3 * se[:, j], capsize=2,
                            marker="o", ms=3, label=f"ridge {ridge:g}")
            ax.set_xlabel("Hermite elements per axis")
            ax.set_ylabel("held-out log-lik. - best (mnats/transition)")
            ax.set_title(f"CV curve, 2000 tracks (chose {r['auto']['elements']}; bars: paired SE)", fontsize=9)
            ax.legend(fontsize=7)
        elif key == "tracks":
            n = [row["n_tracks"] for row in r["rows"]]
            ax.loglog(n, [row["increments"] for row in r["rows"]], "o-", label="increments (auto)")
            ax.loglog(n, [row["density"] for row in r["rows"]], "s-", label="density")
            ax.set_xlabel("tracks (400 steps; 10^5: 40 steps)")
            ax.set_ylabel("relative L2 error of psi")
            ax.set_title("error vs number of tracks", fontsize=9)
            ax.legend(fontsize=7)
        else:
            rows = r["rows"]
            for n_tr in sorted({row["n_tracks"] for row in rows}):
                strides = sorted({row["stride"] for row in rows})
                mean = [np.mean([row["error"] for row in rows if row["n_tracks"] == n_tr and row["stride"] == s])
                        for s in strides]
                ax.semilogx(strides, mean, "o-", label=f"{n_tr} tracks")
            ax.set_xlabel("snapshot stride (frames)")
            ax.set_ylabel("relative L2 error of psi (mean of 3 seeds)")
            ax.set_title("density estimator vs stride", fontsize=9)
            ax.legend(fontsize=7)
    fig.savefig(path, dpi=120)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", default="acceptance", choices=("acceptance", "cvrule", "tracks", "stride", "walls", "noise", "fourd", "all"))
    ap.add_argument("--out", default="benchmarks/results", help="JSON of the numbers (kept between parts)")
    ap.add_argument("--figure", default="docs/figures/bench_tracks.png")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    parts = (("acceptance", "cvrule", "tracks", "stride", "walls", "noise", "fourd") if args.part == "all"
             else (args.part,))
    store = out / "bench_tracks.json"
    results = json.loads(store.read_text()) if store.exists() else {}
    for p in parts:
        results[p] = globals()[f"part_{p}"](out)
        store.write_text(json.dumps(results, indent=1, default=float))
        print(p, json.dumps(results[p], indent=1, default=float)[:3000], flush=True)
    Path(args.figure).parent.mkdir(parents=True, exist_ok=True)
    figure(results, Path(args.figure))


if __name__ == "__main__":
    main()
