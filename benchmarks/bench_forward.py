"""Timing and self-consistency of the forward Fokker-Planck solvers (fpirl.forward).

Run: ``python benchmarks/bench_forward.py [--points 24 32] [--snapshots 50]``.

``--walls2d [--busy]`` (issue 20, sixteenth pass): the 2-D walled test data of ``tests/_simdensity.py``
(``[-3, 3]^2``, beta 1, 25 snapshots 0.2 apart, 141^2 finite-volume points: 14 complex sparse LU factorisations and
336 solves), three runs; ``--busy`` keeps one core busy with another process meanwhile (a shared machine). Compare
trees with ``PYTHONPATH=OTHER/src``. ``--walls2d --rtol 1e-8`` (issue 20, twenty-third pass) alternates the default
exponential (28 Talbot nodes) with the looser one (``FiniteVolumeSolver(rtol=...)``), and prints the largest
difference relative to the density's maximum.

``--lanczos`` (issue 20, twenty-fourth pass): the walled finite-volume exponential in 2-D to 4-D, the earlier
``'auto'`` choice (``'rational'`` in 2-D, ``expm_multiply`` beyond) against ``'auto'`` (now the Lanczos process in the
symmetrised variables,
:mod:`fpirl.forward._lanczos`), 10 output intervals, several betas and steps (steep potentials included, where
intervals fall back): wall seconds, the largest difference relative to each snapshot's maximum,
fallbacks, and the mass drift.

4-D periodic case: box [0, 2 pi]^4, beta = 5, dt = 0.02, psi a sum of a few trigonometric
terms with max |grad psi| ~ 3, von Mises initial bump. Reports wall time, number of IF-RK4 steps,
the resolution diagnostic and the change of the final snapshot when the step is halved.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from fpirl import Grid
from fpirl.forward import FiniteVolumeSolver, SpectralSolver, simulate_density, von_mises_bump


def potential(x):
    x0, x1, x2, x3 = (x[..., i] for i in range(4))
    return 1.2 * np.cos(x0) + 0.9 * np.sin(x1) + 0.8 * np.cos(x2 - x0) + 0.7 * np.sin(x3) + 0.4 * np.cos(x1 + x3)


def gradient(x):
    x0, x1, x2, x3 = (x[..., i] for i in range(4))
    return np.stack(
        [
            -1.2 * np.sin(x0) + 0.8 * np.sin(x2 - x0),
            0.9 * np.cos(x1) - 0.4 * np.sin(x1 + x3),
            -0.8 * np.sin(x2 - x0),
            0.7 * np.cos(x3) - 0.4 * np.sin(x1 + x3),
        ],
        axis=-1,
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, nargs="+", default=[24, 32])
    ap.add_argument("--snapshots", type=int, default=50)
    ap.add_argument("--dt", type=float, default=0.02)
    ap.add_argument("--beta", type=float, default=5.0)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--halve", action="store_true", help="also rerun with half the step (accuracy check)")
    ap.add_argument("--fv", type=int, nargs="*", default=[], help="also time the 4-D FV solver at these nodes/axis")
    ap.add_argument("--simulate", type=int, nargs="*", default=[], help="time simulate_density on N^4-element grids")
    ap.add_argument("--walls2d", action="store_true", help="time the 2-D walled finite-volume run of the tests")
    ap.add_argument("--busy", action="store_true", help="with --walls2d: one core kept busy by another process")
    ap.add_argument("--rtol", type=float, default=None, help="with --walls2d: also time the solver at this rtol")
    ap.add_argument("--lanczos", action="store_true", help="time expm against lanczos on walled 3-D and 4-D grids")
    args = ap.parse_args()
    if args.lanczos:
        return lanczos_vs_expm()
    if args.walls2d:
        return walls_2d(args.busy, args.rtol)
    lo, hi = np.zeros(4), np.full(4, 2 * np.pi)
    times = args.dt * np.arange(args.snapshots + 1)
    init = von_mises_bump(lo, hi, [1.0, 2.0, 3.0, 4.0], 2.0)
    for m in args.points:
        t0 = time.perf_counter()
        s = SpectralSolver(lo, hi, m, gradient, args.beta, workers=args.workers)
        out = s.solve(init, times)
        wall = time.perf_counter() - t0
        gmax = np.linalg.norm(gradient(s.mesh()), axis=-1).max()
        print(
            f"spectral {m}^4: {wall:.1f} s, {s.steps_taken} IF-RK4 steps (max_step {s.max_step:.2e}), "
            f"max|grad psi| {gmax:.2f}, tail ratio {s.tail_ratio:.1e}, mass err {abs(s.mass(out) - 1).max():.1e}, "
            f"min {out.min():.1e}"
        )
        if args.halve:
            s2 = SpectralSolver(lo, hi, m, gradient, args.beta, max_step=s.max_step / 2, workers=args.workers)
            out2 = s2.solve(init, times)
            print(f"   half step: max |diff| / max {np.abs(out2 - out).max() / out.max():.1e}")
    for n in args.simulate:
        for boundary in ("periodic", "reflecting"):
            grid = Grid(lo, hi, n, boundary=boundary)
            t0 = time.perf_counter()
            out = simulate_density(grid, potential, gradient, args.beta, init, times)
            print(
                f"simulate_density {boundary} {n}^4 elements -> {out.shape}: {time.perf_counter() - t0:.1f} s, "
                f"mass {grid.integrate(out).min():.12f}..{grid.integrate(out).max():.12f}"
            )
    for m in args.fv:
        t0 = time.perf_counter()
        f = FiniteVolumeSolver(lo, hi, m, potential, args.beta)
        out = f.solve(init, times)
        wall = time.perf_counter() - t0
        print(f"finite volume {m}^4 ({f.method}): {wall:.1f} s, mass err {abs(f.mass(out) - 1).max():.1e}")


def lanczos_vs_expm() -> None:
    """``'expm'`` against ``'auto'`` (Lanczos) on walled boxes ``[-1, 1]^d`` (module doc)."""

    def psi(x):
        return (0.6 * np.cos(2.5 * x[..., 0] + 0.3) + 0.35 * np.cos(2 * x[..., 1] - 0.7)
                + 0.3 * np.sin(2 * x[..., 0]) * np.sin(3 * x[..., -1]))

    def init(x):
        return np.exp(-np.sum((x - 0.3) ** 2, -1) / 0.1)

    print("| d | points | beta | dt | beta range(psi) | \\|L\\|_1 dt | before s (method) | auto s (method) | "
          "max rel. diff | fallbacks | mass drift |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for d, m, beta, dt in [(2, 97, 4.0, 0.02), (2, 161, 5.0, 0.5), (2, 65, 20.0, 0.02), (3, 49, 4.0, 0.02),
                           (3, 31, 0.5, 0.2), (3, 31, 8.0, 0.02), (3, 41, 15.0, 0.05), (4, 20, 5.0, 0.02),
                           (4, 16, 1.0, 0.1)]:
        times = dt * np.arange(11)
        runs = {}
        before = "rational" if d == 2 else "expm"  # the earlier 'auto' choice
        for method in (before, "auto"):
            t0 = time.perf_counter()
            f = FiniteVolumeSolver([-1.0] * d, [1.0] * d, m, psi, beta, method=method)
            runs[method] = (f, f.solve(init, times), time.perf_counter() - t0)
        (_, a, te), (fa, b, ta) = runs[before], runs["auto"]
        diff = max(np.abs(a[k] - b[k]).max() / np.abs(a[k]).max() for k in range(len(times)))
        drift = float(np.abs(fa.mass(b) - fa.mass(b[0])).max())
        print(f"| {d} | {m}^{d} | {beta:g} | {dt:g} | {beta * np.ptp(fa.psi):.1f} | {fa._norm1 * dt:.0f} | {te:.2f} ({before}) | "
              f"{ta:.2f} ({fa.method}) | {diff:.1e} | {fa.lanczos_fallbacks} | {drift:.0e} |", flush=True)


def _spin(stop):
    while not stop.is_set():
        pass


def walls_2d(busy: bool, rtol=None) -> None:
    """Three runs of the 2-D walled finite-volume data (module doc), wall seconds each (``rtol``: each run also at
    that accuracy, and the difference)."""
    import multiprocessing as mp

    w = np.pi / 3

    def psi(x):
        u = (x + 3.0) * w
        return 0.6 * np.cos(u[..., 0] + 0.3) + 0.35 * np.cos(u[..., 1] - 0.7) + 0.3 * np.sin(u[..., 0]) * np.sin(u[..., 1])

    grid = Grid([-3, -3], [3, 3], 28, boundary="reflecting")
    times = 0.2 * np.arange(25)
    stop = mp.Event()
    spinner = mp.Process(target=_spin, args=(stop,), daemon=True) if busy else None
    if spinner:
        spinner.start()
    try:
        for _ in range(3):
            ref = None
            for tol in (None,) if rtol is None else (None, rtol):
                t0 = time.perf_counter()
                s = FiniteVolumeSolver(grid.lower, grid.upper, 141, psi, 1.0, rtol=tol)
                out = s.solve(von_mises_bump(grid.lower, grid.upper, [0.9, -1.2], 1.0), times)
                diff = "" if ref is None else f", max |diff| / max {np.abs(out - ref).max() / ref.max():.1e}"
                ref = out if ref is None else ref
                print(f"walls 2-D, 141^2 points, 25 snapshots{' (one core busy)' if busy else ''}, rtol {tol}: "
                      f"{time.perf_counter() - t0:.2f} s, mass err {abs(s.mass(out) - 1).max():.1e}{diff}", flush=True)
    finally:
        stop.set()
        if spinner:
            spinner.join()


if __name__ == "__main__":
    main()
