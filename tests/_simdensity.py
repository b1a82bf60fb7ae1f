"""Small Fokker-Planck density files for command-line tests (made by the spectral forward solver)."""

from __future__ import annotations

import functools

import numpy as np

from fpirl import DensitySnapshots, Grid, write_density
from fpirl.forward import simulate_density, von_mises_bump

K = np.pi
#: Relative accuracy of the test data's time stepping (the solver's default is ~1e-14): the fits' errors are 1e-4 and
#: larger, and fewer Talbot nodes of the walled solver's exponential halve the cost of making the data.
RTOL = 1e-8


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
                              von_mises_bump(grid.lower, grid.upper, [0.3, -0.4], 1.0), times, rtol=RTOL)
    write_density(path, DensitySnapshots(grid, times, values))
    return path


def _noisy(values: np.ndarray, noise: float, seed: int) -> np.ndarray:
    """A copy of ``values`` with multiplicative noise of relative std ``noise`` (seeded), clipped at 0."""
    if not noise:
        return values.copy()
    return np.clip(values * (1 + noise * np.random.default_rng(seed).standard_normal(values.shape)), 0, None)


def coupled_cosine(w: float, shift: float = 0.0):
    """``(psi, grad)`` of ``0.6 cos(u_0 + 0.3) + 0.35 cos(u_1 - 0.7) + 0.3 sin(u_0) sin(u_1)``, ``u = w (x + shift)``
    (2-D, outside every Hermite space)."""

    def psi(x):
        u = (x + shift) * w
        return 0.6 * np.cos(u[..., 0] + 0.3) + 0.35 * np.cos(u[..., 1] - 0.7) + 0.3 * np.sin(u[..., 0]) * np.sin(u[..., 1])

    def grad(x):
        u = (x + shift) * w
        return w * np.stack([-0.6 * np.sin(u[..., 0] + 0.3) + 0.3 * np.cos(u[..., 0]) * np.sin(u[..., 1]),
                             -0.35 * np.sin(u[..., 1] - 0.7) + 0.3 * np.sin(u[..., 0]) * np.cos(u[..., 1])], -1)

    return psi, grad


@functools.lru_cache(maxsize=4)
def _walled_run(elements: int):
    """The noise-free run of :func:`coarse_step_walled` (cached: several tests share it; its arrays are not written)."""
    psi, grad = coupled_cosine(np.pi / 3, 3.0)
    g = Grid([-3, -3], [3, 3], elements, boundary="reflecting")
    times = 0.2 * np.arange(25)
    values = simulate_density(g, psi, grad, 1.0, von_mises_bump(g.lower, g.upper, [0.9, -1.2], 1.0), times, rtol=RTOL)
    true = psi(g.mesh())
    return g, times, values, true - true.mean()


def coarse_step_walled(elements: int = 16, noise: float = 0.0, seed: int = 0):
    """``(snapshots, true zero-mean psi on the nodes)``: snapshots 0.2 apart (coarse against the box's fast modes)
    on a walled ``elements^2`` grid of ``[-3, 3]^2``, from the finite-volume solver, with multiplicative noise of
    relative std ``noise``; the potential is not in the Hermite space."""
    g, times, values, true = _walled_run(elements)
    return DensitySnapshots(g, times, _noisy(values, noise, seed)), true.copy()


@functools.lru_cache(maxsize=2)
def _double_well_run(elements: int):
    def psi(x):
        return (x[..., 0] ** 2 - 0.6) ** 2 + 0.8 * x[..., 1] ** 2 + 0.3 * x[..., 0] * x[..., 1]

    def grad(x):
        return np.stack([4 * x[..., 0] * (x[..., 0] ** 2 - 0.6) + 0.3 * x[..., 1], 1.6 * x[..., 1] + 0.3 * x[..., 0]], -1)

    g = Grid([-1.5, -1.5], [1.5, 1.5], elements, boundary="reflecting")
    times = 0.02 * np.arange(25)
    values = simulate_density(g, psi, grad, 2.0, von_mises_bump(g.lower, g.upper, [0.45, -0.6], 1.0), times,
                              resolution=2 * elements + 1, rtol=RTOL)  # two cells an element (the default's four: 20x the time)
    true = psi(g.mesh())
    return g, times, values, true - true.mean()


def double_well_walled(elements: int = 24, noise: float = 0.0, seed: int = 0):
    """``(snapshots, true zero-mean psi on the nodes)``: a double well ``(x_0^2 - 0.6)^2 + 0.8 x_1^2 + 0.3 x_0 x_1``
    in the walled box ``[-1.5, 1.5]^2`` (beta 2), 25 snapshots 0.02 apart from the finite-volume solver, with
    multiplicative noise of relative std ``noise``: the start excites fast modes that the midpoint rows integrate
    poorly."""
    g, times, values, true = _double_well_run(elements)
    return DensitySnapshots(g, times, _noisy(values, noise, seed)), true.copy()


def walled_rectangle(noise: float = 0.0, seed: int = 1):
    """``(snapshots, true zero-mean psi)``: 30 x 18 walled elements on ``[0, 5] x [-1, 2]``, beta 2, 25 snapshots 0.02
    apart (finite volumes) of ``0.6 cos(u_0 + 0.3) + 0.35 cos(u_1 - 0.7) + 0.3 sin u_0 sin u_1`` (``u`` one period
    across the box), multiplicative noise of relative std ``noise``: an odd grid too coarse to coarsen."""
    g, times, values, true = _rectangle_run()
    return DensitySnapshots(g, times, _noisy(values, noise, seed)), true.copy()


@functools.lru_cache(maxsize=1)
def _rectangle_run():
    """The noise-free run of :func:`walled_rectangle` (cached)."""
    lo, hi = np.array([0.0, -1.0]), np.array([5.0, 2.0])
    w = 2 * np.pi / (hi - lo)

    def psi(x):
        u = (x - lo) * w
        return 0.6 * np.cos(u[..., 0] + 0.3) + 0.35 * np.cos(u[..., 1] - 0.7) + 0.3 * np.sin(u[..., 0]) * np.sin(u[..., 1])

    def grad(x):
        u = (x - lo) * w
        return w * np.stack([-0.6 * np.sin(u[..., 0] + 0.3) + 0.3 * np.cos(u[..., 0]) * np.sin(u[..., 1]),
                             -0.35 * np.sin(u[..., 1] - 0.7) + 0.3 * np.sin(u[..., 0]) * np.cos(u[..., 1])], -1)

    g = Grid(list(lo), list(hi), (30, 18), boundary="reflecting")
    times = 0.02 * np.arange(25)
    values = simulate_density(g, psi, grad, 2.0, von_mises_bump(g.lower, g.upper, lo + (hi - lo) * [0.65, 0.3], 1.0),
                              times, rtol=RTOL)
    true = psi(g.mesh())
    return g, times, values, true - true.mean()
