"""The resolution column's coarse grids (fpirl.uncertainty._resolution): the grid rule, the spline
resampling of odd grids and the Richardson estimate of the discretisation error against a much finer fit."""

import warnings

import numpy as np
import pytest

from fpirl import DensitySnapshots, Grid, PotentialEstimator
from fpirl.forward import SpectralSolver, von_mises_bump
from fpirl.uncertainty._resolution import (RESAMPLE_RATIO, coarse_grid, resample, resolution_column,
                                           richardson_factor)


def test_coarse_grid_rule():
    even = Grid([-1, -1], [1, 1], 16, boundary="periodic")
    half, sub = coarse_grid(even, 64)
    assert sub and half.elements == (8, 8) and richardson_factor(even, half) == pytest.approx(1 / 3)
    odd = Grid([-1, -1], [1, 1], 15, boundary="periodic")
    coarse, sub = coarse_grid(odd, 50)
    assert not sub and coarse.elements == (10, 10)
    assert richardson_factor(odd, coarse) == pytest.approx(1 / (1.5**2 - 1))
    # fewer than twice as many resampled nodes as coefficients: refined instead (with walls too)
    fine, sub = coarse_grid(odd, 51)
    assert not sub and fine.elements == (22, 22) and richardson_factor(odd, fine) == pytest.approx(1 / ((15 / 22) ** 2 - 1))
    fine, sub = coarse_grid(Grid([-1, -1], [1, 1], 11, boundary="reflecting"), 51)
    assert not sub and fine.elements == (16, 16) and not fine.periodic
    assert coarse_grid(Grid([-1] * 3, [1] * 3, 44, boundary="periodic"), 20000) is None  # 66^3 > REFINE_MAX_NODES
    # 4-D, halving leaves too few nodes (6^4 < 1500): resampled at RESAMPLE_RATIO instead
    coarse, sub = coarse_grid(Grid([-1] * 4, [1] * 4, 12, boundary="periodic"), 1500)
    assert not sub and coarse.elements == (round(12 / RESAMPLE_RATIO),) * 4
    assert coarse_grid(Grid([-1], [1], 3), 1) is None


@pytest.mark.parametrize("boundary", ["periodic", "reflecting"])
def test_resampling_is_fourth_order(boundary):
    """Cubic splines carry smooth nodal values to the coarse nodes with an error falling like h^4
    (observed order from 15 to 45 elements per axis >= 3.5)."""
    def f(x, y):
        return np.exp(np.sin(np.pi * x) + 0.5 * np.cos(np.pi * y))

    errors = []
    for n in (15, 45):
        grid = Grid([-1, -1], [1, 1], n, boundary=boundary)
        X, Y = np.meshgrid(*grid.coords, indexing="ij")
        s = DensitySnapshots(grid, [0.0, 0.1], np.stack([f(X, Y), f(X, Y)]))
        coarse = grid.with_elements((10, 10))
        out = resample(s, coarse)
        Xc, Yc = np.meshgrid(*coarse.coords, indexing="ij")
        errors.append(np.abs(out.values[0] - f(Xc, Yc)).max())
    assert np.log(errors[0] / errors[1]) / np.log(3) >= 3.5, errors


def _column_against_a_fine_fit(n: int, hermite_elements: int, other=None):
    """``(column, truth)`` on a 40^2 grid: the resolution column of the fit on ``n^2`` periodic nodes and
    ``x - x_h``, ``x`` the same fit on 96^2 nodes; noise-free spectral-solver data (a coupled potential,
    beta = 4, 16 snapshots). ``other``: the elements the column's second grid must have."""
    beta, times = 4.0, 0.02 * np.arange(16)

    def grad(x):
        return np.stack([-0.6 * np.pi * np.sin(np.pi * x[..., 0] + 0.3) + 0.3 * np.pi * np.cos(np.pi * (x[..., 0] + x[..., 1])),
                         -0.4 * np.pi * np.sin(np.pi * x[..., 1] - 0.7) + 0.3 * np.pi * np.cos(np.pi * (x[..., 0] + x[..., 1]))], -1)

    solver = SpectralSolver([-1, -1], [1, 1], 64, grad, beta)
    vals = solver.solve(von_mises_bump([-1, -1], [1, 1], [0.4, -0.3], 1.5), times)
    fits = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for m in (n, 96):
            grid = Grid([-1, -1], [1, 1], m, boundary="periodic")
            s = DensitySnapshots(grid, times, np.clip(solver.evaluate(vals, grid.coords), 0, None))
            fits[m] = (PotentialEstimator(hermite_elements=hermite_elements, beta=beta).fit(s), s)
        est, s = fits[n]
        if other is not None:
            assert coarse_grid(s.grid, est.hermite_.n_coef)[0].elements == other
        col = resolution_column(est, s, False)
    truth = fits[96][0].coef_.ravel() - est.coef_.ravel()
    grid = Grid([-1, -1], [1, 1], 40, boundary="periodic")
    c, t = (est.hermite_.evaluate_grid(v, grid.coords) for v in (col, truth))
    return c - c.mean(), t - t.mean()


