"""Metrics: L2 errors, KL divergences, free energies (eqs. free_energy, free_energy_mdp), observed orders."""

import numpy as np
import pytest

from fpirl import FpirlInputError
from fpirl.core.grid import Grid
from fpirl.mdp import boltzmann_policy, recover_mdp
from fpirl import forward
from fpirl.evaluation.metrics import (free_energy, free_energy_mdp, gradient_l2_error, kl_divergence, l2_error, log_log_slope,
                           policy_kl, relative_l2_error)
from fpirl.forward.markov import mdp_density_map

BETA = 2.0


def joint_problem(elements=(24, 16), boundary="periodic"):
    grid = Grid([-1, -1], [1, 1], list(elements), roles=["state", "action"], boundary=boundary)
    x = grid.mesh()
    s, a = x[..., 0], x[..., 1]
    psi = np.cos(np.pi * s) + 0.5 * np.sin(np.pi * (s + a)) + 0.6 * np.cos(np.pi * a)
    grad_s = -np.pi * np.sin(np.pi * s) + 0.5 * np.pi * np.cos(np.pi * (s + a))
    return grid, psi, grad_s[None]


def random_density(grid, rng):
    p = rng.random(grid.shape) + 0.05
    return p / grid.integrate(p)


# --------------------------------------------------------------------------------------------
# L2 errors
# --------------------------------------------------------------------------------------------
def test_l2_errors():
    f_true = np.array([1.0, 2.0, 3.0, 4.0])
    assert l2_error(f_true + 0.5, f_true) == pytest.approx(0.5)
    assert l2_error(f_true + 0.5, f_true, subtract_mean=True) == pytest.approx(0.0, abs=1e-15)
    f = f_true + np.array([1.0, -1.0, 1.0, -1.0])
    assert l2_error(f, f_true) == pytest.approx(1.0)
    assert relative_l2_error(f, f_true) == pytest.approx(1.0 / np.std(f_true))
    assert relative_l2_error(f + 7, f_true, subtract_mean=True) == pytest.approx(1.0 / np.std(f_true))
    with pytest.raises(FpirlInputError):
        l2_error(f, f_true[:3])
    with pytest.raises(FpirlInputError):
        relative_l2_error(f, np.ones(4))
    with pytest.raises(FpirlInputError):
        l2_error(np.array([np.nan, 1, 2, 3]), f_true)


# --------------------------------------------------------------------------------------------
# KL divergences
# --------------------------------------------------------------------------------------------
def test_kl_of_gaussians_matches_closed_form():
    grid = Grid([-12], [12], [2400], boundary="reflecting")
    x = grid.coords[0]

    def gauss(m, s):
        return np.exp(-0.5 * ((x - m) / s) ** 2) / (s * np.sqrt(2 * np.pi))

    expected = np.log(2.0) + (1.0 + 1.0) / (2 * 4.0) - 0.5  # KL(N(0,1) || N(1, 2^2))
    assert kl_divergence(gauss(0, 1), gauss(1, 2), grid) == pytest.approx(expected, abs=1e-10)


