"""Simulated tracks for the evaluation tests: an independent Euler-Maruyama sampler -> TrackTable."""

from __future__ import annotations

import numpy as np

from fpirl.forward.markov import sample_sde
from fpirl.tracks import TrackTable


def table_from_paths(paths, dt, names, roles, lower, upper, boundary="reflecting"):
    """A TrackTable from sampled paths of shape (steps + 1, n_tracks, d) (one segment per track)."""
    steps1, n, d = paths.shape
    values = np.transpose(paths, (1, 0, 2)).reshape(-1, d)
    track = np.repeat(np.arange(n), steps1)
    time = np.tile(dt * np.arange(steps1), n)
    return TrackTable(values, track.copy(), track, time, dt, tuple(names), tuple(roles),
                      np.asarray(lower, float), np.asarray(upper, float), boundary)


def velocity_table(paths, dt, names, lower, upper):
    """State-only paths (steps + 1, n, d_s) -> table with velocity actions v_k = (s_k - s_{k-1}) / dt."""
    vel = np.diff(paths, axis=0) / dt
    joint = np.concatenate([paths[1:], vel], axis=2)
    vb = np.abs(vel).max() * 1.1
    d = paths.shape[2]
    return table_from_paths(joint, dt, list(names) + [f"v_{n}" for n in names], ["state"] * d + ["action"] * d,
                            list(lower) + [-vb] * d, list(upper) + [vb] * d)


def sde_tracks(drift, beta, x0, dt, steps, rng, lower, upper, boundary="reflecting"):
    """Euler-Maruyama paths of dx = drift(x) dt + sqrt(2/beta) dW via fpirl.forward.markov.sample_sde."""
    return sample_sde(lambda x: -drift(x), beta, x0, dt, steps, rng, lower, upper, boundary)


# --- periodic/reflecting tracks of a known potential for the track-estimator tests -----------------
PI = np.pi


def make_tracks(grad, beta, n_tracks, steps, dt, lower, upper, boundary, seed, noise=0.0):
    """Tracks of the Euler-Maruyama sampler (independent of the estimator), optional position noise."""
    rng = np.random.default_rng(seed)
    lower, upper = np.atleast_1d(lower).astype(float), np.atleast_1d(upper).astype(float)
    d = lower.size
    x = sample_sde(grad, beta, rng.uniform(lower, upper, (n_tracks, d)), dt, steps, rng, lower, upper, boundary)
    values = x.transpose(1, 0, 2).reshape(-1, d)
    if noise:
        values = values + noise * rng.standard_normal(values.shape)
        if boundary == "periodic":
            values = lower + np.mod(values - lower, upper - lower)
        else:
            values = np.clip(values, lower, upper)
    seg = np.repeat(np.arange(n_tracks), steps + 1)
    time = np.tile(np.arange(steps + 1) * dt, n_tracks)
    names = tuple(f"x{i}" for i in range(d))
    return TrackTable(values, seg, seg, time, dt, names, ("state",) * d, lower, upper, boundary)


def rel_error(est, psi, lower, upper, n=64):
    axes = [np.linspace(a, b, n) for a, b in zip(np.atleast_1d(lower), np.atleast_1d(upper))]
    pts = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1)
    p, q = est.potential(pts), psi(pts)
    p, q = p - p.mean(), q - q.mean()
    return np.sqrt(np.mean((p - q) ** 2) / np.mean(q**2))


# ---- 1-D periodic: psi = 0.6 cos(pi x) + 0.3 sin(2 pi x) ----------------------------------------


# 1-D periodic potential of the track-estimator tests: psi1 = 0.6 cos(pi x) + 0.3 sin(2 pi x)
def psi1(x):
    return 0.6 * np.cos(PI * x[..., 0]) + 0.3 * np.sin(2 * PI * x[..., 0])


def grad1(x):
    return np.stack([-0.6 * PI * np.sin(PI * x[..., 0]) + 0.6 * PI * np.cos(2 * PI * x[..., 0])], axis=-1)
