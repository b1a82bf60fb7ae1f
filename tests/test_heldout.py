"""Held-out one-step log-likelihoods: the simulated check of the fitted model against the truth and
the baselines, the velocity reading of the joint transition, extension outside the box, mismatches."""

from __future__ import annotations

import numpy as np
import pytest
from _simtracks import sde_tracks, table_from_paths, velocity_table
from scipy.stats import multivariate_normal, norm

from fpirl import FpirlInputError
from fpirl.tracks.steps import observed_transitions
from fpirl.evaluation.baselines import Baselines, fit_baselines
from fpirl.estimators import IncrementsEstimator
from fpirl.evaluation.heldout import TransitionModel, fpirl_loglik, heldout_loglik

BETA, DT = 4.0, 0.1
BOX = ([-1.5, -1.5], [1.5, 1.5])


def _grad(x):
    """grad of the confining psi(s, a) = 2 (s - a/2)^2 + 1.5 a^2 (grad_s psi depends on the action)."""
    s, a = x[:, 0], x[:, 1]
    return np.stack([4 * (s - 0.5 * a), -2 * (s - 0.5 * a) + 3 * a], axis=1)


@pytest.fixture(scope="module")
def joint_tracks():
    """Euler-Maruyama at the frame interval (one step per frame), reflecting box; drift * dt is
    comparable to the noise sqrt(2 dt / beta) within one step."""
    rng = np.random.default_rng(5)
    paths = sde_tracks(lambda x: -_grad(x), BETA, rng.uniform(-0.5, 0.5, (150, 2)), DT, 100, rng, *BOX)
    table = table_from_paths(paths, DT, ["s", "a"], ["state", "action"], *BOX)
    train, test = table.split_tracks(0.7, rng)
    return train, test


def _true_model(table, grad=_grad, beta=BETA):
    return TransitionModel(grad, beta, table.lower, table.upper, table.roles, table.names, False, table.dt)


def test_fitted_model_matches_truth_and_beats_baselines(joint_tracks):
    train, test = joint_tracks
    est = IncrementsEstimator(hermite_elements=2).fit(train)
    base = fit_baselines(train)
    fitted = heldout_loglik(est, test, base)
    true = heldout_loglik(_true_model(test), test, base)
    assert fitted.transitions == true.transitions == test.n_tracks * 99
    assert abs(fitted.loglik["fpirl"] - true.loglik["fpirl"]) < 0.05
    for name in ("diffusion", "persistent_random_walk"):
        assert fitted.loglik["fpirl"] > fitted.loglik[name] + 3 * fitted.difference_se("fpirl", name)
    # the same numbers through a result file's dataset (baselines from its attrs)
    from fpirl.io import result_dataset

    ds = result_dataset(est, extra=base.to_attrs())
    again = heldout_loglik(ds, test)
    assert again.to_json()["loglik"] == pytest.approx(fitted.to_json()["loglik"], rel=1e-9)


def test_explicit_transition_is_the_mdp_gaussian(joint_tracks):
    _, test = joint_tracks
    tr = observed_transitions(test)
    ll = fpirl_loglik(_true_model(test), tr)
    s, a = tr.x[:, 0], tr.x[:, 1]
    ref = norm(s - 4 * (s - 0.5 * a) * DT, np.sqrt(2 * DT / BETA)).logpdf(s + tr.step[:, 0])
    np.testing.assert_allclose(ll, ref, rtol=1e-10)


def test_velocity_reading_reduces_to_the_persistent_random_walk():
    """psi = c |a|^2: the action part of the joint transition is the AR(1) v' = (1 - 2 c dt) v + sigma xi
    with sigma^2 = 2 dt / beta, and the held-out scores coincide exactly (Jacobian 1 / dt^d_s included)."""
    rng = np.random.default_rng(2)
    s = np.cumsum(rng.normal(size=(30, 20, 2)), axis=0) * 0.3
    lo, hi = s.min(axis=(0, 1)) - 1, s.max(axis=(0, 1)) + 1
    dt, c, beta = 0.5, 0.4, 3.0
    table = velocity_table(s, dt, ["x", "y"], lo, hi)
    model = TransitionModel(lambda x: np.concatenate([0 * x[:, :2], 2 * c * x[:, 2:]], axis=1), beta,
                            table.lower - 10, table.upper + 10, table.roles, table.names, False, dt)
    prw = Baselines(1.0, 1 - 2 * c * dt, np.sqrt(2 * dt / beta), 1)
    score = heldout_loglik(model, table, prw)
    np.testing.assert_allclose(score.per_transition["fpirl"], score.per_transition["persistent_random_walk"],
                               rtol=1e-12)


