"""Column readers for trajectory tables (CSV, Parquet): only the needed columns, streamed in blocks.

Every reader returns a :class:`_Columns`: the track column as dense integer codes (first-seen
order) plus the distinct track ids, and each numeric column as a float64 array (missing values
are NaN). Rows are counted from 1 after the header in every message (a CSV row ``r`` is on line
``r + 1`` of the file). Nothing here interprets the values (see :mod:`fpirl.tracks.reading`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from ..core._errors import FpirlInputError
import re

#: rows per block when streaming a table
BLOCK_ROWS = 1 << 20
CSV_SUFFIXES = (".csv",)
PARQUET_SUFFIXES = (".parquet", ".pq")


@dataclass
class _Columns:
    codes: np.ndarray  # int64 (n,), dense track codes 0..n_tracks-1 in first-seen order
    track_ids: np.ndarray  # (n_tracks,), original ids
    numeric: dict  # column name -> float64 (n,)

    @property
    def n_rows(self) -> int:
        return int(self.codes.size)


def _have_pyarrow() -> bool:
    try:
        import pyarrow  # noqa: F401
        import pyarrow.csv  # noqa: F401
    except ImportError:  # pragma: no cover - the test extra installs pyarrow
        return False
    return True


def _missing_columns(path: Path, available, needed) -> None:
    available = [str(c) for c in available]
    repeated = sorted({c for c in needed if available.count(c) > 1})
    if repeated:
        raise FpirlInputError(f"{str(path)!r} has more than one column named "
                              f"{', '.join(repr(c) for c in repeated)}: column names must be unique")
    missing = [c for c in needed if c not in available]
    if missing:
        which = ", ".join(repr(c) for c in missing)
        shown = ", ".join(repr(c) if c != c.strip() else c for c in available)  # quoted where blanks matter
        raise FpirlInputError(f"{str(path)!r} has no column {which} (available columns: {shown or 'none'})")


class _TrackCoder:
    """Dense integer codes for track ids, accumulated over blocks (first-seen order)."""

    def __init__(self):
        self.index: dict = {}
        self.ids: list = []

    def codes(self, values: np.ndarray, row0: int, column: str) -> np.ndarray:
        local, uniques = pd.factorize(values, use_na_sentinel=True)
        if np.any(local < 0):
            row = row0 + int(np.flatnonzero(local < 0)[0]) + 1
            raise FpirlInputError(f"column {column!r} (track) has a missing value at row {row}")
        return self._lookup(uniques.tolist())[local]

    def _lookup(self, uniques: list) -> np.ndarray:
        """Global codes of a block's distinct track ids (new ids get the next code; a handful per block)."""
        lookup = np.empty(len(uniques), dtype=np.int64)
        for j, u in enumerate(uniques):
            code = self.index.get(u)
            if code is None:
                code = self.index[u] = len(self.ids)
                self.ids.append(u)
            lookup[j] = code
        return lookup

    def codes_arrow(self, array, row0: int, column: str) -> np.ndarray:
        """Same as :meth:`codes` for a pyarrow array, hashed in C++ (no Python strings per row)."""
        import pyarrow as pa

        if pa.types.is_dictionary(array.type):
            array = array.cast(array.type.value_type)
        if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
            import pyarrow.compute as pc

            empty = pc.fill_null(pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(array)), 0), False)
            if pc.any(empty).as_py():
                row = row0 + int(np.flatnonzero(empty.to_numpy(zero_copy_only=False))[0]) + 1
                raise FpirlInputError(f"column {column!r} (track) has an empty value at row {row}")
        encoded = array.dictionary_encode()
        if encoded.null_count:
            row = row0 + int(np.flatnonzero(encoded.is_null().to_numpy(zero_copy_only=False))[0]) + 1
            raise FpirlInputError(f"column {column!r} (track) has a missing value at row {row}")
        local = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
        return self._lookup(encoded.dictionary.to_pylist())[local]

    def track_ids(self) -> np.ndarray:
        """The distinct ids; text ids that are all plain integers (as CSV gives them) become integers."""
        ids = np.asarray(self.ids)
        if ids.dtype.kind in "US" and ids.size:
            try:
                as_int = ids.astype(np.int64)
            except (ValueError, OverflowError):
                return ids
            if np.array_equal(as_int.astype(str), ids):
                return as_int
        return ids


_DATE_HINT = ("fpirl needs numeric model time: convert dates to plain numbers in the unit you mean, e.g. seconds "
              "since the first observation")


def _looks_like_date(value) -> bool:

    return bool(re.fullmatch(r"\s*\d{4}-\d{2}-\d{2}([T ]\d{1,2}:\d{2}(:\d{2}(\.\d*)?)?\S*)?\s*", str(value)))


