"""Reading what the RL tools need from a result dataset (or its path)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..core._errors import FpirlInputError
import xarray as xr
from ..io.netcdf import read_result
from ..io._files import grid_from_dataset
from ..mdp.recovery import DEFAULT_GAMMA


def open_result(result):
    """A result :class:`xarray.Dataset` from a dataset or a path (checked by :func:`fpirl.io.read_result`)."""


    if isinstance(result, xr.Dataset):
        return result
    if isinstance(result, (str, Path)):
        return read_result(result)
    raise TypeError(f"expected a result dataset or a path, got {type(result).__name__}")


def result_grid(ds):

    return grid_from_dataset(ds, "potential")


def nodal_field(ds, name: str, grid) -> np.ndarray:
    """Variable ``name`` on the result grid (dims in grid order), one-line error when missing."""
    if name not in ds.data_vars:
        raise FpirlInputError(f"the result has no '{name}' variable (fit it with state and action axes)")
    values = np.asarray(ds[name].transpose(*grid.names).values, dtype=float)
    if not np.all(np.isfinite(values)):
        raise FpirlInputError(f"the result's '{name}' has non-finite values")
    return values


def result_gamma(ds) -> float:

    gamma = float(ds.attrs.get("gamma", np.nan))
    return DEFAULT_GAMMA if not np.isfinite(gamma) else gamma


def reward_convention(ds) -> str:
    """The result's ``reward_convention`` attr; files written before it existed used 'expected'."""
    return str(ds.attrs.get("reward_convention", "expected"))
