"""The recovered reward as a product: reward convention, self-consistency and gymnasium rollouts.

Needs the results of the two benchmarks (their T1/T2 tables are in their own reports)::

    fpirl benchmark gridworld --elements 15 -o /tmp/bgw
    fpirl benchmark mountaincar --elements 40 -o /tmp/bmc
    python benchmarks/bench_rl.py --gridworld /tmp/bgw --mountaincar /tmp/bmc [--episodes 100]

Measures, per result (fit on FP PDE data):

* self-consistency: ``fpirl solve`` without a change (soft policy iteration of the result's reward
  under its own transition), max over the states of KL(fitted policy || re-solved policy);
* the reward convention: the same re-solve for the 'soft' and the 'expected' (paper) reward of the
  same psi, mean over the states of KL(pi_GT || re-solved), next to behaviour cloning (the fitted
  policy itself);
* Mountain Car in gymnasium's ``MountainCarContinuous-v0`` (100 seeded episodes): the recovered
  policy, the reward re-solved under the recovered transition (``--policy resolved``), and the
  reward re-solved on gymnasium's own dynamics as a continuing task (soft Q-iteration on the
  181 x 141 x 21 grid of the RL step, temperature 1 / beta, no terminal state, no goal bonus).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np


def _mean_kl(p, q, grid):
    from fpirl.evaluation.metrics import policy_kl

    w = grid.integrate(np.ones(grid.shape), axes=grid.action_axes)
    k = policy_kl(p, q, grid)
    return float(np.sum(w * k) / np.sum(w)), float(k.max())


def conventions(path) -> dict:
    from fpirl.io import read_result
    from fpirl.io.netcdf import model_from_result
    from fpirl.mdp import recover_mdp
    from fpirl.rl import solve_result, solve_soft

    ds = read_result(path)
    m = model_from_result(ds)
    g = m.grid
    gamma = float(ds.attrs["gamma"])
    t0 = time.perf_counter()
    solved = solve_result(ds)
    t_solve = time.perf_counter() - t0
    out = {"file": str(path), "self_consistency_kl_max": _mean_kl(ds["policy"].values, solved["policy"].values, g)[1],
           "solve_seconds": t_solve, "solve_iterations": int(solved.attrs["solve_iterations"])}
    truth = ds["policy_true"].values
    out["bc_kl_mean"] = _mean_kl(truth, ds["policy"].values, g)[0]
    psi = m.hermite.evaluate_grid(m.coef, g.coords)
    grad = m.hermite.gradient_grid(m.coef, g.coords, g.state_axes)
    for conv in ("soft", "expected"):
        mdp = recover_mdp(g, psi, grad, m.beta, m.dt, gamma, reward=conv)
        sol = solve_soft(g, mdp.reward, mdp.transition, m.beta, gamma)
        out[f"{conv}_kl_mean"] = _mean_kl(truth, sol.policy, g)[0]
    return out


def gym_rollouts(path, episodes: int) -> dict:
    from fpirl.io import read_result
    from fpirl.problems.mountain_car import normalise
    from fpirl.problems.mountain_car_rl import SoftQSettings, rollout_gymnasium, solve_mountain_car
    from fpirl.rl import reward_function
    from fpirl.rl.gym import RecoveredPolicy, rollout

    ds = read_result(path)
    out = {}
    for which in ("recovered", "resolved"):
        t0 = time.perf_counter()
        r = rollout("MountainCarContinuous-v0", RecoveredPolicy(ds, which), episodes, 0)
        out[which] = {"goals": r["goals"], "episodes": episodes, "median_steps": float(np.median(r["steps"])),
                      "mean_return": float(np.mean(r["returns"])), "seconds": time.perf_counter() - t0}
    t0 = time.perf_counter()
    rf = reward_function(ds)
    settings = SoftQSettings(alpha=1.0 / float(ds.attrs["beta"]), gamma=float(ds.attrs["gamma"]))
    mq = solve_mountain_car(settings, reward=lambda p: rf(normalise(p)), continuing=True, progress=True)
    t_solve = time.perf_counter() - t0
    r = rollout_gymnasium(mq, episodes, 0)
    out["gym_dynamics_continuing"] = {"goals": r["goals"], "episodes": episodes,
                                      "median_steps": float(np.median(r["steps"])),
                                      "mean_return": float(np.mean(r["returns"])), "solve_seconds": t_solve,
                                      "iterations": mq.iterations}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gridworld", required=True, help="output directory of 'fpirl benchmark gridworld'")
    ap.add_argument("--mountaincar", required=True, help="output directory of 'fpirl benchmark mountaincar'")
    ap.add_argument("--gw-n", type=int, default=15)
    ap.add_argument("--mc-n", type=int, default=40)
    ap.add_argument("--episodes", type=int, default=100)
    ap.add_argument("-o", "--output", default=None, help="JSON file for the numbers")
    args = ap.parse_args()
    print(f"load: {os.getloadavg()}")
    res = {"gridworld": conventions(os.path.join(args.gridworld, f"result_N{args.gw_n}.nc")),
           "mountaincar": conventions(os.path.join(args.mountaincar, f"result_N{args.mc_n}.nc"))}
    for k, v in res.items():
        print(f"{k}: self-consistency max KL {v['self_consistency_kl_max']:.3g} ({v['solve_iterations']} policy "
              f"iterations, {v['solve_seconds']:.1f} s); mean KL to pi_GT: re-solved soft {v['soft_kl_mean']:.3g}, "
              f"re-solved expected {v['expected_kl_mean']:.3g}, behaviour cloning {v['bc_kl_mean']:.3g}")
    res["gym"] = gym_rollouts(os.path.join(args.mountaincar, f"result_N{args.mc_n}.nc"), args.episodes)
    for k, v in res["gym"].items():
        print(f"gym {k}: {v['goals']}/{v['episodes']} goals, median {v['median_steps']:g} steps, "
              f"mean return {v['mean_return']:.4g}")
    print(f"load: {os.getloadavg()}")
    if args.output:
        with open(args.output, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
