"""IncrementsEstimator: assembly against a dense reference, recovery from SDE tracks, noise correction."""

import numpy as np
import pytest

from fpirl import FpirlInputError, HermiteSpace, NotFittedError
from fpirl.estimators import TRACK_ESTIMATORS, IncrementsEstimator
from fpirl.weakform.increment_system import assemble_increments
from fpirl.forward.markov import sample_sde
from fpirl.tracks import TrackTable

from _simtracks import PI, grad1, make_tracks, psi1, rel_error


@pytest.fixture(scope="module")
def tracks1():
    return make_tracks(grad1, 3.0, 300, 400, 1e-2, -1.0, 1.0, "periodic", 11)


# ---- 2-D reflecting: a tilted bowl in x, a bump in y ------------------------------------------
def psi2(x):
    return x[..., 0] ** 2 + 0.6 * np.sin(PI * x[..., 1]) + 0.4 * x[..., 0] * x[..., 1]


def grad2(x):
    return np.stack([2 * x[..., 0] + 0.4 * x[..., 1], 0.6 * PI * np.cos(PI * x[..., 1]) + 0.4 * x[..., 0]], axis=-1)


@pytest.fixture(scope="module")
def tracks2():
    return make_tracks(grad2, 2.0, 600, 400, 1e-2, [-1, -1], [1, 1], "reflecting", 12)


def test_assembly_matches_dense_design_matrix(rng):
    """Cell-blocked normal equations equal G^T G from a dense collocation matrix (2-D, both boundaries)."""
    for periodic, el in ((True, (3, 2)), (False, (2, 3))):
        space = HermiteSpace([-1, 0], [1, 2], el, periodic)
        pts = rng.uniform([-1, 0], [1, 2], (500, 2))
        vel = rng.standard_normal((500, 2))
        groups = rng.integers(0, 3, 500)
        sys_g = assemble_increments(space, pts, vel, [0, 1], groups, 3)
        for drift in ([0, 1], [1]):
            G = []
            for a in drift:
                mats = [ax.matrix(pts[:, b], int(b == a)) for b, ax in enumerate(space.axes)]
                G.append(np.einsum("pi,pj->pij", *mats).reshape(500, -1))
            A = sum(g.T @ g for g in G)
            b = sum(g.T @ vel[:, a] for g, a in zip(G, drift))
            s = assemble_increments(space, pts, vel[:, drift], drift)[0]
            np.testing.assert_allclose(s.A, A, atol=1e-10 * np.abs(A).max())
            np.testing.assert_allclose(s.b, b, atol=1e-10 * np.abs(b).max())
            assert s.c == pytest.approx(np.sum(vel[:, drift] ** 2))
        total = sys_g[0] + sys_g[1] + sys_g[2]
        full = assemble_increments(space, pts, vel, [0, 1])[0]
        np.testing.assert_allclose(total.A, full.A, atol=1e-10 * np.abs(full.A).max())
        assert [s.n_transitions for s in sys_g] == [np.sum(groups == g) for g in range(3)]


def test_registry():
    assert TRACK_ESTIMATORS["increments"] is IncrementsEstimator


def test_recovery_1d_periodic_and_beta(tracks1):
    est = IncrementsEstimator(hermite_elements=6).fit(tracks1)
    assert rel_error(est, psi1, -1, 1) < 0.08
    s = est.system_
    assert s.n_transitions == len(tracks1.pairs()[0]) and s.A.shape == (est.hermite_.n_coef,) * 2
    assert est.beta_ == pytest.approx(3.0, rel=0.03)
    # zero-mean output
    assert abs(np.sum(est.hermite_.mean_functional() * est.coef_)) < 1e-10
    g = est.grid_
    assert abs(g.integrate(est.potential_on_grid())) / g.volume < 1e-3
    assert est.gradient_on_grid().shape == (1,) + g.shape
    assert est.settings_["estimator"] == "increments" and est.dt_ == 1e-2


def test_fixed_beta_gives_same_psi(tracks1):
    a = IncrementsEstimator(hermite_elements=6).fit(tracks1)
    b = IncrementsEstimator(hermite_elements=6, beta=5.0).fit(tracks1)
    np.testing.assert_allclose(a.coef_, b.coef_)
    assert b.beta_ == 5.0 and b.settings_["beta_estimated"] == 0


def test_recovery_2d_reflecting(tracks2):
    """The fold of steps at the walls is modelled ('mirror'); ignoring it ruins the fit."""
    est = IncrementsEstimator(hermite_elements=3).fit(tracks2)
    assert rel_error(est, psi2, [-1, -1], [1, 1]) < 0.08
    assert est.beta_ == pytest.approx(2.0, rel=0.05)
    assert not est.hermite_.periodic and est.settings_["walls_mirrored"] == "x0,x1"
    naive = IncrementsEstimator(hermite_elements=3, walls="none").fit(tracks2)
    assert rel_error(naive, psi2, [-1, -1], [1, 1]) > 0.2
    drop = IncrementsEstimator(hermite_elements=2, walls="drop").fit(tracks2)
    assert rel_error(drop, psi2, [-0.7, -0.7], [0.7, 0.7]) < 0.1


