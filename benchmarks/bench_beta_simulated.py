"""beta's discretisation bias removed by a simulation at the fitted model (issue 20): the command's point estimate
with and without the correction (:mod:`fpirl.uncertainty._discretisation`).

Run:  OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/bench_beta_simulated.py [--set coarse|cv] [--part I/N] [--given]

Each fit goes through ``uncertainty_and_point(est, 'auto', s)`` (what ``fpirl fit --estimate-beta`` does: the
snapshot-noise posterior, the Simpson switch, the basis correction) twice, with ``discretisation=False`` (the
previous default) and ``True``; beta estimated at 4 and 6 Hermite elements. Printed per fit: beta's and psi's
relative errors (psi zero-mean, grid quadrature) both ways, whether beta came from block means, whether the basis
correction was made, beta fitted to the simulated snapshots (``simulated``) and the simulated bias in noise standard
deviations of ``1/beta`` (``z_sim``), and the 90% interval's width relative to the true beta (``width_*``); then a
summary per noise level.
``--given``: beta given at the truth (psi's simulated discretisation bias,
:func:`fpirl.uncertainty._discretisation.psi_corrected_fit`): psi's error and the share of nodes inside the 90%
band ``potential +- q potential_std`` (psi and the truth zero-mean), both ways.

Sets (independent-solver data; no setting of the correction was chosen on either):

* ``coarse``: the 14 cases of ``bench_beta_coarse.py`` (2-D and 3-D, periodic and walled, potentials in and out
  of the Hermite space) x multiplicative noise 0, 1, 2, 5% (seed 1): 112 fits;
* ``cv``: the sets of ``bench_hermite_cv.py`` with beta estimated (design and validation), at their own noise and
  noise-free: 2-D and 1-D and 3-D, boxes of other sizes, walls, a double well, a Gaussian mixture, cold and hot.
"""

import argparse
import json
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_beta_coarse  # noqa: E402
import bench_beta_refit  # noqa: E402
import bench_beta_rule  # noqa: E402
import bench_hermite_cv  # noqa: E402


def _coarse_sets():
    bench_beta_rule.CASES = bench_beta_coarse.CASES
    for name in bench_beta_coarse.CASES:
        def make(name=name):
            grid, times, clean, beta = bench_beta_rule._clean(name)
            return grid, times, clean, beta, bench_beta_refit._truth(name, grid)
        for noise in (0.0, 0.01, 0.02, 0.05):
            yield name, noise, make


def _cv_sets():
    for case in bench_hermite_cv.CASES + bench_hermite_cv.VALIDATION:
        if not case.get("est"):
            continue
        for noise in sorted({case.get("noise", 0.0), 0.0}, reverse=True):
            def make(case=case):
                s, true = bench_hermite_cv.make(dict(case, noise=0.0))
                return s.grid, s.times, s.values, case["beta"], true
            yield case["name"], noise, make


def _error(grid, est, true):
    return 100 * bench_beta_refit._error(grid, est, true)


def main():
    from fpirl import DensitySnapshots, PotentialEstimator
    from fpirl.uncertainty import uncertainty_and_point

    ap = argparse.ArgumentParser()
    ap.add_argument("--set", choices=("coarse", "cv"), default="coarse")
    ap.add_argument("--part", default="0/1", help="I/N: every N-th set from the I-th (parallel runs)")
    ap.add_argument("--given", action="store_true", help="beta given: psi's correction")
    args = ap.parse_args()
    part, parts = map(int, args.part.split("/"))
    sets = list(_coarse_sets() if args.set == "coarse" else _cv_sets())[part::parts]
    rows = []
    for name, noise, make in sets:
        grid, times, clean, beta, true = make()
        v = clean if not noise else np.clip(
            clean * (1 + noise * np.random.default_rng(1).standard_normal(clean.shape)), 0, None)
        s = DensitySnapshots(grid, times, v)
        for nh in (4, 6):
            row = dict(case=name, noise=noise, nh=nh)
            if args.given:
                rows.append(_given(s, beta, true, nh, row))
                print(json.dumps({k: round(x, 3) if isinstance(x, float) else x for k, x in row.items()}), flush=True)
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = PotentialEstimator(hermite_elements=nh, estimate_beta=True).fit(s)
                for tag, on in (("before", False), ("after", True)):
                    post, fit = uncertainty_and_point(est, "auto", s, discretisation=on)
                    lo, hi = post.beta_interval()
                    row.update({f"beta_{tag}": 100 * (fit.beta_ / beta - 1), f"psi_{tag}": _error(grid, fit, true),
                                f"covers_{tag}": bool(lo <= beta <= hi),
                                f"width_{tag}": 100 * min(hi - lo, 10 * beta) / beta})  # (an open interval: 1000%)
                    st = getattr(fit, "settings_", {})
                    if on:
                        row.update(block=int(getattr(est, "beta_coarsening_", 1)), basis=int(st.get("beta_basis_corrected", 0)),
                                   simulated=st.get("beta_simulated"), fitted=100 * (est.beta_ / beta - 1),
                                   z_sim=st.get("beta_discretisation_z"))
            rows.append(row)
            print(json.dumps({k: round(x, 3) if isinstance(x, float) else x for k, x in row.items()}), flush=True)
    (summary_given if args.given else summary)(rows)


