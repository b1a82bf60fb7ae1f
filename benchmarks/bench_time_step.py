"""Time step: the midpoint rule against Simpson's, and beta's interval with and without the time-step column.

Run:  PYTHONPATH=src .venv/bin/python benchmarks/bench_time_step.py [--dt-sweep [--skip N] | --rule | --rule-given |
      --validate [--given]]

Data from the independent solvers (finite volumes with walls, spectral when periodic) on a potential that is
not in the Hermite space, ``psi = a cos(u_0 + 0.3) + b cos(u_1 - 0.7) + 0.3 sin u_0 sin u_1`` (``u`` one period
across the box), from a von Mises bump, 25 snapshots, multiplicative noise. Each row: the library's default
fit with beta estimated (4 Hermite elements, midpoint rule), its posterior with the snapshots (the CLI's
``auto``), beta's 90% interval without and with the time-step column (:mod:`fpirl.uncertainty._time_step`), and
the same fit with Simpson's rule, and ``z``, the step between the two rules' ``1/beta`` in noise standard
deviations. ``--dt-sweep``: beta's error against the snapshot spacing for both rules
(one fine run subsampled; 12 Hermite elements, so that the time error dominates). ``--rule``: the rule that
makes the Simpson refit the point estimate (:func:`fpirl.uncertainty._time_step.simpson_point`) on 19 settings x 4
noise levels, its threshold scored on all of them and by two-fold cross-validation (about 12 minutes).
``--rule-given``: the same for beta given (psi's step, :data:`fpirl.uncertainty._time_step.TIME_STEP_MIN_Z_PSI`)
on those settings and 6 of a double well and a Gaussian mixture. ``--validate``: the rule as shipped against never switching on the 14 cases of ``bench_beta_coarse.py``, which
played no part in choosing it (``--given``: beta given, psi's rule).
"""

from __future__ import annotations

import sys
import warnings

import numpy as np

from fpirl import DensitySnapshots, Grid, PotentialEstimator
from fpirl.forward import simulate_density, von_mises_bump
from fpirl.uncertainty import posterior

# name, elements, lower, upper, boundary, beta, dt, noise
CASES = [
    ("walls 28^2, dt 0.2", (28, 28), (-3, -3), (3, 3), "reflecting", 1.0, 0.2, 0.0),
    ("walls 28^2, dt 0.2, 2%", (28, 28), (-3, -3), (3, 3), "reflecting", 1.0, 0.2, 0.02),
    ("walls 28^2, dt 0.2, 5%", (28, 28), (-3, -3), (3, 3), "reflecting", 1.0, 0.2, 0.05),
    ("walls 56^2, dt 0.2", (56, 56), (-3, -3), (3, 3), "reflecting", 1.0, 0.2, 0.0),
    ("walls 56^2, dt 0.2, 2%", (56, 56), (-3, -3), (3, 3), "reflecting", 1.0, 0.2, 0.02),
    ("walls 56^2, dt 0.05", (56, 56), (-3, -3), (3, 3), "reflecting", 1.0, 0.05, 0.0),
    ("periodic 56^2, dt 0.2", (56, 56), (-3, -3), (3, 3), "periodic", 1.0, 0.2, 0.0),
    ("walls 30x18, dt 0.02", (30, 18), (0, -1), (5, 2), "reflecting", 2.0, 0.02, 0.0),
    ("walls 30x18, dt 0.02, 2%", (30, 18), (0, -1), (5, 2), "reflecting", 2.0, 0.02, 0.02),
    ("walls 60x36, dt 0.02", (60, 36), (0, -1), (5, 2), "reflecting", 2.0, 0.02, 0.0),
    ("periodic 32^2, dt 0.02", (32, 32), (-1, -1), (1, 1), "periodic", 4.0, 0.02, 0.0),
    ("periodic 32^2, dt 0.02, 1%", (32, 32), (-1, -1), (1, 1), "periodic", 4.0, 0.02, 0.01),
    ("periodic 24^2, dt 0.1", (24, 24), (-1, -1), (1, 1), "periodic", 4.0, 0.1, 0.0),
]


