"""The evaluation interface every fitted potential estimator shares."""

from __future__ import annotations

import numpy as np

from ..core._errors import NotFittedError
from ..core._estimator import BaseEstimator
from ..core.grid import Grid


class FittedPotentialMixin(BaseEstimator):
    """Evaluation of a fitted potential ``psi = sum coef_ phi`` in ``hermite_`` (every estimator: the
    density VSI and the track estimators). Needs ``coef_``, ``hermite_`` and ``grid_``."""

    def _check_fitted(self):
        if not hasattr(self, "coef_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit first")

    def potential(self, points) -> np.ndarray:
        """psi at scattered points of shape ``(..., d)`` (zero mean over the domain)."""
        self._check_fitted()
        return self.hermite_.evaluate(self.coef_, points)

    def gradient(self, points) -> np.ndarray:
        """grad psi at scattered points, shape ``(..., d)``."""
        self._check_fitted()
        return self.hermite_.gradient(self.coef_, points)

    def potential_on_grid(self, grid: Grid | None = None) -> np.ndarray:
        """Nodal psi on ``grid`` (default: the result grid ``grid_``), zero mean over the domain."""
        self._check_fitted()
        grid = self.grid_ if grid is None else grid
        return self.hermite_.evaluate_grid(self.coef_, grid.coords)

    def gradient_on_grid(self, grid: Grid | None = None, axes=None) -> np.ndarray:
        """Nodal partial derivatives of psi, shape ``(len(axes), *grid.shape)`` (default all axes)."""
        self._check_fitted()
        grid = self.grid_ if grid is None else grid
        return self.hermite_.gradient_grid(self.coef_, grid.coords, axes)
