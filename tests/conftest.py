import matplotlib

matplotlib.use("Agg")

import os
import subprocess
import sys

import numpy as np
import pytest


def pytest_configure(config):
    """With a pytest-xdist worker per core, each worker runs BLAS on one thread (kept for the session), and so do
    the processes the tests start: two workers of two BLAS threads each on two cores spent about 30% of the
    suite's CPU time in contention (docs/benchmarks.md, "Test suite"). fpirl's own two-thread splits
    (:mod:`fpirl.core._threads`) are left as they are, so the tests still run them."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers is None or int(workers) < (os.cpu_count() or 1):
        return
    from threadpoolctl import threadpool_limits

    config._fpirl_blas_limit = threadpool_limits(limits=1, user_api="blas")
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, "1")


@pytest.fixture(autouse=True)
def _strict_floating_point():
    old = np.seterr(all="raise", under="ignore")  # underflow in exp(-beta psi) is benign
    yield
    np.seterr(**old)


@pytest.fixture
def rng():
    return np.random.default_rng(20261125)


# --------------------------------------------------------------------------------------------
# command-line helpers shared by the CLI tests (fixtures, so no test imports another test file)
# --------------------------------------------------------------------------------------------
class CliRunner:
    """Run ``fpirl`` in-process (``cli(...)``, fast) or as a real process (``cli.subprocess(...)``).

    Both return a :class:`subprocess.CompletedProcess` with ``returncode``, ``stdout``, ``stderr``.
    """

    def __init__(self, capsys):
        self._capsys = capsys

    def __call__(self, *args) -> subprocess.CompletedProcess:
        from fpirl.cli import main

        argv = [str(a) for a in args]
        self._capsys.readouterr()  # drop earlier output
        rc = main(argv)
        out = self._capsys.readouterr()
        return subprocess.CompletedProcess(argv, rc, out.out, out.err)

    @staticmethod
    def subprocess(*args, cwd=None) -> subprocess.CompletedProcess:
        env = dict(os.environ, PYTHONWARNINGS="ignore")
        return subprocess.run([sys.executable, "-m", "fpirl.cli", *map(str, args)],
                              capture_output=True, text=True, cwd=cwd, env=env, timeout=120)

    @staticmethod
    def assert_input_error(proc, *words) -> None:
        """Exit 2 and one line ``fpirl: error: ...`` on stderr containing every word (any case)."""
        assert proc.returncode == 2, proc.stderr
        err = proc.stderr.strip()
        assert "Traceback" not in proc.stderr
        assert len(err.splitlines()) == 1, err
        assert err.startswith("fpirl: error: "), err
        for w in words:
            assert w.lower() in err.lower(), err

    @staticmethod
    def assert_only(folder, *names) -> None:
        """``folder`` holds exactly ``names`` (no stray result or temporary file)."""
        assert sorted(os.listdir(folder)) == sorted(names)


@pytest.fixture
def cli(capsys):
    return CliRunner(capsys)


#: the resolution of every figure the tests write (see ``_small_figures``)
TEST_DPI = 30


@pytest.fixture(autouse=True, scope="session")
def _small_figures():
    """Figures are drawn in full (every artist, colour bar and label) but rasterised at a low resolution: the tests
    check what is drawn and that the file is written, not the pixel count, and a 100-dpi PNG costs most of the
    time of the tests that make figures."""
    from matplotlib.figure import Figure

    savefig = Figure.savefig

    def small(self, *args, dpi=None, **kwargs):
        return savefig(self, *args, dpi=TEST_DPI, **kwargs)

    Figure.savefig = small
    yield
    Figure.savefig = savefig

