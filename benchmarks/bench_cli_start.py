"""Start-up time of the command line (issue 13): ``--help`` and usage errors answer without the
numerical stack.

Run:  .venv/bin/python benchmarks/bench_cli_start.py [--repeat 7]

Each case runs in a fresh interpreter (``python -m fpirl.cli ...`` and ``python -c 'import ...'``),
``--repeat`` times; prints the median and the minimum wall time, and which heavy modules the
``--help`` process imported (none of numpy, scipy, xarray, matplotlib, netCDF4, pandas, tqdm is
expected). Compare with ``python -c pass`` (the interpreter alone). Target: well under a second.
"""

import argparse
import statistics
import subprocess
import sys
import time

HEAVY = ("numpy", "scipy", "xarray", "matplotlib", "netCDF4", "pandas", "tqdm")

CASES = {
    "python -c pass (interpreter only)": [sys.executable, "-c", "pass"],
    "import fpirl": [sys.executable, "-c", "import fpirl"],
    "fpirl --help": [sys.executable, "-m", "fpirl.cli", "--help"],
    "fpirl fit --help": [sys.executable, "-m", "fpirl.cli", "fit", "--help"],
    "fpirl frobnicate (usage error)": [sys.executable, "-m", "fpirl.cli", "frobnicate"],
    "fpirl fit (missing arguments)": [sys.executable, "-m", "fpirl.cli", "fit"],
    "import fpirl; fpirl.PotentialEstimator (numerics)": [sys.executable, "-c",
                                                          "import fpirl; fpirl.PotentialEstimator"],
}


def _heavy_modules(argv) -> list[str]:
    code = ("import runpy, sys\n"
            f"sys.argv = {argv!r}\n"
            "try:\n    runpy.run_module('fpirl.cli', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            f"print('HEAVY:' + ','.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("HEAVY:")][-1]
    return [m for m in line[len("HEAVY:"):].split(",") if m]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    print(f"{'case':52s} {'median s':>9s} {'min s':>7s}")
    for name, cmd in CASES.items():
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            subprocess.run(cmd, capture_output=True)
            times.append(time.perf_counter() - t0)
        print(f"{name:52s} {statistics.median(times):9.3f} {min(times):7.3f}")
    for case in (["fpirl", "--help"], ["fpirl", "fit", "--help"]):
        heavy = _heavy_modules(case)
        print(f"heavy modules imported by {' '.join(case)}: {', '.join(heavy) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
