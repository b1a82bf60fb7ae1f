r"""Track-level statistics of observed and simulated tracks, with bootstrap bands over tracks.

The checks the cell-migration and crowd fields use to judge a motion model, computed on the
*state* (position) columns of a :class:`~fpirl.tracks.TrackTable`, per segment (consecutive frames;
periodic axes unwrapped by minimal-image steps). With ``v_k = (s_{k+1} - s_k) / dt``:

* mean-squared displacement :math:`\mathrm{MSD}(\tau) = \langle |s_{k+\tau} - s_k|^2\rangle`
  over every pair of one segment ``tau`` frames apart, ``tau = 1 .. max_lag``;
* normalised velocity autocorrelation
  :math:`\mathrm{VACF}(\tau) = \langle v_k \cdot v_{k+\tau}\rangle / \langle |v_k|^2\rangle`;
* the distribution of the speed :math:`|v_k|` and of the turning angle between ``v_k`` and
  ``v_{k+1}`` (signed, in ``(-pi, pi]``, with two state axes; unsigned, in ``[0, pi]``, otherwise),
  as histogram densities normalised by all samples (speeds beyond the last bin count in the
  total, not in a bin).

Bands are percentile intervals (default 95%) of the statistic recomputed on tracks resampled with
replacement (the tracks are the independent units). :func:`compare_tracks` puts a simulation next
to the data: for each statistic the fraction of lags (bins) where the simulated value lies inside
the observed band, and one number, the mean of ``|sim - obs| / h`` with ``h`` the half-widths of
both bands added in quadrature (about 1 or less: the two agree within their sampling noise).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from ..core._errors import FpirlInputError

__all__ = ["STATISTICS", "TrackStatistics", "compare_tracks", "default_max_lag", "track_statistics"]

#: names of the statistics, in report order
STATISTICS = ("msd", "vacf", "speed", "turning_angle")
#: cap of the default largest lag (frames)
MAX_LAG_CAP = 100


@dataclass
class TrackStatistics:
    """MSD, VACF, speed and turning-angle histograms of a table, each with its bootstrap band.

    ``curves[name] = (x, value, lo, hi)``: lags in time units (MSD, VACF) or bin centres (speed,
    turning angle; histogram densities); ``lo, hi`` the band. ``edges`` holds the histogram bins.
    """

    curves: dict
    edges: dict
    n_tracks: int
    dt: float
    samples: dict = field(repr=False, default_factory=dict)


def _segments(table):
    """Unwrapped positions' cumulative steps ``C`` (row j: sum of steps up to j) and segment ids."""
    S = list(table.state_axes)
    if not S:
        raise FpirlInputError("track statistics need state (position) axes")
    x = table.values[:, S]
    step = np.zeros_like(x)
    step[1:] = np.diff(x, axis=0)
    if table.periodic:
        length = (table.upper - table.lower)[S]
        step -= length * np.round(step / length)
    return np.cumsum(step, axis=0), table.segment