def test_periodic_wrap_uses_minimal_image():
    """A 2-D periodic drift across the seam: with raw (unwrapped) increments the fit would be ruined."""
    def psi(x):
        return np.sin(PI * x[..., 0]) + 0.8 * np.cos(PI * x[..., 1])

    def grad(x):
        return np.stack([PI * np.cos(PI * x[..., 0]), -0.8 * PI * np.sin(PI * x[..., 1])], axis=-1)

    tr = make_tracks(grad, 2.0, 400, 300, 1e-2, [-1, -1], [1, 1], "periodic", 13)
    est = IncrementsEstimator(hermite_elements=3).fit(tr)
    assert rel_error(est, psi, [-1, -1], [1, 1]) < 0.1
    assert est.beta_ == pytest.approx(2.0, rel=0.03)


def test_walls_auto_leaves_axes_with_large_steps_alone(rng):
    """Independent uniform positions: steps ~ 0.4 of the box, no thin boundary layer to model."""
    v = rng.uniform(-1, 1, (2000, 1))
    seg = np.repeat(np.arange(100), 20)
    tr = TrackTable(v, seg, seg, np.tile(np.arange(20) * 0.1, 100), 0.1, ("v",), ("action",), -1, 1)
    assert IncrementsEstimator(hermite_elements=2).fit(tr).settings_["walls_mirrored"] == ""
    assert IncrementsEstimator(hermite_elements=2, walls="mirror").fit(tr).settings_["walls_mirrored"] == "v"


def test_drift_axes_subset(tracks2):
    """Regressing only axis 1 (by name or index) fits d psi / d y about as well as the full fit."""
    y = np.linspace(-0.8, 0.8, 30)
    pts = np.stack(np.meshgrid(y, y, indexing="ij"), axis=-1)
    true = grad2(pts)[..., 1]

    def err_y(est):
        return np.sqrt(np.mean((est.gradient(pts)[..., 1] - true) ** 2) / np.mean(true**2))

    full = IncrementsEstimator(hermite_elements=3).fit(tracks2)
    est = IncrementsEstimator(hermite_elements=3, drift_axes=["x1"]).fit(tracks2)
    assert err_y(est) < max(1.5 * err_y(full), 0.15)
    assert est.settings_["drift_axes"] == "x1"
    assert est.beta_ == pytest.approx(2.0, rel=0.05)
    by_index = IncrementsEstimator(hermite_elements=3, drift_axes=[1]).fit(tracks2)
    np.testing.assert_allclose(by_index.coef_, est.coef_)


def test_noise_correction():
    """Position noise of std s: raw increments bias beta and psi; the correction restores both."""
    s = 0.05
    tr = make_tracks(grad1, 3.0, 300, 800, 5e-3, -1.0, 1.0, "periodic", 14, noise=s)
    raw = IncrementsEstimator(hermite_elements=6).fit(tr)
    cor = IncrementsEstimator(hermite_elements=6, noise_correction=True).fit(tr)
    # raw: <dy^2> = 2 dt / beta + 2 s^2 -> beta ~ 1.7 instead of 3; drift shrunk by ~ 1 - s^2 beta / dt
    assert raw.beta_ < 2.0
    assert cor.beta_ == pytest.approx(3.0, rel=0.05)
    assert cor.localization_noise_ == pytest.approx(s, rel=0.1)
    assert rel_error(raw, psi1, -1, 1) > 0.5
    assert rel_error(cor, psi1, -1, 1) < 0.12


def test_bad_params(tracks1):
    for kwargs in ({"hermite_elements": "many"}, {"hermite_elements": 1}, {"hermite_elements": 2.5},
                   {"hermite_elements": (3, 3)}, {"beta": -1.0}, {"beta": "hot"}, {"ridge": -1.0},
                   {"drift_axes": ["z"]}, {"drift_axes": [3]}, {"drift_axes": []}, {"cv_folds": 1},
                   {"cv_rule": "median"}, {"fe_elements": 1, "hermite_elements": 4}, {"walls": "soft"},
                   {"wall_margin": -1}):
        with pytest.raises(FpirlInputError):
            IncrementsEstimator(**kwargs).fit(tracks1)
    with pytest.raises(FpirlInputError, match="TrackTable"):
        IncrementsEstimator().fit(np.zeros((10, 1)))
    single = TrackTable(np.zeros((3, 1)), [0, 1, 2], [0, 1, 2], [0.0, 0.0, 0.0], 0.1, ("x",), ("state",), -1, 1,
                        "periodic")
    with pytest.raises(FpirlInputError, match="consecutive"):
        IncrementsEstimator(hermite_elements=2).fit(single)
    one_track = tracks1.select_tracks([0])
    with pytest.raises(FpirlInputError, match="2 tracks"):
        IncrementsEstimator().fit(one_track)
    with pytest.raises(NotFittedError):
        IncrementsEstimator().potential(np.zeros((2, 1)))


