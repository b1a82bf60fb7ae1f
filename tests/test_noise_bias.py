"""Corrected least squares for beta from noisy snapshots (fpirl.weakform.noise_bias, issue 20)."""

import warnings

import numpy as np
import pytest

from fpirl import DensitySnapshots, FpirlInputError, Grid, PotentialEstimator
from fpirl.core.hermite import HermiteSpace
from fpirl.forward import SpectralSolver, simulate_density, von_mises_bump
from fpirl.problems.synthetic import smooth_function
from fpirl.uncertainty import posterior
from fpirl.weakform.assembly import assemble_normal_equations, build_tables
from fpirl.estimators._beta_noise import block_averaged
from fpirl.weakform.noise_bias import NoiseVariance, expected_noise_terms, snapshot_noise_variance


def _raw(grid, times, values):
    """Snapshots without the checks (pure noise is negative): the assembly is a quadratic form."""
    s = object.__new__(DensitySnapshots)
    s.grid, s.times, s.values = grid, np.asarray(times, float), values
    return s


@pytest.mark.parametrize("boundary, scheme", [("periodic", "midpoint"), ("reflecting", "explicit"),
                                              ("reflecting", "midpoint"), ("periodic", "simpson"),
                                              ("reflecting", "simpson")])
def test_expected_noise_terms_match_monte_carlo(rng, boundary, scheme):
    """Oracle: the mean of the normal equations assembled on pure noise draws (independent code path)."""
    g = Grid([-1, -1], [1, 1], (5, 4), boundary=boundary)
    h = HermiteSpace.on_grid(g, (2, 2))
    n_t, dt = 5, 0.1
    v = rng.uniform(0.5, 2.0, (n_t,) + g.shape)  # any variance per snapshot and node
    exp = expected_noise_terms(NoiseVariance(v.sum(0), v[0], v[-1], v[1], v[-2]), dt, build_tables(g, h), scheme)
    draws = {k: [] for k in exp}
    for _ in range(150):
        ne = assemble_normal_equations(_raw(g, dt * np.arange(n_t), np.sqrt(v) * rng.standard_normal(v.shape)), h,
                                       time_scheme=scheme)
        for k in draws:
            draws[k].append(np.atleast_1d(getattr(ne, k)))
    for k, d in draws.items():
        d = np.array(d)
        z = np.abs(d.mean(0) - exp[k]) / (d.std(0) / np.sqrt(len(d)) + 1e-300)
        assert z.max() < 4.5, (k, z.max())
    assert exp["cc"] > 0 and exp["gg"] > 0


def test_variance_estimate_sees_noise_not_the_smooth_signal(rng):
    g = Grid([-1, -1], [1, 1], 16, boundary="reflecting")
    x = g.mesh()
    t = 0.05 * np.arange(12)
    clean = np.stack([np.exp(-np.sum((x - 0.3 * np.cos(tt)) ** 2, -1)) + 0.5 for tt in t])
    noisy = clean * (1 + 0.02 * rng.standard_normal(clean.shape))
    var = snapshot_noise_variance(DensitySnapshots(g, t, noisy))
    truth = 0.02**2 * np.sum(clean**2)
    assert var.total.sum() == pytest.approx(truth, rel=0.1)
    assert snapshot_noise_variance(DensitySnapshots(g, t, clean)).total.sum() < 1e-3 * truth
    assert snapshot_noise_variance(DensitySnapshots(g, t[:3], clean[:3])) is None  # too few snapshots


@pytest.fixture(scope="module")
def spectral_data():
    """1-D periodic Fokker-Planck data from the spectral solver (independent of the weak form), beta = 2."""
    f = smooth_function(1, True)
    solver = SpectralSolver([-1], [1], 64, lambda x: f(x, (1,))[..., None], 2.0)
    times = 0.02 * np.arange(41)
    grid = Grid([-1], [1], 63, boundary="periodic")  # odd: no block averaging, the corrected fit itself
    vals = np.clip(solver.evaluate(solver.solve(von_mises_bump([-1], [1], [0.3], 2.0), times), grid.coords), 0, None)
    return grid, times, vals


