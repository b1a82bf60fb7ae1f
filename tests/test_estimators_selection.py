"""Automatic resolution of the increments estimator: K-fold CV over whole tracks."""

import numpy as np
import pytest
import xarray as xr

from fpirl import FpirlInputError, IncrementsEstimator, result_dataset
from fpirl.estimators.selection import candidate_elements, track_folds

from _simtracks import PI, make_tracks, rel_error


def psi_rough(x):
    return 0.5 * np.cos(PI * x[..., 0]) + 0.4 * np.sin(3 * PI * x[..., 0])


def grad_rough(x):
    return np.stack([-0.5 * PI * np.sin(PI * x[..., 0]) + 1.2 * PI * np.cos(3 * PI * x[..., 0])], axis=-1)


@pytest.fixture(scope="module")
def rough():
    return make_tracks(grad_rough, 3.0, 200, 400, 1e-2, -1.0, 1.0, "periodic", 31)


@pytest.fixture(scope="module")
def fitted(rough):
    return IncrementsEstimator(cv_elements=range(2, 11)).fit(rough)


def test_cv_picks_a_resolution_that_resolves_psi(rough, fitted):
    """sin(3 pi x) needs >= 4 elements: CV must not pick fewer, and must be near the best in hindsight."""
    errors = {e: rel_error(IncrementsEstimator(hermite_elements=e).fit(rough), psi_rough, -1, 1) for e in range(2, 11)}
    assert errors[2] > 0.3  # too coarse really fails here
    (chosen,) = fitted.cv_["chosen_elements"]
    assert chosen >= 4
    assert rel_error(fitted, psi_rough, -1, 1) < 1.3 * min(errors.values()) + 0.01
    assert fitted.settings_["hermite_selection"] == "cv" and fitted.settings_["ridge_selection"] == "cv"
    assert fitted.hermite_.elements == (chosen,)


def test_one_se_rule_never_finer_than_min(rough, fitted):
    assert fitted.cv_["rule"] == "min" and fitted.cv_["chosen_elements"] == fitted.cv_["best_elements"]
    one_se = IncrementsEstimator(cv_elements=range(2, 11), cv_rule="1se").fit(rough)
    assert one_se.cv_["chosen_elements"][0] <= fitted.cv_["chosen_elements"][0]
    s = one_se.cv_["score"]
    i = one_se.cv_["labels"].index(",".join(map(str, one_se.cv_["chosen_elements"])))
    j = list(one_se.cv_["ridge"]).index(one_se.cv_["chosen_ridge"])
    assert s.max() - s[i, j] <= one_se.cv_["se_paired"][i, j] + 1e-12


def test_cv_curve_lands_in_the_result(fitted):
    extra = fitted.result_extra()
    # the CV curve, and (beta estimated, a diffusion's tracks) beta's continuous reading
    assert set(extra) == {"cv_score", "cv_score_std", "cv_score_se", "beta_continuous"}
    assert extra["beta_continuous"] == fitted.beta_continuous_
    score = extra["cv_score"]
    assert isinstance(score, xr.DataArray) and score.dims == ("cv_candidate", "cv_ridge")
    assert np.all(np.isfinite(score.values)) and np.all(extra["cv_score_std"].values >= 0)
    assert score.attrs["chosen_candidate"] in score["cv_candidate"].values
    ds = result_dataset(fitted, extra=extra)
    assert "cv_score" in ds and ds.attrs["solver_estimator"] == "increments"


def test_fixed_ridge_is_kept_and_only_elements_are_searched(rough):
    est = IncrementsEstimator(ridge=1e-3, cv_elements=[2, 4, 6]).fit(rough)
    assert est.cv_["ridge"].tolist() == [1e-3] and est.settings_["ridge_selection"] == "fixed"
    assert est.cv_["elements"].tolist() == [[2], [4], [6]]


def test_folds_hold_whole_tracks():
    track = np.repeat(np.arange(23), 7)
    folds, k = track_folds(track, 23, 5, 0)
    assert k == 5
    for t in range(23):
        assert np.unique(folds[track == t]).size == 1
    assert sorted(np.bincount(folds[::7])) == [4, 4, 5, 5, 5]


