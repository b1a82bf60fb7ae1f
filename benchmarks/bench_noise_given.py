"""The snapshot-noise correction of psi with beta given (issue 20, thirteenth pass): the CLI default fit with and
without it, on noisy density data shaped unlike the repository's.

Run:  PYTHONPATH=src python benchmarks/bench_noise_given.py [--only NAME ...] [--sets design|histograms|all]
      [--seeds N | --shares [--noise LEVEL] [--share-seeds N]]

Each set is fitted the way ``fpirl fit DATA --beta B`` fits it (``--coarsen auto``, ``hermite_elements='auto'``, the
snapshot-noise posterior and its columns), once with ``correct_noise=True`` (the default now) and once with
``correct_noise=False`` (the fit before this pass). Printed per set: psi's relative L2 error (zero mean, grid
quadrature), the 90% band's coverage of the true psi at the nodes, and the Hermite elements chosen.

Sets:

* ``design``: the noisy beta-given sets of ``bench_hermite_cv.py`` (design and validation: cosine potentials on boxes
  of other shapes, double wells, Gaussian mixtures, 1-D to 3-D, periodic or walled, 1-5% multiplicative noise);
* ``histograms``: cloud-in-cell histograms of Euler-Maruyama particles (``fpirl.forward.markov.sample_sde``, 20
  substeps per snapshot; the peers benchmark's cases ``trig``, periodic, and ``refl``, walled, beta = 4, 31 snapshots
  0.02 apart), 20,000 to 2,000,000 particles, the same particles in every snapshot (or a fresh ensemble per
  snapshot: ``fresh``). Their noise is multinomial (variance ~ p, neither of the posterior's two shapes) and
  correlated between neighbouring nodes by the deposition.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "peers", "workers"))
sys.path.insert(0, os.path.dirname(__file__))

PI = np.pi


def _histograms(kind, n_nodes, n_paths, seed, fresh=False, steps=30, dt=0.02):
    from cases import CASES

    from fpirl import DensitySnapshots, Grid
    from fpirl.forward.markov import histogram_density, sample_sde

    case = CASES[kind]
    grid = Grid(case["lower"], case["upper"], n_nodes, boundary=case["boundary"], names=["s0", "a0"],
                roles=["state", "action"])
    rng = np.random.default_rng(seed)
    grad = lambda p: case["grad"](p[..., 0], p[..., 1])  # noqa: E731

    def start(n):
        if kind == "trig":
            return np.stack([0.3 + rng.vonmises(0.0, 2.0, n) / PI, -0.2 + rng.vonmises(0.0, 2.0, n) / PI], axis=-1)
        out = []  # rejection sampling of the initial density
        while sum(len(o) for o in out) < n:
            x, u = rng.uniform(-1, 1, (4 * n, 2)), rng.uniform(0, 1, 4 * n)
            out.append(x[u < case["p0"](x[:, 0], x[:, 1])])
        return np.concatenate(out)[:n]

    if fresh:
        vals = np.stack([histogram_density(grid, sample_sde(grad, case["beta"], start(n_paths), dt, k, rng, case["lower"],
                                                            case["upper"], case["boundary"], substeps=20)[-1])
                         for k in range(steps + 1)])
    else:
        paths = sample_sde(grad, case["beta"], start(n_paths), dt, steps, rng, case["lower"], case["upper"],
                           case["boundary"], substeps=20)
        vals = np.stack([histogram_density(grid, paths[k]) for k in range(steps + 1)])
    X = grid.mesh()
    return DensitySnapshots(grid, dt * np.arange(steps + 1), vals), case["psi"](X[..., 0], X[..., 1]), case["beta"]


HISTOGRAMS = {
    "trig32_200k": ("trig", 32, 200_000, 11), "trig32_20k": ("trig", 32, 20_000, 11),
    "trig32_2M": ("trig", 32, 2_000_000, 11), "trig32_fresh200k": ("trig", 32, 200_000, 11, True),
    "refl33_200k": ("refl", 33, 200_000, 12), "refl33_20k": ("refl", 33, 20_000, 12),
    "trig64_200k": ("trig", 64, 200_000, 11),
}


def sets(which):
    if which in ("design", "all"):
        import bench_hermite_cv as B

        for case in B.CASES + B.VALIDATION:
            if case.get("noise") and not case.get("est"):
                yield case["name"], (lambda c=case: (*B.make(c), c["beta"]))
    if which in ("histograms", "all"):
        for name, spec in HISTOGRAMS.items():
            yield name, (lambda s=spec: _histograms(*s))


def cli_like_fit(snapshots, beta, correct_noise):
    """``fpirl fit --beta`` on ``snapshots``: coarsening rule, 'auto' elements, posterior; (psi on the data's grid,
    its std, elements)."""
    from fpirl import PotentialEstimator
    from fpirl.estimators.noisy_grid import coarsened, on_grid
    from fpirl.uncertainty import uncertainty_and_point

    data, coarsening = coarsened(snapshots, "auto")
    est = PotentialEstimator(hermite_elements="auto", beta=beta, correct_noise=correct_noise).fit(data)
    post, est = uncertainty_and_point(est, "auto", data)
    fine = on_grid(est, coarsening.grid) if coarsening.factor > 1 else est
    std = post.potential_std(coarsening.grid.coords) if post is not None else None
    return fine.potential_on_grid(), std, post, ",".join(map(str, est.hermite_.elements))


def seeds(only, n):
    """psi's error at 4 Hermite elements with and without the correction over ``n`` noise seeds per design set."""
    import bench_hermite_cv as B

    from fpirl import PotentialEstimator

    print("| set | psi, without (mean) | psi, with (mean) | with better in |")
    print("| --- | --- | --- | --- |")
    logs = []
    for case in B.CASES + B.VALIDATION:
        if not case.get("noise") or case.get("est") or (only and case["name"] not in only):
            continue
        e = np.zeros((n, 2))
        for k in range(n):
            s, true = B.make({**case, "seed": k + 1})
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                e[k] = [B.error(PotentialEstimator(hermite_elements=4, beta=case["beta"], correct_noise=f).fit(s), s, true)
                        for f in (False, True)]
        logs.append(np.log(e[:, 1] / e[:, 0]))
        print(f"| {case['name']} | {100 * e[:, 0].mean():.2f}% | {100 * e[:, 1].mean():.2f}% | "
              f"{int((e[:, 1] < e[:, 0]).sum())}/{n} |", flush=True)
    a = np.concatenate(logs)
    print(f"\n{a.size} fits: with the correction better in {int((a < 0).sum())}; geometric mean of the error ratio "
          f"{np.exp(a.mean()):.3f}")