def test_noise_free_fit_unchanged(spectral_data):
    grid, times, vals = spectral_data
    s = DensitySnapshots(grid, times, vals)
    a = PotentialEstimator(hermite_elements=4, estimate_beta=True).fit(s)
    b = PotentialEstimator(hermite_elements=4, estimate_beta=True, correct_noise=False).fit(s)
    assert a.beta_ == pytest.approx(b.beta_, rel=3e-3) and a.noise_correction_ is not None
    assert b.noise_correction_ is None
    # beta given: the noise-free data's noise share of c.c is ~0, far below GIVEN_MIN_SHARE: the raw sums
    c, d = (PotentialEstimator(hermite_elements=4, beta=2.0, correct_noise=flag).fit(s) for flag in (True, False))
    np.testing.assert_array_equal(c.coef_, d.coef_)
    assert (c.settings_["noise_corrected"], d.settings_["noise_corrected"]) == (0, 0) and c.noise_correction_ is None


@pytest.mark.parametrize("solver", ["assembled", "matrix-free"])
def test_beta_given_corrects_only_above_the_noise_share(monkeypatch, rng, solver):
    """With beta given the correction is made where E[c.c]_noise / c.c reaches GIVEN_MIN_SHARE (read off the
    raw sums and the full correction's own c.c term), on both paths; with beta estimated always."""
    from fpirl.weakform import noise_bias
    from fpirl.weakform.noise_bias import expected_cc

    g = Grid([-1, -1], [1, 1], 16, boundary="periodic")
    x, y = np.moveaxis(g.mesh(), -1, 0)
    t = 0.05 * np.arange(8)
    vals = np.exp(-(np.cos(np.pi * x) + 0.5 * np.sin(np.pi * y))[None] * (1 - np.exp(-t))[:, None, None])
    s = DensitySnapshots(g, t, vals * (1 + 0.01 * rng.standard_normal(vals.shape)))
    raw = PotentialEstimator(hermite_elements=3, beta=2.0, correct_noise=False, solver="assembled").fit(s)
    monkeypatch.setattr(noise_bias, "GIVEN_MIN_SHARE", 0.0)
    full = PotentialEstimator(hermite_elements=3, beta=2.0, solver="assembled").fit(s)
    var = snapshot_noise_variance(s.normalized())
    tables = build_tables(g, full.hermite_, 3)
    assert expected_cc(var, s.dt, tables) == pytest.approx(full.noise_correction_["cc"], rel=1e-12)
    share = full.noise_correction_["cc"] / raw.normal_equations_.cc
    assert 0 < share < 1
    for factor, corrected in ((1.01, False), (0.99, True)):
        monkeypatch.setattr(noise_bias, "GIVEN_MIN_SHARE", factor * share)
        est = PotentialEstimator(hermite_elements=3, beta=2.0, solver=solver).fit(s)
        assert est.settings_["noise_corrected"] == int(corrected)
        assert (est.noise_correction_ is not None) == corrected
        ref = full if corrected else raw
        np.testing.assert_allclose(est.coef_, ref.coef_, rtol=0, atol=1e-6 * np.abs(ref.coef_).max())
    assert PotentialEstimator(hermite_elements=3, estimate_beta=True).fit(s).noise_correction_ is not None


def test_noise_bias_of_psi_removed_with_beta_given():
    """beta given: the noise of bar p in the potential columns correlates with its image in ``c = K bar p``, which
    biases psi; the corrected sums remove that bias. 1-D finite-volume data with walls (an independent solver),
    3% multiplicative noise, 16 seeds: the mean deviation from the noise-free fit along the raw fits' bias, in
    standard errors."""
    grid = Grid([-2], [2], 96, boundary="reflecting")
    times = 0.02 * np.arange(25)
    clean = simulate_density(grid, lambda x: np.cos(1.3 * x[..., 0]) + 0.3 * x[..., 0],
                             lambda x: (0.3 - 1.3 * np.sin(1.3 * x[..., 0]))[..., None], 2.0,
                             von_mises_bump([-2], [2], [0.6], 1.0), times)
    ref = PotentialEstimator(hermite_elements=4, beta=2.0).fit(DensitySnapshots(grid, times, clean)).potential_on_grid()
    dev = {True: [], False: []}
    for seed in range(16):
        s = DensitySnapshots(grid, times, clean * (1 + 0.03 * np.random.default_rng(seed).standard_normal(clean.shape)))
        for flag in dev:
            dev[flag].append(PotentialEstimator(hermite_elements=4, beta=2.0, correct_noise=flag).fit(s).potential_on_grid()
                             - ref)
    raw, corr = np.array(dev[False]), np.array(dev[True])
    u = raw.mean(0) / np.linalg.norm(raw.mean(0))
    z = {k: float(np.mean(x @ u) / (np.std(x @ u, ddof=1) / 4.0)) for k, x in (("raw", raw), ("corrected", corr))}
    assert z["raw"] > 5 and abs(z["corrected"]) < 3, z
    assert abs(np.mean(corr @ u)) < 0.25 * np.mean(raw @ u)


