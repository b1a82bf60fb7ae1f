r"""The time-step column of a density posterior with beta estimated: the midpoint rule's error by Simpson's rule.

Used by :func:`fpirl.uncertainty.estimate.posterior` (docs/method.md, "Time step").

``beta`` is identified by the transients only, and the midpoint rows (eq. fokker_planck_residual_1 with
:func:`fpirl.weakform.assembly.time_pairs`) integrate a mode ``exp(-lambda t)`` with the relative error
``(lambda dt)^2 / 12``. Where the snapshots are far apart against the data's fast modes (walls, an initial
density far from equilibrium) that error biases ``1/beta`` by more than its noise: on a walled box sampled
every ``dt = 0.2`` (noise-free data from the finite-volume solver) beta came out 12-25% high, with an interval
that missed it. Simpson's rows (order 4) on the same data move it most of the way back, so the refit with
``time_scheme='simpson'`` (same data, settings, Hermite space, relative ridge and beta block) gives the column

.. math::
    t = x_{\mathrm{midpoint}} - x_{\mathrm{Simpson}},\qquad x = [\theta; 1/\beta],

the estimate of the fit's time-discretisation error. Its ``1/beta`` entry is appended to the posterior's
factor like the basis column (a systematic error of either sign, not moved into the point estimate), so beta's
interval and the policy and reward bands hold it; its psi part is left out: with beta estimated the psi bands
already covered 0.86-1.0 of the nodes on the sweep of docs/benchmarks.md ("Time step"), the column would only
widen them. The entry is not shrunk: the two fits see the same data and much of their noise cancels in it;
where it does not (5% noise: the noise correction weighs the rows of the two rules differently) it widens
beta's interval, which errs on the safe side (measured there: [0.92, 1.37] -> [0.83, 1.82] for a true 1).
Fits with beta given get no column (the cost, one more fit, is kept off the default of the 4-D benchmark);
nor do Simpson fits, matrix-free fits, streamed data or fewer than 3 snapshots.

**The point estimate** (:func:`simpson_point`, used by ``fpirl fit`` through
:func:`fpirl.uncertainty.uncertainty_and_point`). The step is measured against the noise,
``z = |gamma_midpoint - gamma_Simpson| / sd_noise(gamma)`` (attr ``time_step_z``). Where ``z > TIME_STEP_MIN_Z``
and beta did not come from block means (``beta_coarsening_ == 1``; block means are used where the fit's noise
correction finds the snapshot noise dominant, and there the two rules' corrections differ by more than their time
errors: at 1-5% noise the Simpson refit was worse in most such fits), the Simpson refit becomes the fit: its own
posterior (with this column kept, so beta's interval still reaches the midpoint rule's value), then the basis
correction of :mod:`fpirl.uncertainty._beta_point`. Measured (``benchmarks/bench_time_step.py --rule``: 19
settings of independent-solver data x 0/1/2/5% noise, 4 or 6 Hermite elements; docs/benchmarks.md, "the time step"):
thresholds from 6 to 32 scored alike, and 8 and 16 both beat never switching on every held-out half of two-fold
cross-validation (10 random splits), for beta and for psi. On 14 other cases (``--validate``) 8 switched a fit whose
step came from Simpson's end weights acting on a large basis misfit (beta 12.2% -> 21.6%) and 16 did not: 16 is
shipped.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..core._errors import FpirlInputError
from ..core.density import DensitySnapshots
from ..estimators.identify import PotentialEstimator
from ._bootstrap import refit_params
from ._snapshot_noise import _density_estimator

#: Noise standard deviations of ``1/beta`` the step between the two rules must exceed for the Simpson refit to
#: become the point estimate (module doc: the conservative end of the plateau that cross-validation found, 6-32).
TIME_STEP_MIN_Z = 16.0
#: Whether beta from block means may switch too (False; True only to measure the rule, benchmarks/bench_time_step.py).
SWITCH_WITH_BLOCK_MEANS = False


def simpson_refit(inner: PotentialEstimator, snapshots: DensitySnapshots) -> PotentialEstimator | None:
    """``inner`` refitted to ``snapshots`` with Simpson's rows (same Hermite space, relative ridge and beta
    block), or None where that does not apply (already Simpson, fewer than 3 snapshots, an unfit refit)."""
    if inner.time_scheme == "simpson" or snapshots.n_times < 3:
        return None
    params = refit_params(inner)
    params["time_scheme"] = "simpson"
    if inner.estimate_beta:
        params["beta_block"] = int(getattr(inner, "beta_coarsening_", 1))
    try:
        with warnings.catch_warnings():  # the fit's own warnings were shown once already
            warnings.simplefilter("ignore")
            return PotentialEstimator(**params).fit(snapshots)
    except FpirlInputError:
        return None


def noise_sd_gamma(post) -> float:
    """The std of ``gamma`` under the snapshot noise alone: the factor's columns less the bias, resolution, basis and
    time-step columns (the row model: all of them)."""
    n = post.factor.shape[1]
    if post.noise_model != "rows":
        n -= 1 + sum(c is not None for c in (post.resolution, post.basis, post.time_step))
    return float(np.sqrt(np.sum(post.factor[-1, :n] ** 2)))


def add_time_step_error(post, inner: PotentialEstimator, snapshots) -> PotentialEstimator | None:
    """Append the time-step column of the module doc to ``post`` (in place: ``time_step``, ``beta_simpson`` and
    ``time_step_z``, the step in noise standard deviations of ``gamma``), where beta was estimated from in-memory
    snapshots by a midpoint or explicit fit; returns the Simpson refit (None where there is no column)."""
    if not (post.beta_estimated and isinstance(snapshots, DensitySnapshots) and isinstance(inner, PotentialEstimator)):
        return None
    ref = simpson_refit(inner, snapshots)
    if ref is None:
        return None
    step = 1.0 / inner.beta_ - 1.0 / ref.beta_
    sd = noise_sd_gamma(post)
    _append_column(post, step, float(ref.beta_), float(abs(step) / sd) if sd > 0 else float("inf"))
    return ref


def _append_column(post, step: float, beta_simpson: float, z: float) -> None:
    """The time-step column (``gamma`` entry ``step``, zero psi entries: module doc) appended to ``post.factor``."""
    col = np.zeros(post.factor.shape[0])
    col[-1] = step
    post.time_step, post.beta_simpson, post.time_step_z = col, beta_simpson, z
    post.factor = np.hstack([post.factor, col[:, None]])


def simpson_point(est, post, min_z: float | None = None) -> PotentialEstimator | None:
    """The Simpson refit as the point estimate where the time step stands out of the noise, or None.

    Where ``post.time_step_z > min_z`` (default :data:`TIME_STEP_MIN_Z`; module doc) and beta did not come from
    block means (``beta_coarsening_ == 1``: the fit's noise correction did not find the noise dominant) the refit
    kept by :func:`add_time_step_error` is returned with ``settings_`` recording the switch (``time_scheme = simpson``,
    ``time_scheme_switched = 1``, ``beta_midpoint``, ``time_step_z``, and how the fit's ridge was chosen); the
    caller computes its posterior and keeps the time-step column there (:func:`keep_time_step`).
    """
    min_z = TIME_STEP_MIN_Z if min_z is None else min_z
    z = None if post is None else post.time_step_z
    if z is None or not z > min_z or post.simpson_fit is None:
        return None
    fit, inner = post.simpson_fit, _density_estimator(est)
    if int(getattr(inner, "beta_coarsening_", 1)) > 1 and not SWITCH_WITH_BLOCK_MEANS:  # the noise dominates beta
        return None
    fit.settings_ = {**fit.settings_, "ridge_selection": inner.settings_.get("ridge_selection", "fixed"),
                     "beta_noise_corrected": inner.settings_.get("beta_noise_corrected", 0),
                     "time_scheme_switched": 1, "beta_midpoint": float(inner.beta_), "time_step_z": float(z)}
    fit.gcv_ = getattr(inner, "gcv_", None)
    return fit


def keep_time_step(post, switched_from) -> None:
    """Append the midpoint fit's time-step column (``switched_from.time_step``) to the Simpson fit's posterior
    ``post`` (in place), so that beta's interval still reaches the midpoint rule's estimate."""
    if post is None or switched_from.time_step is None:
        return
    _append_column(post, switched_from.time_step[-1], switched_from.beta_simpson, switched_from.time_step_z)
