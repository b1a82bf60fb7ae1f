"""Hermite elements for density data by cross-validation over blocks of time steps (fpirl.estimators.hermite_cv)."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest

from fpirl import DensitySnapshots, Grid, PotentialEstimator
from fpirl.core.hermite import HermiteSpace
from fpirl.estimators.hermite_cv import candidate_elements, chosen, held_out_rss
from fpirl.forward import simulate_density, von_mises_bump
from fpirl.weakform._reference import reference_normal_equations
from fpirl.weakform.assembly import block_moments, build_tables, contract_moments, data_moments, summed_moments

from _simdensity import _noisy, coupled_cosine, grad_psi2, psi2


def _snapshots(elements=12, n_times=9, noise=0.0, seed=0):
    grid = Grid([-1, -1], [1, 1], elements, names=["s", "a"], roles=["state", "action"])
    times = 0.02 * np.arange(n_times)
    v = simulate_density(grid, psi2, grad_psi2, 4.0, von_mises_bump(grid.lower, grid.upper, [0.3, -0.4], 1.0), times)
    return DensitySnapshots(grid, times, _noisy(v, noise, seed))


def test_block_moments_are_the_moments_of_their_steps_and_add_up():
    s = _snapshots(n_times=11).normalized()
    blocks = block_moments(s, 3)
    steps = [0, 4, 7, 10]  # array_split of 10 midpoint steps into 3: 4, 3, 3
    for (k0, k1), m in zip(zip(steps[:-1], steps[1:]), blocks):
        sub = DensitySnapshots(s.grid, s.times[k0 : k1 + 1], s.values[k0 : k1 + 1])
        ref = data_moments(sub)
        np.testing.assert_allclose(m.second, ref.second, rtol=1e-10, atol=1e-12 * np.abs(ref.second).max())
        np.testing.assert_allclose(m.first_g, ref.first_g, rtol=1e-10, atol=1e-12 * np.abs(ref.first_g).max())
        assert m.n_rows == ref.n_rows and m.gg == pytest.approx(ref.gg, rel=1e-12)
    total, whole = summed_moments(blocks), data_moments(s)
    np.testing.assert_allclose(total.second, whole.second, rtol=1e-10, atol=1e-12 * np.abs(whole.second).max())
    np.testing.assert_allclose(total.first_c, whole.first_c, rtol=1e-10, atol=1e-12 * np.abs(whole.first_c).max())
    assert total.cc == pytest.approx(whole.cc, rel=1e-12)


def test_held_out_rss_of_the_last_block_is_the_residual_of_the_fit_to_the_earlier_steps():
    """The last block's held-out RSS equals the residual, on the dense reference assembly of that block's
    steps, of the estimator fitted to the snapshots before it (a plain fit: the earlier steps are a
    snapshot set of their own)."""
    s = _snapshots(elements=8, n_times=9, noise=0.01)
    grid, beta, el = s.grid, 4.0, (3, 3)
    hermite = HermiteSpace.on_grid(grid, el)
    blocks = block_moments(s.normalized(), 4)  # 8 steps: 2 per block
    parts = [contract_moments(m, build_tables(grid, hermite)) for m in blocks]
    got = held_out_rss(parts, hermite, 1e-9, 1.0 / beta)[-1]
    train = DensitySnapshots(grid, s.times[:7], s.values[:7])
    # the cross-validation scores the raw sums: the fit from them (no noise correction)
    theta = PotentialEstimator(hermite_elements=el, beta=beta, correct_noise=False).fit(train).coef_.ravel()
    held = DensitySnapshots(grid, s.times[6:], s.values[6:]).normalized()
    ne = reference_normal_equations(held, hermite)
    g = 1.0 / beta
    want = theta @ ne.xtx @ theta + 2 * theta @ (ne.xtg + g * ne.xtc) + ne.gg + 2 * g * ne.gc + g * g * ne.cc
    assert got == pytest.approx(want, rel=1e-6)


def test_candidates_are_capped_by_the_grid_and_never_below_the_default():
    assert candidate_elements(Grid([-1, -1], [1, 1], 32)) == [(n, n) for n in (3, 4, 5, 6, 8)]
    assert candidate_elements(Grid([-1, -1], [1, 1], (15, 32))) == [(3, 3), (4, 4), (5, 5), (5, 6), (5, 8)]
    assert candidate_elements(Grid([-1, -1, -1], [1, 1, 1], (10, 14, 12))) == [(3, 3, 3), (4, 4, 4)]
    assert candidate_elements(Grid([-1, -1], [1, 1], 6)) == [(3, 3), (4, 4)]
    assert candidate_elements(Grid([-1] * 4, [1] * 4, 10)) == []


@functools.lru_cache(maxsize=1)
def _sharp_run():
    """2-D periodic data of a potential with a narrow well (not resolved by 4 Hermite elements), beta = 10."""
    psi, grad = coupled_cosine(np.pi)
    grid = Grid([-1, -1], [1, 1], 32)
    times = 0.02 * np.arange(25)
    v = simulate_density(grid, psi, grad, 10.0, von_mises_bump(grid.lower, grid.upper, [0.3, -0.4], 1.0), times)
    X = np.stack(np.meshgrid(*grid.coords, indexing="ij"), -1)
    return grid, times, v, psi(X)


def _error(est, true):
    p = est.potential_on_grid()
    return np.sqrt(np.mean((p - p.mean() - true + true.mean()) ** 2) / np.mean((true - true.mean()) ** 2))


def test_auto_resolves_what_four_elements_cannot():
    """At beta = 10 the density is sharp: 4 elements leave a ~7% error, the CV takes more and gets ~1%."""
    grid, times, v, true = _sharp_run()
    s = DensitySnapshots(grid, times, _noisy(v, 0.02, 1))
    fixed = PotentialEstimator(hermite_elements=4, beta=10.0).fit(s)
    auto = PotentialEstimator(hermite_elements="auto", beta=10.0).fit(s)
    assert min(auto.hermite_.elements) > 4
    assert _error(auto, true) < 0.4 * _error(fixed, true)
    assert auto.settings_["hermite_selection"] == "cv"
    assert set(auto.hermite_cv_) == set(candidate_elements(grid))
    assert min(auto.hermite_cv_, key=auto.hermite_cv_.get) == tuple(auto.hermite_.elements)
    assert fixed.hermite_cv_ is None and "hermite_selection" not in fixed.settings_
    again = PotentialEstimator(hermite_elements=tuple(auto.hermite_.elements), beta=10.0).fit(s)  # the printed refit
    np.testing.assert_allclose(again.coef_, auto.coef_, rtol=0, atol=1e-10 * np.abs(auto.coef_).max())


def test_auto_with_beta_estimated_holds_the_default_fits_beta_over_the_candidates():
    grid, times, v, true = _sharp_run()
    s = DensitySnapshots(grid, times, _noisy(v, 0.02, 1))
    auto = PotentialEstimator(hermite_elements="auto", estimate_beta=True).fit(s)
    assert min(auto.hermite_.elements) > 4
    assert _error(auto, true) < 0.05
    assert auto.beta_ == pytest.approx(10.0, rel=0.1)


def test_auto_takes_the_default_where_the_cv_does_not_apply():
    s = _snapshots(elements=12, n_times=9)
    est = PotentialEstimator(hermite_elements="auto", beta=4.0, solver="matrix-free").fit(s)
    assert tuple(est.hermite_.elements) == (4, 4) and est.hermite_cv_ is None
    assert est.settings_["hermite_selection"] == "default"
    few = DensitySnapshots(s.grid, s.times[:3], s.values[:3])  # 2 steps: nothing to hold out
    assert tuple(PotentialEstimator(hermite_elements="auto", beta=4.0).fit(few).hermite_.elements) == (4, 4)
    with pytest.raises(ValueError, match="hermite_elements must be 'auto', one integer"):
        PotentialEstimator(hermite_elements="many", beta=4.0).fit(s)


@pytest.mark.parametrize("d, solver, nodes, elements", [(4, "auto", 8, 4), (5, "interpolated-flux", 6, 3),
                                                        (4, "auto", 6, 3), (4, "auto", 4, 2)])
def test_auto_without_cv_takes_four_elements_up_to_4_axes_and_three_above(d, solver, nodes, elements):
    """4 elements up to 4 axes, 3 above; fewer where psi would have more coefficients than the grid has nodes
    (4-D: 4 elements are 8^4 = 4096 periodic coefficients; 6^4 = 1296 nodes take 3, 4^4 = 256 nodes 2): such a fit
    warned that psi was underdetermined, by the default's own choice."""
    grid = Grid([-1] * d, [1] * d, nodes, roles=["state"] * 2 + ["action"] * (d - 2))
    x = np.stack(np.meshgrid(*grid.coords, indexing="ij"), -1)
    v = np.stack([np.exp((0.5 + 0.1 * k) * np.cos(np.pi * x).sum(-1)) for k in range(3)])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # not underdetermined
        est = PotentialEstimator(hermite_elements="auto", beta=2.0, solver=solver).fit(
            DensitySnapshots(grid, [0.0, 0.1, 0.2], v))
    assert est.hermite_.elements == (elements,) * d and est.settings_["hermite_selection"] == "default"
    assert est.hermite_.n_coef <= grid.size


