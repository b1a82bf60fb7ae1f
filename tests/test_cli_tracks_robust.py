"""Robustness of the track-table commands found by fuzzing: the default box of a small table with one
far outlier, ``evaluate`` and ``simulate --from`` on a periodic result (positions wrapped, never
dropped; single-observation start tracks), the ``evaluate`` table's columns with huge values, and
``compare`` with lags that have no data."""

from __future__ import annotations

import json
import warnings
from statistics import NormalDist

import numpy as np
import pandas as pd
import pytest

from fpirl import read_tracks, sample_sde
from fpirl.evaluation.heldout import HeldoutScore
from fpirl.evaluation.track_stats import compare_tracks
from fpirl.tracks.reading import robust_fences

KW = dict(track="agent", time="t", state="s", action="a")


def _walks(rng, n_tracks=20, frames=11, scale=0.1):
    """Long-format random walks ``agent, t, s, a`` (rows grouped by track)."""
    pos = np.cumsum(rng.normal(0.0, scale, (n_tracks, frames, 2)), axis=1)
    return pd.DataFrame({"agent": np.repeat(np.arange(n_tracks), frames), "t": np.tile(0.1 * np.arange(frames), n_tracks),
                         "s": pos[..., 0].ravel(), "a": pos[..., 1].ravel()})


def _periodic_frame(seed=0, n_tracks=12, frames=11):
    def grad(x):
        return np.stack([0.5 * np.pi * np.cos(np.pi * x[:, 0]), -0.4 * np.pi * np.sin(np.pi * x[:, 1])], 1)

    rng = np.random.default_rng(seed)
    P = sample_sde(grad, 4.0, rng.uniform(-1, 1, (n_tracks, 2)), 0.01, frames - 1, rng, [-1, -1], [1, 1], "periodic")
    return pd.DataFrame({"agent": np.tile(np.arange(n_tracks), frames), "t": np.repeat(0.01 * np.arange(frames), n_tracks),
                         "s": P[..., 0].ravel(), "a": P[..., 1].ravel()})


# -- the default box ------------------------------------------------------------------------------
def test_one_far_outlier_does_not_stretch_the_default_box_of_a_small_table(rng):
    df = _walks(rng)  # 220 rows: the 0.1%/99.9% quantiles alone would interpolate up to the outlier
    bad = df.copy()
    bad.loc[37, "s"] = 1e6
    with pytest.warns(UserWarning, match=r"1 of 220 observations lie beyond the default box"):
        robust = read_tracks(bad, **KW)
    clean = read_tracks(df.drop(index=37), **KW)  # the same rows but the outlier's
    np.testing.assert_array_equal(robust.lower, clean.lower)
    np.testing.assert_array_equal(robust.upper, clean.upper)
    assert robust.n_obs == clean.n_obs == 219


@pytest.mark.parametrize("n_tracks", [4, 30, 500])
def test_default_box_keeps_every_row_of_gaussian_data(rng, n_tracks):
    df = _walks(rng, n_tracks=n_tracks)
    df[["s", "a"]] = rng.normal(0.0, 1.0, (len(df), 2))  # iid Gaussian values: nothing is an outlier
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        robust = read_tracks(df, **KW)
    full = read_tracks(df, robust_box=False, **KW)
    np.testing.assert_array_equal(robust.lower, full.lower)
    np.testing.assert_array_equal(robust.upper, full.upper)


@pytest.mark.parametrize("n", [9, 12, 50, 330, 999, 2999, 3000, 10**6])
def test_robust_fences_skip_two_extremes_and_keep_the_gaussian_fence(n):
    p, c = robust_fences(n)
    z = NormalDist().inv_cdf
    assert (n - 1) * p >= 2 - 1e-9  # the p-quantile lies at or inside the third value from either end
    # for Gaussian data the fence q_hi + c (q_hi - q_lo) lies where it lies at the 0.1% level, 6.2 sd out
    assert z(1 - p) * (1 + 2 * c) == pytest.approx(2 * z(0.999))
    assert 2 * z(0.999) == pytest.approx(6.18, abs=0.01)


# -- a periodic result: evaluate and simulate --from ----------------------------------------------
@pytest.fixture(scope="module")
def periodic(tmp_path_factory):
    from fpirl.cli import main

    d = tmp_path_factory.mktemp("periodic")
    df = _periodic_frame()
    df.to_csv(d / "base.csv", index=False)
    rc = main(["fit", str(d / "base.csv"), "-o", str(d / "r.nc"), "--track", "agent", "--time", "t", "--state", "s",
               "--action", "a", "--boundary", "periodic", "--bounds", "-1:1,-1:1", "--hermite-elements", "2,2",
               "--ridge", "0.01", "--beta", "4", "--uncertainty", "none", "--mobility", "0", "--second-lag", "off",
               "--track-noise", "off", "--no-progress"])
    assert rc == 0
    return d, df


