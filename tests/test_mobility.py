"""State-dependent mobility (fpirl.estimators.mobility): recovery of g and psi from tracks of an
independent sampler, the CV keeping the paper's model on constant-noise tracks, and the held-out
likelihood read back from a result file."""

from __future__ import annotations

import numpy as np
import pytest

from fpirl.estimators import IncrementsEstimator
from fpirl.evaluation.heldout import fpirl_loglik, heldout_loglik
from fpirl.io.netcdf import result_dataset
from fpirl.tracks import TrackTable
from fpirl.tracks.steps import observed_transitions

LO, HI = -3.0, 3.0


def psi_true(x):
    return 0.5 * x**2


def log_g_true(x):  # degree-2 polynomial in u = x / 3: noise grows with |x| and tilts to one side
    u = x / 3.0
    return 0.6 * u + 0.9 * u**2


def _tracks(n_tracks, steps, dt, rng, mobility=True, beta=1.0):
    """Euler-Maruyama of dx = [-g psi' + g' / beta] dt + sqrt(2 g / beta) dW (written here, not fpirl's)."""
    x = rng.normal(0.0, 1.0, n_tracks)
    out = [x.copy()]
    for _ in range(steps):
        if mobility:
            g = np.exp(log_g_true(x))
            dg = g * (0.6 / 3.0 + 2 * 0.9 * x / 9.0)
        else:
            g, dg = np.ones_like(x), np.zeros_like(x)
        x = x + (-g * x + dg / beta) * dt + np.sqrt(2 * g * dt / beta) * rng.standard_normal(n_tracks)
        x = np.clip(x, LO, HI)
        out.append(x.copy())
    paths = np.asarray(out)  # (steps + 1, n)
    values = paths.T.reshape(-1, 1)
    seg = np.repeat(np.arange(n_tracks), steps + 1)
    time = np.tile(dt * np.arange(steps + 1), n_tracks)
    return TrackTable(values, seg, seg, time, dt, ("x",), ("state",), np.array([LO]), np.array([HI]), "reflecting")


def _psi_error(est):
    x = np.linspace(-2.0, 2.0, 81)
    p = est.potential(x[:, None])
    q = psi_true(x)
    p, q = p - p.mean(), q - q.mean()
    return float(np.sqrt(np.mean((p - q) ** 2) / np.mean(q**2)))


def test_mobility_recovers_g_and_keeps_the_boltzmann_psi(rng):
    table = _tracks(300, 40, 0.05, rng)
    const = IncrementsEstimator(hermite_elements=4, ridge=1e-4, mobility=0).fit(table)
    auto = IncrementsEstimator(hermite_elements=4, ridge=1e-4).fit(table)
    assert auto.mobility_ is not None and auto.mobility_.degree >= 1
    # psi is the Boltzmann potential of the true process (exp(-beta psi) stationary for every g)
    assert _psi_error(auto) < 0.2 < _psi_error(const)
    # g up to its scale (absorbed by beta): log g(x) - log g(0) against the truth
    x = np.linspace(-1.5, 1.5, 31)
    got = auto.mobility_.log_g(x[:, None]) - auto.mobility_.log_g(np.zeros((1, 1)))
    assert np.max(np.abs(got - (log_g_true(x) - log_g_true(0.0)))) < 0.2
    # D(x) = g(x) / beta against the truth (beta = 1)
    d_got = np.exp(auto.mobility_.log_g(x[:, None])) / auto.beta_
    assert np.allclose(d_got, np.exp(log_g_true(x)), rtol=0.2)
    # held-out: the mobility model predicts better, on the same transitions as the baselines
    test = _tracks(100, 40, 0.05, np.random.default_rng(7))
    tr = observed_transitions(test)
    assert np.mean(fpirl_loglik(auto, tr)) > np.mean(fpirl_loglik(const, tr)) + 0.01


