"""The time-step column of the density posterior (fpirl.uncertainty._time_step)."""

import numpy as np
import pytest

from fpirl import PotentialEstimator
from fpirl.uncertainty import posterior
from fpirl.uncertainty._time_step import simpson_refit

from _simdensity import coarse_step_walled


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
