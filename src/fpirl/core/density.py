"""Density snapshots on a finite-element grid, with validation of user data."""

from __future__ import annotations

import numpy as np

from ._errors import FpirlInputError
from .grid import Grid


class DensitySnapshots:
    """Time series of a probability density sampled at the nodes of a :class:`Grid`.

    Parameters
    ----------
    grid : Grid
        The finite-element grid whose nodes carry the values.
    times : array_like, shape (n_t,)
        Strictly increasing, uniformly spaced snapshot times (at least two).
    values : array_like, shape ``(n_t, *grid.shape)``
        Non-negative, finite density values at the nodes.

    Raises
    ------
    FpirlInputError
        On NaN/inf or negative values, shape mismatch, fewer than two snapshots, or
        non-uniform / non-increasing times.
    """

    def __init__(self, grid: Grid, times, values):
        values = np.asarray(values, dtype=float)
        times = np.asarray(times, dtype=float).ravel()
        if values.ndim != grid.ndim + 1 or values.shape[1:] != grid.shape:
            raise FpirlInputError(
                f"density has shape {values.shape}, expected (time, {', '.join(map(str, grid.shape))}) for {grid!r}"
            )
        if values.shape[0] < 2:
            raise FpirlInputError(f"need at least two density snapshots, got {values.shape[0]}")
        if times.size != values.shape[0]:
            raise FpirlInputError(f"{times.size} times for {values.shape[0]} snapshots")
        if not np.all(np.isfinite(values)):
            raise FpirlInputError("density contains NaN or infinite values")
        if not np.all(np.isfinite(times)):
            raise FpirlInputError("times contain NaN or infinite values")
        if np.any(values < 0):
            raise FpirlInputError(f"density has negative values (min {values.min():.3g})")
        steps = np.diff(times)
        if np.any(steps <= 0):
            raise FpirlInputError("times must be strictly increasing")
        if not np.allclose(steps, steps[0], rtol=1e-6, atol=0):
            raise FpirlInputError("snapshot times must be uniformly spaced")
        self.grid = grid
        self.times = times
        self.values = values

    @property
    def dt(self) -> float:
        """Time step between consecutive snapshots."""
        return float(self.times[1] - self.times[0])

    @property
    def n_times(self) -> int:
        return self.values.shape[0]

    def mass(self) -> np.ndarray:
        """Total mass of each snapshot (trapezoid rule, exact for the Q1 interpolant)."""
        return self.grid.integrate(self.values)

    def normalized(self) -> "DensitySnapshots":
        """Copy with every snapshot scaled to unit mass."""
        m = self.mass()
        if np.any(m <= 0):
            raise FpirlInputError("a density snapshot has zero total mass")
        return DensitySnapshots(self.grid, self.times, self.values / m.reshape((-1,) + (1,) * self.grid.ndim))

    def __repr__(self):
        return f"DensitySnapshots({self.n_times} snapshots, dt={self.dt:g}, {self.grid!r})"
