"""Speed of ``HermiteSpace.gradient`` at scattered points against one ``evaluate`` per partial derivative.

Run:  PYTHONPATH=src .venv/bin/python benchmarks/bench_hermite_gradient.py [--points 2000] [--repeat 20]

The gradient is what the SDE samplers call at every step (``fpirl.forward.markov.sample_sde``, the parametric
bootstrap's replicate tables). It gathers the ``4^d`` local coefficients of every point once and contracts
them axis by axis; the reference evaluates each partial on its own (``d`` gathers). Prints the time per call and
the largest difference between the two.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from fpirl.core.hermite import HermiteSpace


def per_partial(space, coef, x):
    d = space.ndim
    return np.stack([space.evaluate(coef, x, tuple(int(b == a) for b in range(d))) for a in range(d)], axis=-1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print("| d | Hermite elements | periodic | gradient ms | one evaluate per partial ms | speed-up | max difference |")
    print("|---|---|---|---|---|---|---|")
    for d, elements, periodic in ((2, 4, True), (3, 3, False), (4, 2, True), (4, 4, False)):
        space = HermiteSpace(-np.ones(d), np.ones(d), elements, periodic)
        coef = rng.standard_normal(space.shape)
        x = rng.uniform(-1, 1, (args.points, d))
        times = []
        for f in (space.gradient, lambda c, p: per_partial(space, c, p)):
            f(coef, x)
            t = time.perf_counter()
            for _ in range(args.repeat):
                f(coef, x)
            times.append(1e3 * (time.perf_counter() - t) / args.repeat)
        diff = np.abs(space.gradient(coef, x) - per_partial(space, coef, x)).max()
        print(f"| {d} | {elements} | {periodic} | {times[0]:.2f} | {times[1]:.2f} | {times[1] / times[0]:.1f}x | "
              f"{diff:.1e} |")


if __name__ == "__main__":
    main()
