"""`fpirl fit --uncertainty/--scheduler` and the uncertainty panels of `fpirl plot` (issue 10)."""

import numpy as np
import pandas as pd
import pytest

from fpirl import DensitySnapshots, Grid
from fpirl.cli import main
from fpirl.io import read_result, write_density
from fpirl.problems.synthetic import Problem

from _simdensity import coarse_step_walled, double_well_walled


@pytest.fixture(scope="module")
def density_file(tmp_path_factory):
    problem = Problem(2, "periodic", hermite_elements=2, steps=10)
    s = problem.snapshots(12)
    grid = Grid([-1, -1], [1, 1], 12, names=("s", "a"), roles=("state", "action"), boundary="periodic")
    rng = np.random.default_rng(0)
    values = s.values * (1 + 0.05 * rng.standard_normal(s.values.shape))
    path = tmp_path_factory.mktemp("d") / "density.nc"
    write_density(path, DensitySnapshots(grid, s.times, np.clip(values, 0, None)))
    return path


@pytest.fixture(scope="module")
def table_file(tmp_path_factory):
    from fpirl.core.hermite import HermiteSpace
    from fpirl.forward.markov import sample_sde

    h = HermiteSpace([-1.0], [1.0], 3, True)
    coef = h.remove_mean(h.interpolate(
        lambda x, a: np.cos(np.pi * x[..., 0]) if a == (0,) else -np.pi * np.sin(np.pi * x[..., 0])))
    rng = np.random.default_rng(1)
    paths = sample_sde(lambda x: h.gradient(coef, x), 2.0, rng.uniform(-1, 1, (30, 1)), 0.01, 40, rng, [-1.0], [1.0],
                       "periodic")
    n_steps, n_tracks, _ = paths.shape
    df = pd.DataFrame({"id": np.repeat(np.arange(n_tracks), n_steps), "t": np.tile(0.01 * np.arange(n_steps), n_tracks),
                       "x": np.transpose(paths, (1, 0, 2)).ravel()})
    path = tmp_path_factory.mktemp("t") / "tracks.csv"
    df.to_csv(path, index=False)
    return path


def test_fit_writes_posterior_and_plot_shows_it(density_file, tmp_path):
    out = tmp_path / "r.nc"
    assert main(["fit", str(density_file), "-o", str(out), "--hermite-elements", "2", "--estimate-beta",
                 "--uncertainty-samples", "16", "--no-progress"]) == 0
    ds = read_result(out)
    for key in ("potential_std", "policy_lower", "policy_upper", "reward_lower", "reward_upper"):
        assert key in ds.data_vars and np.all(np.isfinite(ds[key].values))
    assert ds.attrs["uncertainty"] == "posterior" and ds.attrs["uncertainty_samples"] == 16
    assert ds.attrs["beta_lower"] <= ds.attrs["beta"] <= ds.attrs["beta_upper"]
    # the time-step column: beta refitted with Simpson's rows, inside the interval
    assert ds.attrs["uncertainty_time_step"] == 1 and ds.attrs["time_step_z"] >= 0
    assert ds.attrs["beta_lower"] <= ds.attrs["beta_simpson"] <= ds.attrs["beta_upper"]
    assert main(["plot", str(out), "-o", str(tmp_path / "r.png")]) == 0
    none = tmp_path / "n.nc"
    assert main(["fit", str(density_file), "-o", str(none), "--hermite-elements", "2", "--beta", "4",
                 "--uncertainty", "none", "--no-progress"]) == 0
    assert "potential_std" not in read_result(none).data_vars


def test_matrix_free_fit_writes_posterior(density_file, tmp_path):
    """--solver matrix-free: the snapshot-noise posterior by CG solves (no longer a warning and no std)."""
    out = tmp_path / "m.nc"
    assert main(["fit", str(density_file), "-o", str(out), "--hermite-elements", "2", "--beta", "4",
                 "--solver", "matrix-free", "--uncertainty-samples", "8", "--no-progress"]) == 0
    ds = read_result(out)
    assert ds.attrs["uncertainty"] == "posterior" and np.all(ds["potential_std"].values > 0)
    assert "policy_lower" in ds.data_vars


