"""Streaming fits of density files too large for memory: time linear in the snapshots, memory flat.

Writes density files of K snapshots on a 101 x 101 periodic grid (Fokker-Planck data from the
spectral solver, written block by block, so generating them needs little memory), then fits each
in a fresh process by streaming (``StreamingSnapshots.open`` + the matrix-free solver; the POD
compression of ``NormalOperator._compress`` runs in one pass over the chunks) and reports wall
time and peak RSS. ``--check K`` also fits the first K snapshots in memory with the assembled
solver and prints the relative difference of the two psi. ``--gram`` times the former
compression (a K x K Gram matrix over the snapshots) in the same run, for the ratio.

Usage::

    python benchmarks/bench_streaming.py --snapshots 3000 9000 --dir /tmp/stream --check 3000 --gram 3000
    python benchmarks/bench_streaming.py --snapshots 30000 --dir /tmp/stream     # 2.45 GB file

Peak RSS is the child process's ``ru_maxrss`` (the fit only: the file is written beforehand).
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

N_NODES = 101
BETA = 4.0
DT = 1e-4
HERMITE = 6
BLOCK = 500


def _grid():
    from fpirl.core.grid import Grid

    return Grid([-1.0, -1.0], [1.0, 1.0], [N_NODES, N_NODES], names=("x", "a"), roles=("state", "action"),
                boundary="periodic")


def generate(path: Path, n_snapshots: int) -> None:
    """Fokker-Planck snapshots ``t_k = k DT`` on the grid's nodes (the solver's collocation points)."""
    import netCDF4
    import xarray as xr

    from fpirl.core.hermite import HermiteSpace
    from fpirl.forward import SpectralSolver, von_mises_bump
    from fpirl.io.netcdf import density_dataset
    from fpirl.core.density import DensitySnapshots
    from fpirl.problems.synthetic import smooth_function

    grid = _grid()
    lower, upper = list(grid.lower), list(grid.upper)
    hermite = HermiteSpace(lower, upper, 3, True)
    coef = hermite.remove_mean(hermite.interpolate(smooth_function(2, True)))
    solver = SpectralSolver(lower, upper, N_NODES, lambda x: hermite.gradient(coef, x), BETA)
    times = DT * np.arange(n_snapshots)
    run = solver.run(von_mises_bump(lower, upper, [0.4, -0.3], 1.5), times)
    tmp = path.with_suffix(".part.nc")
    block, written = [], 0
    for _, p in run:
        block.append(np.maximum(p, 0.0))
        if len(block) == BLOCK or written + len(block) == n_snapshots:
            values = np.stack(block)
            if written == 0:
                ds = density_dataset(DensitySnapshots(grid, times[:len(block)], values))
                ds.to_netcdf(tmp, unlimited_dims=["time"])
            else:
                with netCDF4.Dataset(tmp, "a") as nc:
                    nc["time"][written:written + len(block)] = times[written:written + len(block)]
                    nc["density"][written:written + len(block)] = values
            written += len(block)
            block = []
    os.replace(tmp, path)
    with xr.open_dataset(path) as ds:
        assert ds.sizes["time"] == n_snapshots


def _gram_compress(self, rtol):
    """The former compression (for --gram): the K x K Gram matrix of the time pairs, pairs of chunks re-read."""
    import scipy.linalg

    chunks = list(range(0, self.source.n_times - 1, self.chunk))
    K = self.source.n_times - 1
    G = np.zeros((K, K))
    for i, (_, (pi, _)) in zip(chunks, self._pbar_chunks()):
        pi = pi.reshape(pi.shape[0], -1)
        for j, (_, (pj, _)) in zip(chunks, self._pbar_chunks()):
            if j >= i:
                G[i:i + len(pi), j:j + len(pj)] = pi @ pj.reshape(pj.shape[0], -1).T
    G = np.triu(G) + np.triu(G, 1).T
    lam, vec = scipy.linalg.eigh(G)
    vec = vec[:, lam > rtol * lam[-1]]
    Q = np.zeros((vec.shape[1], self.grid.size))
    for i, (_, (pi, _)) in zip(chunks, self._pbar_chunks()):
        Q += vec[i:i + len(pi)].T @ pi.reshape(pi.shape[0], -1)
    self._modes = Q.reshape((-1,) + self.shape)
    self.n_modes = int(vec.shape[1])


def child(path: str, mode: str, n_first: int, out: str) -> None:
    """One fit in this process; prints a JSON line (seconds, peak RSS in MB, modes) and saves psi."""
    from fpirl.estimators.identify import PotentialEstimator
    from fpirl.io.netcdf import read_density
    from fpirl.weakform import matfree

    start = time.perf_counter()
    modes = None
    if mode == "cli":  # the command a user runs: files over 2 GB are streamed (fpirl.cli.fit.STREAM_BYTES)
        import xarray as xr

        from fpirl.cli import main

        result = Path(out).with_suffix(".nc")
        assert main(["fit", path, "-o", str(result), "--beta", str(BETA), "--hermite-elements", str(HERMITE),
                     "--no-progress"]) == 0
        with xr.open_dataset(result) as ds:
            psi = ds["potential"].values
        np.save(out, psi)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        print(json.dumps({"seconds": time.perf_counter() - start, "peak_mb": peak, "modes": None}))
        return
    if mode == "memory":
        snaps = read_density(path)
        if n_first:
            snaps = type(snaps)(snaps.grid, snaps.times[:n_first], snaps.values[:n_first])
        est = PotentialEstimator(hermite_elements=HERMITE, beta=BETA, ridge=1e-8, solver="assembled").fit(snaps)
    else:
        captured = {}
        init = matfree.NormalOperator.__init__

        def spy(self, *a, **k):
            if mode == "gram":  # streamed right-hand sides and trace, then the former compression pass
                init(self, *a, **{**k, "compress": None})
                _gram_compress(self, 1e-13)
            else:
                init(self, *a, **k)
            captured["modes"] = self.n_modes

        matfree.NormalOperator.__init__ = spy
        with matfree.StreamingSnapshots.open(path) as lazy:
            est = PotentialEstimator(hermite_elements=HERMITE, beta=BETA, ridge=1e-8, solver="matrix-free",
                                     cg_tol=1e-12).fit(lazy)
        modes = captured.get("modes")
    seconds = time.perf_counter() - start
    np.save(out, est.potential_on_grid())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"seconds": seconds, "peak_mb": peak, "modes": modes}))


def _run_child(path, mode, n_first, out, timeout, threads=1):
    cmd = [sys.executable, __file__, "--child", str(path), mode, str(n_first), str(out)]
    env = dict(os.environ)
    if threads:
        env.update({k: str(threads) for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")})
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if res.returncode:
        raise RuntimeError(res.stderr[-2000:])
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--snapshots", type=int, nargs="+", default=[3000, 9000])
    ap.add_argument("--dir", type=Path, default=Path("/tmp/fpirl_stream"))
    ap.add_argument("--check", type=int, default=0, help="fit the first K snapshots in memory and compare psi")
    ap.add_argument("--cli", type=int, nargs="*", default=[], help="also run 'fpirl fit' (as a user would) at K")
    ap.add_argument("--gram", type=int, nargs="*", default=[], help="also time the former Gram compression at K")
    ap.add_argument("--timeout", type=float, default=1200.0)
    ap.add_argument("--threads", type=int, default=1,
                    help="BLAS threads of the fits (default 1: on a shared, busy machine multithreaded OpenBLAS "
                    "spin-waits and runs several times slower; 0 leaves the environment as it is)")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        path, mode, n_first, out = args.child
        return child(path, mode, int(n_first), out)
    args.dir.mkdir(parents=True, exist_ok=True)
    print(f"load: {os.getloadavg()}")
    for k in args.snapshots:
        path = args.dir / f"density_{k}.nc"
        if not path.exists():
            t0 = time.perf_counter()
            generate(path, k)
            print(f"generated {path} ({path.stat().st_size / 1e9:.2f} GB) in {time.perf_counter() - t0:.1f} s")
        r = _run_child(path, "stream", 0, args.dir / f"psi_stream_{k}.npy", args.timeout, args.threads)
        print(f"K={k}: streamed fit {r['seconds']:.1f} s, peak RSS {r['peak_mb']:.0f} MB, {r['modes']} POD modes")
        if k in args.cli:
            c = _run_child(path, "cli", 0, args.dir / f"psi_cli_{k}.npy", args.timeout, args.threads)
            print(f"K={k}: fpirl fit {c['seconds']:.1f} s, peak RSS {c['peak_mb']:.0f} MB")
        if k in args.gram:
            g = _run_child(path, "gram", 0, args.dir / f"psi_gram_{k}.npy", args.timeout, args.threads)
            print(f"K={k}: former Gram compression {g['seconds']:.1f} s, peak RSS {g['peak_mb']:.0f} MB")
        if k == args.check:
            m = _run_child(path, "memory", k, args.dir / f"psi_memory_{k}.npy", args.timeout, args.threads)
            a, b = np.load(args.dir / f"psi_stream_{k}.npy"), np.load(args.dir / f"psi_memory_{k}.npy")
            rel = np.abs(a - b).max() / np.abs(b).max()
            print(f"K={k}: in-memory assembled fit {m['seconds']:.1f} s, peak RSS {m['peak_mb']:.0f} MB; "
                  f"max |psi_stream - psi_memory| / max |psi_memory| = {rel:.2e}")
    print(f"load: {os.getloadavg()}")


if __name__ == "__main__":
    main()