def test_noise_bias_of_beta_removed(spectral_data):
    """Plain least squares: beta far too high at 0.5% noise; corrected: the seeds' mean near the truth."""
    grid, times, vals = spectral_data
    raw, corr = [], []
    LEVEL = 0.005
    for seed in range(12):
        rng = np.random.default_rng(seed)
        s = DensitySnapshots(grid, times, vals * (1 + LEVEL * rng.standard_normal(vals.shape)))
        corr.append(PotentialEstimator(hermite_elements=4, estimate_beta=True).fit(s).beta_)
        raw.append(PotentialEstimator(hermite_elements=4, estimate_beta=True, correct_noise=False).fit(s).beta_)
    clean = PotentialEstimator(hermite_elements=4, estimate_beta=True).fit(DensitySnapshots(grid, times, vals)).beta_
    se = np.std(corr) / np.sqrt(len(corr))  # the corrected estimator is unbiased, not precise (module doc)
    assert abs(np.mean(corr) - clean) < 3 * se, (np.mean(corr), se, clean)
    assert np.mean(raw) - clean > 10 * max(se, np.std(raw) / np.sqrt(len(raw))), (np.mean(raw), clean)


def test_block_averages_sit_on_the_shifted_grid():
    g = Grid([-1, 0], [1, 2], (32, 14), boundary="periodic")
    v = np.ones((2, 32, 14))
    c = block_averaged(DensitySnapshots(g, [0.0, 0.1], v), (1, 1))
    assert c is None  # a coarse axis below MIN_COARSE_NODES (8)
    g = Grid([-1, 0], [1, 2], (32, 16), boundary="periodic")
    assert block_averaged(DensitySnapshots(g, [0.0, 0.1], np.ones((2, 32, 16))), (1, 6)) is None  # < 1.5 per element
    g = Grid([-1, 0], [1, 2], (32, 32), boundary="periodic")
    v = 1.0 + np.random.default_rng(0).random((2, 32, 32))
    c = block_averaged(DensitySnapshots(g, [0.0, 0.1], v), (2, 2))
    assert c.grid.shape == (16, 16) and c.grid.periodic
    np.testing.assert_allclose(c.grid.coords[0], 0.5 * (g.coords[0][0::2] + g.coords[0][1::2]))
    np.testing.assert_allclose(c.values[1, 3, 5], v[1, 6:8, 10:12].mean())
    np.testing.assert_allclose(c.grid.integrate(c.values), g.integrate(v))  # block means keep the mass
    walls = Grid([-1], [1], 32, boundary="reflecting")  # bounded: every second node, walls kept
    w = 1.0 + np.random.default_rng(1).random((2, 33))
    c = block_averaged(DensitySnapshots(walls, [0.0, 0.1], w), (2,))
    np.testing.assert_array_equal(c.grid.coords[0], walls.coords[0][::2])
    np.testing.assert_array_equal(c.values, w[:, ::2])


def test_odd_element_counts_take_the_linear_density_at_the_coarse_nodes(rng):
    """An odd element count: the linear FE density (np.interp, independent of the code) at ``n // 2``
    elements, walls kept or wrapped; each fine node feeds at most one coarse node (independent noise)."""
    from fpirl.estimators._beta_noise import _restriction

    walls = Grid([-1], [1], 33, boundary="reflecting")
    w = 1.0 + rng.random((2, 34))
    c = block_averaged(DensitySnapshots(walls, [0.0, 0.1], w), (2,))
    assert c.grid.shape == (17,) and c.grid.elements == (16,) and not c.grid.periodic
    np.testing.assert_allclose(c.grid.coords[0], np.linspace(-1, 1, 17))
    for k in range(2):
        np.testing.assert_allclose(c.values[k], np.interp(c.grid.coords[0], walls.coords[0], w[k]), rtol=1e-13)
    ring = Grid([0, -1], [3, 1], (35, 32), boundary="periodic")  # odd along the first axis, even along the second
    v = 1.0 + rng.random((2, 35, 32))
    c = block_averaged(DensitySnapshots(ring, [0.0, 0.1], v), (2, 2))
    assert c.grid.shape == (17, 16)
    np.testing.assert_allclose(c.grid.coords[0], ring.coords[0][0] + np.arange(17) * 3 / 17)
    pairs = 0.5 * (v[:, :, 0::2] + v[:, :, 1::2])  # block means along the even axis
    x0 = ring.coords[0]
    want = np.array([[np.interp(c.grid.coords[0], x0, pairs[k, :, j], period=3.0) for j in range(16)]
                     for k in range(2)]).transpose(0, 2, 1)
    np.testing.assert_allclose(c.values, want, rtol=1e-13)
    for n, periodic in ((33, False), (35, True), (9, False)):
        R, _ = _restriction(n, periodic)
        assert np.all(np.count_nonzero(R, axis=0) <= 1)
        np.testing.assert_allclose(R.sum(axis=1), 1.0)


