"""What every figure module shares: atomic saving in the format of the suffix, robust colour limits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from ..core._errors import FpirlInputError
from ..io._files import check_output_path
from ..io.netcdf import atomic_path


def save_figure(fig: Figure, path, dpi: int = 100) -> Path:
    """Write ``fig`` atomically, in the format of the suffix of ``path``."""
    return _save(fig, path, dpi)


def _plain(text) -> str:
    """User text (file and axis names) shown as typed: a ``$`` would start matplotlib's mathtext."""
    return str(text).replace("$", r"\$")


def check_figure_path(path, inputs=()) -> Path:
    """Check a figure's path before any work: an image type matplotlib writes (from the suffix) and a
    writable place (:func:`fpirl.io.check_output_path`, not one of ``inputs``); one-line errors."""
    _image_format(Path(path), FigureCanvasAgg.get_supported_filetypes())
    return check_output_path(path, inputs=inputs)


def _image_format(path: Path, supported) -> str:
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in supported:
        raise FpirlInputError(
            f"cannot write figure {str(path)!r}: unknown image type {path.suffix or '(none)'!r} "
            f"(use one of {', '.join('.' + k for k in sorted(supported))})"
        )
    return fmt


def _save(fig: Figure, path, dpi: int = 100) -> Path:
    path = Path(path)
    fmt = _image_format(path, fig.canvas.get_supported_filetypes())
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

def _grey_out(ax, image, extent=None) -> None:
    """Overlay grey where ``image`` (1 = no data, 0 = data, NaN = gap) is 1."""

    shade = np.where(np.asarray(image) == 1, 1.0, np.nan)
    kw = {"extent": extent} if extent is not None else {}
    ax.imshow(shade, origin="lower", aspect="auto", cmap=ListedColormap(["0.55"]), alpha=0.75,
              interpolation="nearest", vmin=0, vmax=1, **kw)

def _extend(values, vlim) -> str:
    """Colour-bar arrows where values lie beyond the limits."""
    if vlim is None:
        return "neither"
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    low = v.size and v.min() < vlim[0]
    high = v.size and v.max() > vlim[1]
    return "both" if low and high else "min" if low else "max" if high else "neither"

def _draw_cv_curve(ax, result):
    """Cross-validation curve of a track fit: held-out score per candidate resolution, one line per
    ridge, error bars the paired standard error of the difference to the best candidate."""
    score = result["cv_score"].transpose("cv_candidate", "cv_ridge")
    se = result["cv_score_se"].transpose("cv_candidate", "cv_ridge").values if "cv_score_se" in result else None
    labels = [str(v) for v in score["cv_candidate"].values]
    x = np.arange(len(labels))
    best = float(np.nanmax(score.values))
    for j, ridge in enumerate(score["cv_ridge"].values):
        yerr = None if se is None else se[:, j]
        ax.errorbar(x, score.values[:, j] - best, yerr=yerr, capsize=2, marker="o", ms=3, label=f"ridge {float(ridge):g}")
    chosen = score.attrs.get("chosen_candidate")
    if chosen in labels:
        ax.axvline(labels.index(chosen), color="0.5", ls="--", lw=0.8)
    ax.set_xticks(x, labels, rotation=45 if len(labels) > 6 else 0, fontsize=7)
    ax.set_xlabel("Hermite elements per axis (0: psi constant along the axis)")
    ax.set_ylabel("held-out log-lik. - best\n(nats per transition)")
    ax.set_title(f"cross-validation ({score.attrs.get('rule', '')})", fontsize=9)
    ax.legend(fontsize=7)
