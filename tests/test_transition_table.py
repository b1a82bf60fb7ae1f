"""The tabulated transition kernel (``GaussianTransition(..., tabulated=True)``, used by the credible bands)
against an independent quadrature oracle and against the exact kernel; the bands' quantiles."""

from contextlib import nullcontext

import numpy as np
import pytest

from fpirl.core.grid import Axis, Grid
from fpirl.mdp import GaussianTransition, recover_mdp
from fpirl.mdp._kernel_1d import _TABLE_STEPS, UNIFORM_WIDTH, _kernel_1d, _tabulated_kernel


def _hat_oracle(axis, mu, tau):
    """``K[r, j] = int N_j(y) f_r(y) dy / w_j``: ``N_j`` the hat of node ``j`` (half hats at walls, hats
    across the seam on a periodic axis), ``f_r`` the density of ``N(mu_r, tau^2)`` wrapped onto the period
    (periodic) or folded into the box (method of images, period 2 L), by 20-point Gauss-Legendre
    quadrature per element. Rows normalised to ``K @ w = 1``."""
    lo, length, h = axis.lower, axis.length, axis.spacing
    w = axis.node_weights
    mu = np.asarray(mu, dtype=float)[:, None, None, None] - lo
    xi, wq = np.polynomial.legendre.leggauss(20)
    xi, wq = 0.5 * (xi + 1), 0.5 * wq * h
    y = (h * np.arange(axis.elements))[:, None] + h * xi  # (elements, 20), from the lower end
    if axis.periodic:
        images = length * np.arange(-6, 7)
        f = np.exp(-0.5 * ((y[..., None] - mu - images) / tau) ** 2).sum(-1)
    else:
        images = 2 * length * np.arange(-4, 5)
        f = (np.exp(-0.5 * ((y[..., None] - mu - images) / tau) ** 2)
             + np.exp(-0.5 * ((y[..., None] + mu - images) / tau) ** 2)).sum(-1)
    k = np.zeros((f.shape[0], axis.n_nodes))
    left = np.einsum("req,q->re", f, wq * (1 - xi))
    right = np.einsum("req,q->re", f, wq * xi)
    k[:, : axis.elements] += left
    if axis.periodic:
        k += np.roll(right, 1, axis=1)  # element e ends at node e + 1 (mod n)
    else:
        k[:, 1:] += right
    k /= w
    return k / (k @ w)[:, None]


def _row_error(a, b):
    return np.abs(a - b).max(axis=1) / np.abs(b).max(axis=1)


@pytest.mark.parametrize("periodic", [True, False])
@pytest.mark.parametrize("discretization, ratio", [("projection", 0.3), ("projection", 1.0), ("moment", 2.5)])
def test_tabulated_rows_equal_the_quadrature_oracle(periodic, discretization, ratio):
    """Means anywhere (beyond the walls and across the seam): every row within 1e-8 of its maximum of the
    hat projection of the Gaussian, wrapped or folded (tau = sigma for 'projection', the analytic
    tau^2 = sigma^2 - h^2/6 of 'moment' at sigma >= 2.05 h); the exact kernel is within 1e-12 of it."""
    axis = Axis("s", -1.0, 1.0, 12, periodic=periodic)
    h = axis.spacing
    sigma = ratio * h
    mu = np.random.default_rng(1).uniform(-1.4, 1.4, 300)
    mu[:3] = [-1.0, 1.0, 0.0]  # on the walls / the seam, on a node
    tau = sigma if discretization == "projection" else np.sqrt(sigma**2 - h * h / 6)
    tab = _tabulated_kernel(axis, mu, sigma, discretization)
    ref = _hat_oracle(axis, mu, tau)
    assert _row_error(tab, ref).max() < 1e-8
    assert _row_error(_kernel_1d(axis, mu, sigma, discretization), ref).max() < 1e-12
    np.testing.assert_allclose(tab @ axis.node_weights, 1.0, atol=1e-14)


