"""Known-potential problems for validating the inference: psi in a Hermite space, data from the
independent forward solver (:mod:`fpirl.forward`) brought onto any FE grid.

Used by the tests and by ``benchmarks/bench_recovery.py``; also handy to check a set-up (grid,
Hermite resolution, snapshot spacing) before running it on real data.
"""

import numpy as np

from ..core.density import DensitySnapshots
from ..forward import FiniteVolumeSolver, SpectralSolver, von_mises_bump
from ..core.grid import Grid
from ..core.hermite import HermiteSpace
from ..evaluation.metrics import gradient_l2_error, relative_l2_error


def smooth_function(d, periodic):
    """f and its mixed partials {0,1}^d: a sum of separable trigonometric terms."""
    k = np.pi if periodic else 0.5 * np.pi
    amps = [0.6, 0.35, 0.25][:d]
    phases = [0.3, -0.7, 1.1][:d]

    def deriv(points, alpha):
        out = 0.0
        # sum_b amp_b cos(k x_b + phase_b)  +  0.2 prod_b sin(k x_b)
        for b in range(d):
            if sum(alpha) > 1 or (sum(alpha) == 1 and alpha[b] == 0):
                continue
            x = points[..., b]
            out = out + (amps[b] * np.cos(k * x + phases[b]) if alpha[b] == 0 else -amps[b] * k * np.sin(k * x + phases[b]))
        prod = 0.2
        for b in range(d):
            x = points[..., b]
            prod = prod * (np.sin(k * x) if alpha[b] == 0 else k * np.cos(k * x))
        return out + prod

    return deriv


class Problem:
    """psi_true in a Hermite space, data from an independent forward solver evaluated on any grid."""

    def __init__(self, d, boundary, hermite_elements=3, beta=4.0, dt=0.02, steps=30, resolution=None, rtol=1e-10):
        self.d, self.boundary, self.beta = d, boundary, beta
        periodic = boundary == "periodic"
        lower, upper = [-1.0] * d, [1.0] * d
        self.hermite = HermiteSpace(lower, upper, hermite_elements, periodic)
        self.coef = self.hermite.remove_mean(self.hermite.interpolate(smooth_function(d, periodic)))
        self.times = dt * np.arange(steps + 1)
        if periodic:
            res = resolution or {1: 256, 2: 96, 3: 48}[d]
            solver = SpectralSolver(lower, upper, res, lambda x: self.hermite.gradient(self.coef, x), beta)
            init = von_mises_bump(lower, upper, [0.4, -0.3, 0.2][:d], 1.5)
        else:
            res = resolution or {1: 801, 2: 161, 3: 49}[d]
            solver = FiniteVolumeSolver(lower, upper, res, lambda x: self.hermite.evaluate(self.coef, x), beta, rtol=rtol)
            centre = np.array([0.4, -0.3, 0.2][:d])
            init = lambda x: np.exp(-np.sum((x - centre) ** 2, axis=-1) / (2 * 0.35**2))
        self.solver = solver
        self.values = solver.solve(init, self.times)

    def snapshots(self, elements) -> DensitySnapshots:
        grid = Grid([-1.0] * self.d, [1.0] * self.d, elements, boundary=self.boundary)
        v = np.clip(self.solver.evaluate(self.values, grid.coords), 0.0, None)
        return DensitySnapshots(grid, self.times, v)

    def errors(self, est, n_eval=60):
        """Relative L2 errors of psi (means removed) and of grad psi on a fine evaluation grid."""
        periodic = self.boundary == "periodic"
        x = np.linspace(-1, 1, n_eval + (0 if periodic else 1))[: n_eval] if periodic else np.linspace(-1, 1, n_eval)
        coords = [x] * self.d
        true = self.hermite.evaluate_grid(self.coef, coords)
        fit = est.hermite_.evaluate_grid(est.coef_, coords)
        gt = self.hermite.gradient_grid(self.coef, coords)
        gf = est.hermite_.gradient_grid(est.coef_, coords)
        return (relative_l2_error(fit, true, subtract_mean=True), gradient_l2_error(gf, gt, relative=True))


def random_periodic_potential(grid: Grid, rng, n_modes: int = 3, amp: float = 1.0):
    """A random smooth periodic potential on the nodes of ``grid`` and its exact gradient.

    ``psi(x) = sum_m c_m cos(k_m . x + phi_m)`` with wave vectors ``k_m`` of at most two periods per
    axis, ``c_m ~ amp N(0, 1)``, ``phi_m ~ U(0, 2 pi)``. Returns ``(psi, grad)`` with shapes
    ``grid.shape`` and ``(grid.ndim, *grid.shape)``.
    """
    x = grid.mesh()
    psi = np.zeros(grid.shape)
    grad = np.zeros((grid.ndim,) + grid.shape)
    lengths = grid.upper - grid.lower
    for _ in range(n_modes):
        k = rng.integers(-2, 3, size=grid.ndim) * 2 * np.pi / lengths
        phase = rng.uniform(0, 2 * np.pi)
        c = amp * rng.normal()
        arg = x @ k + phase
        psi += c * np.cos(arg)
        grad -= c * np.sin(arg)[None] * k.reshape((-1,) + (1,) * grid.ndim)
    return psi, grad
