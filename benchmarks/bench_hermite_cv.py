"""Hermite elements for density data (``hermite_elements='auto'``): the cross-validation's choice against the
fixed default (4 elements) and the best candidate, on 32 simulated data sets shaped unlike the repository's.

Run:  PYTHONPATH=src python benchmarks/bench_hermite_cv.py [--only NAME ...] [--rules]

Data (:func:`fpirl.forward.simulate_density`: spectral solver on periodic grids, finite volumes with walls;
a von Mises bump at t = 0, 25 snapshots 0.02 apart unless stated, times ``1 + noise eps``, clipped at 0):
a coupled cosine potential ``sum_b a_b cos(2 pi (x_b - lo_b) / L_b + phi_b) + c prod_b sin(...)`` on boxes of
other sizes and aspect ratios, 2-D and 3-D, periodic or walled, cold (beta = 10) and hot, strong and weak
(``scale``), few snapshots, near equilibrium; a double well ``(x_0^2 - 0.6)^2 + 0.8 |x_1..|^2 + 0.3 x_0 x_1`` and
a two-Gaussian mixture in walled boxes. Per set: psi's relative L2 error (zero mean, grid quadrature) of the
fit at 4 elements, of ``'auto'`` (and its choice) and of the best candidate; beta given unless marked
``_est``. ``--rules`` also prints the choice of the plain minimum (rule ``'min'``) from the stored curve.
``--validate``: 13 sets made after the rule was fixed (1-D to 3-D, a second harmonic, a periodic mixture, hot and
cold double wells, 5% noise, 6 snapshots, 50 snapshots).
"""

import argparse
import time

import numpy as np

E = {"est": True}
CASES = [
    dict(name="aniso_per", n=[20, 32], lo=[0, -1], hi=[2, 1], bc="periodic", beta=2.0),
    dict(name="aniso_per_est", n=[20, 32], lo=[0, -1], hi=[2, 1], bc="periodic", beta=2.0, **E),
    dict(name="aniso_per_n2", n=[20, 32], lo=[0, -1], hi=[2, 1], bc="periodic", beta=2.0, noise=0.02, **E),
    dict(name="wide_walls", n=[28, 28], lo=[-3, -3], hi=[3, 3], bc="reflecting", beta=1.0, dt=0.2, noise=0.02),
    dict(name="wide_walls_est", n=[28, 28], lo=[-3, -3], hi=[3, 3], bc="reflecting", beta=1.0, dt=0.2, noise=0.02, **E),
    dict(name="cold", n=[32, 32], bc="periodic", beta=10.0, noise=0.02),
    dict(name="cold_est", n=[32, 32], bc="periodic", beta=10.0, noise=0.02, **E),
    dict(name="few_snap", n=[24, 24], bc="periodic", beta=4.0, nt=8, noise=0.02),
    dict(name="near_eq_est", n=[24, 24], bc="periodic", beta=4.0, nt=30, dt=0.1, kappa=0.2, noise=0.01, **E),
    dict(name="in_space_est", n=[24, 24], bc="periodic", beta=4.0, coupling=0.0, **E),
    dict(name="small_scale", n=[24, 24], bc="periodic", beta=4.0, scale=0.1, noise=0.02),
    dict(name="big_scale_est", n=[24, 24], bc="periodic", beta=4.0, scale=3.0, noise=0.02, **E),
    dict(name="w2_rect", n=[30, 18], lo=[0, -1], hi=[5, 2], bc="reflecting", beta=2.0, noise=0.02),
    dict(name="w2_rect_est", n=[30, 18], lo=[0, -1], hi=[5, 2], bc="reflecting", beta=2.0, noise=0.02, **E),
    dict(name="w2_rect_est0", n=[30, 18], lo=[0, -1], hi=[5, 2], bc="reflecting", beta=2.0, **E),
    dict(name="p24_5pct", n=[24, 24], bc="periodic", beta=4.0, noise=0.05),
    dict(name="dw", kind="dwell", n=[32, 32], bc="reflecting", beta=2.0, noise=0.02),
    dict(name="dw_est", kind="dwell", n=[32, 32], bc="reflecting", beta=2.0, noise=0.02, **E),
    dict(name="dw0_est", kind="dwell", n=[32, 32], bc="reflecting", beta=2.0, **E),
    dict(name="dw_dt", kind="dwell", n=[32, 32], bc="reflecting", beta=2.0, noise=0.02, dt=0.1, nt=20),
    dict(name="dw_5pct", kind="dwell", n=[32, 32], bc="reflecting", beta=2.0, noise=0.05),
    dict(name="gm", kind="gmix", n=[32, 32], bc="reflecting", beta=1.5, noise=0.02),
    dict(name="gm_est", kind="gmix", n=[32, 32], bc="reflecting", beta=1.5, noise=0.02, **E),
    dict(name="aniso3_walls", n=[10, 14, 12], bc="reflecting", beta=4.0, noise=0.02),
    dict(name="aniso3_walls0", n=[10, 14, 12], bc="reflecting", beta=4.0),
    dict(name="aniso3_walls_fine", n=[20, 28, 24], bc="reflecting", beta=4.0, noise=0.02),
    dict(name="aniso3_per", n=[10, 14, 12], bc="periodic", beta=4.0, noise=0.02),
    dict(name="iso3_walls12", n=[12, 12, 12], bc="reflecting", beta=4.0, noise=0.02),
    dict(name="a3p", n=[12, 16, 20], lo=[0, 0, -1], hi=[1, 2, 1], bc="periodic", beta=4.0, noise=0.01),
    dict(name="a3p_est", n=[12, 16, 20], lo=[0, 0, -1], hi=[1, 2, 1], bc="periodic", beta=4.0, noise=0.01, **E),
    dict(name="w3_20", n=[20, 20, 20], bc="reflecting", beta=4.0, noise=0.02),
    dict(name="dw3", kind="dwell", n=[16, 16, 16], bc="reflecting", beta=2.0, noise=0.02),
]
#: Sets made after the rule was fixed (``--validate``): other dimensions, potentials, temperatures and noise.
VALIDATION = [
    dict(name="v_1d_per", n=[64], bc="periodic", beta=4.0, noise=0.02),
    dict(name="v_1d_walls", n=[48], lo=[-2], hi=[2], bc="reflecting", beta=2.0, noise=0.01),
    dict(name="v_1d_cold_est", n=[64], bc="periodic", beta=12.0, noise=0.01, **E),
    dict(name="v_harm2", n=[32, 32], bc="periodic", beta=3.0, harm=2, noise=0.02),
    dict(name="v_gm_per", kind="gmix", n=[32, 32], bc="periodic", beta=1.5, noise=0.01),
    dict(name="v_dw_hot", kind="dwell", n=[28, 28], bc="reflecting", beta=1.0, noise=0.02),
    dict(name="v_dw_cold_est", kind="dwell", n=[32, 32], bc="reflecting", beta=4.0, noise=0.01, **E),
    dict(name="v_aniso_walls", n=[36, 20], lo=[0, 0], hi=[3, 1], bc="reflecting", beta=3.0, noise=0.02),
    dict(name="v_cos_5pct_est", n=[28, 28], bc="periodic", beta=6.0, noise=0.05, **E),
    dict(name="v_few", n=[32, 32], bc="periodic", beta=8.0, nt=6, noise=0.01),
    dict(name="v_long", n=[24, 24], lo=[-2, -2], hi=[2, 2], bc="reflecting", beta=2.0, nt=50, dt=0.05, noise=0.02),
    dict(name="v_3d_per", n=[16, 16, 16], bc="periodic", beta=5.0, noise=0.02),
    dict(name="v_gm3_walls", kind="gmix", n=[18, 18, 18], bc="reflecting", beta=2.0, noise=0.02),
]