def test_richardson_column_on_an_odd_grid_predicts_the_error_of_the_fit():
    """Noise-free spectral-solver data on 31^2 periodic nodes (odd: resampled to 21^2): the column
    ``k (x_h - x_H)`` approximates ``x - x_h``, ``x`` the same fit on 96^2 nodes, to within 35% in norm
    (observed 18%; subsampling the even 30^2 and 40^2 grids: 37% and 28%), pointing the same way."""
    c, t = _column_against_a_fine_fit(31, 3, other=(21, 21))
    assert np.linalg.norm(c - t) <= 0.35 * np.linalg.norm(t), (np.linalg.norm(c - t) / np.linalg.norm(t))
    assert c.ravel() @ t.ravel() > 0.9 * np.linalg.norm(c) * np.linalg.norm(t)


def test_refined_column_on_a_coarse_periodic_grid_predicts_the_error_of_the_fit():
    """12^2 periodic nodes for 64 coefficients (too coarse to coarsen): the data resampled onto 18^2 and
    refitted; the column ``k (x_h - x_f)``, ``k = 1 / ((12/18)^2 - 1)``, approximates ``x - x_h``, ``x`` the
    same fit on 96^2 nodes (spectral solver), to within 40% in norm (observed 26%), pointing the same way."""
    c, t = _column_against_a_fine_fit(12, 4, other=(18, 18))
    assert np.linalg.norm(c - t) <= 0.4 * np.linalg.norm(t), (np.linalg.norm(c - t) / np.linalg.norm(t))
    assert c.ravel() @ t.ravel() > 0.9 * np.linalg.norm(c) * np.linalg.norm(t)



def test_refined_column_brings_the_band_with_walls_into_range():
    """12^2 elements with walls for 100 coefficients (too coarse to coarsen): the grid is refined to 18^2 and
    the resolution column enters the posterior. The 90% band of the default posterior then covers the true
    psi at 80-98% of the nodes (observed 0.92); without the column it covers 0.41 (finite-volume data of a
    coupled potential, 2% noise)."""
    from fpirl.forward import simulate_density
    from fpirl.uncertainty import posterior

    beta, times = 4.0, 0.02 * np.arange(25)
    amp, ph = np.array([0.3, 0.5]), np.array([0.3, -0.7])

    def psi(x):
        return -(amp * np.cos(np.pi * x + ph)).sum(-1) + 0.5 * np.sin(np.pi * x[..., 0]) * np.sin(np.pi * x[..., 1])

    def grad(x):
        s, c = np.sin(np.pi * x), np.cos(np.pi * x)
        return amp * np.pi * np.sin(np.pi * x + ph) + 0.5 * np.pi * np.stack([c[..., 0] * s[..., 1], s[..., 0] * c[..., 1]], -1)

    grid = Grid([-1, -1], [1, 1], 12, boundary="reflecting")
    v = simulate_density(grid, psi, grad, beta, von_mises_bump(grid.lower, grid.upper, [0.3, -0.4], 1.0), times,
                         resolution=49)
    v = np.clip(v * (1 + 0.02 * np.random.default_rng(3).standard_normal(v.shape)), 0, None)
    s = DensitySnapshots(grid, times, v)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = PotentialEstimator(hermite_elements=4, beta=beta).fit(s)
        post = posterior(est, s)
    assert post.resolution is not None and coarse_grid(grid, est.hermite_.n_coef)[0].elements == (18, 18)
    X = np.stack(np.meshgrid(*grid.coords, indexing="ij"), -1)
    h = est.hermite_
    err = h.evaluate_grid(est.coef_, grid.coords) - psi(X)
    err -= err.mean()
    std = post.potential_std(grid.coords)
    r = h.evaluate_grid(post.resolution[:h.n_coef], grid.coords)
    without = np.sqrt(np.clip(std**2 - r**2, 0, None))
    covered = np.mean(np.abs(err) <= 1.645 * std)
    assert 0.8 <= covered <= 0.98, covered
    assert np.mean(np.abs(err) <= 1.645 * without) < 0.6


