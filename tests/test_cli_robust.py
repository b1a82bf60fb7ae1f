"""Inputs found by fuzzing the command line: each ends in one line and exit 2 (or a quiet stop), before the work
where it can be known then, and never leaves a file behind."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from fpirl import DensitySnapshots, FpirlInputError, Grid, PotentialEstimator
from fpirl.cli import main
from fpirl.forward import FiniteVolumeSolver
from fpirl.io import read_density, result_dataset, write_density
from _simdensity import write_fp_density


@pytest.fixture(scope="module")
def data_and_result(tmp_path_factory):
    """2-D periodic FP data (12^2 elements, 12 snapshots) and a fit of it."""
    folder = tmp_path_factory.mktemp("robust")
    data = write_fp_density(folder / "density.nc", 12, 12)
    result = folder / "result.nc"
    assert main(["fit", str(data), "-o", str(result), "--beta", "4", "--hermite-elements", "3", "--uncertainty", "none",
                 "--no-progress"]) == 0
    return data, result


def test_options_out_of_range_are_usage_errors(data_and_result, tmp_path, cli):
    """Values whose squares or inverses leave double precision (they raised OverflowError, ZeroDivisionError or a
    failed Cholesky factorisation deep in the work, exit 1) and a negative seed (a ValueError from NumPy)."""
    data, result = data_and_result
    out, tracks = str(tmp_path / "o.nc"), str(tmp_path / "s.csv")
    cases = {
        "--beta": ["fit", data, "-o", out, "--beta", "1e-300"],
        "--ridge": ["fit", data, "-o", out, "--beta", "4", "--ridge", "1e20"],
        "--noise-scale": ["solve", result, "--noise-scale", "1e-300", "-o", out],
        "--drift-scale": ["solve", result, "--drift-scale", "1e300", "-o", out],
        "--action-drift": ["solve", result, "--action-drift", "1e300", "-o", out],
        "--seed": ["simulate", result, "--steps", "2", "--tracks", "3", "--seed", "-1", "-o", tracks],
        "density data need >= 2": ["fit", data, "-o", out, "--beta", "4", "--hermite-elements", "0"],
        "fewer steps": ["simulate", result, "--steps", "10000000", "-o", out],  # 1.7e9 values: refused before the work
    }
    for option, argv in cases.items():
        cli.assert_input_error(cli(*argv), option)
    cli.assert_only(tmp_path)


def test_time_steps_and_box_sides_outside_double_precision_are_refused(tmp_path, cli):
    """A spacing of 2e-302 fitted to a potential of 6e297 and a residual NaN, written with exit 0; 2e298
    overflowed in the noise terms (exit 1)."""
    grid = Grid([-1], [1], 8, boundary="reflecting")
    values = np.ones((3, 9))
    for dt in (2e-302, 2e298):
        with pytest.raises(FpirlInputError, match="snapshot spacing .* rescale"):
            DensitySnapshots(grid, dt * np.arange(3), values)
    with pytest.raises(FpirlInputError, match="box side .* rescale"):
        Grid([0], [1e-40], 8)
    DensitySnapshots(grid, 1e-9 * np.arange(3), values)  # nanoseconds are fine


def test_a_fit_that_is_not_finite_is_not_written(data_and_result):
    data, _ = data_and_result
    est = PotentialEstimator(hermite_elements=3, beta=4.0).fit(read_density(data))
    est.coef_ = np.full_like(est.coef_, np.nan)
    with pytest.raises(FpirlInputError, match="not finite"):
        result_dataset(est)


def test_finite_volume_exponential_refuses_hopeless_stiffness():
    """beta = 1e-5 on a 3-D walled grid ran expm_multiply for hours (``fpirl simulate --model fp``)."""
    solver = FiniteVolumeSolver([-1] * 3, [1] * 3, 21, lambda x: x[..., 0], 1e-5)
    assert solver.method == "lanczos"  # (whose substeps would be as hopeless: it leaves the interval to expm)
    with pytest.raises(FpirlInputError, match="diffusion is too fast"):
        solver.solve(lambda x: np.ones(x.shape[:-1]), [0.0, 0.02])
    FiniteVolumeSolver([-1] * 3, [1] * 3, 21, lambda x: x[..., 0], 5.0).solve(
        lambda x: np.ones(x.shape[:-1]), [0.0, 0.02])  # an ordinary beta still runs


def test_figure_type_is_checked_before_the_work(data_and_result, tmp_path, cli):
    """compare printed its whole KL table before failing on '.nc' as a figure's suffix."""
    data, result = data_and_result
    sim = tmp_path / "sim.nc"
    assert cli("simulate", result, "--steps", "3", "-o", sim).returncode == 0
    proc = cli("compare", data, sim, "-o", tmp_path / "kl.nc")
    cli.assert_input_error(proc, "unknown image type '.nc'")
    assert proc.stdout == ""
    cli.assert_input_error(cli("plot", result, "-o", tmp_path / "fig.nc"), "unknown image type")
    cli.assert_only(tmp_path, "sim.nc")


def test_the_file_at_fault_is_named(data_and_result, tmp_path, cli):
    data, result = data_and_result
    cli.assert_input_error(cli("compare", data, result, "-o", tmp_path / "kl.png"), str(result), "no 'density'")
    script = tmp_path / "x.py"
    script.write_text("x = 1\n")
    cli.assert_input_error(cli("plot", script, "-o", tmp_path / "fig.png"), "written by 'fpirl fit'")
    cli.assert_only(tmp_path, "x.py")


def test_output_folders_in_the_way_are_one_line_errors(tmp_path, cli):
    blocker = tmp_path / "file"
    blocker.write_text("")
    cases = {"exists and is not a directory": ["demo", "-o", blocker],
             "is a file, not a directory": ["demo", "-o", blocker / "sub"],  # was '[Errno 20] Not a directory'
             "exists and is not a directory ": ["benchmark", "gridworld", "--quick", "-o", blocker]}
    for words, argv in cases.items():
        cli.assert_input_error(cli(*argv), str(blocker), words.strip())
    cli.assert_only(tmp_path, "file")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_a_pseudo_file_system_is_not_a_full_disk(data_and_result, cli):
    data, _ = data_and_result
    cli.assert_input_error(cli("fit", data, "-o", "/proc/o.nc", "--beta", "4"), "not a file system for data files")


def test_a_closed_pipe_stops_quietly(data_and_result, tmp_path, monkeypatch, capsys):
    """``fpirl ... | head``: the reader leaves; no 'BrokenPipeError' line, exit 1."""
    data, result = data_and_result

    class Closed:
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            pass

    write_density(tmp_path / "d.nc", read_density(data))
    sim = tmp_path / "sim.nc"
    assert main(["simulate", str(result), "--steps", "3", "-o", str(sim)]) == 0
    capsys.readouterr()
    monkeypatch.setattr(sys, "stdout", Closed())
    assert main(["compare", str(tmp_path / "d.nc"), str(sim), "-o", str(tmp_path / "kl.png")]) == 1
    monkeypatch.undo()
    assert capsys.readouterr().err == ""


def test_binary_bytes_in_an_error_are_escaped(tmp_path, capsys):
    """A binary file named .csv: the message quoted its header's raw control bytes onto the terminal."""
    path = tmp_path / "garbage.csv"
    path.write_bytes(bytes(range(9)) + b",\x1b[2Jx\n1,2\n")
    assert main(["fit", str(path), "-o", str(tmp_path / "o.nc"), "--track", "id", "--time", "t", "--state", "x"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("fpirl: error: ")
    assert all(c.isprintable() for c in err.rstrip("\n")) and "\\x1b" in err and "\\x00" in err
