"""The built-in demo: recover a known potential from synthetic Fokker-Planck data.

Setting (docs/method.md, "Benchmark data"): one state ``s`` and one action
``a`` on the periodic box ``[-1, 1]^2``, ``beta = 5``, snapshot spacing ``dt = 0.02``, 50
snapshots. The true potential lies inside the periodic cubic Hermite space with 4 elements per
axis: it is the Hermite interpolant of

    f(s, a) = 0.5 * ( -cos(pi (a - 0.5 sin(pi s))) + 0.3 cos(pi s) ),

whose preferred action ``a = 0.5 sin(pi s)`` depends on the state. The data are an accurate
(pseudo-spectral) solution of the FP PDE started from a smooth von Mises bump away from
equilibrium, sampled on a 40 x 40 finite-element grid; the fit uses the same Hermite space with
``beta`` fixed. Expected relative L2 error of psi: about 1.6% (it falls with the FE grid; where
the density carries almost no mass psi is only weakly identified, which is why the amplitude
of psi is kept moderate: ``beta * range(psi)`` is about 6).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core._progress import status_line
from ..core.density import DensitySnapshots
from ..core.grid import Grid
from ..core.hermite import HermiteSpace
from ..estimators.identify import PotentialEstimator
from ..evaluation.metrics import l2_error, relative_l2_error
from ..forward import simulate_density, von_mises_bump
from ..io.netcdf import result_dataset, write_density, write_result
from ..plotting.fields import plot_potential_comparison
from ..mdp.recovery import recover_mdp_from_fit

__all__ = ["DemoProblem", "demo_problem", "run_demo"]

DEMO_BETA = 5.0
DEMO_DT = 0.02
DEMO_SNAPSHOTS = 50
DEMO_ELEMENTS = 40
DEMO_HERMITE_ELEMENTS = 4
DEMO_GAMMA = 0.99
DEMO_AMPLITUDE = 0.5
DEMO_KAPPA = 1.0
DEMO_CENTRE = (0.0, -0.6)


def _f_partials(points: np.ndarray, alpha: tuple[int, int]) -> np.ndarray:
    """Mixed partials d^alpha f of f(s, a) = -cos(pi (a - sin(pi s)/2)) + 0.3 cos(pi s) (before scaling)."""
    s, a = points[..., 0], points[..., 1]
    pi = np.pi
    u = pi * (a - 0.5 * np.sin(pi * s))
    du_ds = -0.5 * pi**2 * np.cos(pi * s)
    if alpha == (0, 0):
        return -np.cos(u) + 0.3 * np.cos(pi * s)
    if alpha == (1, 0):
        return np.sin(u) * du_ds - 0.3 * pi * np.sin(pi * s)
    if alpha == (0, 1):
        return pi * np.sin(u)
    if alpha == (1, 1):
        return pi * np.cos(u) * du_ds
    raise ValueError(f"unexpected derivative {alpha}")


@dataclass
class DemoProblem:
    """Ground truth and data of the demo."""

    grid: Grid
    hermite: HermiteSpace
    coef_true: np.ndarray
    beta: float
    dt: float
    times: np.ndarray
    snapshots: DensitySnapshots

    def potential(self, points) -> np.ndarray:
        return self.hermite.evaluate(self.coef_true, points)

    def gradient(self, points) -> np.ndarray:
        return self.hermite.gradient(self.coef_true, points)

    def potential_on_grid(self, grid: Grid | None = None) -> np.ndarray:
        """True psi on the nodes of ``grid`` (default: the data grid), zero mean over the domain."""
        grid = self.grid if grid is None else grid
        return self.hermite.evaluate_grid(self.coef_true, grid.coords)


def demo_problem(
    elements: int = DEMO_ELEMENTS,
    hermite_elements: int = DEMO_HERMITE_ELEMENTS,
    n_snapshots: int = DEMO_SNAPSHOTS,
    dt: float = DEMO_DT,
    beta: float = DEMO_BETA,
    progress: bool = False,
) -> DemoProblem:
    """Build the demo's ground truth and simulate its density snapshots (FP PDE, spectral)."""
    lower, upper = [-1.0, -1.0], [1.0, 1.0]
    grid = Grid(lower, upper, elements, names=["s", "a"], roles=["state", "action"], boundary="periodic")
    hermite = HermiteSpace.on_grid(grid, hermite_elements)
    coef_true = DEMO_AMPLITUDE * hermite.remove_mean(hermite.interpolate(_f_partials))
    times = dt * np.arange(n_snapshots)
    initial = von_mises_bump(lower, upper, centre=DEMO_CENTRE, kappa=DEMO_KAPPA)
    with warnings.catch_warnings():
        # A cubic Hermite psi is only C^1 (its second derivative jumps at the Hermite nodes), so its
        # Fourier spectrum decays algebraically and the spectral solver's resolution check reports
        # a high-mode tail of ~1e-5 of the mean. That is far below the ~1e-2 error of the fit, so
        # the warning is expected here and not shown.
        warnings.filterwarnings("ignore", message="spectral solution may be under-resolved")
        values = simulate_density(
            grid,
            lambda x: hermite.evaluate(coef_true, x),
            lambda x: hermite.gradient(coef_true, x),
            beta,
            initial,
            times,
            progress=progress,
        )
    snapshots = DensitySnapshots(grid, times, values)
    return DemoProblem(grid, hermite, coef_true, float(beta), float(dt), times, snapshots)


