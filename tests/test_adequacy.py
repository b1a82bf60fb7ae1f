"""Helmholtz split of the drift: 0 for gradient drifts, the known fraction for an added rotation."""

from __future__ import annotations

import numpy as np
import pytest
from _simtracks import sde_tracks, table_from_paths, velocity_table

from fpirl import FpirlInputError
from fpirl.evaluation.adequacy import HelmholtzCheck

K, BETA, DT = 2.0, 4.0, 0.05
BOX = ([-2.0, -2.0], [2.0, 2.0])


def _ou_rotation_table(eps, seed):
    """dx = (-K x + eps J x) dt + sqrt(2/beta) dW started in its stationary law N(0, I / (beta K)).

    That law is isotropic, so the rotation J x is orthogonal to every gradient in the data-weighted
    norm and the non-gradient fraction of the drift is eps^2 / (K^2 + eps^2) exactly.
    """
    rng = np.random.default_rng(seed)

    def drift(x):
        return -K * x + eps * np.stack([-x[:, 1], x[:, 0]], axis=1)

    x0 = rng.normal(0.0, 1.0 / np.sqrt(BETA * K), size=(100, 2))
    paths = sde_tracks(drift, BETA, x0, DT, 200, rng, *BOX)
    return table_from_paths(paths, DT, ["x", "y"], ["state", "state"], *BOX)


@pytest.mark.parametrize("eps", [1.0, 2.0])
def test_rotation_at_known_strength(eps):
    check = HelmholtzCheck(n_boot=100).fit(_ou_rotation_table(eps, seed=int(10 * eps)))
    truth = eps**2 / (K**2 + eps**2)
    assert check.fraction_ == pytest.approx(truth, abs=0.04)
    lo, hi = check.interval_
    assert lo - 0.02 < truth < hi + 0.02
    assert lo <= check.fraction_ <= hi  # the interval is the replicates' shifted by their median bias
    assert check.violated_ == (lo > check.threshold)
    if eps == 2.0:
        assert check.violated_  # half of the drift energy is clearly not a gradient
    attrs = check.to_attrs()
    assert attrs["adequacy_nongradient_fraction"] == check.fraction_ and attrs["adequacy_drift_axes"] == "x,y"


def test_pure_gradient_drift_gives_zero():
    rng = np.random.default_rng(3)

    def drift(x):  # -grad of the tilted double well x^4 - x^2 + x y + y^2
        return -np.stack([4 * x[:, 0] ** 3 - 2 * x[:, 0] + x[:, 1], 2 * x[:, 1] + x[:, 0]], axis=1)

    paths = sde_tracks(drift, BETA, rng.uniform(-1, 1, (100, 2)), DT, 200, rng, *BOX)
    check = HelmholtzCheck(n_boot=100).fit(table_from_paths(paths, DT, ["x", "y"], ["state", "state"], *BOX))
    assert check.fraction_ < 0.02 and check.interval_[1] < 0.05
    assert check.raw_fraction_ >= check.fraction_  # the noise correction only removes noise energy
    assert not check.violated_
    assert "non-gradient fraction" in check.summary()


def test_velocity_tracks_check_the_velocity_drift():
    """Positions with velocity actions: only the velocity drift is split; a chiral turning
    (velocity rotated at rate omega) is not a gradient in velocity space."""
    rng = np.random.default_rng(4)
    dt, gam, omega, n = 0.1, 1.0, 1.0, 150
    v = np.zeros((120, n, 2))
    v[0] = rng.normal(0, 0.5, (n, 2))
    rot = np.array([[0.0, -1.0], [1.0, 0.0]])
    for k in range(1, 120):
        v[k] = v[k - 1] + dt * (-gam * v[k - 1] + omega * v[k - 1] @ rot.T) + np.sqrt(2 * dt / 4) * rng.normal(size=(n, 2))
    s = np.concatenate([np.zeros((1, n, 2)), v * dt]).cumsum(axis=0)
    lo, hi = s.min(axis=(0, 1)) - 0.1, s.max(axis=(0, 1)) + 0.1
    table = velocity_table(s, dt, ["x", "y"], lo, hi)
    check = HelmholtzCheck(degree=2, n_boot=50).fit(table)
    assert check.drift_names_ == ("v_x", "v_y")
    assert check.fraction_ == pytest.approx(omega**2 / (gam**2 + omega**2), abs=0.1)


def test_bad_input():
    table = _ou_rotation_table(0.0, 1)
    with pytest.raises(FpirlInputError, match="drift_axes"):
        HelmholtzCheck(drift_axes=[5]).fit(table)
    with pytest.raises(FpirlInputError, match="degree"):
        HelmholtzCheck(degree=0).fit(table)
    with pytest.raises(FpirlInputError, match="transitions"):
        HelmholtzCheck(degree=3).fit(table_from_paths(np.zeros((5, 1, 2)), DT, ["x", "y"], ["state", "state"], *BOX))


def test_pure_gradient_on_a_non_square_box():
    """Box [-2, 2] x [-0.5, 0.5]: the Legendre coordinates scale the axes differently, so the
    derivative matrices need each axis's own chain-rule factor 2 / length (equal sides hide it)."""
    rng = np.random.default_rng(4)
    box = ([-2.0, -0.5], [2.0, 0.5])

    def drift(x):  # -grad of psi = x^4 / 4 - x^2 / 2 + 4 x y + 10 y^2
        return -np.stack([x[:, 0] ** 3 - x[:, 0] + 4 * x[:, 1], 4 * x[:, 0] + 20 * x[:, 1]], axis=1)

    paths = sde_tracks(drift, BETA, rng.uniform([-1.5, -0.3], [1.5, 0.3], (100, 2)), 0.01, 200, rng, *box)
    check = HelmholtzCheck(n_boot=20).fit(table_from_paths(paths, 0.01, ["x", "y"], ["state", "state"], *box))
    assert check.fraction_ < 0.01, check.fraction_  # 0.0007 here; 0.11 without the factor


@pytest.mark.parametrize("scale", [1.0, 1e6])
def test_pure_diffusion_in_any_units_is_undefined_without_overflow(scale):
    """No drift (Brownian tracks): the debiased drift energy is not positive, so the fraction is undefined (nan) -
    in metres or in micrometres alike, with no division by a floor (the suite's np.seterr raises on overflow)."""
    rng = np.random.default_rng(5)
    steps = rng.normal(0.0, np.sqrt(2 * DT / BETA), size=(60, 40, 2))
    paths = np.concatenate([np.zeros((1, 40, 2)), np.cumsum(steps, axis=0)]) * scale
    lo, hi = np.min(paths) - scale, np.max(paths) + scale
    check = HelmholtzCheck(n_boot=20).fit(table_from_paths(paths, DT, ["x", "y"], ["state", "state"], [lo] * 2,
                                                           [hi] * 2))
    assert np.isnan(check.fraction_) and not check.violated_