def _cosine(case, lo, hi):
    d, L = len(lo), hi - lo
    w = 2 * np.pi / L
    amp = np.array([0.6, 0.35, 0.25])[:d] * case.get("scale", 1.0)
    w = w * case.get("harm", 1)
    ph = np.array([0.3, -0.7, 1.1])[:d]
    cpl = case.get("coupling", 0.3) * case.get("scale", 1.0)

    def psi(x):
        u = (x - lo) * w
        return (amp * np.cos(u + ph)).sum(-1) + cpl * np.prod(np.sin(u), -1)

    def grad(x):
        u = (x - lo) * w
        s, c = np.sin(u), np.cos(u)
        prod = [cpl * w[a] * c[..., a] * np.prod(np.delete(s, a, axis=-1), -1) for a in range(d)]
        return -amp * w * np.sin(u + ph) + np.stack(prod, -1)

    return psi, grad


def _double_well(case, lo, hi):
    def psi(x):
        return (x[..., 0] ** 2 - 0.6) ** 2 + 0.8 * (x[..., 1:] ** 2).sum(-1) + 0.3 * x[..., 0] * x[..., 1]

    def grad(x):
        g = 1.6 * x.copy()
        g[..., 0] = 4 * x[..., 0] * (x[..., 0] ** 2 - 0.6) + 0.3 * x[..., 1]
        g[..., 1] += 0.3 * x[..., 0]
        return g

    return psi, grad


