"""Snapshot-noise posterior of density fits (fpirl.uncertainty._snapshot_noise): calibration at low and high
noise, the noise shape, and the matrix-free path (issue 10).

Data come from the independent spectral solver with independent multiplicative (or additive)
noise per snapshot and node. Budget: the whole file in about 10 s.
"""

import warnings

import numpy as np
import pytest

from fpirl import DensitySnapshots, FpirlInputError, PotentialEstimator
from fpirl.uncertainty._snapshot_noise import snapshot_posterior
from fpirl.problems.synthetic import Problem
from fpirl.uncertainty import estimate_uncertainty

N_SETS = 30
DRAWS = 64


@pytest.fixture(scope="module")
def problem1d():
    p = Problem(1, "periodic", dt=0.01, steps=40)
    return p, p.snapshots(32)


def _noisy(s, level, rng, additive=False):
    eps = level * rng.standard_normal(s.values.shape)
    v = s.values + eps * s.values.max() if additive else s.values * (1 + eps)
    return DensitySnapshots(s.grid, s.times, np.clip(v, 0.0, None))


@pytest.mark.parametrize("level, seed", [(0.02, 0), (0.25, 1)])
def test_interval_calibrated_at_low_and_high_noise(problem1d, level, seed):
    """The row model covered 100% at 2% noise with 3.5x too wide intervals; this model must cover
    80-95.5% at both ends, with a std close to the actual error."""
    problem, base = problem1d
    grid = base.grid
    true = problem.hermite.evaluate_grid(problem.coef, grid.coords)
    rng = np.random.default_rng(seed)
    cover, ratio = [], []
    for k in range(N_SETS):
        s = _noisy(base, level, rng)
        est = PotentialEstimator(hermite_elements=3, beta=problem.beta).fit(s)
        post = snapshot_posterior(est, s, n_draws=DRAWS, rng=k)
        sd = post.potential_std(grid.coords)
        err = est.potential_on_grid() - true
        cover.append(np.mean(np.abs(err) <= post.quantile(0.95) * sd))
        ratio.append(sd.mean() / np.sqrt(np.mean(err**2)))
    # 0.955: over 6 seeds the coverage was 0.88-0.94; with the posterior variance doubled by hand, 0.98-0.99
    assert 0.80 <= np.mean(cover) <= 0.955, np.mean(cover)
    assert 0.6 < np.median(ratio) < 2.0, np.median(ratio)


def test_noise_level_and_shape_are_recovered(problem1d):
    problem, base = problem1d
    rng = np.random.default_rng(4)
    for additive, shape in ((False, "multiplicative"), (True, "additive")):
        s = _noisy(base, 0.05, rng, additive)
        est = PotentialEstimator(hermite_elements=3, beta=problem.beta).fit(s)
        post = snapshot_posterior(est, s, n_draws=32)
        assert post.noise_model == shape
        if not additive:  # sigma is the relative noise level (per unit mass after normalisation)
            assert 0.04 < np.sqrt(post.noise_variance) < 0.06, post.noise_variance


