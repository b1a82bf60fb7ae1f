"""beta's basis-error correction (issue 20, fifth pass): candidate rules on potentials the rule was not tuned on.

Run:  OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/bench_beta_rule.py [--cases 0,1,...] [--noise 0,0.02] [--seeds 1,2,3]
      (recorded in docs/benchmarks.md with --seeds 1,2,3: 37 s)

Each case is density data from an independent forward solver (:func:`fpirl.forward.simulate_density`: spectral
on periodic grids, finite volumes with walls; :class:`fpirl.forward.SpectralSolver` for the two potentials of
``bench_uncertainty.py --only basis``), times ``1 + noise eps`` (seeds ``--seeds``, default 1). beta is estimated at ``n_h`` = 4 and 6
Hermite elements (the library's default fit) and refitted (:func:`fpirl.uncertainty._basis.coarse_refit`, the
refit the library itself uses) at every count from 2 to ``n_h + 1``; the rules are then computed from these
``gamma = 1/beta``:

* ``raw``: the fit's beta at ``n_h``;
* ``lib``: the library's ``posterior(est, s).beta_corrected`` (checked against the rule it implements);
* ``cur``: the rule before this pass, Richardson on ``(n_c, n_h)``, ``n_c = round(3 n_h / 4)``, ``p = max(p_obs(n_h-2, n_h-1, n_h), 2)``;
* ``f3``: as ``cur`` with the floor 3: ``p = max(p_obs(n_h-2, n_h-1, n_h), 3)`` (the library's rule since this pass);
* ``p3``: Richardson on ``(n_c, n_h)`` with the fixed order 3;
* ``p4``: the same with the fixed order 4;
* ``mono``: ``cur`` where ``gamma`` at ``(n_h-2, n_h-1, n_h)`` is monotone, else ``raw`` (no correction);
* ``f3c``: ``f3`` where ``gamma`` at ``(n_h-2, n_h-1, n_h)`` converges (monotone, and the ratio of its successive
  differences above its limit for order 0, ``ln(N_1/N_2) / ln(N_0/N_1)``), else ``raw`` (issue 20, fifteenth pass);
* ``loc``: Richardson on ``(n_h - 1, n_h)`` with ``p = max(p_obs(n_h-2, n_h-1, n_h), 2)`` (the pair the order is measured on);
* ``fine``: Richardson on ``(n_h, n_h + 1)`` with ``p = max(p_obs(n_h-1, n_h, n_h+1), 2)`` (one finer fit);
* ``fineo``: Richardson on ``(n_c, n_h)`` with ``p = max(p_obs(n_h-1, n_h, n_h+1), 2)`` (finer fit measures the order only).

Also printed: the posterior's 90% beta interval (``beta_interval()``; it does not depend on the rule) and
whether it covers the true beta, and the seconds of the ``n_h - 2``, ``n_h - 1`` and ``n_h + 1`` refits.
"""

import argparse
import time
import warnings

import numpy as np

K = np.pi


def _sweep(d, n, boundary, amp=(0.6, 0.35, 0.25), ph=(0.3, -0.7, 1.1), prod=0.3, beta=4.0):
    """The potential of bench_cli_sweep.py (coupled: separable cosines plus a product of sines)."""
    amp, ph = np.array(amp)[:d], np.array(ph)[:d]

    def psi(x):
        return (amp * np.cos(K * x + ph)).sum(-1) + prod * np.prod(np.sin(K * x), axis=-1)

    def grad(x):
        s, c = np.sin(K * x), np.cos(K * x)
        pr = [prod * K * c[..., a] * np.prod(np.delete(s, a, axis=-1), axis=-1) for a in range(d)]
        return -amp * K * np.sin(K * x + ph) + np.stack(pr, -1)

    return dict(d=d, n=n, boundary=boundary, psi=psi, grad=grad, beta=beta, center=[0.3, -0.4, 0.2][:d], n_t=25)


def _freq2():
    """Own potential: a second harmonic and a diagonal coupling, beta = 2 (periodic)."""
    def psi(x):
        return 0.5 * np.cos(2 * K * x[..., 0] + 0.5) + 0.4 * np.cos(K * x[..., 1] - 0.2) + 0.25 * np.sin(K * (x[..., 0] + x[..., 1]))

    def grad(x):
        c = 0.25 * K * np.cos(K * (x[..., 0] + x[..., 1]))
        return np.stack([-K * np.sin(2 * K * x[..., 0] + 0.5) + c, -0.4 * K * np.sin(K * x[..., 1] - 0.2) + c], -1)

    return dict(d=2, n=32, boundary="periodic", psi=psi, grad=grad, beta=2.0, center=[0.2, 0.5], n_t=25)


