"""Plausibility rules of a track fit (see :mod:`fpirl.evaluation.plausibility` for the documentation);
here, in the estimators' room, so that the estimators can warn without importing the evaluation room."""

from __future__ import annotations

import warnings

import numpy as np

#: fewer tracks than this: warn
MIN_TRACKS = 2
#: fewer regression rows per fitted coefficient than this: warn
MIN_ROWS_PER_PARAM = 5
#: 2 dt / beta above this multiple of the raw increment variance: warn
MAX_NOISE_RATIO = 2.0
#: ... or below this fraction of it
MIN_NOISE_RATIO = 1e-3
#: time-unit rule: a frame interval of at least this many time units ...
TIME_UNIT_MIN_DT = 10.0
#: ... with the tracks moving (RMS step / dt) less than this many position resolutions per time unit
TIME_UNIT_RESOLUTIONS = 20.0
#: steps (RMS) within this many position resolutions of the recorded precision: warn
MIN_STEP_RESOLUTIONS = 3.0


class FitWarning(UserWarning):
    """A fit whose numbers should not be trusted as they are (:mod:`fpirl.evaluation.plausibility`)."""


#: a smallest gap counts as the positions' quantum only when it is this many times the smallest gap that ``n``
#: values spread at random over their range ``R`` would show, ``R / n^2`` (:func:`position_resolution`)
QUANTUM_EVIDENCE = 10.0


def position_resolution(tracks, axes) -> float:
    """The data's own position precision: per axis the smallest positive gap between distinct recorded
    values (the quantum of rounded or pixel coordinates), the median over ``axes``; 0 when unknown.

    An axis counts only where that gap is evidence of a quantum: at least :data:`QUANTUM_EVIDENCE` times
    ``R / n^2``, the smallest gap of ``n`` values spread at random over their range ``R``. A short table of
    unrounded values has few distinct values and a wide smallest gap by chance (50 rows of BT549 cells: 0.3 px,
    which made the time-unit rule call minutes milliseconds)."""
    gaps = []
    for j in axes:
        u = np.unique(tracks.values[:, j])
        d = np.diff(u)
        d = d[d > 0]
        if d.size and d.min() >= QUANTUM_EVIDENCE * (u[-1] - u[0]) / u.size**2:
            gaps.append(float(d.min()))
    return float(np.median(gaps)) if gaps else 0.0


def scale_notes(tracks) -> list[str]:
    """The time-unit and precision rules (:mod:`fpirl.evaluation.plausibility`), from the table alone."""
    S = list(tracks.state_axes)
    i0, i1 = tracks.pairs()
    if not S or i0.size == 0:
        return []
    ds = tracks.values[i1][:, S] - tracks.values[i0][:, S]
    if tracks.periodic:
        length = (tracks.upper - tracks.lower)[S]
        ds -= length * np.round(ds / length)
    step = float(np.sqrt(np.mean(np.sum(ds * ds, axis=1))))
    res = position_resolution(tracks, S)
    if not (step > 0 and res > 0):
        return []
    notes, dt = [], float(tracks.dt)
    if step < MIN_STEP_RESOLUTIONS * res:
        notes.append(f"the RMS step between observations, {step:.3g}, is within {MIN_STEP_RESOLUTIONS:g} times the "
                     f"precision of the positions, {res:.3g}: the increments are mostly rounding; check the position "
                     "units, subsample the frames, or use --second-lag on")
    per_unit = step / dt
    if dt >= TIME_UNIT_MIN_DT and per_unit < TIME_UNIT_RESOLUTIONS * res:
        notes.append(f"dt={dt:g} time units between frames, and the tracks move {per_unit:.3g} (RMS) per time unit, "
                     f"under {TIME_UNIT_RESOLUTIONS:g} times the precision of the positions ({res:.3g}): the time "
                     "column is probably in a finer unit than the motion (times in ms? convert the time column to "
                     "seconds, e.g. divide it by 1000, and refit); beta and every rate are in the time unit given")
    return notes


def plausibility_notes(tracks, beta: float, drift_axes, n_coef: int, n_rows: int) -> list[str]:
    """The rules of the module doc that fail, one line each (empty when the fit looks plausible)."""
    notes = []
    if tracks.n_tracks < MIN_TRACKS:
        notes.append(f"only {tracks.n_tracks} track: beta and psi come from a single path and nothing can be "
                     "cross-validated; fit more tracks")
    if n_rows < MIN_ROWS_PER_PARAM * n_coef:
        notes.append(f"{n_rows} regression rows for {n_coef} coefficients (fewer than {MIN_ROWS_PER_PARAM} per "
                     "coefficient): psi fits the noise and beta is inflated; use fewer Hermite elements or "
                     "--hermite-elements auto")
    i0, i1 = tracks.pairs()
    if i0.size:
        dx = tracks.values[i1][:, list(drift_axes)] - tracks.values[i0][:, list(drift_axes)]
        if tracks.periodic:
            length = (tracks.upper - tracks.lower)[list(drift_axes)]
            dx -= length * np.round(dx / length)
        raw = float(np.mean(dx * dx))
        model = 2.0 * tracks.dt / float(beta)
        if raw > 0:
            ratio = model / raw
            if ratio > MAX_NOISE_RATIO or ratio < MIN_NOISE_RATIO:
                why = ("beta is too small for these increments (another unit of time or length?)"
                       if ratio > MAX_NOISE_RATIO else
                       "the drift would explain over 99.9% of the increments: overfitting, beta in other units, "
                       "or dt not the interval between the observations")
                notes.append(f"beta={beta:.4g} with dt={tracks.dt:g} gives a per-step noise variance 2 dt/beta = "
                             f"{model:.3g}, {ratio:.3g} times the data's own mean squared increment {raw:.3g}: {why}")
    notes.extend(scale_notes(tracks))
    return notes


def warn_implausible(tracks, beta, drift_axes, n_coef, n_rows, stacklevel: int = 3) -> list[str]:
    """Issue :func:`plausibility_notes` as :class:`FitWarning` s; returns them."""
    notes = plausibility_notes(tracks, beta, drift_axes, n_coef, n_rows)
    for note in notes:
        warnings.warn(note, FitWarning, stacklevel=stacklevel)
    return notes
