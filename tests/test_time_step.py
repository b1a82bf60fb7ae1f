"""The time-step column of the density posterior (fpirl.uncertainty._time_step)."""

import numpy as np
import pytest

from fpirl import PotentialEstimator
from fpirl.uncertainty import posterior, uncertainty_and_point
import fpirl.uncertainty._time_step as time_step
from fpirl.uncertainty._time_step import TIME_STEP_MIN_Z, TIME_STEP_MIN_Z_PSI, simpson_point, simpson_refit

from _simdensity import coarse_step_walled, double_well_walled


@pytest.fixture(scope="module")
def coarse():
    return coarse_step_walled(28, noise=0.02, seed=1)


@pytest.fixture(scope="module")
def fitted(coarse):
    s, _ = coarse
    est = PotentialEstimator(hermite_elements=4, estimate_beta=True).fit(s)
    return est, posterior(est, s, rng=1)


def test_column_is_the_midpoint_fit_minus_the_simpson_fit(coarse, fitted):
    s, _ = coarse
    est, post = fitted
    ref = PotentialEstimator(hermite_elements=4, estimate_beta=True, time_scheme="simpson").fit(s)  # independent refit
    assert post.time_step is not None and post.beta_simpson == pytest.approx(ref.beta_, rel=1e-10)
    assert post.time_step[-1] == pytest.approx(1 / est.beta_ - 1 / ref.beta_, rel=1e-10)
    assert np.array_equal(post.factor[:, -1], post.time_step)
    assert not np.any(post.time_step[:-1])  # gamma only


def test_beta_interval_covers_the_truth_only_with_the_column(fitted):
    """Walled box sampled every 0.2, 2% noise (midpoint rule): beta is 12.6% high, beyond its noise, bias,
    resolution and basis columns (measured: [1.021, 1.237] without the column, [0.968, 1.345] with it)."""
    est, post = fitted
    assert est.beta_ > 1.08
    lo, hi = post.beta_interval()
    assert lo <= 1.0 <= hi, (lo, hi)
    without = type(post)(**{**post.__dict__, "factor": post.factor[:, :-1], "time_step": None})
    lo0, hi0 = without.beta_interval()
    assert not lo0 <= 1.0 <= hi0, (lo0, hi0)


def test_no_column_for_beta_given_or_a_simpson_fit(coarse):
    s, _ = coarse
    given = PotentialEstimator(hermite_elements=4, beta=1.0).fit(s)
    assert posterior(given, s, rng=1).time_step is None
    simpson = PotentialEstimator(hermite_elements=4, estimate_beta=True, time_scheme="simpson").fit(s)
    assert simpson_refit(simpson, s) is None
    assert posterior(simpson, s, rng=1).time_step is None


@pytest.fixture(scope="module")
def coarse_exact():
    return coarse_step_walled(28)


def test_simpson_refit_becomes_the_point_estimate_where_the_step_stands_out(coarse_exact):
    """Noise-free walled box sampled every 0.2: the step is ~70 noise deviations; the Simpson fit (then corrected
    for the basis error) replaces the midpoint fit (measured: beta +11.7% -> +0.6%, psi 12.0% -> 1.0%)."""
    s, true = coarse_exact
    est = PotentialEstimator(hermite_elements=4, estimate_beta=True).fit(s)
    post, fit = uncertainty_and_point(est, "auto", s)
    assert fit.time_scheme == "simpson" and fit.settings_["time_scheme_switched"] == 1
    assert fit.settings_["beta_midpoint"] == pytest.approx(est.beta_) and fit.settings_["time_step_z"] > TIME_STEP_MIN_Z
    x = s.grid.mesh().reshape(-1, 2)

    def psi_error(e):
        p = e.potential(x).reshape(true.shape)
        return np.linalg.norm(p - p.mean() - true) / np.linalg.norm(true)

    assert abs(fit.beta_ - 1.0) < 0.3 * abs(est.beta_ - 1.0) and psi_error(fit) < 0.3 * psi_error(est)
    lo, hi = post.beta_interval()  # the Simpson fit's interval keeps the time-step column: it reaches the midpoint beta
    assert post.time_step is not None and lo <= 1.0 <= hi and lo <= est.beta_ <= hi


def test_no_switch_where_the_step_is_within_the_noise(coarse, fitted):
    s, _ = coarse
    est, post = fitted
    assert post.time_step_z < TIME_STEP_MIN_Z and simpson_point(est, post) is None
    _, fit = uncertainty_and_point(est, "auto", s)
    assert fit.time_scheme == "midpoint" and "time_scheme_switched" not in fit.settings_


