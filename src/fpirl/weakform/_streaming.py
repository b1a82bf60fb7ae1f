"""Density snapshots read chunk by chunk from a lazily opened file or any sliceable array.

:class:`StreamingSnapshots` feeds the matrix-free operators of :mod:`fpirl.weakform.matfree`
(re-exported there): each read is checked (finite, non-negative), optionally scaled to unit mass,
and a corrupt chunk is a one-line :class:`~fpirl.core._errors.FpirlInputError`.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from ..core._errors import FpirlInputError, reason
from ..core.density import DensitySnapshots, check_uniform_times, nonnegative
from ..core.grid import Grid
from pathlib import Path
import xarray as xr
from ..io._files import check_readable, grid_from_dataset, time_first_increasing
from ..io._zarr import is_zarr, open_zarr
import weakref
from ..core.validation import numeric_times

__all__ = ["StreamingSnapshots"]


class StreamingSnapshots:
    """Density snapshots read chunk by chunk from a sliceable array (never all in memory).

    Parameters
    ----------
    grid : Grid
    times : array_like, shape (n_t,)
        Uniformly spaced, increasing.
    values : array-like
        Shape ``(n_t, *grid.shape)``. Anything that supports ``values[start:stop]`` returning an array (numpy memmap, a
        lazily opened ``xarray.DataArray``, a netCDF4 or h5py variable). Each chunk is checked
        (finite, non-negative) when it is read.
    """

    def __init__(self, grid: Grid, times, values):
        times = np.asarray(times, dtype=float).ravel()
        shape = tuple(values.shape)
        if len(shape) != grid.ndim + 1 or shape[1:] != grid.shape:
            raise FpirlInputError(f"density has shape {shape}, expected (time, {', '.join(map(str, grid.shape))})")
        if shape[0] < 2 or times.size != shape[0]:
            raise FpirlInputError(f"need at least two snapshots with one time each, got {shape[0]} and {times.size}")
        check_uniform_times(times)
        self.grid, self.times, self.values = grid, times, values
        self._normalized = False

    @classmethod
    def from_snapshots(cls, snapshots: DensitySnapshots) -> "StreamingSnapshots":
        return cls(snapshots.grid, snapshots.times, snapshots.values)

    @classmethod
    def open(cls, path) -> "StreamingSnapshots":
        """A density dataset (netCDF or a Zarr store, the format of :func:`fpirl.io.read_density`)
        opened lazily: only the coordinates are read now, the ``density`` variable chunk by chunk later."""



        path = Path(path)
        if is_zarr(path):
            ds = open_zarr(path)
        else:
            check_readable(path)
            try:
                ds = xr.open_dataset(path)
            except MemoryError:
                raise
            except Exception as exc:  # netCDF4/HDF5 raise many types for unreadable files
                raise FpirlInputError(f"cannot read {str(path)!r} as netCDF: {_reason(exc)}") from None
        raw, ds = ds, time_first_increasing(ds)  # (raw: the handle that closes the file)
        if "density" not in ds.data_vars or not ds["density"].dims or ds["density"].dims[0] != "time":
            raw.close()
            found = (f"its 'density' has dims ({', '.join(map(str, ds['density'].dims))})" if "density" in ds.data_vars
                     else f"variables: {', '.join(map(str, ds.data_vars)) or 'none'}")
            raise FpirlInputError(f"{str(path)!r} has no 'density' variable with dims (time, <axes...>) ({found}; the "
                                  "time dimension must be named 'time')")
        if "time" not in ds.coords:
            raw.close()
            raise FpirlInputError(f"{str(path)!r} has no 'time' coordinate with the snapshot times")
        try:
            grid = grid_from_dataset(ds, "density", leading=("time",))
            out = cls(grid, numeric_times(ds["time"].values, f"the 'time' coordinate of {str(path)!r}"),
                      ds["density"].variable)
        except BaseException:
            raw.close()
            raise
        out.path = path
        out._close = weakref.finalize(out, raw.close)  # closed by close(), when collected, or at exit
        return out

    def close(self) -> None:
        """Close the file opened by :meth:`open` (copies made by :meth:`normalize` share it)."""
        if getattr(self, "_close", None) is not None:
            self._close()
        if getattr(self, "_parent", None) is not None:
            self._parent.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def dt(self) -> float:
        return float(self.times[1] - self.times[0])

    @property
    def n_times(self) -> int:
        return int(self.times.size)

    def read(self, start: int, stop: int) -> np.ndarray:
        """Snapshots ``start:stop`` as a float array (scaled to unit mass after :meth:`normalize`)."""
        try:
            v = np.asarray(self.values[start:stop], dtype=float)
        except (FpirlInputError, MemoryError, KeyboardInterrupt):
            raise
        except Exception as exc:  # a corrupt chunk of a lazily read file (zarr codecs, HDF5)
            where = f" of {str(self.path)!r}" if getattr(self, "path", None) else ""
            raise FpirlInputError(f"cannot read snapshots {start}-{stop - 1}{where}: corrupt or unreadable data "
                                  f"({reason(exc)})") from None
        v = nonnegative(v)
        if self._normalized:
            mass = np.atleast_1d(self.grid.integrate(v))
            if np.any(mass <= 0):
                raise FpirlInputError("a density snapshot has zero total mass")
            v = v * (1.0 / mass).reshape((-1,) + (1,) * self.grid.ndim)
        return v

    def normalize(self, chunk: int | None = None) -> "StreamingSnapshots":
        """The snapshots scaled to unit mass, each as it is read (no extra pass over the data;
        ``chunk`` is accepted for compatibility and unused)."""
        out = StreamingSnapshots(self.grid, self.times, self.values)
        out._parent = self  # the file stays open while the copy is used
        out._normalized = True
        return out

    def pair_chunks(self, chunk: int, overlap: int = 1) -> Iterator[np.ndarray]:
        """Consecutive blocks of ``chunk + overlap`` snapshots (``chunk`` residual rows each), sharing ``overlap``
        snapshots (:func:`fpirl.weakform.assembly.time_overlap` of the time scheme)."""
        for start in range(0, self.n_times - overlap, chunk):
            yield self.read(start, min(start + chunk + overlap, self.n_times))


def _reason(exc: BaseException) -> str:
    """One line for an exception from a file reader (:func:`fpirl.core._errors.reason`)."""
    msg = " ".join(str(exc).split())
    if "did not find a match" in msg or "Unknown file format" in msg:
        return "not a netCDF file"
    return reason(exc)
