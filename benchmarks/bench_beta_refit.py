"""psi refitted at ``beta_corrected`` (issue 20, seventh pass): would correcting beta's point estimate help psi?

Run:  OMP_NUM_THREADS=2 PYTHONPATH=src python benchmarks/bench_beta_refit.py [--cases 0,1,...] [--noise 0,0.01,0.02,0.05]

The cases of ``bench_beta_coarse.py`` (independent-solver density data, 14 potentials and grids), times
``1 + noise eps`` (seed 1), beta estimated at 4 and 6 Hermite elements (the library's default fit). Per fit: the
raw beta and the posterior's ``beta_corrected`` (:func:`fpirl.uncertainty.posterior`), psi's relative L2 error
(zero-mean, grid quadrature) of the fit, of the same fit with beta fixed at ``beta_corrected``, and with beta fixed
at the truth; whether the fit estimated beta on block means (``beta_coarsening_``); and the significance
``z = |gamma_c - gamma| / sd`` of the correction (the posterior's ``beta_correction_z``: ``sd`` the snapshot-noise
std of ``gamma = 1/beta``, its noise columns only). Then, per noise level, the gated rule "use ``beta_corrected`` (and refit psi) where
``z > T``" for several thresholds ``T``.
"""

import argparse
import json
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_beta_coarse  # noqa: E402
import bench_beta_rule  # noqa: E402

THRESHOLDS = (None, 2, 4, 8, 16, 0)


def _truth(name, grid):
    c = bench_beta_coarse.CASES[name]()
    X = np.stack(np.meshgrid(*grid.coords, indexing="ij"), -1)
    if not isinstance(c, str):
        return c["psi"](X)
    from fpirl.core.hermite import HermiteSpace
    from fpirl.problems.synthetic import smooth_function

    f = smooth_function(2, True)
    if c == "trig":
        return f(X, (0, 0))
    h6 = HermiteSpace([-1, -1], [1, 1], 6, True)
    return h6.evaluate(h6.interpolate(f), X.reshape(-1, 2)).reshape(X.shape[:-1])


def _error(grid, est, true):
    v = est.hermite_.evaluate_grid(est.coef_, grid.coords)
    one = np.ones_like(v)
    v, t = v - grid.integrate(v) / grid.integrate(one), true - grid.integrate(true) / grid.integrate(one)
    return float(np.sqrt(grid.integrate((v - t) ** 2) / grid.integrate(t ** 2)))


def main():
    from fpirl import DensitySnapshots, PotentialEstimator
    from fpirl.uncertainty import posterior

    bench_beta_rule.CASES = bench_beta_coarse.CASES  # _clean reads its module's table
    names = list(bench_beta_coarse.CASES)
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default=",".join(str(i) for i in range(len(names))))
    ap.add_argument("--noise", default="0,0.01,0.02,0.05")
    args = ap.parse_args()
    rows = []
    for i in map(int, args.cases.split(",")):
        grid, times, clean, beta = bench_beta_rule._clean(names[i])
        true = _truth(names[i], grid)
        for noise in map(float, args.noise.split(",")):
            v = clean if not noise else np.clip(
                clean * (1 + noise * np.random.default_rng(1).standard_normal(clean.shape)), 0, None)
            s = DensitySnapshots(grid, times, v)
            for nh in (4, 6):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    est = PotentialEstimator(hermite_elements=nh, estimate_beta=True).fit(s)
                    post = posterior(est, s)
                    bc = post.beta_corrected
                    if bc is None:
                        continue
                    at_bc = PotentialEstimator(hermite_elements=nh, beta=bc).fit(s)
                    at_truth = PotentialEstimator(hermite_elements=nh, beta=beta).fit(s)
                row = dict(case=names[i], noise=noise, nh=nh, beta_raw=100 * (est.beta_ / beta - 1),
                           beta_corrected=100 * (bc / beta - 1), psi_raw=100 * _error(grid, est, true),
                           psi_at_corrected=100 * _error(grid, at_bc, true), psi_at_truth=100 * _error(grid, at_truth, true),
                           block_means=int(getattr(est, "beta_coarsening_", 1)) > 1,
                           z=post.beta_correction_z)
                rows.append(row)
                print(json.dumps({k: round(x, 2) if isinstance(x, float) else x for k, x in row.items()}), flush=True)
    print("\n| T (use beta_corrected where z > T) | noise | fits | psi error: median | mean | beta error: median | "
          "within 3% | corrected |")
    print("|---|---|---|---|---|---|---|---|")
    for T in THRESHOLDS:
        for noise in sorted({r["noise"] for r in rows}):
            rr = [r for r in rows if r["noise"] == noise]
            use = [T is not None and r["z"] > T for r in rr]
            psi = np.array([r["psi_at_corrected"] if u else r["psi_raw"] for r, u in zip(rr, use)])
            b = np.abs([r["beta_corrected"] if u else r["beta_raw"] for r, u in zip(rr, use)])
            label = "never" if T is None else ("always" if T == 0 else f"{T}")
            print(f"| {label} | {100 * noise:.0f}% | {len(rr)} | {np.median(psi):.2f}% | {np.mean(psi):.2f}% | "
                  f"{np.median(b):.2f}% | {np.mean(b <= 3):.2f} | {np.mean(use):.2f} |")


if __name__ == "__main__":
    main()
