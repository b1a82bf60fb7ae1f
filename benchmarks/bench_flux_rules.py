"""psi error of the flux quadratures on a *coupled* (non-separable) potential, d = 2..4 (issue 20).

For the separable potential of ``bench_dims.py`` the gradient ``d_a psi`` is constant across the
other axes, so every transverse rule of :mod:`fpirl.weakform.matfree_mixed` is exact there; this
problem couples the axes, ``psi = sum_b a_b cos(pi x_b + phi_b) + kappa sum_{b < b'} sin(pi x_b +
phi_b') cos(pi x_b' - phi_b)`` (Hermite-interpolated with 3 elements per axis, so representable), on
``[-1, 1]^d`` periodic, beta = 2, 20 snapshots (dt = 0.02) of a Fourier pseudo-spectral solution
(:class:`fpirl.forward.SpectralSolver`, ``R^d`` points) from a von Mises bump, sampled at the FE nodes.

Run:  PYTHONPATH=src .venv/bin/python benchmarks/bench_flux_rules.py [--cases 2:10,3:10] [--solvers ...]
      (solvers: assembled, interpolated-flux, gauss-flux, mixed-flux and ``rule-DER-TRANS`` as in bench_dims.py)
Prints one JSON line per fit: psi's relative L2 error and, after an ``assembled`` fit (the exact
quadrature), the distance of each fit's psi to that one relative to psi (the quadrature's own share).
"""

import argparse
import functools
import json
import os
import time

import numpy as np

AMPS, PHASES = (0.6, 0.45, 0.5, 0.35), (0.3, -0.7, 1.1, 2.0)


def terms(d, kappa):
    """``psi`` as a sum of products of 1-D functions: ``[(factor, {axis: (f, f')})]``."""
    out = []
    for b in range(d):
        a, ph = AMPS[b], PHASES[b]
        out.append((a, {b: (lambda x, ph=ph: np.cos(np.pi * x + ph), lambda x, ph=ph: -np.pi * np.sin(np.pi * x + ph))}))
    for b in range(d):
        for c in range(b + 1, d):
            p, q = PHASES[c], -PHASES[b]
            out.append((kappa, {b: (lambda x, p=p: np.sin(np.pi * x + p), lambda x, p=p: np.pi * np.cos(np.pi * x + p)),
                                c: (lambda x, q=q: np.cos(np.pi * x + q), lambda x, q=q: -np.pi * np.sin(np.pi * x + q))}))
    return out


def problem(d, R, kappa, beta=2.0, steps=19, dt=0.02):
    from fpirl import HermiteSpace
    from fpirl.forward import SpectralSolver, von_mises_bump

    H = HermiteSpace([-1.0] * d, [1.0] * d, 3, True)
    tt = terms(d, kappa)

    def derivative(points, alpha):
        total = np.zeros(points.shape[:-1])
        for fac, funcs in tt:
            val = np.full(points.shape[:-1], fac)
            for b in range(d):
                if b in funcs:
                    val = val * funcs[b][alpha[b]](points[..., b])
                elif alpha[b]:
                    val = val * 0.0
            total += val
        return total

    coef = H.interpolate(derivative)
    grad = lambda x: H.gradient(coef, x)  # noqa: E731
    solver = SpectralSolver([-1.0] * d, [1.0] * d, R, grad, beta)
    init = von_mises_bump([-1.0] * d, [1.0] * d, [0.4, -0.3, 0.2, -0.5][:d], 1.5)
    times = dt * np.arange(steps + 1)
    return H, coef, solver, solver.solve(init, times), times


def error(H, coef, est_coef):
    """Relative L2 distance (means removed) of the fitted psi (coefficients ``est_coef``) to ``coef``'s."""
    n = int(max(6, min(40, round(4e6 ** (1.0 / H.ndim)))))
    x = -1.0 + (np.arange(n) + 0.37) * 2.0 / n
    true, fit = H.evaluate_grid(coef, [x] * H.ndim), H.evaluate_grid(est_coef, [x] * H.ndim)
    diff = (fit - fit.mean()) - (true - true.mean())
    return float(np.sqrt(np.mean(diff**2)) / true.std())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="2:10,3:10", help="d:N[,...]")
    ap.add_argument("--solvers", default="assembled,interpolated-flux,rule-gauss-nodal,mixed-flux,gauss-flux")
    ap.add_argument("--kappa", type=float, default=0.4)
    ap.add_argument("--resolution", type=int, default=None, help="spectral points per axis (default 64, 32 in 3-D, 16 in 4-D)")
    args = ap.parse_args()
    from fpirl import DensitySnapshots, Grid, PotentialEstimator
    from fpirl.estimators import identify
    from fpirl.weakform.matfree_mixed import MixedFluxOperator

    original = identify.MixedFluxOperator
    for case in args.cases.split(","):
        d, N = (int(v) for v in case.split(":"))
        R = args.resolution or {2: 64, 3: 32}.get(d, 16)
        H, coef, solver, values, times = problem(d, R, args.kappa)
        grid = Grid([-1.0] * d, [1.0] * d, N, boundary="periodic")
        data = DensitySnapshots(grid, times, np.clip(solver.evaluate(values, grid.coords), 0.0, None))
        exact = None
        for name in args.solvers.split(","):
            identify.MixedFluxOperator = original
            solver_name = name
            if name.startswith("rule-"):
                der, trans = name[5:].split("-")
                identify.MixedFluxOperator = functools.partial(original, derivative=der, transverse=trans)
                solver_name = "mixed-flux"
            t0 = time.perf_counter()
            est = PotentialEstimator(hermite_elements=3, beta=2.0, solver=solver_name).fit(data)
            fit_s = time.perf_counter() - t0
            if name == "assembled":
                exact = est.coef_
            print(json.dumps({"d": d, "nodes_per_axis": N, "kappa": args.kappa, "spectral_points": R, "solver": name,
                              "psi_rel_error": error(H, coef, est.coef_), "fit_s": fit_s,
                              # the quadrature's own share: distance to the exact quadrature's psi, relative to psi
                              "to_exact": None if exact is None else error(H, coef, est.coef_ - exact + coef),
                              "cg_iterations": est.cg_info_["iterations"] if est.cg_info_ else None,
                              "load_1min": os.getloadavg()[0]}), flush=True)


if __name__ == "__main__":
    main()
