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


class FitWarning(UserWarning):
    """A fit whose numbers should not be trusted as they are (:mod:`fpirl.evaluation.plausibility`)."""


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
    return notes


def warn_implausible(tracks, beta, drift_axes, n_coef, n_rows, stacklevel: int = 3) -> list[str]:
    """Issue :func:`plausibility_notes` as :class:`FitWarning` s; returns them."""
    notes = plausibility_notes(tracks, beta, drift_axes, n_coef, n_rows)
    for note in notes:
        warnings.warn(note, FitWarning, stacklevel=stacklevel)
    return notes