def test_the_default_is_kept_unless_a_candidate_beats_it_by_more_than_one_standard_error():
    d = (4, 4)
    base = np.array([1.0, 2.0, 1.5, 3.0, 2.5])
    clear = {d: base, (6, 6): base - 0.1 + 0.01 * np.array([1, -1, 1, -1, 0])}  # 0.5 better, SE 0.02
    assert chosen(clear, d) == (6, 6)
    marginal = {d: base, (6, 6): base - np.array([0.3, -0.25, 0.2, -0.2, 0.0])}  # 0.05 better, SE ~0.5
    assert chosen(marginal, d) == d
    worse = {d: base, (3, 3): base + 0.2}
    assert chosen(worse, d) == d


def test_cli_default_says_how_the_elements_were_chosen(tmp_path, capsys):
    import xarray as xr

    from fpirl import write_density
    from fpirl.cli import main

    s = _snapshots(elements=12, n_times=9, noise=0.01)
    data, few = tmp_path / "d.nc", tmp_path / "few.nc"
    write_density(data, s)
    write_density(few, DensitySnapshots(s.grid, s.times[:3], s.values[:3]))
    for path, selection, line in ((data, "cv", "chosen by cross-validation over 5 blocks"), (few, "default", "the default")):
        out = tmp_path / f"{selection}.nc"
        assert main(["fit", str(path), "-o", str(out), "--beta", "4", "--no-progress", "--uncertainty", "none"]) == 0
        assert line in capsys.readouterr().out
        with xr.open_dataset(out) as ds:
            assert ds.attrs["solver_hermite_selection"] == selection
    assert main(["fit", str(data), "-o", str(tmp_path / "4.nc"), "--beta", "4", "--no-progress", "--uncertainty",
                 "none", "--hermite-elements", "4"]) == 0
    assert "Hermite elements" not in capsys.readouterr().out


