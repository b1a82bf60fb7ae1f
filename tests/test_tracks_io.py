"""Reading trajectory tables: columns, dt, gaps, stride, velocity, bounds, and one-line errors."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from fpirl.core._errors import FpirlInputError
from fpirl.forward.markov import sample_sde
from fpirl.tracks.reading import DEFAULT_MARGIN, parse_bounds, read_tracks

DT = 2e-3


def _long_table(paths: np.ndarray, dt: float, ids=None) -> pd.DataFrame:
    """(steps + 1, n, d) sample paths -> long table (one row per agent and frame, frames interleaved)."""
    steps, n, d = paths.shape
    ids = np.arange(n) if ids is None else np.asarray(ids)
    return pd.DataFrame({
        "frame_time": np.repeat(np.arange(steps) * dt, n),
        "agent": np.tile(ids, steps),
        **{c: paths[..., k].ravel() for k, c in enumerate("xy"[:d])},
    })


@pytest.fixture(scope="module")
def walk():
    """Wrapped SDE paths in the periodic box [-1, 1]^2 (an independent generator)."""
    grad = lambda x: np.stack([0.45 * np.pi * np.cos(np.pi * x[:, 0]), -0.35 * np.pi * np.sin(np.pi * x[:, 1])], 1)
    x0 = np.random.default_rng(1).uniform(-1, 1, (6, 2))
    return sample_sde(grad, 4.0, x0, DT, 40, 2, [-1, -1], [1, 1], "periodic")


@pytest.mark.parametrize("fmt", ["csv", "parquet", "csv-pandas", "shuffled"])
def test_round_trip_interleaved_rows(tmp_path, walk, fmt):
    df = _long_table(walk, DT)
    if fmt == "shuffled":  # rows in any order: grouped by track (first-seen order), sorted by time within
        first = df.iloc[:6]
        rest = df.iloc[6:].sample(frac=1.0, random_state=np.random.default_rng(3).integers(2**31))
        df = pd.concat([first, rest])
    path = tmp_path / ("t.parquet" if fmt == "parquet" else "t.csv")
    df.to_parquet(path) if fmt == "parquet" else df.to_csv(path, index=False)
    tt = read_tracks(path, track="agent", time="frame_time", state="x,y", boundary="periodic",
                     bounds=[(-1, 1), (-1, 1)], engine="pandas" if fmt == "csv-pandas" else "auto")
    assert tt.dt == pytest.approx(DT, rel=1e-12)
    assert tt.n_tracks == 6 and tt.n_obs == 41 * 6 and len(tt.pairs()[0]) == 40 * 6
    assert list(tt.track_ids) == list(range(6)) and tt.names == ("x", "y") and tt.roles == ("state", "state")
    # rows grouped by track, increasing time within a track
    for k in range(6):
        np.testing.assert_allclose(tt.values[tt.track == k], walk[:, k, :], rtol=1e-14, atol=1e-15)
    # increments across the seam are short (minimal image), never of the order of the box
    _, dx = tt.increments()
    assert np.abs(dx).max() < 0.5
    assert tt.source == {"path": str(path), "track": "agent", "time": "frame_time", "state": "x,y", "action": "",
                         "stride": 1}


def test_missing_values_are_missing_frames(tmp_path):
    """A row with an empty time or value is dropped with a warning and splits its track, as its absence would."""
    t = np.arange(8, dtype=float)
    df = pd.DataFrame({"id": [7] * 8, "t": t, "x": np.arange(8.0) ** 2})
    absent = read_tracks(df.drop(index=[3, 5]), track="id", time="t", state="x", action="velocity")
    holes = df.astype({"t": float}).copy()
    holes.loc[3, "x"] = np.nan
    holes.loc[5, "t"] = np.nan
    holes.to_csv(tmp_path / "h.csv", index=False)
    with pytest.warns(UserWarning, match=r"2 of 8 rows have a missing .* first at row 4"):
        got = read_tracks(tmp_path / "h.csv", track="id", time="t", state="x", action="velocity")
    np.testing.assert_array_equal(got.values, absent.values)
    np.testing.assert_array_equal(got.segment, absent.segment)
    # segments: frames 0-2, 4, 6-7; velocity drops each segment's first row: (1, 2) and (7)
    np.testing.assert_array_equal(got.values[:, 1], [1.0, 3.0, 13.0])
    assert len(got.pairs()[0]) == 1


def test_missing_frames_split_tracks_and_stride(tmp_path):
    t = np.array([0, 1, 2, 4, 5, 6, 7, 8, 0, 1, 2], dtype=float) * 0.5 + 10.0
    df = pd.DataFrame({"id": ["u"] * 8 + ["w"] * 3, "t": t, "x": np.arange(11.0)})
    df.to_csv(tmp_path / "g.csv", index=False)
    tt = read_tracks(tmp_path / "g.csv", track="id", time="t", state="x")
    assert tt.dt == 0.5
    np.testing.assert_array_equal(tt.segment, [0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2])
    np.testing.assert_array_equal(tt.track, [0] * 8 + [1] * 3)
    # data range [0, 10] widened by the documented margin on each side
    np.testing.assert_allclose([tt.lower[0], tt.upper[0]], [-10 * DEFAULT_MARGIN, 10 + 10 * DEFAULT_MARGIN])
    # stride 2 keeps frames 0, 2, 4, 6, 8 of track u (frame 4 follows frame 2: no gap) and 0, 2 of w
    t2 = read_tracks(tmp_path / "g.csv", track="id", time="t", state="x", stride=2)
    assert t2.dt == 1.0
    np.testing.assert_array_equal(t2.values[:, 0], [0, 2, 3, 5, 7, 8, 10])
    np.testing.assert_array_equal(t2.segment, [0, 0, 0, 0, 0, 1, 1])
    # stride 3 keeps frames 0, 6 of u (frame 3 is missing: a gap) and 0 of w: nothing left to pair
    with pytest.raises(FpirlInputError, match=r"no transitions left \(stride 3\)"):
        read_tracks(tmp_path / "g.csv", track="id", time="t", state="x", stride=3)


def test_noisy_float_times_are_accepted(tmp_path):
    t = np.arange(50) * 0.1 * (1 + 1e-9 * np.random.default_rng(0).standard_normal(50))
    pd.DataFrame({"id": 1, "t": t, "x": np.sin(t)}).to_csv(tmp_path / "f.csv", index=False, float_format="%.17g")
    assert read_tracks(tmp_path / "f.csv", track="id", time="t", state="x").dt == pytest.approx(0.1)


def test_velocity_backward_differences(tmp_path):
    # track 7: frames 0..4 with frame 3 missing; track 9 crosses the periodic seam at 1 == -1
    rows = [(7, 0, 0.0), (7, 1, 0.1), (7, 2, 0.3), (7, 4, 0.2), (7, 5, 0.0),
            (9, 0, 0.8), (9, 1, 0.95), (9, 2, -0.9)]
    df = pd.DataFrame(rows, columns=["id", "t", "x"])
    df.to_parquet(tmp_path / "v.parquet")
    tt = read_tracks(tmp_path / "v.parquet", track="id", time="t", state=["x"], action="velocity",
                     boundary="periodic", bounds="-1:1,-5:5")
    assert tt.names == ("x", "v_x") and tt.roles == ("state", "action")
    np.testing.assert_allclose(tt.values, [[0.1, 0.1], [0.3, 0.2], [0.0, -0.2], [0.95, 0.15], [-0.9, 0.15]],
                               atol=1e-12)
    # no velocity across the gap, none across tracks: the first row of every segment is gone
    np.testing.assert_array_equal(tt.segment, [0, 0, 1, 2, 2])
    np.testing.assert_array_equal(tt.time, [1, 2, 5, 1, 2])
    assert tt.source["action"] == "velocity"


def test_bounds_drop_with_warning_and_split(tmp_path):
    df = pd.DataFrame({"id": 0, "t": np.arange(6.0), "x": [0.1, 0.2, 1.5, 0.3, 0.4, 0.5], "a": 0.0})
    df.to_csv(tmp_path / "b.csv", index=False)
    with pytest.warns(UserWarning, match="1 of 6 observations lie outside"):
        tt = read_tracks(tmp_path / "b.csv", track="id", time="t", state="x", action="a", bounds=[(0, 1), (-1, 1)])
    np.testing.assert_array_equal(tt.segment, [0, 0, 1, 1, 1])
    np.testing.assert_array_equal(tt.lower, [0, -1])
    assert tt.roles == ("state", "action")
    # periodic: the upper bound is the lower one
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tp = read_tracks(tmp_path / "b.csv", track="id", time="t", state="x", action="a", bounds="0.1:1.5,-1:1",
                         boundary="periodic")
    assert tp.values[2, 0] == 0.1
    assert parse_bounds("-1:1,-2.5:3e1") == [(-1.0, 1.0), (-2.5, 30.0)]


def _write(tmp_path, df, name="bad.csv"):
    path = tmp_path / name
    if name.endswith(".csv"):
        df.to_csv(path, index=False)
    else:
        df.to_parquet(path)
    return path


GOOD = {"id": [1, 1, 1, 2, 2], "t": [0.0, 1, 2, 0, 1], "x": [0.1, 0.2, 0.3, 0.4, 0.5]}


@pytest.mark.parametrize("change, kwargs, words", [
    ({}, {"state": "z"}, ["no column 'z'", "available columns: id, t, x"]),
    ({}, {"track": "who"}, ["no column 'who'"]),
    ({}, {"time": "when"}, ["no column 'when'"]),
    ({"x": ["0.1", "0.2", "abc", "0.4", "0.5"]}, {}, ["column 'x'", "non-numeric", "'abc'", "row 3"]),
    ({"t": [0.0, 1, 2, 0, "1s"]}, {}, ["column 't'", "non-numeric", "row 5"]),
    ({"id": [1, 2, 3, 4, 5]}, {}, ["no transitions", "single observation"]),
    ({"t": [0.0, 1, 1, 0, 1]}, {}, ["duplicate time 1", "track 1"]),
    ({"t": [1.0, 0, 1, 0, 1]}, {}, ["duplicate time 1", "track 1", "rows 1 and 3"]),  # file rows, after sorting
    ({"t": [0.0, 1, 2.5, 0, 1]}, {}, ["track 1", "not a whole multiple", "dt=1"]),
    ({}, {"bounds": "5:6"}, ["every observation", "outside the given bounds"]),
    ({"x": [0.1, 0.2, np.inf, 0.4, 0.5]}, {}, ["column 'x'", "infinite", "row 3"]),
    ({"x": [np.nan] * 5}, {}, ["every row has a missing"]),
    ({}, {"bounds": "0:1,0:1"}, ["2 bounds for 1 modelled axes"]),
    ({}, {"bounds": "1:0"}, ["lo < hi"]),
    ({}, {"bounds": "0-1"}, ["lo:hi"]),
    ({}, {"boundary": "periodic"}, ["periodic box needs bounds"]),
    ({}, {"state": "x", "action": "x"}, ["more than one role"]),
    ({"x": [0.5] * 5}, {}, ["constant", "give bounds"]),
])
@pytest.mark.parametrize("name, engine", [("bad.csv", "auto"), ("bad.csv", "pandas"), ("bad.parquet", "auto")])
def test_bad_tables_one_line_errors(tmp_path, change, kwargs, words, name, engine):
    kw = {"track": "id", "time": "t", "state": "x", "engine": engine, **kwargs}
    df = pd.DataFrame({**GOOD, **change})
    if name.endswith(".parquet") and any(isinstance(v, str) for v in df.get("t", [])):
        df["t"] = df["t"].astype(str)
    path = _write(tmp_path, df, name)
    with pytest.raises(FpirlInputError) as info:
        read_tracks(path, **kw)
    msg = str(info.value)
    assert "\n" not in msg
    for w in words:
        assert w.lower() in msg.lower(), msg
    # control: the same shape of table, valid, reads
    ok = read_tracks(_write(tmp_path, pd.DataFrame(GOOD), "ok" + name[3:]), track="id", time="t", state="x")
    assert ok.n_obs == 5 and len(ok.pairs()[0]) == 3


@pytest.mark.parametrize("sep", [",", ";", "\t"])
@pytest.mark.parametrize("engine", ["auto", "pandas"])
def test_semicolon_and_tab_separated_csv(tmp_path, sep, engine):
    """The separator is the one the header line uses most (comma, semicolon or tab): the same table."""
    df = pd.DataFrame(GOOD)
    df.to_csv(tmp_path / "t.csv", index=False, sep=sep)
    tt = read_tracks(tmp_path / "t.csv", track="id", time="t", state="x", engine=engine)
    np.testing.assert_array_equal(tt.values[:, 0], GOOD["x"])
    assert tt.n_tracks == 2 and len(tt.pairs()[0]) == 3


def test_blanks_in_column_names_are_shown(tmp_path):
    (tmp_path / "b.csv").write_text("id, t, x\n1,0,0.1\n1,1,0.2\n")
    with pytest.raises(FpirlInputError, match=r"no column 't', 'x' \(available columns: id, ' t', ' x'\)"):
        read_tracks(tmp_path / "b.csv", track="id", time="t", state="x")


def test_empty_and_unknown_files(tmp_path):
    (tmp_path / "e.csv").write_text("id,t,x\n")
    with pytest.raises(FpirlInputError, match="empty table"):
        read_tracks(tmp_path / "e.csv", track="id", time="t", state="x")
    (tmp_path / "z.csv").write_text("")
    with pytest.raises(FpirlInputError, match="empty"):
        read_tracks(tmp_path / "z.csv", track="id", time="t", state="x")
    pd.DataFrame({k: pd.Series(v[:0]) for k, v in GOOD.items()}).to_parquet(tmp_path / "e.parquet")
    with pytest.raises(FpirlInputError, match="empty table"):
        read_tracks(tmp_path / "e.parquet", track="id", time="t", state="x")
    (tmp_path / "n.parquet").write_text("not parquet")
    with pytest.raises(FpirlInputError, match="as Parquet"):
        read_tracks(tmp_path / "n.parquet", track="id", time="t", state="x")
    with pytest.raises(FpirlInputError, match="no such file"):
        read_tracks(tmp_path / "missing.csv", track="id", time="t", state="x")
    with pytest.raises(FpirlInputError, match=".csv or .parquet"):
        read_tracks(tmp_path / "x.txt", track="id", time="t", state="x")


def test_dataframe_reads_like_its_csv(tmp_path, walk):
    """A DataFrame gives the same table as the CSV written from it (velocity actions, string ids)."""
    df = _long_table(walk, DT, ids=[f"cell{k}" for k in range(walk.shape[1])])
    df.to_csv(tmp_path / "t.csv", index=False)
    kw = dict(track="agent", time="frame_time", state="x,y", action="velocity")
    a = read_tracks(tmp_path / "t.csv", **kw)
    b = read_tracks(df, **kw)
    np.testing.assert_array_equal(a.values, b.values)
    np.testing.assert_array_equal(a.segment, b.segment)
    np.testing.assert_array_equal(a.track_ids, b.track_ids)
    assert a.dt == b.dt and a.names == b.names
    np.testing.assert_allclose(b.lower, a.lower)
    with pytest.raises(FpirlInputError, match="no column 'z'"):
        read_tracks(df, track="agent", time="frame_time", state="x,z")
    bad = df.astype({"x": object})
    bad.loc[3, "x"] = "oops"
    with pytest.raises(FpirlInputError, match="non-numeric value 'oops' at row 4"):
        read_tracks(bad, **kw)


def _walk_with_outliers(rng, n=15, frames=120, sigma=0.1, dt=1.0):
    """Persistent-free random walks (velocity sd sigma) with three one-frame tracker glitches of 100 sigma."""
    pos = np.cumsum(rng.normal(0, sigma * dt, (frames, n, 2)), axis=0)
    for k, (f, i) in enumerate([(50, 3), (100, 7), (80, 12)]):
        pos[f, i, k % 2] += 100 * sigma * dt
    return _long_table(pos, dt)


def test_default_box_ignores_outlier_steps_but_evaluate_scores_them(tmp_path, rng, cli):
    """Outlier steps do not stretch the default box (the data's own range here, far below the glitches), they are dropped
    from the fit with a warning, and ``fpirl evaluate`` still scores every held-out transition."""
    df = _walk_with_outliers(rng)
    df.to_csv(tmp_path / "t.csv", index=False)
    kw = dict(track="agent", time="frame_time", state="x,y", action="velocity")
    with pytest.warns(UserWarning, match=r"beyond the default box .* not used in the fit"):
        robust = read_tracks(tmp_path / "t.csv", **kw)
    full = read_tracks(tmp_path / "t.csv", robust_box=False, **kw)
    assert np.all(full.upper[2:] > 9.0)  # the glitches: +10 then back
    assert np.all(robust.upper[2:] < 6 * 0.1) and np.all(robust.lower[2:] > -6 * 0.1)
    assert np.all(robust.upper[2:] > 2.5 * 0.1)  # the largest of ~1800 normal velocities is ~3.4 sd
    assert full.n_obs == 15 * 119 and robust.n_obs < full.n_obs
    proc = cli("fit", tmp_path / "t.csv", "-o", tmp_path / "r.nc", "--track", "agent", "--time", "frame_time",
               "--state", "x,y", "--action", "velocity", "--hermite-elements", "1,1,2,2", "--ridge", "0.01",
               "--uncertainty", "none", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    proc = cli("evaluate", tmp_path / "r.nc", tmp_path / "t.csv", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["transitions"] == 15 * (120 - 2)  # every run of three frames


def test_steps_across_half_a_walled_box_warn_of_wrapping_coordinates(tmp_path, rng):
    """An angle-like coordinate (a random walk wrapped into [-1, 1)) read with walls: the seam crossings are
    jumps of nearly a box width, which a walled fit reads as huge moves; the same walk unwrapped does not warn."""
    walk = np.cumsum(rng.normal(0.0, 0.08, (20, 60)), axis=1) + rng.uniform(-1, 1, (20, 1))
    for values, warns in ((np.mod(walk + 1.0, 2.0) - 1.0, True), (walk, False)):
        df = pd.DataFrame({"id": np.repeat(np.arange(20), 60), "t": np.tile(np.arange(60.0), 20),
                           "x": values.ravel()})
        df.to_csv(tmp_path / "w.csv", index=False)
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            read_tracks(tmp_path / "w.csv", track="id", time="t", state="x", robust_box=False)
        said = [str(w.message) for w in got if "jump more than half the box" in str(w.message)]
        assert bool(said) == warns, said
        if warns:
            assert "--boundary periodic" in said[0]
