"""Uncertainty (issue 10): calibration of the posterior, beta's basis error, cost of the posterior.

Run:  .venv/bin/python benchmarks/bench_uncertainty.py [--quick] [--scheduler local|tcp://HOST:PORT]
      (--scheduler: the calibration data sets are fitted as Dask tasks, fpirl.distributed.sweep;
      the data are drawn here from the same seeds, so the numbers equal the serial run's)

1. Calibration: mean fraction of FE nodes whose 90% interval covers the true psi, over 30 seeded
   data sets per row: 1-D periodic density data from the spectral solver with independent
   multiplicative noise ``p (1 + s eps)`` (s = 2% ... 30%), and 1-D tracks (Euler-Maruyama,
   40 tracks x 50 steps) through the increments estimator.
2. beta and the basis error: 2-D periodic density data from the spectral solver (96^2 points,
   beta = 4, 31 snapshots, 32^2 FE grid), psi a trigonometric sum (outside every Hermite space) or
   psi inside the 6-element Hermite space; beta estimated with n_h = 3, 4, 6, 8 (12) elements,
   the interval of the noise model alone and the interval widened by the coarse refit.
3. Cost: posterior, potential_std and 200-draw policy/reward bands for a 2-D and a 4-D fit.
4. Snapshot noise (``--only snapshot``): the data sets of part 1, the row model
   (``density_posterior``) beside the snapshot-noise model (``fpirl.uncertainty._snapshot_noise``, 64 draws):
   coverage, std / error, 90% half-width, the recovered noise level; and the snapshot-noise
   posterior of a 2-D fit on the assembled and on the matrix-free path.
   (``--only calibration|beta|cost`` runs one of parts 1-3.)
5. Default fit vs bare fit vs GEMM (``--only default``, issue 20): one 4096^3 float64 GEMM, then
   ``fpirl fit --uncertainty none`` and the default ``fpirl fit`` (posterior, potential_std and the
   policy/reward bands) on a 4-D state-action density file (15^4 nodes, 50 snapshots, 4 Hermite
   elements per axis, beta given), each in a fresh process, side by side in one run; wall seconds,
   peak RSS and the load average. ``--dims 4,5`` adds the 5-D case (8^5 nodes, 3 elements, 20
   snapshots: the exact matrix-free path). ``--data smooth|fp|fp-noise`` picks the 4-D density (also for
   part 7): ``smooth`` (default; a smooth density with two time modes, which the time-mode
   compression of the assembly and the posterior turns into two passes), ``fp`` (Fokker-Planck
   snapshots from the spectral solver, ~25 time modes above 1e-13) or ``fp-noise`` (the same with 2%
   multiplicative noise: all 50 modes, as for measured data).
6. The Hermite basis error (``--only basis``, issue 20): 12 seeded 2-D sets (spectral solver,
   trigonometric psi, beta = 4 given, 31 snapshots, 32^2 nodes, 5% multiplicative noise): coverage
   of the 90% band at 4 and 8 Hermite elements and at the cross-validated ``'auto'`` with and without the basis
   column; and the noise-free
   data of part 2 with beta estimated: raw and corrected beta, interval.
7. The bare fit against GEMM (``--only bare [--before SRC] [--rounds N]``, issue 20): the 4-D case of
   part 5, GEMM / ``fit --uncertainty none`` / GEMM in fresh processes, N rounds; ``--before SRC``
   also times another fpirl source tree (e.g. an older commit's ``src``) in the same rounds.
   Parts 5 and 7 run their children as a default Python does, with the bytecode cache (a warm-up child writes
   it first; ``PYTHONDONTWRITEBYTECODE``, set on some machines, is dropped from their environment: with it
   every process compiles fpirl's modules again); ``--no-bytecode-cache`` keeps it.
8. Beta from noisy density snapshots (``--only beta-noise``, issue 20): the clean data of part 6
   (trigonometric psi, beta = 4) and 2-D finite-volume data with walls (97^2 points, 33^2 nodes,
   beta = 4) with 0, 1, 2, 5% multiplicative noise (seeds 0..3), beta estimated
   at 4 and 6 Hermite elements by plain least squares (``correct_noise=False``) and by the default
   corrected least squares (:mod:`fpirl.weakform.noise_bias`); the posterior's beta interval
   (``posterior(est, s).beta_interval()``) and whether it covers 4.
9. Beta estimated on coarse 4-D grids (``--only beta-4d``, issue 20, twenty-third pass): the 4-D data of part 5
   (``fp``: spectral solver on 16^4 points, beta = 5) on 8^4, 10^4 and 12^4 nodes, 20 snapshots, noise-free and 2%
   multiplicative noise, ``fpirl fit --estimate-beta`` with its defaults (in-process): beta, its interval, whether it
   covers 5, whether the intervals hold the grid's discretisation error (``uncertainty_resolution``), and the wall
   time.
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))


def _density_set(case):
    """Coverage and std / error of one noisy density data set (one task of the calibration sweep)."""
    from fpirl import DensitySnapshots, PotentialEstimator
    from fpirl.uncertainty import density_posterior

    grid, times, v, beta, true = case
    est = PotentialEstimator(hermite_elements=3, beta=beta).fit(DensitySnapshots(grid, times, v))
    post = density_posterior(est)
    sd = post.potential_std(grid.coords)
    err = est.potential_on_grid() - true
    return np.mean(np.abs(err) <= post.quantile(0.95) * sd), sd.mean() / np.sqrt(np.mean(err**2))


def _tracks_set(case):
    """Coverage, std / error and whether beta's interval covers 2 for one track data set (one task)."""
    from fpirl.estimators import IncrementsEstimator
    from fpirl.uncertainty import increments_posterior

    tracks, h, coef = case
    est = IncrementsEstimator(hermite_elements=4, ridge=1e-6).fit(tracks)
    post = increments_posterior(est)
    sd = post.potential_std(est.grid_.coords)
    err = est.potential_on_grid() - h.evaluate_grid(coef, est.grid_.coords)
    lo, hi = post.beta_interval()
    return np.mean(np.abs(err) <= post.quantile(0.95) * sd), sd.mean() / np.sqrt(np.mean(err**2)), lo <= 2.0 <= hi


