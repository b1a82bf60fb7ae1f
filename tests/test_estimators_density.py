"""TrackDensityEstimator: snapshots from tracks (mass, pooling, smoothing) and recovery of psi."""

import numpy as np
import pytest

from fpirl import FpirlInputError
from fpirl.estimators import TRACK_ESTIMATORS, TrackDensityEstimator
from fpirl.estimators.track_density import hermite_rule, scott_bandwidth, smooth_density
from fpirl.core.grid import Grid
from fpirl.tracks import TrackTable

from _simtracks import PI, grad1, make_tracks, psi1, rel_error



@pytest.fixture(scope="module")
def tracks1():
    # uniform start relaxing towards exp(-beta psi): the transient carries the information
    return make_tracks(grad1, 3.0, 3000, 300, 2e-3, -1.0, 1.0, "periodic", 21)


@pytest.mark.parametrize("fe, hermite", [(4, 2), (6, 2), (9, 2), (10, 3), (14, 4), (18, 5), (26, 7), (30, 8), (64, 8)])
def test_hermite_rule_rounds_halves_up(fe, hermite):
    """max(2, min(8, N/4 rounded half up)): 10 FE elements give 3 (Python's round gave 2)."""
    assert hermite_rule(fe) == hermite


def test_registry():
    assert TRACK_ESTIMATORS["density"] is TrackDensityEstimator


def test_snapshots_unit_mass_and_stride(tracks1):
    est = TrackDensityEstimator(stride=10, fe_elements=32)
    snaps = est.snapshots(tracks1)
    assert snaps.n_times == 31 and snaps.dt == pytest.approx(10 * 2e-3)
    np.testing.assert_allclose(snaps.mass(), 1.0, rtol=1e-12)
    assert est.pool_ == 0 and snaps.grid.elements == (32,)


def test_pooling_when_frames_are_sparse(tracks1):
    sparse = tracks1.select_tracks(np.arange(4))  # 4 points per frame < MIN_POINTS
    est = TrackDensityEstimator(stride=10, fe_elements=16)
    snaps = est.snapshots(sparse)
    assert est.pool_ == 1  # 3 frames x 4 points >= 10
    np.testing.assert_allclose(snaps.mass(), 1.0, rtol=1e-12)


def test_recovery_1d_periodic(tracks1):
    est = TrackDensityEstimator().fit(tracks1)
    assert rel_error(est, psi1, -1, 1) < 0.1
    assert est.beta_ == pytest.approx(3.0, rel=0.03)  # from the increments
    assert est.settings_["beta_source"] == "increments" and est.dt_ == 2e-3
    assert est.settings_["hermite_selection"] == "rule" and est.settings_["fe_selection"] == "rule"
    fixed = TrackDensityEstimator(beta=3.0).fit(tracks1)
    assert fixed.beta_ == 3.0 and rel_error(fixed, psi1, -1, 1) < 0.1
    assert abs(np.sum(est.hermite_.mean_functional() * est.coef_)) < 1e-10
    assert est.result_extra() == {}


def test_recovery_2d_reflecting():
    def psi(x):
        return x[..., 0] ** 2 + 0.6 * np.sin(PI * x[..., 1])

    def grad(x):
        return np.stack([2 * x[..., 0], 0.6 * PI * np.cos(PI * x[..., 1])], axis=-1)

    tr = make_tracks(grad, 2.0, 4000, 120, 5e-3, [-1, -1], [1, 1], "reflecting", 22)
    est = TrackDensityEstimator(stride=5).fit(tr)
    assert not est.hermite_.periodic
    assert rel_error(est, psi, [-1, -1], [1, 1]) < 0.15


def test_smoothing_conserves_mass_and_scott_rule(rng):
    for boundary in ("periodic", "reflecting"):
        grid = Grid([-1, 0], [1, 3], (16, 12), boundary=boundary)
        v = rng.uniform(0, 1, grid.shape)
        s = smooth_density(v, grid, [0.2, 0.3])
        assert grid.integrate(s) == pytest.approx(grid.integrate(v), rel=0.03)
        assert s.std() < v.std()
    x = rng.normal(0, 0.1, (4096, 2))
    h = scott_bandwidth(x, [-1, -1], [1, 1], periodic=False)
    np.testing.assert_allclose(h, 0.1 * 4096 ** (-1 / 6), rtol=0.05)
    hp = scott_bandwidth(x, [-1, -1], [1, 1], periodic=True)  # circular spread ~ linear spread for a narrow cloud
    np.testing.assert_allclose(hp, h, rtol=0.05)


def test_bad_params(tracks1):
    for kwargs in ({"stride": 0}, {"stride": 2.5}, {"pool": -1}, {"fe_elements": 1}, {"fe_elements": "many"},
                   {"hermite_elements": "x"}, {"beta": 0.0}, {"smoothing": "silverman"}, {"smoothing": -0.1},
                   {"beta_from": "guess"}, {"stride": 10_000}):
        with pytest.raises(FpirlInputError):
            TrackDensityEstimator(**kwargs).fit(tracks1)
    with pytest.raises(FpirlInputError, match="TrackTable"):
        TrackDensityEstimator().fit(np.zeros((4, 1)))
    few = TrackTable(np.zeros((3, 1)), [0, 1, 2], [0, 1, 2], [0.0, 1.0, 2.0], 1.0, ("x",), ("state",), -1, 1)
    with pytest.raises(FpirlInputError, match="observations"):
        TrackDensityEstimator(stride=1).fit(few)
