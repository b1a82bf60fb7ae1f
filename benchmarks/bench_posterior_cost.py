"""The default fit's posterior cost against the bare fit, before/after, interleaved (issue 20).

Run:  PYTHONPATH=src .venv/bin/python benchmarks/bench_posterior_cost.py [--before SRC] [--rounds N]

The 4-D case of ``bench_uncertainty.py --only default`` (15^4 nodes, 2 state + 2 action axes, 50
snapshots, 4 Hermite elements per axis = 4,096 coefficients, beta given). Each round runs, each in a
fresh process and in this order, ``fpirl fit --uncertainty none`` and the default ``fpirl fit`` with
this checkout's ``src`` and (with ``--before``) with another source tree, so that load changes on a
shared machine hit both codes alike. Per run: wall seconds, CPU seconds (user + system of the child)
and the load average; per code the ratio default / bare of the medians over the rounds.
"""

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def _run(src, args):
    env = dict(os.environ, PYTHONPATH=src)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "fpirl.cli", *args], env=env, check=True, capture_output=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, os.getloadavg()[0]


def main():
    from bench_uncertainty import _state_action_file

    ap = argparse.ArgumentParser()
    ap.add_argument("--before", help="source tree (a src folder) of the code to compare with")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    codes = {"after": os.path.join(HERE, "..", "src")}
    if args.before:
        codes = {"before": args.before, **codes}
    times = {(c, k): [] for c in codes for k in ("none", "default")}
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "d4.nc")
        _state_action_file(data, 4, 15, 50)
        common = ["fit", data, "--beta", "5", "--hermite-elements", "4", "--no-progress"]
        print("| round | code | run | wall s | CPU s | load |")
        print("| --- | --- | --- | --- | --- | --- |")
        for r in range(args.rounds):
            for kind, extra in (("none", ["--uncertainty", "none"]), ("default", [])):
                for code, src in codes.items():
                    out = os.path.join(tmp, f"{code}-{kind}.nc")
                    wall, cpu, load = _run(src, common + extra + ["-o", out])
                    times[(code, kind)].append((wall, cpu))
                    print(f"| {r + 1} | {code} | {kind} | {wall:.1f} | {cpu:.1f} | {load:.1f} |", flush=True)
    print()
    print("| code | bare wall / CPU s (median) | default wall / CPU s (median) | default / bare, wall | default / bare, CPU |")
    print("| --- | --- | --- | --- | --- |")
    for code in codes:
        n = np.median(np.array(times[(code, "none")]), axis=0)
        d = np.median(np.array(times[(code, "default")]), axis=0)
        print(f"| {code} | {n[0]:.1f} / {n[1]:.1f} | {d[0]:.1f} / {d[1]:.1f} | {d[0] / n[0]:.2f} | {d[1] / n[1]:.2f} |")


if __name__ == "__main__":
    main()