@pytest.mark.parametrize("periodic", [True, False])
@pytest.mark.parametrize("ratio", [0.5001, 0.67, 1.3])
def test_tabulated_moment_kernel_keeps_mean_and_variance(periodic, ratio):
    """'moment' at sigma / h between 1/2 and 2 (tau solved per cell position): rows within 1e-8 of the
    exact kernel's, normalised, the mean (linear in the offset, as is the interpolation) exact, the
    variance within 2e-8 relative of the exact kernel's."""
    axis = Axis("s", -1.0, 1.0, 40, periodic=periodic)
    h, x, w = axis.spacing, axis.nodes, axis.node_weights
    sigma = ratio * h
    mu = np.random.default_rng(2).uniform(-0.4 if not periodic else -3.0, 0.4 if not periodic else 3.0, 400)
    tab = _tabulated_kernel(axis, mu, sigma, "moment")
    exact = _kernel_1d(axis, mu, sigma, "moment")
    assert _row_error(tab, exact).max() < 1e-8
    np.testing.assert_allclose(tab @ w, 1.0, atol=1e-14)
    if periodic:
        dist = np.mod(x[None, :] - mu[:, None] + 1.0, 2.0) - 1.0  # wrapped x_j - mu
    else:  # sources >= 9 sigma from the walls: nothing folds
        dist = x[None, :] - mu[:, None]
    for k in (tab, exact):
        assert np.abs((k * w * dist).sum(1)).max() < 1e-12 * h
    var = [(k * w * dist**2).sum(1) for k in (tab, exact)]
    assert np.abs(var[0] / var[1] - 1).max() < 2e-8
    assert np.abs(var[1] / sigma**2 - 1).max() < 1e-5


def test_transition_tabulates_only_large_factors_of_smooth_kernels():
    """``tabulated=True``: axes with more rows than the table (> 8192) are interpolated (within 1e-8 of,
    not equal to, the exact rows); 'moment' at sigma <= h/2, 'nodal', small axes and axes of > 128 nodes stay exact."""
    grid = Grid([-1, -1, -1], [1, 1, 1], [24, 24, 16], roles=["state", "state", "action"], boundary="periodic")
    assert grid.size > _TABLE_STEPS
    rng = np.random.default_rng(3)
    grad = rng.uniform(-2, 2, (2,) + grid.shape)
    h = grid.axes[0].spacing
    for disc, ratio, tabulated in (("moment", 0.7, True), ("projection", 0.4, True), ("moment", 0.45, False),
                                   ("nodal", 1.0, False)):
        sigma, dt = ratio * h, 0.01
        kw = dict(beta=2 * dt / sigma**2, dt=dt, discretization=disc)
        with np.errstate(all="ignore"), pytest.warns(RuntimeWarning) if disc == "projection" else nullcontext():
            exact = GaussianTransition(grid, grad, **kw)
            tab = GaussianTransition(grid, grad, tabulated=True, **kw)
        for a, b in zip(tab.factors, exact.factors):
            err = _row_error(a, b).max()
            assert (0 < err < 1e-8) if tabulated else err == 0, (disc, ratio, err)
    bad = np.concatenate([np.linspace(-1, 1, _TABLE_STEPS), [np.nan]])  # not finite: as the exact path does
    for tab in (False, True):
        with pytest.raises(ValueError, match="NaN"):
            _kernel_1d(grid.axes[0], bad, h, "moment", tab)
    small = Grid([-1, -1], [1, 1], [10, 4], roles=["state", "action"], boundary="reflecting")
    fine = Grid([-1, -1], [1, 1], [130, 72], roles=["state", "action"], boundary="periodic")  # > 128 nodes
    for g in (small, fine):
        d = rng.uniform(-1, 1, (1,) + g.shape)
        np.testing.assert_array_equal(GaussianTransition(g, d, 5.0, 0.02, tabulated=True).factors[0],
                                      GaussianTransition(g, d, 5.0, 0.02).factors[0])


