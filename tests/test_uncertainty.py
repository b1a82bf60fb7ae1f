"""Posterior of the potential and beta (fpirl.uncertainty): exactness, calibration, beta's basis error.

Data always come from independent generators (the forward solvers, the Euler-Maruyama sampler).
Budget: the whole file in about 10 s.
"""

import numpy as np
import pytest
import scipy.linalg

from _simtracks import table_from_paths
from fpirl import DensitySnapshots, FpirlInputError, Grid, PotentialEstimator
from fpirl.estimators import IncrementsEstimator
from fpirl.forward import SpectralSolver, von_mises_bump
from fpirl.core.hermite import HermiteSpace
from fpirl.io import read_result, result_dataset, write_result
from fpirl.problems.synthetic import Problem, smooth_function
from fpirl.forward.markov import sample_sde
from fpirl.uncertainty import (credible_bands, density_posterior, increments_posterior, posterior,
                               uncertainty_extra)
from fpirl.workflows import recover_mdp_from_fit

N_SETS = 30
#: Upper end of the 90% intervals' coverage window. Over 12 seeds of the two calibration tests the
#: coverage was 0.83-0.94; with the posterior variance doubled by hand it was 0.98-1.0 (a sqrt(2)
#: wider interval covers ~98%), so this bound fails a doubled variance.
COVER_MAX = 0.955


def _cos_space(elements, periodic=True):
    h = HermiteSpace([-1.0], [1.0], elements, periodic)

    def f(x, a):
        return np.cos(np.pi * x[..., 0] + 0.3) if a == (0,) else -np.pi * np.sin(np.pi * x[..., 0] + 0.3)

    return h, h.remove_mean(h.interpolate(f))


@pytest.fixture(scope="module")
def problem1d():
    return Problem(1, "periodic", dt=0.01, steps=40)


def _noisy(snapshots, level, rng):
    v = snapshots.values * (1 + level * rng.standard_normal(snapshots.values.shape))
    return DensitySnapshots(snapshots.grid, snapshots.times, np.clip(v, 0.0, None))


# --------------------------------------------------------------------------------------------
# exactness of the closed form
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("estimate_beta", [False, True])
def test_posterior_equals_constrained_gaussian(problem1d, rng, estimate_beta):
    """Sigma = sigma^2 (K^-1 - c0 c0^T / mu) is the Gaussian posterior restricted to m.theta = 0."""
    s = _noisy(problem1d.snapshots(32), 0.05, rng)
    est = PotentialEstimator(hermite_elements=3, beta=None if estimate_beta else problem1d.beta,
                             estimate_beta=estimate_beta, ridge=1e-6).fit(s)
    post = density_posterior(est)
    ne, h = est.normal_equations_, est.hermite_
    n = h.n_coef
    H = ne.xtx + est.penalty_ * h.h1_seminorm_matrix()
    if estimate_beta:
        H = np.block([[H, ne.xtc[:, None]], [ne.xtc[None, :], np.array([[ne.cc]])]])
    m = np.concatenate([h.mean_functional().ravel(), [0.0] * (H.shape[0] - n)])
    Z = scipy.linalg.null_space(m[None, :])  # basis of the constraint m . theta = 0
    cov = post.noise_variance * Z @ np.linalg.inv(Z.T @ H @ Z) @ Z.T
    full = post.factor @ post.factor.T
    k = H.shape[0]
    np.testing.assert_allclose(full[:k, :k], cov, rtol=1e-7, atol=1e-10 * np.abs(cov).max())
    # potential_std by sum factorisation (forced into several batches) = the dense diag(B Sigma B^T)
    B = h.axes[0].matrix(s.grid.coords[0])
    dense = np.sqrt(np.einsum("ij,jk,ik->i", B, post.coef_cov(), B))
    import fpirl.uncertainty._posterior as unc

    old, unc._BATCH_BYTES = unc._BATCH_BYTES, 8 * 32 * 5
    try:
        np.testing.assert_allclose(post.potential_std(s.grid.coords), dense, rtol=1e-10)
    finally:
        unc._BATCH_BYTES = old


