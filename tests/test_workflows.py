"""simulate / compare: running a fitted model (read back from a result file) forward."""

from __future__ import annotations

import numpy as np
import pytest

from fpirl import DensitySnapshots, FpirlInputError, Grid, PotentialEstimator
from fpirl.evaluation.metrics import kl_divergence
from fpirl.io import read_density, result_dataset, write_density, write_result
from fpirl.io import model_from_result, read_attrs
from fpirl.workflows import compare_snapshots, recover_mdp_from_fit, simulate_model

from fpirl.problems.synthetic import Problem


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """FP data of a known psi on (state, action), its fit, and the files."""
    problem = Problem(2, "periodic", steps=20)
    s = problem.snapshots(24)
    grid = Grid(s.grid.lower, s.grid.upper, 24, names=["s", "a"], roles=["state", "action"])
    data = DensitySnapshots(grid, s.times, s.values)
    est = PotentialEstimator(hermite_elements=3, beta=problem.beta).fit(data)
    mdp = recover_mdp_from_fit(est, data.dt)
    folder = tmp_path_factory.mktemp("wf")
    write_density(folder / "data.nc", data)
    write_result(folder / "result.nc", result_dataset(est, mdp, dt=data.dt, gamma=mdp.gamma))
    return problem, data, est, folder


def test_fp_simulation_of_the_fit_reproduces_the_data(fitted):
    problem, data, est, folder = fitted
    ds = result_dataset(est, recover_mdp_from_fit(est, data.dt), dt=data.dt)
    model = model_from_result(ds, data.grid)
    np.testing.assert_allclose(model.coef, est.coef_)
    sim = simulate_model(model, data.n_times - 1, "fp", initial=data.values[0])
    times, kl = compare_snapshots(data, sim)
    assert kl[0] == pytest.approx(0.0, abs=1e-12)
    norm = data.normalized().values
    total_change = kl_divergence(norm[-1], norm[0], data.grid)
    # the model's error is small next to the change the dynamics make
    assert kl.max() < 0.05 * total_change


def test_mdp_simulation_conserves_mass_and_starts_from_policy(fitted):
    _, data, est, _ = fitted
    model = model_from_result(result_dataset(est, dt=data.dt), data.grid)
    sim = simulate_model(model, 5, "mdp")
    np.testing.assert_allclose(sim.mass(), 1.0, rtol=1e-10)
    assert sim.values.shape == (6,) + data.grid.shape


def test_simulate_and_compare_cli(fitted, tmp_path, cli):
    _, data, _, folder = fitted
    out = tmp_path / "sim.nc"
    proc = cli("simulate", folder / "result.nc", "--steps", data.n_times - 1, "--model", "fp",
                   "--initial", folder / "data.nc", "-o", out, "--no-progress")
    assert proc.returncode == 0, proc.stderr
    sim = read_density(out)
    assert sim.n_times == data.n_times and sim.grid == data.grid
    proc = cli("compare", folder / "data.nc", out, "-o", tmp_path / "kl.png")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith("time") and len(lines) == data.n_times + 3
    kl = np.array([float(line.split("\t")[1]) for line in lines[1:data.n_times + 1]])
    assert kl[0] == 0.0 and np.all(kl >= 0)  # the same start: no rounding below zero (printed -4e-17)
    # the expected size of the KL: the data's own change, printed with the maximum
    norm = data.normalized().values
    change = kl_divergence(norm[-1], norm[0], data.grid)
    assert f"KL(p_last || p_first) = {change:.3g}" in proc.stdout
    assert read_attrs(out)["simulation_model"] == "fp"
    assert (tmp_path / "kl.png").stat().st_size > 0
    assert "note" not in proc.stdout
    proc = cli("simulate", folder / "result.nc", "--steps", 3, "-o", tmp_path / "mdp.nc", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    # a simulation from the default start (not the data's first snapshot): compare says so
    proc = cli("compare", folder / "data.nc", tmp_path / "mdp.nc", "-o", tmp_path / "kl2.png")
    assert proc.returncode == 0, proc.stderr
    assert "note: the simulation started from uniform states x policy" in proc.stdout
    # far from the data (over 10% of their change): the MDP map's note names the Fokker-Planck model
    assert "draws every action afresh from the policy" in proc.stdout and "--model fp" in proc.stdout


def test_simulate_bad_input(fitted, tmp_path, cli):
    _, data, _, folder = fitted
    out = tmp_path / "sim.nc"
    cli.assert_input_error(cli("simulate", folder / "result.nc", "--steps", 0, "-o", out), "steps")
    cli.assert_input_error(cli("simulate", folder / "data.nc", "--steps", 2, "-o", out), "potential")
    other = Grid([-1, -1], [1, 1], 8, names=["s", "a"], roles=["state", "action"])
    write_density(tmp_path / "other.nc", DensitySnapshots(other, [0, 0.1], np.ones((2, 8, 8))))
    cli.assert_input_error(cli("simulate", folder / "result.nc", "--steps", 2, "--initial", tmp_path / "other.nc",
                                "-o", out), "initial")
    cli.assert_input_error(cli("compare", folder / "data.nc", tmp_path / "other.nc"), "grids differ")
    # output checks before any work: the input itself, a parent that is a file
    before = (folder / "result.nc").read_bytes()
    cli.assert_input_error(cli("simulate", folder / "result.nc", "--steps", 2, "-o", folder / "result.nc"),
                           "is the input file")
    assert (folder / "result.nc").read_bytes() == before
    cli.assert_input_error(cli("simulate", folder / "result.nc", "--steps", 2, "-o", folder / "data.nc" / "x.nc"),
                           "data.nc", "is a file, not a directory")
    cli.assert_input_error(cli("compare", folder / "data.nc", tmp_path / "other.nc", "-o", folder / "data.nc" / "k.png"),
                           "is a file, not a directory")
    assert not out.exists()


def test_simulate_model_rejects_bad_arguments(fitted):
    _, data, est, _ = fitted
    model = model_from_result(result_dataset(est, dt=data.dt), data.grid)
    with pytest.raises(FpirlInputError, match="model"):
        simulate_model(model, 2, "sde")
    with pytest.raises(FpirlInputError, match="negative"):
        simulate_model(model, 2, "mdp", initial=-np.ones(data.grid.shape))