def test_invariances(tracks1):
    """Translating the box and the data translates psi; reordering tracks or shifting time changes nothing."""
    base = IncrementsEstimator(hermite_elements=6).fit(tracks1)
    t = tracks1
    shifted = TrackTable(t.values + 5.0, t.segment, t.track, t.time + 100.0, t.dt, t.names, t.roles, t.lower + 5.0,
                         t.upper + 5.0, t.boundary)
    moved = IncrementsEstimator(hermite_elements=6).fit(shifted)
    x = np.linspace(-1, 0.99, 50)[:, None]
    np.testing.assert_allclose(moved.potential(x + 5.0), base.potential(x), atol=1e-9)
    assert moved.beta_ == pytest.approx(base.beta_, rel=1e-10)
    perm = np.random.default_rng(0).permutation(t.n_tracks)
    rows = np.concatenate([np.flatnonzero(t.track == k) for k in perm])
    new_id = np.argsort(perm)[t.track[rows]]
    reordered = TrackTable(t.values[rows], new_id, new_id, t.time[rows], t.dt, t.names, t.roles, t.lower, t.upper,
                           t.boundary)
    assert not np.array_equal(reordered.values, t.values)
    again = IncrementsEstimator(hermite_elements=6).fit(reordered)
    np.testing.assert_allclose(again.coef_, base.coef_, atol=1e-9)


def test_noise_correction_lag_two_for_differenced_noise():
    """Noise like that of velocities differenced from noisy positions (eta_k - eta_{k-1}): lag 2 is needed."""
    dt, steps, n, s = 5e-3, 600, 300, 0.02
    rng = np.random.default_rng(15)
    x = sample_sde(grad1, 3.0, rng.uniform(-1, 1, (n, 1)), dt, steps, rng, -1.0, 1.0, "periodic")
    eta = s * rng.standard_normal((steps + 2, n, 1))
    y = -1.0 + np.mod(x + eta[1:] - eta[:-1] + 1.0, 2.0)
    seg = np.repeat(np.arange(n), steps + 1)
    tr = TrackTable(y.transpose(1, 0, 2).reshape(-1, 1), seg, seg, np.tile(np.arange(steps + 1) * dt, n), dt,
                    ("v",), ("action",), -1.0, 1.0, "periodic")
    lag1 = IncrementsEstimator(hermite_elements=6, noise_correction=True).fit(tr)
    lag2 = IncrementsEstimator(hermite_elements=6, noise_correction=2).fit(tr)
    # the noise of an increment has variance 6 s^2 and autocovariances -4 s^2, s^2 at lags 1, 2
    assert lag2.beta_ == pytest.approx(3.0, rel=0.05)
    assert lag1.beta_ > 3.6  # lag 1 over-corrects by 2 s^2
    assert rel_error(lag2, psi1, -1, 1) < 0.15
    assert rel_error(lag2, psi1, -1, 1) < 0.5 * rel_error(lag1, psi1, -1, 1)
    assert lag2.settings_["noise_correction"] == 2
    with pytest.raises(FpirlInputError):
        IncrementsEstimator(hermite_elements=6, noise_correction=-1).fit(tr)


def test_fixed_beta_on_reflecting_tracks(tracks2):
    """beta given on reflecting tracks: the wall fold uses sigma = sqrt(2 dt / beta) and psi is recovered
    as well as with beta estimated (a wrong sigma in the fold biases psi near every wall)."""
    est = IncrementsEstimator(hermite_elements=3, beta=2.0).fit(tracks2)
    assert est.beta_ == 2.0 and est.settings_["walls_mirrored"] == "x0,x1"
    assert rel_error(est, psi2, [-1, -1], [1, 1]) < 0.08


def test_noise_correction_regressors_stay_within_their_track():
    """With noise_correction (lag L) every transition's regressor is the observation L rows before its
    start in the SAME track: the first L transitions of each track are left out (count known in advance),
    and the fit does not depend on the order of the tracks in the table (a regressor borrowed from the
    previous track would change with it)."""
    base = make_tracks(grad1, 3.0, 60, 20, 5e-3, -1.0, 1.0, "periodic", 21, noise=0.03)
    lengths = np.bincount(base.segment)
    for lag in (1, 2):
        est = IncrementsEstimator(hermite_elements=4, noise_correction=lag).fit(base)
        assert est.system_.n_transitions == np.sum(lengths - 1 - lag)
    t = base
    perm = np.random.default_rng(3).permutation(t.n_tracks)
    rows = np.concatenate([np.flatnonzero(t.track == k) for k in perm])
    new_id = np.argsort(perm)[t.track[rows]]
    reordered = TrackTable(t.values[rows], new_id, new_id, t.time[rows], t.dt, t.names, t.roles, t.lower, t.upper,
                           t.boundary)
    a = IncrementsEstimator(hermite_elements=4, noise_correction=2).fit(t)
    b = IncrementsEstimator(hermite_elements=4, noise_correction=2).fit(reordered)
    np.testing.assert_allclose(b.coef_, a.coef_, atol=1e-9)
    assert b.beta_ == pytest.approx(a.beta_, rel=1e-9)