def calibration(n_sets, scheduler=None):
    from _simtracks import table_from_paths

    from fpirl.distributed import sweep
    from fpirl.core.hermite import HermiteSpace
    from fpirl.problems.synthetic import Problem
    from fpirl.forward.markov import sample_sde

    pb = Problem(1, "periodic", dt=0.01, steps=40)
    base = pb.snapshots(32)
    grid = base.grid
    true = pb.hermite.evaluate_grid(pb.coef, grid.coords)
    print("| data | noise | mean coverage of the 90% interval | min over sets | mean std / rms error |")
    print("| --- | --- | --- | --- | --- |")
    for level in (0.02, 0.05, 0.1, 0.2, 0.3):
        rng = np.random.default_rng(0)
        sets = [(grid, base.times, np.clip(base.values * (1 + level * rng.standard_normal(base.values.shape)), 0, None),
                 pb.beta, true) for _ in range(n_sets)]
        cover, ratio = zip(*sweep(_density_set, sets, scheduler=scheduler))
        print(f"| density, 1-D, K = 40 | {level:.0%} multiplicative | {np.mean(cover):.3f} | {np.min(cover):.2f} | "
              f"{np.median(ratio):.1f} |", flush=True)
    h = HermiteSpace([-1.0], [1.0], 4, True)
    coef = h.remove_mean(h.interpolate(
        lambda x, a: np.cos(np.pi * x[..., 0] + 0.3) if a == (0,) else -np.pi * np.sin(np.pi * x[..., 0] + 0.3)))
    rng = np.random.default_rng(1)
    sets = []
    for _ in range(n_sets):  # drawn here, in the serial order of the seed: the same data on every scheduler
        paths = sample_sde(lambda x: h.gradient(coef, x), 2.0, rng.uniform(-1, 1, (40, 1)), 0.01, 50, rng,
                           [-1.0], [1.0], "periodic")
        sets.append((table_from_paths(paths, 0.01, ["x"], ["state"], [-1.0], [1.0], "periodic"), h, coef))
    cover, ratio, bcover = zip(*sweep(_tracks_set, sets, scheduler=scheduler))
    print(f"| tracks, increments, 1-D | Euler-Maruyama | {np.mean(cover):.3f} | {np.min(cover):.2f} | "
          f"{np.median(ratio):.1f} |  (beta interval covers in {np.mean(bcover):.0%} of the sets)", flush=True)