def test_velocity_tracks_fitted_on_action_increments():
    """1-D positions with velocity actions from a second-order model (velocity relaxes towards -s):
    fitting psi on the action increments recovers the truth's score and beats the PRW."""
    rng = np.random.default_rng(11)
    dt, beta, n = 0.2, 2.0, 120

    def grad(x):  # psi(s, a) = a^2 + 3 s a: grad_a psi = 2 a + 3 s (a damped oscillator)
        return np.stack([3 * x[:, 1], 2 * x[:, 1] + 3 * x[:, 0]], axis=1)

    s = np.zeros((80, n))
    v = rng.normal(0, 0.5, n)
    s[0] = rng.uniform(-1, 1, n)
    for k in range(1, 80):
        v = v - grad(np.stack([s[k - 1], v], 1))[:, 1] * dt + np.sqrt(2 * dt / beta) * rng.normal(size=n)
        s[k] = s[k - 1] + v * dt
    lo, hi = [s.min() - 0.1], [s.max() + 0.1]
    table = velocity_table(s[..., None], dt, ["x"], lo, hi)
    train, test = table.split_tracks(0.7, rng)
    est = IncrementsEstimator(hermite_elements=2, drift_axes=["v_x"]).fit(train)
    score = heldout_loglik(est, test, fit_baselines(train))
    true = heldout_loglik(_true_model(test, grad, beta), test, fit_baselines(train))
    assert abs(score.loglik["fpirl"] - true.loglik["fpirl"]) < 0.05
    assert score.loglik["fpirl"] > score.loglik["persistent_random_walk"] + 3 * score.difference_se(
        "fpirl", "persistent_random_walk")


def test_points_outside_the_box_are_scored_with_the_clipped_drift(joint_tracks):
    _, test = joint_tracks
    narrow = TransitionModel(_grad, BETA, np.array([-0.2, -0.2]), np.array([0.2, 0.2]), test.roles, test.names,
                             False, DT)
    tr = observed_transitions(test)
    ll = fpirl_loglik(narrow, tr)
    assert np.all(np.isfinite(ll)) and ll.size == tr.n
    clipped = np.clip(tr.x, -0.2, 0.2)
    ref = norm(tr.x[:, 0] - _grad(clipped)[:, 0] * DT, np.sqrt(2 * DT / BETA)).logpdf(tr.x[:, 0] + tr.step[:, 0])
    np.testing.assert_allclose(ll, ref, rtol=1e-10)


def test_mismatched_tables_are_one_line_errors(joint_tracks):
    train, test = joint_tracks
    model = _true_model(test)
    renamed = table_from_paths(np.zeros((3, 2, 2)), DT, ["s", "b"], ["state", "action"], *BOX)
    with pytest.raises(FpirlInputError, match="do not match"):
        heldout_loglik(model, renamed, fit_baselines(train))
    slower = table_from_paths(np.zeros((3, 2, 2)), 2 * DT, ["s", "a"], ["state", "action"], *BOX)
    with pytest.raises(FpirlInputError, match="sampling interval"):
        heldout_loglik(model, slower, fit_baselines(train))
    with pytest.raises(FpirlInputError, match="no run of three"):
        heldout_loglik(model, table_from_paths(np.zeros((2, 2, 2)), DT, ["s", "a"], ["state", "action"], *BOX))


def test_mostly_outside_the_box_warns_about_units(joint_tracks):
    _, test = joint_tracks
    narrow = TransitionModel(_grad, BETA, np.array([5.0, 5.0]), np.array([6.0, 6.0]), test.roles, test.names,
                             False, DT)
    with pytest.warns(UserWarning, match="outside the fitted box"):
        heldout_loglik(narrow, test)


def test_two_state_axes_match_scipy_multivariate_normal(rng):
    """d_s = 2 (no actions): the score is the 2-D Gaussian density of the step, N(-grad psi dt, (2 dt / beta) I)."""
    paths = sde_tracks(lambda x: -_grad(x), BETA, rng.uniform(-0.5, 0.5, (6, 2)), DT, 12, rng, *BOX)
    table = table_from_paths(paths, DT, ["x", "y"], ["state", "state"], *BOX)
    tr = observed_transitions(table)
    ll = fpirl_loglik(_true_model(table), tr)
    cov = 2 * DT / BETA * np.eye(2)
    ref = [multivariate_normal(-_grad(x[None])[0] * DT, cov).logpdf(step) for x, step in zip(tr.x, tr.step)]
    np.testing.assert_allclose(ll, ref, rtol=1e-10)