def shares(only, which, noise=None, n_seeds=1):
    """Per set, at 4 Hermite elements (API fits, no posterior): the noise share ``E[c.c]_noise / c.c`` of the diffusion
    column (the quantity of :data:`fpirl.weakform.noise_bias.GIVEN_MIN_SHARE`), how far the full correction moves psi
    (relative RMS over the nodes) and psi's error without and with it (the threshold set to 0: always corrected);
    ``noise``: the design sets at that noise level instead of their own, means over noise seeds ``1..n_seeds``."""
    import bench_hermite_cv as B

    from fpirl import PotentialEstimator
    from fpirl.weakform import noise_bias

    noise_bias.GIVEN_MIN_SHARE = 0.0
    print("| set | noise | share of c.c | psi moved | psi, without | psi, with | with better in |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, make in sets(which):
        if only and name not in only:
            continue
        case = next((c for c in B.CASES + B.VALIDATION if c["name"] == name), None)
        rows = []
        for seed in range(1, n_seeds + 1):
            if case is not None and (noise is not None or n_seeds > 1):
                s, true = B.make({**case, "noise": case["noise"] if noise is None else noise, "seed": seed})
                beta = case["beta"]
            else:
                s, true, beta = make()
            g = s.grid
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                raw, full = (PotentialEstimator(hermite_elements=4, beta=beta, correct_noise=f).fit(s) for f in (False, True))
            if full.noise_correction_ is None:
                break
            pa, pb = raw.potential_on_grid(), full.potential_on_grid()
            t = true - g.integrate(true) / g.volume

            def err(p):
                p = p - g.integrate(p) / g.volume
                return float(np.sqrt(g.integrate((p - t) ** 2) / g.integrate(t**2)))

            rows.append((full.noise_correction_["cc"] / raw.normal_equations_.cc,
                         np.sqrt(np.mean((pa - pb) ** 2) / np.mean(pa**2)), err(pa), err(pb)))
        if not rows:
            print(f"| {name} | | (no estimate) | | | | |")
            continue
        r = np.array(rows)
        level = case["noise"] if noise is None and case is not None else noise
        print(f"| {name} | {'' if level is None else f'{100 * level:g}%'} | {r[:, 0].mean():.3g} | {100 * r[:, 1].mean():.3f}% | "
              f"{100 * r[:, 2].mean():.3f}% | {100 * r[:, 3].mean():.3f}% | {int((r[:, 3] < r[:, 2]).sum())}/{len(r)} |",
              flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--sets", choices=("design", "histograms", "all"), default="all")
    ap.add_argument("--seeds", type=int, default=0,
                    help="instead: the design sets at 4 Hermite elements (no posterior), noise seeds 1..N, both fits")
    ap.add_argument("--shares", action="store_true",
                    help="instead: per set the noise share of c.c, how far the correction moves psi, both errors")
    ap.add_argument("--noise", type=float, default=None, help="with --shares: the design sets at this noise level")
    ap.add_argument("--share-seeds", type=int, default=1, help="with --shares: noise seeds 1..N (means)")
    args = ap.parse_args()
    if args.seeds:
        return seeds(args.only, args.seeds)
    if args.shares:
        return shares(args.only, args.sets, args.noise, args.share_seeds)
    print("| set | psi, without | psi, with | band coverage, without -> with | elements | s (with) |")
    print("| --- | --- | --- | --- | --- | --- |")
    logs = []
    for name, make in sets(args.sets):
        if args.only and name not in args.only:
            continue
        s, true, beta = make()
        g = s.grid
        t = g.integrate(true) / g.volume
        true = true - t
        row = {}
        for flag in (False, True):
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                p, std, post, el = cli_like_fit(s, beta, flag)
            p = p - g.integrate(p) / g.volume
            err = float(np.sqrt(g.integrate((p - true) ** 2) / g.integrate(true**2)))
            q = post.quantile(0.95) if post is not None else np.nan
            cover = float(np.mean(np.abs(p - true) <= q * std)) if std is not None else float("nan")
            row[flag] = (err, cover, el, time.perf_counter() - start)
        (e0, c0, el0, _), (e1, c1, el1, s1) = row[False], row[True]
        logs.append(np.log(e1 / e0))
        print(f"| {name} | {100 * e0:.2f}% | {100 * e1:.2f}% | {c0:.3f} -> {c1:.3f} | {el0} -> {el1} | {s1:.1f} |",
              flush=True)
    if logs:
        a = np.array(logs)
        print(f"\n{a.size} sets: with the correction psi better (by > 3%) on {int((a < np.log(0.97)).sum())}, worse on "
              f"{int((a > np.log(1.03)).sum())}; geometric mean of the error ratio {np.exp(a.mean()):.3f}")


if __name__ == "__main__":
    main()
