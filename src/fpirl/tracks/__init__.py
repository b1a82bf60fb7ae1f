"""Tracked trajectories: the track table, its readers (CSV, Parquet), cloud-in-cell binning and
the observed steps between consecutive observations.

``from fpirl.tracks import TrackTable`` keeps working; the reader is
:func:`fpirl.tracks.reading.read_tracks` (also ``fpirl.read_tracks``).
"""

from .table import TrackTable

__all__ = ["TrackTable"]
