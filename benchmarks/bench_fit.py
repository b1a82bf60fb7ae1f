"""Speed and memory of the VSI fit (issue: core engine).

Run:  .venv/bin/python benchmarks/bench_fit.py [--quick] [--cases fit4d,fit4d_beta,...]

Cases (each in a fresh subprocess so that peak RSS is its own):
* 4-D, 15 elements per axis (15^4 nodes), 4 Hermite elements per axis (4,096 coefficients), 50 snapshots
* 3-D, 50^3 nodes, 8 Hermite elements per axis (4,096 coefficients), 50 snapshots
* the dense column-by-column reference assembly vs the sum-factorised one at a small size
* fit4d_beta: the 4-D case with beta estimated; fit4d_mf: the 4-D case on the matrix-free path

Each line reports wall and CPU seconds of the process (CPU counts both BLAS threads) and the
1-minute load average at the end: the machine is shared, so compare runs at similar load.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np


def smooth_snapshots(d, elements, n_times, seed=0, **grid_kw):
    """A smooth periodic density on ``[-1, 1]^d`` (``grid_kw``: names, roles of the grid's axes)."""
    from fpirl import DensitySnapshots, Grid

    rng = np.random.default_rng(seed)
    grid = Grid([-1.0] * d, [1.0] * d, elements, **grid_kw)
    mesh = grid.mesh()
    k = rng.integers(-2, 3, size=(6, d))
    phase = rng.uniform(0, 2 * np.pi, 6)
    base = 1.5 + sum(0.2 * np.cos(np.pi * mesh @ kk + ph) for kk, ph in zip(k, phase))
    t = np.linspace(0, 1, n_times)[:, None]
    values = base[None] * (1 + 0.1 * np.sin(3 * t).reshape((-1,) + (1,) * d) * np.cos(np.pi * mesh[..., 0])[None])
    return DensitySnapshots(grid, np.arange(n_times) * 0.02, values)


def run_case(name):
    from fpirl import HermiteSpace, PotentialEstimator
    from fpirl.weakform._reference import reference_normal_equations
    from fpirl.weakform.assembly import assemble_normal_equations

    c0 = time.process_time()
    if name in ("fit4d", "fit4d_beta", "fit4d_mf"):
        s = smooth_snapshots(4, 15, 50)
        kw = {"estimate_beta": True} if name == "fit4d_beta" else {"beta": 5.0}
        if name == "fit4d_mf":
            kw["solver"] = "matrix-free"
        t0 = time.perf_counter()
        est = PotentialEstimator(hermite_elements=4, **kw).fit(s)
        out = {"seconds": time.perf_counter() - t0, "n_coef": 8**4, "nodes": 15**4, "solver": est.solver_}
        if est.cg_info_:
            out["cg_iterations"] = est.cg_info_["iterations"]
        if name == "fit4d":  # the assembly alone (after the fit has been freed: peak RSS stays the fit's)
            out["fit_peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
            hermite = est.hermite_
            del est
            t0 = time.perf_counter()
            assemble_normal_equations(s.normalized(), hermite)
            out["assembly_s"] = time.perf_counter() - t0
    elif name == "fit3d":
        s = smooth_snapshots(3, 50, 50)
        t0 = time.perf_counter()
        PotentialEstimator(hermite_elements=8, beta=5.0).fit(s)
        out = {"seconds": time.perf_counter() - t0, "n_coef": 16**3, "nodes": 50**3}
    elif name.startswith("reference"):
        d, N, nh, K = {"reference": (3, 8, 2, 10), "reference2d": (2, 24, 4, 20),
                       "reference3d": (3, 12, 3, 20)}[name]
        s = smooth_snapshots(d, N, K)
        H = HermiteSpace.on_grid(s.grid, nh)
        t0 = time.perf_counter()
        ref = reference_normal_equations(s, H)
        t_ref = time.perf_counter() - t0
        t0 = time.perf_counter()
        fast = assemble_normal_equations(s, H)
        t_fast = time.perf_counter() - t0
        err = float(np.abs(ref.xtx - fast.xtx).max() / np.abs(ref.xtx).max())
        out = {"reference_s": t_ref, "fast_s": t_fast, "speedup": t_ref / t_fast, "max_rel_diff": err,
               "d": d, "elements": N, "hermite": nh, "snapshots": K}
    else:
        raise SystemExit(f"unknown case {name}")
    out["cpu_s"] = time.process_time() - c0
    out["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    out["load_1min"] = os.getloadavg()[0]
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case")
    ap.add_argument("--quick", action="store_true", help="only the reference comparison")
    ap.add_argument("--cases", help="comma-separated cases (default: all but fit4d_beta, fit4d_mf)")
    args = ap.parse_args()
    if args.case:
        return run_case(args.case)
    cases = ["reference", "reference2d"] + ([] if args.quick else ["reference3d", "fit4d", "fit3d"])
    if args.cases:
        cases = args.cases.split(",")
    for c in cases:
        res = subprocess.run([sys.executable, __file__, "--case", c], capture_output=True, text=True, check=True)
        print(c, res.stdout.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