def _check_kind(kind: str, column: str) -> None:
    """One-line error for columns fpirl would otherwise turn into numbers silently: true/false
    values (not 0/1 positions) and dates or durations (not nanoseconds)."""
    if kind == "b":
        raise FpirlInputError(f"column {column!r} holds true/false values, not numbers; if 0/1 is meant, store it "
                              "as numbers")
    if kind in "Mm":
        raise FpirlInputError(f"column {column!r} holds {'dates' if kind == 'M' else 'durations'}; {_DATE_HINT}")


def _check_arrow_type(typ, column: str) -> None:
    import pyarrow as pa

    if pa.types.is_boolean(typ):
        _check_kind("b", column)
    if pa.types.is_timestamp(typ) or pa.types.is_date(typ) or pa.types.is_time(typ):
        _check_kind("M", column)
    if pa.types.is_duration(typ):
        _check_kind("m", column)


def _numeric_or_error(values, column: str, row0: int) -> np.ndarray:
    """float64 array of a block, or a one-line error naming the first non-numeric value."""
    series = pd.Series(values)
    _check_kind(series.dtype.kind, column)
    if series.dtype.kind in "iuf":
        return series.to_numpy(dtype=float, na_value=np.nan)
    converted = pd.to_numeric(series, errors="coerce")
    bad = converted.isna().to_numpy() & series.notna().to_numpy()
    if series.dtype == object:
        stripped = series.astype(str).str.strip()
        bad &= ~stripped.str.lower().isin(["", "nan", "na", "n/a", "null", "none"]).to_numpy()
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        raise FpirlInputError(
            f"column {column!r} has a non-numeric value {str(series.iloc[i])!r} at row {row0 + i + 1}"
            + (f"; {_DATE_HINT}" if _looks_like_date(series.iloc[i]) else "")
        )
    return converted.to_numpy(dtype=float, na_value=np.nan)


def _progress_bar(total, progress, desc):
    return tqdm(total=total, disable=not progress, unit="row", unit_scale=True, desc=desc, leave=False)


# --------------------------------------------------------------------------------------------
# CSV
# --------------------------------------------------------------------------------------------
#: Field separators a CSV file may use; :func:`csv_delimiter` takes the one its header line uses most.
DELIMITERS = (",", ";", "\t")


def csv_delimiter(path: Path) -> str:
    """The field separator of a CSV file: of ``,``, ``;`` and tab the most frequent in its first line
    (comma when none occurs: a one-column file)."""
    with open(path, encoding="utf-8-sig", errors="replace") as f:
        line = f.readline()
    counts = {d: line.count(d) for d in DELIMITERS}
    best = max(DELIMITERS, key=lambda d: counts[d])
    return best if counts[best] else ","


def _csv_header(path: Path, sep: str) -> list:
    try:
        # the names as written (pandas would rename a repeated one to 'name.1')
        return [str(c) for c in pd.read_csv(path, nrows=1, header=None, sep=sep, dtype=str,
                                            keep_default_na=False).iloc[0]]
    except pd.errors.EmptyDataError:
        raise FpirlInputError(f"{str(path)!r} is empty (no header line with the column names)") from None
    except (UnicodeDecodeError, pd.errors.ParserError) as exc:
        msg = " ".join(str(exc).split())[:200]
        raise FpirlInputError(f"cannot read {str(path)!r} as CSV: {msg}") from None


def _locate_bad_csv_value(path: Path, column: str, sep: str) -> None:
    """Re-read one column as text to name its first non-numeric value (error path only)."""
    row0 = 0
    with pd.read_csv(path, usecols=[column], dtype=str, chunksize=BLOCK_ROWS, sep=sep) as chunks:
        for chunk in chunks:  # (the file is closed when the error is raised)
            _numeric_or_error(chunk[column].to_numpy(dtype=object), column, row0)
            row0 += len(chunk)


def _read_csv_pyarrow(path: Path, track: str, numeric: list, progress: bool, sep: str) -> _Columns:
    import pyarrow as pa
    import pyarrow.csv as pcsv

    convert = pcsv.ConvertOptions(
        include_columns=[track, *numeric],
        column_types={track: pa.string(), **{c: pa.float64() for c in numeric}},
    )
    coder = _TrackCoder()
    codes, cols = [], {c: [] for c in numeric}
    row0 = 0
    with _progress_bar(None, progress, "reading CSV") as bar:
        try:
            reader = pcsv.open_csv(path, read_options=pcsv.ReadOptions(block_size=1 << 24),
                                   parse_options=pcsv.ParseOptions(delimiter=sep),
                                   convert_options=convert)
            for batch in reader:
                n = batch.num_rows
                codes.append(coder.codes_arrow(batch.column(track), row0, track))
                for c in numeric:
                    cols[c].append(batch.column(c).to_numpy(zero_copy_only=False).astype(float, copy=False))
                row0 += n
                bar.update(n)
        except pa.ArrowInvalid as exc:
            msg = " ".join(str(exc).split())
            for c in numeric:
                if f"'{c}'" in msg or "conversion error" in msg:
                    _locate_bad_csv_value(path, c, sep)
            raise FpirlInputError(f"cannot read {str(path)!r} as CSV: {msg[:200]}") from None
    result = _Columns(
        np.concatenate(codes) if codes else np.zeros(0, np.int64),
        coder.track_ids(),
        {c: np.concatenate(v) if v else np.zeros(0) for c, v in cols.items()},
    )
    del codes, cols, reader
    pa.default_memory_pool().release_unused()  # hand the parser's buffers back to the system
    return result


