"""Time and memory of the fit against the dimension d = 2..6 (issue 12): assembled, exact matrix-free
and the flux-quadrature matrix-free paths (interpolated-flux, gauss-flux, mixed-flux; ``solver`` of a
case may also be ``auto``: the path the estimator picks by itself, as ``fpirl fit`` does).

Run:  .venv/bin/python benchmarks/bench_dims.py [-o benchmarks/results] [--cases 2:10:assembled,5:12:matrix-free,...]
      (a case ``d:N:matvec`` times only the matrix-free set-up and three products, e.g. 6:8:matvec;
      ``matvec-interpolated-flux``, ``matvec-gauss-flux`` and ``matvec-mixed-flux`` the same for those
      operators; ``d:N:rule-DER-TRANS`` fits with ``solver='mixed-flux'`` and the flux rules DER (nodal|gauss)
      along the derivative axis, TRANS (nodal|corrected|gauss) across it; ``0:0:gemm`` times one 4096^3
      float64 GEMM in its own process, for the ratios)
      --cli 6:10: write the 6-D density file (3 state + 3 action axes) and time ``fpirl fit`` on it
      [--scheduler local|tcp://HOST:PORT]: the cases run as Dask tasks (fpirl.distributed.sweep),
      each still in a fresh process on its worker; cases running side by side share the machine,
      so compare timings only from runs with one case at a time (the default)

Problem: the separable periodic potential of :mod:`fpirl.weakform._separable` (psi = sum_b a_b cos(pi x_b +
phi_b), Hermite-interpolated with 3 elements per axis), beta = 2, a product start, 20 snapshots
(dt = 0.02) whose exact Fokker-Planck solution is the product of accurate 1-D spectral solutions.
Each case runs in a fresh process (peak RSS is its own); the snapshots are formed lazily, one chunk
of times at a time, so the data never sit in memory whole. Prints one JSON line per case and writes
``dims.json`` and ``dims.png`` (wall time and peak RSS against d) to the output folder.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time


def run_gemm():
    import numpy as np

    a = np.random.default_rng(0).standard_normal((4096, 4096))
    a @ a  # warm-up (threads, pages)
    t0, c0 = time.perf_counter(), time.process_time()
    a @ a
    print(json.dumps({"d": 0, "nodes_per_axis": 0, "solver": "gemm", "gemm_s": time.perf_counter() - t0,
                      "gemm_cpu_s": time.process_time() - c0, "load_1min": os.getloadavg()[0]}), flush=True)


def run_case(d, N, solver, steps):
    from fpirl import PotentialEstimator
    from fpirl.weakform._separable import SeparableProblem

    if solver == "gemm":
        return run_gemm()
    if solver.startswith("rule-"):  # the mixed flux with other per-axis rules (experiments)
        import functools

        from fpirl.estimators import identify
        from fpirl.weakform.matfree_mixed import MixedFluxOperator

        derivative, transverse = solver[5:].split("-")
        identify.MixedFluxOperator = functools.partial(MixedFluxOperator, derivative=derivative,
                                                       transverse=transverse)
        rule, solver = solver, "mixed-flux"
    else:
        rule = None
    t0 = time.perf_counter()
    problem = SeparableProblem(d, hermite_elements=3, beta=2.0, dt=0.02, steps=steps)
    data = problem.streaming(N)
    if solver.startswith("matvec"):  # the cost of a matrix-free operator: set-up and one product A c
        import numpy as np

        from fpirl.weakform.matfree import NormalOperator
        from fpirl.weakform.matfree_flux import FluxOperator
        from fpirl.weakform.matfree_gauss import GaussFluxOperator
        from fpirl.weakform.matfree_mixed import MixedFluxOperator

        operator = {"matvec": NormalOperator, "matvec-interpolated-flux": FluxOperator,
                    "matvec-gauss-flux": GaussFluxOperator, "matvec-mixed-flux": MixedFluxOperator}[solver]
        c0, t0 = time.process_time(), time.perf_counter()
        op = operator(data.normalize(), problem.hermite)
        setup = (time.perf_counter() - t0, time.process_time() - c0)
        times = []  # the first product may fill caches (the mixed flux's densities at its points)
        for _ in range(3):
            c0, t0 = time.process_time(), time.perf_counter()
            op.matvec(np.random.default_rng(0).standard_normal(problem.hermite.n_coef))
            times.append((time.perf_counter() - t0, time.process_time() - c0))
        print(json.dumps({"d": d, "nodes_per_axis": N, "nodes": int(N**d), "n_coef": problem.hermite.n_coef,
                          "solver": solver, "modes": op.n_modes, "setup_s": setup[0], "setup_cpu_s": setup[1],
                          "first_matvec_s": times[0][0], "matvec_s": min(t[0] for t in times[1:]),
                          "matvec_cpu_s": min(t[1] for t in times[1:]),
                          "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,
                          "load_1min": os.getloadavg()[0]}), flush=True)
        return
    if solver == "assembled":
        from fpirl import DensitySnapshots

        data = DensitySnapshots(data.grid, data.times, data.values[0 : data.n_times])
    t_data = time.perf_counter() - t0
    c0, t0 = time.process_time(), time.perf_counter()
    est = PotentialEstimator(hermite_elements=3, beta=problem.beta, solver=solver).fit(data)  # default CG tolerances
    out = {
        "d": d, "nodes_per_axis": N, "nodes": int(N**d), "n_coef": int(est.hermite_.n_coef), "snapshots": steps + 1,
        "solver": rule or est.solver_, "fit_s": time.perf_counter() - t0, "fit_cpu_s": time.process_time() - c0,
        "data_s": t_data, "psi_rel_error": problem.error(est),
        "cg_iterations": est.cg_info_["iterations"] if est.cg_info_ else None, "asked": rule or solver,
        "matvecs": est.cg_info_["matvecs"] if est.cg_info_ else None,
        "cg_s": est.cg_info_["seconds"] if est.cg_info_ else None,
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,
        "load_1min": os.getloadavg()[0],
    }
    print(json.dumps(out), flush=True)


def run_cli(d, N, steps, folder, extra=()):
    """The user's path: write a d-D density file (state and action axes), then time ``fpirl fit`` on it
    with default options (the path, CG tolerance, MDP recovery and uncertainty as the CLI picks them)
    and the options ``extra``."""
    from fpirl import DensitySnapshots, Grid
    from fpirl.weakform._separable import SeparableProblem
    from fpirl.io import read_result, write_density

    problem = SeparableProblem(d, hermite_elements=3, beta=2.0, dt=0.02, steps=steps)
    data = problem.streaming(N)
    half = d // 2
    grid = Grid([-1.0] * d, [1.0] * d, N, names=[f"s{b}" for b in range(half)] + [f"a{b}" for b in range(d - half)],
                roles=["state"] * half + ["action"] * (d - half))
    path, out = os.path.join(folder, f"density_{d}d.nc"), os.path.join(folder, f"fit_{d}d.nc")
    if not os.path.exists(path):
        write_density(path, DensitySnapshots(grid, data.times, data.values[0 : data.n_times]))
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "fpirl.cli", "fit", path, "-o", out, "--beta", "2",
                          "--hermite-elements", "3", "--no-progress", *extra], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"fpirl fit failed: {res.stderr.strip()}")
    ds = read_result(out)

    class Fitted:  # what problem.error needs
        hermite_ = problem.hermite
        coef_ = ds["hermite_coefficients"].values

    print(res.stdout.strip())
    print(json.dumps({"d": d, "nodes_per_axis": N, "cli_wall_s": wall, "solver": ds.attrs["solver_solver"],
                      "options": " ".join(extra), "device": ds.attrs.get("solver_device", "cpu"),
                      "psi_rel_error": problem.error(Fitted),
                      "cli_peak_rss_gb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1e6,
                      "variables": sorted(ds.data_vars), "load_1min": os.getloadavg()[0]}), flush=True)


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for solver, marker in (("assembled", "s"), ("matrix-free", "o"), ("interpolated-flux", "^"), ("gauss-flux", "v"),
                           ("mixed-flux", "D")):
        rows = sorted((r for r in results if r["solver"] == solver), key=lambda r: r["d"])
        if not rows:
            continue
        label = lambda r: f"{r['nodes_per_axis']}"  # noqa: E731
        for ax, key, unit in ((axes[0], "fit_s", "fit wall time [s]"), (axes[1], "peak_rss_gb", "peak RSS [GB]"),
                              (axes[2], "psi_rel_error", "psi relative L2 error")):
            ax.semilogy([r["d"] for r in rows], [r[key] for r in rows], marker=marker, label=solver)
            for r in rows:
                ax.annotate(label(r), (r["d"], r[key]), textcoords="offset points", xytext=(4, 4), fontsize=7)
            ax.set_xlabel("dimension d (nodes per axis annotated)")
            ax.set_xticks(range(2, 7))
            ax.set_ylabel(unit)
    axes[0].legend()
    loads = [r["load_1min"] for r in results]
    fig.suptitle("fpirl fit: separable periodic psi, 3 Hermite elements/axis, 20 snapshots "
                 f"(2 shared cores, load {min(loads):.1f}-{max(loads):.1f})", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def case_in_fresh_process(task):
    """Run one case ``(case, steps, timeout)`` in a fresh process: ``(case, row or None)``, the row printed."""
    case, steps, timeout = task
    try:
        res = subprocess.run([sys.executable, __file__, "--case", case, "--steps", str(steps)],
                             capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        print(case, "timed out", flush=True)
        return case, None
    if res.returncode != 0:
        print(case, "failed:", res.stderr.strip().splitlines()[-1:], flush=True)
        return case, None
    row = json.loads(res.stdout.strip().splitlines()[-1])
    print(case, json.dumps(row), flush=True)
    return case, row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", help="d:N:solver (internal)")
    ap.add_argument("--steps", type=int, default=19)
    ap.add_argument("--cases", default="2:10:assembled,3:10:assembled,4:10:assembled,2:10:matrix-free,"
                    "3:10:matrix-free,4:10:matrix-free,5:8:matrix-free,2:10:interpolated-flux,"
                    "3:10:interpolated-flux,4:10:interpolated-flux,5:10:interpolated-flux,"
                    "5:12:interpolated-flux,6:10:auto")
    ap.add_argument("-o", "--output", default="benchmarks/results")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--scheduler", metavar="local|tcp://HOST:PORT", help="run the cases as Dask tasks")
    ap.add_argument("--cli", metavar="d:N", help="time `fpirl fit` on a written d-D density file instead")
    args = ap.parse_args()
    if args.cli:
        d, N = args.cli.split(":")
        os.makedirs(args.output, exist_ok=True)
        return run_cli(int(d), int(N), args.steps, args.output)
    if args.case:
        d, N, solver = args.case.split(":")
        return run_case(int(d), int(N), solver, args.steps)
    os.makedirs(args.output, exist_ok=True)
    from fpirl.distributed import sweep

    tasks = [(case, args.steps, args.timeout) for case in args.cases.split(",")]
    done = sweep(case_in_fresh_process, tasks, scheduler=args.scheduler)
    results = [row for _, row in done if row is not None and not row["solver"].startswith(("matvec", "gemm"))]
    with open(os.path.join(args.output, "dims.json"), "w") as f:
        json.dump(results, f, indent=1)
    if results:
        plot(results, os.path.join(args.output, "dims.png"))


if __name__ == "__main__":
    main()