def potential(lower, upper, scale=1.0, coupling=0.3):
    """``scale (0.6 cos(u_0 + 0.3) + 0.35 cos(u_1 - 0.7)) + coupling scale sin u_0 sin u_1``, ``u`` one period
    across the box."""
    lo, w = np.asarray(lower, float), 2 * np.pi / (np.asarray(upper, float) - np.asarray(lower, float))
    a0, a1, c = 0.6 * scale, 0.35 * scale, coupling * scale

    def psi(x):
        u = (x - lo) * w
        return a0 * np.cos(u[..., 0] + 0.3) + a1 * np.cos(u[..., 1] - 0.7) + c * np.sin(u[..., 0]) * np.sin(u[..., 1])

    def grad(x):
        u = (x - lo) * w
        return w * np.stack([-a0 * np.sin(u[..., 0] + 0.3) + c * np.cos(u[..., 0]) * np.sin(u[..., 1]),
                             -a1 * np.sin(u[..., 1] - 0.7) + c * np.sin(u[..., 0]) * np.cos(u[..., 1])], -1)
    return psi, grad


def double_well(a=1.0, k=0.8, c=0.3):
    """``a (x_0^2 - 0.6)^2 + k x_1^2 + c x_0 x_1``: two basins along the first axis (not periodic)."""

    def psi(x):
        return a * (x[..., 0] ** 2 - 0.6) ** 2 + k * x[..., 1] ** 2 + c * x[..., 0] * x[..., 1]

    def grad(x):
        return np.stack([4 * a * x[..., 0] * (x[..., 0] ** 2 - 0.6) + c * x[..., 1], 2 * k * x[..., 1] + c * x[..., 0]], -1)
    return psi, grad


def mixture(s=0.5):
    """``-log(N(m_1, s^2) + 0.7 N(m_2, s^2) + 0.05)`` (unnormalised Gaussians): two smooth basins."""
    m = np.array([[0.6, 0.3], [-0.5, -0.4]])

    def parts(x):
        e = np.stack([np.exp(-np.sum((x - mi) ** 2, -1) / (2 * s * s)) for mi in m], -1) * np.array([1.0, 0.7])
        return e, e.sum(-1) + 0.05

    def psi(x):
        return -np.log(parts(x)[1])

    def grad(x):
        e, z = parts(x)
        return sum(e[..., i, None] * (x - m[i]) for i in range(2)) / (s * s) / z[..., None]
    return psi, grad


def data(elements, lower, upper, boundary, beta, dt, noise, n_times=25, seed=1, kappa=1.0, scale=1.0, coupling=0.3,
         kind="cosines"):
    g = Grid(list(lower), list(upper), elements, boundary=boundary)
    psi, grad = {"cosines": lambda: potential(lower, upper, scale, coupling), "double well": double_well,
                 "mixture": mixture}[kind]()
    centre = np.asarray(lower) + (np.asarray(upper) - np.asarray(lower)) * np.array([0.65, 0.3])
    times = dt * np.arange(n_times)
    v = simulate_density(g, psi, grad, beta, von_mises_bump(g.lower, g.upper, centre, kappa), times)
    if noise:
        v = np.clip(v * (1 + noise * np.random.default_rng(seed).standard_normal(v.shape)), 0, None)
    true = psi(g.mesh())
    return DensitySnapshots(g, times, v), true - true.mean()


def psi_error(est, s, true):
    p = est.potential(s.grid.mesh().reshape(-1, s.grid.ndim)).reshape(true.shape)
    return float(np.linalg.norm(p - p.mean() - true) / np.linalg.norm(true))


def z_step(post, est, simpson) -> float:
    """``|gamma_midpoint - gamma_Simpson|`` in standard deviations of ``gamma`` under the snapshot noise alone
    (the factor's noise columns: all but the bias, resolution, basis and time-step columns)."""
    n_noise = post.factor.shape[1] - 1 - sum(c is not None for c in (post.resolution, post.basis, post.time_step))
    sd = float(np.sqrt(np.sum(post.factor[-1, :n_noise] ** 2)))
    return abs(1 / est.beta_ - 1 / simpson.beta_) / sd


