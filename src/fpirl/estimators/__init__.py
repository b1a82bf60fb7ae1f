"""Estimators of the potential from tracked observations (:class:`~fpirl.tracks.TrackTable`).

Every estimator is a strategy object with the interface of :class:`fpirl.estimators.identify.PotentialEstimator`:
``Est(**params).fit(tracks) -> self`` with ``coef_``, ``beta_``, ``hermite_``, ``grid_``, ``penalty_``,
``residual_``, ``settings_``, ``dt_`` and ``potential``, ``gradient``, ``potential_on_grid``,
``gradient_on_grid``, ``result_extra``. :data:`TRACK_ESTIMATORS` maps the CLI names to the classes.
"""

from .track_density import TrackDensityEstimator
from .increments import IncrementsEstimator

TRACK_ESTIMATORS = {"increments": IncrementsEstimator, "density": TrackDensityEstimator}

__all__ = ["IncrementsEstimator", "TRACK_ESTIMATORS", "TrackDensityEstimator"]
