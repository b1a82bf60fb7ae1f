r"""beta's discretisation bias estimated by a simulation at the fitted model, and removed (issue 20).

A density fit's ``gamma = 1/beta`` carries, besides the snapshot noise and the Hermite basis error, the error
of the discretisation the weak form uses: the time rule over the snapshot spacing ``dt`` (the midpoint rule's
``O(dt^2)``; large where fast modes decay within a step) and the linear finite elements of the density on the
data's grid (or on the coarse grid of block means, :mod:`fpirl.estimators._beta_noise`). Both depend on the
model and on the data's time and space content, so no fixed rule removes them. This module estimates the bias
at the fitted model, the first-order (plug-in) bias correction of an estimator (MacKinnon and Smith 1998,
"Approximate bias correction in econometrics", J. Econometrics 85):

.. math::
    b(\hat\theta) = \hat\gamma\big(D(\hat\psi, \hat\beta)\big) - \hat\gamma,\qquad
    \gamma_{corrected} = \gamma - b(\hat\theta),

where ``D(psi, beta)`` are noise-free snapshots of eq. ``fokker_planck_eq`` with the fitted potential and
temperature, solved accurately by the independent forward solvers (:func:`fpirl.forward.simulate_density`:
spectral on periodic boxes, finite volumes exact in time with walls) at the data's times, from the first
snapshot (its cubic spline), and fitted by the same estimator (same Hermite space, relative ridge and time
rule, and block means of the same size where the fit took beta from them). ``psi_hat`` lies in the Hermite
space, so the refit has no basis error: ``b`` holds the time-step and grid errors alone. ``b`` is computed
from noise-free data; its own error is ``b'(theta) (theta_hat - theta)``, second order in the fit's error.

``fpirl fit`` makes this correction where the basis correction (:mod:`fpirl.uncertainty._beta_point`) is not made.
Where it is, Richardson's step over the Hermite resolution already holds the discretisation bias's change with the
resolution (the coarser fits' potentials are smoother and excite fewer fast modes): on 3-D grids of 12^3 nodes the
basis correction alone took beta from +5.0% to -2.0%, and subtracting ``b`` too took it to -5.4%.

Measured: ``benchmarks/bench_beta_simulated.py`` (docs/benchmarks.md, section "beta's discretisation bias removed
by a simulation").
"""

from __future__ import annotations

import warnings

import numpy as np

from ..core._errors import FpirlInputError
from ..core.density import DensitySnapshots
from ..estimators.identify import PotentialEstimator
from ..forward.pde import default_resolution, simulate_density
from ._bootstrap import refit_params

#: Largest (solver points) x (snapshots) simulated for the correction. Measured with the default solver resolution
#: (:func:`fpirl.forward.pde.default_resolution`) on this project's two cores, one other job running: 2-3 us per unit
#: (3-D, 40^3 spectral or 41^3 finite-volume points x 25 snapshots: 3.4-3.6 s; 4-D, 21^4 finite-volume points x 20:
#: 5.2 s; 24^4 spectral points x 50: 47 s). Larger fits (most 4-D ones) keep their beta uncorrected.
MAX_SIMULATION_WORK = 4e6


def simulated_gamma_bias(inner: PotentialEstimator, snapshots: DensitySnapshots) -> tuple[float, float] | None:
    """``(b, beta_sim)``: the bias ``b = 1/beta_sim - 1/beta`` of the density fit ``inner`` at its fitted model
    (module doc), ``beta_sim`` the fit of the simulated snapshots; None where the simulation is too large
    (:data:`MAX_SIMULATION_WORK`) or fails (a density that vanishes on the nodes, a fit that cannot be made).

    Parameters
    ----------
    inner : PotentialEstimator
        Fitted with beta estimated on ``snapshots``.
    snapshots : DensitySnapshots
        The fitted data (their first snapshot starts the simulation, their times are kept).
    """
    grid = snapshots.grid
    if float(np.prod(default_resolution(grid))) * snapshots.n_times > MAX_SIMULATION_WORK:
        return None
    hermite, coef, beta = inner.hermite_, np.asarray(inner.coef_, dtype=float), float(inner.beta_)
    times = np.asarray(snapshots.times, dtype=float) - float(snapshots.times[0])
    params = refit_params(inner)
    coarsening = int(getattr(inner, "beta_coarsening_", 1))
    params.update(estimate_beta=True, beta_block=coarsening if coarsening > 1 else None)
    with warnings.catch_warnings():  # the fit's own warnings were given; a failed simulation only skips the correction
        warnings.simplefilter("ignore")
        try:
            values = simulate_density(grid, lambda x: hermite.evaluate(coef, x), lambda x: hermite.gradient(coef, x),
                                      beta, snapshots.values[0], times)
            refit = PotentialEstimator(**params).fit(DensitySnapshots(grid, snapshots.times, values))
        except (FpirlInputError, np.linalg.LinAlgError, FloatingPointError):
            return None
    beta_sim = float(refit.beta_)
    if not (np.isfinite(beta_sim) and beta_sim > 0):
        return None
    return 1.0 / beta_sim - 1.0 / beta, beta_sim
