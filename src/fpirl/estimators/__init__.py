"""Estimators of the potential from tracked observations (:class:`~fpirl.tracks.TrackTable`).

Every estimator is a strategy object with the interface of :class:`fpirl.estimators.identify.PotentialEstimator`:
``Est(**params).fit(tracks) -> self`` with ``coef_``, ``beta_``, ``hermite_``, ``grid_``, ``penalty_``,
``residual_``, ``settings_``, ``dt_`` and ``potential``, ``gradient``, ``potential_on_grid``,
``gradient_on_grid``, ``result_extra``. ``TRACK_ESTIMATORS`` maps the CLI names to the classes.

The names are imported on first access (as in :mod:`fpirl`), so ``fpirl.estimators.identify`` (the
density fit) loads without the track estimators' modules.
"""

import importlib

#: public name -> submodule that defines it
_LAZY = {"IncrementsEstimator": ".increments", "TrackDensityEstimator": ".track_density"}

__all__ = ["IncrementsEstimator", "TRACK_ESTIMATORS", "TrackDensityEstimator"]


def __getattr__(name: str):
    if name == "TRACK_ESTIMATORS":
        value = {"increments": __getattr__("IncrementsEstimator"), "density": __getattr__("TrackDensityEstimator")}
    elif name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    else:
        raise AttributeError(f"module 'fpirl.estimators' has no attribute {name!r}")
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
