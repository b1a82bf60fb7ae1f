"""`fpirl fit` on trajectory tables: options, result attrs, and bad tables (exit 2, one line, no file)."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fpirl.cli import main
from fpirl.cli.fit import _estimator_params, join_negative_values
from fpirl.io import read_result
from fpirl.forward.markov import sample_sde
from fpirl.tracks.reading import read_tracks

COLS = ["--track", "id", "--time", "t", "--state", "s", "--action", "a"]
BOX = ["--boundary", "periodic", "--bounds", "-1:1,-1:1"]
FAST = ["--hermite-elements", "2", "--no-progress"]


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """60 wrapped SDE tracks x 31 frames in [-1, 1]^2 (state s, action a), beta = 4, dt = 2e-3."""
    grad = lambda x: np.stack([0.45 * np.pi * np.cos(np.pi * x[:, 0]), -0.35 * np.pi * np.sin(np.pi * x[:, 1])], 1)
    rng = np.random.default_rng(7)
    paths = sample_sde(grad, 4.0, rng.uniform(-1, 1, (60, 2)), 2e-3, 30, rng, [-1, -1], [1, 1], "periodic")
    steps, n, _ = paths.shape
    df = pd.DataFrame({"id": np.tile(np.arange(n) + 100, steps), "t": np.repeat(np.arange(steps) * 2e-3, n),
                       "s": paths[..., 0].ravel(), "a": paths[..., 1].ravel()})
    path = tmp_path_factory.mktemp("tables") / "tracks.csv"
    df.to_csv(path, index=False)
    return path, df


def test_bounds_value_starting_with_dash_is_joined():
    assert join_negative_values(["fit", "--bounds", "-1:1,-1:1", "--beta", "2"]) == \
        ["fit", "--bounds=-1:1,-1:1", "--beta", "2"]
    assert join_negative_values(["--bounds", "--beta"]) == ["--bounds", "--beta"]  # a real option stays one


def test_fit_table_result(table, tmp_path, capsys):
    path, _ = table
    out = tmp_path / "r.nc"
    assert main(["fit", str(path), "-o", str(out), *COLS, *BOX, *FAST]) == 0  # --bounds -1:1,-1:1 as typed
    lines = capsys.readouterr().out.strip().splitlines()
    line = lines[0]  # the one-line summary (other lines may report diagnostics)
    for word in ("1860 observations", "60 tracks", "1800 transitions", "dt=0.002", "beta=", "(estimated)",
                 "Hermite elements 2,2 (fixed)", str(out)):
        assert word in line, line
    ds = read_result(out)
    assert ds.attrs["source_kind"] == "tracks" and ds.attrs["estimator"] == "increments"
    assert (ds.attrs["table_track"], ds.attrs["table_time"], ds.attrs["table_state"], ds.attrs["table_action"],
            int(ds.attrs["table_stride"])) == ("id", "t", "s", "a", 1)
    assert ds.attrs["dt"] == pytest.approx(2e-3, rel=1e-12) and ds.attrs["boundary"] == "periodic"
    assert {"potential", "policy", "reward", "q_value"} <= set(ds.data_vars)


def test_fit_table_options_in_process(table, tmp_path, capsys):
    path, df = table
    pq = tmp_path / "tracks.parquet"
    df.to_parquet(pq)
    out = tmp_path / "r.nc"
    assert main(["fit", str(pq), "-o", str(out), *COLS, *BOX, *FAST, "--beta", "4", "--stride", "2"]) == 0
    assert "(fixed)" in capsys.readouterr().out
    ds = read_result(out)
    assert ds.attrs["beta"] == 4.0 and ds.attrs["dt"] == pytest.approx(4e-3) and int(ds.attrs["table_stride"]) == 2
    # state only (no MDP), reflecting box from the data
    out2 = tmp_path / "s.nc"
    assert main(["fit", str(path), "-o", str(out2), "--track", "id", "--time", "t", "--state", "s,a", *FAST]) == 0
    ds2 = read_result(out2)
    assert ds2.attrs["action_dims"] == "" and "policy" not in ds2 and ds2.attrs["boundary"] == "reflecting"
    assert ds2.attrs["table_action"] == ""
    # the density estimator through the same options
    out3 = tmp_path / "d.nc"
    assert main(["fit", str(path), "-o", str(out3), *COLS, *BOX, *FAST, "--estimator", "density",
                 "--time-scheme", "explicit", "--uncertainty-samples", "4"]) == 0
    ds3 = read_result(out3)
    assert ds3.attrs["estimator"] == "density" and ds3.attrs["source_kind"] == "tracks" and "policy" in ds3
    assert ds3.attrs["solver_time_scheme"] == "explicit"
    # its default uncertainty: the parametric bootstrap (4 replicates asked for), bands from 64 draws of it
    assert ds3.attrs["uncertainty"] == "parametric" and int(ds3.attrs["uncertainty_replicates"]) == 4
    assert int(ds3.attrs["uncertainty_samples"]) == 64 and np.all(ds3["potential_std"].values > 0)


def test_estimator_defaults_for_tables(table):
    path, _ = table
    from fpirl.cli import build_parser

    ns = build_parser().parse_args(["fit", str(path), "-o", "r.nc", "--track", "id", "--time", "t", "--state", "s",
                                    "--no-progress"])

    class Est:
        name = "increments"

        def __init__(self, hermite_elements="auto", beta=None, ridge=None, drift_axes=None, noise_correction=False,
                     progress=False):
            pass

    tt = read_tracks(path, track="id", time="t", state="s", action="velocity", boundary="periodic",
                     bounds="-1:1,-1e3:1e3")
    params = _estimator_params(ns, Est, tt)
    # the default drift axes are resolved by the estimator itself (the same rule for the API and the CLI)
    assert params == {"hermite_elements": "auto", "beta": None, "progress": False}
    ns.drift_axes, ns.noise_correction = "all", True
    assert _estimator_params(ns, Est, tt)["drift_axes"] == "all" and _estimator_params(ns, Est, tt)["noise_correction"]
    ns.time_scheme = "explicit"
    with pytest.raises(Exception, match="--time-scheme does not apply"):
        _estimator_params(ns, Est, tt)


def _cases(tmp_path, df, valid_nc=None):
    def write(name, frame):
        p = tmp_path / name
        frame.to_csv(p, index=False)
        return str(p)

    bad_x = df.astype({"s": object})
    bad_x.loc[40, "s"] = "oops"
    nan_x = df.copy()
    nan_x.loc[50, "a"] = np.inf
    dup = pd.concat([df, df.iloc[[60]]])  # one observation twice
    single = df.groupby("id").head(1)
    good = write("good.csv", df)
    twice = df.rename(columns={"a": "s"})  # a header naming 's' twice (pandas alone would read the second as 's.1')
    return {
        "repeated column name": ([write("twice.csv", twice), *COLS[:-2], "--boundary", "periodic", "--bounds", "-1:1"],
                                 ["more than one column named 's'", "unique"]),
        "missing column": ([good, *COLS[:-2], "--action", "vel", *BOX], ["no column 'vel'", "available columns"]),
        "unknown track column": ([good, "--track", "agent", *COLS[2:], *BOX], ["no column 'agent'"]),
        "non-numeric": ([write("bad.csv", bad_x), *COLS, *BOX], ["column 's'", "non-numeric", "'oops'", "row 41"]),
        "empty": ([write("empty.csv", df.iloc[:0]), *COLS, *BOX], ["empty table"]),
        "single observations": ([write("single.csv", single), *COLS, *BOX], ["no transitions", "single observation"]),
        "duplicate time": ([write("dup.csv", dup), *COLS, *BOX], ["duplicate time", f"rows 61 and {len(df) + 1}"]),
        "all outside bounds": ([good, *COLS, "--boundary", "periodic", "--bounds", "2:3,2:3"],
                               ["every observation", "outside the given bounds"]),
        "infinite value": ([write("inf.csv", nan_x), *COLS, *BOX], ["column 'a'", "infinite", "row 51"]),
        "wrong number of bounds": ([good, *COLS, "--bounds", "-1:1"], ["1 bounds for 2 modelled axes"]),
        "lo >= hi": ([good, *COLS, "--bounds", "-1:1,1:-1"], ["lo < hi"]),
        "periodic without bounds": ([good, *COLS, "--boundary", "periodic"], ["needs bounds"]),
        "no columns": ([good, *BOX], ["needs --track, --time, --state"]),
        "gcv ridge": ([good, *COLS, *BOX, "--ridge", "gcv"], ["--ridge gcv applies to density data"]),
        "elements per axis": ([good, *COLS, *BOX, "--hermite-elements", "2,2,2"], ["3 values for 2 axes"]),
        "stride on density data": ([valid_nc, "--beta", "1", "--stride", "2"], ["--stride only applies"]),
        "option of another estimator": ([good, *COLS, *BOX, "--estimator", "density", "--noise-correction"],
                                        ["--noise-correction does not apply to --estimator density"]),
    }


def test_bad_tables_exit_2_one_line_no_file(table, tmp_path, capsys):
    _, df = table
    cases = _cases(tmp_path, df, valid_nc=str(tmp_path / "density.nc"))
    (tmp_path / "density.nc").write_bytes(b"")  # table options are rejected before the file is read
    before = sorted(os.listdir(tmp_path))
    for label, (args, words) in cases.items():
        rc = main(["fit", args[0], "-o", str(tmp_path / "out.nc"), *FAST, *args[1:]])
        err = capsys.readouterr().err.strip()
        assert rc == 2, (label, err)
        assert len(err.splitlines()) == 1 and err.startswith("fpirl: error: "), (label, err)
        for w in words:
            assert w.lower() in err.lower(), (label, err)
    assert sorted(os.listdir(tmp_path)) == before  # no result, no temporary file
    # control: the valid table of the same shape fits
    assert main(["fit", str(tmp_path / "good.csv"), "-o", str(tmp_path / "out.nc"), *COLS, *BOX, *FAST]) == 0
    assert read_result(tmp_path / "out.nc").attrs["table_transitions"] == 1800


def test_dropped_rows_warn_with_count(table, tmp_path):
    path, df = table
    out = tmp_path / "r.nc"
    n_out = int((df["s"].abs() > 0.9).sum())
    assert n_out > 0
    with pytest.warns(UserWarning, match=f"{n_out} of 1860 observations lie outside the bounds"):
        assert main(["fit", str(path), "-o", str(out), *COLS, "--bounds", "-0.9:0.9,-1:1", *FAST]) == 0
    assert read_result(out).attrs["table_observations"] == 1860 - n_out


def test_readme_tracks_example(tmp_path, monkeypatch, capsys):
    """The README's worked example: its CSV snippet, then its fit and plot commands as written
    (plus a fixed ``--hermite-elements 2`` to skip the cross-validation and keep the test cheap)."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    code = [b for b in re.findall(r"```python\n(.*?)```", readme, flags=re.S) if "tracks.csv" in b]
    shell = [b for b in re.findall(r"```bash\n(.*?)```", readme, flags=re.S) if "fpirl fit tracks.csv" in b]
    assert len(code) == 1 and len(shell) == 1
    monkeypatch.chdir(tmp_path)
    exec(compile(code[0], "README.md", "exec"), {})
    lines = shell[0].replace("\\\n", " ").splitlines()
    runs = [shlex.split(line)[1:] for line in lines if line.startswith("fpirl ")]
    assert [r[0] for r in runs] == ["fit", "plot"]
    assert main(runs[0] + ["--hermite-elements", "2", "--no-progress"]) == 0
    assert "100500 observations, 500 tracks, 100000 transitions, dt=0.002" in capsys.readouterr().out
    assert main(runs[1]) == 0
    assert (tmp_path / "tracks_result.png").stat().st_size > 0


