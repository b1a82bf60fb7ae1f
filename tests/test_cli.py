"""The command line: exit codes, one-line errors, no half-written results, fit -> plot."""

from __future__ import annotations

import os

import numpy as np
import pytest

from fpirl import DensitySnapshots, Grid
from fpirl.cli import SUBCOMMANDS, main
from _simdensity import write_fp_density
from fpirl.io import density_dataset, grid_from_dataset, read_density, read_result, write_density


@pytest.fixture(scope="module")
def valid_data(tmp_path_factory):
    """Small FP-PDE data: 2-D periodic (state, action), beta = 4, 12 snapshots."""
    return write_fp_density(tmp_path_factory.mktemp("data") / "density.nc", 12, 12)


# --------------------------------------------------------------------------------------------
# success
# --------------------------------------------------------------------------------------------
def test_fit_then_plot(valid_data, tmp_path, cli):
    out = tmp_path / "result.nc"
    proc = cli("fit", valid_data, "-o", out, "--hermite-elements", "3", "--beta", "4", "--no-progress",
               "--uncertainty", "none")  # the default posterior bands: tests/test_cli_uncertainty.py
    assert proc.returncode == 0, proc.stderr
    assert "wrote" in proc.stdout
    ds = read_result(out)
    for name in ("potential", "q_value", "policy", "reward", "hermite_coefficients"):
        assert name in ds.data_vars
    assert ds["potential"].dims == ("s", "a")
    assert ds["hermite_coefficients"].shape == (6, 6)
    assert ds.attrs["beta"] == 4.0
    assert ds.attrs["dt"] == pytest.approx(0.02)
    assert ds.attrs["gamma"] == pytest.approx(0.99)
    assert list(np.atleast_1d(ds.attrs["hermite_elements"])) == [3, 3]
    assert ds.attrs["solver_time_scheme"] == "midpoint"
    cli.assert_only(tmp_path, "result.nc")

    fig = tmp_path / "fig.png"
    proc = cli("plot", out, "-o", fig)
    assert proc.returncode == 0, proc.stderr
    assert fig.stat().st_size > 1000
    cli.assert_only(tmp_path, "result.nc", "fig.png")


def test_fit_in_process_options(valid_data, tmp_path, capsys):
    out = tmp_path / "r.nc"
    rc = main(["fit", str(valid_data), "-o", str(out), "--uncertainty", "none", "--hermite-elements", "3,2",
               "--estimate-beta",
               "--gamma", "0.5", "--time-scheme", "explicit", "--quadrature-points", "2", "--ridge", "1e-6",
               "--no-progress"])
    assert rc == 0, capsys.readouterr().err
    ds = read_result(out)
    assert ds["hermite_coefficients"].shape == (6, 4)
    assert ds.attrs["gamma"] == 0.5 and ds.attrs["beta"] > 0
    assert ds.attrs["solver_time_scheme"] == "explicit" and ds.attrs["solver_quadrature_points"] == 2
    assert ds.attrs["solver_beta_estimated"] == 1


def test_fit_with_gcv_ridge(valid_data, tmp_path, capsys):
    out = tmp_path / "r.nc"
    assert main(["fit", str(valid_data), "-o", str(out), "--beta", "4", "--ridge", "gcv", "--no-progress",
                 "--uncertainty", "none"]) == 0
    ds = read_result(out)
    assert ds.attrs["solver_ridge_selection"] == "gcv" and ds.attrs["solver_ridge_relative"] > 0


def test_help_and_registry(capsys):
    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    for name, *_ in SUBCOMMANDS:
        assert name in text
    assert main(["fit", "--help"]) == 0
    assert "--estimate-beta" in capsys.readouterr().out


# --------------------------------------------------------------------------------------------
# bad input and usage: exit 2, one line, nothing written
# --------------------------------------------------------------------------------------------
def test_negative_density_subprocess(tmp_path, rng, cli):
    g = Grid([0, 0], [1, 1], 4, names=["s", "a"], roles=["state", "action"])
    ds = density_dataset(DensitySnapshots(g, [0, 1, 2], rng.random((3, *g.shape))))
    ds["density"][1, 1, 1] = -1.0
    data = tmp_path / "neg.nc"
    ds.to_netcdf(data)
    proc = cli.subprocess("fit", data, "-o", tmp_path / "out.nc", "--beta", "2")
    cli.assert_input_error(proc, "negative")
    cli.assert_only(tmp_path, "neg.nc")


