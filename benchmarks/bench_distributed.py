"""Scale-out (issue 10): streamed assembly memory vs number of snapshots, LocalCluster 1 vs 2 workers.

Run:  .venv/bin/python benchmarks/bench_distributed.py [--quick]

* memory: density files (netCDF, and Zarr stores chunked by 64 snapshots along time;
  ``--format``) on a 2-D 96 x 96 grid with K and 10 K snapshots; peak RSS of a fresh process
  that (a) streams the normal equations chunk by chunk
  (:func:`fpirl.distributed.stream_normal_equations`) or (b) reads the whole file and assembles in
  one piece (``read_density`` + ``PotentialEstimator.fit``). Chunks of 64 snapshots.
* tracks: Parquet tables (2-D periodic random walks, 200 steps per track, row groups of 10^5
  rows) with 10^6 and 10^7 rows; peak RSS of streaming the row groups
  (:func:`fpirl.distributed.stream_increments_parquet`) vs ``read_tracks`` + one assembly.
* speed-up: the chunked assembly of a 3-D 40^3 data set, 4 Hermite elements per axis, on a
  ``distributed.LocalCluster`` of 1 and of 2 single-threaded worker processes (cluster start-up
  excluded; the time of the same assembly in this process is given for reference).
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np


def make_file(path, n_times, elements=96):
    from fpirl import DensitySnapshots, Grid
    from fpirl.io import density_dataset, write_density

    grid = Grid([-1.0, -1.0], [1.0, 1.0], elements)
    x = grid.mesh()
    t = 0.01 * np.arange(n_times)
    base = 1.5 + 0.3 * np.cos(np.pi * x[..., 0]) * np.sin(np.pi * x[..., 1])
    values = base[None] * (1 + 0.2 * np.exp(-t)[:, None, None] * np.cos(np.pi * x[..., 0] - 0.3)[None])
    if path.endswith(".zarr"):
        import warnings

        with warnings.catch_warnings():  # Zarr format 3 notes that consolidated metadata is an extension
            warnings.simplefilter("ignore")
            density_dataset(DensitySnapshots(grid, t, values)).chunk({"time": 64}).to_zarr(path)
    else:
        write_density(path, DensitySnapshots(grid, t, values))


def _size_mb(path):
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs) / 2**20
    return os.path.getsize(path) / 2**20


def child(mode, path):
    t0 = time.perf_counter()
    if mode == "stream":
        from fpirl.distributed import stream_normal_equations

        ne, head = stream_normal_equations(path, 4, chunk=64)
        from fpirl import PotentialEstimator

        PotentialEstimator(hermite_elements=4, beta=1.0).fit(head, normal_equations=ne)
    else:
        from fpirl import PotentialEstimator, read_density

        PotentialEstimator(hermite_elements=4, beta=1.0).fit(read_density(path))
    wall = time.perf_counter() - t0
    print(json.dumps({"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "wall_s": wall}))


def memory(quick, formats=("nc",)):
    rows = []
    sizes = (40, 400) if quick else (200, 2000)
    with tempfile.TemporaryDirectory() as tmp:
        for fmt, k in ((f, k) for f in formats for k in sizes):
            path = os.path.join(tmp, f"d{k}.{fmt}")
            # written by a child: Linux keeps ru_maxrss across fork + exec, so the parent must stay small
            subprocess.run([sys.executable, __file__, "--make", path, str(k)], check=True)
            mb = _size_mb(path)
            for mode in ("stream", "in-memory"):
                out = subprocess.run([sys.executable, __file__, "--child", mode, path], capture_output=True, text=True,
                                     check=True)
                res = json.loads(out.stdout.strip().splitlines()[-1])
                rows.append((fmt, k, round(mb, 1), mode, round(res["peak_rss_mb"]), round(res["wall_s"], 2)))
                print(rows[-1], flush=True)
    return rows


def make_parquet(path, n_rows):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    steps = 200
    n_tracks = n_rows // steps
    for start in range(0, n_tracks, 500):  # written in slices: the writer stays small
        m = min(500, n_tracks - start)
        x = (np.cumsum(rng.normal(0, 0.05, (m, steps, 2)), axis=1) % 2 - 1).reshape(-1, 2)
        table = pa.table({"id": np.repeat(np.arange(start, start + m), steps), "t": np.tile(0.01 * np.arange(steps), m),
                          "x": x[:, 0], "y": x[:, 1]})
        if start == 0:
            writer = pq.ParquetWriter(path, table.schema)
        writer.write_table(table, row_group_size=100_000)
    writer.close()


def child_tracks(mode, path):
    from fpirl.core.hermite import HermiteSpace

    space = HermiteSpace([-1, -1], [1, 1], 4, True)
    t0 = time.perf_counter()
    if mode == "stream":
        from fpirl.distributed import stream_increments_parquet

        stream_increments_parquet(path, track="id", time="t", state=["x", "y"], space=space, dt=0.01)
    else:
        from fpirl.weakform.increment_system import assemble_increments
        from fpirl.tracks.reading import read_tracks

        tracks = read_tracks(path, track="id", time="t", state="x,y", boundary="periodic", bounds=[(-1, 1), (-1, 1)])
        i0, i1 = tracks.pairs()
        dx = tracks.values[i1] - tracks.values[i0]
        dx -= 2 * np.round(dx / 2)
        assemble_increments(space, tracks.values[i0], dx / tracks.dt, [0, 1])
    wall = time.perf_counter() - t0
    print(json.dumps({"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "wall_s": wall}))


def tracks_memory(quick):
    sizes = (200_000, 2_000_000) if quick else (1_000_000, 10_000_000)
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            path = os.path.join(tmp, f"t{n}.parquet")
            subprocess.run([sys.executable, __file__, "--make-tracks", path, str(n)], check=True)
            mb = os.path.getsize(path) / 2**20
            for mode in ("stream", "in-memory"):
                out = subprocess.run([sys.executable, __file__, "--child-tracks", mode, path], capture_output=True,
                                     text=True, check=True)
                res = json.loads(out.stdout.strip().splitlines()[-1])
                print((n, round(mb, 1), mode, round(res["peak_rss_mb"]), round(res["wall_s"], 2)), flush=True)


def speedup(quick):
    from fpirl.core.density import DensitySnapshots
    from fpirl.distributed import accumulate_normal_equations, dask_client
    from fpirl.core.grid import Grid
    from fpirl.core.hermite import HermiteSpace

    n = 24 if quick else 40
    k = 33 if quick else 65
    grid = Grid([-1.0] * 3, [1.0] * 3, n)
    x = grid.mesh()
    t = 0.01 * np.arange(k)
    values = (1.5 + 0.3 * np.cos(np.pi * x[..., 0]))[None] * (1 + 0.1 * t[:, None, None, None] * np.sin(np.pi * x[..., 1])[None])
    s = DensitySnapshots(grid, t, values)
    h = HermiteSpace.on_grid(grid, 4)
    t0 = time.perf_counter()
    accumulate_normal_equations(s, h, chunk=9)
    rows = [("this process (BLAS threads)", round(time.perf_counter() - t0, 2))]
    print(rows[-1], flush=True)
    for workers in (1, 2):
        with dask_client("local", n_workers=workers) as client:
            accumulate_normal_equations(s, h, chunk=9, scheduler=client)  # warm-up: imports on the workers
            t0 = time.perf_counter()
            accumulate_normal_equations(s, h, chunk=9, scheduler=client)
            rows.append((f"LocalCluster {workers} worker(s)", round(time.perf_counter() - t0, 2)))
        print(rows[-1], flush=True)
    return rows


if __name__ == "__main__":
    internal = {  # the fresh child processes of the memory and tracks parts
        "--make-tracks": lambda path, n: make_parquet(path, int(n)),
        "--child-tracks": child_tracks,
        "--make": lambda path, n: make_file(path, int(n)),
        "--child": child,
    }
    if len(sys.argv) == 4 and sys.argv[1] in internal:
        internal[sys.argv[1]](sys.argv[2], sys.argv[3])
        sys.exit(0)
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", choices=("memory", "tracks", "speedup"))
    ap.add_argument("--format", choices=("nc", "zarr", "both"), default="both", help="density files of the memory part")
    args = ap.parse_args()
    print("load average:", os.getloadavg())
    if args.only in (None, "memory"):
        print("format, snapshots, file MiB, mode, peak RSS MiB, wall s")
        memory(args.quick, ("nc", "zarr") if args.format == "both" else (args.format,))
    if args.only in (None, "tracks"):
        print("track rows, file MiB, mode, peak RSS MiB, wall s")
        tracks_memory(args.quick)
    if args.only in (None, "speedup"):
        print("assembly wall time (s)")
        speedup(args.quick)
    print("load average:", os.getloadavg())