# --------------------------------------------------------------------------------------------
# calibration over many seeded data sets
# --------------------------------------------------------------------------------------------
def test_density_interval_calibrated_under_multiplicative_noise(problem1d):
    base = problem1d.snapshots(32)
    grid = base.grid
    true = problem1d.hermite.evaluate_grid(problem1d.coef, grid.coords)
    rng = np.random.default_rng(0)
    cover = []
    for _ in range(N_SETS):
        est = PotentialEstimator(hermite_elements=3, beta=problem1d.beta).fit(_noisy(base, 0.25, rng))
        post = density_posterior(est)
        half = post.quantile(0.95) * post.potential_std(grid.coords)
        cover.append(np.mean(np.abs(est.potential_on_grid() - true) <= half))
    assert 0.80 <= np.mean(cover) <= COVER_MAX, np.mean(cover)


def test_density_interval_is_conservative_at_low_noise(problem1d):
    """Independent snapshot noise telescopes in the time differences: the row model over-covers
    (documented in docs/method.md); it must never under-cover."""
    base = problem1d.snapshots(32)
    true = problem1d.hermite.evaluate_grid(problem1d.coef, base.grid.coords)
    rng = np.random.default_rng(1)
    cover = []
    for _ in range(10):
        est = PotentialEstimator(hermite_elements=3, beta=problem1d.beta).fit(_noisy(base, 0.02, rng))
        post = density_posterior(est)
        cover.append(np.mean(np.abs(est.potential_on_grid() - true) <= post.quantile(0.95) * post.potential_std(base.grid.coords)))
    assert np.mean(cover) >= 0.9


def _tracks(h, coef, beta, dt, n_tracks, steps, rng, x0, boundary="periodic"):
    paths = sample_sde(lambda x: h.gradient(coef, x), beta, x0, dt, steps, rng, [-1.0], [1.0], boundary)
    return table_from_paths(paths, dt, ["x"], ["state"], [-1.0], [1.0], boundary)


def test_increments_interval_calibrated():
    h, coef = _cos_space(4)
    beta, dt = 2.0, 0.01
    rng = np.random.default_rng(1)
    cover, beta_cover = [], []
    for _ in range(N_SETS):
        tracks = _tracks(h, coef, beta, dt, 40, 50, rng, rng.uniform(-1, 1, (40, 1)))
        est = IncrementsEstimator(hermite_elements=4, ridge=1e-6).fit(tracks)
        post = increments_posterior(est)
        g = est.grid_
        half = post.quantile(0.95) * post.potential_std(g.coords)
        cover.append(np.mean(np.abs(est.potential_on_grid() - h.evaluate_grid(coef, g.coords)) <= half))
        lo, hi = post.beta_interval()
        beta_cover.append(lo <= beta <= hi)
    assert 0.80 <= np.mean(cover) <= COVER_MAX, np.mean(cover)
    assert 0.75 <= np.mean(beta_cover) <= 1.0, np.mean(beta_cover)


def test_regions_without_data_get_wide_intervals():
    """Tracks confined to the left part of the box: psi's std on the right is far larger."""
    h, coef = _cos_space(4, periodic=False)
    rng = np.random.default_rng(2)
    tracks = _tracks(h, coef, 2.0, 0.002, 200, 10, rng, rng.uniform(-0.95, -0.45, (200, 1)), "reflecting")
    est = IncrementsEstimator(hermite_elements=4, ridge=1e-4, walls="none").fit(tracks)
    x = est.grid_.coords[0]
    std = increments_posterior(est).potential_std(est.grid_.coords)
    assert tracks.values.max() < 0.0
    inside = (x > -0.9) & (x < -0.5)
    # (the zero-mean gauge spreads the unknown mean over the whole box, so the std is nowhere small)
    assert std[-1] > 2 * std[inside].max()
    assert np.all(np.diff(std[x > 0.3]) > 0)  # growing away from the data


