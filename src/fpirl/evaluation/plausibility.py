r"""Plausibility of a track fit: warnings when its numbers cannot be trusted.

Documented rules (each a :class:`FitWarning`, issued by :func:`warn_implausible` from the track
estimators' ``fit``, so the Python API and ``fpirl fit`` say the same):

* **too few data**: fewer than :data:`MIN_TRACKS` tracks (nothing to cross-validate over, and beta of
  one track is the noise of one path), or fewer than :data:`MIN_ROWS_PER_PARAM` regression rows per
  fitted coefficient (psi then interpolates the noise and beta is inflated);
* **beta against the data's own increments**: the model's per-step noise variance on the drift axes,
  ``2 dt / beta``, against the mean squared raw increment ``<|dx_D|^2> / |D|`` of the same
  transitions. A drift can explain part of the increments but never more than all of them, so the
  ratio lies in ``(0, 1]`` up to noise; a ratio above :data:`MAX_NOISE_RATIO` (beta too small: e.g. a
  ``beta`` carried over from data in other units) or below :data:`MIN_NOISE_RATIO` (the drift
  "explains" over 99.9% of the increments: overfitting, or a ``beta`` in other units, or ``dt`` not the
  interval of the increments) is flagged, with both numbers.

A choice that lowers the held-out score against the default is measured by
:func:`compare_with_default` (a 70/30 split of whole tracks, the held-out one-step log-likelihood
of :mod:`fpirl.evaluation.heldout`).
"""

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


def compare_with_default(tracks, cls, params: dict, default_params: dict, train_fraction: float = 0.7,
                         seed: int = 0) -> dict | None:
    """Held-out one-step log-likelihood of ``cls(**params)`` against ``cls_default(**default_params)``.

    Both are fitted on the same ``train_fraction`` of whole tracks and scored on the rest
    (:func:`fpirl.evaluation.heldout.heldout_loglik`, with the diffusion and persistent-random-walk
    baselines fitted on the same training tracks). ``default_params`` may carry ``'estimator'``: the
    class of the default (else ``cls``). Returns ``{'option', 'default', 'diffusion',
    'persistent_random_walk', 'se', 'transitions'}`` (``se``: standard error of option - default
    over held-out tracks), or None when the table is too small to split.
    """
    from ..core._errors import FpirlInputError
    from .baselines import fit_baselines
    from .heldout import fpirl_loglik, heldout_loglik

    if tracks.n_tracks < 4:
        return None
    default_params = dict(default_params)
    default_cls = default_params.pop("estimator", cls)
    train, test = tracks.split_tracks(train_fraction, seed)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            option = cls(**params).fit(train)
            default = default_cls(**default_params).fit(train)
            score = heldout_loglik(option, test, fit_baselines(train), check=False,
                                   extra={"default": lambda tr: fpirl_loglik(default, tr)})
    except FpirlInputError:
        return None
    ll = score.loglik
    return {"option": ll["fpirl"], "default": ll["default"], "diffusion": ll["diffusion"],
            "persistent_random_walk": ll["persistent_random_walk"], "se": score.difference_se("fpirl", "default"),
            "transitions": score.transitions}
