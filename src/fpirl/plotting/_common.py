"""What every figure module shares: atomic saving in the format of the suffix, robust colour limits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from ..core._errors import FpirlInputError
from ..io.netcdf import atomic_path


def save_figure(fig: Figure, path, dpi: int = 100) -> Path:
    """Write ``fig`` atomically, in the format of the suffix of ``path``."""
    return _save(fig, path, dpi)


def _save(fig: Figure, path, dpi: int = 100) -> Path:
    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    supported = fig.canvas.get_supported_filetypes()
    if fmt not in supported:
        raise FpirlInputError(
            f"cannot write figure {str(path)!r}: unknown image type {path.suffix or '(none)'!r} "
            f"(use one of {', '.join('.' + k for k in sorted(supported))})"
        )
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=fmt, dpi=dpi)
    return path


def robust_range(*arrays, percentiles=(0.5, 99.5)):
    """Colour limits ``(lo, hi)``: the given percentiles of the finite values of ``arrays``
    (``None`` when they are all equal or none is finite)."""
    vals = np.concatenate([np.asarray(a, dtype=float).ravel() for a in arrays])
    vals = vals[np.isfinite(vals)]
    if vals.size == 0:
        return None
    lo, hi = (float(v) for v in np.percentile(vals, percentiles))
    if not hi > lo:
        lo, hi = float(vals.min()), float(vals.max())
    return (lo, hi) if hi > lo else None


def symmetric_range(*arrays, percentile=99.5):
    """Symmetric colour limits ``(-m, m)`` with ``m`` the percentile of ``|values|`` (differences)."""
    vals = np.abs(np.concatenate([np.asarray(a, dtype=float).ravel() for a in arrays]))
    vals = vals[np.isfinite(vals)]
    m = float(np.percentile(vals, percentile)) if vals.size else 0.0
    if not m > 0:
        m = float(vals.max()) if vals.size else 0.0
    return (-m, m) if m > 0 else None
