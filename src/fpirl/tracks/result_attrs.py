"""The contract between a track table and the result file fitted on it (docs/formats.md, "Result
files"): which attrs record the table, written by :func:`table_attrs` (``fpirl fit`` on a table,
the real-data benchmark) and read back by :func:`table_columns` (``fpirl evaluate`` reads a
held-out table with the same columns and stride).
"""

from __future__ import annotations

import numpy as np

from .table import TrackTable

#: ``read_tracks`` keyword -> result attr that records it
TABLE_ATTRS = {"track": "table_track", "time": "table_time", "state": "table_state", "action": "table_action"}


def table_attrs(tracks: TrackTable, source=None) -> dict:
    """Result attrs recording the table ``tracks`` was read from and what was kept of it.

    Parameters
    ----------
    tracks : TrackTable
        As returned by :func:`fpirl.tracks.reading.read_tracks` (its ``source`` holds the columns
        and the stride; a split of it keeps them).
    source : str or path, optional
        The ``source`` attr (default: the path the table was read from).

    Returns
    -------
    dict
        ``source``, ``source_kind = 'tracks'``, ``table_track``, ``table_time``, ``table_state``
        (comma-separated), ``table_action`` (``'velocity'``, comma-separated columns or empty),
        ``table_stride``, ``table_observations``, ``table_tracks`` and ``table_transitions``
        (after dropping).
    """
    src = dict(tracks.source or {})
    missing = [k for k in ("track", "time", "state") if k not in src]
    if missing:
        raise ValueError(f"the track table does not record its columns ({', '.join(missing)}); read it with "
                         "fpirl.read_tracks")
    attrs = {"source": str(source if source is not None else src.get("path", "")), "source_kind": "tracks"}
    attrs.update({attr: str(src.get(key) or "") for key, attr in TABLE_ATTRS.items()})
    attrs.update({"table_stride": int(src.get("stride", 1)), "table_observations": int(tracks.n_obs),
                  "table_tracks": int(tracks.n_tracks), "table_transitions": int(len(tracks.pairs()[0]))})
    return attrs


def table_columns(attrs) -> dict:
    """The ``read_tracks`` keywords a result records (:func:`table_attrs`): ``track``, ``time``,
    ``state``, ``action`` (None where not recorded; an empty action is None) and ``stride`` (default 1)."""
    out = {}
    for key, attr in TABLE_ATTRS.items():
        stored = attrs.get(attr)
        out[key] = None if stored is None else str(stored)
    if out["action"] is not None and not out["action"].strip():
        out["action"] = None
    out["stride"] = int(np.asarray(attrs.get("table_stride", 1)).reshape(()))
    return out
