"""Peak memory of reading (and fitting) a large trajectory table, against its raw column bytes.

Writes a CSV of ``--rows`` rows (columns id, t, x, y: tracks of 200 steps of a 2-D random walk in
[-1, 1]^2), then in a fresh process per stage measures the peak RSS above the process's own
baseline (after the imports): ``read`` runs :func:`fpirl.tracks.reading.read_tracks`, ``fit``
runs ``fpirl fit TABLE --track id --time t --state x,y`` (the increments estimator). The raw
column bytes are ``8 x rows x 4`` (the numbers the table holds as float64/int64).

Usage::

    python benchmarks/bench_table_memory.py --rows 1000000 3000000 --dir /tmp/tables
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def generate(path: Path, rows: int, steps: int = 200) -> None:
    rng = np.random.default_rng(0)
    n_tracks = rows // steps
    with open(path, "w") as fh:
        fh.write("id,t,x,y\n")
        for start in range(0, n_tracks, 1000):
            ids = np.arange(start, min(start + 1000, n_tracks))
            x = np.cumsum(0.01 * rng.standard_normal((ids.size, steps, 2)), axis=1) % 2.0 - 1.0
            t = np.broadcast_to(0.01 * np.arange(steps), (ids.size, steps))
            block = np.column_stack([np.repeat(ids, steps), t.ravel(), x.reshape(-1, 2)])
            np.savetxt(fh, block, fmt=["%d", "%.4f", "%.6f", "%.6f"], delimiter=",")


def _rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return float(line.split()[1]) / 1024.0
    return float("nan")


def child(stage: str, path: str) -> None:
    from fpirl.cli import main  # noqa: F401 - imports before the baseline
    from fpirl.tracks.reading import read_tracks
    import fpirl.estimators  # noqa: F401
    import pyarrow.csv  # noqa: F401

    base = _rss_mb()
    t0 = time.perf_counter()
    if stage == "read":
        table = read_tracks(path, track="id", time="t", state="x,y", bounds=[(-1, 1), (-1, 1)], boundary="periodic")
        n = table.values.shape[0]
    else:
        out = Path(path).with_suffix(".result.nc")
        code = main(["fit", path, "--track", "id", "--time", "t", "--state", "x,y", "--bounds", "-1:1,-1:1",
                     "--boundary", "periodic", "--hermite-elements", "4", "-o", str(out), "--no-progress"])
        assert code == 0
        n = None
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"seconds": seconds, "peak_mb": peak, "base_mb": base, "rows": n}))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000])
    ap.add_argument("--dir", type=Path, default=Path("/tmp/fpirl_tables"))
    ap.add_argument("--stages", nargs="+", default=["read", "fit"])
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(*args.child)
    args.dir.mkdir(parents=True, exist_ok=True)
    print(f"load: {os.getloadavg()}")
    for rows in args.rows:
        path = args.dir / f"tracks_{rows}.csv"
        if not path.exists():
            generate(path, rows)
        raw = 8 * rows * 4 / 2**20
        for stage in args.stages:
            res = subprocess.run([sys.executable, __file__, "--child", stage, str(path)], capture_output=True,
                                 text=True, timeout=3600)
            if res.returncode:
                raise RuntimeError(res.stderr[-2000:])
            r = json.loads(res.stdout.strip().splitlines()[-1])
            extra = r["peak_mb"] - r["base_mb"]
            print(f"{rows} rows ({path.stat().st_size / 2**20:.0f} MiB CSV, raw columns {raw:.0f} MiB): {stage} "
                  f"{r['seconds']:.1f} s, peak {r['peak_mb']:.0f} MiB = baseline {r['base_mb']:.0f} + {extra:.0f} "
                  f"({extra / raw:.1f}x the raw columns)")
    print(f"load: {os.getloadavg()}")


if __name__ == "__main__":
    main()