def test_candidates_capped_by_data_and_size():
    assert candidate_elements(2, True, 10**7, 1600, None) == [(e, e) for e in range(2, 9)]
    # 20 rows per coefficient: 2000 rows allow at most 100 coefficients -> (2 e)^2 <= 100 -> e <= 5
    assert candidate_elements(2, True, 2000, 1600, None) == [(e, e) for e in (2, 3, 4, 5)]
    assert candidate_elements(4, False, 10**7, 1600, None) == [(2,) * 4]  # 3 elements: 8^4 = 4096 coefficients
    assert candidate_elements(1, True, 10, 1600, None) == [(2,)]  # nothing fits: the smallest


def test_candidates_per_role_when_some_axes_are_not_regressed():
    """Position/velocity tracks regress the velocity axes (2, 3): the positions get 0 (psi constant
    along them), 1 or 2 elements, the velocities the 2-D list, all capped at 1600 coefficients."""
    cands = candidate_elements(4, False, 10**7, 1600, None, drift_axes=(2, 3))
    assert [c for c in cands if c[0] == 0] == [(0, 0, e, e) for e in range(2, 9)]
    assert [c for c in cands if c[0] == 1] == [(1, 1, e, e) for e in (2, 3, 4)]  # 16 (2 e + 2)^2 <= 1600
    assert [c for c in cands if c[0] == 2] == [(2, 2, 2, 2)]
    assert all(c[2:] == (c[2],) * 2 and c[:2] == (c[0],) * 2 for c in cands)


def test_state_independent_candidate_is_embedded_exactly(rng):
    """A velocity-only fit is psi(s, a) = f(a) on the whole box: constant along s, zero mean, and the
    CV curve lists it; the fit equals the one on the action columns alone."""
    from fpirl.tracks import TrackTable

    n, steps, dt, beta = 120, 60, 0.05, 2.0
    a = np.zeros((steps, n))
    for k in range(1, steps):  # AR(1) velocities: psi = a^2 / 2
        a[k] = a[k - 1] - a[k - 1] * dt + np.sqrt(2 * dt / beta) * rng.standard_normal(n)
    s = np.cumsum(a, axis=0) * dt + rng.uniform(-1, 1, n)
    values = np.stack([s.T.ravel(), a.T.ravel()], axis=1)
    seg = np.repeat(np.arange(n), steps)
    lo, hi = values.min(0) - 0.1, values.max(0) + 0.1
    table = TrackTable(values, seg, seg, np.tile(np.arange(steps) * dt, n), dt, ("s", "a"), ("state", "action"),
                       lo, hi, "reflecting")
    est = IncrementsEstimator(drift_axes=[1], walls="none", cv_elements=[2, 3]).fit(table)
    labels = est.cv_["labels"]
    assert "0,2" in labels and "1,2" in labels
    # 0 elements typed explicitly (issue 19): the same embedded fit as on the action column alone (below)
    only = IncrementsEstimator(hermite_elements=(0, 3), drift_axes=[1], walls="none", ridge=1e-3, mobility=0,
                               second_lag=False).fit(table)
    assert only.settings_["hermite_elements"] == "0,3" and only.settings_["psi_constant_along"] == "s"
    with pytest.raises(FpirlInputError, match="only on axes"):  # 0 on a regressed axis is an error
        IncrementsEstimator(hermite_elements=(3, 0), drift_axes=[1], walls="none").fit(table)
    sub = IncrementsEstimator(hermite_elements=3, walls="none", ridge=1e-3, mobility=0, second_lag=False).fit(
        TrackTable(values[:, 1:], seg, seg, table.time, dt, ("a",), ("state",), lo[1:], hi[1:], "reflecting"))
    from fpirl.estimators._base import embed_constant_axes

    space, coef = embed_constant_axes(sub.hermite_, sub.coef_, [1], lo, hi, False)
    pts = np.column_stack([rng.uniform(lo[0], hi[0], 50), rng.uniform(lo[1], hi[1], 50)])
    np.testing.assert_allclose(space.evaluate(coef, pts), sub.potential(pts[:, 1:]), atol=1e-12)
    shifted = pts.copy()
    shifted[:, 0] = rng.uniform(lo[0], hi[0], 50)
    np.testing.assert_allclose(space.evaluate(coef, shifted), space.evaluate(coef, pts), atol=1e-12)
    assert abs(np.sum(space.mean_functional() * coef)) < 1e-12
    np.testing.assert_allclose(only.potential(pts), sub.potential(pts[:, 1:]), rtol=1e-8, atol=1e-10)


