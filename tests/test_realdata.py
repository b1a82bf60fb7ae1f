"""The real-data benchmark on the shipped sets (skipped when the data folder is absent)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from fpirl.problems.realdata import DATA_ENV, TRACK_SETS, locate_data, run_realdata
from fpirl.problems.realdata._data import read_set

DATA = Path(os.environ[DATA_ENV]) if os.environ.get(DATA_ENV) else (
    Path(__file__).resolve().parents[1] / ".." / "shared" / "realdata")
pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason=f"real data not found ({DATA}; set ${DATA_ENV})")

#: (observations, tracks) of every set as documented in its SOURCE.txt, before velocity differencing
SIZES = {"bt549": (50216, 350), "t_cells": (4094, 199), "b_cells": (2230, 74), "neutrophils": (5462, 411),
         "corridor": (25536, 148), "bottleneck": (63110, 75)}


def test_locate_data_finds_the_shipped_folder():
    assert locate_data().resolve() == DATA.resolve()


@pytest.mark.parametrize("spec", TRACK_SETS, ids=[s.name for s in TRACK_SETS])
def test_every_set_reads_as_position_velocity_tracks(spec, tmp_path):
    table, _ = read_set(spec, DATA, tmp_path)
    n_obs, n_tracks = SIZES[spec.name]
    assert table.names[2:] == tuple(f"v_{c}" for c in spec.state)
    assert table.roles == ("state", "state", "action", "action") and table.boundary == "reflecting"
    # one observation per segment becomes the first velocity's anchor: n_obs - segments rows remain
    assert table.n_tracks <= n_tracks and table.n_obs >= n_obs - 2 * n_tracks - 10
    i0, i1 = table.pairs()
    assert np.allclose(table.values[i1, 2:] * table.dt, table.values[i1, :2] - table.values[i0, :2])


def test_benchmark_on_b_cells_end_to_end(tmp_path, cli):
    """One small set, two candidates, no density estimator: report, figure, result and held-out CSV;
    ``fpirl evaluate`` on the written files reproduces the report's numbers."""
    report = run_realdata(tmp_path, data=DATA, sets=["b_cells"], progress=False, density=False,
                          candidates=(("velocity-only", 2, 1e-2), ("velocity-only", 3, 1e-2)))
    text = report.read_text()
    assert "| b_cells | 52/22 |" in text and "velocity-only" in text
    folder = tmp_path / "b_cells"
    assert (folder / "figure.png").stat().st_size > 10_000
    proc = cli("evaluate", folder / "result.nc", folder / "test.csv", "--json")
    assert proc.returncode == 0, proc.stderr
    obj = json.loads(proc.stdout)
    row = [line for line in text.splitlines() if line.startswith("| b_cells")][0].split("|")
    assert f"{obj['loglik']['fpirl']:.3f}" == row[4].strip()
    assert f"{obj['loglik']['persistent_random_walk']:.3f}" == row[7].strip()
    assert obj["loglik"]["fpirl"] > obj["loglik"]["diffusion"]
