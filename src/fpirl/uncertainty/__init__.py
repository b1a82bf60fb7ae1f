"""Uncertainty of a fitted potential: the Bayesian VSI posterior, the snapshot-noise posterior,
the track bootstrap, credible bands and beta's interval.

The public names of the former module ``fpirl.uncertainty`` are re-exported here.
"""

from ._bands import credible_bands, fit_uncertainty, points_outside_bands, uncertainty_and_point, uncertainty_extra
from ._beta_point import corrected_beta_fit
from .estimate import (CoefficientPosterior, beta_at_coarser_resolution, coarser_elements, density_posterior,
                        estimate_uncertainty, increments_posterior, posterior, samples_posterior)

__all__ = ["CoefficientPosterior", "corrected_beta_fit", "beta_at_coarser_resolution", "coarser_elements", "credible_bands",
           "density_posterior", "estimate_uncertainty", "fit_uncertainty", "increments_posterior", "posterior",
           "points_outside_bands", "samples_posterior", "uncertainty_and_point", "uncertainty_extra"]
