"""beta of a continuous diffusion observed every dt (fpirl.estimators._time_step_beta): the local linearisation's
factor against its formula, and on exactly sampled Ornstein-Uhlenbeck tracks (the transition is Gaussian with a
known covariance: an oracle independent of the estimator) the continuous beta against the truth, the one-step
beta against the Euler reading, and beta's interval reaching both."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

from fpirl.estimators import IncrementsEstimator
from fpirl.estimators._time_step_beta import time_step_factor
from fpirl.tracks.table import TrackTable
from fpirl.uncertainty import increments_posterior

K = np.array([[3.0, 0.5], [0.5, 1.5]])  # psi = x^T K x / 2
BETA, DT = 2.0, 0.05


def test_factor_of_a_quadratic_is_the_formula(rng):
    """Constant Hessian K: the factor is the mean of (1 - exp(-2 lambda dt)) / (2 lambda dt) over K's eigenvalues,
    to first order 1 - tr(K) dt / d; 1 without curvature."""
    x = rng.uniform(-1, 1, (50, 2))
    lam = np.linalg.eigvalsh(K) * DT
    phi = time_step_factor(lambda p: p @ K, x, [0, 1], DT, np.array([2.0, 2.0]))
    assert phi == pytest.approx(np.mean((1 - np.exp(-2 * lam)) / (2 * lam)), rel=1e-8)
    assert phi == pytest.approx(1 - np.trace(K) * DT / 2, abs=(np.trace(K) * DT) ** 2)
    assert time_step_factor(lambda p: 0 * p, x, [0, 1], DT, np.array([2.0, 2.0])) == pytest.approx(1.0)


def _ou_tracks(rng, exact: bool, n=300, steps=80):
    """Tracks of dx = -K x dt + sqrt(2/beta) dW observed every DT: exact transitions (x' = e^{-K dt} x + N(0, C),
    C = K^{-1} (I - e^{-2 K dt}) / beta) or the Euler chain at DT; started in the stationary law N(0, K^{-1}/beta)."""
    E = scipy.linalg.expm(-K * DT)
    C = np.linalg.solve(K, np.eye(2) - E @ E) / BETA if exact else 2 * DT / BETA * np.eye(2)
    M = E if exact else np.eye(2) - K * DT
    L = np.linalg.cholesky(C)
    x = rng.multivariate_normal([0, 0], np.linalg.inv(K) / BETA, n)
    path = [x]
    for _ in range(steps):
        x = x @ M.T + rng.standard_normal((n, 2)) @ L.T
        path.append(x)
    P = np.stack(path)  # (steps + 1, n, 2)
    vals = P.transpose(1, 0, 2).reshape(-1, 2)
    seg = np.repeat(np.arange(n), steps + 1)
    box = 6.0 / np.sqrt(BETA)  # walls out of reach
    return TrackTable(vals, seg, seg, np.tile(DT * np.arange(steps + 1), n), DT, ("x", "y"), ("state", "state"),
                      np.array([-box, -box]), np.array([box, box]), "reflecting")


@pytest.mark.parametrize("exact", [True, False])
def test_continuous_and_one_step_beta_on_ou_tracks(rng, exact):
    est = IncrementsEstimator(hermite_elements=(2, 2), ridge=1e-6, mobility=0, second_lag=False,
                              track_noise=False).fit(_ou_tracks(rng, exact))
    lo, hi = increments_posterior(est).beta_interval()
    assert lo <= BETA <= hi  # the interval reaches both readings
    if exact:  # a diffusion observed every DT: the one-step beta is high by about tr(K) dt / d = 11%
        assert est.beta_ / BETA - 1 > 0.07
        assert est.beta_continuous_ == pytest.approx(BETA, rel=0.02)
    else:  # an Euler chain at DT: the one-step beta is the truth, the continuous reading low
        assert est.beta_ == pytest.approx(BETA, rel=0.02)
        assert est.beta_continuous_ / BETA - 1 < -0.07
    assert "beta_continuous" in est.result_extra()
    assert IncrementsEstimator(beta=BETA, hermite_elements=(2, 2), mobility=0, second_lag=False,
                               track_noise=False).fit(_ou_tracks(rng, exact, n=50)).beta_continuous_ is None


def test_beta_given_keeps_the_factor_and_the_fit_says_the_drift_is_fast(rng, monkeypatch):
    """With beta given the factor is still computed (psi's wells, not beta, carry the time step then): on exactly
    sampled OU tracks the one-step Hessian is K (1 - e^{-K dt}) / (K dt) (the drift of the exact transition), which
    the note's factor z / (1 - e^{-z}) undoes; ``fpirl fit`` prints the note below ``FAST_DRIFT_FACTOR``."""
    import fpirl.cli._common as common
    from fpirl.cli._common import FAST_DRIFT_FACTOR, _fit_notes

    est = IncrementsEstimator(beta=BETA, hermite_elements=(2, 2), ridge=1e-6, mobility=0, second_lag=False,
                              track_noise=False).fit(_ou_tracks(rng, True))
    assert est.beta_continuous_ is None
    assert est.time_step_factor_ == pytest.approx(np.mean(np.vectorize(lambda z: -np.expm1(-2 * z) / (2 * z))(
        np.linalg.eigvalsh(K) * DT)), rel=0.03)
    x = rng.uniform(-0.5, 0.5, (20, 2))
    h = 1e-3
    grad = lambda p: est.hermite_.gradient(est.coef_, p)  # noqa: E731
    fitted = np.stack([(grad(x + h * e) - grad(x - h * e)) / (2 * h) for e in np.eye(2)], -1).mean(axis=0)
    lam, V = np.linalg.eigh(K)
    shrunk = V @ np.diag(-np.expm1(-lam * DT) / DT) @ V.T  # (I - e^{-K dt}) / dt
    np.testing.assert_allclose(0.5 * (fitted + fitted.T), shrunk, atol=0.05 * np.abs(K).max())
    def noted():
        return any(line.startswith("the drift is fast against dt") for line in _fit_notes(est, None))

    assert noted() == (est.time_step_factor_ < FAST_DRIFT_FACTOR)  # 0.90 here: at the threshold
    monkeypatch.setattr(common, "FAST_DRIFT_FACTOR", est.time_step_factor_ + 0.01)
    assert noted()
    monkeypatch.setattr(common, "FAST_DRIFT_FACTOR", est.time_step_factor_ - 0.01)
    assert not noted()
