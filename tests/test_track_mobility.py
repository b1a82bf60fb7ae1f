"""Track simulation with the fitted mobility g and second lag rho (the model ``fpirl evaluate`` scores):
the simulated increments' conditional variance follows g, and their residuals' lag-1 correlation is rho.
Oracles: the formulas of the one-step model written out here, not the simulator's helpers."""

from __future__ import annotations

import numpy as np

from fpirl.estimators.mobility import Mobility
from fpirl.forward.track_paths import sample_joint_tracks, sample_velocity_tracks

C, BETA, DT, VBOX = 1.5, 2.0, 0.05, 3.0


def _grad(x):  # psi = C |a|^2 on (s_x, s_y, a_x, a_y)
    return np.concatenate([np.zeros_like(x[:, :2]), 2 * C * x[:, 2:]], axis=1)


def _velocities(rng, mobility=None, rho=None, n=6000, steps=4, dt=DT):
    a0 = rng.normal(0, np.sqrt(1 / (2 * C * BETA)), (n, 2))
    x0 = np.concatenate([np.zeros((n, 2)), a0], axis=1)
    big = 1e6  # walls out of reach
    pos = sample_velocity_tracks(_grad, BETA, dt, x0, steps, [-big, -big, -VBOX, -VBOX], [big, big, VBOX, VBOX],
                                 "reflecting", rng, mobility, rho)
    return np.concatenate([a0[None], np.diff(pos, axis=0) / dt])  # a_0 .. a_steps


def test_simulated_noise_follows_the_mobility(rng):
    k = 2.0  # log g = k u, u = a_x on the mobility box [-1, 1] (Legendre P_1), so d log g / d a_x = k inside it
    mob = Mobility((2, 3), np.array([-1.0, -1.0]), np.array([1.0, 1.0]), 1, np.array([0.0, 0.0, k]))
    dt = 0.008  # the one-step map never overshoots (max d eff / d a dt ~ 0.4 < 1: no substeps, the scored Gaussian)
    a = _velocities(rng, mob, dt=dt)
    ak, an = a[:-1].reshape(-1, 2), a[1:].reshape(-1, 2)
    g = np.exp(k * np.clip(ak[:, 0], -1, 1))
    inside = np.abs(ak[:, 0]) < 1
    drift = -g[:, None] * 2 * C * ak
    drift[:, 0] += np.where(inside, g * k / BETA, 0.0)
    z = (an - ak - drift * dt) / np.sqrt(2 * dt * g / BETA)[:, None]  # ~ N(0, 1) under the formula
    lo, hi = g < np.quantile(g, 0.2), g > np.quantile(g, 0.8)
    for sel in (lo, hi):
        np.testing.assert_allclose(z[sel].var(axis=0), 1.0, rtol=0.06)
        np.testing.assert_allclose(z[sel].mean(axis=0), 0.0, atol=0.05)
    # the raw increments really differ: their variance ratio is the ratio of the mobilities
    r = an - ak - drift * dt
    ratio = r[hi].var() / r[lo].var()
    np.testing.assert_allclose(ratio, g[hi].mean() / g[lo].mean(), rtol=0.1)
    assert ratio > 3.0
    # without the mobility the noise is flat (the check can fail)
    a1 = _velocities(rng)
    r1 = a1[1:].reshape(-1, 2) - a1[:-1].reshape(-1, 2) * (1 - 2 * C * DT)
    x1 = a1[:-1].reshape(-1, 2)[:, 0]
    assert 0.9 < r1[x1 > np.quantile(x1, 0.8)].var() / r1[x1 < np.quantile(x1, 0.2)].var() < 1.1


def test_simulated_residuals_follow_the_second_lag(rng):
    rho = 0.6
    a = _velocities(rng, rho=rho, steps=5)
    r = a[1:] - a[:-1] * (1 - 2 * C * DT)  # residuals r_k, k = 0..4
    sigma2 = 2 * DT / BETA
    np.testing.assert_allclose(r.reshape(-1, 2).var(axis=0), sigma2, rtol=0.05)  # marginal noise kept
    corr = [np.corrcoef(r[k].ravel(), r[k + 1].ravel())[0, 1] for k in range(4)]
    np.testing.assert_allclose(corr, rho, atol=0.04)
    assert abs(np.corrcoef(r[0].ravel(), r[2].ravel())[0, 1] - rho**2) < 0.04  # AR(1): rho^2 at lag 2


def test_joint_tracks_with_mobility_and_lag(rng):
    """No velocity actions: the same Gaussian on every axis, g on the drift coordinate."""
    k, rho, n = 1.0, -0.4, 5000
    mob = Mobility((0,), np.array([-1.0]), np.array([1.0]), 1, np.array([0.0, k]))
    x = sample_joint_tracks(lambda x: np.zeros_like(x), BETA, DT, rng.uniform(-0.9, 0.9, (n, 1)), 2, [-50.0], [50.0],
                            "reflecting", rng, mob, rho)
    g = np.exp(k * np.clip(x[:, :, 0], -1, 1))
    glg = np.where(np.abs(x[:, :, 0]) < 1, k, 0.0)
    r = np.diff(x[:, :, 0], axis=0) - (g * glg / BETA)[:-1] * DT  # residuals r_0, r_1
    z0 = r[0] / np.sqrt(2 * DT * g[0] / BETA)
    np.testing.assert_allclose(z0.var(), 1.0, rtol=0.06)
    shift = rho * np.sqrt(g[1] / g[0]) * r[0]
    z1 = (r[1] - shift) / np.sqrt((1 - rho**2) * 2 * DT * g[1] / BETA)
    np.testing.assert_allclose(z1.var(), 1.0, rtol=0.06)
    assert abs(np.corrcoef(z0, z1)[0, 1]) < 0.05


def test_overshooting_steps_are_simulated_on_substeps(rng):
    """psi = k |a|^2 / 2 with k dt = 2.5: the one-step map 1 - k dt = -1.5 overshoots (the Euler chain diverges).
    The simulator takes n = ceil(k dt) = 3 substeps h = dt / 3, whose stationary velocity variance
    is the Euler-Maruyama one of step h, 1 / (beta k (1 - k h / 2)) (oracle: the AR(1) formula)."""
    k, dt, beta, n = 25.0, 0.1, 2.0, 4000
    grad = lambda x: np.concatenate([np.zeros_like(x[:, :2]), k * x[:, 2:]], axis=1)  # noqa: E731
    x0 = np.concatenate([np.zeros((n, 2)), rng.normal(0, np.sqrt(1 / (beta * k)), (n, 2))], axis=1)
    pos = sample_velocity_tracks(grad, beta, dt, x0, 12, [-1e9] * 2 + [-1e3] * 2, [1e9] * 2 + [1e3] * 2,
                                 "reflecting", rng)
    a = np.diff(pos, axis=0) / dt
    h = dt / 3
    want = 1.0 / (beta * k * (1 - k * h / 2))
    np.testing.assert_allclose(a[-4:].reshape(-1, 2).var(axis=0), want, rtol=0.05)
    # the one-step Euler variance would be negative (no stationary law): the substeps are what keeps it finite
    assert (1 - k * dt) ** 2 > 1