def test_no_switch_where_beta_comes_from_block_means(fitted, monkeypatch):
    """Block means mark a noise-dominated beta: there the two rules' noise corrections, not their time errors,
    set the step, so however large ``z`` the midpoint fit stays."""
    est, post = fitted
    assert est.beta_coarsening_ > 1
    big = type(post)(**{**post.__dict__, "time_step_z": 1e9})
    assert simpson_point(est, big) is None
    monkeypatch.setattr(est, "beta_coarsening_", 1)
    assert simpson_point(est, big) is post.simpson_fit


# --- beta given: psi's step ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def double_well():
    return double_well_walled(24)


def _psi_error(est, s, true):
    p = est.potential(s.grid.mesh().reshape(-1, 2)).reshape(true.shape)
    return np.linalg.norm(p - p.mean() - true) / np.linalg.norm(true)


def test_psi_step_is_measured_on_the_nodes_against_the_noise_columns(double_well):
    """``time_step_z`` with beta given: the nodal RMS of psi_midpoint - psi_Simpson (an independent Simpson fit,
    evaluated on the nodes) over the nodal RMS of the posterior's noise columns."""
    s, _ = double_well
    est = PotentialEstimator(hermite_elements=4, beta=2.0).fit(s)
    post = posterior(est, s, rng=1)
    ref = PotentialEstimator(hermite_elements=4, beta=2.0, time_scheme="simpson").fit(s)
    h = est.hermite_

    def centred(c):
        v = h.evaluate_grid(np.reshape(c, h.shape), s.grid.coords)
        return v - v.mean()

    n_noise = post.factor.shape[1] - 1 - (post.resolution is not None) - (post.basis is not None)
    noise = sum(np.sum(centred(post.factor[: h.n_coef, j]) ** 2) for j in range(n_noise))
    step = centred(np.asarray(est.coef_) - np.asarray(ref.coef_))
    assert post.time_step is None and post.beta_simpson is None  # no column with beta given
    assert post.time_step_z == pytest.approx(np.sqrt(np.sum(step**2) / noise), rel=1e-8)


def test_beta_given_switches_to_simpson_where_psi_step_stands_out(double_well):
    """Noise-free double well in a walled box, snapshots 0.02 apart: the start's fast modes make the midpoint
    rows. psi 15% off (measured 15.3%); the step is ~8 noise deviations and the Simpson fit replaces it (6.2%)."""
    s, true = double_well
    est = PotentialEstimator(hermite_elements=4, beta=2.0).fit(s)
    post, fit = uncertainty_and_point(est, "auto", s)
    assert fit.time_scheme == "simpson" and fit.settings_["time_scheme_switched"] == 1
    assert "beta_midpoint" not in fit.settings_ and fit.settings_["time_step_z"] > TIME_STEP_MIN_Z_PSI
    assert post.time_step_z == fit.settings_["time_step_z"] and fit.beta_ == 2.0
    assert _psi_error(fit, s, true) < 0.5 * _psi_error(est, s, true)
    # the switched fit's posterior keeps psi's step (midpoint minus an independent Simpson fit) as a column
    ref = PotentialEstimator(hermite_elements=4, beta=2.0, time_scheme="simpson").fit(s)
    step = np.ravel(est.coef_) - np.ravel(ref.coef_)
    assert post.time_step[-1] == 0.0 and post.beta_simpson is None
    np.testing.assert_allclose(post.time_step[:-1], step, rtol=1e-8, atol=1e-10 * np.abs(step).max())
    np.testing.assert_array_equal(post.factor[:, -1], post.time_step)
    sd = post.potential_std(s.grid.coords)
    wide = np.mean(np.abs(fit.potential_on_grid() - est.potential_on_grid()) <= 1.645 * sd)
    assert wide > 0.9  # the band reaches the midpoint fit


def test_beta_given_keeps_the_midpoint_fit_within_the_noise_or_above_the_size_limit(coarse, double_well,
                                                                                    monkeypatch):
    s, _ = coarse  # walled box at 2% noise: psi's step is within the noise (measured z = 1.6)
    est = PotentialEstimator(hermite_elements=4, beta=1.0).fit(s)
    post, fit = uncertainty_and_point(est, "auto", s, discretisation=False)
    assert post.time_step_z < TIME_STEP_MIN_Z_PSI and fit is est
    # with the simulated discretisation correction (the default) the midpoint rows stay, psi moves
    post, fit = uncertainty_and_point(est, "auto", s)
    assert fit.settings_["psi_discretisation_corrected"] == 1 and "time_scheme_switched" not in fit.settings_
    assert fit.time_scheme == "midpoint" and not np.array_equal(fit.coef_, est.coef_)
    monkeypatch.setattr(time_step, "GIVEN_MAX_WORK", 0)  # too large a fit for the check: no refit, no z
    s, _ = double_well
    est = PotentialEstimator(hermite_elements=4, beta=2.0).fit(s)
    post, fit = uncertainty_and_point(est, "auto", s, discretisation=False)
    assert post.time_step_z is None and fit is est