def cases() -> None:
    print("| data | midpoint: beta | psi | 90% interval without the column | with it | Simpson: beta | psi | z |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, el, lo, hi, bc, beta, dt, noise in CASES:
        s, true = data(el, lo, hi, bc, beta, dt, noise)
        est = PotentialEstimator(hermite_elements=4, estimate_beta=True).fit(s)
        post = posterior(est, s, rng=0)
        without = type(post)(**{**post.__dict__, "factor": post.factor[:, :-1], "time_step": None})
        simpson = PotentialEstimator(hermite_elements=4, estimate_beta=True, time_scheme="simpson").fit(s)

        def interval(p):
            a, b = p.beta_interval()
            return f"[{a:.3f}, {b:.3f}] {'covers' if a <= beta <= b else '**misses**'}"

        print(f"| {name} | {100 * (est.beta_ / beta - 1):+.1f}% | {100 * psi_error(est, s, true):.1f}% | "
              f"{interval(without)} | {interval(post)} | {100 * (simpson.beta_ / beta - 1):+.1f}% | "
              f"{100 * psi_error(simpson, s, true):.1f}% | {z_step(post, est, simpson):.1f} |", flush=True)


def dt_sweep(skip: int = 0) -> None:
    """``skip``: leave out the first snapshots (the walls' boundary layer of a start that ignores them)."""
    print(f"| data | rule | beta error at dt = 16, 8, 4, 2, 1 x base (first {skip} snapshots left out) |")
    print("| --- | --- | --- |")
    for name, el, lo, hi, bc, beta, dt in (("walls 28^2", (28, 28), (-3, -3), (3, 3), "reflecting", 1.0, 0.0125),
                                           ("walls 30x18", (30, 18), (0, -1), (5, 2), "reflecting", 2.0, 0.00125)):
        s, _ = data(el, lo, hi, bc, beta, dt, 0.0, n_times=385 + skip)
        s = DensitySnapshots(s.grid, s.times[skip:], s.values[skip:])
        for rule in ("midpoint", "simpson"):
            out = []
            for k in (16, 8, 4, 2, 1):
                sub = DensitySnapshots(s.grid, s.times[::k], s.values[::k])
                e = PotentialEstimator(hermite_elements=12, estimate_beta=True, time_scheme=rule).fit(sub)
                out.append(f"{k * dt:.4g}: {100 * (e.beta_ / beta - 1):+.2f}%")
            print(f"| {name} | {rule} | {', '.join(out)} |", flush=True)


# the rule's sweep: name, elements, lower, upper, boundary, beta, dt, options (n_times, kappa, scale, coupling,
# hermite); each at 0, 1, 2 and 5% noise
SETTINGS = [
    ("anisotropic periodic", (20, 32), (0, -1), (2, 1), "periodic", 2.0, 0.02, {}),
    ("walls [-3,3]^2 28^2", (28, 28), (-3, -3), (3, 3), "reflecting", 1.0, 0.2, {}),
    ("cold periodic", (32, 32), (-1, -1), (1, 1), "periodic", 10.0, 0.02, {}),
    ("8 snapshots", (24, 24), (-1, -1), (1, 1), "periodic", 4.0, 0.02, {"n_times": 8}),
    ("near equilibrium", (24, 24), (-1, -1), (1, 1), "periodic", 4.0, 0.1, {"n_times": 30, "kappa": 0.2}),
    ("separable", (24, 24), (-1, -1), (1, 1), "periodic", 4.0, 0.02, {"coupling": 0.0}),
    ("walls 30^2, 6 elements", (30, 30), (-1, -1), (1, 1), "reflecting", 4.0, 0.02, {"hermite": 6}),
    ("periodic 24x30", (24, 30), (-1, -1), (1, 1), "periodic", 4.0, 0.02, {}),
    ("strong potential", (24, 24), (-1, -1), (1, 1), "periodic", 4.0, 0.02, {"scale": 3.0}),
    ("weak potential", (24, 24), (-1, -1), (1, 1), "periodic", 4.0, 0.02, {"scale": 0.1}),
    ("periodic 24^2", (24, 24), (-1, -1), (1, 1), "periodic", 4.0, 0.02, {}),
    ("periodic 40^2", (40, 40), (-1, -1), (1, 1), "periodic", 4.0, 0.02, {}),
    ("walls 30x18", (30, 18), (0, -1), (5, 2), "reflecting", 2.0, 0.02, {}),
    ("walls 30x18, 6 elements", (30, 18), (0, -1), (5, 2), "reflecting", 2.0, 0.02, {"hermite": 6}),
    ("walls 60x36", (60, 36), (0, -1), (5, 2), "reflecting", 2.0, 0.02, {}),
    ("walls 60x36, dt 0.005", (60, 36), (0, -1), (5, 2), "reflecting", 2.0, 0.005, {"n_times": 100}),
    ("walls [-3,3]^2 56^2", (56, 56), (-3, -3), (3, 3), "reflecting", 1.0, 0.2, {}),
    ("walls [-3,3]^2 56^2, dt 0.05", (56, 56), (-3, -3), (3, 3), "reflecting", 1.0, 0.05, {"n_times": 96}),
    ("periodic [-3,3]^2 56^2", (56, 56), (-3, -3), (3, 3), "periodic", 1.0, 0.2, {}),
]
THRESHOLDS = (0, 2, 4, 6, 8, 10, 16, 32, np.inf)
# the beta-given rule's sweep adds potentials unlike the cosines (same fields; kind in the options)
SETTINGS_GIVEN = SETTINGS + [
    ("double well 32^2", (32, 32), (-1.5, -1.5), (1.5, 1.5), "reflecting", 2.0, 0.02, {"kind": "double well"}),
    ("double well 32^2, dt 0.1", (32, 32), (-1.5, -1.5), (1.5, 1.5), "reflecting", 2.0, 0.1,
     {"kind": "double well", "n_times": 20}),
    ("double well 48^2, 6 elements", (48, 48), (-1.5, -1.5), (1.5, 1.5), "reflecting", 2.0, 0.02,
     {"kind": "double well", "hermite": 6}),
    ("mixture 32^2", (32, 32), (-1.5, -1.5), (1.5, 1.5), "reflecting", 1.5, 0.02, {"kind": "mixture"}),
    ("mixture 40^2, 6 elements", (40, 40), (-1.5, -1.5), (1.5, 1.5), "reflecting", 1.5, 0.02,
     {"kind": "mixture", "hermite": 6}),
    ("mixture 32^2, dt 0.1", (32, 32), (-1.5, -1.5), (1.5, 1.5), "reflecting", 1.5, 0.1,
     {"kind": "mixture", "n_times": 20}),
]


def _setting_data(setting, noise):
    name, el, lo, hi, bc, beta, dt, opt = setting
    return data(el, lo, hi, bc, beta, dt, noise, n_times=opt.get("n_times", 25), kappa=opt.get("kappa", 1.0),
                scale=opt.get("scale", 1.0), coupling=opt.get("coupling", 0.3), kind=opt.get("kind", "cosines"))


def rule_given() -> None:
    """Beta given: each setting of ``SETTINGS_GIVEN`` and noise level through ``uncertainty_and_point`` never switching
    and always switching; the rule ``z_psi > T`` scored on all and by two-fold cross-validation (psi's error)."""
    from fpirl.uncertainty import uncertainty_and_point
    import fpirl.uncertainty._time_step as ts

    shipped, rows = ts.TIME_STEP_MIN_Z_PSI, []
    print("| data | noise | z | midpoint: psi | Simpson: psi |")
    print("| --- | --- | --- | --- | --- |")
    for setting in SETTINGS_GIVEN:
        for noise in (0.0, 0.01, 0.02, 0.05):
            s, true = _setting_data(setting, noise)
            est = PotentialEstimator(hermite_elements=setting[7].get("hermite", 4), beta=setting[5]).fit(s)
            out = {}
            for tag, t in (("mid", np.inf), ("sw", 0.0)):
                ts.TIME_STEP_MIN_Z_PSI = t
                post, fit = uncertainty_and_point(est, "auto", s)
                out[tag] = psi_error(fit, s, true)
                out["z"] = post.time_step_z if tag == "mid" else out["z"]
            rows.append((out["z"] or 0.0, out["mid"], out["sw"]))
            print(f"| {setting[0]} | {noise:.0%} | {out['z'] or 0:.1f} | {100 * out['mid']:.1f}% | "
                  f"{100 * out['sw']:.1f}% |", flush=True)
    r = np.array(rows)

    def score(t, idx):
        p = np.where(r[idx, 0] > t, r[idx, 2], r[idx, 1])
        return 100 * p.mean(), 100 * np.median(p), int(np.sum(r[idx, 0] > t))

    print("\n| T | switched | psi: mean error | median |")
    print("| --- | --- | --- | --- |")
    for t in THRESHOLDS:
        p, med, n = score(t, np.arange(len(r)))
        print(f"| {t} | {n} | {p:.2f}% | {med:.2f}% |")
    rng, better = np.random.default_rng(0), [0, 0]
    for _ in range(10):
        perm = rng.permutation(len(r))
        for tr, te in ((perm[: len(r) // 2], perm[len(r) // 2:]), (perm[len(r) // 2:], perm[: len(r) // 2])):
            chosen = min(THRESHOLDS, key=lambda t: score(t, tr)[0])
            held, never, ours = score(chosen, te)[0], score(np.inf, te)[0], score(shipped, te)[0]
            better[0 if ours < never else 1] += 1
            print(f"chosen T={chosen}, held-out {held:.2f}% (T={shipped:g}: {ours:.2f}%, never: {never:.2f}%)")
    print(f"T={shipped:g} better / not better than never switching on the held-out halves: {better}")


def rule() -> None:
    """Each setting and noise level through ``uncertainty_and_point`` never switching and always switching (block
    means included); then the rule ``z > T`` (beta not from block means) scored on all cases and by two-fold
    cross-validation, and the same rule without the block condition."""
    from fpirl.uncertainty import uncertainty_and_point
    import fpirl.uncertainty._time_step as ts

    shipped = ts.TIME_STEP_MIN_Z
    rows = []
    print("| data | noise | z | block | midpoint: beta | psi | Simpson: beta | psi |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, el, lo, hi, bc, beta, dt, opt in SETTINGS:
        for noise in (0.0, 0.01, 0.02, 0.05):
            s, true = data(el, lo, hi, bc, beta, dt, noise, n_times=opt.get("n_times", 25), kappa=opt.get("kappa", 1.0),
                           scale=opt.get("scale", 1.0), coupling=opt.get("coupling", 0.3))
            est = PotentialEstimator(hermite_elements=opt.get("hermite", 4), estimate_beta=True).fit(s)
            out = {}
            for tag, t in (("mid", np.inf), ("sw", 0.0)):
                ts.TIME_STEP_MIN_Z, ts.SWITCH_WITH_BLOCK_MEANS = t, tag == "sw"  # the score applies the block condition
                post, fit = uncertainty_and_point(est, "auto", s)
                out[tag] = (abs(fit.beta_ / beta - 1), psi_error(fit, s, true))
                out["z"] = post.time_step_z if tag == "mid" else out["z"]
            block = int(getattr(est, "beta_coarsening_", 1))
            rows.append((out["z"] or 0.0, block, *out["mid"], *out["sw"]))
            print(f"| {name} | {noise:.0%} | {out['z'] or 0:.1f} | {block} | {100 * out['mid'][0]:.1f}% | "
                  f"{100 * out['mid'][1]:.1f}% | {100 * out['sw'][0]:.1f}% | {100 * out['sw'][1]:.1f}% |", flush=True)
    r = np.array(rows)

    def score(t, idx, any_block=False):
        sw = (r[idx, 0] > t) & ((r[idx, 1] == 1) | any_block)
        b, p = np.where(sw, r[idx, 4], r[idx, 2]), np.where(sw, r[idx, 5], r[idx, 3])
        return 100 * b.mean(), 100 * p.mean(), 100 * np.median(b), np.mean(b <= 0.03), int(sw.sum())

    print("\n| T | switched | beta: mean error | median | within 3% | psi: mean error |")
    print("| --- | --- | --- | --- | --- | --- |")
    for t in THRESHOLDS:
        b, p, med, w3, n = score(t, np.arange(len(r)))
        print(f"| {t} | {n} | {b:.2f}% | {med:.2f}% | {w3:.2f} | {p:.2f}% |")
    rng, better = np.random.default_rng(0), {0: [0, 0], 1: [0, 0]}
    for _ in range(10):  # two-fold cross-validation, 10 random splits: the shipped T against never switching
        perm = rng.permutation(len(r))
        for tr, te in ((perm[: len(r) // 2], perm[len(r) // 2:]), (perm[len(r) // 2:], perm[: len(r) // 2])):
            for k in (0, 1):
                chosen = min(THRESHOLDS, key=lambda t: score(t, tr)[k])
                held, never, ours = score(chosen, te)[k], score(np.inf, te)[k], score(shipped, te)[k]
                better[k][0 if ours < never else 1] += 1
                print(f"{('beta', 'psi')[k]}: chosen T={chosen}, held-out {held:.2f}% (T={shipped:g}: {ours:.2f}%, "
                      f"never: {never:.2f}%)")
    print(f"T={shipped:g} better / not better than never switching on the held-out halves: beta {better[0]}, "
          f"psi {better[1]}")
    print("\nwithout the block condition:\n| T | switched | beta: mean error | median | within 3% | psi: mean error |")
    print("| --- | --- | --- | --- | --- | --- |")
    for t in THRESHOLDS:
        b, p, med, w3, n = score(t, np.arange(len(r)), True)
        print(f"| {t} | {n} | {b:.2f}% | {med:.2f}% | {w3:.2f} | {p:.2f}% |")


def validate(given: bool = False) -> None:
    """The rule as shipped (``TIME_STEP_MIN_Z``, block condition) against never switching on the 14 cases of
    ``bench_beta_coarse.py``, 0/1/2/5% noise, 4 and 6 Hermite elements (with ``--min-z T``: that threshold;
    ``given``: beta given, ``TIME_STEP_MIN_Z_PSI``)."""
    import os

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import bench_beta_coarse
    import bench_beta_refit
    import bench_beta_rule
    import fpirl.uncertainty._time_step as ts
    from fpirl.uncertainty import uncertainty_and_point

    bench_beta_rule.CASES = bench_beta_coarse.CASES
    attr = "TIME_STEP_MIN_Z_PSI" if given else "TIME_STEP_MIN_Z"
    rows, shipped = [], getattr(ts, attr)
    for name in bench_beta_coarse.CASES:
        grid, times, clean, beta = bench_beta_rule._clean(name)
        true = bench_beta_refit._truth(name, grid)
        for noise in (0.0, 0.01, 0.02, 0.05):
            eps = np.random.default_rng(1).standard_normal(clean.shape)
            v = clean if not noise else np.clip(clean * (1 + noise * eps), 0, None)
            s = DensitySnapshots(grid, times, v)
            for nh in (4, 6):
                est = PotentialEstimator(hermite_elements=nh, **({"beta": beta} if given else {"estimate_beta": True}))
                est.fit(s)
                out = []
                for t in (np.inf, shipped):
                    setattr(ts, attr, t)
                    post, fit = uncertainty_and_point(est, "auto", s)
                    lo, hi = post.beta_interval() if not given else (beta, beta)
                    out += [abs(fit.beta_ / beta - 1), bench_beta_refit._error(grid, fit, true), lo <= beta <= hi]
                rows.append(out)
                if fit.settings_.get("time_scheme_switched"):
                    print(f"switched: {name}, {noise:.0%}, {nh} elements, z = {post.time_step_z:.1f}: beta "
                          f"{100 * out[0]:.1f}% -> {100 * out[3]:.1f}%, psi {100 * out[1]:.1f}% -> {100 * out[4]:.1f}%",
                          flush=True)
    r = np.array(rows, dtype=float)
    k = 1 if given else 0  # beta given: the switch shows in psi
    print(f"\n{len(r)} fits, {int(np.sum(r[:, k] != r[:, k + 3]))} switched")
    print("| rule | beta: mean error | median | within 3% | psi: mean error | median | beta interval covers |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for label, k in (("never", 0), (f"T = {shipped:g}", 3)):
        b, p = 100 * r[:, k], 100 * r[:, k + 1]
        print(f"| {label} | {b.mean():.2f}% | {np.median(b):.2f}% | {np.mean(b <= 3):.2f} | {p.mean():.2f}% | "
              f"{np.median(p):.2f}% | {r[:, k + 2].mean():.2f} |")


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    args = sys.argv[1:]
    skip = int(args[args.index("--skip") + 1]) if "--skip" in args else 0
    if "--min-z" in args:
        import fpirl.uncertainty._time_step as ts

        ts.TIME_STEP_MIN_Z = float(args[args.index("--min-z") + 1])
    if "--dt-sweep" in args:
        dt_sweep(skip)
    else:
        if "--validate" in args:
            validate(given="--given" in args)
        else:
            (rule_given if "--rule-given" in args else rule if "--rule" in args else cases)()