def test_evaluate_wraps_positions_one_period_off_instead_of_dropping_them(periodic, cli, tmp_path):
    d, df = periodic
    shifted = df.copy()
    shifted["s"] += 2.0  # one full period: the same points
    shifted.loc[::3, "a"] -= 4.0  # two periods, on some rows only
    shifted.to_csv(tmp_path / "shifted.csv", index=False)
    ref = cli("evaluate", d / "r.nc", d / "base.csv", "--json")
    assert ref.returncode == 0, ref.stderr
    got = cli("evaluate", d / "r.nc", tmp_path / "shifted.csv", "--json")
    assert got.returncode == 0, got.stderr
    assert "dropped" not in got.stderr and "outside" not in got.stderr
    a, b = json.loads(ref.stdout), json.loads(got.stdout)
    assert a["transitions"] == b["transitions"] == 12 * (11 - 2)  # every run of three frames
    for name, value in a["loglik"].items():
        assert b["loglik"][name] == pytest.approx(value, rel=1e-9, abs=1e-9)


def test_simulate_from_single_observation_tracks(periodic, cli, tmp_path):
    d, df = periodic
    first = df.groupby("agent").head(1)
    first.to_csv(tmp_path / "len1.csv", index=False)
    proc = cli("simulate", d / "r.nc", "--tracks", 3, "--steps", 3, "--from", tmp_path / "len1.csv",
               "-o", tmp_path / "x.csv")
    assert proc.returncode == 0, proc.stderr
    sim = pd.read_csv(tmp_path / "x.csv")
    assert sim["agent"].nunique() == 3 and len(sim) == 3 * 4
    starts = sim[sim["t"] == 0][["s", "a"]].to_numpy()
    obs = first[["s", "a"]].to_numpy()
    assert all(np.any(np.all(np.isclose(obs, row), axis=1)) for row in starts)  # drawn from the given starts


def test_simulating_more_rows_than_memory_holds_is_refused_before_the_work(periodic, cli, tmp_path):
    """3 tracks of 1e8 steps (1.2e9 values): it ran for more than 10 minutes towards a 3e8-row file."""
    d, _ = periodic
    proc = cli("simulate", d / "r.nc", "--tracks", 3, "--steps", 100_000_000, "-o", tmp_path / "x.csv")
    assert proc.returncode == 2 and "fewer tracks or steps" in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert not (tmp_path / "x.csv").exists()


def test_velocity_starts_of_single_observations_are_a_one_line_error(tmp_path):
    from fpirl.core._errors import FpirlInputError

    df = _periodic_frame().groupby("agent").head(1)
    with pytest.raises(FpirlInputError, match="velocity actions need two consecutive observations"):
        read_tracks(df, track="agent", time="t", state="s,a", action="velocity", single=True)


# -- the evaluate table ---------------------------------------------------------------------------
def test_evaluate_table_columns_never_run_together():
    from fpirl.cli.evaluate import score_table

    rng = np.random.default_rng(3)
    track = np.repeat(np.arange(5), 4)
    per = {name: -2.5e9 + rng.normal(0, 1e3, track.size) for name in ("fpirl", "diffusion", "persistent_random_walk")}
    score = HeldoutScore(track.size, {k: float(np.mean(v)) for k, v in per.items()}, per, track)
    lines = score_table(score)
    assert lines[0].split() == ["model", "log-likelihood", "model", "-", "fpirl", "std.", "error"]
    assert len(lines[1].split()) == 2 and all(len(line.split()) == 4 for line in lines[2:])
    for line in lines[2:]:
        name, value, diff, se = line.split()
        assert float(value) == pytest.approx(score.loglik[name], abs=1e-3)
        assert float(diff) == pytest.approx(score.loglik[name] - score.loglik["fpirl"], abs=1e-3)


# -- compare: lags without data -------------------------------------------------------------------
def test_compare_lags_without_data_are_reported_plainly(rng):
    table = read_tracks(_walks(rng, frames=2), robust_box=False, **KW)  # two frames per track: no VACF lag
    long = read_tracks(_walks(rng), robust_box=False, **KW)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy "All-NaN slice" warning
        summary, obs, _ = compare_tracks(table, table, max_lag=1)
    assert np.isnan(summary["vacf"]["inside_band"])
    assert np.all(np.isnan(obs.curves["vacf"][1]))
    with pytest.warns(UserWarning, match="exceeds the longest observed segment"):
        _, obs, sim = compare_tracks(long, long, max_lag=1000)
    assert obs.curves["msd"][0].size == 10 and np.all(np.isfinite(obs.curves["msd"][2]))


def test_compare_cli_says_when_a_statistic_has_no_data(rng, cli, tmp_path):
    _walks(rng, frames=2).to_csv(tmp_path / "two.csv", index=False)
    proc = cli("compare", tmp_path / "two.csv", tmp_path / "two.csv", "-o", tmp_path / "c.png", "--track", "agent",
               "--time", "t", "--state", "s,a")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert "vacf" in proc.stdout and "no lags or bins with data" in proc.stdout
