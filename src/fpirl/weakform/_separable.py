"""A known-potential problem in any dimension whose exact Fokker-Planck solution is cheap.

For a separable potential ``psi(x) = sum_b psi_b(x_b)`` and a product start ``p_0 = prod_b p_{0,b}``
the Fokker-Planck equation splits: ``p(t, x) = prod_b p_b(t, x_b)`` with each ``p_b`` solving the
1-D equation for ``psi_b``. The 1-D solutions come from the independent spectral solver
(:class:`fpirl.forward.SpectralSolver`, periodic) at high resolution, so the d-dimensional data are
accurate to rounding in space and to the solver's RK4 tolerance in time, for d = 2..6 and beyond.
Used by the matrix-free tests (5-D recovery) and ``benchmarks/bench_dims.py`` (d = 2..6).
"""

from __future__ import annotations

import numpy as np

from ..forward import SpectralSolver, von_mises_bump
from ..core.grid import Grid
from ..core.hermite import HermiteAxis, HermiteSpace
from .matfree import StreamingSnapshots

_AMPS = (0.6, 0.45, 0.5, 0.35, 0.55, 0.4)
_PHASES = (0.3, -0.7, 1.1, 2.0, -1.6, 0.8)
_CENTRES = (0.4, -0.3, 0.2, -0.5, 0.1, 0.6)


class _ProductValues:
    """Lazy ``(n_t, *shape)`` array of ``prod_b f_b[t, x_b]``: formed one time slice block at a time."""

    def __init__(self, factors):
        self.factors = factors
        self.shape = (factors[0].shape[0],) + tuple(f.shape[1] for f in factors)

    def __getitem__(self, key):
        if not isinstance(key, slice):
            raise TypeError("only time slices are supported")
        out = self.factors[0][key]
        for f in self.factors[1:]:
            out = out[..., None] * f[key].reshape((f[key].shape[0],) + (1,) * (out.ndim - 1) + (-1,))
        return out


class SeparableProblem:
    """``psi = sum_b a_b cos(pi x_b + phi_b)`` (Hermite-interpolated, so representable) on ``[-1, 1]^d``, periodic.

    Parameters
    ----------
    d : int
    hermite_elements : int
        Hermite elements per axis of the true psi (and of the fit).
    beta, dt, steps : float, float, int
        Inverse temperature, snapshot spacing, number of steps (``steps + 1`` snapshots).
    resolution : int
        Collocation points of the 1-D spectral solves.
    """

    def __init__(self, d, hermite_elements=3, beta=2.0, dt=0.02, steps=19, resolution=256):
        self.d, self.beta = d, float(beta)
        self.times = dt * np.arange(steps + 1)
        self.axes = [HermiteAxis(-1.0, 1.0, hermite_elements, True) for _ in range(d)]
        self.hermite = HermiteSpace([-1.0] * d, [1.0] * d, hermite_elements, True)
        self.coef_1d, self.solvers, self.values_1d = [], [], []
        for b, ax in enumerate(self.axes):
            a, ph = _AMPS[b % 6], _PHASES[b % 6]
            c = np.zeros(ax.n_dofs)
            c[0::2] = a * np.cos(np.pi * ax.nodes + ph)
            c[1::2] = -a * np.pi * np.sin(np.pi * ax.nodes + ph)
            self.coef_1d.append(c)
            grad = lambda x, ax=ax, c=c: (ax.matrix(x[..., 0].ravel(), 1) @ c).reshape(x.shape)  # noqa: E731
            solver = SpectralSolver([-1.0], [1.0], resolution, grad, self.beta)
            init = von_mises_bump([-1.0], [1.0], [_CENTRES[b % 6]], 1.5)
            self.solvers.append(solver)
            self.values_1d.append(solver.solve(init, self.times))

    def psi(self, coords) -> np.ndarray:
        """True psi on a tensor grid (one 1-D array per axis), mean not removed."""
        out = np.zeros(())
        for ax, c, x in zip(self.axes, self.coef_1d, coords):
            out = np.add.outer(out, ax.matrix(x) @ c)
        return out

    def grid(self, elements) -> Grid:
        return Grid([-1.0] * self.d, [1.0] * self.d, elements, boundary="periodic")

    def streaming(self, elements) -> StreamingSnapshots:
        """Snapshots on a ``elements^d`` grid, formed lazily one block of times at a time."""
        grid = self.grid(elements)
        factors = [np.clip(s.evaluate(v, [x]), 0.0, None) for s, v, x in zip(self.solvers, self.values_1d, grid.coords)]
        return StreamingSnapshots(grid, self.times, _ProductValues(factors))

    def error(self, est, n_eval=None) -> float:
        """Relative L2 error of psi (means removed) on an offset tensor grid of ``n_eval^d`` points."""
        n_eval = n_eval or int(max(6, min(40, round(4e6 ** (1.0 / self.d)))))
        x = -1.0 + (np.arange(n_eval) + 0.37) * 2.0 / n_eval
        coords = [x] * self.d
        true = self.psi(coords)
        fit = est.hermite_.evaluate_grid(est.coef_, coords)
        diff = (fit - fit.mean()) - (true - true.mean())
        return float(np.sqrt(np.mean(diff**2)) / true.std())
