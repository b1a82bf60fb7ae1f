"""MDP recovery: Boltzmann policy, Gaussian transition, inverse Bellman reward (paper section 3)."""

import warnings

import numpy as np
import pytest
import scipy.optimize

from fpirl import FpirlInputError
from fpirl.core.grid import Grid
from fpirl.problems.synthetic import random_periodic_potential
from fpirl.mdp import (
    DEFAULT_GAMMA,
    MDP,
    GaussianTransition,
    boltzmann_policy,
    inverse_bellman_reward,
    recover_mdp,
    state_shape,
)


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
def state_grad(grid, grad):
    return grad[list(grid.state_axes)]


def weights_over(grid, axes):
    w = np.ones(())
    for i in axes:
        w = np.multiply.outer(w, grid.axes[i].node_weights)
    return w


def brute_force_reward(grid, q, policy, transition, gamma):
    """r = (I - gamma T_MP) q with the dense MP matrix T_MP[x, x'] = T(s'|x) pi(a'|s') w(x')."""
    t = transition.dense()  # (*grid.shape, *state_shape)
    n, ns = grid.size, int(np.prod(state_shape(grid)))
    t = t.reshape(n, ns)
    # move the joint target index x' = (s', a') into grid order
    perm = list(grid.state_axes) + list(grid.action_axes)
    pol = np.transpose(policy, perm).reshape(ns, -1)  # (s', a')
    w = np.transpose(grid.node_weights(), perm).reshape(ns, -1)
    t_mp = (t[:, :, None] * (pol * w)[None]).reshape(n, -1)  # columns in (s', a') order
    np.testing.assert_allclose(t_mp.sum(axis=1), 1.0, atol=1e-13)  # a stochastic matrix
    q_sa = np.transpose(q, perm).reshape(-1)
    return (q.reshape(-1) - gamma * t_mp @ q_sa).reshape(grid.shape)


GRIDS = {
    "1s1a-periodic": Grid([-1, -1], [1, 1], [7, 6], roles=["state", "action"]),
    "1s1a-reflecting": Grid([0, -1], [2, 1], [6, 8], roles=["state", "action"], boundary="reflecting"),
    "2s1a-periodic": Grid([-1, -1, -1], [1, 1, 1], [5, 4, 3], roles=["state", "state", "action"]),
    "2s1a-reflecting": Grid([-1, 0, -1], [1, 1, 1], [4, 5, 3], roles=["state", "state", "action"], boundary="reflecting"),
    "a-s-a-s-mixed-order": Grid([-1] * 4, [1] * 4, [3, 4, 3, 5], roles=["action", "state", "action", "state"]),
    "3s1a-periodic": Grid([-1] * 4, [1] * 4, [4, 3, 5, 3], roles=["state", "state", "state", "action"]),
}


# --------------------------------------------------------------------------------------------
# policy
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(GRIDS))
def test_policy_normalised_over_actions(name, rng):
    grid = GRIDS[name]
    psi, _ = random_periodic_potential(grid, rng)
    pi = boltzmann_policy(grid, psi, beta=3.0)
    assert pi.shape == grid.shape and np.all(pi > 0)
    np.testing.assert_allclose(grid.integrate(pi, axes=grid.action_axes), 1.0, atol=1e-13)


def test_policy_matches_formula_and_is_stable_for_large_beta(rng):
    grid = GRIDS["2s1a-periodic"]
    psi, _ = random_periodic_potential(grid, rng)
    beta = 2.0
    e = np.exp(-beta * psi)
    expected = e / np.expand_dims(grid.integrate(e, axes=[2]), 2)
    np.testing.assert_allclose(boltzmann_policy(grid, psi, beta), expected, rtol=1e-13)
    # beta * psi ~ 1e6: the naive formula overflows, log-sum-exp does not
    pi = boltzmann_policy(grid, 1e5 * psi, beta=50.0)
    assert np.all(np.isfinite(pi))
    np.testing.assert_allclose(grid.integrate(pi, axes=[2]), 1.0, atol=1e-12)
    # the mass concentrates on the arg-min action of each state
    assert np.array_equal(pi.argmax(axis=2), psi.argmin(axis=2))


def test_policy_rejects_bad_input():
    grid = GRIDS["1s1a-periodic"]
    with pytest.raises(FpirlInputError):
        boltzmann_policy(grid, np.zeros((3, 3)), 1.0)
    with pytest.raises(FpirlInputError):
        boltzmann_policy(grid, np.zeros(grid.shape), -1.0)
    bad = np.zeros(grid.shape)
    bad[0, 0] = np.nan
    with pytest.raises(FpirlInputError):
        boltzmann_policy(grid, bad, 1.0)
    with pytest.raises(FpirlInputError):  # no action axis
        boltzmann_policy(Grid([0, 0], [1, 1], 4), np.zeros((4, 4)), 1.0)