def test_cv_keeps_the_constant_model_when_noise_is_constant(rng):
    table = _tracks(200, 40, 0.01, rng, mobility=False)
    est = IncrementsEstimator(hermite_elements=4, ridge=1e-4).fit(table)
    assert est.mobility_ is None and est.settings_["mobility_degree"] == 0
    assert set(est.mobility_cv_) == {0, 1, 2}
    ref = IncrementsEstimator(hermite_elements=4, ridge=1e-4, mobility=0).fit(table)
    np.testing.assert_array_equal(est.coef_, ref.coef_)


def test_result_file_scores_like_the_estimator(rng, tmp_path):
    from fpirl.io.netcdf import read_result, write_result

    table = _tracks(150, 30, 0.01, rng)
    est = IncrementsEstimator(hermite_elements=4, ridge=1e-4, mobility=2).fit(table)
    from fpirl.evaluation.baselines import fit_baselines

    extra = {**est.result_extra(), **fit_baselines(table).to_attrs()}
    path = write_result(tmp_path / "r.nc", result_dataset(est, extra=extra))
    ds = read_result(path)
    assert int(ds.attrs["mobility_degree"]) == 2
    tr = observed_transitions(table)
    np.testing.assert_allclose(fpirl_loglik(ds, tr), fpirl_loglik(est, tr), rtol=1e-9, atol=1e-9)
    score = heldout_loglik(ds, table, check=False)
    assert score.loglik["fpirl"] == pytest.approx(np.mean(fpirl_loglik(est, tr)), rel=1e-9)


@pytest.mark.parametrize("bad", ["big", 7, -1, 1.5])
def test_bad_mobility_is_a_one_line_error(rng, bad):
    from fpirl.core._errors import FpirlInputError

    table = _tracks(20, 10, 0.01, rng)
    with pytest.raises(FpirlInputError, match="mobility"):
        IncrementsEstimator(hermite_elements=2, mobility=bad).fit(table)


def _ar_tracks(n_tracks, steps, dt, rho, rng):
    """dx = -x dt + e_k with AR(1) innovations e_k = rho e_{k-1} + sqrt(1 - rho^2) sqrt(2 dt) xi (beta = 1)."""
    x = rng.normal(0.0, 1.0, n_tracks)
    e = np.sqrt(2 * dt) * rng.standard_normal(n_tracks)
    out = [x.copy()]
    for _ in range(steps):
        e = rho * e + np.sqrt(1 - rho**2) * np.sqrt(2 * dt) * rng.standard_normal(n_tracks)
        x = np.clip(x - x * dt + e, LO, HI)
        out.append(x.copy())
    values = np.asarray(out).T.reshape(-1, 1)
    seg = np.repeat(np.arange(n_tracks), steps + 1)
    return TrackTable(values, seg, seg, np.tile(dt * np.arange(steps + 1), n_tracks), dt, ("x",), ("state",),
                      np.array([LO]), np.array([HI]), "reflecting")


def test_second_lag_recovers_rho_and_scores_better(rng):
    table = _ar_tracks(150, 30, 0.05, 0.5, rng)
    est = IncrementsEstimator(hermite_elements=3, ridge=1e-4, mobility=0).fit(table)
    assert est.second_lag_ == pytest.approx(0.5, abs=0.06)
    plain = IncrementsEstimator(hermite_elements=3, ridge=1e-4, mobility=0, second_lag=False).fit(table)
    test = observed_transitions(_ar_tracks(60, 30, 0.05, 0.5, np.random.default_rng(5)))
    # the AR(1) predictive against the white-noise one: theory gain -0.5 log(1 - rho^2) = 0.144 nats per
    # transition with a previous step (all but one per track here)
    gain = np.mean(fpirl_loglik(est, test)) - np.mean(fpirl_loglik(plain, test))
    assert 0.09 < gain < 0.2
    white = IncrementsEstimator(hermite_elements=3, ridge=1e-4, mobility=0).fit(_ar_tracks(150, 30, 0.05, 0.0, rng))
    assert white.second_lag_ is None
