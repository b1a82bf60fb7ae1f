"""The snapshot-noise posterior alone and inside the default fit, before and after (issue 20).

Run:  .venv/bin/python benchmarks/bench_posterior.py [--before SRC] [--rounds N]

The 4-D state-action density file of ``bench_uncertainty.py --only default`` (15^4 nodes, 50
snapshots, periodic) is written once to a temporary folder. Per round and per source tree (this
checkout's ``src``, and ``--before SRC``, e.g. an older commit's ``src`` from ``git archive``), a
fresh process fits ``PotentialEstimator(hermite_elements=4, beta=5)`` and times
``snapshot_posterior(est, data)`` twice (wall and process CPU seconds, the second call reusing
nothing but the fit), and prints the noise shape, ``sigma^2``, the mean ``potential_std`` over the
nodes and the norm of the bias column. The trees alternate within each round; the load average
is printed per round. (The whole default fit against the bare one: ``bench_posterior_cost.py``.)
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "src")

CHILD = r"""
import json, sys, time
import numpy as np
from fpirl import PotentialEstimator
from fpirl.io.netcdf import read_density
from fpirl.uncertainty._snapshot_noise import snapshot_posterior

data = read_density(sys.argv[1])
est = PotentialEstimator(hermite_elements=4, beta=5).fit(data)
wall, cpu = [], []
for _ in range(2):
    t, c = time.perf_counter(), time.process_time()
    post = snapshot_posterior(est, data)
    wall.append(time.perf_counter() - t)
    cpu.append(time.process_time() - c)
sd = post.potential_std(data.grid.coords)
print(json.dumps({"wall": wall, "cpu": cpu, "noise": post.noise_model, "sigma2": post.noise_variance,
                  "sd_mean": float(sd.mean()), "bias_norm": float(np.linalg.norm(post.bias))}))
"""


def _run(src, args):
    env = dict(os.environ, PYTHONPATH=os.path.abspath(src))
    return subprocess.run([sys.executable] + args, env=env, capture_output=True, text=True, check=True).stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", metavar="SRC", help="another fpirl source tree, timed in the same rounds")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    trees = [("after", SRC)] + ([("before", args.before)] if args.before else [])
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "d4.nc")
        sys.path[:0] = [HERE, os.path.join(HERE, "..", "tests"), SRC]
        import bench_uncertainty

        bench_uncertainty._state_action_file(path, 4, 15, 50)
        for r in range(args.rounds):
            print(f"round {r + 1}, load average {os.getloadavg()}", flush=True)
            for label, src in (trees if r % 2 == 0 else trees[::-1]):
                res = json.loads(_run(src, ["-c", CHILD, path]).strip().splitlines()[-1])
                print(f"  {label}: snapshot_posterior wall {res['wall'][0]:.2f}, {res['wall'][1]:.2f} s, cpu "
                      f"{res['cpu'][0]:.2f}, {res['cpu'][1]:.2f} s; noise {res['noise']}, sigma^2 {res['sigma2']:.4g}, "
                      f"mean std {res['sd_mean']:.4g}, |bias column| {res['bias_norm']:.4g}", flush=True)


if __name__ == "__main__":
    main()
