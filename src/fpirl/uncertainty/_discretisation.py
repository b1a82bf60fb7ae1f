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

Beta's correction has no threshold and no guard on the grid's size (psi's has both, :func:`psi_corrected_fit`); its
size in noise standard deviations of ``1/beta`` is recorded (``beta_discretisation_z``). Both were measured on the
168 fits of the benchmark below and not adopted: a floor of ``z = 0.5`` left 26 fits uncorrected (median abs beta
error 1.82% -> 1.82% and 1.81% -> 1.77% on the two sets, within 3% 0.71 -> 0.68 and 0.66 -> 0.66); skipping grids with fewer nodes than coefficients
(3-D walls 12^3 at 6 elements) made beta worse at 0-2% noise (-0.1% -> +3.4%) and better at 5% (-6.4% -> -2.7%).

Measured: ``benchmarks/bench_beta_simulated.py`` (docs/benchmarks.md, section "beta's discretisation bias removed
by a simulation").
"""

from __future__ import annotations

import copy
import warnings

import numpy as np

from ..core._errors import FpirlInputError
from ..core.density import DensitySnapshots
from ..estimators.identify import PotentialEstimator
from ..forward.pde import default_resolution, simulate_density
from ._bootstrap import refit_params
from ._resolution import _nodal_energy
from ._snapshot_noise import _density_estimator
from ._time_step import psi_step_z

#: Largest (solver points) x (snapshots) simulated for the correction. Measured with the default solver resolution
#: (:func:`fpirl.forward.pde.default_resolution`) on this project's two cores, one other job running: 2-3 us per unit
#: (3-D, 40^3 spectral or 41^3 finite-volume points x 25 snapshots: 3.4-3.6 s; 4-D, 21^4 finite-volume points x 20:
#: 5.2 s; 24^4 spectral points x 50: 47 s). Larger fits (most 4-D ones) keep their beta uncorrected.
MAX_SIMULATION_WORK = 4e6

#: Accuracy of the simulation's exponential in time where it is the finite-volume solver's (walls): 1e-8, far below
#: the percent-level bias being estimated and the solver's own O(h^2) space error (the Lanczos process from 2-D on,
#: :mod:`fpirl.forward._lanczos`; in 1-D and in its fallback 16 Talbot nodes, 8 factorisations instead of 14; 2-D
#: walled 24^2 grid: the simulation took 3.4 s with the Talbot rule at 1e-14).
SIMULATION_RTOL = 1e-8


def simulation_too_large(grid, n_times: int) -> bool:
    """Whether the simulation of :func:`simulated_refit` on ``grid`` over ``n_times`` snapshots exceeds
    :data:`MAX_SIMULATION_WORK` (solver points of :func:`fpirl.forward.pde.default_resolution` x snapshots)."""
    return float(np.prod(default_resolution(grid))) * int(n_times) > MAX_SIMULATION_WORK


def simulated_refit(inner: PotentialEstimator, snapshots: DensitySnapshots,
                    progress: bool = False) -> PotentialEstimator | None:
    """The estimator of ``inner`` (same settings; beta estimated on block means of the same size, or fixed as it was)
    fitted to noise-free snapshots of ``inner``'s model simulated at ``snapshots``' times from their first snapshot
    (module doc); None where the simulation is too large (:data:`MAX_SIMULATION_WORK`) or fails (a density that
    vanishes on the nodes, a fit that cannot be made).

    Parameters
    ----------
    inner : PotentialEstimator
        Fitted on ``snapshots``.
    snapshots : DensitySnapshots
        The fitted data (their first snapshot starts the simulation, their times are kept).
    progress : bool
        A tqdm bar over the simulation's snapshots.
    """
    grid = snapshots.grid
    if simulation_too_large(grid, snapshots.n_times):
        return None
    hermite, coef, beta = inner.hermite_, np.asarray(inner.coef_, dtype=float), float(inner.beta_)
    times = np.asarray(snapshots.times, dtype=float) - float(snapshots.times[0])
    params = refit_params(inner)
    if params.get("estimate_beta"):
        coarsening = int(getattr(inner, "beta_coarsening_", 1))
        params.update(beta_block=coarsening if coarsening > 1 else None)
    with warnings.catch_warnings():  # the fit's own warnings were given; a failed simulation only skips the correction
        warnings.simplefilter("ignore")
        try:
            values = simulate_density(grid, lambda x: hermite.evaluate(coef, x), lambda x: hermite.gradient(coef, x),
                                      beta, snapshots.values[0], times, rtol=SIMULATION_RTOL, progress=progress)
            return PotentialEstimator(**params).fit(DensitySnapshots(grid, snapshots.times, values))
        except (FpirlInputError, np.linalg.LinAlgError, FloatingPointError):
            return None


def simulated_gamma_bias(inner: PotentialEstimator, snapshots: DensitySnapshots,
                         progress: bool = False) -> tuple[float, float] | None:
    """``(b, beta_sim)``: the bias ``b = 1/beta_sim - 1/beta`` of the density fit ``inner`` (beta estimated) at its
    fitted model (module doc), ``beta_sim`` the fit of the simulated snapshots (:func:`simulated_refit`, ``progress``
    its bar); None where there is none."""
    refit = simulated_refit(inner, snapshots, progress)
    beta_sim = float("nan") if refit is None else float(refit.beta_)
    if not (np.isfinite(beta_sim) and beta_sim > 0):
        return None
    return 1.0 / beta_sim - 1.0 / float(inner.beta_), beta_sim


#: Beta given: psi's correction is not made where its step is below this many noise standard deviations of psi on the
#: nodes (:func:`fpirl.uncertainty._time_step.psi_step_z`): there it cannot be told from the noise. Measured on the
#: 168 fits of ``benchmarks/bench_beta_simulated.py --given``: neutral (medians unchanged, 7 fewer losses and 5 fewer
#: gains than no threshold; thresholds of 1 and more cost gains); it keeps the correction off data that are mostly
#: noise (a 2-D histogram of 40 particles per snapshot: a step of 45% of psi's spread at z = 0.27).
PSI_MIN_Z = 0.5


def psi_corrected_fit(est, post, snapshots, min_z: float = PSI_MIN_Z, progress: bool = False):
    r"""Beta given: the density fit with psi's simulated discretisation bias removed,
    ``theta_corrected = theta - (theta_sim - theta)`` (module doc; ``theta_sim`` from :func:`simulated_refit`, the
    same zero-mean gauge).

    Parameters
    ----------
    est : PotentialEstimator (or an estimator wrapping one as ``estimator_``)
        Fitted with beta given.
    post : CoefficientPosterior or None
        Its posterior; moved in place to the corrected coefficients (``mean``; the spread is kept). Without one the
        step's size against the noise is not known and the correction is made.
    snapshots : DensitySnapshots
        The fitted data.
    min_z : float
        The step must reach this many noise standard deviations of psi on the nodes (:data:`PSI_MIN_Z`).
    progress : bool
        A tqdm bar over the simulation's snapshots.

    Returns
    -------
    PotentialEstimator or None
        A copy of the fit with the corrected ``coef_`` (its ``residual_`` stays the least-squares fit's) and
        ``settings_`` keys ``psi_discretisation_corrected = 1``, ``psi_discretisation_step`` (the correction's
        root mean square over the nodes, relative to psi's) and ``psi_discretisation_z`` (the step in noise standard
        deviations, where there is a posterior), or None where beta was estimated, there is no simulation, the step
        is below ``min_z``, or the fit has fewer nodes than coefficients. There the ridge, not the data, fixes part of
        psi; the refit of the simulated snapshots shrinks that part again, and removing the "bias" would undo the
        regularisation (measured: a 3-D walled fit of 12^3 nodes and 2,744 coefficients at 5% noise went from 7.8% to
        23.9% psi error).
    """
    if not isinstance(snapshots, DensitySnapshots):
        return None
    inner = _density_estimator(est)
    if inner.estimate_beta or snapshots.grid.size < inner.hermite_.n_coef:
        return None
    refit = simulated_refit(inner, snapshots, progress)
    if refit is None:
        return None
    hermite, grid = inner.hermite_, snapshots.grid
    theta = np.asarray(inner.coef_, dtype=float)
    step = hermite.remove_mean(theta - np.asarray(refit.coef_, dtype=float).reshape(theta.shape))
    z = None if post is None else psi_step_z(post, step.ravel(), grid)
    if z is not None and not z >= min_z:
        return None
    fit = copy.copy(inner)
    fit.coef_ = theta + step
    energy = [_nodal_energy(c.ravel(), hermite, grid) for c in (step, theta)]  # zero-mean, summed over the nodes
    fit.settings_ = {**inner.settings_, "psi_discretisation_corrected": 1,
                     "psi_discretisation_step": float(np.sqrt(energy[0] / energy[1])) if energy[1] > 0 else float("inf"),
                     **({} if z is None else {"psi_discretisation_z": z})}
    if post is not None:
        post.mean = np.asarray(fit.coef_, dtype=float).ravel()
    return fit
