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
Simpson fits, matrix-free fits, streamed data and fewer than 3 snapshots get no column.

**Beta given** (a psi column only where the fit switches). The refit is made too, and its psi step is measured
on the FE nodes,
``z = sqrt(sum_nodes (psi_midpoint - psi_Simpson)^2 / sum_nodes Var_noise(psi))`` (both zero-mean; the variance
from the posterior's noise columns; :func:`psi_step_z`), where the fit is small enough: nodes x coefficients at
most :data:`GIVEN_MAX_WORK` (2-D and 3-D grids; the 4-D benchmark, 15^4 nodes x 4,096 coefficients, is 6 times
over: its refit would add about 2 s to a 9 s default run, there ``--time-scheme simpson`` asks for it). Where
``z > TIME_STEP_MIN_Z_PSI`` the Simpson refit becomes the fit, as below. Measured (``benchmarks/bench_time_step.py
--rule-given``: the 19 settings of ``--rule`` and 6 of a double well and a Gaussian mixture in walled boxes, x 0/1/2/5%
noise, 100 fits): the double well's psi error 17-37% under the midpoint rule became 5-22% under Simpson's (a start
that excites fast modes, ``dt = 0.02`` already too coarse), the mixture's 6-20% became 1-16%; never switching
gave a mean psi error of 8.58%, switching at ``z > 4`` 6.97% (26 switched), always 6.83%; at 4 the rule beat never
switching on all 20 held-out halves of a two-fold cross-validation (10 random splits), where the thresholds chosen
on the other half were 0-4. Losses: near equilibrium (``dt = 0.1``, a broad start) the step stood out (z 7-14) and
Simpson's psi was worse (4.3% -> 6.4%, 4.7% -> 6.8%): the step there is the rules' different weighting of the rows
acting on the basis misfit (at 8 Hermite elements Simpson wins there too, 3.3% -> 1.5%), as in the validation of
beta's rule below. 4 is shipped, the conservative end of what cross-validation chose. Where the fit switches, psi's
step (midpoint minus Simpson coefficients) becomes a systematic column of the Simpson fit's posterior, as the
``1/beta`` step does with beta estimated: Simpson's rows leave a time error of their own, and with the Hermite
elements chosen by cross-validation (a basis column that no longer hides it) the band of a double well sampled every
``dt = 0.1`` covered 45% of the nodes without it (docs/benchmarks.md, "Hermite elements for density data").

**The point estimate, beta estimated** (:func:`simpson_point`, used by ``fpirl fit`` through
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
from ._resolution import _nodal_energy
from ._snapshot_noise import _density_estimator

#: Noise standard deviations of ``1/beta`` the step between the two rules must exceed for the Simpson refit to
#: become the point estimate (module doc: the conservative end of the plateau that cross-validation found, 6-32).
TIME_STEP_MIN_Z = 16.0
#: The same for psi's step with beta given (:func:`psi_step_z`; module doc).
TIME_STEP_MIN_Z_PSI = 4.0
#: With beta given, the check (one more fit) is made where ``nodes x coefficients`` is at most this (module doc).
GIVEN_MAX_WORK = 1 << 25
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


def _noise_columns(post) -> int:
    """The number of the factor's leading columns that carry the snapshot noise alone (less the bias, resolution,
    basis and time-step columns; the row model: all of them)."""
    n = post.factor.shape[1]
    if post.noise_model != "rows":
        n -= 1 + sum(c is not None for c in (post.resolution, post.basis, post.time_step))
    return n


def noise_sd_gamma(post) -> float:
    """The std of ``gamma`` under the snapshot noise alone (:func:`_noise_columns`)."""
    return float(np.sqrt(np.sum(post.factor[-1, :_noise_columns(post)] ** 2)))


def psi_step_z(post, step: np.ndarray, grid) -> float:
    """The psi step between the two rules in noise standard deviations, on the nodes (module doc, beta given):
    ``sqrt(sum_nodes step^2 / sum_nodes Var_noise(psi))``, both zero-mean, the variance from the noise columns."""
    h = post.hermite
    noise = _nodal_energy(post.factor[: h.n_coef, :_noise_columns(post)], h, grid)
    energy = _nodal_energy(step, h, grid)
    return float(np.sqrt(energy / noise)) if noise > 0 else float("inf")


def add_time_step_error(post, inner: PotentialEstimator, snapshots) -> PotentialEstimator | None:
    """Where beta was estimated from in-memory snapshots by a midpoint or explicit fit, append the time-step column
    of the module doc to ``post`` (in place: ``time_step``, ``beta_simpson`` and ``time_step_z``, the step in noise
    standard deviations of ``gamma``); with beta given, set ``time_step_z`` from psi's step (:func:`psi_step_z`,
    no column), where the fit is small enough (:data:`GIVEN_MAX_WORK`). Returns the Simpson refit, else None."""
    if not (isinstance(snapshots, DensitySnapshots) and isinstance(inner, PotentialEstimator)):
        return None
    if not post.beta_estimated and snapshots.grid.size * inner.hermite_.n_coef > GIVEN_MAX_WORK:
        return None
    ref = simpson_refit(inner, snapshots)
    if ref is None:
        return None
    if not post.beta_estimated:
        step = np.asarray(inner.coef_, dtype=float).ravel() - np.asarray(ref.coef_, dtype=float).ravel()
        post.time_step_z = psi_step_z(post, step, snapshots.grid)
        post.psi_step = step
        return ref
    step = 1.0 / inner.beta_ - 1.0 / ref.beta_
    sd = noise_sd_gamma(post)
    _append_column(post, step, float(ref.beta_), float(abs(step) / sd) if sd > 0 else float("inf"))
    return ref


def _append_column(post, step, beta_simpson: float | None, z: float) -> None:
    """The time-step column appended to ``post.factor``: ``gamma`` entry ``step`` and zero psi entries (beta
    estimated), or psi entries ``step`` (an array) and a zero ``gamma`` entry (beta given; module doc)."""
    col = np.zeros(post.factor.shape[0])
    if np.ndim(step):
        col[:-1] = step
    else:
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
    if min_z is None:
        min_z = TIME_STEP_MIN_Z if post is None or post.beta_estimated else TIME_STEP_MIN_Z_PSI
    z = None if post is None else post.time_step_z
    if z is None or not z > min_z or post.simpson_fit is None:
        return None
    fit, inner = post.simpson_fit, _density_estimator(est)
    if int(getattr(inner, "beta_coarsening_", 1)) > 1 and not SWITCH_WITH_BLOCK_MEANS:  # the noise dominates beta
        return None
    fit.settings_ = {**fit.settings_, "ridge_selection": inner.settings_.get("ridge_selection", "fixed"),
                     "beta_noise_corrected": inner.settings_.get("beta_noise_corrected", 0),
                     "time_scheme_switched": 1, "time_step_z": float(z),
                     **({"beta_midpoint": float(inner.beta_)} if post.beta_estimated else {})}
    fit.gcv_ = getattr(inner, "gcv_", None)
    return fit


def keep_time_step(post, switched_from) -> None:
    """Append the midpoint fit's time-step column (``switched_from.time_step``) to the Simpson fit's posterior
    ``post`` (in place), so that beta's interval still reaches the midpoint rule's estimate; with beta given, psi's
    step (``switched_from.psi_step``), so that psi's bands do (module doc)."""
    if post is None:
        return
    if switched_from.time_step is None:  # beta given: psi's step
        if switched_from.psi_step is None:
            post.time_step_z = switched_from.time_step_z
        else:
            _append_column(post, switched_from.psi_step, None, switched_from.time_step_z)
        return
    _append_column(post, switched_from.time_step[-1], switched_from.beta_simpson, switched_from.time_step_z)
