"""Uncertainty of a fitted potential: the Bayesian VSI posterior, the snapshot-noise posterior,
the track bootstrap, credible bands and beta's interval.

The public names of the former module ``fpirl.uncertainty`` are re-exported here.
"""

from ._bands import credible_bands, fit_uncertainty, uncertainty_extra
from .estimate import (CoefficientPosterior, beta_at_coarser_resolution, coarser_elements, density_posterior,
                        estimate_uncertainty, increments_posterior, posterior, samples_posterior)

__all__ = ["CoefficientPosterior", "beta_at_coarser_resolution", "coarser_elements", "credible_bands",
           "density_posterior", "estimate_uncertainty", "fit_uncertainty", "increments_posterior", "posterior",
           "samples_posterior", "uncertainty_extra"]