def _given(s, beta, true, nh, row):
    """Beta given: psi's error and band coverage before and after its discretisation correction (the shipped rule),
    and psi's error with the correction made whatever its ``z`` (``psi_always``, with ``z``: the threshold table)."""
    from fpirl import PotentialEstimator
    from fpirl.uncertainty import uncertainty_and_point
    from fpirl.uncertainty._discretisation import psi_corrected_fit

    grid = s.grid
    t = true - grid.integrate(true) / grid.integrate(np.ones_like(true))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = PotentialEstimator(hermite_elements=nh, beta=beta).fit(s)
        for tag, on in (("before", False), ("after", True)):
            post, fit = uncertainty_and_point(est, "auto", s, discretisation=on)
            v = fit.hermite_.evaluate_grid(fit.coef_, grid.coords)
            v = v - grid.integrate(v) / grid.integrate(np.ones_like(v))
            half = post.quantile(0.95) * post.potential_std(grid.coords)
            row.update({f"psi_{tag}": _error(grid, fit, true), f"coverage_{tag}": float(np.mean(np.abs(v - t) <= half))})
            if on:
                st = getattr(fit, "settings_", {})
                row.update(corrected=int(st.get("psi_discretisation_corrected", 0)),
                           switched=int(st.get("time_scheme_switched", 0)))
            else:
                always = psi_corrected_fit(fit, post, s, min_z=0.0)
                row.update(psi_always=None if always is None else _error(grid, always, true),
                           z=None if always is None else always.settings_["psi_discretisation_z"])
    return row


def _by_noise(rows):
    """``(label, rows)`` per noise level, then all rows."""
    for noise in sorted({r["noise"] for r in rows}) + [None]:
        yield ("all" if noise is None else f"{100 * noise:.0f}%"), [r for r in rows if noise is None or r["noise"] == noise]


def _pair(rows, key, f=np.array):
    """``f`` of the rows' ``key_before`` and of their ``key_after``."""
    return tuple(f([r[f"{key}_{t}"] for r in rows]) for t in ("before", "after"))


def summary_given(rows):
    print("\n| noise | fits | corrected | psi median before / after | psi mean before / after | better / worse | "
          "band coverage before / after |")
    print("|---|---|---|---|---|---|---|")
    for lab, rr in _by_noise(rows):
        (p0, p1), (c0, c1) = _pair(rr, "psi"), _pair(rr, "coverage", np.mean)
        print(f"| {lab} | {len(rr)} | {np.mean([r['corrected'] for r in rr]):.2f} | {np.median(p0):.2f}% / "
              f"{np.median(p1):.2f}% | {p0.mean():.2f}% / {p1.mean():.2f}% | {int(np.sum(p1 < p0 - 0.05))} / "
              f"{int(np.sum(p1 > p0 + 0.05))} | {c0:.3f} / {c1:.3f} |")
    print("\n| threshold on z (not shipped) | corrected | psi median | psi mean | better / worse than never |")
    print("|---|---|---|---|---|")
    p0 = np.array([r["psi_before"] for r in rows])
    for T in (None, 0, 0.5, 1, 2, 4, 8, 16):
        use = [T is not None and r["z"] is not None and r["z"] > T and r["corrected"] for r in rows]
        p = np.array([r["psi_always"] if u else r["psi_before"] for r, u in zip(rows, use)])
        lab = "never" if T is None else str(T)
        print(f"| {lab} | {np.mean(use):.2f} | {np.median(p):.2f}% | {p.mean():.2f}% | {int(np.sum(p < p0 - 0.05))} / "
              f"{int(np.sum(p > p0 + 0.05))} |")


def summary(rows):
    print("\n| noise | fits | corrected | beta median abs error before / after | within 3% before / after | "
          "mean abs before / after | psi median before / after | covers before / after | interval width median |")
    print("|---|---|---|---|---|---|---|---|---|")
    for lab, rr in _by_noise(rows):
        (b0, b1), (p0, p1), (c0, c1) = _pair(rr, "beta", np.abs), _pair(rr, "psi"), _pair(rr, "covers", np.mean)
        cor = np.mean([r["simulated"] is not None for r in rr])
        print(f"| {lab} | {len(rr)} | {cor:.2f} | {np.median(b0):.2f}% / {np.median(b1):.2f}% | "
              f"{np.mean(b0 <= 3):.2f} / {np.mean(b1 <= 3):.2f} | {b0.mean():.2f}% / {b1.mean():.2f}% | "
              f"{np.median(p0):.2f}% / {np.median(p1):.2f}% | {c0:.2f} / {c1:.2f} | "
              f"{np.median([r.get('width_after', np.nan) for r in rr]):.1f}% |")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("--summary", "--summary-given"):  # saved JSON lines (parallel parts)
        rows = [json.loads(line) for f in sys.argv[2:] for line in open(f) if line.startswith("{")]
        (summary if sys.argv[1] == "--summary" else summary_given)(rows)
    else:
        main()
