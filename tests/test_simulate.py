"""Forward models: MDP density map (eq. density_evolution), SDE sampler (eq. SDE), CIC histograms."""

import numpy as np
import pytest
from scipy.stats import chi2

from fpirl import FpirlInputError, forward
from fpirl.core.grid import Grid
from fpirl.mdp import recover_mdp
from fpirl.evaluation.metrics import kl_divergence, relative_l2_error
from fpirl.forward.markov import histogram_density, mdp_density_map, sample_sde

BETA = 2.0


# --------------------------------------------------------------------------------------------
# MDP density map
# --------------------------------------------------------------------------------------------
def joint_problem(elements, boundary="periodic"):
    """1 state x 1 action on [-1, 1]^2 with a smooth coupled potential."""
    grid = Grid([-1, -1], [1, 1], elements, roles=["state", "action"], boundary=boundary)
    x = grid.mesh()
    s, a = x[..., 0], x[..., 1]
    psi = np.cos(np.pi * s) + 0.5 * np.sin(np.pi * (s + a)) + 0.6 * np.cos(np.pi * a)
    grad_s = -np.pi * np.sin(np.pi * s) + 0.5 * np.pi * np.cos(np.pi * (s + a))
    return grid, psi, grad_s[None]


@pytest.mark.parametrize("boundary", ["periodic", "reflecting"])
def test_mdp_map_conserves_mass_and_factorises(boundary, rng):
    grid = Grid([-1, -1, -1], [1, 1, 1], [9, 7, 5], roles=["state", "state", "action"], boundary=boundary)
    x = grid.mesh()
    psi = np.cos(np.pi * x[..., 0]) * np.sin(np.pi * x[..., 1] + 0.3) + x[..., 2] ** 2 * np.cos(np.pi * x[..., 0])
    grad = np.stack(
        [
            -np.pi * np.sin(np.pi * x[..., 0]) * np.sin(np.pi * x[..., 1] + 0.3) - np.pi * x[..., 2] ** 2 * np.sin(np.pi * x[..., 0]),
            np.pi * np.cos(np.pi * x[..., 0]) * np.cos(np.pi * x[..., 1] + 0.3),
        ]
    )
    mdp = recover_mdp(grid, psi, grad, beta=3.0, dt=0.05)
    p0 = rng.random(grid.shape)
    p0 /= grid.integrate(p0)
    out = mdp_density_map(grid, mdp.policy, mdp.transition, p0, steps=50)
    assert out.shape == (51,) + grid.shape
    np.testing.assert_array_equal(out[0], p0)
    np.testing.assert_allclose(grid.integrate(out), 1.0, atol=1e-12, rtol=0)
    assert np.all(out >= 0)
    # after one step every snapshot is rho_n(s) pi(a|s)
    rho = grid.integrate(out[1:], axes=[2])
    np.testing.assert_allclose(out[1:], rho[..., None] * mdp.policy, rtol=1e-12)


