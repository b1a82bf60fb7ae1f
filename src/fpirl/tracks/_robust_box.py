"""The default (robust) box of :func:`fpirl.tracks.reading.read_tracks` (rule in its module docstring)."""

from __future__ import annotations

from statistics import NormalDist

import numpy as np

__all__ = ["ROBUST_COUNT", "ROBUST_EXTENSION", "ROBUST_QUANTILE", "robust_fences", "robust_limits"]

#: the default (robust) box: quantile levels p and 1 - p with p = ROBUST_QUANTILE from
#: ROBUST_COUNT / ROBUST_QUANTILE rows on, ROBUST_COUNT / n below (at most 25%), extended by
#: ROBUST_EXTENSION of their distance on each side at p = ROBUST_QUANTILE (docstring of :mod:`fpirl.tracks.reading`)
ROBUST_QUANTILE = 0.001
ROBUST_EXTENSION = 0.5
ROBUST_COUNT = 3


def robust_fences(n: int) -> tuple[float, float]:
    """Quantile level ``p`` and extension ``c`` of the default box for ``n`` observations (docstring of :mod:`fpirl.tracks.reading`).

    ``p = min(0.25, max(ROBUST_QUANTILE, ROBUST_COUNT / n))``, so that the quantiles never reach the
    two most extreme values at either end, and ``c = z(ROBUST_QUANTILE) / z(p) - 1/2`` (``z`` the
    upper standard normal quantile), so that for Gaussian data the fences ``q_lo - c S`` and
    ``q_hi + c S`` lie where they lie at ``p = ROBUST_QUANTILE`` (6.2 standard deviations out).
    """
    p = min(0.25, max(ROBUST_QUANTILE, ROBUST_COUNT / max(int(n), 1)))
    if p == ROBUST_QUANTILE:
        return p, ROBUST_EXTENSION
    z = NormalDist().inv_cdf
    return p, (1 + 2 * ROBUST_EXTENSION) / 2 * z(1 - ROBUST_QUANTILE) / z(1 - p) - 0.5


def robust_limits(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per column, the data range clipped to ``[q_lo - c S, q_hi + c S]`` with ``q_lo, q_hi`` the
    ``p`` and ``1 - p`` quantiles, ``S = q_hi - q_lo`` and ``p, c`` from :func:`robust_fences`: the
    default box before its margin."""
    p, c = robust_fences(x.shape[0])
    with np.errstate(over="ignore", invalid="ignore"):  # +-1e308: an infinite span, refused by the caller
        q_lo, q_hi = np.quantile(x, [p, 1 - p], axis=0)
        ext = c * (q_hi - q_lo)
    return np.maximum(x.min(axis=0), q_lo - ext), np.minimum(x.max(axis=0), q_hi + ext)
