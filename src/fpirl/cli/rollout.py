"""``fpirl rollout``: roll out a result's policy in a gymnasium environment."""

from __future__ import annotations

import argparse
import json

from ._common import EXIT_OK, UsageError, _positive_int, _seed


def add_rollout_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("result", metavar="RESULT.nc", help="result file (from 'fpirl fit' or 'fpirl solve')")
    p.add_argument("--env", metavar="ID", required=True, help="gymnasium environment id, e.g. MountainCarContinuous-v0")
    p.add_argument("--policy", choices=("recovered", "resolved"), default="recovered",
                   help="'recovered': the fitted Boltzmann policy of -psi; 'resolved': the soft-optimal policy of "
                   "the reward (the q_value of a 'fpirl solve' output, else re-solved under the result's own "
                   "dynamics) (default recovered)")
    p.add_argument("--episodes", metavar="N", type=_positive_int, default=100, help="episodes (default 100)")
    p.add_argument("--seed", metavar="S", type=_seed, default=0, help="seed: episode i resets with S + i (default 0)")
    p.add_argument("--json", action="store_true", help="print the outcome as one JSON object")


def cmd_rollout(args) -> int:
    try:
        import gymnasium as gym
    except ImportError:
        raise UsageError("fpirl rollout needs gymnasium: pip install 'fpirl[gym]'") from None
    import numpy as np

    from ..io.netcdf import read_result
    from ..rl.gym import RecoveredPolicy, rollout

    ds = read_result(args.result)
    policy = RecoveredPolicy(ds, args.policy, seed=args.seed)
    try:
        env = gym.make(args.env)
    except Exception as exc:  # unknown id, missing extra dependency of the env
        raise UsageError(f"cannot make gymnasium environment {args.env!r}: {exc}") from None
    try:
        out = rollout(env, policy, args.episodes, args.seed)
    finally:
        env.close()
    steps, returns = out["steps"], out["returns"]
    summary = {"env": args.env, "policy": args.policy, "episodes": out["episodes"], "goals": out["goals"],
               "median_steps": float(np.median(steps)), "mean_return": float(np.mean(returns)),
               "steps": steps.tolist(), "returns": returns.tolist()}
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"fpirl rollout: {args.env}, {args.policy} policy: {out['goals']}/{out['episodes']} episodes reached "
              f"the goal (terminated); median {summary['median_steps']:g} steps, mean return "
              f"{summary['mean_return']:.4g}")
    return EXIT_OK
