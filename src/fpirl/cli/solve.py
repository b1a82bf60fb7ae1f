"""``fpirl solve``: re-solve a result's reward under its own or changed dynamics."""

from __future__ import annotations

import argparse

from ._common import EXIT_OK, _factor, _output_netcdf, _push


def add_solve_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("result", metavar="RESULT.nc", help="result file written by 'fpirl fit' (with a policy and reward)")
    p.add_argument("--noise-scale", metavar="K", type=_factor, default=1.0,
                   help="multiply the transition's standard deviation by K (default 1)")
    p.add_argument("--drift-scale", metavar="K", type=_factor, default=1.0,
                   help="multiply the model's own state drift -grad_s psi by K (default 1)")
    p.add_argument("--action-drift", metavar="K", type=_push, default=0.0,
                   help="add K a_i dt to the mean step of state axis i: action i pushes state i (needs as many "
                   "action as state axes; default 0)")
    p.add_argument("--reward-from", metavar="R.nc", default=None,
                   help="take the reward from this result (same grid) instead of RESULT.nc's")
    p.add_argument("-o", "--output", metavar="SOLVED.nc", required=True,
                   help="output result with the soft-optimal q_value, policy and value")


def cmd_solve(args) -> int:
    from ..io.netcdf import read_result, write_result
    from ..rl.dynamics import DynamicsChange
    from ..rl.solved import solve_result

    inputs = (args.result,) + ((args.reward_from,) if args.reward_from else ())
    out = _output_netcdf(args.output, inputs=inputs)
    change = DynamicsChange(noise_scale=args.noise_scale, drift_scale=args.drift_scale,
                            action_drift=args.action_drift)
    ds = read_result(args.result)
    reward_from = read_result(args.reward_from) if args.reward_from else None
    solved = solve_result(ds, change, reward_from)
    if args.reward_from:
        solved.attrs["solve_reward_from"] = str(args.reward_from)
    write_result(out, solved)
    print(f"fpirl solve: noise x {change.noise_scale:g}, drift x {change.drift_scale:g}, action push "
          f"{change.action_drift:g}; soft policy iteration converged in {solved.attrs['solve_iterations']} steps; "
          f"wrote {out}")
    return EXIT_OK
