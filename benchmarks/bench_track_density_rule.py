"""Hermite elements of the density estimator on tracks: psi error at 2, 3 and 4 elements on the FE grid of the rule.

Run:  PYTHONPATH=src:benchmarks .venv/bin/python benchmarks/bench_track_density_rule.py [--seeds 3]
      [--counts 2,3,4] [--regimes long,short | --tracks 150,600,...]

Data: the tracks of ``bench_track_density_uncertainty.py`` (five potentials, regimes ``long`` and ``short``, seeds
200..). For each set the FE grid is the estimator's rule; the Hermite count is fixed at each of ``--counts``. Prints the
mean relative L2 error of psi (both means removed, 41 x 41 points) over the seeds, and the count the rule picks.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

import bench_track_density_uncertainty as data
from fpirl.estimators import TrackDensityEstimator
from fpirl.estimators.track_density import hermite_rule


def error(est, case) -> float:
    g = np.linspace(-1.0, 1.0, 41)
    X, Y = np.meshgrid(g, g, indexing="ij")
    true = data.POTENTIALS[case][1](X, Y)
    fit = est.hermite_.evaluate_grid(est.coef_, [g, g])
    true, fit = true - true.mean(), fit - fit.mean()
    return float(np.sqrt(np.mean((fit - true) ** 2)) / true.std())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--counts", default="2,3,4", help="Hermite elements to compare")
    ap.add_argument("--regimes", default="long,short")
    ap.add_argument("--tracks", default=None, help="instead of the regimes: track counts N1,N2,... of 200 frames "
                    "(beta = 4, dt = 2e-3, every second frame a snapshot), one FE size each")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    counts = [int(c) for c in args.counts.split(",")]
    print(f"| regime | potential | FE elements | rule | psi error, {' / '.join(map(str, counts))} Hermite elements |")
    print("|---|---|---|---|---|")
    regimes = ({f"{n} tracks": (int(n), 200, 4.0, 2e-3, 2) for n in args.tracks.split(",")} if args.tracks else
               {r: data.REGIMES[r] for r in args.regimes.split(",")})
    for regime, (n_tracks, frames, beta, dt, stride) in regimes.items():
        for case in data.POTENTIALS:
            errs, fe = [], None
            for seed in range(args.seeds):
                tracks = data.tracks(case, n_tracks, frames, 200 + seed, beta, dt)
                fe = TrackDensityEstimator(beta=beta, stride=stride).fit(tracks).grid_.elements[0]
                errs.append([error(TrackDensityEstimator(beta=beta, stride=stride, hermite_elements=h).fit(tracks), case)
                             for h in counts])
            e = np.mean(errs, axis=0)
            print(f"| {regime} | {case} | {fe} | {hermite_rule(fe)} | {' / '.join(f'{v:.3f}' for v in e)} |", flush=True)


if __name__ == "__main__":
    main()
