"""Low-level file handling shared by :mod:`fpirl.io` and the table readers: output-path checks,
atomic writes, grids <-> netCDF coordinates, file-type dispatch, opening netCDF files."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import xarray as xr

from ..core._errors import FpirlInputError, FpirlRuntimeError, reason
from ..core.grid import BOUNDARIES, ROLES, Grid
from .._version import __version__
import shutil
import errno

NETCDF_SUFFIXES = (".nc", ".nc4", ".netcdf", ".cdf")
TABLE_SUFFIXES = (".csv", ".parquet", ".pq")


# --------------------------------------------------------------------------------------------
# output paths and atomic writes
# --------------------------------------------------------------------------------------------
def check_output_path(path, suffixes: Sequence[str] | None = None, inputs: Sequence = ()) -> Path:
    """Check that ``path`` can be written, before any work is done; returns it as a :class:`Path`.

    One-line :class:`FpirlInputError` when the suffix is not one of ``suffixes`` (if given), the
    parent directory does not exist or a parent is a file, ``path`` is a directory, the directory
    or an existing file is not writable, or ``path`` is one of ``inputs`` (the files the command
    reads; ``None`` entries are skipped).
    """
    path = Path(path)
    if suffixes is not None and path.suffix.lower() not in suffixes:
        raise FpirlInputError(f"output {str(path)!r} must end in {suffixes[0]} (got {path.suffix or 'no suffix'!r})")
    parent = path.parent
    if not parent.is_dir():
        _no_file_in_the_way(path)
        raise FpirlInputError(f"output directory does not exist: {str(parent)!r}")
    if path.is_dir():
        raise FpirlInputError(f"output path is a directory: {str(path)!r}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise FpirlInputError(f"cannot write {str(path)!r}: permission denied on the directory {str(parent)!r}")
    _data_file_system(parent, path)
    if path.exists() and not os.access(path, os.W_OK):
        raise FpirlInputError(f"cannot write {str(path)!r}: the existing file is read-only")
    for other in inputs:
        if other is not None and Path(other).exists() and path.exists() and os.path.samefile(path, other):
            raise FpirlInputError(f"output {str(path)!r} is the input file {str(other)!r}; choose another name")
    return path


def check_output_directory(path) -> Path:
    """An output directory, created with its parents before any work (commands that write several files);
    one-line :class:`FpirlInputError` where a file is in the way, or it cannot be created or written."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise FpirlInputError(f"output {str(out)!r} exists and is not a directory")
    _no_file_in_the_way(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FpirlInputError(f"cannot create the output directory {str(out)!r}: {exc.strerror or exc}") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise FpirlInputError(f"cannot write into {str(out)!r}: permission denied")
    _data_file_system(out, out)
    return out


def _no_file_in_the_way(path: Path) -> None:
    """A one-line error where the nearest existing ancestor of ``path`` is a file."""
    blocker = next((p for p in path.parents if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        raise FpirlInputError(f"cannot write {str(path)!r}: {str(blocker)!r} is a file, not a directory")


def _data_file_system(directory: Path, target: Path) -> None:
    """A one-line error naming ``target`` where ``directory`` has no room by design (/proc, /sys): not a full disk."""
    if _total_bytes(directory) == 0:
        raise FpirlInputError(f"cannot write {str(target)!r}: {str(directory)!r} is not a file system for data files")


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path):
    """Context manager yielding a temporary path next to ``path``; moved onto ``path`` on success.

    The temporary file lives in the destination directory (so :func:`os.replace` is atomic) and is
    removed if the body raises (any exception, including ``KeyboardInterrupt``). Where ``path`` is a
    symbolic link (also one whose target does not exist yet), the file is written where it points, as
    opening the path would, and the link is kept.
    """
    path = _through_links(check_output_path(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise FpirlInputError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_current_umask())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.filename is not None and Path(exc.filename).name == Path(tmp).name:
            # name the user's file, never the temporary one
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        raise


def _through_links(path: Path) -> Path:
    """``path``, or where it points when it is a symbolic link (the target checked as an output path too)."""
    if not path.is_symlink():
        return path
    target = Path(os.path.realpath(path))
    if target.is_symlink():  # realpath stops inside a loop of links
        raise FpirlInputError(f"cannot write {str(path)!r}: its symbolic links form a loop")
    try:
        return check_output_path(target)
    except FpirlInputError as exc:
        raise FpirlInputError(f"output {str(path)!r} is a link to {str(target)!r}: {exc}") from None


def atomic_write(path, writer: Callable[[Path], None]) -> Path:
    """Call ``writer(tmp_path)`` and move the temporary file onto ``path`` atomically."""
    with atomic_path(path) as tmp:
        writer(tmp)
    return Path(path)


def _to_netcdf_atomic(ds: xr.Dataset, path) -> Path:
    path = Path(path)
    if path.suffix.lower() not in NETCDF_SUFFIXES:
        raise FpirlInputError(
            f"cannot write {str(path)!r}: unknown file type {path.suffix or '(none)'!r}, use a .nc file"
        )
    check_netcdf_names([*map(str, ds.variables), *map(str, ds.dims)], "variable or axis name")
    check_netcdf_names(ds.attrs, "attribute name")
    _check_free_space(path, ds.nbytes)

    def write(tmp):
        try:
            ds.to_netcdf(tmp, mode="w")
        except Exception as exc:
            if _disk_full(exc, tmp, ds.nbytes):
                raise FpirlRuntimeError(f"disk full: cannot write {str(path)!r} "
                                        f"({_free_bytes(path.parent) / 2**20:.1f} MiB free)") from None
            raise

    return atomic_write(path, write)


#: netCDF's limit on the length of a name in bytes (NC_MAX_NAME)
NETCDF_MAX_NAME = 256


def check_netcdf_names(names, what: str = "name") -> None:
    """One-line error for a name netCDF cannot store (longer than :data:`NETCDF_MAX_NAME` bytes).

    Call it on column names before a fit, so that the error comes before the work, not at the write.
    """
    for name in names:
        n = len(str(name).encode("utf-8", "surrogatepass"))
        if n > NETCDF_MAX_NAME:
            raise FpirlInputError(f"{what} {str(name)[:30]!r}... is {n} bytes long: column name too long for netCDF "
                                  f"(at most {NETCDF_MAX_NAME}); rename it")


def _free_bytes(directory) -> float:

    try:
        return float(shutil.disk_usage(directory).free)
    except OSError:
        return float("inf")


def _total_bytes(directory) -> float:
    try:
        return float(shutil.disk_usage(directory).total)
    except OSError:
        return float("inf")


def _check_free_space(path: Path, nbytes: int) -> None:
    """Refuse before writing when the destination's file system has less room than the data."""
    free = _free_bytes(path.parent)
    if free < nbytes:
        _data_file_system(path.parent, path)
        raise FpirlRuntimeError(f"disk full: {str(path)!r} needs about {nbytes / 2**20:.1f} MiB, "
                                f"{free / 2**20:.1f} MiB free")


def _disk_full(exc: BaseException, tmp, nbytes: int) -> bool:
    """Whether a failed write ran out of space (ENOSPC, or netCDF's bare 'HDF error' on a full disk)."""

    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    if "HDF error" in str(exc) or "No space left" in str(exc):
        written = Path(tmp).stat().st_size if Path(tmp).exists() else 0
        return _free_bytes(Path(tmp).parent) < max(nbytes - written, 0) + (1 << 20)
    return False


# --------------------------------------------------------------------------------------------
# grids <-> coordinates
# --------------------------------------------------------------------------------------------
def grid_coords(grid: Grid) -> dict:
    """xarray coordinates (node positions with ``role``/``lower``/``upper`` attrs) of ``grid``."""
    return {
        a.name: xr.Variable(
            a.name,
            a.nodes,
            attrs={"role": a.role, "lower": float(a.lower), "upper": float(a.upper)},
        )
        for a in grid.axes
    }


def _attr_float(attrs, key, where):
    if key not in attrs:
        raise FpirlInputError(f"{where} has no {key!r} attribute")
    try:
        value = float(np.asarray(attrs[key]).reshape(()))
    except (TypeError, ValueError):
        raise FpirlInputError(f"{where}: attribute {key!r} must be a number, got {attrs[key]!r}") from None
    if not np.isfinite(value):
        raise FpirlInputError(f"{where}: attribute {key!r} must be finite, got {value}")
    return value


def time_first_increasing(ds: xr.Dataset, variable: str = "density") -> xr.Dataset:
    """``ds`` with ``variable``'s ``time`` dim first and its decreasing axis coordinates reversed (both lazy
    on a file opened lazily): a density stored as ``(x, y, time)`` or with a descending axis reads as the
    contract's ``(time, x, y)`` on increasing nodes."""
    if variable not in ds.data_vars:
        return ds
    dims = tuple(map(str, ds[variable].dims))
    if "time" in dims and dims[0] != "time":
        ds = ds.transpose("time", ...)
    for name in dims:
        if name == "time" or name not in ds.coords or ds.coords[name].dims != (name,) or ds.sizes[name] < 2:
            continue
        x = np.asarray(ds.coords[name].values)
        if x.dtype.kind in "iuf" and np.all(np.diff(x) < 0):
            ds = ds.isel({name: slice(None, None, -1)})
    return ds


def grid_from_dataset(ds: xr.Dataset, variable: str = "density", leading: tuple[str, ...] = ()) -> Grid:
    """Rebuild the :class:`Grid` of ``ds[variable]`` from its axis coordinates and attrs.

    ``leading`` names dims that come first and are not grid axes (e.g. ``('time',)``).
    Raises :class:`FpirlInputError` on any inconsistency (missing coordinate or attrs, non-uniform
    nodes, nodes that disagree with ``lower``/``upper`` and the boundary's node placement).
    """
    if variable not in ds.data_vars:
        raise FpirlInputError(f"dataset has no {variable!r} variable (found: {', '.join(map(str, ds.data_vars)) or 'none'})")
    da = ds[variable]
    dims = tuple(map(str, da.dims))
    if dims[: len(leading)] != tuple(leading):
        want = ", ".join(leading + ("<axes...>",))
        raise FpirlInputError(f"variable {variable!r} has dims ({', '.join(dims)}), expected ({want})")
    axes = dims[len(leading):]
    if not axes:
        raise FpirlInputError(f"variable {variable!r} has no spatial axes (dims: {', '.join(dims)})")
    boundary = ds.attrs.get("boundary")
    if boundary is None:
        raise FpirlInputError("dataset has no 'boundary' attribute ('periodic' or 'reflecting')")
    boundary = str(boundary)
    if boundary not in BOUNDARIES:
        raise FpirlInputError(f"dataset attribute 'boundary' must be 'periodic' or 'reflecting', got {boundary!r}")

    lower, upper, elements, roles = [], [], [], []
    for name in axes:
        if name not in ds.coords:
            raise FpirlInputError(f"axis {name!r} has no coordinate with the node positions")
        coord = ds.coords[name]
        where = f"axis {name!r}"
        if coord.dims != (name,):
            raise FpirlInputError(f"{where}: coordinate must be 1-D along {name!r}")
        role = coord.attrs.get("role")
        if role is None:
            raise FpirlInputError(f"{where} has no 'role' attribute ('state' or 'action')")
        role = str(role)
        if role not in ROLES:
            raise FpirlInputError(f"{where}: role must be 'state' or 'action', got {role!r}")
        lo = _attr_float(coord.attrs, "lower", where)
        hi = _attr_float(coord.attrs, "upper", where)
        if not hi > lo:
            raise FpirlInputError(f"{where}: need lower < upper, got [{lo:g}, {hi:g}]")
        try:
            x = np.asarray(coord.values, dtype=float)
        except (TypeError, ValueError):
            raise FpirlInputError(f"{where}: node coordinates must be numbers") from None
        n = x.size
        n_el = n if boundary == "periodic" else n - 1
        if n_el < 2:
            raise FpirlInputError(f"{where}: too few nodes ({n}) for a {boundary} axis")
        if not np.all(np.isfinite(x)):
            raise FpirlInputError(f"{where}: node coordinates contain NaN or infinite values")
        h = (hi - lo) / n_el
        steps = np.diff(x)
        tol = 1e-6 * h
        if np.any(np.abs(steps - steps.mean()) > tol) or np.any(steps <= 0):
            raise FpirlInputError(f"{where}: node coordinates are not uniformly spaced and increasing")
        expected = lo + h * np.arange(n)
        if np.max(np.abs(x - expected)) > tol:
            placement = (
                f"{n} periodic nodes lower + j*(upper-lower)/{n}, j = 0..{n - 1}"
                if boundary == "periodic"
                else f"{n} reflecting nodes from lower to upper inclusive"
            )
            raise FpirlInputError(
                f"{where}: nodes [{x[0]:g} .. {x[-1]:g}] do not match lower={lo:g}, upper={hi:g} "
                f"({placement})"
            )
        lower.append(lo)
        upper.append(hi)
        elements.append(n_el)
        roles.append(role)
    return Grid(lower, upper, elements, names=axes, roles=roles, boundary=boundary)


# --------------------------------------------------------------------------------------------
# file-type dispatch
# --------------------------------------------------------------------------------------------
def data_kind(path) -> str:
    """'netcdf' or 'table' from the file suffix; :class:`FpirlInputError` for anything else."""
    suffix = Path(path).suffix.lower()
    if suffix in NETCDF_SUFFIXES:
        return "netcdf"
    if suffix in TABLE_SUFFIXES:
        return "table"
    raise FpirlInputError(
        f"unknown file type {suffix or '(none)'!r} for {str(path)!r}: expected a density dataset "
        f"({', '.join(NETCDF_SUFFIXES)}, or a .zarr store) or a trajectory table ({', '.join(TABLE_SUFFIXES)})"
    )


def check_readable(path: Path) -> None:
    """One-line error unless ``path`` is an existing, readable file."""
    if not path.exists():
        raise FpirlInputError(f"no such file: {str(path)!r}")
    if path.is_dir():
        raise FpirlInputError(f"{str(path)!r} is a directory, not a file")
    if not os.access(path, os.R_OK):
        raise FpirlInputError(f"cannot read {str(path)!r}: permission denied")


def _open_netcdf(path: Path) -> xr.Dataset:
    check_readable(path)
    try:
        with xr.open_dataset(path) as ds:
            return ds.load()
    except (FpirlInputError, MemoryError):
        raise
    except Exception as exc:  # netCDF4/HDF5/xarray raise many types for corrupt files
        msg = " ".join(str(exc).split())
        if "did not find a match" in msg or "Unknown file format" in msg:
            msg = "not a netCDF file"
        msg = reason(msg) if msg != "not a netCDF file" else msg
        msg = msg or type(exc).__name__
        raise FpirlInputError(f"cannot read {str(path)!r} as netCDF: {msg}") from None


def load_or_error(data, path):
    """``data.load()`` (an xarray object read lazily from ``path``), or a one-line
    :class:`FpirlInputError` when the stored data cannot be decoded (a corrupt or truncated chunk)."""
    try:
        return data.load()
    except (FpirlInputError, MemoryError, KeyboardInterrupt):
        raise
    except Exception as exc:  # zarr codecs, HDF5 and netCDF4 raise many types for corrupt chunks
        raise FpirlInputError(f"cannot read {str(path)!r}: corrupt or unreadable data ({reason(exc)})") from None


def _version() -> str:
    return str(__version__)


def _attr_value(value):
    """Convert a Python value into something netCDF accepts as an attribute (or None to drop)."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (str, bytes)):
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    arr = np.asarray(value)
    if arr.dtype.kind in "biuf" and arr.ndim <= 1:
        return arr.astype(float if arr.dtype.kind == "f" else np.int64)
    return str(value)