def test_matrix_free_fit_gets_the_same_posterior():
    problem = Problem(2, "periodic", hermite_elements=2, steps=10)
    base = problem.snapshots(12)
    s = _noisy(base, 0.05, np.random.default_rng(0))
    kw = {"hermite_elements": 3, "estimate_beta": True}
    a = PotentialEstimator(solver="assembled", **kw).fit(s)
    m = PotentialEstimator(solver="matrix-free", **kw).fit(s)
    coords = s.grid.coords
    pa, pm = (snapshot_posterior(e, s, n_draws=24, rng=3) for e in (a, m))  # same draws: CG vs Cholesky
    np.testing.assert_allclose(pm.potential_std(coords), pa.potential_std(coords), rtol=1e-4)
    np.testing.assert_allclose(pm.gamma_std(), pa.gamma_std(), rtol=1e-4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the matrix-free fit no longer lacks an uncertainty
        default = estimate_uncertainty(m, "posterior", s, rng=7)
    ref = estimate_uncertainty(a, "posterior", s)
    ratio = default.potential_std(coords) / ref.potential_std(coords)  # different draws and counts
    assert 0.85 < np.median(ratio) < 1.15, np.median(ratio)
    with pytest.warns(RuntimeWarning, match="needs the snapshots"):  # without its data: still none
        assert estimate_uncertainty(m, "posterior", None) is None
    flux = PotentialEstimator(solver="interpolated-flux", **kw).fit(s)  # the 6-D approximation: none
    with pytest.warns(RuntimeWarning, match="interpolated-flux"):
        assert estimate_uncertainty(flux, "posterior", s) is None


def test_bad_input_is_one_line_error(problem1d):
    problem, base = problem1d
    est = PotentialEstimator(hermite_elements=3, beta=problem.beta).fit(base)
    with pytest.raises(FpirlInputError, match="noise must be one of"):
        snapshot_posterior(est, base, noise="poisson")
    with pytest.raises(FpirlInputError, match="grid"):
        snapshot_posterior(est, problem.snapshots(16))
    with pytest.raises(FpirlInputError, match="n_draws"):
        snapshot_posterior(est, base, n_draws=1)


def test_regions_without_data_get_wide_intervals():
    """Density confined to the left of a reflecting box (psi = 6 (x + 0.4)^2, beta = 4): the prior
    term keeps psi's std large where the snapshots carry no mass."""
    from fpirl import Grid
    from fpirl.forward import FiniteVolumeSolver

    solver = FiniteVolumeSolver([-1.0], [1.0], 401, lambda x: 6.0 * (x[..., 0] + 0.4) ** 2, 4.0)
    times = 0.01 * np.arange(31)
    values = solver.solve(lambda x: np.exp(-(x[..., 0] + 0.2) ** 2 / 0.02), times)
    grid = Grid([-1.0], [1.0], 40, boundary="reflecting")
    s = _noisy(DensitySnapshots(grid, times, np.clip(solver.evaluate(values, grid.coords), 0, None)), 0.05,
               np.random.default_rng(0))
    est = PotentialEstimator(hermite_elements=4, beta=4.0, ridge=1e-4).fit(s)
    x = grid.coords[0]
    assert s.values[:, x > 0.45].max() < 1e-4 * s.values.max()
    std = snapshot_posterior(est, s, n_draws=96).potential_std(grid.coords)
    inside = (x > -0.7) & (x < -0.1)
    assert std[-1] > 2 * std[inside].max()
    assert np.all(np.diff(std[x > 0.45]) > 0)  # growing away from the data


def test_additive_noise_lives_on_the_data_support():
    """Noise-free walled data whose mass stays in part of the box (55% of the nodes): additive noise is modelled
    where the snapshots show mass only. Noise of unit shape on the empty nodes, met there only by the ridge, made
    the second-order bias column thousands of times psi's range (median std on the support 3.5e3 for a range of
    6.6); the std on the support stays below psi's range (it holds the level of psi in the empty region, as
    documented) and the additive shape is the support the result reports."""
    from fpirl import Grid
    from fpirl.forward import simulate_density
    from fpirl.mdp.support import snapshot_support
    from fpirl.uncertainty._reduced_noise import noise_shape

    def psi(x):
        return 0.5 * x[..., 0] ** 2 + 3 * x[..., 1] ** 2 + 0.8 * x[..., 0] * x[..., 1]

    def grad(x):
        return np.stack([x[..., 0] + 0.8 * x[..., 1], 6 * x[..., 1] + 0.8 * x[..., 0]], -1)

    g = Grid([-3, -2], [3, 2], (16, 12), boundary="reflecting")
    times = 0.1 * np.arange(11)
    bump = lambda x: np.exp(-((x[..., 0] - 1) ** 2 / 0.5 + (x[..., 1] + 0.5) ** 2 / 0.3))  # noqa: E731
    s = DensitySnapshots(g, times, simulate_density(g, psi, grad, 1.0, bump, times, rtol=1e-8))
    _, support = snapshot_support(s)
    assert 0.3 < support.mean() < 0.8
    shape = noise_shape("additive", s.values)
    np.testing.assert_array_equal(shape, np.broadcast_to(support, s.values.shape).astype(float))
    est = PotentialEstimator(hermite_elements=4, beta=1.0).fit(s)
    post = snapshot_posterior(est, s, noise="additive")
    sd, fitted = post.potential_std(g.coords), est.potential_on_grid()
    assert np.median(sd[support]) < np.ptp(fitted[support])


def test_discretisation_error_is_covered_in_2d_at_low_noise():
    """2-D, 16^2 nodes, 2% noise: the grid error exceeds the noise error, so the noise-only model
    covered 42% (measured); the resolution column (Richardson, fit on every second node) brings the
    coverage of the 90% interval into 80-92% (measured 83%; 94% with the variance doubled by hand)."""
    problem = Problem(2, "periodic", steps=20)
    base = problem.snapshots(16)
    grid = base.grid
    true = problem.hermite.evaluate_grid(problem.coef, grid.coords)
    true -= true.mean()
    rng = np.random.default_rng(0)
    cover = []
    for k in range(N_SETS):
        s = _noisy(base, 0.02, rng)
        est = PotentialEstimator(hermite_elements=3, beta=problem.beta).fit(s)
        post = snapshot_posterior(est, s, n_draws=DRAWS, rng=k)
        assert post.resolution is not None
        err = est.potential_on_grid() - true
        cover.append(np.mean(np.abs(err) <= post.quantile(0.95) * post.potential_std(grid.coords)))
    assert 0.80 <= np.mean(cover) <= 0.92, np.mean(cover)


def test_resolution_column_streamed_equals_in_memory_and_odd_grids_need_memory():
    from fpirl.uncertainty._resolution import resolution_column
    from fpirl.weakform.matfree import StreamingSnapshots

    problem = Problem(2, "periodic", hermite_elements=2, steps=6)
    s = _noisy(problem.snapshots(12), 0.05, np.random.default_rng(1))
    est = PotentialEstimator(hermite_elements=3, estimate_beta=True).fit(s)
    col = resolution_column(est, s, True)
    streamed = resolution_column(est, StreamingSnapshots.from_snapshots(s), True)
    assert col.shape == (est.hermite_.n_coef + 1,) and np.abs(col).max() > 0
    np.testing.assert_allclose(streamed, col, rtol=0, atol=1e-7 * np.abs(col).max())
    odd = _noisy(problem.snapshots(11), 0.05, np.random.default_rng(1))  # resampled in memory, not streamed
    est = PotentialEstimator(hermite_elements=2, beta=2.0).fit(odd)  # 7^2 resampled nodes >= 2 x 16 coefficients
    assert np.abs(resolution_column(est, odd, False)).max() > 0
    assert resolution_column(est, StreamingSnapshots.from_snapshots(odd), False) is None


def test_auto_skips_a_costly_matrix_free_posterior(monkeypatch):
    """``method='auto'`` (the CLI default) computes the posterior unless a matrix-free fit would need
    more than the time budget for it; then a warning and none. 'posterior' always computes it."""
    import fpirl.uncertainty.estimate as unc
    from fpirl.uncertainty._snapshot_noise import matrix_free_posterior_seconds

    problem = Problem(2, "periodic", hermite_elements=2, steps=6)
    s = _noisy(problem.snapshots(10), 0.05, np.random.default_rng(2))
    m = PotentialEstimator(hermite_elements=3, beta=2.0, solver="matrix-free").fit(s)
    a = PotentialEstimator(hermite_elements=3, beta=2.0).fit(s)
    cost = matrix_free_posterior_seconds(m)
    assert cost is not None and cost > 0 and matrix_free_posterior_seconds(a) is None
    assert estimate_uncertainty(m, "auto", s) is not None  # tiny problem: well within the budget
    monkeypatch.setattr(unc, "POSTERIOR_BUDGET_S", 0.0)
    with pytest.warns(RuntimeWarning, match="--uncertainty posterior"):
        assert estimate_uncertainty(m, "auto", s) is None
    assert estimate_uncertainty(a, "auto", s) is not None  # assembled: always
    assert estimate_uncertainty(m, "posterior", s, rng=1) is not None  # asked for: always
