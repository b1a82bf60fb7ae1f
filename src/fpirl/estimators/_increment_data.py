"""Data of the increments regression: transitions, the fold at reflecting walls, the residual variance.

Helpers of :class:`fpirl.estimators.increments.IncrementsEstimator` (its module doc states the model).
"""

from __future__ import annotations

import numpy as np
import scipy.special

from ..core._errors import FpirlInputError
from ..tracks.table import TrackTable

#: Transitions evaluated for the explicit residual variance (noise correction, walls): at most
#: ``max(2^15, 2^22 / 4^d)`` (the cost is ``4^d`` basis values per transition); the relative error of
#: the noise-corrected variance is about ``sqrt(6 / n)``, 1.3% at 2^15.
VARIANCE_SAMPLE = 1 << 15
VARIANCE_BUDGET = 1 << 22


def _regression_data(tracks: TrackTable, lag: int):
    """Regressor points (``lag`` rows before the start), start points, increments and track of every
    transition whose regressor row lies in the same segment."""
    seg = tracks.segment
    i0 = np.arange(lag, tracks.n_obs - 1)
    i0 = i0[seg[i0 - lag] == seg[i0 + 1]]
    i1 = i0 + 1
    dx = tracks.values[i1] - tracks.values[i0]
    if tracks.periodic:
        length = tracks.upper - tracks.lower
        dx -= length * np.round(dx / length)
    return tracks.values[i0 - lag], tracks.values[i0], dx, tracks.track[i0]


def mirror_wall_terms(start: np.ndarray, lower, upper, sigma) -> tuple[np.ndarray, np.ndarray]:
    r"""Mean shift ``b`` and drift attenuation ``f`` of a Gaussian step folded at the nearer wall.

    For a start at distance ``delta`` from a wall and a step ``Z ~ N(m, sigma^2)`` folded back into
    the box, ``E[|delta + Z|] - delta = b(delta) + f(delta) m + O(m^2)`` with

    .. math::
        b = 2\sigma\varphi(\delta/\sigma) - 2\delta\Phi(-\delta/\sigma),\qquad
        f = 1 - 2\Phi(-\delta/\sigma),

    ``b`` pointing away from the wall. Returns ``b`` (signed, per axis) and ``f``.
    """
    d_lo = start - lower
    d_hi = upper - start
    delta = np.maximum(np.minimum(d_lo, d_hi), 0.0)
    sign = np.where(d_lo <= d_hi, 1.0, -1.0)
    z = delta / sigma
    tail = scipy.special.ndtr(-z)
    phi = np.exp(-0.5 * np.minimum(z, 40.0) ** 2) / np.sqrt(2.0 * np.pi)
    return sign * (2.0 * sigma * phi - 2.0 * delta * tail), 1.0 - 2.0 * tail


def increment_variance(tracks, space, coef, drift, rss, n_rows, margin, explicit,
                        lag) -> tuple[float, float | None]:
    """Per-axis variance of the increment noise, ``2 dt / beta``, from runs of ``lag + 1``
    transitions starting inside ``[lower + margin, upper - margin]`` (module doc); a strided
    sample of them is evaluated (:data:`VARIANCE_SAMPLE`). Also the localisation noise (with
    ``lag``, else None)."""
    dt = tracks.dt
    if not (lag or explicit):
        return rss * dt * dt / n_rows, None
    seg, values = tracks.segment, tracks.values
    inside = np.all((values >= tracks.lower + margin) & (values <= tracks.upper - margin), axis=1)
    i = np.arange(0, max(tracks.n_obs - lag - 1, 0))
    ok = seg[i] == seg[i + lag + 1]
    for j in range(lag + 1):
        ok &= inside[i + j]
    rows = i[ok]
    if rows.size == 0:
        raise FpirlInputError(f"no run of {lag + 2} consecutive observations away from the walls: "
                              "beta cannot be estimated; give beta")
    sample = max(VARIANCE_SAMPLE, VARIANCE_BUDGET // 4**tracks.ndim)
    rows = rows[:: max(1, rows.size // sample)]
    block = rows[:, None] + np.arange(lag + 1)[None, :]
    dx = values[block + 1] - values[block]
    if tracks.periodic:
        length = tracks.upper - tracks.lower
        dx -= length * np.round(dx / length)
    grad = space.gradient(coef, values[block].reshape(-1, tracks.ndim)).reshape(dx.shape)
    r = dx[..., drift] + dt * grad[..., drift]
    raw = float(np.mean(r[:, 0] ** 2))
    var = raw + 2.0 * sum(float(np.mean(r[:, 0] * r[:, j])) for j in range(1, lag + 1))
    noise = float(np.sqrt(max(0.5 * (raw - var), 0.0))) if lag else None
    return var, noise