def test_noise_correction_lag_option():
    """``--noise-correction`` alone is lag 1, ``--noise-correction 2`` for differenced velocities; other
    values are a usage error."""
    from fpirl.cli import build_parser

    base = ["fit", "t.csv", "-o", "r.nc", "--track", "id", "--time", "t", "--state", "x"]
    parse = build_parser().parse_args
    assert parse(base + ["--noise-correction"]).noise_correction == 1
    assert parse(base + ["--noise-correction", "2"]).noise_correction == 2
    assert parse(base).noise_correction is None
    from fpirl.cli import main

    assert main(base + ["--noise-correction", "9"]) == 2


def test_velocity_increments_of_a_continuous_motion_are_said(tmp_path, capsys):
    """Positions of an underdamped motion (dx = v dt, dv = -(2 v + x) dt + sqrt(2/3) dW) observed every 0.05 on 20
    substeps, fitted with velocity actions: finite-difference velocities carry about 2/3 of the velocity noise and
    their increments a lag-one correlation near +1/4, so the one-step beta reads high (a loss, said in a line); the same
    model sampled as an Euler chain of velocities at 0.05 gives beta = 3 and no line."""
    rng = np.random.default_rng(5)
    beta, dt, n, steps = 3.0, 0.05, 60, 100

    def table(sub):
        x, v, h = rng.normal(0, 0.6, n), rng.normal(0, 0.6, n), dt / sub
        rows = [x.copy()]
        for _ in range(steps):
            for _ in range(sub):
                v, x = v - (2 * v + x) * h + np.sqrt(2 * h / beta) * rng.standard_normal(n), x + v * h
            rows.append(x.copy())
        pos = np.array(rows)
        return pd.DataFrame({"id": np.repeat(np.arange(n), steps + 1), "t": np.tile(dt * np.arange(steps + 1), n),
                             "s": pos.T.ravel()})

    fixed = ["--track", "id", "--time", "t", "--state", "s", "--action", "velocity", "--hermite-elements", "1,3",
             "--mobility", "0", "--track-noise", "off", "--uncertainty", "none", "--no-progress"]
    found = {}
    for name, sub in (("continuous", 20), ("euler", 1)):
        path = tmp_path / f"{name}.csv"
        table(sub).to_csv(path, index=False)
        assert main(["fit", str(path), "-o", str(tmp_path / f"{name}.nc"), *fixed]) == 0
        found[name] = ("velocity increments are correlated" in capsys.readouterr().out,
                       read_result(tmp_path / f"{name}.nc").attrs["beta"])
    assert found["continuous"][0] and found["continuous"][1] > 1.3 * beta
    assert not found["euler"][0] and found["euler"][1] == pytest.approx(beta, rel=0.08)
