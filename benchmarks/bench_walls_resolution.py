"""The resolution column on walled grids too coarse to coarsen (issue 20, seventh pass): coverage of the 90% band
of the default posterior with the refined-grid column (the library's rule since this pass) and without it (the
rule before: walled grids were not refined).

Run:  OMP_NUM_THREADS=2 PYTHONPATH=src python benchmarks/bench_walls_resolution.py [--sets A,B,C]

Data: finite-volume solutions (:func:`fpirl.forward.simulate_density`, walls) of
``psi = sum_b a_b cos(2 pi (x_b - lo_b) / L_b + phi_b) + c prod_b sin(2 pi (x_b - lo_b) / L_b)``, beta = 4, a von Mises
bump at t = 0, 25 snapshots 0.02 apart, times ``1 + noise eps`` (clipped at 0); four potentials (the amplitudes
``a``, the coupling ``c``, the bump's concentration), 2-D 12^2-16^2 and 3-D 10^3-17^3 elements (some anisotropic),
0-5% noise. Each case: ``PotentialEstimator(hermite_elements=4, beta=4)`` and
:func:`fpirl.uncertainty.posterior` with each rule; per rule the share of nodes where
``|psi_h - psi| <= 1.645 potential_std`` (zero-mean psi), and the refined column against the total error
(correlation, norm ratio).
"""

import argparse
import json
import warnings

import numpy as np

DEFAULT = dict(amp=(0.6, 0.35, 0.25), coupling=0.3, kappa=1.0)
POTENTIALS = {"default": DEFAULT,
              "sweep": dict(amp=(-0.6, -0.35, -0.25), coupling=0.3, kappa=1.0),
              "p2": dict(amp=(0.3, 0.5, 0.4), coupling=0.5, kappa=1.0),
              "p3": dict(amp=(0.5, -0.4, 0.3), coupling=-0.4, kappa=2.0)}


def _cases():
    a = [dict(set="A", n=n, noise=nz, seed=1, **extra) for n, nz, extra in (
        ((10, 14, 12), 0.0, {}), ((10, 14, 12), 0.02, {}), ((12, 12, 12), 0.02, {}), ((12, 12), 0.02, {}),
        ((16, 16), 0.02, {}), ((14, 20), 0.02, dict(lo=(0, -2), hi=(3, 2))))]
    b = [dict(set="B", n=(n, n), noise=nz, seed=2) for n in (12, 14, 16) for nz in (0.0, 0.02, 0.05)]
    b += [dict(set="B", n=(n,) * 3, noise=nz, seed=2) for n in (10, 12, 14, 17) for nz in (0.0, 0.02)]
    b += [dict(set="B", n=(11, 15, 13), noise=0.05, seed=2, lo=(0, 0, -1), hi=(2, 3, 1))]
    c = [dict(set="C", n=(n,) * d, noise=0.02, seed=3, potential=p) for p in ("sweep", "p2", "p3")
         for n, d in ((12, 2), (14, 2), (10, 3), (12, 3))]
    return a + b + c


def _data(case):
    from fpirl import DensitySnapshots, Grid
    from fpirl.forward import simulate_density, von_mises_bump

    d = len(case["n"])
    pot = POTENTIALS[case.get("potential", "default")]
    lo, hi = np.array(case.get("lo", (-1.0,) * d), float), np.array(case.get("hi", (1.0,) * d), float)
    w, amp, ph = 2 * np.pi / (hi - lo), np.array(pot["amp"])[:d], np.array([0.3, -0.7, 1.1])[:d]

    def psi(x):
        u = (x - lo) * w
        return (amp * np.cos(u + ph)).sum(-1) + pot["coupling"] * np.prod(np.sin(u), -1)

    def grad(x):
        u = (x - lo) * w
        s, c = np.sin(u), np.cos(u)
        prod = [pot["coupling"] * w[b] * c[..., b] * np.prod(np.delete(s, b, axis=-1), -1) for b in range(d)]
        return -amp * w * np.sin(u + ph) + np.stack(prod, -1)

    grid = Grid(list(lo), list(hi), list(case["n"]), boundary="reflecting")
    times = 0.02 * np.arange(25)
    init = von_mises_bump(lo, hi, lo + (hi - lo) * np.array([0.65, 0.3, 0.6])[:d], pot["kappa"])
    v = simulate_density(grid, psi, grad, 4.0, init, times)
    if case["noise"]:
        v = np.clip(v * (1 + case["noise"] * np.random.default_rng(case["seed"]).standard_normal(v.shape)), 0, None)
    return DensitySnapshots(grid, times, v), psi


def main():
    import fpirl.uncertainty._resolution as res
    from fpirl import PotentialEstimator
    from fpirl.uncertainty import posterior

    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", default="A,B,C")
    args = ap.parse_args()
    library = res.coarse_grid

    def before(grid, n_coef):  # the rule before this pass: a walled grid is never refined
        found = library(grid, n_coef)
        return None if found is not None and not grid.periodic and found[0].size > grid.size else found

    tally = {"before": [], "refined": []}
    for case in _cases():
        if case["set"] not in args.sets.split(","):
            continue
        s, psi = _data(case)
        grid = s.grid
        X = np.stack(np.meshgrid(*grid.coords, indexing="ij"), -1)
        true = psi(X) - psi(X).mean()
        row = dict(case)
        for name, rule in (("before", before), ("refined", library)):
            res.coarse_grid = rule
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    est = PotentialEstimator(hermite_elements=4, beta=4.0).fit(s)
                    post = posterior(est, s)
            finally:
                res.coarse_grid = library
            h = est.hermite_
            v = h.evaluate_grid(est.coef_, grid.coords)
            err = v - v.mean() - true
            cover = float(np.mean(np.abs(err) <= 1.645 * post.potential_std(grid.coords)))
            tally[name].append(cover)
            row[name] = round(cover, 3)
            if name == "refined" and post.resolution is not None:
                col = h.evaluate_grid(post.resolution[:h.n_coef], grid.coords)
                col -= col.mean()
                norm = float(np.linalg.norm(col))
                row["column: corr with psi - psi_h"] = (round(float(col.ravel() @ -err.ravel()) / norm / float(np.linalg.norm(err)), 2)
                                                        if norm > 0 else None)  # None: shrunk to zero (noise)
                row["norm ratio"] = round(norm / float(np.linalg.norm(err)), 2)
        row["psi error"] = round(float(np.linalg.norm(err) / np.linalg.norm(true)), 4)
        print(json.dumps(row), flush=True)
    for name, c in tally.items():
        c = np.array(c)
        print(f"{name}: {c.size} cases, inside 80-98% {np.sum((c >= 0.8) & (c <= 0.98))}, below 0.80 {np.sum(c < 0.8)}, "
              f"above 0.98 {np.sum(c > 0.98)}, median {np.median(c):.3f}")


if __name__ == "__main__":
    main()