def test_noise_dominated_beta_from_block_means():
    """2-D spectral-solver data with 5% noise: plain LS gives beta ~ 20x the truth; the default ~ 4."""
    f = smooth_function(2, True)
    solver = SpectralSolver([-1, -1], [1, 1], 48, lambda x: np.stack([f(x, (1, 0)), f(x, (0, 1))], -1), 4.0)
    times = 0.02 * np.arange(31)
    grid = Grid([-1, -1], [1, 1], 32, boundary="periodic")
    clean = np.clip(solver.evaluate(solver.solve(von_mises_bump([-1, -1], [1, 1], [0.4, -0.3], 1.5), times),
                                    grid.coords), 0, None)
    s = DensitySnapshots(grid, times, clean * (1 + 0.05 * np.random.default_rng(1).standard_normal(clean.shape)))
    raw = PotentialEstimator(hermite_elements=6, estimate_beta=True, correct_noise=False).fit(s)
    est = PotentialEstimator(hermite_elements=6, estimate_beta=True).fit(s)
    assert raw.beta_ > 40
    assert est.beta_coarsening_ >= 2 and abs(est.beta_ / 4.0 - 1) < 0.06, (est.beta_, est.beta_coarsening_)
    # psi: the fit with that beta from the raw sums (with block means psi was better uncorrected, identify.py)
    given = PotentialEstimator(hermite_elements=6, beta=est.beta_, correct_noise=False).fit(s)
    np.testing.assert_allclose(est.coef_, given.coef_, rtol=1e-10, atol=1e-12)
    forced = PotentialEstimator(hermite_elements=6, estimate_beta=True, beta_block=est.beta_coarsening_).fit(s)
    assert forced.beta_ == pytest.approx(est.beta_, rel=1e-12) and forced.beta_coarsening_ == est.beta_coarsening_
    with pytest.raises(FpirlInputError, match="beta_block must be a power of two"):
        PotentialEstimator(hermite_elements=6, estimate_beta=True, beta_block=3).fit(s)
    post = posterior(est, s, rng=1)  # the removed bias is no longer in gamma's interval; psi keeps its column
    lo, hi = post.beta_interval()
    assert lo <= 4.0 <= hi < 6.0, (lo, hi)
    assert post.bias[-1] == 0.0 and np.any(post.bias[:-1] != 0.0)


def test_correction_that_moves_nothing_keeps_the_beta_interval(spectral_data):
    """Noise-free data: the correction moves 1/beta by ~nothing, so the posterior keeps the snapshot
    model's bias column for gamma and the beta interval equals the uncorrected fit's (the oracle); the
    fraction rule itself: all of a bias removed -> 0, none -> 1, block-averaged beta -> 0."""
    from fpirl.uncertainty import posterior
    from fpirl.uncertainty._basis import remaining_bias_fraction

    grid, times, vals = spectral_data
    s = DensitySnapshots(grid, times, vals)
    a = PotentialEstimator(hermite_elements=4, estimate_beta=True).fit(s)
    b = PotentialEstimator(hermite_elements=4, estimate_beta=True, correct_noise=False).fit(s)
    assert abs(a.noise_correction_["gamma_shift"]) < 1e-3 / a.beta_
    lo_a, hi_a = posterior(a, s).beta_interval()
    lo_b, hi_b = posterior(b, s).beta_interval()
    assert lo_a == pytest.approx(lo_b, rel=5e-3) and hi_a == pytest.approx(hi_b, rel=5e-3)
    assert remaining_bias_fraction(0.2, -0.2) == 0.0 and remaining_bias_fraction(0.2, 0.0) == 1.0
    assert remaining_bias_fraction(-0.2, 0.05) == pytest.approx(0.75)
    assert remaining_bias_fraction(0.2, 0.0, coarsening=2) == 0.0 and remaining_bias_fraction(0.2, None) == 0.0


