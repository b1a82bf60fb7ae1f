"""A noisy parametric bootstrap of beta's bias, measured against the shipped noise-free simulation (issue 20,
twenty-third pass; not adopted).

Run:  OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/bench_beta_noisy_bootstrap.py --part I/N --noise 0.02,0.05
      [--cases "walls 24,3-D periodic"] [--replicates 8] [--antithetic]

For each set of ``bench_beta_simulated.py --set coarse`` at the given noise levels, beta estimated at 4 and 6 Hermite
elements: the command's point estimate (``uncertainty_and_point``, the shipped corrections), and a plug-in bias
correction from the fitted model simulated without noise (as shipped) *plus* ``R`` noisy replicates of that
simulation (noise of the posterior's shape and level, ``sigma * sqrt(noise_confirmed)``), each refitted with the
fit's settings: ``gamma_nb = gamma - (mean_r gamma_r - gamma)``. ``--antithetic``: the replicates in pairs
``+-xi`` (the first-order fluctuation cancels within a pair). Printed per fit (percent errors of beta): ``after``
(shipped), ``sim0`` (the noise-free simulation alone), ``nb`` (the noisy bootstrap), its Monte Carlo standard error
``nb_se`` and the noise part ``nb - sim0`` of the bias.
"""

import argparse
import json
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_beta_simulated  # noqa: E402


def main():
    from fpirl import DensitySnapshots, PotentialEstimator
    from fpirl.forward.pde import simulate_density
    from fpirl.uncertainty import uncertainty_and_point
    from fpirl.uncertainty._bootstrap import refit_params
    from fpirl.uncertainty._discretisation import SIMULATION_RTOL

    ap = argparse.ArgumentParser()
    ap.add_argument("--part", default="0/1")
    ap.add_argument("--noise", default="0.02,0.05")
    ap.add_argument("--cases", default="", help="comma-separated substrings of the case names (default: all)")
    ap.add_argument("--replicates", type=int, default=8)
    ap.add_argument("--antithetic", action="store_true")
    args = ap.parse_args()
    part, parts = map(int, args.part.split("/"))
    noises = [float(x) for x in args.noise.split(",")]
    keys = [k for k in args.cases.split(",") if k]
    sets = [x for x in bench_beta_simulated._coarse_sets()
            if x[1] in noises and (not keys or any(k in x[0] for k in keys))][part::parts]
    for name, noise, make in sets:
        grid, times, clean, beta, _ = make()
        v = np.clip(clean * (1 + noise * np.random.default_rng(1).standard_normal(clean.shape)), 0, None)
        s = DensitySnapshots(grid, times, v)
        for nh in (4, 6):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = PotentialEstimator(hermite_elements=nh, estimate_beta=True).fit(s)
                post, fit = uncertainty_and_point(est, "auto", s)
                h, coef, b0 = est.hermite_, np.asarray(est.coef_), float(est.beta_)
                params = refit_params(est)
                block = int(getattr(est, "beta_coarsening_", 1))
                params.update(beta_block=block if block > 1 else None)
                sim = simulate_density(grid, lambda x: h.evaluate(coef, x), lambda x: h.gradient(coef, x), b0,
                                       s.values[0], np.asarray(times) - times[0], rtol=SIMULATION_RTOL)

                def gamma_of(values):
                    return 1.0 / PotentialEstimator(**params).fit(DensitySnapshots(grid, times, values)).beta_

                sig = float(np.sqrt(post.noise_variance * (post.noise_confirmed or 1.0)))
                g0, gam = gamma_of(sim), 1.0 / b0
                rng = np.random.default_rng(7)
                signs = (1, -1) if args.antithetic else (1,)
                reps = []
                for _ in range(args.replicates // len(signs)):
                    xi = rng.standard_normal(sim.shape)
                    noisy = [sim * (1 + sg * sig * xi) if post.noise_model == "multiplicative" else sim + sg * sig * xi
                             for sg in signs]
                    reps.append(np.mean([gamma_of(np.clip(x, 0, None)) for x in noisy]))
                nb = gam - (np.mean(reps) - gam)
                row = dict(case=name, noise=noise, nh=nh, fitted=100 * (b0 / beta - 1), after=100 * (fit.beta_ / beta - 1),
                           basis=int(fit.settings_.get("beta_basis_corrected", 0)),
                           sim0=100 * (1 / (gam - (g0 - gam)) / beta - 1), nb=100 * (1 / nb / beta - 1),
                           nb_se=100 * np.std(reps, ddof=1) / np.sqrt(len(reps)) / gam,
                           noise_part=100 * (np.mean(reps) - g0) / gam, sigma=sig, block=block)
                print(json.dumps({k: round(x, 2) if isinstance(x, float) else x for k, x in row.items()}), flush=True)


if __name__ == "__main__":
    main()