# --------------------------------------------------------------------------------------------
# beta and the basis error of psi
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def spectral2d():
    """2-D periodic data from the spectral solver; psi a trigonometric sum (outside every Hermite space)."""
    f = smooth_function(2, True)
    beta = 4.0
    solver = SpectralSolver([-1, -1], [1, 1], 48, lambda x: np.stack([f(x, (1, 0)), f(x, (0, 1))], -1), beta)
    times = 0.02 * np.arange(21)
    values = solver.solve(von_mises_bump([-1, -1], [1, 1], [0.4, -0.3], 1.5), times)
    grid = Grid([-1, -1], [1, 1], 24, boundary="periodic")
    return DensitySnapshots(grid, times, np.clip(solver.evaluate(values, grid.coords), 0.0, None)), beta


def test_beta_interval_covers_truth_despite_basis_error(spectral2d):
    snapshots, beta = spectral2d
    est = PotentialEstimator(hermite_elements=4, estimate_beta=True).fit(snapshots)
    assert est.beta_ > 1.05 * beta  # the bias this guards against: ~7% high with 4 elements
    post = posterior(est, snapshots)
    lo, hi = post.beta_interval()
    assert lo <= beta <= hi, (lo, hi)
    assert post.beta_coarse > est.beta_  # the coarse fit is further out on the same side
    noise_only = density_posterior(est).beta_interval()
    assert not noise_only[0] <= beta <= noise_only[1]  # the noise interval alone would miss it


# --------------------------------------------------------------------------------------------
# bands and the result file
# --------------------------------------------------------------------------------------------
def test_bands_and_result_roundtrip(tmp_path, rng):
    problem = Problem(2, "periodic", hermite_elements=2, steps=10)
    s = _noisy(problem.snapshots(12), 0.1, rng)
    grid = Grid([-1, -1], [1, 1], 12, names=("s", "a"), roles=("state", "action"), boundary="periodic")
    s = DensitySnapshots(grid, s.times, s.values)
    est = PotentialEstimator(hermite_elements=2, estimate_beta=True).fit(s)
    mdp = recover_mdp_from_fit(est, s.dt, 0.9)
    post = posterior(est, s)
    extra = uncertainty_extra(est, post, s.dt, 0.9, n_samples=40, rng=3)
    for name in ("policy", "reward"):
        lo, hi = extra[f"{name}_lower"].values, extra[f"{name}_upper"].values
        assert np.all(lo <= hi)
        inside = np.mean((lo <= getattr(mdp, name) + 1e-12) & (getattr(mdp, name) <= hi + 1e-12))
        assert inside > 0.8, (name, inside)
    ds = result_dataset(est, mdp=mdp, dt=s.dt, gamma=0.9, extra=extra)
    write_result(tmp_path / "r.nc", ds)
    back = read_result(tmp_path / "r.nc")
    for key in ("potential_std", "policy_lower", "policy_upper", "reward_lower", "reward_upper"):
        assert back[key].dims == grid.names
    assert back.attrs["beta_lower"] <= back.attrs["beta"] <= back.attrs["beta_upper"]
    assert back.attrs["uncertainty"] == "posterior"
    # without action axes: no bands, but the std
    assert credible_bands(post, problem.snapshots(12).grid, s.dt) == {}