def test_kl_properties_and_stacks(rng):
    grid, _, _ = joint_problem()
    p, q = random_density(grid, rng), random_density(grid, rng)
    assert kl_divergence(p, p, grid) == 0.0
    assert kl_divergence(p, q, grid) > 0
    stack = np.stack([p, q, 0.5 * (p + q)])
    out = kl_divergence(stack, q, grid)
    assert out.shape == (3,)
    assert out[1] == 0.0 and out[0] == pytest.approx(kl_divergence(p, q, grid))
    assert 0 < out[2] < out[0]  # convexity
    pairwise = kl_divergence(stack, stack[::-1], grid)  # (p, mid), (q, q), (mid, p)
    np.testing.assert_allclose(pairwise, [kl_divergence(p, stack[2], grid), 0.0, kl_divergence(stack[2], p, grid)])
    # p = 0 contributes nothing (0 log 0 = 0); q = 0 where p > 0 gives a large finite value
    p0 = p.copy()
    p0[: grid.shape[0] // 2] = 0
    p0 /= grid.integrate(p0)
    expected = grid.integrate(np.where(p0 > 0, p0 * np.log(np.where(p0 > 0, p0, 1) / q), 0))
    assert kl_divergence(p0, q, grid) == pytest.approx(expected, rel=1e-13)
    big = kl_divergence(q, p0, grid)
    assert np.isfinite(big) and big > 100
    # tiny negative round-off is treated as zero, real negatives are an error
    assert kl_divergence(p0 - 1e-14 * (p0 == 0), q, grid) == pytest.approx(kl_divergence(p0, q, grid), rel=1e-13)
    with pytest.raises(FpirlInputError):
        kl_divergence(p - 0.5, q, grid)
    with pytest.raises(FpirlInputError):
        kl_divergence(p[:-1], q[:-1], grid)


def test_policy_kl_per_state(rng):
    grid = Grid([-1, -1, -1], [1, 1, 1], [6, 5, 4], roles=["action", "state", "action"])
    psi = rng.normal(size=grid.shape)
    pi = boltzmann_policy(grid, psi, BETA)
    pi_hat = boltzmann_policy(grid, psi + 0.3 * rng.normal(size=grid.shape), BETA)
    out = policy_kl(pi, pi_hat, grid)
    assert out.shape == (5,)
    assert np.all(out > 0)
    np.testing.assert_array_equal(policy_kl(pi, pi, grid), 0.0)
    expected = grid.integrate(pi * np.log(pi / pi_hat), axes=[0, 2])
    np.testing.assert_allclose(out, expected, rtol=1e-13)


# --------------------------------------------------------------------------------------------
# free energy
# --------------------------------------------------------------------------------------------
def test_free_energy_minimised_by_gibbs(rng):
    grid, psi, _ = joint_problem(boundary="reflecting")
    g = np.exp(-BETA * psi)
    z = grid.integrate(g)
    f_min = -np.log(z) / BETA
    assert free_energy(g / z, psi, BETA, grid) == pytest.approx(f_min, abs=1e-13)
    for _ in range(5):
        assert free_energy(random_density(grid, rng), psi, BETA, grid) > f_min
    # F = KL(p || Gibbs) / beta + F_min
    p = random_density(grid, rng)
    assert free_energy(p, psi, BETA, grid) == pytest.approx(kl_divergence(p, g / z, grid) / BETA + f_min, abs=1e-13)


@pytest.mark.parametrize("boundary", ["periodic", "reflecting"])
def test_free_energy_mdp_equals_free_energy(boundary, rng):
    """eq. free_energy_mdp with p = rho pi and Q = -psi equals eq. free_energy (entropy chain rule)."""
    grid, psi, grad = joint_problem(boundary=boundary)
    pi = boltzmann_policy(grid, psi, BETA)
    rho = rng.random(grid.shape[0]) + 0.1
    rho /= grid.integrate(rho[:, None] * pi)
    f = free_energy(rho[:, None] * pi, psi, BETA, grid)
    assert free_energy_mdp(rho, pi, -psi, BETA, grid) == pytest.approx(f, abs=1e-13)
    # any factorisation p = rho pi (pi normalised in the grid quadrature), and stacks of rho
    p = random_density(grid, rng)
    rho_p = grid.integrate(p, axes=[1])
    f_p = free_energy(p, psi, BETA, grid)
    assert free_energy_mdp(rho_p, p / rho_p[:, None], -psi, BETA, grid) == pytest.approx(f_p, abs=1e-13)
    rhos = np.stack([rho, rho_p])
    np.testing.assert_allclose(free_energy_mdp(rhos, pi, -psi, BETA, grid), [f, free_energy(rho_p[:, None] * pi, psi, BETA, grid)])
    # a state density with zeros (0 log 0 = 0)
    rho0 = rho.copy()
    rho0[:5] = 0
    assert free_energy_mdp(rho0, pi, -psi, BETA, grid) == pytest.approx(free_energy(rho0[:, None] * pi, psi, BETA, grid), abs=1e-13)


def sqra_generator(grid, psi, beta):
    """Finite-volume Fokker-Planck generator on a 2-D periodic grid with Scharfetter-Gummel-type
    (square-root) fluxes J = -(1/(beta h)) sqrt(pi_j pi_k) (p_k/pi_k - p_j/pi_j), pi = exp(-beta psi).
    Its discrete free energy sum w (psi p + p log p / beta) is a Lyapunov function."""
    n = grid.size
    idx = np.arange(n).reshape(grid.shape)
    gibbs = np.exp(-beta * psi).ravel()
    lap = np.zeros((n, n))
    for ax in range(grid.ndim):
        h = grid.axes[ax].spacing
        j, k = idx.ravel(), np.roll(idx, -1, axis=ax).ravel()
        rate = np.sqrt(gibbs[j] * gibbs[k]) / (beta * h * h)
        # dp_j/dt += rate (p_k/pi_k - p_j/pi_j), and the opposite for k
        np.add.at(lap, (j, k), rate / gibbs[k])
        np.add.at(lap, (j, j), -rate / gibbs[j])
        np.add.at(lap, (k, j), rate / gibbs[j])
        np.add.at(lap, (k, k), -rate / gibbs[k])
    return lap


def test_free_energy_decreases_along_fokker_planck(rng):
    """H-theorem: implicit Euler on a structure-preserving FP discretisation, from a random start."""
    grid, psi, _ = joint_problem((20, 12))
    lap = sqra_generator(grid, psi, BETA)
    step = np.linalg.inv(np.eye(grid.size) - 0.01 * lap)
    p = [random_density(grid, rng).ravel()]
    for _ in range(150):
        p.append(step @ p[-1])
    p = np.array(p).reshape((-1,) + grid.shape)
    np.testing.assert_allclose(grid.integrate(p), 1.0, atol=1e-12)
    f = free_energy(p, psi, BETA, grid)
    assert np.all(np.diff(f) <= 1e-13)
    assert f[0] - f[-1] > 0.1
    g = np.exp(-BETA * psi)
    assert f[-1] == pytest.approx(-np.log(grid.integrate(g)) / BETA, abs=1e-6)  # reaches the minimum


def test_free_energy_decreases_along_forward_solver_and_mdp_map():
    grid, psi, grad = joint_problem((24, 16))
    # the MDP map (eq. density_evolution) with a small step
    mdp = recover_mdp(grid, psi, grad, BETA, 0.01)
    out = mdp_density_map(grid, mdp.policy, mdp.transition, np.full(grid.shape[0], 0.5), steps=200)
    f = free_energy(out, psi, BETA, grid)
    assert np.all(np.diff(f) <= 1e-12) and f[0] - f[-1] > 0.05
    f_mdp = free_energy_mdp(grid.integrate(out, axes=[1]), mdp.policy, mdp.q_value, BETA, grid)
    np.testing.assert_allclose(f_mdp, f, atol=1e-12)
    # the independent forward PDE solver

    def pot(x):
        s, a = x[..., 0], x[..., 1]
        return np.cos(np.pi * s) + 0.5 * np.sin(np.pi * (s + a)) + 0.6 * np.cos(np.pi * a)

    def gradient(x):
        s, a = x[..., 0], x[..., 1]
        c = 0.5 * np.pi * np.cos(np.pi * (s + a))
        return np.stack([-np.pi * np.sin(np.pi * s) + c, c - 0.6 * np.pi * np.sin(np.pi * a)], axis=-1)

    bump = forward.von_mises_bump([-1, -1], [1, 1], [0.4, -0.3], 3.0)
    p = forward.simulate_density(grid, pot, gradient, BETA, bump, np.linspace(0, 1.5, 16), resolution=32)
    f = free_energy(p, psi, BETA, grid)
    assert np.all(np.diff(f) < 0) and f[0] - f[-1] > 0.1


def test_free_energy_validation(rng):
    grid, psi, _ = joint_problem()
    p = random_density(grid, rng)
    with pytest.raises(FpirlInputError):
        free_energy(p, psi[:-1], BETA, grid)
    with pytest.raises(FpirlInputError):
        free_energy(p, psi, 0.0, grid)
    with pytest.raises(FpirlInputError):
        free_energy_mdp(np.ones(3), p, -psi, BETA, grid)


def test_log_log_slope_is_the_observed_order():
    N = np.array([8.0, 16.0, 32.0, 64.0])
    assert log_log_slope(N, 5.0 * N**-2.0) == pytest.approx(-2.0, abs=1e-12)
    assert log_log_slope(1.0 / N, 5.0 * N**-2.0) == pytest.approx(2.0, abs=1e-12)
    # zero, negative and non-finite errors are left out; fewer than two points give nan
    assert log_log_slope(N, [1.0, 0.0, np.nan, 1.0 / 8]) == pytest.approx(-1.0, abs=1e-12)
    assert np.isnan(log_log_slope(N, [1.0, 0.0, -1.0, np.inf]))
    with pytest.raises(FpirlInputError):
        log_log_slope(N, [1.0, 2.0])


def test_gradient_l2_error(rng):
    g_true = rng.normal(size=(2, 30, 20))
    assert gradient_l2_error(g_true, g_true) == 0.0
    assert gradient_l2_error(1.1 * g_true, g_true, relative=True) == pytest.approx(0.1, rel=1e-12)
    # RMS over the points of the Euclidean norm over the components
    d = np.zeros_like(g_true)
    d[0] = 3.0
    d[1] = 4.0
    assert gradient_l2_error(g_true + d, g_true) == pytest.approx(5.0, rel=1e-12)
    with pytest.raises(FpirlInputError):
        gradient_l2_error(g_true, g_true[:1])
    with pytest.raises(FpirlInputError):
        gradient_l2_error(g_true, np.zeros_like(g_true), relative=True)
