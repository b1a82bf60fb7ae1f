"""Grid World benchmark (paper section 5.1): full sweep N = 5..15, with and without cached data.

Run:  .venv/bin/python benchmarks/bench_gridworld.py [-o DIR] [--elements 5,7,9,11,13,15]
                                                      [--quick] [--resolution-check M] [--keep-cache]

1. deletes the cache (unless --keep-cache) and runs the whole experiment: FP PDE solve, data on every
   grid, both fits per N, metrics, result files, figures, report ("cold");
2. runs it again with the cache filled ("warm": only fits, metrics, figures);
3. optionally (--resolution-check M) solves the FP PDE at M points per axis as well and refits the
   finest grid on those data, to show that the data resolution does not limit the psi error.

Prints one JSON document with the timings per stage and the key numbers.
"""

import argparse
import contextlib
import json
import os
import shutil
import sys
import time
import warnings
from pathlib import Path


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--output", default="bench-gridworld", help="output directory (default ./bench-gridworld)")
    p.add_argument("--elements", default=None, help="comma-separated N (default 5,7,9,11,13,15)")
    p.add_argument("--quick", action="store_true", help="N = 5, 7 and the cheap solver resolution")
    p.add_argument("--resolution-check", type=int, default=None, metavar="M",
                   help="also solve at M points per axis and refit the finest grid on those data")
    p.add_argument("--keep-cache", action="store_true", help="do not delete the cache before the cold run")
    p.add_argument("--skip-warm", action="store_true", help="only the cold run")
    args = p.parse_args(argv)


    from fpirl.problems.experiment import fp_data, fp_solution, potential_errors
    from fpirl.problems.gridworld import gridworld_spec, run_gridworld

    out = Path(args.output)
    cache = out / "cache"
    elements = None if args.elements is None else [int(v) for v in args.elements.split(",")]
    if cache.exists() and not args.keep_cache:
        shutil.rmtree(cache)
    report = {"cpus": os.cpu_count(), "load_average_before": os.getloadavg()}

    t0 = time.perf_counter()
    with contextlib.redirect_stdout(sys.stderr):  # status lines to stderr, JSON to stdout
        cold = run_gridworld(out, elements=elements, quick=args.quick, progress=False, cache_dir=cache)
    report["cold_seconds"] = time.perf_counter() - t0
    report["cold_timings"] = cold["timings"]
    if not args.skip_warm:
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(sys.stderr):
            warm = run_gridworld(out, elements=elements, quick=args.quick, progress=False, cache_dir=cache)
        report["warm_seconds"] = time.perf_counter() - t0
        report["warm_timings"] = warm["timings"]
        report["warm_cache_hits"] = f"{warm['data']['cache_hits']}/{warm['data']['cache_lookups']}"
    report["load_average_after"] = os.getloadavg()
    Ns = cold["elements"]
    report["errors"] = {
        n: {kind: {k: cold["per_N"][n][kind][k] for k in
                   ("psi_error", "psi_relative_error", "grad_error", "grad_relative_error", "kl_ratio",
                    "policy_kl_mean", "fit_seconds")}
            for kind in ("fp", "mdp")}
        for n in Ns
    }
    report["slopes"] = cold["slopes"]
    report["acceptance"] = cold["acceptance"]
    report["solver"] = cold["data"]["fp_solver"]

    if args.resolution_check:
        from fpirl.estimators.identify import PotentialEstimator

        spec = gridworld_spec(quick=args.quick)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="spectral solution may be under-resolved")
            t0 = time.perf_counter()
            solver, values, info = fp_solution(spec, cache, args.resolution_check)
            solve_s = time.perf_counter() - t0
        grid = spec.grid(Ns[-1])
        snaps, _ = fp_data(grid, solver, values, spec.times)
        del values
        est = PotentialEstimator(hermite_elements=spec.hermite_elements, beta=spec.beta).fit(snaps)
        other = potential_errors(spec, est.hermite_, est.coef_, spec.grid(spec.eval_elements))
        base = cold["per_N"][Ns[-1]]["fp"]
        report["resolution_check"] = {
            "N": Ns[-1], "points_default": report["solver"]["points"], "points_other": info["points"],
            "solve_seconds_other": solve_s,
            "psi_relative_error_default": base["psi_relative_error"],
            "psi_relative_error_other": other["psi_relative_error"],
            "grad_relative_error_default": base["grad_relative_error"],
            "grad_relative_error_other": other["grad_relative_error"],
        }
    json.dump(report, sys.stdout, indent=1, default=str)
    print()


if __name__ == "__main__":
    main()
