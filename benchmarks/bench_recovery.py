"""Accuracy of the potential recovery from independent forward-solver data.

Run:  .venv/bin/python benchmarks/bench_recovery.py

For each case (dimension, boundary) prints the relative L2 errors of psi and grad psi per FE
resolution N, the fitted log-log slope, and beta estimated jointly on the finest grid. The same
problems are asserted on in tests/test_identify.py.
"""

import time
import warnings

import numpy as np

from fpirl import PotentialEstimator
from fpirl.problems.synthetic import Problem

CASES = [
    (1, "periodic", [8, 16, 32, 64], dict(dt=0.005, steps=40)),
    (1, "reflecting", [8, 16, 32, 64], dict(dt=0.005, steps=40, resolution=513)),
    (2, "periodic", [8, 16, 32, 64], {}),
    (2, "reflecting", [8, 16, 32], dict(resolution=97)),
    (3, "periodic", [6, 12, 24], {}),
    (3, "reflecting", [6, 12, 24], dict(resolution=49)),
]


def main():
    print("| d | boundary | N | psi rel. L2 | grad psi rel. L2 | slope psi | slope grad | beta (true 4) |")
    print("|---|---|---|---|---|---|---|---|")
    for d, boundary, Ns, options in CASES:
        t0 = time.perf_counter()
        problem = Problem(d, boundary, **options)
        errs = []
        for N in Ns:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = PotentialEstimator(hermite_elements=3, beta=problem.beta).fit(problem.snapshots(N))
            errs.append(problem.errors(est))
        errs = np.array(errs)
        slopes = [-np.polyfit(np.log(Ns), np.log(errs[:, i]), 1)[0] for i in (0, 1)]
        beta = PotentialEstimator(hermite_elements=3, estimate_beta=True).fit(problem.snapshots(Ns[-1])).beta_
        cells = " / ".join(f"{N}" for N in Ns)
        e0 = " / ".join(f"{100 * e:.2f}%" for e in errs[:, 0])
        e1 = " / ".join(f"{100 * e:.2f}%" for e in errs[:, 1])
        print(f"| {d} | {boundary} | {cells} | {e0} | {e1} | {slopes[0]:.2f} | {slopes[1]:.2f} | {beta:.4f} |"
              f"  <!-- {time.perf_counter() - t0:.1f} s -->", flush=True)


if __name__ == "__main__":
    main()
