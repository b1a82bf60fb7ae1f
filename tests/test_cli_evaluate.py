"""``fpirl evaluate`` and what ``fpirl fit`` stores for it: JSON contract, defaults from the result,
adequacy printed after fit, one-line errors for mismatched tables."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from _simtracks import sde_tracks

BETA, DT = 4.0, 0.1


def _grad(x):
    s, a = x[:, 0], x[:, 1]
    return np.stack([4 * (s - 0.5 * a), -2 * (s - 0.5 * a) + 3 * a], axis=1)


def _frame(paths, first_id=0, dt=DT):
    steps1, n, _ = paths.shape
    return pd.DataFrame({"cell": np.repeat(np.arange(n) + first_id, steps1), "t": np.tile(dt * np.arange(steps1), n),
                         "pos": paths[:, :, 0].T.ravel(), "act": paths[:, :, 1].T.ravel()})


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    rng = np.random.default_rng(8)
    paths = sde_tracks(lambda x: -_grad(x), BETA, rng.uniform(-0.5, 0.5, (100, 2)), DT, 60, rng,
                       [-1.5, -1.5], [1.5, 1.5])
    d = tmp_path_factory.mktemp("evaluate")
    _frame(paths[:, :70]).to_csv(d / "train.csv", index=False)
    _frame(paths[:, 70:], first_id=70).to_csv(d / "test.csv", index=False)
    _frame(paths[:, 70:], first_id=70, dt=2 * DT).to_csv(d / "slow.csv", index=False)
    _frame(paths[:, 70:]).rename(columns={"act": "other"}).to_csv(d / "renamed.csv", index=False)
    return d


@pytest.fixture(scope="module")
def fitted(files):
    from fpirl.cli import main

    out = files / "result.nc"
    rc = main(["fit", str(files / "train.csv"), "-o", str(out), "--track", "cell", "--time", "t", "--state", "pos",
               "--action", "act", "--hermite-elements", "2", "--no-progress"])
    assert rc == 0
    return out


def test_fit_stores_baselines_and_adequacy(fitted):
    from fpirl.io import read_result

    attrs = read_result(fitted).attrs
    for key in ("baseline_diffusion_D", "baseline_prw_alpha", "baseline_prw_sigma", "adequacy_nongradient_fraction",
                "adequacy_nongradient_lower", "adequacy_nongradient_upper"):
        assert key in attrs
    # gradient drift: no clear violation
    assert attrs["adequacy_nongradient_fraction"] < 0.1 and attrs["adequacy_violated"] == 0


def test_fit_prints_the_adequacy_line(files, cli, tmp_path):
    proc = cli("fit", files / "train.csv", "-o", tmp_path / "r.nc", "--track", "cell", "--time", "t", "--state",
               "pos", "--action", "act", "--hermite-elements", "1", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert "model adequacy: non-gradient fraction of the drift of pos, act" in proc.stdout


def test_json_is_the_contract_and_matches_the_api(files, fitted, cli):
    proc = cli("evaluate", fitted, files / "test.csv", "--json")
    assert proc.returncode == 0, proc.stderr
    obj = json.loads(proc.stdout)
    assert set(obj) == {"transitions", "loglik"}
    assert set(obj["loglik"]) == {"fpirl", "diffusion", "persistent_random_walk"}
    assert obj["transitions"] == 30 * 59
    from fpirl.evaluation.heldout import heldout_loglik
    from fpirl.io import read_result
    from fpirl.tracks.reading import read_tracks

    table = read_tracks(files / "test.csv", track="cell", time="t", state="pos", action="act")
    ref = heldout_loglik(read_result(fitted), table).to_json()
    assert obj["loglik"] == pytest.approx(ref["loglik"], rel=1e-12)
    assert obj["loglik"]["fpirl"] > max(obj["loglik"]["diffusion"], obj["loglik"]["persistent_random_walk"])
    table_out = cli("evaluate", fitted, files / "test.csv")
    assert table_out.returncode == 0 and "persistent_random_walk" in table_out.stdout


def test_mismatched_tables_are_one_line_errors(files, fitted, cli):
    cli.assert_input_error(cli("evaluate", fitted, files / "slow.csv"), "sampling interval")
    cli.assert_input_error(cli("evaluate", fitted, files / "renamed.csv"), "act")  # the stored column is missing
    cli.assert_input_error(cli("evaluate", fitted, files / "renamed.csv", "--action", "other"), "do not match")
    cli.assert_input_error(cli("evaluate", fitted, files / "missing.csv"), "missing.csv")


def test_fit_warns_when_the_drift_is_clearly_not_a_gradient(cli, tmp_path):
    """Half of the drift energy rotational (isotropic OU + rotation, see test_adequacy): fit warns."""
    rng = np.random.default_rng(2)

    def drift(x):
        return -2.0 * x + 2.0 * np.stack([-x[:, 1], x[:, 0]], axis=1)

    paths = sde_tracks(drift, 4.0, rng.normal(0, 0.35, (60, 2)), 0.05, 100, rng, [-2, -2], [2, 2])
    frame = _frame(paths, dt=0.05)
    frame.to_csv(tmp_path / "rot.csv", index=False)
    with pytest.warns(UserWarning, match="the drift is clearly not a gradient"):
        proc = cli("fit", tmp_path / "rot.csv", "-o", tmp_path / "rot.nc", "--track", "cell", "--time", "t",
                   "--state", "pos,act", "--hermite-elements", "2", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert "non-gradient fraction of the drift of pos, act: 0.5" in proc.stdout