def test_tabulated_recovery_reward_matches_the_exact_one():
    """``recover_mdp(..., tabulated=True)``: the policy is the same, the reward differs by at most
    ``gamma |V|_inf`` times the rows' L1 error (< 1e-7 of the reward's range here)."""
    grid = Grid([-1, -1, -1], [1, 1, 1], [24, 24, 16], roles=["state", "state", "action"], boundary="periodic")
    mesh = grid.mesh()
    psi = np.sin(np.pi * mesh[..., 0]) * np.cos(np.pi * mesh[..., 2]) + 0.5 * np.cos(np.pi * (mesh[..., 1] - mesh[..., 2]))
    grad = np.stack([np.pi * np.cos(np.pi * mesh[..., 0]) * np.cos(np.pi * mesh[..., 2]),
                     -0.5 * np.pi * np.sin(np.pi * (mesh[..., 1] - mesh[..., 2]))])
    a = recover_mdp(grid, psi, grad, 5.0, 0.02)
    b = recover_mdp(grid, psi, grad, 5.0, 0.02, tabulated=True)
    np.testing.assert_array_equal(a.policy, b.policy)
    assert 0 < np.abs(a.reward - b.reward).max() < 1e-7 * np.abs(a.reward).max()


def test_bands_on_a_tabulated_grid_equal_those_of_the_exact_rows():
    """``credible_bands`` on a grid whose factors are tabulated (> 8192 rows): the bands of a loop of exact
    recoveries and ``np.quantile`` over the same draws, to 1e-7 of each band's range."""
    from fpirl.core.hermite import HermiteSpace
    from fpirl.uncertainty import credible_bands

    grid = Grid([-1, -1, -1], [1, 1, 1], [24, 24, 16], roles=["state", "state", "action"], boundary="periodic")
    space = HermiteSpace.on_grid(grid, 2)
    rng = np.random.default_rng(6)
    draws = np.concatenate([rng.standard_normal((6, space.n_coef)), rng.uniform(0.15, 0.25, (6, 1))], axis=1)

    class Draws:  # a posterior: fixed draws of [theta; 1/beta]
        hermite = space

        def sample(self, n, rng):
            return draws

    dt = 0.01  # sigma / h = 0.55-0.67: 'moment' tabulated
    got = credible_bands(Draws(), grid, dt, 0.9, n_samples=6)
    exact = {"policy": [], "reward": []}
    for d in draws:
        coef = d[:-1].reshape(space.shape)
        mdp = recover_mdp(grid, space.evaluate_grid(coef, grid.coords),
                          space.gradient_grid(coef, grid.coords, grid.state_axes), 1 / d[-1], dt, 0.9)
        exact["policy"].append(mdp.policy)
        exact["reward"].append(mdp.reward)
    for name, arr in exact.items():
        lo, hi = np.quantile(np.array(arr), (0.05, 0.95), axis=0)
        for side, ref in (("lower", lo), ("upper", hi)):
            err = np.abs(got[f"{name}_{side}"] - ref).max() / np.ptp(ref)
            assert err < 1e-7, (name, side, err)


@pytest.mark.parametrize("periodic", [True, False])
@pytest.mark.parametrize("discretization", ["nodal", "projection", "moment"])
def test_kernels_wider_than_one_and_a_half_periods_are_flat(periodic, discretization):
    """From ``UNIFORM_WIDTH`` periods (of the wrapped axis, or ``2 L`` of the folded one) on the factor is
    flat, ``1 / sum(w)`` per node (a tiny fitted beta had the exact projected kernel walk ~1,000 lattice
    points per row); just below, the exact path gives the same rows to its rounding (second differences of
    ramps ~ sigma / h times the row: ~1e-11): the wrapped Gaussian's first Fourier mode,
    ``exp(-2 pi^2 sigma^2 / P^2)``, is below 1e-19 of its mean there."""
    axis = Axis("s", -1.0, 1.0, 12, periodic=periodic)
    period = axis.length if periodic else 2 * axis.length
    mu = np.random.default_rng(2).uniform(-1.4, 1.4, 40)
    flat = 1.0 / axis.node_weights.sum()
    for sigma, tol in ((UNIFORM_WIDTH * period, 1e-15), (50 * period, 1e-15), (0.999 * UNIFORM_WIDTH * period, 1e-10)):
        rows = _kernel_1d(axis, mu, sigma, discretization)
        assert np.abs(rows - flat).max() < tol * flat, sigma