def test_bands_on_two_threads_equal_the_serial_loop(rng, monkeypatch):
    """The band draws' MDP recoveries on threads give the serial loop's bands exactly."""
    from fpirl.uncertainty import _bands

    problem = Problem(2, "periodic", hermite_elements=2, steps=10)
    s = _noisy(problem.snapshots(12), 0.1, rng)
    grid = Grid([-1, -1], [1, 1], 12, names=("s", "a"), roles=("state", "action"), boundary="periodic")
    s = DensitySnapshots(grid, s.times, s.values)
    post = density_posterior(PotentialEstimator(hermite_elements=2, estimate_beta=True).fit(s))
    out = {}
    for threads in (1, 2):
        monkeypatch.setattr(_bands, "BAND_THREADS", threads)
        monkeypatch.setattr(_bands, "BAND_THREAD_MIN_NODES", 0)
        out[threads] = credible_bands(post, grid, s.dt, 0.9, n_samples=12, rng=4)
    assert out[1].keys() == out[2].keys() == {"policy_lower", "policy_upper", "reward_lower", "reward_upper"}
    for key in out[1]:
        np.testing.assert_array_equal(out[2][key], out[1][key])


# --------------------------------------------------------------------------------------------
# bootstrap over whole tracks
# --------------------------------------------------------------------------------------------
def test_resample_tracks_copies_whole_tracks():
    from fpirl.uncertainty._bootstrap import resample_tracks

    h, coef = _cos_space(4)
    rng = np.random.default_rng(5)
    tracks = _tracks(h, coef, 2.0, 0.01, 6, 9, rng, rng.uniform(-1, 1, (6, 1)))
    r = resample_tracks(tracks, [3, 3, 0])
    assert r.n_tracks == 3 and r.n_obs == 30 and len(r.pairs()[0]) == 27  # no transition spans two copies
    np.testing.assert_array_equal(r.values[:10], tracks.values[tracks.track == 3])
    np.testing.assert_array_equal(r.values[10:20], tracks.values[tracks.track == 3])
    np.testing.assert_array_equal(r.values[20:], tracks.values[tracks.track == 0])


def test_bootstrap_agrees_with_posterior_and_runs_in_parallel():
    from fpirl.uncertainty import estimate_uncertainty

    h, coef = _cos_space(4)
    rng = np.random.default_rng(6)
    tracks = _tracks(h, coef, 2.0, 0.01, 40, 50, rng, rng.uniform(-1, 1, (40, 1)))
    est = IncrementsEstimator(hermite_elements=4, ridge=1e-6).fit(tracks)
    serial = estimate_uncertainty(est, "bootstrap", tracks, n_replicates=40, rng=1)
    parallel = estimate_uncertainty(est, "bootstrap", tracks, n_replicates=40, rng=1, n_jobs=2)
    # same draws, same replicates (to rounding: concurrent fits may run some BLAS calls on another thread count)
    np.testing.assert_allclose(parallel.samples, serial.samples, rtol=1e-12, atol=1e-12 * np.abs(serial.samples).max())
    coords = est.grid_.coords
    ratio = serial.potential_std(coords) / increments_posterior(est).potential_std(coords)
    assert 0.6 < np.median(ratio) < 1.6, ratio
    lo, hi = serial.beta_interval()
    assert lo < est.beta_ < hi
    with pytest.raises(FpirlInputError, match="trajectory table"):
        estimate_uncertainty(est, "bootstrap", None)


