"""The mixed-flux operator on a GPU (``device='cuda'``, CuPy) against the same operator on the CPU, same machine
(issue 20: "measure the same operator there").

Run:  PYTHONPATH=src python benchmarks/bench_device.py [--cases 5:10,6:10:cuda+cpu] [--fit cuda,cpu] [--xp numpy]

Problem: the separable periodic potential of :mod:`fpirl.weakform._separable` (as ``bench_dims.py``): ``d``
axes of ``N`` nodes, 3 Hermite elements per axis, beta = 2, 20 exact Fokker-Planck snapshots. Per case,
in this process:

* one 4096^3 float64 GEMM on the CPU (NumPy) and on the GPU (CuPy), for the ratios;
* the operator's set-up (right-hand sides, trace, POD) on the CPU and on the device, then the product
  ``A c`` three times on the CPU (the per-mode loop, the default) and five times batched on the device (the
  first fills the points cache), with the relative differences of the two set-ups and products;
* with ``--cli d:N``: ``fpirl fit FILE --device cuda`` and ``--device cpu`` on a written density file
  (wall time end to end, ψ error, the result's variables);
* with ``--fit``: whole fits (``PotentialEstimator(solver='mixed-flux', device=...)``): wall time, CG
  iterations, psi error, peak host RSS and (cuda) peak device memory.

``--xp numpy`` runs the batched product on NumPy instead of CuPy (a check of this script without a GPU).
Prints one JSON line per measurement.
"""

import argparse
import json
import os
import resource
import sys
import time

import numpy as np


def _sync(xp):
    if xp.__name__ == "cupy":
        xp.cuda.Device().synchronize()


def gemm(xp):
    a = xp.asarray(np.random.default_rng(0).standard_normal((4096, 4096)))
    a @ a
    _sync(xp)
    t0 = time.perf_counter()
    a @ a
    _sync(xp)
    return time.perf_counter() - t0


def operator_case(d, N, xp):
    from fpirl.weakform._device import BatchedMixedFlux
    from fpirl.weakform._separable import SeparableProblem
    from fpirl.weakform.matfree_mixed import MixedFluxOperator

    problem = SeparableProblem(d, hermite_elements=3, beta=2.0, dt=0.02, steps=19)
    data = problem.streaming(N).normalize()
    t0 = time.perf_counter()
    op = MixedFluxOperator(data, problem.hermite)
    setup = time.perf_counter() - t0
    c = np.random.default_rng(0).standard_normal(problem.hermite.n_coef)
    cpu = []
    for _ in range(3):
        t0 = time.perf_counter()
        ref = op.matvec(c)
        cpu.append(time.perf_counter() - t0)
    extra = {}
    if xp is np:
        batched = BatchedMixedFlux(op, xp)
    else:  # the device's own set-up (the pass over the time pairs on the GPU)
        t0 = time.perf_counter()
        dev_op = MixedFluxOperator(data, problem.hermite, device="cuda")
        _sync(xp)
        extra["setup_device_s"] = round(time.perf_counter() - t0, 2)
        extra["rhs_relative_difference"] = float(np.abs(dev_op.rhs.xtg - op.rhs.xtg).max() / np.abs(op.rhs.xtg).max())
        extra["trace_relative_difference"] = abs(dev_op.trace / op.trace - 1)
        dev_op.matvec(c)
        batched = dev_op._batched
    dev = []
    for _ in range(5):
        t0 = time.perf_counter()
        out = batched.matvec(c)
        _sync(xp)
        dev.append(time.perf_counter() - t0)
    print(json.dumps({"case": f"{d}-D operator", "nodes": int(N ** d), "n_coef": int(problem.hermite.n_coef),
                      "modes": op.n_modes, "setup_cpu_s": round(setup, 2),
                      "matvec_cpu_s": round(min(cpu[1:]), 4), "matvec_device_first_s": round(dev[0], 4),
                      "matvec_device_s": round(min(dev[1:]), 5), "speed-up": round(min(cpu[1:]) / min(dev[1:]), 1),
                      "relative_difference": float(np.abs(out - ref).max() / np.abs(ref).max()),
                      **extra, "xp": xp.__name__}), flush=True)


def fit_case(d, N, device):
    from fpirl import PotentialEstimator
    from fpirl.weakform._separable import SeparableProblem

    problem = SeparableProblem(d, hermite_elements=3, beta=2.0, dt=0.02, steps=19)
    data = problem.streaming(N)
    t0 = time.perf_counter()
    est = PotentialEstimator(hermite_elements=3, beta=problem.beta, solver="mixed-flux", device=device).fit(data)
    wall = time.perf_counter() - t0
    out = {"case": f"{d}-D fit", "device": device, "fit_s": round(wall, 2), "cg_s": round(est.cg_info_["seconds"], 2),
           "cg_iterations": est.cg_info_["iterations"], "psi_rel_error": round(problem.error(est), 5),
           "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2)}
    if device == "cuda":
        import cupy

        out["device_pool_gb"] = round(cupy.get_default_memory_pool().total_bytes() / 1e9, 2)
    print(json.dumps(out), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="5:10,6:10", help="d:N[:DEVICES][,...]; DEVICES (e.g. cuda+cpu) overrides --fit")
    ap.add_argument("--fit", default="", help="devices of whole fits, e.g. cuda,cpu (empty: none)")
    ap.add_argument("--no-operator", action="store_true", help="whole fits only")
    ap.add_argument("--cli", metavar="d:N", help="also write that density file and time `fpirl fit --device cuda` "
                    "and `--device cpu` on it (bench_dims.run_cli)")
    ap.add_argument("--xp", choices=("cupy", "numpy"), default="cupy")
    args = ap.parse_args()
    if args.xp == "cupy":
        import cupy as xp

        props = xp.cuda.runtime.getDeviceProperties(0)
        print(json.dumps({"gpu": props["name"].decode(), "cupy": xp.__version__, "cpus": os.cpu_count(),
                          "numpy": np.__version__}), flush=True)
    else:
        xp = np
    print(json.dumps({"gemm_4096_cpu_s": round(gemm(np), 3), "gemm_4096_device_s": round(gemm(xp), 4)}), flush=True)
    for case in args.cases.split(","):
        d, N, *devices = case.split(":")
        d, N = int(d), int(N)
        if not args.no_operator:
            operator_case(d, N, xp)
        for device in filter(None, devices[0].split("+") if devices else args.fit.split(",")):
            fit_case(d, N, device)
    if args.cli:
        import tempfile

        from bench_dims import run_cli

        d, N = map(int, args.cli.split(":"))
        with tempfile.TemporaryDirectory() as tmp:
            for device in ("cuda", "cpu") if xp is not np else ("cpu",):
                run_cli(d, N, 19, tmp, ["--solver", "mixed-flux", "--device", device])


if __name__ == "__main__":
    sys.exit(main())