def test_table_fit_bootstrap_and_1d_band_plot(table_file, tmp_path):
    out = tmp_path / "b.nc"
    assert main(["fit", str(table_file), "-o", str(out), "--track", "id", "--time", "t", "--state", "x",
                 "--boundary", "periodic", "--bounds", "-1:1", "--hermite-elements", "3", "--ridge", "1e-6",
                 "--uncertainty", "bootstrap", "--uncertainty-samples", "12", "--no-progress"]) == 0
    ds = read_result(out)
    assert ds.attrs["uncertainty"] == "bootstrap"
    assert np.all(ds["potential_std"].values > 0)
    assert ds.attrs["beta_lower"] < ds.attrs["beta"] < ds.attrs["beta_upper"]
    assert main(["plot", str(out), "-o", str(tmp_path / "b.png")]) == 0


def test_scheduler_address_gives_the_same_fit(density_file, tmp_path):
    """--scheduler ADDRESS: a running scheduler (an in-process 2-worker cluster keeps the test fast;
    'local' with worker processes is covered in tests/test_distributed.py)."""
    distributed = pytest.importorskip("distributed")
    a, b = tmp_path / "a.nc", tmp_path / "b.nc"
    common = ["--hermite-elements", "2", "--beta", "4", "--uncertainty", "none", "--no-progress"]
    assert main(["fit", str(density_file), "-o", str(a)] + common) == 0
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster:
        assert main(["fit", str(density_file), "-o", str(b), "--scheduler", cluster.scheduler_address] + common) == 0
    pa, pb = read_result(a)["potential"].values, read_result(b)["potential"].values
    assert np.abs(pa - pb).max() <= 1e-10 * np.abs(pa).max()


def test_bad_uncertainty_options_are_one_line_errors(density_file, tmp_path, capsys):
    out = tmp_path / "x.nc"
    for method in ("bootstrap", "parametric"):
        assert main(["fit", str(density_file), "-o", str(out), "--beta", "4", "--uncertainty", method]) == 2
        assert "trajectory tables" in capsys.readouterr().err
    assert main(["fit", str(density_file), "-o", str(out), "--beta", "4", "--scheduler", "cluster"]) == 2
    assert "tcp://HOST:PORT" in capsys.readouterr().err
    assert not out.exists()


def test_fit_switches_to_simpson_only_without_an_explicit_time_scheme(tmp_path):
    """Noise-free walled box (20^2) sampled every 0.2: the default takes Simpson's rows (attrs and a line say
    so); ``--time-scheme midpoint`` keeps the rule asked for (its beta then corrected by the simulated discretisation
    bias instead)."""
    s, _ = coarse_step_walled(20)
    data = tmp_path / "ww.nc"
    write_density(data, s)
    auto, fixed = tmp_path / "a.nc", tmp_path / "m.nc"
    assert main(["fit", str(data), "-o", str(auto), "--estimate-beta", "--no-progress"]) == 0
    assert main(["fit", str(data), "-o", str(fixed), "--estimate-beta", "--time-scheme", "midpoint",
                 "--no-progress"]) == 0
    a, m = read_result(auto).attrs, read_result(fixed).attrs
    assert a["solver_time_scheme"] == "simpson" and a["solver_time_scheme_switched"] == 1
    assert a["solver_beta_midpoint"] == pytest.approx(m.get("solver_beta_fitted", m["beta"]), rel=1e-9)
    assert m["solver_time_scheme"] == "midpoint" and "solver_time_scheme_switched" not in m
    raw = m["solver_beta_fitted"]  # the midpoint fit's own beta, +9.9%
    assert abs(a["beta"] - 1) < 0.3 * abs(raw - 1)
    # the rule asked for keeps its rows, and its beta loses the simulated discretisation bias (+9.9% -> +2.1%)
    assert m["solver_beta_discretisation_corrected"] == 1 and abs(m["beta"] - 1) < 0.3 * abs(raw - 1)


def test_fit_with_beta_given_switches_on_psi_step_and_says_so(tmp_path, capsys):
    """Double well in a walled box (noise-free): with beta given, psi's step between the two rules decides; the
    switch is recorded and printed."""
    s, _ = double_well_walled(24)
    data, out = tmp_path / "dw.nc", tmp_path / "o.nc"
    write_density(data, s)
    assert main(["fit", str(data), "-o", str(out), "--beta", "2", "--no-progress"]) == 0
    printed = capsys.readouterr()
    a = read_result(out).attrs
    assert a["solver_time_scheme"] == "simpson" and a["solver_time_scheme_switched"] == 1
    assert "solver_beta_midpoint" not in a and a["time_step_z"] == pytest.approx(a["solver_time_step_z"])
    assert "uncertainty_time_step" not in a and "beta_simpson" not in a
    assert "noise standard deviations of psi" in printed.out + printed.err
