"""Stage split of the default ``fpirl fit`` (snapshot-noise posterior, bands): wall time and memory per stage.

Run:  PYTHONPATH=src .venv/bin/python benchmarks/bench_default_stages.py DATA.nc [fit options ...]
      (default options: --beta 5 --hermite-elements 4; time another tree by its PYTHONPATH)

Each stage is timed by wrapping its function (the fits of ``PotentialEstimator``: the fit itself, the
resolution column's coarse-grid fit, the basis column's coarse Hermite refit; the shape choice, the
resolution column, the posterior, the basis column, the bands) and printed with the process's peak
(``ru_maxrss``) and current resident memory when it returns.
"""

from __future__ import annotations

import functools
import importlib
import resource
import sys
import time


def _report(name: str, seconds: float) -> None:
    rss = int(open("/proc/self/statm").read().split()[1]) * 4096
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"{name:22s} {seconds:6.2f} s   peak {peak / 1e9:.2f} GB   resident {rss / 1e9:.2f} GB")


def _timed(f, name):
    @functools.wraps(f)
    def g(*args, **kwargs):
        t = time.perf_counter()
        out = f(*args, **kwargs)
        _report(name, time.perf_counter() - t)
        return out
    return g


def main(argv) -> None:
    ident = importlib.import_module("fpirl.estimators.identify")
    ident.PotentialEstimator.fit = _timed(ident.PotentialEstimator.fit, "PotentialEstimator.fit")
    for mod, attr in (("fpirl.uncertainty._snapshot_noise", "choose_shape"),
                      ("fpirl.uncertainty._snapshot_noise", "resolution_error"),
                      ("fpirl.uncertainty.estimate", "snapshot_posterior"),
                      ("fpirl.uncertainty.estimate", "add_basis_error"),
                      ("fpirl.uncertainty._bands", "credible_bands")):
        m = importlib.import_module(mod)
        setattr(m, attr, _timed(getattr(m, attr), attr))
    options = argv[1:] or ["--beta", "5", "--hermite-elements", "4"]
    sys.argv = ["fpirl", "fit", argv[0], *options, "--no-progress", "-o", "/tmp/bench_default_stages.nc"]
    from fpirl.cli import main as cli

    t = time.perf_counter()
    try:
        cli()
    except SystemExit:
        pass
    _report("total (after imports)", time.perf_counter() - t)


if __name__ == "__main__":
    main(sys.argv[1:])