def test_beta_from_block_means_is_given_to_the_coarse_fit(monkeypatch):
    """30 x 18 walled elements, 6 Hermite elements, 2% noise: beta comes from block means, and the grid is too
    coarse to coarsen (refined to 45 x 27). The refined fit estimated its own beta from spline-interpolated noise
    (7.3 for a true 2) and beta's interval was [0.65, inf]; it now takes the fit's beta: the column has no 1/beta
    entry and the interval is finite and covers the truth (measured [1.747, 2.316])."""
    from _simdensity import walled_rectangle

    import fpirl.uncertainty._resolution as resolution
    from fpirl.uncertainty import posterior

    seen, original = [], resolution.coarse_grid_fit
    monkeypatch.setattr(resolution, "coarse_grid_fit", lambda *a: seen.append(original(*a)) or seen[-1])
    s, _ = walled_rectangle(noise=0.02)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = PotentialEstimator(hermite_elements=6, estimate_beta=True).fit(s)
        assert est.beta_coarsening_ > 1
        post = posterior(est, s, rng=0)
    fitted, data, k = seen[0]  # the posterior's coarse fit
    assert k < 0 and data.grid.elements == (45, 27)
    assert not fitted.estimate_beta and fitted.beta_ == est.beta_
    assert post.resolution is not None and post.resolution[-1] == 0.0
    lo, hi = post.beta_interval()
    assert np.isfinite(hi) and lo <= 2.0 <= hi and hi - lo < 0.4 * est.beta_, (lo, hi)


def test_confirmed_noise_is_the_share_of_the_noise_level_the_time_differences_see(rng):
    """Smooth snapshots times ``1 + sigma z``: the difference-based variance confirms ``sigma^2`` (ratio near 1,
    capped at 1) and a quarter of ``4 sigma^2``; additive noise of std ``sigma`` the same; noise-free data
    nearly nothing."""
    from fpirl.uncertainty._resolution import confirmed_noise

    grid = Grid([-1, -1], [1, 1], 24)
    t = 0.05 * np.arange(30)
    x = grid.mesh()
    smooth = np.exp(-np.sum((x[None] - 0.3 * np.stack([np.cos(t), np.sin(t)], -1)[:, None, None]) ** 2, -1) / 0.3)
    sigma = 0.03
    mult = DensitySnapshots(grid, t, smooth * (1 + sigma * rng.standard_normal(smooth.shape)))
    assert confirmed_noise(mult, "multiplicative", sigma**2) == pytest.approx(1.0, abs=0.1)
    assert confirmed_noise(mult, "multiplicative", 4 * sigma**2) == pytest.approx(0.25, rel=0.1)
    add = DensitySnapshots(grid, t, 0.3 + smooth + sigma * rng.standard_normal(smooth.shape))
    assert confirmed_noise(add, "additive", 4 * sigma**2) == pytest.approx(0.25, rel=0.1)
    assert confirmed_noise(DensitySnapshots(grid, t, smooth), "multiplicative", sigma**2) < 0.01


def test_misfit_taken_for_noise_does_not_remove_the_resolution_column():
    """Noise-free 30 x 18 walled elements, 6 Hermite elements, beta estimated (+2.7%): the posterior's noise level
    is the fit's misfit, and the two fits' errors-in-variables biases computed from it used to shrink the resolution
    column to zero, leaving an interval [2.003, 2.105] that missed beta = 2. The time differences confirm 6% of
    that level; scaled by it, the column stays (its 1/beta entry 0.0117 against the fit's error 0.0129) and the
    interval covers."""
    from _simdensity import walled_rectangle

    from fpirl.uncertainty import posterior

    s, _ = walled_rectangle()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = PotentialEstimator(hermite_elements=6, estimate_beta=True).fit(s)
        post = posterior(est, s, rng=0)
    assert abs(post.resolution[-1]) > 0.5 * abs(1 / est.beta_ - 0.5)
    lo, hi = post.beta_interval()
    assert lo <= 2.0 <= hi, (lo, hi)


def test_raw_state_is_the_fit_from_the_raw_sums(rng):
    """beta given, psi from corrected sums: the column's fine state is the fit from the raw sums (one solve with
    the fit's factor, or without it), equal to a refit with ``correct_noise=False``; the coarse grid's fit too."""
    from fpirl.uncertainty._resolution import coarse_grid_fit, raw_state, raw_sums

    g = Grid([-1, -1], [1, 1], (16, 12), boundary="reflecting")
    x, y = np.moveaxis(g.mesh(), -1, 0)
    t = 0.05 * np.arange(9)
    vals = np.exp(-(np.cos(2 * x) + 0.5 * y**2)[None] * (1 - np.exp(-t))[:, None, None] - (x[None] - 0.3) ** 2)
    s = DensitySnapshots(g, t, vals * (1 + 0.03 * rng.standard_normal(vals.shape)))
    fit = PotentialEstimator(hermite_elements=3, beta=2.0).fit(s)
    raw = PotentialEstimator(hermite_elements=3, beta=2.0, correct_noise=False).fit(s)
    assert raw_sums(fit) and not raw_sums(raw) and fit.settings_["noise_corrected"] == 1
    assert np.abs(fit.coef_ - raw.coef_).max() > 1e-3 * np.abs(raw.coef_).max()  # the correction moved psi
    for factor in (fit._factor, (None, None)):
        fit._factor = factor
        np.testing.assert_allclose(raw_state(fit)[:-1], raw.coef_.ravel(), rtol=0, atol=1e-9 * np.abs(raw.coef_).max())
    coarse, _, _ = coarse_grid_fit(fit, s)
    assert coarse.settings_["noise_corrected"] == 0
