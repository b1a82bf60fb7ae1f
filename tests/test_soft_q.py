"""Soft (entropy-regularised) value iteration (fpirl.rl.soft_q)."""

import numpy as np

from fpirl.rl.soft_q import soft_policy, soft_state_value, soft_value_iteration


def test_soft_state_value_is_log_integral_and_policy_normalised(rng):
    q = rng.normal(size=(5, 7)) * 30.0
    w = rng.uniform(0.1, 1.0, size=7)
    alpha = 0.3
    v = soft_state_value(q, w, alpha)
    ref = alpha * np.log(np.sum(w * np.exp(q / alpha), axis=1))
    np.testing.assert_allclose(v, ref, rtol=1e-12)
    pi = soft_policy(q, w, alpha)
    np.testing.assert_allclose(pi @ w, 1.0, rtol=1e-12)


def test_soft_value_iteration_one_state_closed_form():
    # one state, two actions, self loop: V = alpha log sum w exp((r + gamma V)/alpha)
    # => V (1 - gamma) = alpha log sum w exp(r / alpha)
    r = np.array([[1.0, 0.5]])
    w = np.array([1.0, 1.0])
    alpha, gamma = 0.5, 0.8
    sol = soft_value_iteration(r, lambda v: np.broadcast_to(v[:, None], r.shape), w, alpha, gamma, tol=1e-12)
    expect = alpha * np.log(np.sum(w * np.exp(r[0] / alpha))) / (1 - gamma)
    np.testing.assert_allclose(sol.v[0], expect, rtol=1e-10)
    assert sol.error_bound <= 1e-12
