"""Small Fokker-Planck density files for command-line tests (made by the spectral forward solver)."""

from __future__ import annotations

import numpy as np

from fpirl import DensitySnapshots, Grid, write_density
from fpirl.forward import simulate_density, von_mises_bump

K = np.pi


def psi2(x):
    """The test potential ``0.5 cos(pi s) sin(pi a) + 0.3 cos(pi a)``."""
    return 0.5 * np.cos(K * x[..., 0]) * np.sin(K * x[..., 1]) + 0.3 * np.cos(K * x[..., 1])


def grad_psi2(x):
    s, a = x[..., 0], x[..., 1]
    return np.stack([-0.5 * K * np.sin(K * s) * np.sin(K * a),
                     0.5 * K * np.cos(K * s) * np.cos(K * a) - 0.3 * K * np.sin(K * a)], axis=-1)


def write_fp_density(path, elements: int, n_times: int, beta: float = 4.0):
    """2-D periodic (state ``s``, action ``a``) FP data of :func:`psi2` from a von Mises bump,
    ``n_times`` snapshots 0.02 apart, written to ``path``; returns ``path``."""
    grid = Grid([-1, -1], [1, 1], elements, names=["s", "a"], roles=["state", "action"])
    times = 0.02 * np.arange(n_times)
    values = simulate_density(grid, psi2, grad_psi2, beta,
                              von_mises_bump(grid.lower, grid.upper, [0.3, -0.4], 1.0), times)
    write_density(path, DensitySnapshots(grid, times, values))
    return path
