"""Simulated tracks for the evaluation tests: an independent Euler-Maruyama sampler -> TrackTable."""

from __future__ import annotations

import numpy as np

from fpirl.simulate import sample_sde
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
    """Euler-Maruyama paths of dx = drift(x) dt + sqrt(2/beta) dW via fpirl.simulate.sample_sde."""
    return sample_sde(lambda x: -drift(x), beta, x0, dt, steps, rng, lower, upper, boundary)
