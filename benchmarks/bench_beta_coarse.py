"""beta estimated from noisy snapshots on small grids: the block-means rule's floor on the coarse grid (issue 20,
sixth pass).

Run:  OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/bench_beta_coarse.py [--rules 16/2,8/2] [--nh 4,6]
      [--noise 0,0.01,0.02,0.05] [--seeds 1,2,3] [--cases 0,1,...] [--intervals]

:mod:`fpirl.estimators._beta_noise` estimates beta on block-averaged snapshots (periodic grids; every second node
with walls) while the noise term of ``c.c`` exceeds :data:`~fpirl.estimators._beta_noise.NOISE_SHARE_MAX` times
the Schur complement of ``1/beta``, down to a coarse grid of ``MIN_COARSE_NODES`` elements per axis and
``COARSE_PER_ELEMENT`` per Hermite element. This runs the library's default fit (``PotentialEstimator(hermite_elements=n_h,
estimate_beta=True)``, ``--nh`` elements) with each rule ``floor/per`` of ``--rules`` on density data from independent forward
solvers (the eight cases of ``bench_beta_rule.py`` and the same coupled potential on grids that can be halved),
times ``1 + noise eps`` (clipped at 0), and prints per fit the noise share ``rho`` of the fine fit, the coarsening
used and beta's error; then per rule and noise level the median and largest error and the share within 3%/5%.
"""

import argparse
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_beta_rule import CASES as RULE_CASES, _clean, _sweep  # noqa: E402

CASES = dict(RULE_CASES)
CASES.update({
    "sweep 2-D periodic 16^2": lambda: _sweep(2, 16, "periodic"),
    "sweep 2-D periodic 20^2": lambda: _sweep(2, 20, "periodic"),
    "sweep 2-D walls 17^2": lambda: _sweep(2, 17, "reflecting"),
    "sweep 2-D walls 25^2": lambda: _sweep(2, 25, "reflecting"),
    "sweep 2-D walls 33^2": lambda: _sweep(2, 33, "reflecting"),
    "sweep 3-D periodic 16^3": lambda: _sweep(3, 16, "periodic"),
})


def main():
    import bench_beta_rule

    from fpirl import DensitySnapshots, PotentialEstimator
    from fpirl.estimators import _beta_noise, identify

    shares = []  # the noise share rho each fit hands to the block-means rule (the fine fit's comes first)
    rule = identify.coarse_beta

    def recorded(est, snapshots, elements, share):
        shares.append(share)
        return rule(est, snapshots, elements, share)

    identify.coarse_beta = recorded

    bench_beta_rule.CASES = CASES  # _clean reads its module's table
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default=",".join(str(i) for i in range(len(CASES))), help="indices into CASES")
    ap.add_argument("--rules", default="16/2,8/2", help="MIN_COARSE_NODES/COARSE_PER_ELEMENT pairs")
    ap.add_argument("--noise", default="0,0.01,0.02,0.05")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--nh", default="4,6")
    ap.add_argument("--intervals", action="store_true",
                    help="also the posterior's 90%% beta interval and beta_corrected (fpirl.uncertainty.posterior) of "
                         "the last rule's fit")
    args = ap.parse_args()
    from fpirl.uncertainty import posterior
    names = list(CASES)
    floors = [(int(r.split("/")[0]), float(r.split("/")[1])) for r in args.rules.split(",")]
    errors = {}  # (floor, noise) -> list of |relative error|
    print("| case | noise | n_h | rho | " + " | ".join(f"rule {f}/{p:g}: beta error (blocks)" for f, p in floors)
          + (" | 90% interval | covers | beta_corrected error" if args.intervals else "") + " |")
    print("|" + "---|" * (4 + len(floors) + 3 * args.intervals))
    covers, corrected = {}, {}
    for i in map(int, args.cases.split(",")):
        grid, times, clean, beta = _clean(names[i])
        for noise in map(float, args.noise.split(",")):
            for seed in ([0] if not noise else map(int, args.seeds.split(","))):
                v = clean if not noise else np.clip(
                    clean * (1 + noise * np.random.default_rng(seed).standard_normal(clean.shape)), 0, None)
                s = DensitySnapshots(grid, times, v)
                for nh in map(int, args.nh.split(",")):
                    cells, rho = [], float("nan")
                    for floor in floors:
                        _beta_noise.MIN_COARSE_NODES, _beta_noise.COARSE_PER_ELEMENT = floor
                        shares.clear()
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            try:
                                est = PotentialEstimator(hermite_elements=nh, estimate_beta=True).fit(s)
                            except Exception as exc:  # a failed fit is a row, not the end of the study
                                cells.append(f"failed: {str(exc)[:40]}")
                                errors.setdefault((floor, noise), []).append(np.inf)
                                continue
                        if floor == floors[0] and shares:
                            rho = shares[0]
                        err = est.beta_ / beta - 1
                        errors.setdefault((floor, noise), []).append(abs(err))
                        cells.append(f"{100 * err:+.2f}% ({est.beta_coarsening_})")
                    if args.intervals and len(cells) == len(floors) and not cells[-1].startswith("failed"):
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            post = posterior(est, s)
                            lo, hi = post.beta_interval()
                        ok = bool(lo <= beta <= hi)
                        covers.setdefault(noise, []).append(ok)
                        bc = post.beta_corrected
                        corrected.setdefault(noise, []).append(abs(bc / beta - 1) if bc is not None else np.inf)
                        cells += [f"[{lo:.3f}, {hi:.3f}]", "yes" if ok else "NO",
                                  "-" if bc is None else f"{100 * (bc / beta - 1):+.2f}%"]
                    print(f"| {names[i]} | {100 * noise:.0f}%{f' s{seed}' if noise else ''} | {nh} | {rho:.3g} | "
                          + " | ".join(cells) + " |", flush=True)
    print("\n| rule | noise | fits | median abs error | largest | within 3% | within 5% |")
    print("|---|---|---|---|---|---|---|")
    for (floor, noise), e in sorted(errors.items(), key=lambda kv: (kv[0][1], -kv[0][0][0], -kv[0][0][1])):
        e = np.array(e)
        print(f"| {floor[0]}/{floor[1]:g} | {100 * noise:.0f}% | {e.size} | {100 * np.median(e):.2f}% | {100 * e.max():.2f}% | "
              f"{np.mean(e <= 0.03):.2f} | {np.mean(e <= 0.05):.2f} |")
    for noise, ok in sorted(covers.items()):
        e = np.array(corrected[noise])
        print(f"\nnoise {100 * noise:.0f}%: the last rule's 90% interval covers beta in {sum(ok)} of {len(ok)} fits; "
              f"beta_corrected: median abs error {100 * np.median(e):.2f}%, largest {100 * e.max():.2f}%, "
              f"within 3% {np.mean(e <= 0.03):.2f}, within 5% {np.mean(e <= 0.05):.2f}")


if __name__ == "__main__":
    main()
