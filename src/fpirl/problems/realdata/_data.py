"""The shipped real track sets: where they are, their columns and units, and reading them.

Each set becomes a long-format CSV (``track, time, x, y``) read by :func:`fpirl.tracks.reading.read_tracks`
with state = position, action = velocity (backward differences) and reflecting walls. The
pedestrian files (whitespace-separated, ``#`` comments, frame numbers at 25 fps) are converted to
CSV in the output folder first, so every set can be refitted with the ``fpirl fit`` command printed
in the report.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ...core._errors import FpirlInputError
from ...io.netcdf import atomic_write
from ...tracks.reading import read_tracks

#: environment variable overriding the location of the real-data folder
DATA_ENV = "FPIRL_REALDATA"
#: the small real set shipped inside the package (provenance and licence in its PROVENANCE.md)
SHIPPED_DIR = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True)
class TrackSet:
    """One shipped set: file, columns and a description with units."""

    name: str
    file: str  # relative to the data folder
    track: str
    time: str
    state: tuple
    what: str
    units: str  # "position unit, time unit"
    fps: float | None = None  # whitespace pedestrian files: frames per second (converted to CSV)
    optional: bool = False
    shipped: bool = False  # in the package (SHIPPED_DIR), not in the data folder

    def path(self, data_dir: Path | None) -> Path:
        return SHIPPED_DIR / self.file if self.shipped else Path(data_dir) / self.file


TRACK_SETS = (
    TrackSet("bt549", "cellmigration_bt549/TrajectoryDataset.csv", "track_id", "t_min", ("x_px", "y_px"),
             "BT549 breast-cancer cells in vitro (Incucyte, 10 min frames)", "px, min"),
    TrackSet("t_cells", "celltrackr_lymph_node/TCells.csv", "track_id", "t_s", ("x_um", "y_um"),
             "T cells in a mouse lymph node (two-photon, 24 s frames)", "um, s"),
    TrackSet("b_cells", "celltrackr_lymph_node/BCells.csv", "track_id", "t_s", ("x_um", "y_um"),
             "B cells in a mouse lymph node (two-photon, 24 s frames)", "um, s"),
    TrackSet("neutrophils", "celltrackr_lymph_node/Neutrophils.csv", "track_id", "t_s", ("x_um", "y_um"),
             "neutrophils moving to an infection in the ear (24 s frames)", "um, s"),
    TrackSet("corridor", "corridor_uni_500_01.csv", "id", "t_s", ("x", "y"),
             "pedestrians, uni-directional corridor (Juelich, 25 fps; shipped with fpirl)", "m, s", shipped=True),
    TrackSet("bottleneck", "pedpy_juelich/040_c_56_h-.txt", "id", "t_s", ("x", "y"),
             "pedestrians, bottleneck entrance (Juelich, 25 fps)", "m, s", fps=25.0),
)


def locate_data(data=None) -> Path | None:
    """The real-data folder: ``data`` if given, else ``$FPIRL_REALDATA``, else ``../shared/realdata``
    next to the repository of this package (a source checkout); None when none exists."""
    if data is not None:
        path = Path(data)
        if not path.is_dir():
            raise FpirlInputError(f"--data {str(path)!r} is not a directory")
        return path
    env = os.environ.get(DATA_ENV)
    if env:
        return Path(env) if Path(env).is_dir() else None
    here = Path(__file__).resolve()
    for parent in here.parents:
        cand = parent.parent / "shared" / "realdata"
        if (parent / "pyproject.toml").exists() and cand.is_dir():
            return cand
    return None


def available_sets(data_dir: Path | None, names=None) -> list[TrackSet]:
    """The sets whose file exists (all of ``names`` when given; unknown names are an error); without a
    data folder only the shipped sets."""
    known = {s.name: s for s in TRACK_SETS}
    if names is not None:
        bad = [n for n in names if n not in known]
        if bad:
            raise FpirlInputError(f"unknown real-data set(s) {', '.join(bad)} (known: {', '.join(known)})")
        chosen = [known[n] for n in names]
    else:
        chosen = list(TRACK_SETS)
    return [s for s in chosen if (s.shipped or data_dir is not None) and s.path(data_dir).is_file()]


def table_csv(spec: TrackSet, data_dir: Path, work_dir: Path) -> Path:
    """A CSV of the set readable by ``read_tracks`` (the original, or a conversion in ``work_dir``)."""
    src = spec.path(data_dir)
    if spec.fps is None:
        return src

    out = Path(work_dir) / f"{spec.name}.csv"
    if not out.exists():
        df = pd.read_csv(src, sep=r"\s+", comment="#", header=None, names=["id", "frame", "x", "y", "z"])
        df["t_s"] = df["frame"] / spec.fps

        atomic_write(out, lambda tmp: df[["id", "t_s", "x", "y"]].to_csv(tmp, index=False))
    return out


def read_set(spec: TrackSet, data_dir: Path, work_dir: Path, robust_box: bool = True):
    """The set as a :class:`~fpirl.tracks.TrackTable` (position states, velocity actions, reflecting;
    the default box of :func:`~fpirl.tracks.reading.read_tracks`, or every row with
    ``robust_box=False``) and the CSV it was read from."""

    path = table_csv(spec, data_dir, work_dir)
    table = read_tracks(path, track=spec.track, time=spec.time, state=list(spec.state), action="velocity",
                        boundary="reflecting", robust_box=robust_box)
    return table, path
