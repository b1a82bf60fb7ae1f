"""beta estimated through the command line: ``fpirl fit DATA --estimate-beta`` (defaults: Hermite elements by
cross-validation, block means where the noise dominates, the posterior) on the beta-estimated sets of
``bench_hermite_cv.py`` (design and validation), each noisy set also with a second noise seed.

Run:  PYTHONPATH=src python benchmarks/bench_beta_cli.py OUTDIR [--given] [NAME ...]

``--given``: instead, the noisy sets of ``bench_hermite_cv.py`` made for beta given (design and validation), fitted
with ``--estimate-beta`` all the same: data the beta-estimated path was not designed on.

Per set: psi's relative L2 error (zero mean), beta's error, the 90% interval written to the result
(``beta_lower``, ``beta_upper``) and whether it covers the true beta, the Hermite elements, the seconds.
Recorded in docs/benchmarks.md (issue 20, fifteenth pass).
"""

import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_hermite_cv as B  # noqa: E402


def cases(given: bool = False):
    if given:
        return [c for c in B.CASES + B.VALIDATION if not c.get("est") and c.get("noise")]
    est = [c for c in B.CASES + B.VALIDATION if c.get("est")]
    return est + [{**c, "name": c["name"] + "_s2", "seed": 2} for c in est if c.get("noise")]


def main():
    from fpirl.cli import main as cli
    from fpirl.io import read_result, write_density

    given = "--given" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--given"]
    out, names = args[0], set(args[1:])
    os.makedirs(out, exist_ok=True)
    warnings.simplefilter("ignore")
    errs, covered = [], []
    print("| set | psi | beta | 90% interval | covers | elements | s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for c in cases(given):
        if names and c["name"] not in names:
            continue
        s, true = B.make(c)
        data, res = os.path.join(out, c["name"] + ".nc"), os.path.join(out, c["name"] + "_fit.nc")
        write_density(data, s)
        t0 = time.perf_counter()
        cli(["fit", data, "-o", res, "--estimate-beta", "--no-progress"])
        t = time.perf_counter() - t0
        ds = read_result(res)
        g = s.grid
        p = ds["potential"].values
        p = p - g.integrate(p) / g.integrate(np.ones_like(p))
        e = float(np.sqrt(g.integrate((p - true) ** 2) / g.integrate(true**2)))
        a = ds.attrs
        lo, hi = float(a.get("beta_lower", np.nan)), float(a.get("beta_upper", np.nan))
        cov = bool(lo <= c["beta"] <= hi)
        errs.append(abs(a["beta"] / c["beta"] - 1))
        covered.append(cov)
        print(f"| {c['name']} | {100 * e:.2f}% | {100 * (a['beta'] / c['beta'] - 1):+.1f}% | [{lo:.3g}, {hi:.3g}] | "
              f"{'yes' if cov else 'NO'} | {a.get('hermite_elements')} | {t:.1f} |", flush=True)
    e = 100 * np.array(errs)
    print(f"\nbeta: median |error| {np.median(e):.2f}%, within 3% {np.sum(e <= 3)}/{len(e)}; "
          f"interval covers {sum(covered)}/{len(covered)}")


if __name__ == "__main__":
    main()