def test_mdp_map_kernel_and_push_paths_agree(rng):
    """The policy-averaged state kernel T_pi(s'|s) reproduces step-by-step pushes (any axis order)."""
    for grid in [
        Grid([-1, -1, -1], [1, 1, 1], [6, 5, 4], roles=["action", "state", "state"], boundary="reflecting"),
        Grid([-1, -1, -1, -1], [1, 1, 1, 1], [4, 3, 5, 3], roles=["state", "action", "state", "state"]),
        Grid([-1, -1, -1], [1, 1, 1], [7, 4, 3], roles=["state", "action", "action"]),
    ]:
        x = grid.mesh()
        psi = np.cos(np.pi * x[..., 0]) + np.sin(np.pi * x.sum(-1)) * 0.5
        grad = rng.normal(size=(len(grid.state_axes),) + grid.shape)
        mdp = recover_mdp(grid, psi, grad, beta=2.0, dt=0.1)
        tk = mdp.transition.state_kernel(mdp.policy)
        ns = tk.shape[: tk.ndim // 2]
        ws = np.ones(())
        for i in grid.state_axes:
            ws = np.multiply.outer(ws, grid.axes[i].node_weights)
        np.testing.assert_allclose(np.tensordot(tk, ws, axes=len(ns)), 1.0, atol=1e-13)
        p0 = rng.random(grid.shape)
        a = mdp_density_map(grid, mdp.policy, mdp.transition, p0, steps=6, method="kernel")
        b = mdp_density_map(grid, mdp.policy, mdp.transition, p0, steps=6, method="push")
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
        with pytest.raises(FpirlInputError):
            mdp.transition.state_kernel(mdp.policy, max_entries=4)


def test_mdp_map_from_state_density_and_validation():
    grid, psi, grad = joint_problem([12, 6])
    mdp = recover_mdp(grid, psi, grad, BETA, 0.05)
    rho0 = np.full(grid.shape[0], 0.5)  # uniform state density on [-1, 1] (the paper's start)
    out = mdp_density_map(grid, mdp.policy, mdp.transition, rho0, steps=3)
    np.testing.assert_allclose(out[0], 0.5 * mdp.policy)
    np.testing.assert_allclose(grid.integrate(out), 1.0, atol=1e-13)
    with pytest.raises(FpirlInputError):
        mdp_density_map(grid, mdp.policy, mdp.transition, -out[0], steps=3)
    with pytest.raises(FpirlInputError):
        mdp_density_map(grid, mdp.policy, mdp.transition, out[0], steps=-1)
    with pytest.raises(FpirlInputError):
        mdp_density_map(grid, mdp.policy, mdp.transition, np.ones((3, 3)), steps=1)
    with pytest.raises(FpirlInputError):
        mdp_density_map(grid, mdp.policy, mdp.transition, out[0], steps=1, method="exact")


def test_mdp_map_approaches_gibbs_at_second_order_in_dt():
    """The map's equilibrium is rho(s) pi(a|s) with rho the Gibbs marginal up to O(dt): KL = O(dt^2)."""
    grid, psi, grad = joint_problem([40, 20])
    gibbs = np.exp(-BETA * psi)
    gibbs /= grid.integrate(gibbs)
    kls = []
    for dt in [0.04, 0.02]:
        mdp = recover_mdp(grid, psi, grad, BETA, dt)
        out = mdp_density_map(grid, mdp.policy, mdp.transition, np.full(40, 0.5), steps=int(round(4.0 / dt)))
        kls.append(kl_divergence(out[-1], gibbs, grid))
        assert kl_divergence(out[-1], out[-2], grid) < 1e-12  # converged
    assert kls[1] < 0.005
    assert 3.2 < kls[0] / kls[1] < 5.0


# --------------------------------------------------------------------------------------------
# SDE sampler and histograms
# --------------------------------------------------------------------------------------------
def psi_1d(x):
    return np.cos(np.pi * x[..., 0]) + 0.5 * np.sin(2 * np.pi * x[..., 0])


def grad_1d(x):
    return -np.pi * np.sin(np.pi * x) + np.pi * np.cos(2 * np.pi * x)


def bin_probabilities_1d(grid, p, bins):
    """Trapezoid integral of a nodal density over equal bins made of whole elements."""
    vals = p if not grid.periodic else np.append(p, p[0])
    cells = 0.5 * grid.axes[0].spacing * (vals[:-1] + vals[1:])
    return cells.reshape(bins, -1).sum(axis=1)


def chi_square_pvalue(observed, expected):
    stat = np.sum((observed - expected) ** 2 / expected)
    return chi2.sf(stat, observed.size - 1)


def test_sde_periodic_matches_fp_solution_and_gibbs(rng):
    """Euler-Maruyama histograms vs the FP PDE (forward.py) at t = 0.2 and vs Gibbs at t = 1.5.

    EM has O(h) weak error. Measured with 1e5 particles in 25 bins at t = 0.2: the chi-square
    statistic exceeds its null mean (24) by ~175 at h = 5e-3 and ~12 at h = 1.25e-3 (O(h^2) in the
    statistic). With h = 1e-3 for the transient and 20000 particles the excess is ~1, well inside
    the noise, so a plain chi-square test applies. Power check: the t = 0.2 histogram is
    decisively rejected against Gibbs.
    """
    n, bins = 20000, 25
    x0 = 0.5 + rng.vonmises(0.0, 4.0, size=(n, 1)) / np.pi  # von Mises bump at 0.5, kappa = 4
    early = sample_sde(grad_1d, BETA, x0, 0.1, 2, rng, [-1], [1], "periodic", substeps=100)
    assert early.shape == (3, n, 1)
    late = sample_sde(grad_1d, BETA, early[-1], 1.3, 1, rng, [-1], [1], "periodic", substeps=650)
    assert early.min() >= -1 and early.max() < 1 and late.min() >= -1 and late.max() < 1
    np.testing.assert_array_equal(late[0], early[-1])

    fine = Grid([-1], [1], [500])
    bump = forward.von_mises_bump([-1], [1], [0.5], 4.0)
    p_fp = forward.simulate_density(fine, psi_1d, lambda x: grad_1d(x), BETA, bump, [0.2, 1.5], resolution=64)
    gibbs = np.exp(-BETA * psi_1d(fine.mesh()))
    gibbs /= fine.integrate(gibbs)

    def counts(x):
        return np.histogram(x[:, 0], bins=bins, range=(-1, 1))[0]

    assert chi_square_pvalue(counts(early[2]), n * bin_probabilities_1d(fine, p_fp[0], bins)) > 1e-3
    assert chi_square_pvalue(counts(late[1]), n * bin_probabilities_1d(fine, p_fp[1], bins)) > 1e-3
    assert chi_square_pvalue(counts(late[1]), n * bin_probabilities_1d(fine, gibbs, bins)) > 1e-3
    assert chi_square_pvalue(counts(early[2]), n * bin_probabilities_1d(fine, gibbs, bins)) < 1e-12

    # the nodal CIC estimate of the equilibrium samples is close to the Gibbs density
    grid = Grid([-1], [1], [25])
    est = histogram_density(grid, late[1])
    assert grid.integrate(est) == pytest.approx(1.0, abs=1e-13)
    g = np.exp(-BETA * psi_1d(grid.mesh()))
    g /= grid.integrate(g)
    assert relative_l2_error(est, g) < 0.06


def test_sde_reflecting_2d_reaches_gibbs(rng):
    """2-D box with reflecting walls: chi-square of 6 x 6 bin counts against the Gibbs density.

    Relaxation is done by t ~ 0.75; at h = 2e-3 the EM excess of the statistic was ~4 for 5e4
    particles (null mean 35), i.e. ~2 for the 2e4 used here.
    """

    def psi(x):
        return np.cos(np.pi * x[..., 0]) + 0.8 * np.cos(np.pi * x[..., 1]) + 0.5 * x[..., 0] * x[..., 1]

    def grad(x):
        return np.stack(
            [-np.pi * np.sin(np.pi * x[:, 0]) + 0.5 * x[:, 1], -0.8 * np.pi * np.sin(np.pi * x[:, 1]) + 0.5 * x[:, 0]],
            axis=1,
        )

    n, bins, sub = 20000, 6, 40
    x0 = rng.random((n, 2))
    paths = sample_sde(grad, BETA, x0, 0.5, 2, rng, [0, 0], [1, 1], "reflecting", substeps=250)
    assert paths.min() >= 0 and paths.max() <= 1
    mid = (np.arange(bins * sub) + 0.5) / (bins * sub)
    g = np.exp(-BETA * psi(np.stack(np.meshgrid(mid, mid, indexing="ij"), axis=-1)))
    prob = g.reshape(bins, sub, bins, sub).sum(axis=(1, 3))
    prob /= prob.sum()
    counts = np.histogram2d(paths[-1, :, 0], paths[-1, :, 1], bins=bins, range=[[0, 1], [0, 1]])[0]
    assert chi_square_pvalue(counts.ravel(), n * prob.ravel()) > 1e-3
    start = np.histogram2d(paths[0, :, 0], paths[0, :, 1], bins=bins, range=[[0, 1], [0, 1]])[0]
    assert chi_square_pvalue(start.ravel(), n * prob.ravel()) < 1e-12


def test_sde_reflecting_1d_matches_finite_volume_solution(rng):
    """Transient with a wall: EM + folding vs the FV solver of forward.py at t = 0.1 and 0.4."""

    def psi(x):
        return 2.0 * x[..., 0] + 0.5 * np.cos(3 * x[..., 0])  # pushes mass onto the lower wall

    def grad(x):
        return 2.0 - 1.5 * np.sin(3 * x)

    n, bins = 20000, 20
    x0 = rng.normal(0.5, 0.1, size=(n, 1))
    paths = sample_sde(grad, BETA, x0, 0.1, 4, rng, [0], [1], "reflecting", substeps=100)
    fine = Grid([0], [1], [200], boundary="reflecting")

    def initial(x):
        return np.exp(-0.5 * ((x[..., 0] - 0.5) / 0.1) ** 2)

    # resolution 201 (not the default) keeps this test fast; it differs from 401 by 4e-5 relative
    p_fv = forward.simulate_density(fine, psi, lambda x: grad(x), BETA, initial, [0.1, 0.4], resolution=201)
    for k, p in zip([1, 4], p_fv):
        counts = np.histogram(paths[k, :, 0], bins=bins, range=(0, 1))[0]
        assert chi_square_pvalue(counts, n * bin_probabilities_1d(fine, p, bins)) > 1e-3
    assert chi_square_pvalue(np.histogram(paths[4, :, 0], bins=bins, range=(0, 1))[0],
                             n * bin_probabilities_1d(fine, p_fv[0], bins)) < 1e-12


def test_sde_pure_diffusion_variance_and_wrapping(rng):
    n = 40000
    paths = sample_sde(lambda x: np.zeros_like(x), 4.0, np.zeros((n, 2)), 0.05, 4, rng, [-50, -50], [50, 50], "periodic")
    var = paths[-1].var(axis=0)
    np.testing.assert_allclose(var, 2 * 0.2 / 4.0, rtol=0.03)  # 2 t / beta
    # constant drift across the seam: exact wrap, no noise blow-up
    x = sample_sde(lambda x: np.full_like(x, -1.0), 1e12, np.array([[0.9, 0.5]]), 0.25, 4, rng, [-1, 0], [1, 1],
                   ["periodic", "reflecting"])
    np.testing.assert_allclose(x[:, 0, 0], [0.9, -0.85, -0.6, -0.35, -0.1], atol=1e-5)
    np.testing.assert_allclose(x[:, 0, 1], [0.5, 0.75, 1.0, 0.75, 1.0], atol=1e-5)  # folded at the wall


def test_sde_validation(rng):
    with pytest.raises(FpirlInputError):
        sample_sde(lambda x: x, 1.0, np.zeros((3, 2)), 0.1, 2, rng, [0, 0], [1, 1], "sticky")
    with pytest.raises(FpirlInputError):
        sample_sde(lambda x: x[:, :1], 1.0, np.zeros((3, 2)), 0.1, 2, rng, [0, 0], [1, 1])
    with pytest.raises(FpirlInputError):
        sample_sde(lambda x: x, 1.0, np.zeros((3, 2)), 0.1, 2, rng, [0, 1], [1, 1])
    with pytest.raises(FpirlInputError):
        sample_sde(lambda x: x, 0.0, np.zeros((3, 2)), 0.1, 2, rng, [0, 0], [1, 1])


def test_histogram_density_cloud_in_cell(rng):
    grid = Grid([0, -1], [1, 1], [4, 5], boundary="reflecting")
    x = np.column_stack([rng.random(1000), rng.uniform(-1, 1, 1000)])
    est = histogram_density(grid, x)
    assert grid.integrate(est) == pytest.approx(1.0, abs=1e-13)
    # hats reproduce linear functions: the first moments equal the sample means exactly
    mesh = grid.mesh()
    for i in range(2):
        assert grid.integrate(est * mesh[..., i]) == pytest.approx(x[:, i].mean(), abs=1e-13)
    # a sample on a node deposits all its weight there
    one = histogram_density(grid, [[0.25, 0.2]])
    assert np.sum(one > 1e-12) == 1 and one[1, 3] == pytest.approx(1.0 / (0.25 * 0.4))
    # periodic: a sample just below the upper end splits between the last and the first node
    pgrid = Grid([0], [1], [4])
    est = histogram_density(pgrid, [[0.95]], weights=[2.0])
    np.testing.assert_allclose(est, np.array([0.8, 0, 0, 0.2]) / 0.25)
    with pytest.raises(FpirlInputError):
        histogram_density(grid, np.zeros((5, 3)))
    with pytest.raises(FpirlInputError):
        histogram_density(grid, [[np.nan, 0.0]])
