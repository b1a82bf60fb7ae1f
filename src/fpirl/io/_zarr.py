"""Zarr density stores: recognising one and opening it lazily (the ``zarr`` package is optional).

A Zarr store holds the same dataset as a density netCDF file (``docs/formats.md``): the
``density`` variable with dims ``(time, axis names...)``, the axis and ``time`` coordinates and
the ``boundary`` attribute, e.g. written by ``fpirl.io.density_dataset(s).chunk({"time": 64})
.to_zarr("d.zarr")``. Opened lazily, only the coordinates are read; the density is read one
time slice range at a time.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
import xarray as xr

from ..core._errors import FpirlInputError

#: File names that mark a directory as a Zarr store (format 3; format 2 group, metadata, attrs).
_ZARR_MARKERS = ("zarr.json", ".zgroup", ".zmetadata", ".zattrs")


def is_zarr(path) -> bool:
    """Whether ``path`` names a Zarr store: a ``.zarr`` suffix, or a directory with Zarr metadata."""
    path = Path(path)
    if path.suffix.lower() == ".zarr":
        return True
    return path.is_dir() and any((path / name).exists() for name in _ZARR_MARKERS)


def open_zarr(path):
    """The dataset of the Zarr store ``path``, opened lazily (no dask arrays; nothing read yet).

    Raises
    ------
    FpirlInputError
        One line, when the store does not exist or cannot be read, or the ``zarr`` package is
        missing.
    """
    path = Path(path)
    if not path.exists():
        raise FpirlInputError(f"no such file or Zarr store: {str(path)!r}")
    if not os.access(path, os.R_OK):
        raise FpirlInputError(f"cannot read {str(path)!r}: permission denied")
    try:
        import zarr  # noqa: F401
    except ImportError:
        raise FpirlInputError(f"reading the Zarr store {str(path)!r} needs the zarr package: "
                              "pip install 'fpirl[dask]'") from None
    try:
        with warnings.catch_warnings():  # stores without consolidated metadata are fine
            warnings.filterwarnings("ignore", message=".*consolidated metadata")
            return xr.open_dataset(path, engine="zarr", chunks=None, cache=False)
    except Exception as exc:  # zarr and xarray raise many types for unreadable stores
        msg = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise FpirlInputError(f"cannot read {str(path)!r} as a Zarr store: {msg}") from None