def _mixture(case, lo, hi):
    d, s = len(lo), 0.5
    m1, m2 = np.array([0.6, 0.3, 0.2])[:d], np.array([-0.5, -0.4, -0.3])[:d]

    def parts(x):
        return (np.exp(-((x - m1) ** 2).sum(-1) / (2 * s * s))[..., None],
                0.7 * np.exp(-((x - m2) ** 2).sum(-1) / (2 * s * s))[..., None])

    def psi(x):
        e1, e2 = parts(x)
        return -np.log(e1 + e2 + 0.05)[..., 0]

    def grad(x):
        e1, e2 = parts(x)
        return (e1 * (x - m1) + e2 * (x - m2)) / (s * s) / (e1 + e2 + 0.05)

    return psi, grad


def make(case):
    """``(snapshots, true psi on the nodes, zero mean)`` of one case."""
    from fpirl import DensitySnapshots, Grid
    from fpirl.forward import simulate_density, von_mises_bump

    d = len(case["n"])
    kind = case.get("kind", "cosine")
    default = 1.5 if kind != "cosine" else 1.0
    lo, hi = np.array(case.get("lo", [-default] * d), float), np.array(case.get("hi", [default] * d), float)
    psi, grad = {"cosine": _cosine, "dwell": _double_well, "gmix": _mixture}[kind](case, lo, hi)
    names, roles = ["s0", "a0", "a1"][:d], ["state"] + ["action"] * (d - 1)
    grid = Grid(list(lo), list(hi), case["n"], boundary=case["bc"], names=names, roles=roles)
    times = case.get("dt", 0.02) * np.arange(case.get("nt", 25))
    c0 = lo + (hi - lo) * np.array([0.65, 0.3, 0.6])[:d]
    v = simulate_density(grid, psi, grad, case["beta"], von_mises_bump(lo, hi, c0, case.get("kappa", 1.0)), times)
    if case.get("noise"):
        v = np.clip(v * (1 + case["noise"] * np.random.default_rng(case.get("seed", 1)).standard_normal(v.shape)), 0, None)
    X = np.stack(np.meshgrid(*grid.coords, indexing="ij"), -1)
    true = psi(X)
    ones = np.ones_like(true)
    return DensitySnapshots(grid, times, v), true - grid.integrate(true) / grid.integrate(ones)


def error(est, s, true) -> float:
    g = s.grid
    p = est.potential_on_grid()
    p = p - g.integrate(p) / g.integrate(np.ones_like(p))
    return float(np.sqrt(g.integrate((p - true) ** 2) / g.integrate(true ** 2)))


def main():
    from fpirl import PotentialEstimator
    from fpirl.estimators.hermite_cv import candidate_elements

    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--rules", action="store_true", help="also the plain minimum's choice")
    ap.add_argument("--validate", action="store_true", help="the sets made after the rule was fixed")
    args = ap.parse_args()
    print("| set | 4 elements | auto (choice) | best candidate | s |" + (" min rule |" if args.rules else ""))
    print("| --- | --- | --- | --- | --- |" + (" --- |" if args.rules else ""))
    rows = []
    for case in (VALIDATION if args.validate else CASES):
        if args.only and case["name"] not in args.only:
            continue
        s, true = make(case)
        kw = {"estimate_beta": True} if case.get("est") else {"beta": case["beta"]}
        t = time.perf_counter()
        auto = PotentialEstimator(hermite_elements="auto", **kw).fit(s)
        seconds = time.perf_counter() - t
        cands = dict.fromkeys(candidate_elements(s.grid) + list(auto.hermite_cv_ or {}) + [(4,) * s.grid.ndim])
        errs = {el: error(PotentialEstimator(hermite_elements=el, **kw).fit(s), s, true) for el in cands}
        four = errs[(4,) * s.grid.ndim]
        el = tuple(auto.hermite_.elements)
        best = min(errs, key=errs.get)
        cell = lambda e, k: f"{100 * e:.1f}% ({','.join(map(str, k))})"  # noqa: E731
        extra = ""
        if args.rules and auto.hermite_cv_:
            m = min(auto.hermite_cv_, key=auto.hermite_cv_.get)
            extra = f" {cell(errs[m], m)} |"
        rows.append((four, errs[el]))
        print(f"| {case['name']} | {100 * four:.1f}% | {cell(errs[el], el)} | {cell(errs[best], best)} | {seconds:.1f} |{extra}",
              flush=True)
    a = np.array(rows)
    geo = np.exp(np.log(a).mean(0))
    print(f"\n{len(rows)} sets: mean psi error {100 * a[:, 0].mean():.2f}% at 4 elements, {100 * a[:, 1].mean():.2f}% auto; "
          f"geometric mean {100 * geo[0]:.2f}% / {100 * geo[1]:.2f}%; auto better on "
          f"{int((a[:, 1] < a[:, 0] * 0.99).sum())}, worse on {int((a[:, 1] > a[:, 0] * 1.01).sum())}")


if __name__ == "__main__":
    main()
