"""The credible bands' MDP recoveries (issue 20): exact vs tabulated transition rows.

Run:  .venv/bin/python benchmarks/bench_bands.py [--rounds N]

The 4-D state-action density file of ``bench_uncertainty.py --only default`` (15^4 nodes, 2 state + 2
action axes, periodic, 50 snapshots) is fitted once (4 Hermite elements, beta = 5) and its posterior
drawn (:func:`fpirl.uncertainty.estimate.estimate_uncertainty`). Then, in this one process and in
alternating rounds:

1. one draw's recovery (:func:`fpirl.mdp.recover_mdp`, one thread, the minimum over 3 repeats of 8 draws)
   with the exact transition rows and with the tabulated ones (``tabulated=True``; the table is built
   in a warm-up call, as the bands' first draw does); and with 1/beta drawn per draw (beta 5 +- 5%),
   as with beta estimated, where every draw builds its own table;
2. :func:`fpirl.uncertainty.credible_bands` (64 draws, the default two threads): the way it was before
   (exact rows, psi and its gradient by ``HermiteSpace.evaluate_grid``, ``np.quantile``) and as it is
   now; wall and CPU seconds of the process;
3. the largest difference between the two bands, relative to the range of each band.

``--estimate-beta``: beta is estimated, so every draw has its own beta and transition width, and
builds its own table (no reuse across draws; parts 1 and 2 then include the table builds).
Prints markdown tables and the load average.
"""

import argparse
import os
import sys
import tempfile
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _setup(tmp, estimate_beta=False):
    from bench_uncertainty import _state_action_file

    from fpirl.estimators.identify import PotentialEstimator
    from fpirl.io.netcdf import read_density
    from fpirl.uncertainty.estimate import estimate_uncertainty

    path = os.path.join(tmp, "d4.nc")
    _state_action_file(path, 4, 15, 50)
    s = read_density(path)
    est = PotentialEstimator(hermite_elements=4, **({"estimate_beta": True} if estimate_beta else {"beta": 5.0})).fit(s)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = estimate_uncertainty(est, "auto", s)
    return post, est.grid_, s.dt


def _old_bands(post, grid, dt, n_samples=64, rng=0):
    """The bands as computed before (exact rows, evaluate_grid per draw, np.quantile), same threads."""
    from concurrent.futures import ThreadPoolExecutor

    from fpirl.mdp.recovery import DEFAULT_GAMMA, recover_mdp
    from fpirl.uncertainty._bands import BAND_THREADS

    draws = post.sample(n_samples, rng)
    draws = draws[draws[:, -1] > 0]  # a draw of 1/beta that is not positive has no MDP
    h = post.hermite
    n = h.n_coef
    policy = np.empty((len(draws),) + grid.shape)
    reward = np.empty_like(policy)

    def one(s):
        coef = draws[s][:n].reshape(h.shape)
        mdp = recover_mdp(grid, h.evaluate_grid(coef, grid.coords), h.gradient_grid(coef, grid.coords, grid.state_axes),
                          1.0 / draws[s][n], dt, DEFAULT_GAMMA)
        policy[s], reward[s] = mdp.policy, mdp.reward

    with ThreadPoolExecutor(BAND_THREADS) as pool:
        list(pool.map(one, range(len(draws))))
    out = {}
    for name, arr in (("policy", policy), ("reward", reward)):
        out[f"{name}_lower"], out[f"{name}_upper"] = np.quantile(arr, (0.05, 0.95), axis=0)
    return out


def main(rounds, estimate_beta=False):
    import timeit

    from threadpoolctl import threadpool_limits

    from fpirl.mdp.recovery import recover_mdp
    from fpirl.uncertainty import credible_bands

    print("load average:", os.getloadavg())
    with tempfile.TemporaryDirectory() as tmp:
        post, grid, dt = _setup(tmp, estimate_beta)
    print(f"beta {'estimated' if estimate_beta else 'given'}: 1/beta {post.gamma:.3g} +- {post.gamma_std():.3g}")
    h = post.hermite
    n = h.n_coef
    draws = post.sample(8, 0)
    draws = draws[draws[:, -1] > 0]

    own = 1.0 / (5.0 * (1.0 + 0.05 * np.random.default_rng(1).standard_normal(len(draws))))  # 1/beta per draw

    def recoveries(tabulated, gammas=None):
        for d, g in zip(draws, draws[:, n] if gammas is None else gammas):
            coef = d[:n].reshape(h.shape)
            recover_mdp(grid, h.evaluate_grid(coef, grid.coords), h.gradient_grid(coef, grid.coords, grid.state_axes),
                        1.0 / g, dt, tabulated=tabulated)

    print("\n| round | rows | one draw's recovery, 1 thread, ms | load |")
    print("| --- | --- | --- | --- |")
    with threadpool_limits(1):
        recoveries(True)  # builds and caches the table
        for k in range(rounds):
            for name, tabulated, gammas in (("exact", False, None), ("tabulated", True, None),
                                            ("exact, beta 5 +- 5% per draw", False, own),
                                            ("tabulated, beta 5 +- 5% per draw (a table per draw)", True, own)):
                t = min(timeit.repeat(lambda: recoveries(tabulated, gammas), number=1, repeat=3)) / len(draws)
                print(f"| {k + 1} | {name} | {1e3 * t:.1f} | {os.getloadavg()[0]:.1f} |", flush=True)

    print("\n| round | credible_bands (64 draws, 2 threads) | wall s | CPU s | load |")
    print("| --- | --- | --- | --- | --- |")
    bands = {}
    for k in range(rounds):
        for name, fn in (("before (exact rows, np.quantile)", _old_bands), ("now (tabulated rows)", credible_bands)):
            c0, w0 = time.process_time(), time.perf_counter()
            bands[name] = fn(post, grid, dt, n_samples=64, rng=0)
            w, c = time.perf_counter() - w0, time.process_time() - c0
            print(f"| {k + 1} | {name} | {w:.2f} | {c:.2f} | {os.getloadavg()[0]:.1f} |", flush=True)
    old, new = bands.values()
    print("\n| band | max abs difference | relative to the band's range |")
    print("| --- | --- | --- |")
    for key in old:
        d = np.abs(old[key] - new[key]).max()
        print(f"| {key} | {d:.2e} | {d / np.ptp(old[key]):.2e} |")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--estimate-beta", action="store_true",
                    help="fit beta too: every draw has its own beta, so every draw builds its own table")
    args = ap.parse_args()
    main(args.rounds, args.estimate_beta)