def test_missing_file_subprocess(tmp_path, cli):
    proc = cli.subprocess("fit", tmp_path / "nope.nc", "-o", tmp_path / "out.nc", "--beta", "2")
    cli.assert_input_error(proc, "no such file")
    cli.assert_only(tmp_path)


def test_beta_required(valid_data, tmp_path, cli):
    cli.assert_input_error(cli("fit", valid_data, "-o", tmp_path / "out.nc"), "--beta", "--estimate-beta")
    cli.assert_only(tmp_path)


def test_plot_of_non_result(valid_data, tmp_path, cli):
    cli.assert_input_error(cli("plot", valid_data, "-o", tmp_path / "fig.png"), "not an fpirl result")
    cli.assert_only(tmp_path)


def _bad_inputs(tmp_path, valid_data):
    txt = tmp_path / "data.txt"
    txt.write_text("x")
    csv = tmp_path / "tracks.csv"
    csv.write_text("track,time,x\n1,0,0\n")
    junk = tmp_path / "junk.nc"
    junk.write_bytes(b"not netcdf")
    out = str(tmp_path / "out.nc")
    return {
        "unknown type": (["fit", str(txt), "-o", out, "--beta", "1"], ["unknown file type"]),
        "table": (["fit", str(csv), "-o", out, "--beta", "1"], ["needs --track, --time, --state"]),
        "corrupt": (["fit", str(junk), "-o", out, "--beta", "1"], ["cannot read"]),
        "both betas": (["fit", str(valid_data), "-o", out, "--beta", "1", "--estimate-beta"], ["not allowed"]),
        "negative beta": (["fit", str(valid_data), "-o", out, "--beta", "-1"], ["--beta"]),
        "bad elements": (["fit", str(valid_data), "-o", out, "--beta", "1", "--hermite-elements", "3,x"], ["hermite"]),
        "elements per axis": (["fit", str(valid_data), "-o", out, "--beta", "1", "--hermite-elements", "3,3,3"],
                              ["3 values for 2 axes"]),
        "gamma range": (["fit", str(valid_data), "-o", out, "--beta", "1", "--gamma", "1.5"], ["discount"]),
        "scheme": (["fit", str(valid_data), "-o", out, "--beta", "1", "--time-scheme", "rk4"], ["time-scheme"]),
        "output type": (["fit", str(valid_data), "-o", str(tmp_path / "out.txt"), "--beta", "1"], [".nc"]),
        "output dir": (["fit", str(valid_data), "-o", str(tmp_path / "no" / "out.nc"), "--beta", "1"],
                       ["directory does not exist"]),
        "table options": (["fit", str(valid_data), "-o", out, "--beta", "1", "--track", "id"], ["--track"]),
        "no command": ([], ["required"]),
        "unknown command": (["frobnicate"], ["invalid choice"]),
        "plot output type": (["plot", str(valid_data), "-o", str(tmp_path / "fig.xyz")], []),
    }


def test_bad_inputs_in_process(valid_data, tmp_path, cli):
    cases = _bad_inputs(tmp_path, valid_data)
    before = sorted(os.listdir(tmp_path))
    for label, (argv, words) in cases.items():
        cli.assert_input_error(cli(*argv), *words)
    assert sorted(os.listdir(tmp_path)) == before  # no result, no temp file


def test_unexpected_errors_exit_1(valid_data, tmp_path, capsys, monkeypatch, cli):
    import fpirl.estimators.identify

    def boom(self, snapshots):
        raise RuntimeError("solver exploded\nsecond line")

    monkeypatch.setattr(fpirl.estimators.identify.PotentialEstimator, "fit", boom)
    argv = ["fit", str(valid_data), "-o", str(tmp_path / "out.nc"), "--beta", "1"]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert err == "fpirl: error: RuntimeError: solver exploded second line"
    with pytest.raises(RuntimeError):
        main(["--debug", *argv])
    cli.assert_only(tmp_path)


