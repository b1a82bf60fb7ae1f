"""fpirl.rl: the soft reward convention, changed dynamics, soft solvers, policy evaluation, reward callable."""

import numpy as np
import pytest

from fpirl import FpirlInputError, Grid
from fpirl.evaluation.metrics import policy_kl
from fpirl.mdp import boltzmann_policy, recover_mdp, soft_state_value
from fpirl.rl import DynamicsChange, changed_transition, evaluate_policy, solve_soft

BETA, DT, GAMMA = 3.0, 0.05, 0.95


def _problem(boundary="periodic", shape=(7, 6, 5)):
    grid = Grid([-1, -1, -1], [1, 1, 1], list(shape), roles=["state", "state", "action"], boundary=boundary)
    x, y, a = np.meshgrid(*grid.coords, indexing="ij")
    psi = np.sin(np.pi * x) * np.cos(np.pi * y) + 0.8 * np.cos(np.pi * (a - 0.5 * x))
    gx = np.pi * np.cos(np.pi * x) * np.cos(np.pi * y) - 0.4 * np.pi * np.sin(np.pi * (a - 0.5 * x))
    gy = -np.pi * np.sin(np.pi * x) * np.sin(np.pi * y)
    return grid, psi, np.stack([gx, gy])


def test_soft_state_value_is_log_quadrature():
    grid, psi, _ = _problem()
    w = grid.axes[2].node_weights
    brute = np.log(np.sum(w * np.exp(-BETA * psi), axis=2)) / BETA
    np.testing.assert_allclose(soft_state_value(grid, -psi, BETA), brute, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("boundary", ["periodic", "reflecting"])
def test_soft_reward_resolves_to_the_recovered_policy(boundary):
    """Self-consistency: soft-optimal control of the soft reward under the recovered transition
    gives back the Boltzmann policy of psi (KL <= 1e-10); the paper's reward does not."""
    grid, psi, grad = _problem(boundary)
    soft = recover_mdp(grid, psi, grad, BETA, DT, GAMMA)
    assert soft.reward_convention == "soft"
    sol = solve_soft(grid, soft.reward, soft.transition, BETA, GAMMA)
    pi = boltzmann_policy(grid, psi, BETA)
    assert policy_kl(pi, sol.policy, grid).max() <= 1e-10
    np.testing.assert_allclose(sol.q, -psi, atol=1e-8)
    expected = recover_mdp(grid, psi, grad, BETA, DT, GAMMA, reward="expected")
    sol_e = solve_soft(grid, expected.reward, expected.transition, BETA, GAMMA)
    assert policy_kl(pi, sol_e.policy, grid).max() > 1e-8
    # the two conventions differ by gamma/beta E[H(pi(.|s'))]
    ent = -grid.integrate(pi * np.log(pi), axes=(2,))
    np.testing.assert_allclose(expected.reward - soft.reward, GAMMA / BETA * soft.transition.expect(ent), atol=1e-12)
    with pytest.raises(FpirlInputError):
        recover_mdp(grid, psi, grad, BETA, DT, GAMMA, reward="entropy")


def test_policy_and_value_iteration_agree():
    grid, psi, grad = _problem()
    mdp = recover_mdp(grid, psi, grad, BETA, DT, GAMMA)
    reward = mdp.reward + 0.3 * np.cos(np.pi * grid.coords[2])[None, None, :]  # not the model's own reward
    a = solve_soft(grid, reward, mdp.transition, BETA, GAMMA, method="policy", tol=1e-11)
    b = solve_soft(grid, reward, mdp.transition, BETA, GAMMA, method="value", tol=1e-10)
    np.testing.assert_allclose(a.q, b.q, atol=1e-9)
    np.testing.assert_allclose(a.value, b.value, atol=1e-9)
    assert a.iterations < 30 < b.iterations


def test_policy_iteration_converges_with_a_discount_near_one():
    """gamma = 0.99999 under changed dynamics: Q ~ R / (1 - gamma) and the exact evaluation's rounding grow together;
    an absolute tolerance of 1e-9 failed after 200 steps (change 6e-6), the relative one converges, and the solution
    satisfies the Bellman equation Q = R + gamma E[V(s')] to rounding relative to |Q|."""
    from fpirl.mdp import soft_state_value

    gamma = 0.99999
    grid, psi, grad = _problem()
    mdp = recover_mdp(grid, psi, grad, BETA, DT, gamma)
    tr = changed_transition(grid, grad[:2], BETA, DT, DynamicsChange(noise_scale=3.0))
    sol = solve_soft(grid, mdp.reward, tr, BETA, gamma)
    assert sol.iterations < 200
    v = soft_state_value(grid, sol.q, BETA)
    residual = sol.q - mdp.reward - gamma * tr.expect(v)
    assert np.abs(residual).max() <= 1e-8 * np.abs(sol.q).max()


def test_policy_evaluation_matches_dense_linear_solve(rng):
    grid, psi, grad = _problem("reflecting", (5, 4, 4))
    mdp = recover_mdp(grid, psi, grad, BETA, DT, GAMMA)
    pi = rng.uniform(0.2, 1.0, grid.shape)
    pi /= grid.integrate(pi, axes=(2,))[..., None]
    ev = evaluate_policy(grid, pi, mdp.reward, mdp.transition, BETA, GAMMA)
    # oracle: the dense kernel, sums written out
    ns, na = grid.shape[0] * grid.shape[1], grid.shape[2]
    t = mdp.transition.dense().reshape(ns, na, ns)  # (s, a, s')
    ws = np.outer(grid.axes[0].node_weights, grid.axes[1].node_weights).ravel()
    wa = grid.axes[2].node_weights
    p = pi.reshape(ns, na)
    r = mdp.reward.reshape(ns, na)
    r_pi = np.sum(wa * p * (r - np.log(p) / BETA), axis=1)
    m = np.einsum("a,sa,sat,t->st", wa, p, t, ws)
    v = np.linalg.solve(np.eye(ns) - GAMMA * m, r_pi)
    np.testing.assert_allclose(ev.value.ravel(), v, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(ev.mean_return, np.sum(ws * v) / ws.sum(), rtol=1e-10)
    # the soft-optimal policy is no worse than any other (and than this one)
    best = solve_soft(grid, mdp.reward, mdp.transition, BETA, GAMMA)
    assert np.all(evaluate_policy(grid, best.policy, mdp.reward, mdp.transition, BETA, GAMMA).value >= ev.value - 1e-9)


def test_changed_transition_moments():
    """Mean step and spread of the changed kernel: (-k_d grad + K a) dt and k_sigma sqrt(2 dt / beta)."""
    grid = Grid([-1, -1, -1, -1], [1, 1, 1, 1], [24, 24, 3, 3], roles=["state", "state", "action", "action"],
                boundary="reflecting")
    grad = np.zeros((2,) + grid.shape)
    grad[0] += 0.4
    change = DynamicsChange(noise_scale=1.5, drift_scale=2.0, action_drift=3.0)
    dt, beta = 0.01, 50.0
    tr = changed_transition(grid, grad, beta, dt, change)
    i, j, k, l = 12, 12, 3, 0  # centre state, a = (1, -1)
    s = grid.coords
    mean_x = np.sum(tr.factors[0].reshape(grid.shape + (-1,))[i, j, k, l] * grid.axes[0].node_weights * s[0])
    mean_y = np.sum(tr.factors[1].reshape(grid.shape + (-1,))[i, j, k, l] * grid.axes[1].node_weights * s[1])
    np.testing.assert_allclose(mean_x - s[0][i], (-2.0 * 0.4 + 3.0 * 1.0) * dt, atol=1e-12)
    np.testing.assert_allclose(mean_y - s[1][j], (3.0 * -1.0) * dt, atol=1e-12)
    np.testing.assert_allclose(tr.sigma, 1.5 * np.sqrt(2 * dt / beta), rtol=1e-14)
    extra = changed_transition(grid, grad, beta, dt, DynamicsChange(drift=lambda p: np.stack([p[..., 1], 0 * p[..., 0]], -1)))
    fx = extra.factors[0].reshape(grid.shape + (-1,))[i, 20, k, l]
    np.testing.assert_allclose(np.sum(fx * grid.axes[0].node_weights * s[0]) - s[0][i], (-0.4 + s[1][20]) * dt, atol=1e-12)
    for bad in (dict(noise_scale=0.0), dict(drift_scale=-1.0), dict(noise_scale=np.inf), dict(action_drift=np.nan)):
        with pytest.raises(FpirlInputError):
            DynamicsChange(**bad)
    g3, _, grad3 = _problem()
    with pytest.raises(FpirlInputError, match="as many action axes"):
        changed_transition(g3, grad3, 2.0, 0.1, DynamicsChange(action_drift=1.0))
