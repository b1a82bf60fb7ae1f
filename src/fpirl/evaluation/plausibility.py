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
  interval of the increments) is flagged, with both numbers;
* **time unit and precision** (:func:`scale_notes`, from the table alone). Every check of a fit against
  its own increments is unchanged when the time column is multiplied by a constant (beta, dt and the
  rates rescale together), so a time column in milliseconds is self-consistent; what gives it away is
  the data's own position precision ``r`` (per axis the smallest positive gap between recorded values,
  the median over the state axes). Flagged: a frame interval ``dt >= TIME_UNIT_MIN_DT`` (10) time units
  during which the tracks move, per time unit, less than ``TIME_UNIT_RESOLUTIONS`` (20) precisions
  (``RMS step / dt < 20 r``): over one time unit the motion would hardly be resolved, so the unit is
  probably finer than the motion (e.g. ms for 25 fps tracks); and an RMS step under
  ``MIN_STEP_RESOLUTIONS`` (3) precisions (the increments are mostly rounding). Both print their
  numbers and what to check. Positions stored at full floating-point precision never trigger them (the
  time unit cannot be recognised from such tracks).

A choice that lowers the held-out score against the default is measured by
:func:`compare_with_default` (a 70/30 split of whole tracks, the held-out one-step log-likelihood
of :mod:`fpirl.evaluation.heldout`).
"""

from __future__ import annotations

import warnings

from ..core._errors import FpirlInputError
from .baselines import fit_baselines
from .heldout import fpirl_loglik, heldout_loglik
from ..estimators._plausibility import (MAX_NOISE_RATIO, MIN_NOISE_RATIO, MIN_ROWS_PER_PARAM,  # noqa: F401
                                        MIN_STEP_RESOLUTIONS, MIN_TRACKS, TIME_UNIT_MIN_DT, TIME_UNIT_RESOLUTIONS,
                                        FitWarning, plausibility_notes, position_resolution, scale_notes,
                                        warn_implausible)


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
