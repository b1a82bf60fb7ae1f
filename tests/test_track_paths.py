"""Track simulation at the edges of the fitted box (fpirl.forward.track_paths): velocities folded back at the
velocity box's edges, and the second lag's memory mirrored at every fold. Oracles: the stationary law of a
reflected diffusion (a formula), and the same model simulated with the walls out of reach."""

from __future__ import annotations

import numpy as np

from fpirl.forward.track_paths import sample_joint_tracks, sample_velocity_tracks

BETA = 2.0


def test_velocities_stay_in_the_box_where_psi_slopes_outwards(rng):
    """psi = -c a_x (+ a_y^2): the drift pushes a_x out of the velocity box [-V, V] everywhere. Folded at the
    edges, a_x reaches the reflected diffusion's stationary law exp(beta c a) on [-V, V], whose mean is
    V coth(lam V) - 1 / lam (lam = beta c); held at the edge value outside the box (before), it ran away."""
    c, v, dt, n, steps = 1.0, 1.0, 0.01, 2000, 400
    grad = lambda x: np.stack([0 * x[:, 0], 0 * x[:, 0], -c + 0 * x[:, 2], 2 * x[:, 3]], axis=1)  # noqa: E731
    x0 = np.concatenate([np.zeros((n, 2)), rng.uniform(-0.5, 0.5, (n, 2))], axis=1)
    big = 1e9  # position walls out of reach: the velocities are the position steps / dt
    pos = sample_velocity_tracks(grad, BETA, dt, x0, steps, [-big, -big, -v, -v], [big, big, v, v], "reflecting", rng)
    a = np.diff(pos, axis=0) / dt
    assert np.all(np.abs(a) <= v * (1 + 1e-9))
    lam = BETA * c
    want = v / np.tanh(lam * v) - 1.0 / lam  # 0.537
    np.testing.assert_allclose(a[-100:, :, 0].mean(), want, atol=0.03)


def _speeds(rng, wall: float, rho: float, n: int = 1500, steps: int = 200):
    """|position step| / dt of velocity OU tracks (psi = C |a|^2) between walls at +-wall, with the second lag."""
    C, dt = 1.5, 0.05
    grad = lambda x: np.concatenate([np.zeros_like(x[:, :2]), 2 * C * x[:, 2:]], axis=1)  # noqa: E731
    x0 = np.concatenate([rng.uniform(-wall, wall, (n, 2)) if wall < 1e6 else np.zeros((n, 2)),
                         rng.normal(0, np.sqrt(1 / (2 * C * BETA)), (n, 2))], axis=1)
    pos = sample_velocity_tracks(grad, BETA, dt, x0, steps, [-wall, -wall, -1e3, -1e3], [wall, wall, 1e3, 1e3],
                                 "reflecting", rng, None, rho)
    return np.linalg.norm(np.diff(pos, axis=0), axis=2) / dt


def test_second_lag_memory_is_mirrored_at_walls(rng):
    """Tracks that hit the walls every few frames (box 0.4 wide, speeds about 0.5): a fold flips the velocity,
    and the previous residual must flip with it. Unmirrored it read as twice the velocity and the lag threw the
    track back faster at every hit (speeds grew without bound). The speeds' RMS matches the same model with the
    walls out of reach (a fold keeps |a|; the folded frames' steps are a little shorter)."""
    rho = 0.6
    near = _speeds(rng, 0.2, rho)
    free = _speeds(rng, 1e9, rho)
    rms_near, rms_free = (float(np.sqrt(np.mean(s[-50:] ** 2))) for s in (near, free))
    assert 0.8 * rms_free < rms_near < 1.05 * rms_free
    assert near.max() < 10 * rms_free


def test_joint_tracks_are_the_free_chain_folded(rng):
    """No velocity actions, psi = 0 with a second lag: the chain is mirror symmetric, so with its memory mirrored
    at every fold the walled chain has the law of the free chain folded into the box (the triangle wave of
    period 2 L). Compared by the steps' RMS and lag-1 correlation (Monte Carlo error about 0.5%). Unmirrored,
    a fold read its overshoot as a residual: steps 16% too short (0.068 for 0.081), lag-1 correlation +0.10 for
    -0.02."""
    rho, dt, n, steps = 0.7, 0.01, 3000, 200
    lo, hi = -0.15, 0.15
    zero = lambda x: np.zeros_like(x)  # noqa: E731
    walled = sample_joint_tracks(zero, BETA, dt, rng.uniform(lo, hi, (n, 1)), steps, [lo], [hi], "reflecting",
                                 rng, None, rho)
    free = sample_joint_tracks(zero, BETA, dt, rng.uniform(lo, hi, (n, 1)), steps, [-1e9], [1e9], "reflecting",
                               rng, None, rho)
    length = hi - lo
    u = np.mod(free - lo, 2 * length)
    folded = lo + np.where(u <= length, u, 2 * length - u)
    assert np.all((walled >= lo) & (walled <= hi))

    def stats(x):
        d = np.diff(x[-60:, :, 0], axis=0)
        return np.sqrt(np.mean(d**2)), np.mean(d[1:] * d[:-1]) / np.mean(d**2)

    (rms_w, c_w), (rms_f, c_f) = stats(walled), stats(folded)
    np.testing.assert_allclose(rms_w, rms_f, rtol=0.03)
    np.testing.assert_allclose(c_w, c_f, atol=0.03)
