"""The command keeps dask out of its process unless a Dask scheduler is asked for (fpirl.cli._imports)."""

import subprocess
import sys

import numpy as np
import pytest

_DECIDE = """
import sys
if sys.argv[1] == "xarray":
    import xarray  # noqa: F401 - dask's presence already read
from fpirl.cli._imports import keep_dask_out
print(keep_dask_out(sys.argv[2:]), sys.modules.get("dask", "absent") is None)
"""


def _decide(*argv, first="none"):
    out = subprocess.run([sys.executable, "-c", _DECIDE, first, *argv], capture_output=True, text=True, check=True,
                         timeout=120)
    return out.stdout.split()


def test_dask_is_kept_out_unless_a_scheduler_is_asked_for():
    assert _decide("fit", "d.nc", "--beta", "5") == ["True", "True"]
    for scheduler in (["--scheduler", "local"], ["--scheduler=local"], ["--sched", "local"]):
        assert _decide("fit", "d.nc", *scheduler) == ["False", "False"]
    assert _decide("fit", "d.nc", first="xarray") == ["False", "False"]  # xarray already imported: left alone


_RUN = """
import sys
sys.argv = ["fpirl", "fit", *sys.argv[1:]]
from fpirl.cli import main
rc = main()
print(rc, sys.modules.get("dask", "absent") is None, "distributed" in sys.modules and sys.modules["distributed"] is not None)
"""


def test_the_command_fits_reads_and_writes_without_dask(rng, tmp_path):
    """As the console script: a density file is read, fitted and written with dask unimportable, and the
    result equals the in-process command's (which leaves the test process's imports alone)."""
    from fpirl import DensitySnapshots, Grid
    from fpirl.cli import main
    from fpirl.io import read_result, write_density

    grid = Grid([-1, -1], [1, 1], [12, 12])
    values = np.exp(0.2 * rng.standard_normal((8, *grid.shape)))
    write_density(tmp_path / "d.nc", DensitySnapshots(grid, np.arange(8) * 0.01, values / values.sum(axis=(1, 2),
                                                                                                   keepdims=True)))
    args = [str(tmp_path / "d.nc"), "--beta", "2", "--hermite-elements", "2", "--no-progress"]
    out = subprocess.run([sys.executable, "-c", _RUN, *args, "-o", str(tmp_path / "sub.nc")], capture_output=True,
                         text=True, check=True, timeout=120)
    assert out.stdout.split()[-3:] == ["0", "True", "False"], out.stderr
    assert main(["fit", *args, "-o", str(tmp_path / "here.nc")]) == 0
    sub, here = read_result(tmp_path / "sub.nc"), read_result(tmp_path / "here.nc")
    assert set(sub.data_vars) == set(here.data_vars)
    np.testing.assert_allclose(sub["potential"].values, here["potential"].values, rtol=0, atol=1e-12)


def test_a_scheduler_still_gets_dask():
    pytest.importorskip("distributed")
    out = subprocess.run([sys.executable, "-c", _DECIDE, "none", "fit", "--scheduler", "local"], capture_output=True,
                         text=True, check=True, timeout=120)
    assert out.stdout.split() == ["False", "False"]
    probe = subprocess.run([sys.executable, "-c", "import sys; sys.argv = ['fpirl', 'fit', '--scheduler', 'local']; "
                            "from fpirl.cli._imports import keep_dask_out; keep_dask_out(sys.argv[1:]); "
                            "import dask.distributed; print('ok')"], capture_output=True, text=True, check=True,
                         timeout=120)
    assert probe.stdout.strip() == "ok"
