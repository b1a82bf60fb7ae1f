"""Automatic resolution of the increments estimator: K-fold CV over whole tracks."""

import numpy as np
import pytest
import xarray as xr

from fpirl import IncrementsEstimator, result_dataset
from fpirl.estimators.selection import candidate_elements, track_folds

from test_estimators_increments import PI, make_tracks, rel_error


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
    chosen = fitted.cv_["chosen_elements"]
    assert chosen >= 4
    assert rel_error(fitted, psi_rough, -1, 1) < 1.3 * min(errors.values()) + 0.01
    assert fitted.settings_["hermite_selection"] == "cv" and fitted.settings_["ridge_selection"] == "cv"
    assert fitted.hermite_.elements == (chosen,)


def test_one_se_rule_never_finer_than_min(rough, fitted):
    assert fitted.cv_["rule"] == "min" and fitted.cv_["chosen_elements"] == fitted.cv_["best_elements"]
    one_se = IncrementsEstimator(cv_elements=range(2, 11), cv_rule="1se").fit(rough)
    assert one_se.cv_["chosen_elements"] <= fitted.cv_["chosen_elements"]
    s = one_se.cv_["score"]
    i = list(one_se.cv_["elements"]).index(one_se.cv_["chosen_elements"])
    j = list(one_se.cv_["ridge"]).index(one_se.cv_["chosen_ridge"])
    assert s.max() - s[i, j] <= one_se.cv_["se_paired"][i, j] + 1e-12


def test_cv_curve_lands_in_the_result(fitted):
    extra = fitted.result_extra()
    assert set(extra) == {"cv_score", "cv_score_std", "cv_score_se"}
    score = extra["cv_score"]
    assert isinstance(score, xr.DataArray) and score.dims == ("cv_elements", "cv_ridge")
    assert np.all(np.isfinite(score.values)) and np.all(extra["cv_score_std"].values >= 0)
    assert fitted.cv_["chosen_elements"] in score["cv_elements"].values
    ds = result_dataset(fitted, extra=extra)
    assert "cv_score" in ds and ds.attrs["solver_estimator"] == "increments"


def test_fixed_ridge_is_kept_and_only_elements_are_searched(rough):
    est = IncrementsEstimator(ridge=1e-3, cv_elements=[2, 4, 6]).fit(rough)
    assert est.cv_["ridge"].tolist() == [1e-3] and est.settings_["ridge_selection"] == "fixed"
    assert est.cv_["elements"].tolist() == [2, 4, 6]


def test_folds_hold_whole_tracks():
    track = np.repeat(np.arange(23), 7)
    folds, k = track_folds(track, 23, 5, 0)
    assert k == 5
    for t in range(23):
        assert np.unique(folds[track == t]).size == 1
    assert sorted(np.bincount(folds[::7])) == [4, 4, 5, 5, 5]


def test_candidates_capped_by_data_and_size():
    assert candidate_elements(2, True, 10**7, 1600, None) == [2, 3, 4, 5, 6, 7, 8]
    # 20 rows per coefficient: 2000 rows allow at most 100 coefficients -> (2 e)^2 <= 100 -> e <= 5
    assert candidate_elements(2, True, 2000, 1600, None) == [2, 3, 4, 5]
    assert candidate_elements(4, False, 10**7, 1600, None) == [2]  # 3 elements: 8^4 = 4096 coefficients
    assert candidate_elements(1, True, 10, 1600, None) == [2]  # nothing fits: the smallest


def test_cv_curve_round_trips_and_is_plotted(fitted, tmp_path):
    from fpirl.io import read_result, write_result
    from fpirl.plotting import plot_result

    path = write_result(tmp_path / "r.nc", result_dataset(fitted, extra=fitted.result_extra()))
    ds = read_result(path)
    np.testing.assert_allclose(ds["cv_score"].values, fitted.cv_["score"])
    assert int(ds["cv_score"].attrs["chosen_elements"]) == fitted.cv_["chosen_elements"]
    png = plot_result(ds, tmp_path / "r.png")
    assert png.stat().st_size > 1000
