"""Calibration of the density estimator's intervals on tracks: row model, bootstrap over tracks, parametric bootstrap.

Run:  PYTHONPATH=src .venv/bin/python benchmarks/bench_track_density_uncertainty.py [--seeds 3]
      [--regimes long,short] [--replicates 32] [--cases trig,harm,well,dw,bowl] [--jobs 2]

Data: 2-D tracks of ``dz = -grad psi dt + sqrt(2/beta) dW`` (uniform starts; regime ``long``: 600 tracks of
400 frames, beta = 4, dt = 2e-3, every frame a snapshot; ``short``: 4000 tracks of 120 frames, beta = 2,
dt = 5e-3, every fifth frame) by
Euler-Maruyama on 4 substeps per frame (:func:`fpirl.forward.markov.sample_sde`; the parametric bootstrap
simulates its replicates on its own substep rule), four potentials the estimators were not designed on:
``trig`` (periodic, 0.45 sin(pi x) + 0.35 cos(pi y) + 0.2 cos(pi (x + y))), ``harm`` (periodic, a second
harmonic), ``well`` (walls, a tilted quadratic well), ``dw`` (walls, a double well) and ``bowl`` (walls,
x^2 + 0.6 sin(pi y)). The estimator is
:class:`fpirl.estimators.TrackDensityEstimator` with its defaults and beta given. Scores on the FE nodes
(both potentials with their nodal mean removed, as ``fpirl fit`` writes them), for the row model, the parametric
bootstrap without its basis column (the same replicates) and with it (the default): the share of nodes whose
true psi lies in the 90% band ``psi +- 1.645 std`` (target 0.80-0.98), the relative L2 error of psi, and the
median ratio of the nodal std to the rms error.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
import warnings

import numpy as np

from fpirl.estimators import TrackDensityEstimator
from fpirl.forward.markov import sample_sde
from fpirl.tracks import TrackTable
from fpirl.uncertainty import estimate_uncertainty

PI = np.pi
BETA, DT = 4.0, 2e-3
POTENTIALS = {
    "trig": ("periodic", lambda x, y: 0.45 * np.sin(PI * x) + 0.35 * np.cos(PI * y) + 0.2 * np.cos(PI * (x + y))),
    "harm": ("periodic", lambda x, y: 0.3 * np.sin(2 * PI * x) * np.cos(PI * y) + 0.4 * np.cos(PI * x)),
    "well": ("reflecting", lambda x, y: 1.5 * ((x - 0.2) ** 2 + 0.5 * (y + 0.1) ** 2 + 0.6 * x * y)),
    "dw": ("reflecting", lambda x, y: 2.0 * (x**2 - 0.5) ** 2 + 0.8 * y**2 + 0.3 * x * y),
    "bowl": ("reflecting", lambda x, y: x**2 + 0.6 * np.sin(PI * y)),
}
#: (tracks, frames, beta, dt, stride): many short-lived tracks and a short transient with strided snapshots
REGIMES = {"long": (600, 400, 4.0, 2e-3, 1), "short": (4000, 120, 2.0, 5e-3, 5)}


def _gradient(f):
    e = 1e-6
    return lambda z: np.stack([(f(z[:, 0] + e, z[:, 1]) - f(z[:, 0] - e, z[:, 1])) / (2 * e),
                               (f(z[:, 0], z[:, 1] + e) - f(z[:, 0], z[:, 1] - e)) / (2 * e)], axis=-1)


def tracks(case: str, n_tracks: int, frames: int, seed: int, beta: float = BETA, dt: float = DT) -> TrackTable:
    boundary, f = POTENTIALS[case]
    lo, hi = np.array([-1.0, -1.0]), np.array([1.0, 1.0])
    rng = np.random.default_rng(seed)
    x = sample_sde(_gradient(f), beta, rng.uniform(lo, hi, (n_tracks, 2)), dt, frames, rng, lo, hi, boundary, substeps=4)
    ids = np.repeat(np.arange(n_tracks), frames + 1)
    values = x.transpose(1, 0, 2).reshape(-1, 2)
    return TrackTable(values, ids, ids, np.tile(np.arange(frames + 1) * dt, n_tracks), dt, ("x", "y"),
                      ("state", "state"), lo, hi, boundary)


def score(est, post, case):
    grid = est.grid_
    X, Y = np.meshgrid(*grid.coords, indexing="ij")
    true = POTENTIALS[case][1](X, Y)
    true = true - true.mean()
    fit = est.hermite_.evaluate_grid(est.coef_, grid.coords)
    fit = fit - fit.mean()
    std = post.potential_std(grid.coords)
    err = fit - true
    rms = np.sqrt(np.mean(err**2))
    return np.mean(np.abs(err) <= 1.645 * std), rms / true.std(), np.median(std) / rms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--regimes", default="long,short")
    ap.add_argument("--replicates", type=int, default=None)
    ap.add_argument("--cases", default="trig,harm,well,dw,bowl")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    print("| regime | case | seed | Hermite, FE | psi error | row model: coverage, std/err | parametric, no basis "
          "column | parametric (default) | basis column, rms on the nodes | s (parametric) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    totals = {m: [] for m in ("posterior", "no basis column", "parametric")}
    for regime in args.regimes.split(","):
        n_tracks, frames, beta, dt, stride = REGIMES[regime]
        for case in args.cases.split(","):
            for seed in range(args.seeds):
                data = tracks(case, n_tracks, frames, 100 + seed, beta, dt)
                est = TrackDensityEstimator(beta=beta, stride=stride).fit(data)
                row = estimate_uncertainty(est, "posterior", data)
                t = time.perf_counter()
                par = estimate_uncertainty(est, "parametric", data, n_replicates=args.replicates, rng=seed,
                                           n_jobs=args.jobs)
                secs = time.perf_counter() - t
                # the same replicates without the basis column (its last column; the space holds the rest exactly)
                plain = par if par.basis is None else dataclasses.replace(par, factor=par.factor[:, :-1], basis=None)
                if par.basis is None:
                    shrink = "none"
                else:
                    col = par.hermite.evaluate_grid(par.basis[:-1], est.grid_.coords)
                    shrink = f"{np.sqrt(np.mean((col - col.mean()) ** 2)):.4f}"
                cells = []
                for method, post in zip(totals, (row, plain, par)):
                    cover, err, ratio = score(est, post, case)
                    totals[method].append(cover)
                    cells.append(f"{cover:.2f}, {ratio:.2f}")
                print(f"| {regime} | {case} | {seed} | {est.hermite_.elements[0]}, {est.grid_.elements[0]} | "
                      f"{100 * err:.1f}% | " + " | ".join(cells) + f" | {shrink} | {secs:.1f} |", flush=True)
    print("\nmean coverage: " + ", ".join(f"{m} {np.mean(v):.3f} (min {np.min(v):.2f}, in 0.80-0.98: "
                                        f"{np.mean((np.array(v) >= 0.8) & (np.array(v) <= 0.98)):.2f})"
                                        for m, v in totals.items()))


if __name__ == "__main__":
    main()
