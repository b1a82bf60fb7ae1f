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
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"real data not found ({DATA}; set ${DATA_ENV})")

#: (observations, tracks) of every set as documented in its SOURCE.txt, before velocity differencing
SIZES = {"bt549": (50216, 350), "t_cells": (4094, 199), "b_cells": (2230, 74), "neutrophils": (5462, 411),
         "corridor": (25536, 148), "bottleneck": (63110, 75)}


@needs_data
def test_locate_data_finds_the_shipped_folder():
    assert locate_data().resolve() == DATA.resolve()


@needs_data
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
    from fpirl.estimators._plausibility import scale_notes

    assert scale_notes(table) == []  # the time-unit and precision rules stay quiet on every real set


@needs_data
def test_benchmark_on_b_cells_end_to_end(tmp_path, cli):
    """One small set, a short CV list, no density estimator: report, figure, result and held-out CSV;
    ``fpirl evaluate`` on the written files reproduces the report's numbers."""
    report = run_realdata(tmp_path, data=DATA, sets=["b_cells"], progress=False, density=False, cv_elements=(2, 3))
    text = report.read_text()
    assert "| b_cells | 52/22 |" in text and "constant beta" in text and "0,0,2,2" in text
    folder = tmp_path / "b_cells"
    assert (folder / "figure.png").stat().st_size > 10_000
    proc = cli("evaluate", folder / "result.nc", folder / "test.csv", "--json")
    assert proc.returncode == 0, proc.stderr
    obj = json.loads(proc.stdout)
    row = next(line for line in text.splitlines() if line.startswith("| b_cells")).split("|")
    assert f"{obj['loglik']['fpirl']:.3f}" == row[4].strip()
    assert f"{obj['loglik']['persistent_random_walk']:.3f}" == row[7].strip()
    assert obj["loglik"]["fpirl"] > obj["loglik"]["diffusion"]


def test_mobility_generalisation_recovers_a_known_mobility():
    """Velocities with mobility g(a) = exp(0.8 a_x / 2) (noise and relaxation faster when moving right),
    psi = |a|^2 (so exp(-beta psi) stays stationary): the fit finds log g's slope, keeps psi, and its
    held-out score beats the constant-mobility (paper's) model. No real data needed."""
    from _simtracks import velocity_table

    from fpirl.estimators import IncrementsEstimator
    from fpirl.evaluation.heldout import fpirl_loglik
    from fpirl.tracks.steps import observed_transitions

    rng = np.random.default_rng(12)
    dt, beta, n, steps, slope = 0.05, 2.0, 200, 100, 0.4
    a = rng.normal(0, np.sqrt(0.5 / beta), (n, 2))
    s = np.zeros((steps + 1, n, 2))
    for k in range(steps):
        g = np.exp(slope * a[:, :1])
        drift = -g * 2 * a + np.concatenate([slope * g / beta, 0 * g], axis=1)
        a = a + drift * dt + np.sqrt(2 * g * dt / beta) * rng.normal(size=a.shape)
        s[k + 1] = s[k] + a * dt
    lo, hi = s.min(axis=(0, 1)) - 0.1, s.max(axis=(0, 1)) + 0.1
    table = velocity_table(s, dt, ["x", "y"], lo, hi)  # velocity actions, recognised as such (drift axes v_x, v_y)
    train, test = table.split_tracks(0.7, rng)
    tr = observed_transitions(test, "velocity")
    common = dict(hermite_elements=(0, 0, 2, 2), ridge=1e-4, second_lag=False, walls="none")
    fitted = IncrementsEstimator(mobility="auto", **common).fit(train)
    plain = IncrementsEstimator(mobility=0, **common).fit(train)
    assert fitted.mobility_ is not None and fitted.settings_["drift_axes"] == "v_x,v_y"
    assert fpirl_loglik(fitted, tr).mean() > fpirl_loglik(plain, tr).mean() + 0.02
    pts = np.array([[0.0, 0.0, 0.3, 0.0], [0.0, 0.0, -0.3, 0.2]])
    dlog = fitted.mobility_.log_g(pts[:1]) - fitted.mobility_.log_g(pts[1:])  # slope * 0.6 along a_x
    assert dlog[0] == pytest.approx(slope * 0.6, abs=0.08)
    # mean log g over the data is ~0 here (a_x is centred), so psi's scale is the truth's: grad psi = 2 a
    v = test.values[:, 2:]
    err = fitted.gradient(test.values)[:, 2:] - 2 * v
    assert np.sqrt(np.mean(err**2) / np.mean((2 * v) ** 2)) < 0.2


def test_shipped_corridor_set_runs_without_a_data_folder(tmp_path, monkeypatch):
    """The corridor set ships with the package (with its provenance and licence), so the benchmark
    runs from a fresh clone; a cheap part of it here (12 tracks, one CV resolution, no density fit)."""
    from fpirl.problems.realdata._data import SHIPPED_DIR, available_sets

    monkeypatch.setenv(DATA_ENV, str(tmp_path / "nowhere"))
    assert locate_data() is None
    assert [s.name for s in available_sets(None)] == ["corridor"]
    assert (SHIPPED_DIR / "corridor_uni_500_01.csv").stat().st_size < 1_000_000
    note = (SHIPPED_DIR / "PROVENANCE.md").read_text()
    assert "MIT" in note and "Attribution 4.0" in note and "8179b4b39e7c1e09eeb6b7d0f4e41f66e98cd6e4" in note
    report = run_realdata(tmp_path / "out", sets=["corridor"], quick=True, progress=False, density=False,
                          cv_elements=(2,), max_tracks=12)
    text = report.read_text()
    assert "| corridor | 8/4 |" in text and "## Track-level checks" in text
    assert (tmp_path / "out" / "corridor" / "tracks.png").stat().st_size > 10_000
