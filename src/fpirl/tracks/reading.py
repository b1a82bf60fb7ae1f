r"""Read trajectory tables (CSV or Parquet, long format) into a :class:`~fpirl.tracks.TrackTable`.

One row per observation: a track id column, a time column, state columns and optionally action
columns. The rules (also in docs/formats.md):

* **Sampling interval.** A first ``dt`` is the median of the positive time differences between
  consecutive observations of the same track. Every such difference must be a whole multiple
  ``m dt`` within ``time_tolerance * dt``; ``m > 1`` means missing frames and splits the track into
  *segments* (a transition never spans a gap). ``dt`` is then refined to the total time spanned by
  the tracks divided by their total number of frame steps. Rows may come in any order
  (tracks interleaved, e.g. one row per agent and frame, or shuffled): they are grouped by track and
  sorted by time; two rows of one track at the same time are an error.
* **Stride.** ``stride=K`` keeps the frames ``0, K, 2K, ...`` of every track (frame index counted
  from the track's first observation); ``dt`` becomes ``K dt``.
* **Velocity actions.** ``action='velocity'`` derives ``a_k = (s_k - s_{k-1}) / dt`` (backward
  differences, minimal image on periodic axes) within a segment; the first observation of every
  segment has no velocity and is dropped. Action axes are named ``v_<state column>``.
* **Missing values.** A row whose time or any state or action cell is empty (or NaN) is a missing
  observation: it is dropped with a warning giving the count and the first such row, and it splits
  its track like a missing frame. Infinite values are an error.
* **Bounds.** One ``(lo, hi)`` per modelled axis, states then actions. Observations outside them
  are dropped with a warning giving the count; a dropped row splits its track like a missing frame.
  Without bounds the box comes from robust limits of the data (``robust_box=True``, default): per
  axis, with ``n`` observations, the quantile level ``p = min(25%, max(0.1%, 3/n))`` (0.1% from
  3000 rows on), the quantiles ``q_lo = Q(p)``, ``q_hi = Q(1 - p)``, ``S = q_hi - q_lo`` and
  ``c = z(0.1%)/z(p) - 1/2`` (``z`` the standard normal quantile: ``c = 1/2`` at ``p = 0.1%``),
  the data range clipped to ``[q_lo - c S, q_hi + c S]``, then widened by ``margin`` (default 5%)
  of that span on each side. A few outlier steps of a tracker (at most two at either end, or
  fewer than 0.1% of the rows, far out) thus do not stretch the box, however small the table;
  they are dropped with a warning giving their count, like rows outside given bounds (for
  Gaussian data the limits lie 6.2 standard deviations out at every ``n``, so nothing is
  dropped; fast but genuine movers, e.g. the walkers among waiting pedestrians, stay in). ``robust_box=False`` keeps every row (box = full data range plus the
  margin); ``fpirl evaluate`` reads held-out tracks so, and every held-out point is scored. A
  periodic box needs explicit bounds (its period cannot
  be inferred from data). On periodic axes a value equal to ``hi`` is the same point as ``lo``.

Every problem is a one-line :class:`~fpirl.FpirlInputError`; rows in messages are counted from 1
after the header.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from ..core._errors import FpirlInputError
from ..io._files import check_netcdf_names, check_readable
from ._table_readers import (CSV_SUFFIXES, PARQUET_SUFFIXES, read_csv_columns, read_frame_columns,
                             read_parquet_columns)
from ..core.grid import BOUNDARIES, wrap_into
from ._robust_box import ROBUST_COUNT, ROBUST_EXTENSION, ROBUST_QUANTILE, robust_fences, robust_limits
from .table import TrackTable
import sys

__all__ = ["DEFAULT_MARGIN", "DEFAULT_TIME_TOLERANCE", "ROBUST_COUNT", "ROBUST_EXTENSION", "ROBUST_QUANTILE", "parse_bounds",
           "read_tracks", "robust_fences", "robust_limits"]

#: fraction of each axis's data range added on both sides when no bounds are given
DEFAULT_MARGIN = 0.05
#: allowed deviation of a time difference from a whole multiple of dt, relative to dt
DEFAULT_TIME_TOLERANCE = 0.01
def _warn_seam_jumps(x, link, length, names) -> None:
    """Warn where steps between consecutive observations jump more than half the box on a walled axis, and more
    than 10 times the median step: the mark of coordinates that wrap around (angles, a periodic domain), which a
    walled fit reads as huge moves (where the median step is itself a sizeable part of the box, e.g. frames far
    apart, such jumps are ordinary and nothing is said)."""
    steps = np.abs(np.diff(x, axis=0)[link[1:]])
    if steps.shape[0] == 0:
        return
    jumps = steps > np.maximum(0.5 * length, 10.0 * np.median(steps, axis=0))
    if jumps.any():
        axes = ", ".join(n for n, j in zip(names, jumps.any(axis=0)) if j)
        warnings.warn(f"{int(jumps.any(axis=1).sum())} steps jump more than half the box (axes {axes}): coordinates "
                      "that wrap around? give --boundary periodic --bounds LO:HI", stacklevel=3)


def _column_list(value, what: str) -> list[str]:
    if isinstance(value, str):
        cols = [c.strip() for c in value.split(",")]
    else:
        cols = [str(c).strip() for c in value]
    if not cols or any(not c for c in cols):
        raise FpirlInputError(f"{what} columns must be non-empty names, got {value!r}")
    return cols


def parse_bounds(text: str) -> list[tuple[float, float]]:
    """``'LO:HI,LO:HI,...'`` -> ``[(lo, hi), ...]`` (the command-line spelling of bounds)."""
    out = []
    for part in str(text).split(","):
        pieces = part.split(":")
        try:
            if len(pieces) != 2:
                raise ValueError
            out.append((float(pieces[0]), float(pieces[1])))
        except ValueError:
            raise FpirlInputError(f"bounds must be LO:HI,LO:HI,... (one pair per axis), got {text!r}") from None
    return out


def _check_bounds(bounds, names) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(bounds, str):
        bounds = parse_bounds(bounds)
    try:
        arr = np.asarray(bounds, dtype=float)
    except (TypeError, ValueError):
        raise FpirlInputError(f"bounds must be one (lo, hi) pair per axis, got {bounds!r}") from None
    d = len(names)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise FpirlInputError(f"bounds must be one (lo, hi) pair per axis, got {bounds!r}")
    if arr.shape[0] != d:
        raise FpirlInputError(
            f"got {arr.shape[0]} bounds for {d} modelled axes ({', '.join(names)}): give one LO:HI per axis, "
            "states then actions"
        )
    for name, (lo, hi) in zip(names, arr):
        if not (np.isfinite(lo) and np.isfinite(hi)):
            raise FpirlInputError(f"bounds of axis {name!r} must be finite, got {lo:g}:{hi:g}")
        if not lo < hi:
            raise FpirlInputError(f"bounds of axis {name!r} need LO < HI, got {lo:g}:{hi:g}")
    return arr[:, 0].copy(), arr[:, 1].copy()


class _RowNumbers:
    """1-based file row of a position in the (possibly reordered) arrays, for error messages."""

    def __init__(self, order=None):
        self.order = order

    def __call__(self, i) -> int:
        return int(i if self.order is None else self.order[i]) + 1


def _as_dataframe(obj):
    """``obj`` when it is a pandas DataFrame (pandas imported only if it is already loaded), else None."""

    pd = sys.modules.get("pandas")
    return obj if pd is not None and isinstance(obj, pd.DataFrame) else None


def _first_nonfinite(values: np.ndarray, columns, rows, what: str):
    bad = ~np.isfinite(values)
    if values.ndim == 1:
        bad = bad[:, None]
    if np.any(bad):
        i = int(np.flatnonzero(bad.any(axis=1))[0])
        j = int(np.flatnonzero(bad[i])[0])
        raise FpirlInputError(f"column {columns[j]!r} has an infinite {what} at row {rows(i)}")


def _links(codes: np.ndarray, frame: np.ndarray, stride: int) -> np.ndarray:
    """``link[i]``: row ``i`` continues the segment of row ``i - 1`` (same track, next kept frame)."""
    link = np.zeros(codes.size, dtype=bool)
    link[1:] = (codes[1:] == codes[:-1]) & (np.diff(frame) == stride)
    return link


def _inside(values: np.ndarray, lower, upper, periodic: bool) -> np.ndarray:
    keep = np.all((values >= lower) & (values <= upper), axis=1)
    if periodic:  # upper is the same point as lower
        np.copyto(values, np.broadcast_to(lower, values.shape), where=values == upper)
    return keep


def _track_name(ids, code) -> str:
    value = ids[code]
    value = value.item() if hasattr(value, "item") else value
    return repr(value) if isinstance(value, str) else str(value)


def _frames(codes, t, ids, rows, dt, tol, single=False):
    """Sampling interval and per-track frame index from the time column (rows sorted by track, then time)."""
    same = codes[1:] == codes[:-1]
    dtime = np.diff(t)
    bad = same & (dtime <= 0)
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        raise FpirlInputError(f"duplicate time {t[i]:g} in track {_track_name(ids, codes[i])} "
                              f"(rows {rows(i)} and {rows(i + 1)})")
    if not np.any(same):
        if single:  # only the observations are wanted (start points): dt cannot be read from the times
            return (1.0 if dt is None else float(dt)), np.zeros(codes.size, dtype=np.int64)
        raise FpirlInputError(
            f"no transitions: all {len(ids)} tracks have a single observation (need two or more per track)"
        )
    explicit_dt = dt
    if dt is None:
        dt = float(np.median(dtime[same]))
    elif not (np.isfinite(dt) and dt > 0):
        raise FpirlInputError(f"the sampling interval dt must be a positive number, got {dt}")
    ratio = np.where(same, dtime, dt) / dt
    steps = np.rint(ratio)
    off = same & ((np.abs(ratio - steps) > tol) | (steps < 1))
    if np.any(off):
        i = int(np.flatnonzero(off)[0])
        raise FpirlInputError(
            f"track {_track_name(ids, codes[i])}: time step {dtime[i]:g} at row {rows(i + 1)} is not a whole "
            f"multiple of the sampling interval dt={dt:g} (tolerance {tol:g} dt)"
        )
    inc = np.zeros(codes.size, dtype=np.int64)
    inc[1:] = np.where(same, steps, 0)
    frame = np.cumsum(inc)
    is_start = np.ones(codes.size, dtype=bool)
    is_start[1:] = ~same
    start = np.maximum.accumulate(np.where(is_start, np.arange(codes.size), 0))
    frame -= frame[start]
    if explicit_dt is None:  # refine: total elapsed time over total frames (exact for uniform sampling)
        is_end = np.ones(codes.size, dtype=bool)
        is_end[:-1] = ~same
        span = frame[is_end].sum()
        dt = float((t[is_end] - t[is_start]).sum() / span)
    return dt, frame


def read_tracks(path, *, track: str, time: str, state, action=None, boundary: str = "reflecting",
                bounds=None, stride: int = 1, margin: float = DEFAULT_MARGIN, dt: float | None = None,
                time_tolerance: float = DEFAULT_TIME_TOLERANCE, progress: bool = False,
                engine: str = "auto", robust_box: bool = True, wrap: bool = False,
                single: bool = False) -> TrackTable:
    """Read a CSV or Parquet trajectory table into a validated :class:`~fpirl.tracks.TrackTable`.

    Parameters
    ----------
    path : str, Path or pandas.DataFrame
        ``.csv`` or ``.parquet``/``.pq`` file, or a DataFrame with the same columns, long format
        (one row per observation; a DataFrame is read as a file would be, row order included).
    track, time : str
        Column with the track ids (any type) and column with the observation times (numeric).
    state : str or list of str
        State columns (``'x,y'`` or ``['x', 'y']``).
    action : None, 'velocity', str or list of str
        ``None``: the state alone is modelled; column names: observed actions;
        ``'velocity'``: backward finite differences of the states (module docstring).
    boundary : {'reflecting', 'periodic'}
    bounds : sequence of (lo, hi) or str 'LO:HI,...', optional
        One pair per modelled axis, states then actions. Required for a periodic box.
    stride : int
        Keep every ``stride``-th frame of each track (``dt`` becomes ``stride * dt``).
    margin : float
        Relative widening of the data's (robust) range when no bounds are given (default 5% per side).
    dt : float, optional
        Sampling interval; default: the median positive within-track time difference.
    time_tolerance : float
        Allowed deviation of a time difference from a whole multiple of ``dt``, relative to ``dt``.
    progress : bool
        Show a progress bar while reading.
    engine : {'auto', 'pyarrow', 'pandas'}
        CSV reader (``auto``: pyarrow when installed).
    robust_box : bool
        Without bounds: the robust box of the module docstring, rows beyond it dropped with a
        warning (default), or the full data range, keeping every row (``False``).
    wrap : bool
        On a periodic box, wrap values outside the bounds into it (minimal image) instead of
        dropping them; velocities derived from such positions are kept, unwrapped (held-out scoring).
    single : bool
        Accept tracks of a single observation and a table without any transition (start points
        only; ``dt`` is then the given one, or 1 when it cannot be read from the times).

    Returns
    -------
    TrackTable
        Rows grouped by track (tracks in first-seen order, increasing time within a track), split into
        segments at missing frames and dropped rows; ``source`` records the columns and stride.
    """
    frame = _as_dataframe(path)
    if frame is None:
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix not in CSV_SUFFIXES + PARQUET_SUFFIXES:
            raise FpirlInputError(f"a trajectory table must be .csv or .parquet (or a pandas DataFrame), "
                                  f"got {str(path)!r}")
        check_readable(path)
    if boundary not in BOUNDARIES:
        raise FpirlInputError(f"boundary must be 'periodic' or 'reflecting', got {boundary!r}")
    if int(stride) != stride or stride < 1:
        raise FpirlInputError(f"stride must be a positive integer, got {stride!r}")
    stride = int(stride)
    if not (np.isfinite(margin) and margin >= 0):
        raise FpirlInputError(f"margin must be a non-negative number, got {margin!r}")
    track, time = str(track).strip(), str(time).strip()
    states = _column_list(state, "state")
    velocity = isinstance(action, str) and action.strip().lower() == "velocity"
    actions = [] if action is None or velocity else _column_list(action, "action")
    used = [track, time, *states, *actions]
    dup = sorted({c for c in used if used.count(c) > 1})
    if dup:
        raise FpirlInputError(f"column{'s' if len(dup) > 1 else ''} {', '.join(map(repr, dup))} "
                              f"{'are' if len(dup) > 1 else 'is'} given for more than one role")
    names = states + ([f"v_{c}" for c in states] if velocity else actions)
    if len(set(names)) != len(names):
        raise FpirlInputError(f"axis names must be distinct, got {names}")
    check_netcdf_names(names, "column name")  # they name the result's axes: refuse before the work
    roles = ["state"] * len(states) + ["action"] * (len(names) - len(states))
    lower = upper = None
    if bounds is not None:
        lower, upper = _check_bounds(bounds, names)
    elif boundary == "periodic":
        raise FpirlInputError("a periodic box needs bounds (one LO:HI per axis): the period cannot be inferred "
                              "from the data")

    numeric = [time, *states, *actions]
    if frame is not None:
        cols = read_frame_columns(frame, track, numeric)
        path = "<DataFrame>"
    elif suffix in CSV_SUFFIXES:
        cols = read_csv_columns(path, track, numeric, progress=progress, engine=engine)
    else:
        cols = read_parquet_columns(path, track, numeric, progress=progress)
    n_rows = cols.n_rows
    if n_rows == 0:
        raise FpirlInputError(f"{str(path)!r} is an empty table (column names but no rows)")
    ids = cols.track_ids
    t = cols.numeric.pop(time)
    data_cols = states + actions
    what = "position" if not actions else "value"
    x = np.empty((n_rows, len(data_cols)))
    for j, c in enumerate(data_cols):
        x[:, j] = cols.numeric.pop(c)
    codes = cols.codes
    del cols
    index = None  # file row (0-based) of every kept row; None: all rows, in file order
    missing = np.isnan(t) | np.isnan(x).any(axis=1)
    if np.any(missing):  # an empty cell (or NaN): the observation is missing, like a missing frame
        n_missing, first = int(np.count_nonzero(missing)), int(np.flatnonzero(missing)[0]) + 1
        if n_missing == n_rows:
            raise FpirlInputError(f"every row has a missing (empty or NaN) time or {what}")
        index = np.flatnonzero(~missing)
        codes, t, x = codes[index], t[index], x[index]
        warnings.warn(f"{n_missing} of {n_rows} rows {'has' if n_missing == 1 else 'have'} a missing (empty or NaN) time or {what} (the first at row "
                      f"{first}) and {'was' if n_missing == 1 else 'were'} dropped (each splits its track like a missing frame)", stacklevel=2)
    del missing
    _first_nonfinite(t, [time], _RowNumbers(index), "time")
    _first_nonfinite(x, data_cols, _RowNumbers(index), what)
    same = codes[1:] == codes[:-1]
    if np.any(codes[1:] < codes[:-1]) or np.any(same & (t[1:] < t[:-1])):
        # interleaved tracks or rows out of time order: group by track, then by time (stable: equal
        # times keep their file order, so a duplicate is reported with its file rows)
        order = np.lexsort((t, codes))
        codes, t, x = codes[order], t[order], x[order]
        index = order if index is None else index[order]
        del order
    del same
    rows = _RowNumbers(index)
    dt0, frame = _frames(codes, t, ids, rows, dt, float(time_tolerance), single)
    del rows

    if stride > 1:
        keep = frame % stride == 0
        codes, t, x, frame = codes[keep], t[keep], x[keep], frame[keep]
    n_obs = codes.size
    dt_out = stride * dt0
    periodic = boundary == "periodic"
    dropped = 0
    wrap = wrap and periodic
    if lower is not None:
        if wrap:  # minimal image: a position one period off is the same point
            x = wrap_into(x, lower[: x.shape[1]], upper[: x.shape[1]])
        keep = _inside(x, lower[: x.shape[1]], upper[: x.shape[1]], periodic)
        if not np.all(keep):
            dropped += int(n_obs - np.count_nonzero(keep))
            codes, t, x, frame = codes[keep], t[keep], x[keep], frame[keep]
    if velocity and codes.size:
        link = _links(codes, frame, stride)
        dx = np.diff(x, axis=0)
        if periodic:
            length = upper[: len(states)] - lower[: len(states)]
            dx -= length * np.round(dx / length)
        v = dx[link[1:]] / dt_out
        codes, t, x, frame = codes[link], t[link], x[link], frame[link]
        x = np.concatenate([x, v], axis=1)
        if lower is not None and not wrap:
            keep = _inside(x[:, len(states):], lower[len(states):], upper[len(states):], periodic)
            if not np.all(keep):
                dropped += int(keep.size - np.count_nonzero(keep))
                codes, t, x, frame = codes[keep], t[keep], x[keep], frame[keep]
    trimmed = 0
    if lower is None and robust_box and codes.size:
        f_lo, f_hi = robust_limits(x)
        beyond = (x < f_lo) | (x > f_hi)
        keep = ~beyond.any(axis=1)
        if not np.all(keep):
            trimmed = int(keep.size - np.count_nonzero(keep))
            axes = ", ".join(n for n, a in zip(names, beyond.any(axis=0)) if a)
            codes, t, x, frame = codes[keep], t[keep], x[keep], frame[keep]
            warnings.warn(f"{trimmed} of {n_obs} observations lie beyond the default box (the robust quantile range "
                          f"of the data, widened; axes {axes}) and are not used in the fit "
                          "(each splits its track); give --bounds to keep them (held-out evaluation scores them "
                          "anyway)", stacklevel=2)
    if dropped:
        if codes.size == 0:
            raise FpirlInputError(f"every observation ({n_obs}) lies outside the given bounds "
                                  f"{', '.join(f'{lo:g}:{hi:g}' for lo, hi in zip(lower, upper))}")
        warnings.warn(f"{dropped} of {n_obs} observations lie outside the bounds and were dropped "
                      "(each dropped row splits its track)", stacklevel=2)
    link = _links(codes, frame, stride)
    if codes.size == 0 and single:
        raise FpirlInputError("no observation left: velocity actions need two consecutive observations of a "
                              "track")
    if not np.any(link) and not single:
        raise FpirlInputError(
            f"no transitions left (stride {stride}{', velocity' if velocity else ''}"
            f"{', dropped rows' if dropped or trimmed else ''}): every track segment has a single observation"
        )
    if lower is None:
        lo, hi = x.min(axis=0), x.max(axis=0)  # after trimming: within the fences
        with np.errstate(over="ignore"):  # +-1e308: checked below
            span = hi - lo
        if np.any(span <= 0):
            j = int(np.flatnonzero(span <= 0)[0])
            raise FpirlInputError(f"axis {names[j]!r} is constant ({lo[j]:g}) in the data: give bounds explicitly")
        with np.errstate(over="ignore", invalid="ignore"):
            lower, upper = lo - margin * span, hi + margin * span
        huge = ~(np.isfinite(lower) & np.isfinite(upper))
        if np.any(huge):  # e.g. values of +-1e308: the range itself overflows
            j = int(np.flatnonzero(huge)[0])
            raise FpirlInputError(f"axis {names[j]!r} spans [{lo[j]:g}, {hi[j]:g}] in the data: too wide for a box "
                                  "(it overflows); give bounds explicitly (--bounds) or rescale the column")

    if not periodic:
        _warn_seam_jumps(x[:, : len(states)], link, (upper - lower)[: len(states)], states)
    segment = np.cumsum(~link) - 1
    new_track = np.zeros(codes.size, dtype=np.int64)
    change = codes[1:] != codes[:-1]
    new_track[1:] = np.cumsum(change)
    kept_ids = ids[codes[np.concatenate([[0], np.flatnonzero(change) + 1])]]
    source = {
        "path": str(path), "track": track, "time": time, "state": ",".join(states),
        "action": "velocity" if velocity else ",".join(actions), "stride": stride,
    }
    return TrackTable(x, segment, new_track, t, dt_out, tuple(names), tuple(roles), lower, upper, boundary,
                      kept_ids, source=source)