def test_beta_from_block_means_no_longer_caps_the_candidates_and_its_interval_reaches_the_pilot():
    """Near-equilibrium 24^2 snapshots with 1% noise, beta estimated: the pilot at 4 elements takes beta from
    block means of 2 nodes per axis. The candidates are no longer capped at ``max(4, 24 // 6) = 4`` (the rule
    before the fifteenth pass); the fit at 8 elements has beta ~3% low (the block grid's error), the pilot ~2%
    high, and beta's interval reaches the pilot's beta, so it covers the true 4 (measured [3.83, 4.09])."""
    from fpirl.estimators.hermite_cv import exceeds_block_cap
    from fpirl.uncertainty import posterior

    grid = Grid([-1, -1], [1, 1], 24)
    times = 0.1 * np.arange(30)
    v = simulate_density(grid, psi2, grad_psi2, 4.0, von_mises_bump(grid.lower, grid.upper, [0.3, -0.4], 0.2), times)
    s = DensitySnapshots(grid, times, _noisy(v, 0.01, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = PotentialEstimator(hermite_elements="auto", estimate_beta=True).fit(s)
        pilot = PotentialEstimator(hermite_elements=4, estimate_beta=True).fit(s)
        post = posterior(est, s)
    assert pilot.beta_coarsening_ == 2 and est.hermite_.elements[0] > 4 and exceeds_block_cap(grid, est.hermite_.elements, 2)
    assert est.beta_pilot_ == pytest.approx(pilot.beta_, rel=1e-9) and est.beta_ < 4.0 < pilot.beta_
    lo, hi = post.beta_interval()
    assert post.beta_pilot == est.beta_pilot_ and hi >= pilot.beta_ and lo <= 4.0 <= hi, (lo, hi)
    # elements within the block grid's resolution, or beta given: no pilot in the interval
    assert not exceeds_block_cap(grid, (4, 4), 2) and exceeds_block_cap(grid, (4, 5), 2) and not exceeds_block_cap(grid, (8, 8), 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        given = PotentialEstimator(hermite_elements="auto", beta=4.0).fit(s)
    assert given.beta_pilot_ is None

