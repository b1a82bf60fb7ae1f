"""The Hermite basis error in the posterior (fpirl.uncertainty._basis, issue 20).

Data from the independent spectral solver (fpirl.forward.SpectralSolver, Fourier collocation,
not the weak form), psi a trigonometric sum outside every Hermite space, 5% multiplicative
snapshot noise: the 90% band must cover the true psi at 80-98% of the nodes both with a coarse
basis (4 elements, where the noise-only band covers about 73%) and at fine resolution; beta
corrected for the basis error must be within 3% of the truth (the raw fit is 8% high with 4
elements) with an interval that covers it.
"""

import warnings

import numpy as np
import pytest

from fpirl import DensitySnapshots, Grid, PotentialEstimator
from fpirl.forward import SpectralSolver, von_mises_bump
from fpirl.problems.synthetic import smooth_function
from fpirl.uncertainty import posterior

BETA = 4.0


@pytest.fixture(scope="module")
def spectral2d():
    f = smooth_function(2, True)
    times = 0.02 * np.arange(21)
    solver = SpectralSolver([-1, -1], [1, 1], 48, lambda x: np.stack([f(x, (1, 0)), f(x, (0, 1))], -1), BETA)
    vals = solver.solve(von_mises_bump([-1, -1], [1, 1], [0.4, -0.3], 1.5), times)
    grid = Grid([-1, -1], [1, 1], 24, boundary="periodic")
    clean = np.clip(solver.evaluate(vals, grid.coords), 0, None)
    true = f(grid.mesh(), (0, 0))
    return grid, times, clean, true - grid.integrate(true) / grid.volume  # zero mean, like the fit


@pytest.mark.parametrize("n_h, seeds", [(4, 4), (8, 2)])
def test_band_covers_the_basis_error(spectral2d, n_h, seeds):
    grid, times, clean, true = spectral2d
    with_col, without = [], []
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        s = DensitySnapshots(grid, times, clean * (1 + 0.05 * rng.standard_normal(clean.shape)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = PotentialEstimator(hermite_elements=n_h, beta=BETA).fit(s)
            post = posterior(est, s, rng=seed)
        assert post.basis is not None
        q = post.quantile(0.95)
        err = np.abs(est.potential_on_grid() - true)
        with_col.append(np.mean(err <= q * post.potential_std(grid.coords)))
        post.factor = post.factor[:, :-1]  # the same posterior without the basis column
        without.append(np.mean(err <= q * post.potential_std(grid.coords)))
    assert 0.80 <= np.mean(with_col) <= 0.98, (with_col, without)
    if n_h == 4:  # coarse basis: the noise-only band misses the basis error
        assert np.mean(without) < 0.78 and np.mean(with_col) > np.mean(without) + 0.1


@pytest.mark.parametrize("n_h", [4, 6])
def test_beta_corrected_for_the_basis_error(spectral2d, n_h):
    grid, times, clean, _ = spectral2d
    s = DensitySnapshots(grid, times, clean)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = PotentialEstimator(hermite_elements=n_h, estimate_beta=True).fit(s)
        post = posterior(est, s)
    lo, hi = post.beta_interval()
    assert lo <= BETA <= hi
    assert abs(post.beta_corrected / BETA - 1) < 0.03
    if n_h == 4:
        assert est.beta_ / BETA - 1 > 0.05  # the raw fit carries the basis error