def _well():
    """Own potential: a Gaussian well plus a bilinear tilt, walls, beta = 3."""
    c0 = np.array([0.2, -0.3])

    def psi(x):
        r2 = ((x - c0) ** 2).sum(-1)
        return -1.2 * np.exp(-r2 / 0.3) + 0.3 * x[..., 0] * x[..., 1]

    def grad(x):
        r2 = ((x - c0) ** 2).sum(-1)
        g = (1.2 / 0.3 * 2 * np.exp(-r2 / 0.3))[..., None] * (x - c0)
        return g + 0.3 * np.stack([x[..., 1], x[..., 0]], -1)

    return dict(d=2, n=24, boundary="reflecting", psi=psi, grad=grad, beta=3.0, center=[-0.3, 0.4], n_t=25)


CASES = {
    "sweep 2-D periodic 24^2": lambda: _sweep(2, 24, "periodic"),
    "sweep 2-D walls 24^2": lambda: _sweep(2, 24, "reflecting"),
    "sweep 3-D periodic 12^3": lambda: _sweep(3, 12, "periodic"),
    "sweep 3-D walls 12^3": lambda: _sweep(3, 12, "reflecting"),
    "trigonometric psi 32^2": lambda: "trig",
    "psi in the 6-element space 32^2": lambda: "h6",
    "second harmonic, beta 2, 32^2": _freq2,
    "Gaussian well, walls, beta 3, 24^2": _well,
}


def _clean(case):
    """Noise-free density snapshots and the true beta."""
    from fpirl import Grid
    from fpirl.forward import simulate_density, von_mises_bump

    c = CASES[case]()
    if isinstance(c, str):  # the two data sets of bench_uncertainty.py --only basis (spectral solver, 96^2 points)
        from fpirl.core.hermite import HermiteSpace
        from fpirl.forward import SpectralSolver
        from fpirl.problems.synthetic import smooth_function

        f = smooth_function(2, True)
        h6 = HermiteSpace([-1, -1], [1, 1], 6, True)
        c6 = h6.interpolate(f)
        grad = (lambda x: np.stack([f(x, (1, 0)), f(x, (0, 1))], -1)) if c == "trig" else (lambda x: h6.gradient(c6, x))
        times = 0.02 * np.arange(31)
        grid = Grid([-1, -1], [1, 1], 32, boundary="periodic")
        solver = SpectralSolver([-1, -1], [1, 1], 96, grad, 4.0)
        init = von_mises_bump([-1, -1], [1, 1], [0.4, -0.3], 1.5)
        v = np.clip(solver.evaluate(solver.solve(init, times), grid.coords), 0, None)
        return grid, times, v, 4.0
    d = c["d"]
    grid = Grid([-1.0] * d, [1.0] * d, c["n"], boundary=c["boundary"])
    times = 0.02 * np.arange(c["n_t"])
    init = von_mises_bump(grid.lower, grid.upper, c["center"], 1.0)
    v = simulate_density(grid, c["psi"], c["grad"], c["beta"], init, times)
    return grid, times, np.asarray(v), c["beta"]


def rules(g, nh, nc):
    """gamma corrected by each candidate rule; ``g`` maps element counts to gamma (module doc)."""
    from fpirl.uncertainty._basis import observed_order, richardson

    out = {"raw": g[nh]}
    p_c = observed_order([nh, nh - 1, nh - 2], [g[nh], g[nh - 1], g[nh - 2]])
    out["cur"] = richardson(g[nh], g[nc], nh / nc, p_c)
    p_c3 = observed_order([nh, nh - 1, nh - 2], [g[nh], g[nh - 1], g[nh - 2]], floor=3.0)
    out["f3"] = richardson(g[nh], g[nc], nh / nc, p_c3)
    out["p3"] = richardson(g[nh], g[nc], nh / nc, 3.0)
    out["p4"] = richardson(g[nh], g[nc], nh / nc, 4.0)
    out["loc"] = richardson(g[nh], g[nh - 1], nh / (nh - 1), p_c)
    da, db = g[nh] - g[nh - 1], g[nh - 1] - g[nh - 2]
    out["mono"] = out["cur"] if da * db > 0 else g[nh]
    n0, n1, n2 = nh, nh - 1, nh - 2  # f3c: f3 where gamma converges (monotone, differences shrinking), else raw
    out["f3c"] = out["f3"] if da * db > 0 and db / da > np.log(n1 / n2) / np.log(n0 / n1) else g[nh]
    if nh + 1 in g:
        p_f = observed_order([nh + 1, nh, nh - 1], [g[nh + 1], g[nh], g[nh - 1]])
        out["fine"] = richardson(g[nh + 1], g[nh], (nh + 1) / nh, p_f)
        out["fineo"] = richardson(g[nh], g[nc], nh / nc, p_f)
    else:
        p_f = float("nan")
    return out, p_c, p_f