def test_posterior_of_a_fit_constant_along_undriven_axes():
    """drift only on the action axis: psi (and its std) constant along the state axis."""
    from fpirl.uncertainty import estimate_uncertainty

    rng = np.random.default_rng(3)

    def grad(x):
        return np.stack([np.zeros(len(x)), 0.5 * np.pi * np.sin(np.pi * x[:, 1])], -1)

    paths = sample_sde(grad, 2.0, rng.uniform(-1, 1, (60, 2)), 0.01, 40, rng, [-1.0, -1.0], [1.0, 1.0], "periodic")
    tracks = table_from_paths(paths, 0.01, ["s", "a"], ["state", "action"], [-1.0, -1.0], [1.0, 1.0], "periodic")
    est = IncrementsEstimator(hermite_elements="auto", drift_axes=[1]).fit(tracks)
    if len(est.fit_axes_) == 2:
        pytest.skip("the CV kept psi varying along the state axis")
    post = increments_posterior(est)
    std = post.potential_std(est.grid_.coords)
    assert np.all(std > 0) and np.ptp(std, axis=0).max() < 1e-12 * std.max()
    draws = post.sample(4, 0)
    for d in draws:  # every draw is constant along the state axis too
        psi = est.hermite_.evaluate_grid(d[:-1].reshape(est.hermite_.shape), est.grid_.coords)
        assert np.ptp(psi, axis=0).max() < 1e-10
    # the bootstrap refits with 0 elements on the left-out axis (issue 19: it used to refuse)
    boot = estimate_uncertainty(est, "bootstrap", tracks, n_replicates=3, n_jobs=1)
    bstd = boot.potential_std(est.grid_.coords)
    assert np.all(bstd > 0) and np.ptp(bstd, axis=0).max() < 1e-10 * bstd.max()
    # the bands see it from the mean and factor: no drift along the state axis, one transition row per node; the
    # same bands (to rounding) as the general path, which forms every source's row from its own mean
    h = est.hermite_
    assert h.constant_along(np.vstack([post.mean[None], post.factor[:-1].T]), batch=1) == (True, False)
    for p in (post, boot):
        fast = credible_bands(p, est.grid_, tracks.dt, n_samples=8, rng=2)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(type(h), "constant_along", lambda self, coef, batch=0: (False,) * self.ndim)
            slow = credible_bands(p, est.grid_, tracks.dt, n_samples=8, rng=2)
        for key in fast:
            np.testing.assert_allclose(fast[key], slow[key], rtol=1e-9, atol=1e-12 * np.abs(slow[key]).max())


def test_points_outside_bands_share_and_warning():
    """The share of nodes (with data, where the support is given) whose point estimate leaves its band, and a
    warning above BAND_MISS_WARNING that names the posterior's width on the scale 1/beta."""
    import types
    import warnings

    import xarray as xr

    from fpirl.uncertainty import points_outside_bands
    from fpirl.uncertainty._bands import BAND_MISS_WARNING

    shape = (4, 5)
    point = np.zeros(shape)
    lower, upper = -np.ones(shape), np.ones(shape)
    mdp = types.SimpleNamespace(policy=point, reward=point.copy(), beta=10.0)
    da = lambda v: xr.DataArray(v, dims=("s", "a"))  # noqa: E731
    extra = {"policy_lower": da(lower), "policy_upper": da(upper), "reward_lower": da(lower),
             "reward_upper": da(upper), "potential_std": da(np.full(shape, 0.3))}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert points_outside_bands(mdp, extra) == {"policy_outside_band": 0.0, "reward_outside_band": 0.0}
    # the reward above its band on the first two rows (10 of 20 nodes); the support: the first three rows (15)
    mdp.reward[:2] = 2.0
    support = np.zeros(shape, np.int8)
    support[:3] = 1
    with pytest.warns(UserWarning, match=r"reward's point estimate lies outside its 90% band at 67% of the nodes "
                                         r"with data.*beta x psi's posterior std: 3 "):
        out = points_outside_bands(mdp, {**extra, "data_support": da(support)})
    assert out["reward_outside_band"] == pytest.approx(10 / 15) and out["policy_outside_band"] == 0.0
    # without a support every node counts: 10 of 20 = 50% > BAND_MISS_WARNING; at the threshold no warning
    with pytest.warns(UserWarning, match="at 50% of the nodes:"):
        assert points_outside_bands(mdp, extra)["reward_outside_band"] == pytest.approx(0.5)
    mdp.reward[:] = 0.0
    mdp.reward.flat[: int(BAND_MISS_WARNING * point.size)] = 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert points_outside_bands(mdp, extra)["reward_outside_band"] == pytest.approx(BAND_MISS_WARNING)
    assert points_outside_bands(None, extra) == {}
