"""Benchmark MDP recovery (policy, transition, reward) and the MDP density map.

Targets (periodic [-1, 1]^d, random smooth potential):

* 4-D Grid World, 15^2 states x 15^2 actions: recovery <= 10 s, 50 map steps <= 10 s;
* 3-D, 50^2 states x 50 actions: the same bounds.

Usage::

    .venv/bin/python benchmarks/bench_mdp.py [--beta 5] [--dt 0.02] [--steps 50]
        [--discretization nodal|projection] [--case 4d|3d|all]

``--method push`` times the memory-lean map (one ``push`` per step) instead of the default
policy-averaged ``n_s x n_s`` state kernel. The push reduction is done as batched small GEMMs:
one tall-skinny ``(n_1 x n_sources) @ (n_sources x n_2)`` GEMM was up to 60x slower under
multithreaded OpenBLAS on a 2-core machine shared with other busy processes.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from fpirl.core.grid import Grid
from fpirl.problems.synthetic import random_periodic_potential
from fpirl.mdp import GaussianTransition, boltzmann_policy, inverse_bellman_reward, state_shape
from fpirl.forward.markov import mdp_density_map

CASES = {
    "4d": dict(elements=[15, 15, 15, 15], roles=["state", "state", "action", "action"]),
    "3d": dict(elements=[50, 50, 50], roles=["state", "state", "action"]),
}


def run(case: str, beta: float, dt: float, steps: int, discretization: str, method: str = "auto", seed: int = 0) -> dict:
    spec = CASES[case]
    d = len(spec["elements"])
    grid = Grid([-1] * d, [1] * d, spec["elements"], roles=spec["roles"])
    psi, grad = random_periodic_potential(grid, np.random.default_rng(seed), n_modes=4)
    grad_s = grad[list(grid.state_axes)]

    t0 = time.perf_counter()
    policy = boltzmann_policy(grid, psi, beta)
    t1 = time.perf_counter()
    transition = GaussianTransition(grid, grad_s, beta, dt, discretization)
    t2 = time.perf_counter()
    reward = inverse_bellman_reward(-psi, policy, transition, grid)
    t3 = time.perf_counter()
    rho0 = np.full(state_shape(grid), 1.0 / np.prod([grid.axes[i].length for i in grid.state_axes]))
    out = mdp_density_map(grid, policy, transition, rho0, steps, method=method)
    t4 = time.perf_counter()
    mass = grid.integrate(out)
    return {
        "case": case,
        "grid": grid.shape,
        "n_sources": grid.size,
        "factor_MB": sum(f.nbytes for f in transition.factors) / 2**20,
        "policy_s": t1 - t0,
        "transition_s": t2 - t1,
        "reward_s": t3 - t2,
        "recovery_s": t3 - t0,
        "map_s": t4 - t3,
        "steps": steps,
        "mass_drift": float(np.abs(mass - mass[0]).max()),
        "reward_finite": bool(np.all(np.isfinite(reward))),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--beta", type=float, default=5.0)
    ap.add_argument("--dt", type=float, default=0.02)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--discretization", default="nodal", choices=["nodal", "projection"])
    ap.add_argument("--case", default="all", choices=["4d", "3d", "all"])
    ap.add_argument("--method", default="auto", choices=["auto", "kernel", "push"], help="MDP-map method")
    args = ap.parse_args(argv)
    cases = list(CASES) if args.case == "all" else [args.case]
    threads = os.environ.get("OPENBLAS_NUM_THREADS", "default")
    print(
        f"beta={args.beta} dt={args.dt} sigma={np.sqrt(2 * args.dt / args.beta):.3g} {args.discretization} "
        f"map={args.method} | cpus={os.cpu_count()} OPENBLAS_NUM_THREADS={threads}"
    )
    for case in cases:
        r = run(case, args.beta, args.dt, args.steps, args.discretization, args.method)
        print(
            f"{r['case']}: grid {r['grid']} ({r['n_sources']} nodes, factors {r['factor_MB']:.1f} MB) | "
            f"policy {r['policy_s']:.3f} s, transition {r['transition_s']:.3f} s, reward {r['reward_s']:.3f} s, "
            f"recovery total {r['recovery_s']:.3f} s | {r['steps']} map steps {r['map_s']:.3f} s | "
            f"mass drift {r['mass_drift']:.1e}"
        )


if __name__ == "__main__":
    main()