# --------------------------------------------------------------------------------------------
# transition
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("discretization", ["nodal", "projection"])
@pytest.mark.parametrize("name", list(GRIDS))
def test_transition_integrates_to_one(name, discretization, rng):
    grid = GRIDS[name]
    _, grad = random_periodic_potential(grid, rng, amp=3.0)
    for dt, beta in [(0.05, 2.0), (0.3, 0.5), (0.002, 50.0), (2.0, 0.1)]:  # narrow to very wide kernels
        tr = GaussianTransition(grid, state_grad(grid, grad), beta, dt, discretization)
        t = tr.dense()
        ws = weights_over(grid, grid.state_axes)
        mass = (t * ws).reshape(grid.shape + (-1,)).sum(-1)
        np.testing.assert_allclose(mass, 1.0, atol=1e-13)
        assert np.all(t >= 0)
        np.testing.assert_allclose(tr.expect(np.ones(state_shape(grid))), 1.0, atol=1e-13)


@pytest.mark.parametrize("discretization", ["nodal", "projection"])
def test_transition_means_across_seam_and_walls(discretization):
    """Drifts that push the mean onto / across the periodic seam and beyond reflecting walls."""
    for boundary in ["periodic", "reflecting"]:
        grid = Grid([-1, -1], [1, 1], [16, 3], roles=["state", "action"], boundary=boundary)
        s = grid.mesh()[..., 0]
        # mean = s - g dt lands at 1.02 (just beyond the upper end), -1.3 or exactly at -1 for all sources
        for target in [1.02, -1.3, -1.0]:
            grad = ((s - target) / 0.1)[None]
            tr = GaussianTransition(grid, grad, beta=5.0, dt=0.1, discretization=discretization)
            f = tr.factors[0]
            w = grid.axes[0].node_weights
            np.testing.assert_allclose(f @ w, 1.0, atol=1e-13)
            nodes = grid.axes[0].nodes
            if boundary == "periodic":  # all rows identical, symmetric about the wrapped mean
                np.testing.assert_allclose(f, np.broadcast_to(f[:1], f.shape), atol=1e-13)  # rounding of kernel values up to ~10
                c = np.angle(np.sum(w * f[0] * np.exp(1j * np.pi * nodes))) / np.pi
                assert abs(np.mod(c - target + 1, 2) - 1) < 1e-10
            else:  # folded at the wall: the peak sits at the mirror image of the mean
                folded = -2 - target if target < -1 else (2 - target if target > 1 else target)
                np.testing.assert_allclose(f, np.broadcast_to(f[:1], f.shape), atol=1e-13)
                assert f[0].argmax() == np.abs(nodes - folded).argmin()
                if discretization == "nodal":  # the method of images, two nearest images
                    sig2 = 2 * 0.1 / 5.0
                    g = np.exp(-((nodes - target) ** 2) / (2 * sig2))
                    g += np.exp(-((nodes - (-2 - target)) ** 2) / (2 * sig2))
                    g += np.exp(-((nodes - (2 - target)) ** 2) / (2 * sig2))
                    np.testing.assert_allclose(f[0], g / (g @ w), rtol=1e-6, atol=1e-12)


def test_transition_moments_match_gaussian():
    """Far from the walls and for sigma >> h, the discrete kernel has the prescribed mean and variance."""
    grid = Grid([-1, -1], [1, 1], [400, 2], roles=["state", "action"], boundary="reflecting")
    s = grid.mesh()[..., 0]
    grad = (0.7 + 0.5 * s)[None]  # mean s - 0.05 (0.7 + 0.5 s)
    beta, dt = 4.0, 0.05
    tr = GaussianTransition(grid, grad, beta, dt)
    x, w = grid.axes[0].nodes, grid.axes[0].node_weights
    f = tr.factors[0].reshape(grid.shape + (-1,))
    inner = np.abs(x) < 0.2  # > 4.9 sigma from the walls: folded tail mass < 1e-6
    mean = (f * w * x).sum(-1)
    var = (f * w * x**2).sum(-1) - mean**2
    np.testing.assert_allclose(mean[inner], (s - grad[0] * dt)[inner], atol=1e-7)
    np.testing.assert_allclose(var[inner], 2 * dt / beta, rtol=1e-4)


