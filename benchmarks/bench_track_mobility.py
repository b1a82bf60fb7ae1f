"""Track simulation with the fitted mobility and second lag (issue 19): the real-data benchmark's
track-level check (held-out tracks simulated from their first observation, same lengths; MSD, VACF,
speed and turning-angle statistics against the held-out tracks) with the model as fitted
(mobility g and rho as chosen by cross-validation, what ``fpirl evaluate`` scores) and with g = 1,
rho = 0 switched off in the simulation only (what the simulator did before), and each alone; with a
per-track noise scale also the simulation without it, with its forgetting factor set to 1 (one scale per
track), and the previous default (fitted with ``track_noise=False``).

    PYTHONPATH=src python benchmarks/bench_track_mobility.py [--data /path/to/realdata] [--sets corridor,b_cells]

Same split and defaults as ``fpirl benchmark realdata --quick`` (70/30 by track, seed 0, CV over 2 and
3 velocity elements). Prints one line per set and model.
"""

from __future__ import annotations

import argparse
import copy
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from fpirl.estimators import IncrementsEstimator
from fpirl.evaluation.heldout import heldout_loglik
from fpirl.problems.realdata import QUICK_ELEMENTS, SEED, TRAIN_FRACTION, track_check
from fpirl.problems.realdata._data import available_sets, read_set


def run(spec, data_dir, work):
    table, _ = read_set(spec, data_dir, work, robust_box=False)
    train, test = table.split_tracks(TRAIN_FRACTION, SEED)
    robust, _ = read_set(spec, data_dir, work)
    train = robust.select_tracks(np.flatnonzero(np.isin(robust.track_ids, train.track_ids)))
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = IncrementsEstimator(drift_axes=train.action_axes, cv_elements=QUICK_ELEMENTS).fit(train)
    fit_s = time.perf_counter() - t0
    off, mob_only, lag_only = copy.copy(est), copy.copy(est), copy.copy(est)
    off.mobility_, off.second_lag_ = None, None
    mob_only.second_lag_, lag_only.mobility_ = None, None
    mob = est.mobility_
    ll = [heldout_loglik(m, test, check=False).loglik["fpirl"] for m in (est, off)]
    print(f"{spec.name}: fit {fit_s:.1f} s, mobility degree {0 if mob is None else mob.degree}, "
          f"rho {est.second_lag_}, held-out loglik fitted {ll[0]:.3f}, g=1/rho=0 {ll[1]:.3f}")
    variants = [("fitted", est), ("g=1,rho=0", off)]
    if est.mobility_ is not None and est.second_lag_ is not None:
        variants += [("g only", mob_only), ("rho only", lag_only)]
    noise = getattr(est, "track_noise_", None)
    if noise is not None:  # the per-track noise scale: off in the simulation, and with lambda = 1
        plain, fixed = copy.copy(est), copy.copy(est)
        plain.track_noise_ = None
        fixed.track_noise_ = type(noise)(noise.nu, noise.scale, 1.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            previous = IncrementsEstimator(drift_axes=train.action_axes, cv_elements=QUICK_ELEMENTS,
                                           track_noise=False).fit(train)
        variants += [("no track noise", plain), ("track noise, lambda=1", fixed),
                     (f"previous default (g degree {previous.settings_['mobility_degree']}, rho "
                      f"{previous.settings_['second_lag_rho']:.2f}, no track noise; held-out "
                      f"{heldout_loglik(previous, test, check=False).loglik['fpirl']:.3f})", previous)]
        print(f"  track noise nu {noise.nu:.3g}, c {noise.scale:.3g}, lambda {noise.forgetting:.3g}; held-out "
              f"loglik without it {heldout_loglik(plain, test, check=False).loglik['fpirl']:.3f}")
    for name, model in variants:
        t0 = time.perf_counter()
        summary, _, _ = track_check(model, test, np.random.default_rng(SEED))
        cells = "  ".join(f"{k} in-band {v['inside_band']:.2f} disc {v['discrepancy']:.2f}" for k, v in summary.items()
                          if k in ("msd", "vacf")) + "  " + "  ".join(
            f"{k} KS {v['ks']:.3f}" for k, v in summary.items() if "ks" in v)
        print(f"  {name:10s} {cells}  ({time.perf_counter() - t0:.1f} s)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=None)
    ap.add_argument("--sets", default=None)
    args = ap.parse_args()
    names = args.sets.split(",") if args.sets else None
    data = Path(args.data) if args.data else None
    with tempfile.TemporaryDirectory() as work:
        for spec in available_sets(data, names):
            run(spec, data, Path(work))


if __name__ == "__main__":
    main()