def main():
    from fpirl import DensitySnapshots, PotentialEstimator
    from fpirl.uncertainty import posterior
    from fpirl.uncertainty._basis import coarse_refit, coarser_elements

    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default=",".join(str(i) for i in range(len(CASES))), help="indices into CASES")
    ap.add_argument("--noise", default="0,0.02")
    ap.add_argument("--nh", default="4,6")
    ap.add_argument("--seeds", default="1", help="noise seeds (each noisy case once per seed)")
    ap.add_argument("--gammas", action="store_true", help="also print gamma at every count")
    args = ap.parse_args()
    names = list(CASES)
    order = ("raw", "lib", "cur", "f3", "f3c", "p3", "p4", "mono", "loc", "fine", "fineo")
    errs = {k: {} for k in order}
    cover = {4: [], 6: []}
    print("| case | noise | n_h | p_obs (n_h-2..n_h) | p_obs (n_h-1..n_h+1) | "
          + " | ".join(order) + " | 90% interval | covers | refits s (n_h-1, n_h-2 / n_h+1) |")
    print("|" + "---|" * (8 + len(order)))
    for i in map(int, args.cases.split(",")):
        grid, times, clean, beta = _clean(names[i])
        for noise, seed in [(nz, sd) for nz in map(float, args.noise.split(","))
                            for sd in ([0] if not nz else map(int, args.seeds.split(",")))]:
            v = clean if not noise else np.clip(clean * (1 + noise * np.random.default_rng(seed).standard_normal(clean.shape)), 0, None)
            s = DensitySnapshots(grid, times, v)
            for nh in map(int, args.nh.split(",")):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    est = PotentialEstimator(hermite_elements=nh, estimate_beta=True).fit(s)
                    post = posterior(est, s)
                    lo, hi = post.beta_interval()
                    g = {nh: 1.0 / est.beta_}
                    periodic = est.hermite_.periodic
                    nc = coarser_elements(est.hermite_.elements, periodic)[0]
                    t0 = time.perf_counter()
                    for k in sorted({nh - 1, nh - 2, nc}):
                        f = coarse_refit(est, s, (k,) * grid.ndim)
                        if f is not None:
                            g[k] = 1.0 / f.beta_
                    t1 = time.perf_counter()
                    f = coarse_refit(est, s, (nh + 1,) * grid.ndim)
                    t2 = time.perf_counter()
                    if f is not None:
                        g[nh + 1] = 1.0 / f.beta_
                r, p_c, p_f = rules(g, nh, nc)
                r = {k: 1.0 / val for k, val in r.items()}
                r["lib"] = post.beta_corrected
                for k in order:
                    errs[k].setdefault(nh, []).append(abs(r[k] / beta - 1) if r.get(k) is not None else np.inf)
                cover.setdefault(nh, []).append(lo <= beta <= hi)
                if args.gammas:
                    print("gamma:", {k: round(v, 5) for k, v in sorted(g.items())})
                cells = [f"{100 * (r[k] / beta - 1):+.2f}%" if r.get(k) is not None else "-" for k in order]
                print(f"| {names[i]} | {100 * noise:.0f}%{f' s{seed}' if noise else ''} | {nh} | {p_c:.2f} | {p_f:.2f} | " + " | ".join(cells)
                      + f" | [{lo:.3f}, {hi:.3f}] | {'yes' if lo <= beta <= hi else 'NO'} | {t1 - t0:.1f} / {t2 - t1:.1f} |",
                      flush=True)
    print("\n| rule | n_h | median abs error | max abs error | within 3% | within 5% | closer than cur | closer / farther than lib |")
    print("|---|---|---|---|---|---|---|---|")
    for k in order:
        for nh in errs[k]:
            e = 100 * np.array(errs[k][nh])
            if len(e):
                print(f"| {k} | {nh} | {np.median(e):.2f}% | {e.max():.2f}% | {np.sum(e <= 3)}/{len(e)} | {np.sum(e <= 5)}/{len(e)} | "
                      f"{np.sum(e < 100 * np.array(errs['cur'][nh]) - 1e-9)}/{len(e)} | "
                      f"{np.sum(e < 100 * np.array(errs['lib'][nh]) - 1e-9)} / {np.sum(e > 100 * np.array(errs['lib'][nh]) + 1e-9)} |")
    for nh, c in cover.items():
        if c:
            print(f"interval covers at n_h = {nh}: {sum(c)}/{len(c)}")


if __name__ == "__main__":
    main()
