"""Reading and binning a large trajectory table (issue 8: 10^7 rows within 4 GB).

Run:  .venv/bin/python benchmarks/bench_tracks_io.py [--tracks 10000] [--frames 1000] [--pandas]

Writes a long table (``--tracks`` x ``--frames`` rows: track id, time, x, y; wrapped random walks in
[-1, 1]^2) as CSV and Parquet into a temporary directory, then, each in a fresh subprocess so that
the peak resident memory (VmHWM, see :func:`peak_rss_mb`) is its own: ``read_tracks`` (periodic box, bounds given)
and ``cloud_in_cell`` of all observations on a 64 x 64 grid. ``--pandas`` adds the CSV reader
without pyarrow (pandas C engine, chunked). A subprocess that only imports fpirl gives the baseline.
"""

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def write_tables(directory: Path, n_tracks: int, n_frames: int, seed: int = 0):
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    n = n_tracks * n_frames
    # frame-major rows (one row per agent and frame, tracks interleaved, as a tracker writes them)
    steps = rng.normal(0.0, 0.02, size=(n_frames, n_tracks, 2))
    steps[0] = rng.uniform(-1, 1, size=(n_tracks, 2))
    xy = np.cumsum(steps, axis=0)
    xy = (xy + 1.0) % 2.0 - 1.0
    table = pa.table({
        "track": np.tile(np.arange(n_tracks, dtype=np.int64), n_frames),
        "time": np.repeat(np.arange(n_frames) * 0.04, n_tracks),
        "x": xy[..., 0].ravel(),
        "y": xy[..., 1].ravel(),
    })
    del xy, steps
    csv, parquet = directory / "tracks.csv", directory / "tracks.parquet"
    pcsv.write_csv(table, csv)
    pq.write_table(table, parquet, row_group_size=1 << 20)
    return n, csv, parquet


def run_case(path: str, engine: str) -> dict:
    from fpirl.tracks.binning import cloud_in_cell
    from fpirl.tracks.reading import read_tracks

    out = {}
    if path != "none":
        t0 = time.perf_counter()
        tracks = read_tracks(path, track="track", time="time", state="x,y", boundary="periodic",
                             bounds="-1:1,-1:1", engine=engine)
        out["read_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        mass = cloud_in_cell(tracks.grid(64), tracks.values)
        out["bin_s"] = time.perf_counter() - t0
        out.update(rows=tracks.n_obs, tracks=tracks.n_tracks, transitions=len(tracks.pairs()[0]), dt=tracks.dt,
                   mass=float(mass.sum()))
    out["peak_rss_mb"] = peak_rss_mb()
    return out


def peak_rss_mb() -> float:
    """Peak resident memory of this process: VmHWM of its own address space (Linux), else ru_maxrss.

    ``ru_maxrss`` of a child started by fork/vfork + exec also counts the parent's size at the
    fork, so it overstates a small child of a large parent; VmHWM belongs to the exec'd image only.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tracks", type=int, default=10_000)
    ap.add_argument("--frames", type=int, default=1_000)
    ap.add_argument("--pandas", action="store_true", help="also time the CSV reader without pyarrow")
    ap.add_argument("--case", nargs=2, metavar=("PATH", "ENGINE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.case:
        print(json.dumps(run_case(*args.case)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        n, csv, parquet = write_tables(Path(tmp), args.tracks, args.frames)
        print(f"wrote {n:,} rows in {time.perf_counter() - t0:.1f} s: CSV {csv.stat().st_size / 1e6:.0f} MB, "
              f"Parquet {parquet.stat().st_size / 1e6:.0f} MB")
        cases = [("import only", "none", "auto"), ("CSV (pyarrow)", str(csv), "auto"),
                 ("Parquet", str(parquet), "auto")]
        if args.pandas:
            cases.append(("CSV (pandas)", str(csv), "pandas"))
        print(f"{'case':16s} {'read s':>8s} {'bin s':>8s} {'peak RSS MB':>12s}  check")
        for label, path, engine in cases:
            proc = subprocess.run([sys.executable, __file__, "--case", path, engine], capture_output=True, text=True)
            if proc.returncode:
                print(f"{label}: failed\n{proc.stderr[-2000:]}")
                continue
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            check = (f"{r['rows']:,} rows, {r['tracks']:,} tracks, {r['transitions']:,} transitions, dt={r['dt']:g}, "
                     f"mass {r['mass']:.0f}") if "rows" in r else ""
            print(f"{label:16s} {r.get('read_s', 0):8.1f} {r.get('bin_s', 0):8.2f} {r['peak_rss_mb']:12.0f}  {check}")


if __name__ == "__main__":
    main()