def test_demo_pipeline_small(tmp_path, cli):
    """run_demo end to end on a coarse grid (the full `fpirl demo` uses 40 x 40 and 50 snapshots)."""
    from fpirl.problems import run_demo

    out = run_demo(tmp_path / "demo", progress=False, elements=16, n_snapshots=12, verbose=False)
    assert out["relative_l2_error"] < 0.15  # about 5% at N = 16
    assert out["result"].exists() and out["figure"].stat().st_size > 1000
    ds = read_result(out["result"])
    assert {"potential", "policy", "reward"} <= set(ds.data_vars)
    assert sorted(os.listdir(tmp_path / "demo")) == ["demo_density.nc", "demo_potential.png", "demo_result.nc"]
    # the written input density is the data of the fit: fitting it again gives the same result
    data = read_density(out["data"])
    assert data.n_times == 12 and data.grid == grid_from_dataset(ds, "potential")
    again = tmp_path / "again.nc"
    assert cli("fit", out["data"], "-o", again, "--hermite-elements", 4, "--beta", 5, "--no-progress",
               "--uncertainty", "none").returncode == 0
    np.testing.assert_allclose(read_result(again)["potential"].values, ds["potential"].values, atol=1e-8)


def test_progress_bars_only_on_a_terminal(valid_data, tmp_path, cli, monkeypatch):
    import io

    from fpirl.core._progress import show_progress

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    assert show_progress(True, Terminal()) and not show_progress(False, Terminal())
    assert not show_progress(True, io.StringIO())
    # redirected output: no bar and no cursor-control codes, although --no-progress is not given
    proc = cli("fit", valid_data, "-o", tmp_path / "r.nc", "--hermite-elements", "3", "--beta", "4",
               "--uncertainty", "none")
    assert proc.returncode == 0, proc.stderr
    assert "\r" not in proc.stderr + proc.stdout and "\x1b" not in proc.stderr + proc.stdout
    assert "%|" not in proc.stderr


def test_unwritable_destination_is_found_before_the_fit(valid_data, tmp_path, cli, monkeypatch):
    import fpirl.io._files
    import fpirl.estimators.identify

    locked = tmp_path / "locked"
    locked.mkdir()
    real = os.access
    monkeypatch.setattr(fpirl.io._files.os, "access", lambda p, mode: False if str(p) == str(locked) else real(p, mode))

    def never(self, snapshots):  # the check must come first
        raise AssertionError("the fit ran")

    monkeypatch.setattr(fpirl.estimators.identify.PotentialEstimator, "fit", never)
    proc = cli("fit", valid_data, "-o", locked / "r.nc", "--beta", "4")
    cli.assert_input_error(proc, "permission denied", str(locked / "r.nc"))
    cli.assert_only(locked)


def test_fit_success_line_explains_the_ridge_and_a_missing_mdp(valid_data, tmp_path, cli):
    from fpirl.problems.synthetic import Problem

    proc = cli("fit", valid_data, "-o", tmp_path / "r.nc", "--hermite-elements", "3", "--beta", "4", "--no-progress",
               "--uncertainty", "none")
    assert proc.returncode == 0, proc.stderr
    assert "ridge: 1e-09 relative (fixed)" in proc.stdout and "in absolute terms" in proc.stdout
    assert "not computed" not in proc.stdout
    # state axes only: the potential is fitted, the MDP is not, and the line says why
    snaps = Problem(1, "periodic", steps=6).snapshots(16)
    write_density(tmp_path / "s.nc", snaps)
    proc = cli("fit", tmp_path / "s.nc", "-o", tmp_path / "s_result.nc", "--hermite-elements", "3", "--beta", "4",
               "--no-progress", "--uncertainty", "none")
    assert proc.returncode == 0, proc.stderr
    assert "Q-value, policy and reward not computed: the data have no action axis" in proc.stdout
    assert not {"q_value", "policy", "reward"} & set(read_result(tmp_path / "s_result.nc").data_vars)
    # -o equal to the input is refused before any work
    before = (tmp_path / "s.nc").read_bytes()
    cli.assert_input_error(cli("fit", tmp_path / "s.nc", "-o", tmp_path / "s.nc", "--beta", "4"), "is the input file")
    assert (tmp_path / "s.nc").read_bytes() == before


_HEAVY = ("numpy", "scipy", "xarray", "matplotlib", "netCDF4", "pandas")