def default_max_lag(table) -> int:
    """Half the median segment length in frames, at least 1, at most :data:`MAX_LAG_CAP`."""
    lengths = np.bincount(table.segment)
    return int(np.clip(np.median(lengths[lengths > 0]) // 2, 1, MAX_LAG_CAP))


def _lagged_sums(values_fn, seg, track, n_tracks, max_lag):
    """Per-track sums and counts of ``values_fn(i, i + tau)`` over pairs of one segment, ``(n_tracks, L)``."""
    sums = np.zeros((n_tracks, max_lag))
    counts = np.zeros((n_tracks, max_lag))
    n = seg.size
    for k, tau in enumerate(range(1, max_lag + 1)):  # one vectorised pass per lag
        if tau >= n:
            break
        i = np.flatnonzero(seg[tau:] == seg[:-tau])
        if i.size:
            sums[:, k] = np.bincount(track[i], weights=values_fn(i, i + tau), minlength=n_tracks)
            counts[:, k] = np.bincount(track[i], minlength=n_tracks)
    return sums, counts


def _band(boot, level):
    """Bootstrap percentile band per column of ``boot`` over its finite rows; NaN (and no numpy
    warning) for a column without any finite value, e.g. a lag that no segment reaches."""
    q = 50 * (1 - level)
    lo = np.full(boot.shape[1:], np.nan)
    hi = lo.copy()
    some = np.isfinite(boot).any(axis=0)
    if np.any(some):
        lo[some], hi[some] = np.nanpercentile(boot[:, some], [q, 100 - q], axis=0)
    return lo, hi


def _ratio_band(sums, counts, weights, level):
    """Point estimate ``sum(S)/sum(N)`` per column and its bootstrap percentile band."""
    with np.errstate(invalid="ignore", divide="ignore"):
        value = sums.sum(0) / counts.sum(0)
        boot = (weights @ sums) / (weights @ counts)
    lo, hi = _band(boot, level) if boot.size else (value, value)
    return value, lo, hi


def _velocities(table):
    """Step velocities ``v_k`` (rows k with a next row in the segment), their segment and track."""
    C, seg = _segments(table)
    i = np.flatnonzero(seg[1:] == seg[:-1])
    v = (C[i + 1] - C[i]) / table.dt
    return v, i


def _angles(v, i, seg):
    j = np.flatnonzero((i[1:] == i[:-1] + 1) & (seg[i[1:]] == seg[i[:-1]]))
    a, b = v[j], v[j + 1]
    if v.shape[1] == 2:
        ang = np.arctan2(a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0], np.einsum("ij,ij->i", a, b))
    else:
        na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
        ok = (na > 0) & (nb > 0)
        j, a, b, na, nb = j[ok], a[ok], b[ok], na[ok], nb[ok]
        ang = np.arccos(np.clip(np.einsum("ij,ij->i", a, b) / (na * nb), -1.0, 1.0))
    return ang, i[j]


def _hist_band(samples, rows_track, edges, n_tracks, weights, level):
    """Histogram density of ``samples`` on ``edges`` and its bootstrap band over tracks."""
    nb = edges.size - 1
    b = np.searchsorted(edges, samples, side="right") - 1
    b[samples == edges[-1]] = nb - 1
    inside = (b >= 0) & (b < nb)
    H = np.zeros((n_tracks, nb))
    np.add.at(H, (rows_track[inside], b[inside]), 1.0)
    n_all = np.bincount(rows_track, minlength=n_tracks).astype(float)  # out-of-range samples count in the total
    width = np.diff(edges)
    total = n_all.sum()
    value = H.sum(0) / (total * width) if total else np.zeros(nb)
    boot = weights @ H
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = boot / ((weights @ n_all)[:, None] * width)
    lo, hi = _band(boot, level)
    return value, lo, hi


def track_statistics(table, *, max_lag: int | None = None, edges: dict | None = None, n_boot: int = 200,
                     level: float = 0.95, random_state=0) -> TrackStatistics:
    r"""MSD, VACF, speed and turning-angle distributions of ``table`` with bootstrap bands (module docstring).

    Parameters
    ----------
    table : TrackTable
    max_lag : int, optional
        Largest lag in frames (default :func:`default_max_lag`).
    edges : dict, optional
        ``{"speed": edges, "turning_angle": edges}`` histogram bins (default: 30 speed bins up to
        the 99.5% quantile of the speeds, 24 angle bins).
    n_boot : int
        Bootstrap resamples of the tracks.
    level : float
        Coverage of the bands.
    random_state : int or Generator

    Returns
    -------
    TrackStatistics
    """
    if not 0 < level < 1:
        raise FpirlInputError(f"level must be in (0, 1), got {level}")
    max_lag = default_max_lag(table) if max_lag is None else int(max_lag)
    if max_lag < 1:
        raise FpirlInputError(f"max_lag must be a positive number of frames, got {max_lag}")
    n_tracks = table.n_tracks
    rng = np.random.default_rng(random_state)
    weights = rng.multinomial(n_tracks, np.full(n_tracks, 1.0 / n_tracks), size=int(n_boot)).astype(float)
    C, seg = _segments(table)
    track = table.track
    lags = table.dt * np.arange(1, max_lag + 1)
    curves = {}
    s, c = _lagged_sums(lambda i, j: np.sum((C[j] - C[i]) ** 2, axis=1), seg, track, n_tracks, max_lag)
    curves["msd"] = (lags,) + _ratio_band(s, c, weights, level)

    v, vi = _velocities(table)
    if vi.size == 0:
        raise FpirlInputError("track statistics need segments of two or more observations")
    vseg, vtrack = seg[vi], track[vi]
    s0 = np.bincount(vtrack, weights=np.sum(v * v, axis=1), minlength=n_tracks)
    n0 = np.bincount(vtrack, minlength=n_tracks).astype(float)
    # the velocity rows of one segment are consecutive frames: pairs tau apart in velocity index
    sv, cv = _lagged_sums(lambda i, j: np.einsum("ij,ij->i", v[i], v[j]), vseg, vtrack, n_tracks, max_lag)
    with np.errstate(invalid="ignore", divide="ignore"):
        value = (sv.sum(0) / cv.sum(0)) / (s0.sum() / n0.sum())
        boot = ((weights @ sv) / (weights @ cv)) / ((weights @ s0) / (weights @ n0))[:, None]
    lo, hi = _band(boot, level)
    curves["vacf"] = (lags, value, lo, hi)

    speed = np.linalg.norm(v, axis=1)
    ang, ai = _angles(v, vi, seg)
    signed = v.shape[1] == 2
    edges = dict(edges or {})
    if "speed" not in edges:
        top = float(np.quantile(speed, 0.995)) if speed.size else 1.0
        edges["speed"] = np.linspace(0.0, top if top > 0 else 1.0, 31)
    if "turning_angle" not in edges:
        edges["turning_angle"] = np.linspace(-np.pi if signed else 0.0, np.pi, 25 if signed else 13)
    for name, samp, tr in (("speed", speed, vtrack), ("turning_angle", ang, track[ai])):
        e = np.asarray(edges[name], dtype=float)
        centres = 0.5 * (e[1:] + e[:-1])
        if samp.size == 0:
            nan = np.full(centres.size, np.nan)
            curves[name] = (centres, nan, nan, nan)
            continue
        curves[name] = (centres,) + _hist_band(samp, tr, e, n_tracks, weights, level)
    return TrackStatistics(curves, edges, n_tracks, table.dt, {"speed": speed, "turning_angle": ang})


def _ks(a, b) -> float:
    """Two-sample Kolmogorov-Smirnov statistic ``max |F_a - F_b|``."""
    if a.size == 0 or b.size == 0:
        return float("nan")
    a, b = np.sort(a), np.sort(b)
    x = np.concatenate([a, b])
    return float(np.max(np.abs(np.searchsorted(a, x, side="right") / a.size
                               - np.searchsorted(b, x, side="right") / b.size)))


def compare_tracks(observed, simulated, *, max_lag: int | None = None, n_boot: int = 200, level: float = 0.95,
                   random_state=0) -> tuple[dict, TrackStatistics, TrackStatistics]:
    """Observed against simulated track statistics on the same lags and bins (module docstring).

    Parameters
    ----------
    observed, simulated : TrackTable
        Same state axes and ``dt``.
    max_lag, n_boot, level, random_state
        As :func:`track_statistics` (lags and bins from the observed table); a ``max_lag`` beyond
        the longest observed segment is cut to it with a warning (larger lags have no data). Lags
        or bins without data in either table are NaN and left out of the summary.

    Returns
    -------
    summary : dict
        ``{name: {"inside_band": fraction, "discrepancy": mean |sim - obs| / h}}``, plus ``"ks"``
        (two-sample Kolmogorov-Smirnov statistic) for the distributions.
    obs, sim : TrackStatistics
    """
    S_o = [observed.names[i] for i in observed.state_axes]
    S_s = [simulated.names[i] for i in simulated.state_axes]
    if len(S_o) != len(S_s):
        raise FpirlInputError(f"observed tracks have {len(S_o)} position axes ({', '.join(S_o)}), the simulated "
                              f"ones {len(S_s)} ({', '.join(S_s)})")
    if not np.isclose(observed.dt, simulated.dt, rtol=1e-6):
        raise FpirlInputError(f"observed dt={observed.dt:g} differs from the simulated dt={simulated.dt:g} (a fit with "
                              "--stride simulates at the thinned step: pass --result RESULT.nc to read the data as "
                              "the fit did)")
    max_lag = default_max_lag(observed) if max_lag is None else int(max_lag)
    longest = int(np.bincount(observed.segment).max()) - 1 if observed.n_obs else 0  # frames
    if max_lag > longest >= 1:
        warnings.warn(f"max_lag {max_lag} exceeds the longest observed segment ({longest} steps): the lags stop "
                      f"at {longest} (larger lags have no data)", stacklevel=2)
        max_lag = longest
    obs = track_statistics(observed, max_lag=max_lag, n_boot=n_boot, level=level, random_state=random_state)
    sim = track_statistics(simulated, max_lag=max_lag, edges=obs.edges, n_boot=n_boot, level=level,
                           random_state=random_state)
    summary = {}
    for name in STATISTICS:
        _, o, olo, ohi = obs.curves[name]
        _, s, slo, shi = sim.curves[name]
        ok = np.isfinite(o) & np.isfinite(s) & np.isfinite(olo) & np.isfinite(ohi)
        h = np.hypot(0.5 * (ohi - olo), 0.5 * (np.nan_to_num(shi) - np.nan_to_num(slo)))
        use = ok & (h > 0)
        entry = {
            "inside_band": float(np.mean((s[ok] >= olo[ok]) & (s[ok] <= ohi[ok]))) if ok.any() else float("nan"),
            "discrepancy": float(np.mean(np.abs(s[use] - o[use]) / h[use])) if use.any() else float("nan"),
        }
        if name in obs.samples:
            entry["ks"] = _ks(obs.samples[name], sim.samples[name])
        summary[name] = entry
    return summary, obs, sim