def test_projection_kernel_preserves_the_mean_for_narrow_kernels():
    """sigma << h: nodal sampling collapses onto one node, the hat projection keeps the mean exactly."""
    grid = Grid([0, -1], [1, 1], [10, 2], roles=["state", "action"], boundary="reflecting")
    s = grid.mesh()[..., 0]
    grad = np.full((1,) + grid.shape, -0.037 / 0.01)  # shift the mean by +0.037 (a third of h)
    tr = GaussianTransition(grid, grad, beta=1e4, dt=0.01, discretization="projection")
    x, w = grid.axes[0].nodes, grid.axes[0].node_weights
    f = tr.factors[0].reshape(grid.shape + (-1,))
    mean = (f * w * x).sum(-1)
    inner = (s > 0.05) & (s < 0.85)
    np.testing.assert_allclose(mean[inner], s[inner] + 0.037, atol=1e-12)


def test_push_and_expect_agree_with_dense_and_are_adjoint(rng):
    for name in ["2s1a-reflecting", "a-s-a-s-mixed-order", "3s1a-periodic"]:
        grid = GRIDS[name]
        _, grad = random_periodic_potential(grid, rng)
        tr = GaussianTransition(grid, state_grad(grid, grad), 2.0, 0.05)
        t = tr.dense().reshape(grid.size, -1)
        p = rng.random(grid.shape)
        v = rng.random(state_shape(grid))
        ws = weights_over(grid, grid.state_axes)
        pushed = ((p * grid.node_weights()).reshape(-1) @ t).reshape(state_shape(grid))
        np.testing.assert_allclose(tr.push(p), pushed, rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(tr.expect(v), (t @ (v * ws).reshape(-1)).reshape(grid.shape), rtol=1e-13)
        # <push p, v>_S = <p, expect v>_{S x A}
        np.testing.assert_allclose(grid.integrate(p * tr.expect(v)), np.sum(ws * tr.push(p) * v), rtol=1e-13)


def test_transition_rejects_bad_input():
    grid = GRIDS["2s1a-periodic"]
    grad = np.zeros((2,) + grid.shape)
    with pytest.raises(FpirlInputError):
        GaussianTransition(grid, grad[:1], 1.0, 0.1)
    with pytest.raises(FpirlInputError):
        GaussianTransition(grid, grad, 1.0, 0.0)
    with pytest.raises(FpirlInputError):
        GaussianTransition(grid, grad, 1.0, 0.1, discretization="spline")
    with pytest.raises(FpirlInputError):
        GaussianTransition(grid, grad, 1.0, 0.1).dense(max_entries=10)


# --------------------------------------------------------------------------------------------
# reward
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("discretization", ["nodal", "projection"])
@pytest.mark.parametrize("name", list(GRIDS))
def test_reward_equals_dense_inverse_bellman(name, discretization, rng):
    grid = GRIDS[name]
    psi, grad = random_periodic_potential(grid, rng)
    gamma = 0.9
    mdp = recover_mdp(grid, psi, state_grad(grid, grad), beta=2.0, dt=0.1, gamma=gamma, discretization=discretization,
                      reward="expected")
    assert isinstance(mdp, MDP)
    np.testing.assert_array_equal(mdp.q_value, -psi)
    expected = brute_force_reward(grid, mdp.q_value, mdp.policy, mdp.transition, gamma)
    np.testing.assert_allclose(mdp.reward, expected, rtol=1e-12, atol=1e-12)


def test_constant_shift_of_psi(rng):
    """psi -> psi + c: pi and T unchanged, q -> q - c, so R -> R - (1 - gamma) c."""
    grid = GRIDS["2s1a-reflecting"]
    psi, grad = random_periodic_potential(grid, rng)
    c, gamma = 3.7, 0.95
    a = recover_mdp(grid, psi, state_grad(grid, grad), 2.0, 0.1, gamma)
    b = recover_mdp(grid, psi + c, state_grad(grid, grad), 2.0, 0.1, gamma)
    np.testing.assert_allclose(b.policy, a.policy, rtol=1e-13)
    for fa, fb in zip(a.transition.factors, b.transition.factors):
        np.testing.assert_array_equal(fa, fb)
    np.testing.assert_allclose(b.reward - a.reward, -(1 - gamma) * c, atol=1e-12)


def test_reward_default_gamma_and_validation(rng):
    grid = GRIDS["1s1a-periodic"]
    psi, grad = random_periodic_potential(grid, rng)
    mdp = recover_mdp(grid, psi, state_grad(grid, grad), 2.0, 0.1, reward="expected")
    assert mdp.gamma == DEFAULT_GAMMA == 0.99
    r = inverse_bellman_reward(mdp.q_value, mdp.policy, mdp.transition, grid)
    np.testing.assert_array_equal(r, mdp.reward)
    # gamma = 0: R = Q
    np.testing.assert_array_equal(inverse_bellman_reward(mdp.q_value, mdp.policy, mdp.transition, grid, 0.0), -psi)
    for gamma in [1.0, -0.1]:
        with pytest.raises(FpirlInputError):
            inverse_bellman_reward(mdp.q_value, mdp.policy, mdp.transition, grid, gamma)
    with pytest.raises(FpirlInputError):
        inverse_bellman_reward(mdp.q_value, mdp.policy, mdp.transition, grid.with_elements([5, 5]))


def test_bellman_roundtrip_recovers_q(rng):
    """Solving the forward Bellman equation q = r + gamma T_MP q with the recovered r gives back q."""
    grid = GRIDS["2s1a-periodic"]
    psi, grad = random_periodic_potential(grid, rng)
    gamma = 0.8
    mdp = recover_mdp(grid, psi, state_grad(grid, grad), 2.0, 0.1, gamma, reward="expected")
    q = np.zeros(grid.shape)  # fixed-point iteration, a gamma-contraction
    for _ in range(200):
        v = grid.integrate(mdp.policy * q, axes=grid.action_axes)
        q = mdp.reward + gamma * mdp.transition.expect(v)
    np.testing.assert_allclose(q, mdp.q_value, atol=1e-12)


@pytest.mark.parametrize("ratio", [0.2, 0.5, 1.0, 2.0])
def test_moment_kernel_has_exact_mean_and_variance(ratio):
    """Default kernel: mass and mean exact, variance exact wherever a non-negative nodal kernel can
    have it (``max(sigma^2, h^2 theta (1 - theta))``, the second term only for sigma < h/2)."""
    n = 40
    grid = Grid([-1, -1], [1, 1], [n, 3], roles=["state", "action"], boundary="periodic")
    h = grid.axes[0].spacing
    sigma, dt = ratio * h, 0.05
    shift = np.random.default_rng(3).uniform(-1.3, 1.3, grid.shape) * h  # means anywhere in a cell
    tr = GaussianTransition(grid, (shift / dt)[None], 2 * dt / sigma**2, dt)
    assert tr.discretization == "moment" and np.all(tr.factors[0] >= 0)
    x, w = grid.axes[0].nodes, grid.axes[0].node_weights
    mu = (grid.mesh()[..., 0] - shift).ravel()
    dist = np.mod(x[None, :] - mu[:, None] + 1.0, 2.0) - 1.0  # wrapped x_j - mu
    f = tr.factors[0]
    np.testing.assert_allclose(f @ w, 1.0, atol=1e-13)
    mean = (f * w * dist).sum(1)
    var = (f * w * dist**2).sum(1) - mean**2
    theta = np.mod((mu + 1.0) / h, 1.0)
    target = np.maximum(sigma**2, h * h * theta * (1 - theta))
    assert np.abs(mean).max() < 1e-10 * h
    assert np.abs(var / target - 1).max() < 1e-3
    if ratio >= 0.5:  # sigma^2 >= h^2/4 >= h^2 theta (1 - theta): the variance itself is exact
        assert np.abs(var / sigma**2 - 1).max() < 1e-3
    # the approximate kernels are worse here, and say so below their thresholds
    for disc, bad in (("nodal", ratio < 0.7), ("projection", True)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            g = GaussianTransition(grid, (shift / dt)[None], 2 * dt / sigma**2, dt, disc).factors[0]
        assert any("inaccurate" in str(c.message) for c in caught) == bad
        v = (g * w * dist**2).sum(1) - ((g * w * dist).sum(1)) ** 2
        if bad:
            assert np.abs(v / target - 1).max() > 1e-2


def _folded_hat_kernel(axis, mu, tau, nodal=False):
    """Independent oracle for one reflecting axis: ``K[r, j] = int N_j(y) f_r(y) dy / w_j`` with ``N_j``
    the hat of node ``j`` (half hats at the walls) and ``f_r`` the density of ``N(mu_r, tau^2)``
    folded into the box (method of images, period 2 L), by 20-point Gauss-Legendre quadrature per
    element; ``nodal=True``: ``K[r, j] ~ f_r(x_j)``. Rows normalised to ``K @ w = 1``."""
    lo, length, h = axis.lower, axis.length, axis.spacing
    x, w = axis.nodes, axis.node_weights
    images = 2 * length * np.arange(-4, 5)

    def folded(y):  # y: (...,) absolute positions -> (n_sources, ...)
        u = (y - lo)[None, ..., None]
        m = (np.asarray(mu) - lo).reshape((-1,) + (1,) * (np.ndim(y) + 1))
        t = np.broadcast_to(np.asarray(tau, dtype=float), np.shape(mu)).reshape(m.shape)  # scalar or per source
        g = np.exp(-0.5 * ((u - m - images) / t) ** 2) + np.exp(-0.5 * ((u + m - images) / t) ** 2)
        return g.sum(-1) / (t[..., 0] * np.sqrt(2 * np.pi))

    if nodal:
        k = folded(x)
    else:
        xi, wq = np.polynomial.legendre.leggauss(20)
        xi, wq = 0.5 * (xi + 1), 0.5 * wq * h  # on [0, 1], weights for an element of width h
        f = folded(x[:-1, None] + h * xi[None, :])  # (n_sources, n_elements, 20)
        k = np.zeros((f.shape[0], x.size))
        k[:, :-1] += np.einsum("req,q->re", f, wq * (1 - xi))
        k[:, 1:] += np.einsum("req,q->re", f, wq * xi)
        k /= w
    return k / (k @ w)[:, None]


def _interior_moment_tau(theta, sigma, h):
    """Width ``tau`` whose hat projection on an unbounded lattice has nodal variance ``sigma^2`` for a
    mean at ``theta h`` in its cell: ``E[I((X - mu)^2)] = sigma^2``, ``I`` the piecewise linear
    interpolant at the nodes, ``X ~ N(mu, tau^2)`` (Gauss-Legendre per element, Brent's root)."""
    xi, wq = np.polynomial.legendre.leggauss(20)
    xi, wq = 0.5 * (xi + 1), 0.5 * wq * h
    k = np.arange(-int(12 * sigma / h) - 2, int(12 * sigma / h) + 3)[:, None]
    y, mu = (k + xi) * h, theta * h
    interp = (1 - xi) * (k * h - mu) ** 2 + xi * ((k + 1) * h - mu) ** 2

    def excess(tau):
        g = np.exp(-0.5 * ((y - mu) / tau) ** 2) / (tau * np.sqrt(2 * np.pi))
        return float(np.sum(g * interp * wq)) - sigma**2

    return scipy.optimize.brentq(excess, 0.2 * h, sigma, xtol=1e-14 * h)


@pytest.mark.filterwarnings("ignore:the '.*' transition kernel is inaccurate")
@pytest.mark.parametrize("discretization, ratio", [("moment", 2.5), ("moment", 0.8), ("projection", 0.8),
                                                   ("projection", 2.5), ("nodal", 0.8)])
def test_reflecting_kernel_equals_quadrature_of_the_folded_gaussian(discretization, ratio):
    """Every kernel on a reflecting axis, means inside, on and beyond the walls, against the oracle built
    without the kernel code. 'moment' at sigma >= 2.05 h has the analytic width tau^2 = sigma^2 - h^2/6
    (the hats add E[(X - x_l)(x_r - X)] = h^2/6 to the variance of a wide Gaussian); at 0.8 h the width
    of each source is solved from the interior rule (:func:`_interior_moment_tau`)."""
    grid = Grid([-1, -1], [1, 1], [10, 2], roles=["state", "action"], boundary="reflecting")
    axis = grid.axes[0]
    h, dt = axis.spacing, 0.1
    sigma = ratio * h
    grad = np.random.default_rng(8).uniform(-3.5, 3.5, grid.shape)[None]  # means in [-1.35, 1.35]
    grad[0, 0, 0], grad[0, -1, 1] = 0.0, 0.0  # sources exactly on the walls
    tr = GaussianTransition(grid, grad, 2 * dt / sigma**2, dt, discretization)
    mu = (grid.mesh()[..., 0] - grad[0] * dt).ravel()
    assert mu.min() < -1.2 and mu.max() > 1.2
    tau, rtol = sigma, 1e-9
    if discretization == "moment" and ratio > 2.05:
        tau = np.sqrt(sigma**2 - h * h / 6)
    elif discretization == "moment":  # the code tabulates tau(theta): variance within 1e-5 relative
        tau, rtol = np.array([_interior_moment_tau(t, sigma, h) for t in np.mod((mu - axis.lower) / h, 1)]), 1e-7
    ref = _folded_hat_kernel(axis, mu, tau, nodal=discretization == "nodal")
    np.testing.assert_allclose(tr.factors[0], ref, rtol=rtol, atol=1e-12)
    ns = state_shape(grid)
    np.testing.assert_allclose(tr.dense(), ref.reshape(grid.shape + ns), rtol=rtol, atol=1e-12)