def beta_bias(quick):
    from fpirl import DensitySnapshots, Grid, PotentialEstimator
    from fpirl.forward import SpectralSolver, von_mises_bump
    from fpirl.core.hermite import HermiteSpace
    from fpirl.problems.synthetic import smooth_function
    from fpirl.uncertainty import density_posterior, posterior

    beta = 4.0
    f = smooth_function(2, True)
    times = 0.02 * np.arange(31)
    init = von_mises_bump([-1, -1], [1, 1], [0.4, -0.3], 1.5)
    h6 = HermiteSpace([-1, -1], [1, 1], 6, True)
    c6 = h6.interpolate(f)
    cases = [("trigonometric psi", lambda x: np.stack([f(x, (1, 0)), f(x, (0, 1))], -1), (3, 4, 6, 8)),
             ("psi in the 6-element space", lambda x: h6.gradient(c6, x), (3, 4, 6, 12))]
    print("| psi | n_h | beta | bias | noise-model 90% interval | widened interval | covers 4 |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for label, grad, nhs in cases:
        solver = SpectralSolver([-1, -1], [1, 1], 48 if quick else 96, grad, beta)
        vals = solver.solve(init, times)
        grid = Grid([-1, -1], [1, 1], 24 if quick else 32, boundary="periodic")
        s = DensitySnapshots(grid, times, np.clip(solver.evaluate(vals, grid.coords), 0, None))
        for nh in nhs[:3] if quick else nhs:
            est = PotentialEstimator(hermite_elements=nh, estimate_beta=True).fit(s)
            lo0, hi0 = density_posterior(est).beta_interval()
            lo, hi = posterior(est, s).beta_interval()
            print(f"| {label} | {nh} | {est.beta_:.4f} | {100 * (est.beta_ / beta - 1):+.2f}% | [{lo0:.4f}, {hi0:.4f}] | "
                  f"[{lo:.4f}, {hi:.4f}] | {'yes' if lo <= beta <= hi else 'NO'} |", flush=True)


def cost(quick):
    from fpirl import DensitySnapshots, Grid, PotentialEstimator
    from fpirl.uncertainty import estimate_uncertainty, uncertainty_extra
    from fpirl.workflows import recover_mdp_from_fit

    cases = [(2, 64, 8), (4, 10 if quick else 14, 3)]
    print("| d | FE nodes | Hermite coef | fit s | posterior s | potential_std + 200-draw bands s |")
    print("| --- | --- | --- | --- | --- | --- |")
    for d, n, nh in cases:
        names = tuple(f"s{i}" for i in range(d // 2)) + tuple(f"a{i}" for i in range(d - d // 2))
        roles = ("state",) * (d // 2) + ("action",) * (d - d // 2)
        grid = Grid([-1.0] * d, [1.0] * d, n, names=names, roles=roles)
        x = grid.mesh()
        t = 0.02 * np.arange(11)
        base = np.exp(-np.sum(np.cos(np.pi * x) * 0.5, axis=-1))
        values = base[None] * (1 + 0.2 * np.exp(-t)[(slice(None),) + (None,) * d] * np.cos(np.pi * x[..., 0])[None])
        s = DensitySnapshots(grid, t, values)
        t0 = time.perf_counter()
        est = PotentialEstimator(hermite_elements=nh, beta=2.0).fit(s)
        t1 = time.perf_counter()
        post = estimate_uncertainty(est, "posterior", s)
        t2 = time.perf_counter()
        recover_mdp_from_fit(est, s.dt, 0.9)
        uncertainty_extra(est, post, s.dt, 0.9, n_samples=200)
        t3 = time.perf_counter()
        print(f"| {d} | {grid.size} | {est.hermite_.n_coef} | {t1 - t0:.2f} | {t2 - t1:.2f} | {t3 - t2:.2f} |", flush=True)


def snapshot_noise(n_sets):
    from fpirl import DensitySnapshots, PotentialEstimator
    from fpirl.uncertainty._snapshot_noise import snapshot_posterior
    from fpirl.problems.synthetic import Problem
    from fpirl.uncertainty import density_posterior

    pb = Problem(1, "periodic", dt=0.01, steps=40)
    base = pb.snapshots(32)
    grid = base.grid
    true = pb.hermite.evaluate_grid(pb.coef, grid.coords)
    print("| noise | row model: coverage | std / error | 90% half-width | snapshot model: coverage | min over sets "
          "| std / error | 90% half-width | sigma | shape | s per posterior |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for level in (0.02, 0.05, 0.1, 0.2, 0.3):
        rng = np.random.default_rng(0)  # the data sets of calibration()
        st = {k: [] for k in ("c0", "r0", "w0", "c1", "r1", "w1", "sig", "mult", "t")}
        for k in range(n_sets):
            v = np.clip(base.values * (1 + level * rng.standard_normal(base.values.shape)), 0, None)
            s = DensitySnapshots(grid, base.times, v)
            est = PotentialEstimator(hermite_elements=3, beta=pb.beta).fit(s)
            err = est.potential_on_grid() - true
            t0 = time.perf_counter()
            new = snapshot_posterior(est, s, rng=k)
            st["t"].append(time.perf_counter() - t0)
            for tag, post in (("0", density_posterior(est)), ("1", new)):
                half = post.quantile(0.95) * post.potential_std(grid.coords)
                st["c" + tag].append(np.mean(np.abs(err) <= half))
                st["r" + tag].append(half.mean() / post.quantile(0.95) / np.sqrt(np.mean(err**2)))
                st["w" + tag].append(half.mean())
            st["sig"].append(np.sqrt(new.noise_variance))
            st["mult"].append(new.noise_model == "multiplicative")
        m = {k: np.mean(v) for k, v in st.items()}
        print(f"| {level:.0%} | {m['c0']:.3f} | {np.median(st['r0']):.2f} | {m['w0']:.4f} | {m['c1']:.3f} "
              f"| {np.min(st['c1']):.2f} | {np.median(st['r1']):.2f} | {m['w1']:.4f} | {m['sig']:.3f} "
              f"| {m['mult']:.0%} multiplicative | {m['t']:.3f} |", flush=True)
    print(f"(rms of the true psi: {np.sqrt(np.mean(true**2)):.4f})")
    pb2 = Problem(2, "periodic", hermite_elements=2, steps=10)
    s2 = pb2.snapshots(24)
    rng = np.random.default_rng(0)
    s2 = DensitySnapshots(s2.grid, s2.times, s2.values * (1 + 0.05 * rng.standard_normal(s2.values.shape)))
    print("| 2-D, 24^2 nodes, 10 pairs, 4 elements, beta estimated | fit s | snapshot posterior s | draws | "
          "median std ratio to assembled |")
    print("| --- | --- | --- | --- | --- |")
    ref = None
    for solver in ("assembled", "matrix-free"):
        t0 = time.perf_counter()
        est = PotentialEstimator(hermite_elements=4, estimate_beta=True, solver=solver).fit(s2)
        t1 = time.perf_counter()
        post = snapshot_posterior(est, s2)
        t2 = time.perf_counter()
        sd = post.potential_std(s2.grid.coords)
        ref = sd if ref is None else ref
        print(f"| {solver} | {t1 - t0:.2f} | {t2 - t1:.2f} | {post.factor.shape[1] - 1} | {np.median(sd / ref):.3f} |",
              flush=True)


def basis_error(n_sets=12):
    from fpirl import DensitySnapshots, Grid, PotentialEstimator
    from fpirl.forward import SpectralSolver, von_mises_bump
    from fpirl.core.hermite import HermiteSpace
    from fpirl.problems.synthetic import smooth_function
    from fpirl.uncertainty import posterior
    from fpirl.uncertainty._basis import beta_order, coarse_refit

    beta = 4.0
    f = smooth_function(2, True)
    times = 0.02 * np.arange(31)
    init = von_mises_bump([-1, -1], [1, 1], [0.4, -0.3], 1.5)
    grid = Grid([-1, -1], [1, 1], 32, boundary="periodic")
    h6 = HermiteSpace([-1, -1], [1, 1], 6, True)
    c6 = h6.interpolate(f)
    grads = {"trigonometric psi": lambda x: np.stack([f(x, (1, 0)), f(x, (0, 1))], -1),
             "psi in the 6-element space": lambda x: h6.gradient(c6, x)}
    data = {}
    for label, grad in grads.items():
        solver = SpectralSolver([-1, -1], [1, 1], 96, grad, beta)
        data[label] = np.clip(solver.evaluate(solver.solve(init, times), grid.coords), 0, None)
    clean = data["trigonometric psi"]
    true = f(grid.mesh(), (0, 0))
    true = true - grid.integrate(true) / grid.volume
    print("| n_h | coverage with the basis column (mean, min over sets) | without | s |")
    print("| --- | --- | --- | --- |")
    for nh in (4, 8, "auto"):  # auto: the elements the cross-validation chose (fpirl.estimators.hermite_cv)
        c1, c0, chosen = [], [], []
        t0 = time.perf_counter()
        for seed in range(n_sets):
            rng = np.random.default_rng(seed)
            s = DensitySnapshots(grid, times, clean * (1 + 0.05 * rng.standard_normal(clean.shape)))
            est = PotentialEstimator(hermite_elements=nh, beta=beta).fit(s)
            chosen.append(int(est.hermite_.elements[0]))
            post = posterior(est, s, rng=seed)
            q = post.quantile(0.95)
            err = np.abs(est.potential_on_grid() - true)
            c1.append(np.mean(err <= q * post.potential_std(grid.coords)))
            post.factor = post.factor[:, :-1]
            c0.append(np.mean(err <= q * post.potential_std(grid.coords)))
        label = nh if nh != "auto" else "auto (" + ", ".join(f"{n}: {chosen.count(n)}" for n in sorted(set(chosen))) + ")"
        print(f"| {label} | {np.mean(c1):.3f}, {np.min(c1):.2f} | {np.mean(c0):.3f}, {np.min(c0):.2f} | "
              f"{time.perf_counter() - t0:.0f} |", flush=True)
    print("| psi | n_h | beta (raw) | order p | beta_corrected | 90% interval | covers 4 |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for label, values in data.items():
        s = DensitySnapshots(grid, times, values)
        for nh in (3, 4, 5, 6, 8, 10):
            est = PotentialEstimator(hermite_elements=nh, estimate_beta=True).fit(s)
            post = posterior(est, s)
            lo, hi = post.beta_interval()
            bc = post.beta_corrected
            order = beta_order(est, coarse_refit(est, s), s)  # the order beta_corrected used (refits again)
            print(f"| {label} | {nh} | {est.beta_:.4f} ({100 * (est.beta_ / beta - 1):+.2f}%) | {order:.2f} | "
                  f"{bc:.4f} ({100 * (bc / beta - 1):+.2f}%) | [{lo:.4f}, {hi:.4f}] | {'yes' if lo <= beta <= hi else 'NO'} |",
                  flush=True)


def beta_noise(n_seeds=4):
    import warnings

    from fpirl import DensitySnapshots, Grid, PotentialEstimator
    from fpirl.forward import SpectralSolver, von_mises_bump
    from fpirl.forward.finite_volume import FiniteVolumeSolver
    from fpirl.problems.synthetic import smooth_function
    from fpirl.uncertainty import posterior

    beta = 4.0
    times = 0.02 * np.arange(31)
    f = smooth_function(2, True)
    grid = Grid([-1, -1], [1, 1], 32, boundary="periodic")
    solver = SpectralSolver([-1, -1], [1, 1], 96, lambda x: np.stack([f(x, (1, 0)), f(x, (0, 1))], -1), beta)
    sets = {"spectral, periodic": (grid, np.clip(solver.evaluate(
        solver.solve(von_mises_bump([-1, -1], [1, 1], [0.4, -0.3], 1.5), times), grid.coords), 0, None))}
    fb = smooth_function(2, False)
    walls = Grid([-1, -1], [1, 1], 32, boundary="reflecting")
    fv = FiniteVolumeSolver([-1, -1], [1, 1], 97, lambda x: fb(x, (0, 0)), beta)
    x = np.stack(np.meshgrid(*[np.linspace(-1, 1, 97)] * 2, indexing="ij"), -1)
    p0 = np.exp(-6 * np.sum((x - np.array([0.4, -0.3])) ** 2, -1)) + 0.05
    sets["finite volume, walls"] = (walls, np.clip(fv.evaluate(fv.solve(p0, times), walls.coords), 0, None))
    print("| data | noise | n_h | beta, plain LS (mean) | corrected LS alone: mean, sd | default: per seed | mean, sd "
          "| block | beta_corrected (mean) | 90% interval (per seed) | covers 4 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for label, (grid, clean) in sets.items():
        for level in (0.0, 0.01, 0.02, 0.05):
            for nh in (4, 6):
                raw, alone, corr, bc, iv, cov = [], [], [], [], [], 0
                seeds = range(n_seeds if level else 1)
                for seed in seeds:
                    rng = np.random.default_rng(seed)
                    s = DensitySnapshots(grid, times, clean * (1 + level * rng.standard_normal(clean.shape)))
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        raw.append(PotentialEstimator(hermite_elements=nh, estimate_beta=True, correct_noise=False)
                                   .fit(s).beta_)
                        alone.append(PotentialEstimator(hermite_elements=nh, estimate_beta=True, beta_block=1)
                                     .fit(s).beta_)  # no block means
                        est = PotentialEstimator(hermite_elements=nh, estimate_beta=True).fit(s)
                        post = posterior(est, s, rng=seed)
                    lo, hi = post.beta_interval()
                    corr.append(est.beta_)
                    block = est.beta_coarsening_
                    bc.append(post.beta_corrected if post.beta_corrected is not None else np.nan)
                    iv.append(f"[{lo:.2f}, {hi:.2f}]")
                    cov += lo <= beta <= hi
                print(f"| {label} | {level:.0%} | {nh} | {np.mean(raw):.3f} ({100 * (np.mean(raw) / beta - 1):+.0f}%) | "
                      f"{np.mean(alone):.3f}, {np.std(alone):.2f} | "
                      f"{', '.join(f'{b:.2f}' for b in corr)} | {np.mean(corr):.3f} "
                      f"({100 * (np.mean(corr) / beta - 1):+.1f}%), {np.std(corr):.2f} | {block} | "
                      f"{np.nanmean(bc):.3f} ({100 * (np.nanmean(bc) / beta - 1):+.1f}%) | "
                      f"{' '.join(iv)} | {cov}/{len(seeds)} |", flush=True)
    # clean data with coarse time steps: the variance estimate must not take signal for noise
    print("| dt | snapshots | elements | spectral, periodic: beta plain -> corrected | finite volume, walls |")
    print("| --- | --- | --- | --- | --- |")
    for dt, n_t in ((0.02, 31), (0.05, 12), (0.1, 8), (0.2, 5)):
        t = dt * np.arange(n_t)
        for el in (16, 32):
            out = []
            for g, vals in ((Grid([-1, -1], [1, 1], el, boundary="periodic"), None),
                            (Grid([-1, -1], [1, 1], el, boundary="reflecting"), None)):
                if g.periodic:
                    vals = solver.evaluate(solver.solve(von_mises_bump([-1, -1], [1, 1], [0.4, -0.3], 1.5), t), g.coords)
                else:
                    vals = fv.evaluate(fv.solve(p0, t), g.coords)
                s = DensitySnapshots(g, t, np.clip(vals, 0, None))
                a = PotentialEstimator(hermite_elements=4, estimate_beta=True, correct_noise=False).fit(s).beta_
                b = PotentialEstimator(hermite_elements=4, estimate_beta=True).fit(s).beta_
                out.append(f"{a:.4f} -> {b:.4f} ({100 * (b / a - 1):+.2f}%)")
            print(f"| {dt} | {n_t} | {el}^2 | {out[0]} | {out[1]} |", flush=True)


def _fp_snapshots(d, n, n_times, points=24, beta=5.0, noise=0.0, **grid_kw):
    """Fokker-Planck snapshots from the independent spectral solver (periodic ``[-1, 1]^d``,
    ``psi`` a separable-plus-product trigonometric sum,
    a von Mises bump at t = 0, ``points`` collocation points per axis, dt = 0.02), on ``n`` FE nodes per
    axis, times ``(1 + noise eps)``. Unlike :func:`bench_fit.smooth_snapshots` (two time modes) the clean
    snapshots have ~25 time modes above 1e-13 of the largest, the noisy ones all 50."""
    from fpirl import DensitySnapshots, Grid
    from fpirl.forward import SpectralSolver, von_mises_bump

    amp, phase = np.array([0.6, 0.35, 0.25, 0.3, 0.2, 0.15])[:d], np.array([0.3, -0.7, 1.1, 0.5, -0.2, 0.8])[:d]

    def grad(x):  # psi = sum_b amp_b cos(pi x_b + phase_b) + 0.2 prod_b sin(pi x_b)
        s, c = np.sin(np.pi * x), np.cos(np.pi * x)
        prod = [0.2 * np.pi * c[..., a] * np.prod(np.delete(s, a, axis=-1), axis=-1) for a in range(d)]
        return -amp * np.pi * np.sin(np.pi * x + phase) + np.stack(prod, -1)

    solver = SpectralSolver([-1] * d, [1] * d, points, grad, beta)
    times = 0.02 * np.arange(n_times)
    init = von_mises_bump([-1] * d, [1] * d, [0.4, -0.3, 0.2, -0.1, 0.3, 0.0][:d], 1.5)
    grid = Grid([-1.0] * d, [1.0] * d, n, boundary="periodic", **grid_kw)
    values = np.clip(solver.evaluate(solver.solve(init, times), grid.coords), 0, None)
    if noise:  # independent multiplicative noise: every snapshot its own direction (full time rank)
        values = values * (1 + noise * np.random.default_rng(0).standard_normal(values.shape))
    return DensitySnapshots(grid, times, values)


def _state_action_file(path, d, n, n_times, data="smooth"):
    """A periodic density file on a state-action grid (half state, half action axes): ``data='smooth'``
    (:func:`bench_fit.smooth_snapshots`, two time modes), ``'fp'`` (:func:`_fp_snapshots`) or ``'fp-noise'``
    (the same with 2% multiplicative noise)."""
    from bench_fit import smooth_snapshots

    from fpirl.io.netcdf import write_density

    names = tuple(f"s{i}" for i in range(d // 2)) + tuple(f"a{i}" for i in range(d - d // 2))
    roles = ("state",) * (d // 2) + ("action",) * (d - d // 2)
    if data == "smooth":
        snaps = smooth_snapshots(d, n, n_times, names=names, roles=roles)
    else:
        snaps = _fp_snapshots(d, n, n_times, noise=0.02 if data == "fp-noise" else 0.0, names=names, roles=roles)
    write_density(path, snaps)


def beta_4d():
    import tempfile

    import xarray as xr

    from fpirl.cli import main as cli
    from fpirl.io.netcdf import write_density

    print("| nodes | noise | beta | error | 90% interval | covers 5 | uncertainty_resolution | basis corrected | wall s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for n in (8, 10, 12):
            for noise in (0.0, 0.02):
                path, out = os.path.join(tmp, "d.nc"), os.path.join(tmp, "r.nc")
                write_density(path, _fp_snapshots(4, n, 20, points=16, noise=noise, names=("s0", "s1", "a0", "a1"),
                                                  roles=("state", "state", "action", "action")))
                t0 = time.perf_counter()
                assert cli(["fit", path, "-o", out, "--estimate-beta", "--no-progress"]) == 0
                wall = time.perf_counter() - t0
                with xr.open_dataset(out) as ds:
                    a = dict(ds.attrs)
                b, lo, hi = a["beta"], a["beta_lower"], a["beta_upper"]
                print(f"| {n}^4 | {100 * noise:.0f}% | {b:.4f} | {100 * (b / 5 - 1):+.1f}% | [{lo:.3f}, {hi:.3f}] | "
                      f"{'yes' if lo <= 5 <= hi else 'NO'} | {a.get('uncertainty_resolution')} | "
                      f"{a.get('solver_beta_basis_corrected', 0)} | {wall:.1f} |", flush=True)


def _child(kind, args):
    """One measured step in this (fresh) process: prints wall seconds and peak RSS (GB) as JSON."""
    import json
    import resource

    t0 = time.perf_counter()
    if kind == "warm":  # imports what a fit imports (writes the bytecode cache where the environment allows)
        from fpirl.cli import build_parser
        import fpirl.uncertainty  # noqa: F401

        build_parser("fit")
    elif kind == "gemm":
        a = np.random.default_rng(0).standard_normal((4096, 4096))
        b = np.random.default_rng(1).standard_normal((4096, 4096))
        t0 = time.perf_counter()
        a @ b
    else:
        from fpirl.cli import main as cli

        t0 = time.perf_counter()
        sys.argv = ["fpirl", *args]  # as the console script runs it (its process-wide settings included)
        rc = cli()
        assert rc == 0, rc
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"seconds": time.perf_counter() - t0,
                      "peak_rss_gb": ru.ru_maxrss / 1e6,
                      "cpu_s": ru.ru_utime + ru.ru_stime,  # the whole process, imports included
                      "load_1min": os.getloadavg()[0]}))


#: ``--no-bytecode-cache``: keep ``PYTHONDONTWRITEBYTECODE`` in the children's environment (set on some machines:
#: every fresh process then compiles fpirl's modules again, about 0.2 s of a 4-D fit's imports).
KEEP_NO_BYTECODE = False


def _child_env(pythonpath=None) -> dict:
    """The children's environment: as a default Python's (bytecode cached: a warm-up child writes the cache
    before the timed runs), unless ``--no-bytecode-cache``."""
    env = dict(os.environ)
    if not KEEP_NO_BYTECODE:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    return env


def _bytecode_note() -> str:
    if KEEP_NO_BYTECODE and os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return "children without a bytecode cache (PYTHONDONTWRITEBYTECODE kept)"
    return "children with the bytecode cache (written by a warm-up child)"


def default_vs_bare(dims, data="smooth"):
    import json
    import subprocess
    import tempfile

    cases = {4: (15, 50, 4), 5: (8, 20, 3)}
    print(f"({_bytecode_note()})")
    print("| case | GEMM 4096^3 s | fit --uncertainty none s (x GEMM) | default fit s (x bare fit) | peak GB none / default "
          "| load |")
    print("| --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for d in dims:
            n, k, nh = cases[d]
            path = os.path.join(tmp, f"d{d}.nc")
            _state_action_file(path, d, n, k, data)
            common = ["fit", path, "--beta", "5", "--hermite-elements", str(nh), "--no-progress"]

            def run(kind, args=()):
                out = subprocess.run([sys.executable, __file__, "--child", kind, *args], capture_output=True, text=True,
                                     check=True, env=_child_env())
                return json.loads(out.stdout.strip().splitlines()[-1])

            run("warm")
            gemm = run("gemm")
            none = run("cli", common + ["-o", os.path.join(tmp, "none.nc"), "--uncertainty", "none"])
            default = run("cli", common + ["-o", os.path.join(tmp, "default.nc")])
            gemm2 = run("gemm")
            g = 0.5 * (gemm["seconds"] + gemm2["seconds"])
            print(f"| {d}-D, {n}^{d} nodes, {k} snapshots ({data}), {nh} Hermite elements | {g:.2f} | "
                  f"{none['seconds']:.1f} ({none['seconds'] / g:.1f}x) | {default['seconds']:.1f} "
                  f"({default['seconds'] / none['seconds']:.2f}x) | {none['peak_rss_gb']:.2f} / "
                  f"{default['peak_rss_gb']:.2f} | {gemm['load_1min']:.1f}-{gemm2['load_1min']:.1f} |", flush=True)


def bare_vs_gemm(before, rounds, data="smooth"):
    """GEMM / ``fit --uncertainty none`` (``before``: also with the fpirl source tree at that path) / GEMM,
    each in a fresh process, ``rounds`` times; the 4-D case of :func:`default_vs_bare`."""
    import json
    import subprocess
    import tempfile

    here = os.path.dirname(os.path.abspath(__file__))
    src = os.path.join(here, "..", "src")
    print("| round | code | GEMM 4096^3 s (before, after) | fit --uncertainty none s | x GEMM | CPU s (process) | peak GB "
          "| load |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "d4.nc")
        _state_action_file(path, 4, 15, 50, data)
        common = ["fit", path, "--beta", "5", "--hermite-elements", "4", "--no-progress", "--uncertainty", "none",
                  "-o", os.path.join(tmp, "none.nc")]

        def run(kind, path, args=()):
            out = subprocess.run([sys.executable, __file__, "--child", kind, *args], capture_output=True, text=True,
                                 check=True, env=_child_env(os.pathsep.join([path, here])))
            return json.loads(out.stdout.strip().splitlines()[-1])

        codes = ([("before", before)] if before else []) + [("after" if before else "this tree", src)]
        for _, path in codes:
            run("warm", path)
        print(f"({_bytecode_note()})")
        for k in range(rounds):
            g0 = run("gemm", src)
            fits = [(name, run("cli", path, common)) for name, path in codes]
            g1 = run("gemm", src)
            g = 0.5 * (g0["seconds"] + g1["seconds"])
            for name, f in fits:
                print(f"| {k + 1} | {name} | {g:.2f} ({g0['seconds']:.2f}, {g1['seconds']:.2f}) | {f['seconds']:.2f} | "
                      f"{f['seconds'] / g:.1f}x | {f['cpu_s']:.1f} | {f['peak_rss_gb']:.2f} | "
                      f"{g0['load_1min']:.1f}-{g1['load_1min']:.1f} |",
                      flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[3:])
        sys.exit(0)
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--scheduler", metavar="local|tcp://HOST:PORT", help="run the calibration sets as Dask tasks")
    ap.add_argument("--only", choices=("calibration", "beta", "cost", "snapshot", "default", "basis", "bare",
                                       "beta-noise", "beta-4d"), help="run one part")
    ap.add_argument("--before", metavar="SRC", help="--only bare: also time the fpirl source tree at SRC")
    ap.add_argument("--rounds", type=int, default=2, help="--only bare: rounds")
    ap.add_argument("--dims", default="4", help="dimensions of the default-vs-bare part (4 and/or 5)")
    ap.add_argument("--data", choices=("smooth", "fp", "fp-noise"), default="smooth",
                    help="--only default|bare: the 4-D density (smooth: two time modes; fp: spectral FP solver, "
                         "~25 modes; fp-noise: the same with 2%% noise, all 50)")
    ap.add_argument("--sets", type=int, default=12, help="noisy sets of the basis part's coverage table (recorded: 12)")
    ap.add_argument("--no-bytecode-cache", action="store_true",
                    help="--only default|bare: keep PYTHONDONTWRITEBYTECODE in the children's environment")
    args = ap.parse_args()
    KEEP_NO_BYTECODE = args.no_bytecode_cache
    print("load average:", os.getloadavg())
    from contextlib import nullcontext

    from fpirl.distributed import dask_client

    if args.only in (None, "calibration"):
        with dask_client(args.scheduler) if args.scheduler else nullcontext() as client:  # one cluster for all sweeps
            calibration(10 if args.quick else 30, client)
    if args.only in (None, "beta"):
        beta_bias(args.quick)
    if args.only in (None, "cost"):
        cost(args.quick)
    if args.only in (None, "snapshot"):
        snapshot_noise(10 if args.quick else 30)
    if args.only in (None, "basis"):
        basis_error(args.sets)
    if args.only in (None, "beta-noise"):
        beta_noise()
    if args.only in (None, "default"):
        default_vs_bare([int(v) for v in args.dims.split(",")], args.data)
    if args.only == "bare":
        bare_vs_gemm(args.before, args.rounds, args.data)
    if args.only == "beta-4d":
        beta_4d()
    print("load average:", os.getloadavg())
