"""Track-level checks of the per-track noise scale and of the simulation substeps (issue 19, third pass).

For each real set: the default fit (per-track noise scale, mobility and second lag by CV), the same
model simulated without the track noise, and the previous default (``track_noise=False``); each
simulated with substeps where the one-step map overshoots (the simulator's rule) and without them
(``SUBSTEP_BOUND = inf``). Held-out tracks simulated from their first observation, same lengths; MSD and
VACF discrepancy (mean |sim - obs| / band half-width) and in-band fraction, speed KS: mean ± standard
error over ``--seeds`` simulation seeds (one seed's numbers vary a lot).

    PYTHONPATH=src python benchmarks/bench_track_noise.py --data ../shared/realdata --sets b_cells,t_cells,neutrophils,corridor

Same split and ``--quick`` CV as ``benchmarks/bench_track_mobility.py``.
"""

from __future__ import annotations

import argparse
import copy
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

import fpirl.forward.track_paths as track_paths
from fpirl.estimators import IncrementsEstimator
from fpirl.problems.realdata import QUICK_ELEMENTS, SEED, TRAIN_FRACTION, track_check
from fpirl.problems.realdata._data import available_sets, read_set


def run(spec, data_dir, work, seeds):
    table, _ = read_set(spec, data_dir, work, robust_box=False)
    train, test = table.split_tracks(TRAIN_FRACTION, SEED)
    robust, _ = read_set(spec, data_dir, work)
    train = robust.select_tracks(np.flatnonzero(np.isin(robust.track_ids, train.track_ids)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = IncrementsEstimator(drift_axes=train.action_axes, cv_elements=QUICK_ELEMENTS).fit(train)
        prev = IncrementsEstimator(drift_axes=train.action_axes, cv_elements=QUICK_ELEMENTS,
                                   track_noise=False).fit(train)
    plain = copy.copy(est)
    plain.track_noise_ = None
    bound = track_paths.SUBSTEP_BOUND
    models = (("default", est), ("default, no track noise in the simulation", plain),
              (f"previous default (g degree {prev.settings_['mobility_degree']})", prev))
    for name, model in models:
        for substeps in (True, False):
            track_paths.SUBSTEP_BOUND = bound if substeps else np.inf
            res = {k: [] for k in ("msd", "msd_in", "vacf", "vacf_in", "ks")}
            t0 = time.perf_counter()
            for s in range(seeds):
                summary, _, _ = track_check(model, test, np.random.default_rng(s))
                for key in ("msd", "vacf"):
                    res[key].append(summary[key]["discrepancy"])
                    res[key + "_in"].append(summary[key]["inside_band"])
                res["ks"].append(summary["speed"]["ks"])
            track_paths.SUBSTEP_BOUND = bound

            def f(k):
                return f"{np.mean(res[k]):.2f} ± {np.std(res[k]) / np.sqrt(seeds):.2f}"

            print(f"{spec.name} | {name} | substeps {'on' if substeps else 'off'} | MSD disc {f('msd')}, in band "
                  f"{f('msd_in')} | VACF disc {f('vacf')}, in band {f('vacf_in')} | speed KS {f('ks')} "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=None)
    ap.add_argument("--sets", default=None)
    ap.add_argument("--seeds", type=int, default=5)
    args = ap.parse_args()
    names = args.sets.split(",") if args.sets else None
    data = Path(args.data) if args.data else None
    with tempfile.TemporaryDirectory() as work:
        for spec in available_sets(data, names):
            run(spec, data, Path(work), args.seeds)


if __name__ == "__main__":
    main()
