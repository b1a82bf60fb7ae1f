"""Issue 19, 'Measured': fits that cannot be trusted warn (few tracks, beta against the data's own
increments, an option worse than the default), printed choices can be typed back, the API and the
CLI share their defaults, and the bootstrap works with the default resolution."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from fpirl.cli import main
from fpirl.estimators import IncrementsEstimator
from fpirl.evaluation.plausibility import FitWarning
from fpirl.tracks.reading import read_tracks

COLS = ["--track", "id", "--time", "t", "--state", "x,y", "--action", "velocity", "--no-progress"]


def _ou_tracks(n, steps, rng, dt=0.1):
    """Positions whose velocity is an OU process (a persistent walk with a preferred speed 0), as a CSV frame."""
    v = rng.normal(0, 1, (n, 2))
    s = rng.uniform(0, 10, (n, 2))
    rows = []
    for k in range(steps + 1):
        rows.append(np.column_stack([np.arange(n), np.full(n, k * dt), s]))
        v = v - 0.8 * v * dt + np.sqrt(2 * 0.8 * dt) * rng.standard_normal(v.shape)
        s = s + v * dt
    arr = np.concatenate(rows)
    return pd.DataFrame({"id": arr[:, 0].astype(int), "t": arr[:, 1], "x": arr[:, 2], "y": arr[:, 3]})


@pytest.fixture(scope="module")
def ou_csv(tmp_path_factory):
    df = _ou_tracks(40, 30, np.random.default_rng(3))
    path = tmp_path_factory.mktemp("ou") / "ou.csv"
    df.to_csv(path, index=False)
    return path


def _fit_warnings(est, table):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(table)
    return [str(w.message) for w in caught if issubclass(w.category, FitWarning)]


def test_single_track_and_too_many_coefficients_warn(ou_csv):
    df = pd.read_csv(ou_csv)
    one = df[df.id == 0]
    path = ou_csv.parent / "one.csv"
    one.to_csv(path, index=False)
    table = read_tracks(path, track="id", time="t", state=["x", "y"], action="velocity")
    notes = _fit_warnings(IncrementsEstimator(hermite_elements=(0, 0, 4, 4), mobility=0), table)
    assert any("only 1 track" in n for n in notes)
    assert any("coefficients" in n and "fewer than" in n for n in notes)


def test_beta_inconsistent_with_the_increments_warns(ou_csv):
    table = read_tracks(ou_csv, track="id", time="t", state=["x", "y"], action="velocity")
    # the data's own beta: 2 dt / <dv^2> (per axis); 1e6 times larger is another unit system
    i0, i1 = table.pairs()
    dv = table.values[i1][:, 2:] - table.values[i0][:, 2:]
    own = 2 * table.dt / np.mean(dv**2)
    for beta, word in ((own * 1e6, "99.9%"), (own / 100, "too small")):
        notes = _fit_warnings(IncrementsEstimator(hermite_elements=(0, 0, 2, 2), beta=beta, mobility=0), table)
        assert any(word in n for n in notes), notes
    # the fit with its own beta is plausible: no warning
    assert _fit_warnings(IncrementsEstimator(hermite_elements=(0, 0, 2, 2), mobility=0), table) == []


def test_printed_choices_type_back_to_the_same_model(ou_csv, tmp_path, capsys):
    from fpirl.io import read_result

    a, b = tmp_path / "a.nc", tmp_path / "b.nc"
    assert main(["fit", str(ou_csv), "-o", str(a), *COLS, "--uncertainty", "none"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "the same model with fixed choices:" in x)
    options = line.split("fixed choices:")[1].split()
    assert options[:2] == ["--hermite-elements", "0,0,2,2"] or options[1].startswith("0,0,")
    assert main(["fit", str(ou_csv), "-o", str(b), *COLS, "--uncertainty", "none", *options]) == 0
    ra, rb = read_result(a), read_result(b)
    np.testing.assert_allclose(rb["hermite_coefficients"].values, ra["hermite_coefficients"].values, rtol=1e-8,
                               atol=1e-10)
    assert float(rb.attrs["beta"]) == pytest.approx(float(ra.attrs["beta"]), rel=1e-10)
    assert "psi constant along x,y" in out


def test_api_defaults_are_the_cli_defaults(ou_csv, tmp_path):
    from fpirl.io import read_result

    out = tmp_path / "r.nc"
    assert main(["fit", str(ou_csv), "-o", str(out), *COLS, "--uncertainty", "none"]) == 0
    table = read_tracks(ou_csv, track="id", time="t", state=["x", "y"], action="velocity")
    est = IncrementsEstimator().fit(table)
    assert est.settings_["drift_axes"] == "v_x,v_y" or est.settings_["drift_axes"] == read_result(out).attrs[
        "solver_drift_axes"]
    assert est.settings_["drift_axes"] == read_result(out).attrs["solver_drift_axes"]
    np.testing.assert_allclose(est.coef_, read_result(out)["hermite_coefficients"].values, rtol=1e-10, atol=1e-12)


def test_bootstrap_with_the_default_resolution(ou_csv, tmp_path, capsys):
    out = tmp_path / "r.nc"
    assert main(["fit", str(ou_csv), "-o", str(out), *COLS, "--uncertainty", "bootstrap",
                 "--uncertainty-samples", "4"]) == 0
    assert "uncertainty (bootstrap)" in capsys.readouterr().out


def test_worse_option_prints_both_scores_and_warns(ou_csv, tmp_path, capsys):
    out = tmp_path / "r.nc"
    with pytest.warns(FitWarning, match="worse on held-out tracks"):  # the density estimator: below the default
        assert main(["fit", str(ou_csv), "-o", str(out), "--track", "id", "--time", "t", "--state", "x,y",
                     "--no-progress", "--uncertainty", "none", "--estimator", "density", "--hermite-elements", "2"]) == 0
    text = capsys.readouterr().out
    assert "--estimator density scores" in text and "for the defaults" in text
    scores = [float(w) for w in text.split("--estimator density scores")[1].split()[:3:2]]
    assert scores[0] < scores[1]


def test_mobility_and_second_lag_from_the_cli_are_scored_by_evaluate(ou_csv, tmp_path, capsys):
    import json

    from fpirl.evaluation.heldout import fpirl_loglik
    from fpirl.io import read_result
    from fpirl.tracks.steps import observed_transitions

    out = tmp_path / "r.nc"
    assert main(["fit", str(ou_csv), "-o", str(out), *COLS, "--uncertainty", "none", "--hermite-elements", "0,0,2,2",
                 "--mobility", "1", "--second-lag", "on"]) == 0
    ds = read_result(out)
    assert int(ds.attrs["mobility_degree"]) == 1 and "second_lag_rho" in ds.attrs
    capsys.readouterr()
    assert main(["evaluate", str(out), str(ou_csv), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["loglik"]["fpirl"]
    table = read_tracks(ou_csv, track="id", time="t", state=["x", "y"], action="velocity")
    est = IncrementsEstimator(hermite_elements=(0, 0, 2, 2), mobility=1, second_lag=True).fit(table)
    assert got == pytest.approx(float(np.mean(fpirl_loglik(est, observed_transitions(table)))), rel=1e-9)


def test_times_in_a_finer_unit_warn(ou_csv, tmp_path):
    """Rule 'time unit': positions recorded to 1e-3, the same tracks with times in s (no note) and in ms
    (dt = 100 time units, motion per time unit under 20 resolutions: a note naming both numbers)."""
    from fpirl.estimators._plausibility import scale_notes

    df = pd.read_csv(ou_csv).round({"x": 3, "y": 3})
    kw = dict(track="id", time="t", state=["x", "y"], action="velocity")
    sec, ms = tmp_path / "s.csv", tmp_path / "ms.csv"
    df.to_csv(sec, index=False)
    df.assign(t=df.t * 1000).to_csv(ms, index=False)
    assert scale_notes(read_tracks(sec, **kw)) == []
    (note,) = scale_notes(read_tracks(ms, **kw))
    assert "dt=100 " in note and "0.001" in note and "ms?" in note
    # the CLI fit prints it and still succeeds
    fixed = ["--hermite-elements", "0,0,2,2", "--ridge", "0.01", "--mobility", "0", "--second-lag", "off",
             "--uncertainty", "none"]
    with pytest.warns(FitWarning, match="times in ms"):
        assert main(["fit", str(ms), "-o", str(tmp_path / "ms.nc"), *COLS, *fixed]) == 0
    # steps at the precision of the positions: the quantisation note
    coarse = tmp_path / "coarse.csv"
    df.round({"x": 1, "y": 1}).to_csv(coarse, index=False)
    assert any("mostly rounding" in n for n in scale_notes(read_tracks(coarse, **kw)))


def test_shipped_corridor_in_milliseconds_warns(tmp_path):
    from fpirl.estimators._plausibility import scale_notes
    from fpirl.problems.realdata._data import TRACK_SETS, read_set

    spec = next(s for s in TRACK_SETS if s.name == "corridor")
    table, path = read_set(spec, None, tmp_path)
    assert scale_notes(table) == []
    df = pd.read_csv(path)
    ms = tmp_path / "corridor_ms.csv"
    df.assign(**{spec.time: df[spec.time] * 1000}).to_csv(ms, index=False)
    slow = read_tracks(ms, track=spec.track, time=spec.time, state=list(spec.state), action="velocity",
                       boundary="reflecting")
    assert any("times in ms?" in n for n in scale_notes(slow))


def test_a_short_unrounded_table_has_no_quantum(rng, tmp_path):
    """One track of 50 unrounded positions, 10 time units apart: their smallest gap is chance (about R / n^2), not
    a precision, so no resolution is read off and the time-unit rule stays silent (it called such minutes ms)."""
    from fpirl.estimators._plausibility import position_resolution, scale_notes

    n = 50
    xy = np.cumsum(rng.normal(0.0, 1.0, (n, 2)), axis=0)
    path = tmp_path / "short.csv"
    pd.DataFrame({"id": 0, "t": 10.0 * np.arange(n), "x": xy[:, 0], "y": xy[:, 1]}).to_csv(path, index=False)
    table = read_tracks(path, track="id", time="t", state=["x", "y"], action="velocity")
    gaps = [np.diff(np.unique(xy[:, j])).min() for j in (0, 1)]
    ranges = [np.ptp(xy[:, j]) for j in (0, 1)]
    assert np.median(gaps) > np.sqrt(np.mean(np.sum(np.diff(xy, axis=0) ** 2, 1))) / 10 / 20  # the old rule fired
    assert all(g < 10 * r / n**2 for g, r in zip(gaps, ranges))
    assert position_resolution(table, table.state_axes) == 0.0
    assert scale_notes(table) == []
