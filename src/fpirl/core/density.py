"""Density snapshots on a finite-element grid, with validation of user data."""

from __future__ import annotations

import numpy as np

from ._errors import FpirlInputError
from .grid import Grid, check_scale


#: Negative values no larger than this fraction of their snapshot's maximum are rounding (of a forward
#: solver, an interpolation) and read as 0; anything more negative is an error.
ROUNDING_RTOL = 1e-10


def nonnegative(values: np.ndarray) -> np.ndarray:
    """``values`` ``(n_t, ...)`` with rounding negatives (:data:`ROUNDING_RTOL`) set to 0 (a copy only then);
    a one-line :class:`FpirlInputError` for NaN, infinite or clearly negative values."""
    if not np.all(np.isfinite(values)):
        raise FpirlInputError("density contains NaN or infinite values")
    if values.size and values.min() < 0:
        flat = values.reshape(values.shape[0], -1)
        tol = ROUNDING_RTOL * np.maximum(flat.max(axis=1), 0.0)
        if np.any(flat.min(axis=1) < -tol):
            k = int(np.argmax(flat.min(axis=1) < -tol))
            raise FpirlInputError(f"density has negative values (min {flat[k].min():.3g} in snapshot {k}, "
                                  f"whose maximum is {flat[k].max():.3g})")
        values = np.maximum(values, 0.0)
    return values


def check_uniform_times(times: np.ndarray) -> None:
    """One-line error unless ``times`` are finite and increase strictly with one step: every step within ``1e-6`` of
    their mean, plus the rounding of times stored in single precision (``2 eps_32 max |t|``: steps of 0.05 stored
    in float32 deviate by 1.4e-6 of the step)."""
    if not np.all(np.isfinite(times)):
        raise FpirlInputError("times contain NaN or infinite values")
    steps = np.diff(times)
    if np.any(steps <= 0):
        raise FpirlInputError("snapshot times must be strictly increasing")
    mean = float(np.mean(steps))
    worst = float(np.max(np.abs(steps - mean)))
    if worst > 1e-6 * mean + 2 * float(np.finfo(np.float32).eps) * float(np.max(np.abs(times))):
        raise FpirlInputError(f"snapshot times must be uniformly spaced (the steps differ by up to {worst / mean:.2g} "
                              "of their mean)")


class DensitySnapshots:
    """Time series of a probability density sampled at the nodes of a :class:`Grid`.

    Parameters
    ----------
    grid : Grid
        The finite-element grid whose nodes carry the values.
    times : array_like, shape (n_t,)
        Strictly increasing, uniformly spaced snapshot times (at least two).
    values : array_like, shape ``(n_t, *grid.shape)``
        Non-negative, finite density values at the nodes (negatives within :data:`ROUNDING_RTOL` of a
        snapshot's maximum are rounding and read as 0).

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
        values = nonnegative(values)
        check_uniform_times(times)
        check_scale(float(times[1] - times[0]), "the snapshot spacing")
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