def _modules_after(code: str) -> set[str]:
    import subprocess
    import sys

    probe = code + f"\nimport sys\nprint('LOADED:' + ','.join(m for m in {_HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120).stdout
    line = [ln for ln in out.splitlines() if ln.startswith("LOADED:")][-1]
    return set(filter(None, line[len("LOADED:"):].split(",")))


def test_help_and_usage_errors_do_not_load_the_numerics():
    """Start-up stays fast (benchmarks/bench_cli_start.py times it): ``import fpirl``, ``fpirl --help``
    and usage errors import none of the numerical stack."""
    run = ("import runpy, sys\nsys.argv = {argv!r}\ntry:\n    runpy.run_module('fpirl.cli', run_name='__main__')\n"
           "except SystemExit:\n    pass\n")
    assert _modules_after("import fpirl") == set()
    assert _modules_after(run.format(argv=["fpirl", "--help"])) == set()
    assert _modules_after(run.format(argv=["fpirl", "frobnicate"])) == set()


def test_every_public_name_is_importable():
    import fpirl

    for name in fpirl.__all__:
        assert getattr(fpirl, name) is not None, name
    assert set(fpirl.__all__) <= set(dir(fpirl))
    with pytest.raises(AttributeError):
        fpirl.no_such_name  # noqa: B018


def test_fit_writes_the_reward_of_the_state_gradient(valid_data, tmp_path, cli):
    """The reward in the result file is the inverse Bellman reward (recover_mdp) of the written psi, with
    the transition drifting along grad_s psi; grad_s psi here by central differences of the file's Hermite
    potential along the state axis (independent of the estimator's gradient code)."""
    from fpirl.io import model_from_result
    from fpirl.mdp import recover_mdp

    out = tmp_path / "result.nc"
    assert cli("fit", valid_data, "-o", out, "--hermite-elements", "3", "--beta", "4", "--no-progress",
               "--uncertainty", "none").returncode == 0
    ds = read_result(out)
    model = model_from_result(ds)
    grid = model.grid
    pts = grid.mesh()
    eps = 1e-5
    grad_s = (model.potential(pts + [eps, 0]) - model.potential(pts - [eps, 0])) / (2 * eps)
    np.testing.assert_allclose(model.potential(pts), ds["potential"].values, atol=1e-10)
    mdp = recover_mdp(grid, ds["potential"].values, grad_s[None], ds.attrs["beta"], ds.attrs["dt"],
                      gamma=ds.attrs["gamma"])
    np.testing.assert_allclose(ds["reward"].values, mdp.reward, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ds["policy"].values, mdp.policy, rtol=1e-10)


def test_fit_notes_say_when_the_bands_leave_out_the_discretisation_error():
    """The note appears only for a snapshot-noise posterior without the resolution column."""
    from types import SimpleNamespace

    from fpirl.cli._common import _fit_notes

    est = SimpleNamespace(settings_={"ridge_relative": 1e-9, "ridge_selection": "fixed"}, penalty_=1e-6)
    note = "leave out the grid's discretisation error"
    for extra, shown in (({"uncertainty_noise": "multiplicative", "uncertainty_resolution": 0}, True),
                         ({"uncertainty_noise": "additive", "uncertainty_resolution": 0}, True),
                         ({"uncertainty_noise": "multiplicative", "uncertainty_resolution": 1}, False),
                         ({"uncertainty": "bootstrap"}, False), (None, False)):
        assert any(note in line for line in _fit_notes(est, object(), extra)) is shown, extra



def test_a_repeated_warning_is_printed_once(valid_data, tmp_path, monkeypatch):
    """A nested fit (beta's block means) can raise the warning of its outer fit again: the command's warning
    format prints each text once per run (an empty string for a repeat), and a new run starts afresh."""
    import fpirl.cli as cli_module

    lines = [cli_module._warning_one_line(text, RuntimeWarning, "f.py", 1) for text in ("same\nwords", "same words", "other")]
    assert lines == ["fpirl: warning: same words\n", "", "fpirl: warning: other\n"]
    assert main(["fit", str(valid_data), "-o", str(tmp_path / "out.nc"), "--beta", "1", "--uncertainty", "none"]) == 0
    assert cli_module._warning_one_line("same words", RuntimeWarning, "f.py", 1) == "fpirl: warning: same words\n"