def test_cv_curve_round_trips_and_is_plotted(fitted, tmp_path):
    from fpirl.io import read_result, write_result
    from fpirl.plotting import plot_result

    path = write_result(tmp_path / "r.nc", result_dataset(fitted, extra=fitted.result_extra()))
    ds = read_result(path)
    np.testing.assert_allclose(ds["cv_score"].values, fitted.cv_["score"])
    assert ds["cv_score"].attrs["chosen_candidate"] == ",".join(map(str, fitted.cv_["chosen_elements"]))
    png = plot_result(ds, tmp_path / "r.png")
    assert png.stat().st_size > 1000


def test_cv_score_is_the_heldout_gaussian_loglik_in_two_dimensions():
    """The fold score (nats per transition) equals the mean scipy multivariate-normal log-density of the
    held-out increments, N(-grad psi dt, (2 dt / beta) I) with psi fitted on the other folds (d = 2)."""
    from scipy.stats import multivariate_normal

    from fpirl.estimators.increments import _regression_data
    from fpirl.estimators.selection import cross_validate

    def grad(x):
        return np.stack([PI * np.cos(PI * x[..., 0]), -0.5 * PI * np.sin(PI * x[..., 1])], axis=-1)

    tr = make_tracks(grad, 2.0, 40, 30, 1e-2, [-1, -1], [1, 1], "periodic", 33)
    beta, dt, el, ridge = 2.0, tr.dt, (2, 2), 1e-4
    points, _, dx, track = _regression_data(tr, 0)
    fold = track % 2
    cv = cross_validate(tr.lower, tr.upper, True, points, dx / dt, [0, 1], fold, 2, dt, [el], [ridge], beta)
    for f in range(2):
        est = IncrementsEstimator(hermite_elements=el, ridge=ridge, beta=beta).fit(
            tr.select_tracks(np.flatnonzero(np.arange(tr.n_tracks) % 2 != f)))
        held = fold == f
        mean = -est.gradient(points[held]) * dt
        ref = np.mean([multivariate_normal(m, 2 * dt / beta * np.eye(2)).logpdf(x) for m, x in zip(mean, dx[held])])
        assert cv["fold_scores"][0, 0, f] == pytest.approx(ref, rel=1e-8)


def test_cv_solves_on_two_threads_equal_the_serial_loop(monkeypatch):
    """The (fold, ridge) solves run in two halves on two threads: every fold score, with beta given and
    estimated (the training residual's variance), equals that of the same solves in one loop."""
    import fpirl.core._threads as threads
    from fpirl.estimators.increments import _regression_data
    from fpirl.estimators.selection import cross_validate

    def grad(x):
        return np.stack([PI * np.cos(PI * x[..., 0]), -0.5 * PI * np.sin(PI * x[..., 1])], axis=-1)

    tr = make_tracks(grad, 2.0, 60, 30, 1e-2, [-1, -1], [1, 1], "periodic", 34)
    points, _, dx, track = _regression_data(tr, 0)
    fold = track % 5
    ridges = [1e-6, 1e-4, 1e-2]
    for beta in (2.0, None):
        args = (tr.lower, tr.upper, True, points, dx / tr.dt, [0, 1], fold, 5, tr.dt, [(2, 2), (3, 3)], ridges, beta)
        both = cross_validate(*args)["fold_scores"]
        monkeypatch.setattr(threads, "THREADS", 1)
        serial = cross_validate(*args)["fold_scores"]
        monkeypatch.undo()
        assert both.shape == (2, 3, 5) and np.all(np.isfinite(both))
        np.testing.assert_array_equal(both, serial)
