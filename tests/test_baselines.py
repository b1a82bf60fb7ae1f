"""Diffusion and persistent-random-walk baselines: recovery of known parameters, exact log-densities."""

from __future__ import annotations

import numpy as np
import pytest
from _simtracks import table_from_paths, velocity_table
from scipy.stats import multivariate_normal

from fpirl import FpirlInputError
from fpirl.tracks.steps import infer_action_kind, observed_transitions
from fpirl.evaluation.baselines import Baselines, fit_baselines


def _prw_paths(rng, n_tracks, steps, alpha, sigma, dt, d=2):
    """Positions of an isotropic AR(1) on velocities (independent of fpirl's code)."""
    v = np.zeros((steps, n_tracks, d))
    v[0] = rng.normal(0.0, sigma / np.sqrt(1 - alpha**2), (n_tracks, d))
    for k in range(1, steps):
        v[k] = alpha * v[k - 1] + sigma * rng.normal(size=(n_tracks, d))
    s = np.concatenate([rng.uniform(-1, 1, (1, n_tracks, d)), v * dt], axis=0).cumsum(axis=0)
    return s


@pytest.fixture(scope="module")
def prw():
    rng = np.random.default_rng(7)
    dt, alpha, sigma = 0.5, 0.7, 0.3
    s = _prw_paths(rng, 200, 60, alpha, sigma, dt)
    lo, hi = s.min(axis=(0, 1)) - 0.1, s.max(axis=(0, 1)) + 0.1
    return s, dt, alpha, sigma, lo, hi


def test_prw_parameters_recovered_and_velocity_table_agrees(prw):
    s, dt, alpha, sigma, lo, hi = prw
    table = table_from_paths(s, dt, ["x", "y"], ["state", "state"], lo, hi)
    fitted = fit_baselines(table)
    assert infer_action_kind(table) == "none"
    assert fitted.prw_alpha == pytest.approx(alpha, abs=0.02)
    assert fitted.prw_sigma == pytest.approx(sigma, rel=0.02)
    step = np.diff(s, axis=0)[1:].reshape(-1, 2)  # the scored steps (those with a previous step)
    assert fitted.diffusion_D == pytest.approx(np.mean(step**2) / (2 * dt), rel=1e-9)
    # the same tracks with velocity actions: the same transitions, the same fit
    vtable = velocity_table(s, dt, ["x", "y"], lo, hi)
    assert infer_action_kind(vtable) == "velocity"
    vfit = fit_baselines(vtable)
    assert vfit.n_transitions == fitted.n_transitions == 200 * 59
    for key in ("diffusion_D", "prw_alpha", "prw_sigma"):
        assert getattr(vfit, key) == pytest.approx(getattr(fitted, key), rel=1e-10)


def test_loglik_is_the_gaussian_density_in_table_units(prw):
    s, dt, alpha, sigma, lo, hi = prw
    table = table_from_paths(s[:, :5], dt, ["x", "y"], ["state", "state"], lo, hi)
    b = Baselines(diffusion_D=0.04, prw_alpha=0.6, prw_sigma=0.25, n_transitions=10)
    tr = observed_transitions(table)
    ll = b.loglik(tr)
    s_prev, s_cur, s_next = (np.transpose(s[k:k + s.shape[0] - 2, :5], (1, 0, 2)).reshape(-1, 2) for k in (0, 1, 2))
    ref_diff = multivariate_normal(np.zeros(2), 2 * 0.04 * dt * np.eye(2)).logpdf(s_next - s_cur)
    mean = s_cur + dt * 0.6 * (s_cur - s_prev) / dt  # position prediction of the PRW
    ref_prw = [multivariate_normal(m, (0.25 * dt) ** 2 * np.eye(2)).logpdf(x) for m, x in zip(mean, s_next)]
    np.testing.assert_allclose(ll["diffusion"], ref_diff, rtol=1e-10)
    np.testing.assert_allclose(ll["persistent_random_walk"], ref_prw, rtol=1e-10)


def test_attrs_round_trip_and_errors(prw):
    b = Baselines(0.1, 0.5, 0.2, 123)
    assert Baselines.from_attrs(b.to_attrs()) == b
    with pytest.raises(FpirlInputError, match="no fitted baselines"):
        Baselines.from_attrs({"beta": 1.0})
    s, dt, *_ , lo, hi = prw
    still = np.repeat(s[:1], 5, axis=0)
    with pytest.raises(FpirlInputError, match="do not move"):
        fit_baselines(table_from_paths(still[:, :3], dt, ["x", "y"], ["state", "state"], lo, hi))
    with pytest.raises(FpirlInputError, match="at least 2"):
        fit_baselines(table_from_paths(s[:2, :3], dt, ["x", "y"], ["state", "state"], lo, hi))
