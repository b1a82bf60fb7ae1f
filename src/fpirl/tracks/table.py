r"""Tracked observations in the joint state-action space: the input of the track estimators.

A :class:`TrackTable` holds observations ``x_i = (s_i, a_i)`` of many agents, sorted by *segment*
and time. A segment is a maximal run of one track's observations at consecutive frames: a missing
frame splits a track into two segments, so two consecutive rows of one segment are exactly one
sampling interval ``dt`` apart and form a *transition* ``x_i -> x_{i+1}`` (eq. ``SDE`` sampled at
``dt``). ``track`` keeps the original track of every row, so data can be split by whole tracks
(cross-validation, held-out evaluation, bootstrap) without cutting a track in two.

Reading a CSV/Parquet table into a :class:`TrackTable` (columns, velocity-derived actions, bounds)
is :func:`fpirl.tracks.reading.read_tracks`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..core._errors import FpirlInputError
from ..core.grid import BOUNDARIES, ROLES, Grid


@dataclass(frozen=True, eq=False)
class TrackTable:
    """Observations of tracked agents in a box of the joint space (rows sorted by segment, time).

    Parameters
    ----------
    values : ndarray, shape (n_obs, d)
        Positions in the joint space, state axes first, then action axes, in the user's units;
        inside ``[lower, upper]`` (periodic axes: ``[lower, upper)``).
    segment : ndarray of int, shape (n_obs,)
        Non-decreasing segment index ``0 .. n_segments - 1``.
    track : ndarray of int, shape (n_obs,)
        Index ``0 .. n_tracks - 1`` of the original track of each row (constant within a segment).
    time : ndarray, shape (n_obs,)
        Observation times (consecutive rows of one segment differ by ``dt``).
    dt : float
        Sampling interval.
    names, roles : tuple of str
        Axis names and roles ('state' | 'action').
    lower, upper : ndarray, shape (d,)
        The box.
    boundary : {'periodic', 'reflecting'}
    track_ids : ndarray, optional
        Original track identifiers, indexed by ``track``.
    source : dict, optional
        Where the rows came from (``path``, ``track``, ``time``, ``state``, ``action``, ``stride``:
        the columns and options :func:`fpirl.tracks.reading.read_tracks` was called with).
    """

    values: np.ndarray
    segment: np.ndarray
    track: np.ndarray
    time: np.ndarray
    dt: float
    names: tuple
    roles: tuple
    lower: np.ndarray
    upper: np.ndarray
    boundary: str = "reflecting"
    track_ids: np.ndarray | None = field(default=None)
    source: dict | None = field(default=None)

    def __post_init__(self):
        values = np.asarray(self.values, dtype=float)
        n = values.shape[0] if values.ndim == 2 else -1
        if values.ndim != 2 or values.shape[1] < 1:
            raise FpirlInputError(f"track values must have shape (n_obs, d), got {values.shape}")
        d = values.shape[1]
        for key in ("segment", "track", "time"):
            arr = np.asarray(getattr(self, key))
            if arr.shape != (n,):
                raise FpirlInputError(f"track {key} must have shape ({n},), got {arr.shape}")
        if len(self.names) != d or len(self.roles) != d:
            raise FpirlInputError(f"need {d} axis names and roles, got {len(self.names)} and {len(self.roles)}")
        if any(r not in ROLES for r in self.roles):
            raise FpirlInputError(f"roles must be 'state' or 'action', got {self.roles}")
        if self.boundary not in BOUNDARIES:
            raise FpirlInputError(f"boundary must be 'periodic' or 'reflecting', got {self.boundary!r}")
        lower = np.broadcast_to(np.asarray(self.lower, dtype=float), (d,)).copy()
        upper = np.broadcast_to(np.asarray(self.upper, dtype=float), (d,)).copy()
        if not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper)) and np.all(upper > lower)):
            raise FpirlInputError(f"bounds must be finite with lower < upper, got {lower} and {upper}")
        if not (np.isfinite(self.dt) and self.dt > 0):
            raise FpirlInputError(f"the sampling interval dt must be positive, got {self.dt}")
        if not np.all(np.isfinite(values)):
            raise FpirlInputError("track values contain NaN or infinite values")
        segment = np.asarray(self.segment, dtype=np.int64)
        if n and np.any(np.diff(segment) < 0):
            raise FpirlInputError("rows must be sorted by segment")
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "segment", segment)
        object.__setattr__(self, "track", np.asarray(self.track, dtype=np.int64))
        object.__setattr__(self, "time", np.asarray(self.time, dtype=float))
        object.__setattr__(self, "dt", float(self.dt))
        object.__setattr__(self, "names", tuple(map(str, self.names)))
        object.__setattr__(self, "roles", tuple(map(str, self.roles)))
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)

    # ------------------------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return self.values.shape[1]

    @property
    def n_obs(self) -> int:
        return self.values.shape[0]

    @property
    def n_tracks(self) -> int:
        return int(self.track.max()) + 1 if self.n_obs else 0

    @property
    def state_axes(self) -> tuple[int, ...]:
        return tuple(i for i, r in enumerate(self.roles) if r == "state")

    @property
    def action_axes(self) -> tuple[int, ...]:
        return tuple(i for i, r in enumerate(self.roles) if r == "action")

    @property
    def periodic(self) -> bool:
        return self.boundary == "periodic"

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Row indices ``(i, i + 1)`` of every transition (consecutive rows of one segment)."""
        i = np.flatnonzero(self.segment[1:] == self.segment[:-1])
        return i, i + 1

    def triples(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Row indices ``(i - 1, i, i + 1)`` of every run of three consecutive observations."""
        same = self.segment[1:] == self.segment[:-1]
        i = np.flatnonzero(same[:-1] & same[1:]) + 1
        return i - 1, i, i + 1

    def increments(self) -> tuple[np.ndarray, np.ndarray]:
        """Start points ``x_i`` and increments ``x_{i+1} - x_i`` of every transition.

        On periodic axes the increment is the minimal image (a tracker reports wrapped positions:
        a step across the seam is short, not long).
        """
        i0, i1 = self.pairs()
        dx = self.values[i1] - self.values[i0]
        if self.periodic:
            length = self.upper - self.lower
            dx -= length * np.round(dx / length)
        return self.values[i0], dx

    def grid(self, elements) -> Grid:
        """The FE :class:`~fpirl.core.grid.Grid` on this box with ``elements`` per axis."""
        return Grid(self.lower, self.upper, elements, names=self.names, roles=self.roles, boundary=self.boundary)

    def select_tracks(self, tracks) -> "TrackTable":
        """The rows of the given original tracks (indices into ``0 .. n_tracks - 1``), renumbered."""
        keep = np.isin(self.track, np.asarray(tracks, dtype=np.int64))
        kept_tracks, track = np.unique(self.track[keep], return_inverse=True)
        _, segment = np.unique(self.segment[keep], return_inverse=True)
        ids = None if self.track_ids is None else np.asarray(self.track_ids)[kept_tracks]
        return TrackTable(
            self.values[keep], segment, track, self.time[keep], self.dt, self.names, self.roles,
            self.lower, self.upper, self.boundary, ids, self.source,
        )

    def split_tracks(self, fraction: float, rng) -> tuple["TrackTable", "TrackTable"]:
        """Random split by whole tracks: ``(first, rest)`` with ``round(fraction * n_tracks)`` tracks first."""
        order = np.random.default_rng(rng).permutation(self.n_tracks)
        k = int(round(fraction * self.n_tracks))
        return self.select_tracks(order[:k]), self.select_tracks(order[k:])

    def __repr__(self):
        axes = ", ".join(f"{n}[{r}]" for n, r in zip(self.names, self.roles))
        return (f"TrackTable({self.n_obs} observations, {self.n_tracks} tracks, {len(self.pairs()[0])} transitions, "
                f"dt={self.dt:g}, axes: {axes}, {self.boundary})")