def test_beta_left_open_tries_block_means_before_plain_least_squares(monkeypatch):
    """Where the correction leaves 1/beta undetermined (forced here for the fine fit only), beta comes from
    block means, as with the block forced; on a grid that cannot be coarsened the fit warns and falls back
    to plain least squares (the uncorrected fit's beta)."""
    import warnings

    from fpirl.estimators import identify

    f = smooth_function(2, True)
    solver = SpectralSolver([-1, -1], [1, 1], 32, lambda x: np.stack([f(x, (1, 0)), f(x, (0, 1))], -1), 4.0)
    times = 0.02 * np.arange(16)
    real = identify.beta_left_open
    for n, can_coarsen in ((32, True), (14, False)):
        grid = Grid([-1, -1], [1, 1], n, boundary="periodic")
        clean = np.clip(solver.evaluate(solver.solve(von_mises_bump([-1, -1], [1, 1], [0.4, -0.3], 1.5), times),
                                        grid.coords), 0, None)
        s = DensitySnapshots(grid, times, clean * (1 + 0.02 * np.random.default_rng(3).standard_normal(clean.shape)))
        calls = []
        monkeypatch.setattr(identify, "beta_left_open", lambda *a: not calls.append(1) and len(calls) == 1 or real(*a))
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            est = PotentialEstimator(hermite_elements=4, estimate_beta=True).fit(s)
        monkeypatch.setattr(identify, "beta_left_open", real)
        fallback = [w for w in seen if "undetermined once its bias is removed" in str(w.message)]
        if can_coarsen:
            assert est.beta_coarsening_ >= 2 and not fallback
            forced = PotentialEstimator(hermite_elements=4, estimate_beta=True, beta_block=est.beta_coarsening_).fit(s)
            assert est.beta_ == pytest.approx(forced.beta_, rel=1e-12)
        else:
            assert est.beta_coarsening_ == 1 and len(fallback) == 1
            plain = PotentialEstimator(hermite_elements=4, estimate_beta=True, correct_noise=False).fit(s)
            assert est.beta_ == pytest.approx(plain.beta_, rel=1e-10)


def _coupled(boundary, noise=0.05, seed=1):
    """The CLI sweep's coupled potential (beta = 4) on 24 elements per axis, 25 snapshots from the
    independent forward solver (finite volumes with walls, spectral when periodic), times ``1 + noise eps``."""
    from fpirl.forward import simulate_density

    amp, ph = np.array([0.6, 0.35]), np.array([0.3, -0.7])

    def psi(x):
        return (amp * np.cos(np.pi * x + ph)).sum(-1) + 0.3 * np.prod(np.sin(np.pi * x), axis=-1)

    def grad(x):
        s, c = np.sin(np.pi * x), np.cos(np.pi * x)
        coupling = 0.3 * np.pi * np.stack([c[..., 0] * s[..., 1], s[..., 0] * c[..., 1]], -1)
        return -amp * np.pi * np.sin(np.pi * x + ph) + coupling

    g = Grid([-1.0, -1.0], [1.0, 1.0], 24, boundary=boundary)
    times = 0.02 * np.arange(25)
    v = np.asarray(simulate_density(g, psi, grad, 4.0, von_mises_bump(g.lower, g.upper, [0.3, -0.4], 1.0), times,
                                    rtol=1e-8))  # (walled: the data to 1e-8, half the factorisations)
    return DensitySnapshots(g, times, np.clip(v * (1 + noise * np.random.default_rng(seed).standard_normal(v.shape)),
                                              0, None))