def run_demo(outdir="fpirl-demo", progress: bool = True, *, elements: int = DEMO_ELEMENTS,
             n_snapshots: int = DEMO_SNAPSHOTS, verbose: bool = True) -> dict:
    """Run the demo end to end: simulate, fit, report the error, write data, result and figure.

    Writes into ``outdir`` (created if missing): ``demo_density.nc`` (the simulated density
    snapshots, a density dataset that ``fpirl fit`` reads), ``demo_result.nc`` (result dataset,
    with Q-value, policy and reward for gamma = 0.99) and ``demo_potential.png`` (true vs
    recovered psi).

    Returns
    -------
    dict
        ``relative_l2_error`` (psi, zero mean, relative to std of the truth), ``l2_error``,
        ``beta``, ``residual``, ``seconds`` (wall time per stage), ``data``, ``result`` and
        ``figure`` (paths).
    """
    def say(msg):
        if verbose:
            status_line(msg)

    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    seconds = {}

    t0 = time.perf_counter()
    say(f"fpirl demo: simulating the FP PDE ({n_snapshots} snapshots, dt={DEMO_DT}, beta={DEMO_BETA}) ...")
    prob = demo_problem(elements=elements, n_snapshots=n_snapshots, progress=progress)
    data = write_density(outdir / "demo_density.nc", prob.snapshots)
    seconds["simulate"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    say(f"fpirl demo: fitting psi with {DEMO_HERMITE_ELEMENTS} Hermite elements per axis on {prob.grid!r} ...")
    est = PotentialEstimator(hermite_elements=DEMO_HERMITE_ELEMENTS, beta=prob.beta, progress=progress)
    est.fit(prob.snapshots)
    seconds["fit"] = time.perf_counter() - t0

    grid = prob.grid
    psi_true = prob.potential_on_grid()
    psi_fit = est.potential_on_grid()
    psi_true = psi_true - psi_true.mean()
    psi_fit = psi_fit - psi_fit.mean()
    err = l2_error(psi_fit, psi_true)
    rel = relative_l2_error(psi_fit, psi_true)

    t0 = time.perf_counter()
    mdp = recover_mdp_from_fit(est, prob.dt, gamma=DEMO_GAMMA)
    ds = result_dataset(est, mdp=mdp, dt=prob.dt,
                        extra={"source": "fpirl demo (synthetic FP PDE data)",
                               "demo_relative_l2_error": rel})
    result = write_result(outdir / "demo_result.nc", ds)
    figure = plot_potential_comparison(
        grid, psi_true, psi_fit, outdir / "demo_potential.png",
        title=f"fpirl demo: relative L2 error of psi = {100 * rel:.2f}%",
    )
    seconds["write"] = time.perf_counter() - t0

    say(f"fpirl demo: relative L2 error of psi (zero mean, / std of truth) = {100 * rel:.2f}%  "
        f"(RMS error {err:.3g})")
    say(f"fpirl demo: relative residual of the fit = {est.residual_:.3g}")
    say(f"fpirl demo: wrote {data} (the input density), {result} and {figure}")
    say(f"fpirl demo: fit the data yourself with: fpirl fit {data} -o result.nc --beta {DEMO_BETA:g}")
    say("fpirl demo: time " + ", ".join(f"{k} {v:.2f} s" for k, v in seconds.items()))
    return {
        "relative_l2_error": rel,
        "l2_error": err,
        "beta": est.beta_,
        "residual": est.residual_,
        "seconds": seconds,
        "data": data,
        "result": result,
        "figure": figure,
    }
