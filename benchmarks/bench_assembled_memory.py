"""Peak memory of the assembled fit against its estimate (issue 20, fourteenth pass): the data of
:func:`fpirl.estimators._solvers.assembled_bytes`, the rule by which ``solver='auto'`` leaves the assembled path.

Run:  PYTHONPATH=src python benchmarks/bench_assembled_memory.py [--cases 3:64:6:10,4:15:4:20,...]

Each case ``d:N:E:K`` (axes, nodes per axis, Hermite elements per axis, snapshots) runs in a fresh process: periodic
Fokker-Planck snapshots from the spectral solver with 2% noise (``bench_uncertainty._fp_snapshots``), then
``PotentialEstimator(hermite_elements=E, beta=5, solver='assembled').fit``. Prints per case the peak resident memory of
the fit above the process's own before it (``ru_maxrss``), the estimate, and the fit's wall time.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = "2:128:16:20,3:40:8:20,3:64:6:10,3:64:6:20,3:64:6:60,4:15:4:20,4:15:4:50,4:20:4:20,4:24:3:20"


def child(d, n, el, k):
    import warnings

    warnings.simplefilter("ignore")
    sys.path.insert(0, HERE)
    import bench_uncertainty as bu

    from fpirl import PotentialEstimator
    from fpirl.core.hermite import HermiteSpace
    from fpirl.estimators._solvers import assembled_bytes

    roles = ("state",) * (d // 2) + ("action",) * (d - d // 2)
    snaps = bu._fp_snapshots(d, n, k, noise=0.02, names=tuple(f"x{i}" for i in range(d)), roles=roles)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    t = time.perf_counter()
    PotentialEstimator(hermite_elements=el, beta=5.0, solver="assembled").fit(snaps)
    wall = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    h = HermiteSpace.on_grid(snaps.grid, (el,) * d)
    print(json.dumps({"case": f"{d}:{n}:{el}:{k}", "nodes": snaps.grid.size, "n_coef": h.n_coef,
                      "fit_gb": round(peak - base, 3), "estimate_gb": round(assembled_bytes(snaps.grid, h, k) / 1e9, 3),
                      "seconds": round(wall, 1)}), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default=CASES)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(*map(int, args.child.split(":")))
    for case in args.cases.split(","):
        out = subprocess.run([sys.executable, __file__, "--child", case], capture_output=True, text=True, timeout=1800)
        print(out.stdout.strip() or f"{case}: failed: {out.stderr.strip().splitlines()[-1:]}", flush=True)


if __name__ == "__main__":
    main()
