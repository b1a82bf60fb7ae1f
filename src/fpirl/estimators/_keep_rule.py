"""The rule by which the track cross-validation keeps an extension of the model (mobility, second lag,
per-track noise): its held-out gain over whole training tracks must exceed :data:`KEEP_SE` paired
standard errors over tracks and :data:`MIN_GAIN` nats per transition."""

from __future__ import annotations

import numpy as np

#: A degree > 0 is kept by the CV only when it beats degree 0 by this many paired standard errors over tracks.
KEEP_SE = 2.0
#: ... and by at least this much (nats per transition): smaller gains are not worth a second model
MIN_GAIN = 0.01


def beats(gain: float, se: float) -> bool:
    """Whether a mean held-out gain ``gain`` (nats per transition) with standard error ``se`` is kept."""
    return gain > max(KEEP_SE * se, MIN_GAIN)


def track_se(values: np.ndarray, track: np.ndarray) -> float:
    """Standard error over tracks of the mean of ``values`` (per-track sums, as the held-out scores)."""
    n = values.size
    _, inv = np.unique(track, return_inverse=True)
    m = int(inv.max()) + 1 if n else 0
    if m < 2:
        return float("inf")
    resid = np.bincount(inv, weights=values - values.mean(), minlength=m)
    return float(np.sqrt(m / (m - 1) * np.sum(resid**2)) / n)