def _read_csv_pandas(path: Path, track: str, numeric: list, progress: bool, sep: str) -> _Columns:
    coder = _TrackCoder()
    codes, cols = [], {c: [] for c in numeric}
    row0 = 0
    with _progress_bar(None, progress, "reading CSV") as bar, pd.read_csv(
            path, usecols=[track, *numeric], chunksize=BLOCK_ROWS, low_memory=False, sep=sep) as chunks:
        for chunk in chunks:
            codes.append(coder.codes(chunk[track].to_numpy(), row0, track))
            for c in numeric:
                cols[c].append(_numeric_or_error(chunk[c].to_numpy(), c, row0))
            row0 += len(chunk)
            bar.update(len(chunk))
    return _Columns(
        np.concatenate(codes) if codes else np.zeros(0, np.int64),
        coder.track_ids(),
        {c: np.concatenate(v) if v else np.zeros(0) for c, v in cols.items()},
    )


def read_csv_columns(path: Path, track: str, numeric: list, progress: bool = False, engine: str = "auto"):
    """Read the track column and the numeric columns of a CSV file (pyarrow when installed)."""
    sep = csv_delimiter(path)
    _missing_columns(path, _csv_header(path, sep), [track, *numeric])
    use_arrow = engine == "pyarrow" or (engine == "auto" and _have_pyarrow())
    reader = _read_csv_pyarrow if use_arrow else _read_csv_pandas
    try:
        return reader(path, track, numeric, progress, sep)
    except (UnicodeDecodeError, pd.errors.ParserError) as exc:
        msg = " ".join(str(exc).split())[:200]
        raise FpirlInputError(f"cannot read {str(path)!r} as CSV: {msg}") from None


# --------------------------------------------------------------------------------------------
# DataFrame
# --------------------------------------------------------------------------------------------
def read_frame_columns(frame: pd.DataFrame, track: str, numeric: list) -> _Columns:
    """The track column and the numeric columns of an in-memory DataFrame (same rules as a file)."""
    _missing_columns(Path("<DataFrame>"), frame.columns, [track, *numeric])
    coder = _TrackCoder()
    codes = coder.codes(frame[track].to_numpy(), 0, track)
    cols = {c: _numeric_or_error(frame[c].to_numpy(), c, 0) for c in numeric}
    return _Columns(codes, coder.track_ids(), cols)


# --------------------------------------------------------------------------------------------
# Parquet
# --------------------------------------------------------------------------------------------
def read_parquet_columns(path: Path, track: str, numeric: list, progress: bool = False) -> _Columns:
    """Read the needed columns of a Parquet file, streaming its row groups in blocks."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - the test extra installs pyarrow
        raise FpirlInputError("reading Parquet files needs pyarrow: pip install 'fpirl[parquet]'") from None
    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowInvalid, OSError) as exc:
        msg = " ".join(str(exc).split())[:200]
        raise FpirlInputError(f"cannot read {str(path)!r} as Parquet: {msg}") from None
    _missing_columns(path, pf.schema_arrow.names, [track, *numeric])
    for c in numeric:
        _check_arrow_type(pf.schema_arrow.field(c).type, c)
    n = pf.metadata.num_rows
    coder = _TrackCoder()
    codes = np.empty(n, dtype=np.int64)
    cols = {c: np.empty(n) for c in numeric}
    row0 = 0
    with _progress_bar(n, progress, "reading Parquet") as bar:
        try:
            for batch in pf.iter_batches(batch_size=BLOCK_ROWS, columns=[track, *numeric]):
                m = batch.num_rows
                codes[row0:row0 + m] = coder.codes_arrow(batch.column(track), row0, track)
                for c in numeric:
                    arr = batch.column(c)
                    if pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type):
                        cols[c][row0:row0 + m] = arr.cast(pa.float64()).to_numpy(zero_copy_only=False)
                    else:
                        cols[c][row0:row0 + m] = _numeric_or_error(arr.to_numpy(zero_copy_only=False), c, row0)
                row0 += m
                bar.update(m)
        except (pa.ArrowException, OSError) as exc:  # a corrupt data page, a truncated file
            msg = " ".join(str(exc).split())[:200] or type(exc).__name__
            raise FpirlInputError(f"cannot read {str(path)!r} as Parquet (corrupt data near row {row0 + 1}): "
                                  f"{msg}") from None
    return _Columns(codes, coder.track_ids(), cols)
