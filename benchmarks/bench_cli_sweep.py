"""`fpirl fit` with its defaults on independent-solver data it was not tuned on: 2-D / 3-D, periodic / walls,
0 / 2 / 5% noise, beta given / estimated (4 Hermite elements, the default).

Run:  PYTHONPATH=src python benchmarks/bench_cli_sweep.py [--dims 2,3] [--out DIR]

Data: ``psi = sum_b a_b cos(pi x_b + phi_b) + 0.3 prod_b sin(pi x_b)`` (a coupled potential, outside the
Hermite space), beta = 4, a von Mises bump at t = 0, 25 snapshots 0.02 apart, from
:func:`fpirl.forward.simulate_density` (spectral solver on periodic grids, finite volumes with walls),
on 24^2 / 12^3 FE nodes, times ``1 + noise eps`` (clipped at 0). Each fit is a fresh ``python -m fpirl.cli fit``
process. Per case: exit code, wall time, psi's relative L2 error (zero-mean, grid quadrature), the share of
nodes inside the 90% band ``potential +- 1.645 potential_std``, and with beta estimated the raw and
corrected beta and the interval.
"""

import argparse
import itertools
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

K = np.pi


def problem(d, n, boundary, noise, seed=1, beta=4.0, n_t=25):
    from fpirl import DensitySnapshots, Grid
    from fpirl.forward import simulate_density, von_mises_bump

    amp, ph = np.array([0.6, 0.35, 0.25])[:d], np.array([0.3, -0.7, 1.1])[:d]

    def psi(x):
        return (amp * np.cos(K * x + ph)).sum(-1) + 0.3 * np.prod(np.sin(K * x), axis=-1)

    def grad(x):
        s, c = np.sin(K * x), np.cos(K * x)
        prod = [0.3 * K * c[..., a] * np.prod(np.delete(s, a, axis=-1), axis=-1) for a in range(d)]
        return -amp * K * np.sin(K * x + ph) + np.stack(prod, -1)

    g = Grid([-1.0] * d, [1.0] * d, n, boundary=boundary, names=["s0", "a0", "a1"][:d],
             roles=["state"] + ["action"] * (d - 1))
    times = 0.02 * np.arange(n_t)
    v = simulate_density(g, psi, grad, beta, von_mises_bump(g.lower, g.upper, [0.3, -0.4, 0.2][:d], 1.0), times)
    if noise:
        v = np.clip(v * (1 + noise * np.random.default_rng(seed).standard_normal(v.shape)), 0, None)
    return DensitySnapshots(g, times, v), psi


def main():
    import xarray as xr

    from fpirl import write_density

    ap = argparse.ArgumentParser()
    ap.add_argument("--dims", default="2,3")
    ap.add_argument("--out", default=None, help="keep the files here (default: a temporary folder)")
    args = ap.parse_args()
    folder = args.out or tempfile.mkdtemp()
    print("| d | walls | noise | beta | exit | wall s | psi error | band coverage | beta raw | beta corrected | "
          "interval | covers |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for d, boundary, noise in itertools.product(map(int, args.dims.split(",")), ("periodic", "reflecting"),
                                                (0.0, 0.02, 0.05)):
        s, psi = problem(d, 24 if d == 2 else 12, boundary, noise)
        path = os.path.join(folder, f"d{d}{boundary[0]}{noise}.nc")
        write_density(path, s)
        X = np.stack(np.meshgrid(*s.grid.coords, indexing="ij"), -1)
        true = psi(X)
        true = true - s.grid.integrate(true) / s.grid.integrate(np.ones_like(true))
        for opt in (["--beta", "4"], ["--estimate-beta"]):
            out = path.replace(".nc", f"{len(opt)}.out.nc")
            t0 = time.perf_counter()
            r = subprocess.run([sys.executable, "-m", "fpirl.cli", "fit", path, "-o", out, "--no-progress", *opt],
                               capture_output=True, text=True)
            wall = time.perf_counter() - t0
            row = [d, "walls" if boundary == "reflecting" else "periodic", f"{100 * noise:.0f}%",
                   "given" if len(opt) == 2 else "estimated", r.returncode, f"{wall:.1f}"]
            if r.returncode:
                print("| " + " | ".join(map(str, row)) + f" | {r.stderr.strip()[-120:]} |", flush=True)
                continue
            with xr.open_dataset(out) as ds:
                est = ds["potential"].values
                est = est - s.grid.integrate(est) / s.grid.integrate(np.ones_like(est))
                err = np.sqrt(s.grid.integrate((est - true) ** 2) / s.grid.integrate(true ** 2))
                cover = np.mean(np.abs(est - true) <= 1.645 * ds["potential_std"].values)
                a = ds.attrs
                row += [f"{100 * err:.2f}%", f"{cover:.3f}"]
                if len(opt) == 1:
                    lo, hi, bc = a.get("beta_lower"), a.get("beta_upper"), a.get("beta_corrected")
                    row += [f"{a['beta']:.3f} ({100 * (a['beta'] / 4 - 1):+.1f}%)",
                            "-" if bc is None else f"{bc:.3f} ({100 * (bc / 4 - 1):+.1f}%)",
                            f"[{lo:.2f}, {hi:.2f}]", "yes" if lo <= 4 <= hi else "NO"]
                else:
                    row += ["-"] * 4
            print("| " + " | ".join(map(str, row)) + " |", flush=True)


if __name__ == "__main__":
    main()
