"""Validation of user input, in one place: numbers (positive, finite, non-negative), Hermite
resolutions, the discount factor, nodal arrays on a grid; and the nodal-array helpers shared by
the MDP, transition, simulation and metrics modules. Every check raises a one-line
:class:`~fpirl.core._errors.FpirlInputError` naming the parameter."""

from __future__ import annotations

import numpy as np

from ._errors import FpirlInputError
from .grid import Grid


# --------------------------------------------------------------------------------------------
# small helpers shared with simulate.py / metrics.py
# --------------------------------------------------------------------------------------------
def state_shape(grid: Grid) -> tuple[int, ...]:
    """Shape of a nodal function of the state only (state axes in grid order)."""
    return tuple(grid.shape[i] for i in grid.state_axes)


def _expand_state(grid: Grid, values: np.ndarray) -> np.ndarray:
    """Insert size-1 action axes into ``(*lead, *state_shape)`` so it broadcasts to ``grid.shape``."""
    lead = values.ndim - len(grid.state_axes)
    for i in grid.action_axes:  # ascending, so earlier insertions sit at lower positions
        values = np.expand_dims(values, lead + i)
    return values


def _state_weights(grid: Grid) -> np.ndarray:
    """Tensor-product trapezoid weights over the state axes, shape ``state_shape(grid)``."""
    w = np.ones(())
    for i in grid.state_axes:
        w = np.multiply.outer(w, grid.axes[i].node_weights)
    return w


def _nodal(grid: Grid, values, name: str, lead: int = 0, shape=None) -> np.ndarray:
    values = np.asarray(values, dtype=float)
    shape = grid.shape if shape is None else shape
    if values.ndim != lead + len(shape) or values.shape[lead:] != tuple(shape):
        want = ("(...,) " if lead else "") + str(tuple(shape))
        raise FpirlInputError(f"{name} has shape {values.shape}, expected {want} for {grid!r}")
    if not np.all(np.isfinite(values)):
        raise FpirlInputError(f"{name} contains NaN or infinite values")
    return values


def numeric_times(values, what: str = "time") -> np.ndarray:
    """``values`` as float64 model times, or a one-line error for dates, durations and text.

    Datetime and timedelta values would otherwise become nanoseconds (``dt = 1e9`` for daily
    snapshots), which no model time scale means.
    """
    values = np.asarray(values)
    if values.dtype.kind in "Mm":
        kind = "dates" if values.dtype.kind == "M" else "durations"
        raise FpirlInputError(
            f"{what} holds {kind} ({values.dtype}); fpirl needs numeric model time: convert it to plain numbers in "
            "the unit you mean, e.g. hours since the first snapshot ((t - t[0]) / np.timedelta64(1, 'h')), and "
            "store them without a CF 'units: ... since ...' attribute")
    if values.dtype.kind not in "iuf":
        raise FpirlInputError(f"{what} must be numeric model time, got values of type {values.dtype}")
    return values.astype(float)


def positive(value, name: str) -> float:
    """``value`` as a positive finite float."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise FpirlInputError(f"{name} must be a positive number, got {value!r}") from None
    if not (np.isfinite(value) and value > 0):
        raise FpirlInputError(f"{name} must be a positive finite number, got {value}")
    return value


_positive = positive  # the name the numerics modules import


def optional_positive(value, name: str) -> float | None:
    """None (to be estimated) or a positive finite float (e.g. a fixed beta)."""
    return None if value is None else positive(value, name)


def finite_number(value, name: str) -> float:
    """``value`` as a finite float."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise FpirlInputError(f"{name} must be a number, got {value!r}") from None
    if not np.isfinite(value):
        raise FpirlInputError(f"{name} must be finite, got {value}")
    return value


def non_negative(value, name: str) -> float:
    """``value`` as a non-negative finite float (e.g. a ridge)."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise FpirlInputError(f"{name} must be a non-negative number, got {value!r}") from None
    if not (np.isfinite(value) and value >= 0):
        raise FpirlInputError(f"{name} must be a non-negative number, got {value}")
    return value


def check_elements(value, d: int, name: str = "hermite_elements", minimum: int = 1, axis_names=None,
                   auto: bool = False) -> tuple[int, ...]:
    """Elements per axis: one integer for all ``d`` axes or one per axis, each ``>= minimum``
    (``minimum`` 2 on a periodic box). ``auto``: the message says ``'auto'`` is accepted too (the
    caller handles it). ``axis_names`` are listed in the message."""
    try:
        arr = np.broadcast_to(np.asarray(value), (d,))
        ok = arr.dtype.kind in "iu" or (arr.dtype.kind == "f" and np.all(arr == np.round(arr)))
    except (ValueError, TypeError):
        ok = False
    if not ok or np.any(arr < minimum):
        axes = f"{d}: {', '.join(axis_names)}" if axis_names else f"{d}"
        either = "'auto', " if auto else ""
        raise FpirlInputError(f"{name} must be {either}one integer or one per axis ({axes}), each >= {minimum}, "
                              f"got {value!r}")
    return tuple(int(v) for v in arr)


def _check_gamma(gamma) -> float:
    gamma = float(gamma)
    if not (0.0 <= gamma < 1.0):
        raise FpirlInputError(f"discount factor gamma must lie in [0, 1), got {gamma}")
    return gamma


def _require_axes(grid: Grid):
    if not grid.state_axes:
        raise FpirlInputError(f"the grid has no state axis: {grid!r}")
    if not grid.action_axes:
        raise FpirlInputError(f"the grid has no action axis: {grid!r}")


def state_marginal(grid: Grid, p) -> np.ndarray:
    """State marginal ``rho(s) = int_A p(s, a) da`` of nodal joint densities.

    Parameters
    ----------
    grid : Grid
    p : array_like, shape ``(..., *grid.shape)``

    Returns
    -------
    ndarray, shape ``(..., *state_shape(grid))``
    """
    p = np.asarray(p, dtype=float)
    return grid.integrate(p, axes=grid.action_axes)


# --------------------------------------------------------------------------------------------
# policy
# --------------------------------------------------------------------------------------------