def test_small_noisy_grid_with_walls_is_coarsened(monkeypatch):
    """2-D finite-volume data with walls, 24 elements per axis, 5% noise (the CLI sweep's case): beta from the
    grid of 12 elements (within 5% at 6 Hermite elements); with the former floor of 16 coarse elements the
    grid stayed fine and beta came out 80% high."""
    from fpirl.estimators import _beta_noise

    s = _coupled("reflecting")
    est = PotentialEstimator(hermite_elements=6, estimate_beta=True).fit(s)
    assert est.beta_coarsening_ == 2 and abs(est.beta_ / 4.0 - 1) < 0.05, (est.beta_, est.beta_coarsening_)
    monkeypatch.setattr(_beta_noise, "MIN_COARSE_NODES", 16)
    old = PotentialEstimator(hermite_elements=6, estimate_beta=True).fit(s)
    assert old.beta_coarsening_ == 1 and old.beta_ / 4.0 - 1 > 0.5, old.beta_


def test_fine_hermite_space_is_coarsened_to_one_and_a_half_elements_per_element(monkeypatch):
    """8 Hermite elements on the sweep's 24^2 periodic data at 5% noise: the 12-element grid (1.5 per Hermite
    element) gives beta within 3%; with two per element required, the grid stayed fine and beta was 40% off."""
    from fpirl.estimators import _beta_noise

    s = _coupled("periodic")
    est = PotentialEstimator(hermite_elements=8, estimate_beta=True).fit(s)
    assert est.beta_coarsening_ == 2 and abs(est.beta_ / 4.0 - 1) < 0.03, (est.beta_, est.beta_coarsening_)
    monkeypatch.setattr(_beta_noise, "COARSE_PER_ELEMENT", 2)
    old = PotentialEstimator(hermite_elements=8, estimate_beta=True).fit(s)
    assert old.beta_coarsening_ == 1 and abs(old.beta_ / 4.0 - 1) > 0.4, old.beta_


def test_block_means_fit_does_not_warn_about_the_users_grid():
    """The block-means grid may have fewer nodes than Hermite coefficients (1.5 coarse elements per Hermite
    element); the user's grid has enough, so no 'the FE grid has ... nodes' warning (it named the internal
    grid: 160 nodes for a 31 x 19-node grid, 6 elements)."""
    import warnings

    f = smooth_function(2, True)
    solver = SpectralSolver([-1, -1], [1, 1], 32, lambda x: np.stack([f(x, (1, 0)), f(x, (0, 1))], -1), 4.0)
    times = 0.02 * np.arange(8)
    grid = Grid([-1, -1], [1, 1], (30, 18), boundary="reflecting")
    values = np.clip(solver.evaluate(solver.solve(von_mises_bump([-1, -1], [1, 1], [0.4, -0.3], 1.5), times),
                                     grid.coords), 0, None)
    s = DensitySnapshots(grid, times, values)
    assert block_averaged(s, (6, 6)).grid.size < HermiteSpace.on_grid(grid, 6).n_coef <= grid.size
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        est = PotentialEstimator(hermite_elements=6, estimate_beta=True, beta_block=2).fit(s)
    assert est.beta_coarsening_ == 2
    assert not [w for w in seen if "the FE grid has" in str(w.message)], [str(w.message) for w in seen]


def test_correction_too_large_for_memory_leaves_the_raw_sums_with_a_warning(monkeypatch, rng):
    from fpirl.weakform import noise_bias
    from fpirl.weakform.matfree import band_bytes

    g = Grid([-1, -1], [1, 1], 12, boundary="periodic")
    x, y = np.moveaxis(g.mesh(), -1, 0)
    t = 0.05 * np.arange(8)
    vals = np.exp(-(np.cos(np.pi * x) + 0.5 * np.sin(np.pi * y))[None] * (1 - np.exp(-t))[:, None, None])
    s = DensitySnapshots(g, t, vals * (1 + 0.02 * rng.standard_normal(vals.shape)))
    raw = PotentialEstimator(hermite_elements=3, beta=2.0, correct_noise=False).fit(s)
    monkeypatch.setattr(noise_bias, "CORRECTION_MEMORY_LIMIT", band_bytes(g) - 1)
    with pytest.warns(RuntimeWarning, match="no snapshot-noise correction: on this 2-D grid it would need"):
        big = PotentialEstimator(hermite_elements=3, beta=2.0).fit(s)
    np.testing.assert_array_equal(big.coef_, raw.coef_)
    assert big.noise_correction_ is None and big.settings_["noise_corrected"] == 0
    # noise-free snapshots with beta given: the noise is negligible, so nothing is left out and nothing is said
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clean = PotentialEstimator(hermite_elements=3, beta=2.0).fit(DensitySnapshots(g, t, vals))
    assert clean.settings_["noise_corrected"] == 0
