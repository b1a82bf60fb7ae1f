"""Command line interface: ``fpirl <command> ...`` (DESIGN section 6 fixes the spellings).

Only argument parsing, file handling and error reporting live here; every computation is in
the library. Each subcommand is one ``add_<name>_arguments(parser)`` function plus one
``cmd_<name>(args) -> int`` function, registered in :data:`SUBCOMMANDS`. To add a subcommand
(``simulate``, ``compare``, ``benchmark``, ...), write the two functions and add one line there.

Exit codes: 0 success, 2 bad input or usage (one line ``fpirl: error: ...`` on stderr),
1 anything else (one line too; ``--debug`` re-raises with the traceback).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from ._errors import FpirlInputError

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """Bad command-line usage (exit code 2)."""


def _one_line(text) -> str:
    return " ".join(str(text).split())


def _error(message) -> None:
    print(f"fpirl: error: {_one_line(message)}", file=sys.stderr)


class _Parser(argparse.ArgumentParser):
    """ArgumentParser whose usage errors are one line on stderr (``fpirl: error: ...``)."""

    def error(self, message):  # noqa: D401 - argparse API
        raise UsageError(f"{message} (see '{self.prog} --help')")


# --------------------------------------------------------------------------------------------
# argument types
# --------------------------------------------------------------------------------------------
def _positive_int_list(text: str):
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N or N1,N2,... (positive integers), got {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"element counts must be positive integers, got {text!r}")
    return values[0] if len(values) == 1 else values


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive finite number, got {text!r}")
    return value


def _nonnegative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a non-negative finite number, got {text!r}")
    return value


def _ridge(text: str):
    return "gcv" if text.strip().lower() == "gcv" else _nonnegative_float(text)


def _discount(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"discount factor must be in [0, 1), got {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _output_netcdf(path) -> Path:
    """Check an output path early (before any work): .nc suffix, existing directory."""
    path = Path(path)
    if path.suffix.lower() not in (".nc", ".nc4", ".netcdf", ".cdf"):
        raise FpirlInputError(f"output {str(path)!r} must be a netCDF file ending in .nc")
    if not path.parent.is_dir():
        raise FpirlInputError(f"output directory does not exist: {str(path.parent)!r}")
    if path.is_dir():
        raise FpirlInputError(f"output path is a directory: {str(path)!r}")
    return path


def _progress(args) -> bool:
    return not getattr(args, "no_progress", False)


# --------------------------------------------------------------------------------------------
# fit
# --------------------------------------------------------------------------------------------
def add_fit_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("data", metavar="DATA", help="density dataset (.nc); trajectory tables (.csv/.parquet) later")
    p.add_argument("-o", "--output", metavar="RESULT.nc", required=True, help="result file to write (netCDF)")
    p.add_argument("--hermite-elements", metavar="N|N1,N2,...", type=_positive_int_list, default=4,
                   help="Hermite elements for psi, one number or one per axis (default 4)")
    beta = p.add_mutually_exclusive_group(required=True)
    beta.add_argument("--beta", metavar="B", type=_positive_float, help="known inverse temperature")
    beta.add_argument("--estimate-beta", action="store_true", help="estimate beta jointly with psi")
    from .identify import DEFAULT_RIDGE

    p.add_argument("--ridge", metavar="R|gcv", type=_ridge, default=None,
                   help=f"relative Tikhonov weight on int |grad psi|^2 (default {DEFAULT_RIDGE:g}), or 'gcv' to "
                   "choose it by generalized cross-validation (noisy data, coarse grids)")
    p.add_argument("--gamma", metavar="G", type=_discount, default=None,
                   help="discount factor in [0, 1) for the reward (default 0.99); Q-value, policy and "
                   "reward are recovered whenever the data have state and action axes")
    p.add_argument("--time-scheme", choices=("midpoint", "explicit"), default="midpoint",
                   help="time discretisation of the weak-form residual (default midpoint)")
    p.add_argument("--quadrature-points", metavar="Q", type=_positive_int, default=3,
                   help="Gauss-Legendre points per axis and cell (default 3, exact)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    table = p.add_argument_group("trajectory tables (CSV/Parquet; not supported yet)")
    table.add_argument("--track", metavar="COL")
    table.add_argument("--time", metavar="COL")
    table.add_argument("--state", metavar="C1,C2")
    table.add_argument("--action", metavar="C3,C4|velocity")
    table.add_argument("--boundary", choices=("periodic", "reflecting"))
    table.add_argument("--bounds", metavar="LO:HI,...")
    table.add_argument("--estimator", choices=("density", "increments"))


_TABLE_OPTIONS = ("track", "time", "state", "action", "boundary", "bounds", "estimator")




def cmd_fit(args) -> int:
    from .io import data_kind, read_density, result_dataset, write_result

    out = _output_netcdf(args.output)
    if data_kind(args.data) == "netcdf":
        used = [f"--{k}" for k in _TABLE_OPTIONS if getattr(args, k) is not None]
        if used:
            raise FpirlInputError(f"{', '.join(used)} only apply to trajectory tables, not to {args.data!r}")
    snapshots = read_density(args.data)  # raises FpirlInputError for tables (not supported yet)
    grid = snapshots.grid
    n_h = args.hermite_elements
    if isinstance(n_h, tuple) and len(n_h) != grid.ndim:
        raise FpirlInputError(f"--hermite-elements has {len(n_h)} values for {grid.ndim} axes {grid.names}")

    from .identify import PotentialEstimator

    est = PotentialEstimator(
        hermite_elements=n_h,
        beta=args.beta,
        estimate_beta=bool(args.estimate_beta),
        ridge=args.ridge,
        time_scheme=args.time_scheme,
        quadrature_points=args.quadrature_points,
        progress=_progress(args),
    )
    est.fit(snapshots)
    from .workflows import recover_mdp_from_fit

    mdp = recover_mdp_from_fit(est, snapshots.dt, args.gamma)
    gamma = mdp.gamma if mdp is not None else None
    ds = result_dataset(est, mdp=mdp, dt=snapshots.dt, gamma=gamma,
                        extra={"source": str(args.data)})
    write_result(out, ds)
    print(
        f"fpirl fit: {grid!r}, {snapshots.n_times} snapshots, dt={snapshots.dt:g}; "
        f"beta={est.beta_:.6g}, ridge={est.ridge_:.3g}, relative residual={est.residual_:.3g}; wrote {out}"
    )
    return EXIT_OK


# --------------------------------------------------------------------------------------------
# plot
# --------------------------------------------------------------------------------------------
def add_plot_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("result", metavar="RESULT.nc", help="result file written by 'fpirl fit'")
    p.add_argument("-o", "--output", metavar="FIG.png", required=True, help="figure to write (.png, .pdf, .svg, ...)")


def cmd_plot(args) -> int:
    from .io import read_result
    from .plotting import plot_result

    ds = read_result(args.result)
    path = plot_result(ds, args.output)
    print(f"fpirl plot: wrote {path}")
    return EXIT_OK


# --------------------------------------------------------------------------------------------
# demo
# --------------------------------------------------------------------------------------------
def add_demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", metavar="DIR", default="fpirl-demo",
                   help="directory for demo_result.nc and demo_potential.png (default ./fpirl-demo)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def cmd_demo(args) -> int:
    from .problems.demo import run_demo

    run_demo(args.output, progress=_progress(args))
    return EXIT_OK


# --------------------------------------------------------------------------------------------
# simulate
# --------------------------------------------------------------------------------------------
def add_simulate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("result", metavar="RESULT.nc", help="result file written by 'fpirl fit'")
    p.add_argument("--steps", metavar="K", type=_positive_int, required=True, help="number of time steps of dt")
    p.add_argument("--model", choices=("mdp", "fp"), default="mdp",
                   help="MDP density map (eq. density_evolution) or the Fokker-Planck PDE (default mdp)")
    p.add_argument("--initial", metavar="DENSITY.nc",
                   help="density dataset whose first snapshot is the start (default: uniform states x policy)")
    p.add_argument("-o", "--output", metavar="SIM.nc", required=True, help="density dataset to write")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def cmd_simulate(args) -> int:
    from .io import grid_from_dataset, read_density, read_result, write_density
    from .workflows import model_from_result, simulate_model

    out = _output_netcdf(args.output)
    ds = read_result(args.result)
    model = model_from_result(ds, grid_from_dataset(ds, "potential"))
    initial = None
    if args.initial is not None:
        start = read_density(args.initial)
        if start.grid != model.grid:
            raise FpirlInputError(f"--initial is on {start.grid!r}, the result on {model.grid!r}")
        initial = start.values[0]
    sim = simulate_model(model, args.steps, args.model, initial, progress=_progress(args))
    write_density(out, sim)
    print(f"fpirl simulate: {args.steps} steps of dt={model.dt:g} with the {args.model} model; wrote {out}")
    return EXIT_OK


# --------------------------------------------------------------------------------------------
# compare
# --------------------------------------------------------------------------------------------
def add_compare_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("data", metavar="DATA.nc", help="observed density dataset")
    p.add_argument("simulation", metavar="SIM.nc", help="simulated density dataset ('fpirl simulate')")
    p.add_argument("-o", "--output", metavar="FIG.png", default=None,
                   help="figure of KL over time (default: SIM_kl.png next to SIM.nc)")


def cmd_compare(args) -> int:
    from .io import read_density
    from .plotting import plot_kl
    from .workflows import compare_snapshots

    fig = Path(args.output) if args.output else Path(args.simulation).with_name(Path(args.simulation).stem + "_kl.png")
    if not fig.parent.is_dir():
        raise FpirlInputError(f"output directory does not exist: {str(fig.parent)!r}")
    times, kl = compare_snapshots(read_density(args.data), read_density(args.simulation))
    print("time\tKL(data || simulation)")
    for t, k in zip(times, kl):
        print(f"{t:.6g}\t{k:.6g}")
    plot_kl(times, kl, fig)
    print(f"fpirl compare: wrote {fig}")
    return EXIT_OK


# --------------------------------------------------------------------------------------------
# benchmark
# --------------------------------------------------------------------------------------------
def _elements(args):
    if args.elements is None:
        return None
    return (args.elements,) if isinstance(args.elements, int) else tuple(args.elements)


def _benchmark_mountaincar(args) -> None:
    from .problems.mountain_car import run_mountaincar

    run_mountaincar(args.output, elements=_elements(args), quick=args.quick, progress=_progress(args))


def _benchmark_free_energy(args) -> None:
    from .problems.free_energy import run_free_energy

    if args.elements is not None:
        raise FpirlInputError("--elements does not apply to the free-energy benchmark")
    run_free_energy(args.output, progress=_progress(args), scan=not args.quick)


def _benchmark_gridworld(args) -> None:
    from .problems.gridworld import run_gridworld

    run_gridworld(args.output, elements=_elements(args), quick=args.quick, progress=_progress(args))


#: problem name -> runner(args). Add new benchmarks here.
BENCHMARKS = {
    "gridworld": _benchmark_gridworld,
    "mountaincar": _benchmark_mountaincar,
    "free-energy": _benchmark_free_energy,
}


def add_benchmark_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("problem", choices=tuple(BENCHMARKS), help="which benchmark to run")
    p.add_argument("--elements", metavar="N1,N2,...", type=_positive_int_list, default=None,
                   help="FE elements per axis to sweep (default: the problem's)")
    p.add_argument("--quick", action="store_true",
                   help="quick pipeline check (coarser data, fewer grids; free-energy: no parameter scan)")
    p.add_argument("-o", "--output", metavar="DIR", required=True, help="output directory (created)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def cmd_benchmark(args) -> int:
    out = Path(args.output)
    if out.exists() and not out.is_dir():
        raise FpirlInputError(f"output {str(out)!r} exists and is not a directory")
    BENCHMARKS[args.problem](args)
    return EXIT_OK


# --------------------------------------------------------------------------------------------
# registry
# --------------------------------------------------------------------------------------------
#: (name, one-line help, add_arguments, run). Add new subcommands here.
SUBCOMMANDS = [
    ("fit", "estimate the potential (and MDP) from density snapshots", add_fit_arguments, cmd_fit),
    ("plot", "plot a result file", add_plot_arguments, cmd_plot),
    ("demo", "run the built-in synthetic example end to end", add_demo_arguments, cmd_demo),
    ("simulate", "simulate a fitted model forward (MDP map or FP PDE)", add_simulate_arguments, cmd_simulate),
    ("compare", "KL divergence over time between observed and simulated densities", add_compare_arguments,
     cmd_compare),
    ("benchmark", "run a built-in benchmark (report, figures, results)", add_benchmark_arguments, cmd_benchmark),
]


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = _Parser(
        prog="fpirl",
        description="Fokker-Planck inverse reinforcement learning: recover potential, policy and "
        "reward from density snapshots.",
    )
    parser.add_argument("--version", action="version", version=f"fpirl {__version__}")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name, help_text, add_arguments, run in SUBCOMMANDS:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="show full tracebacks on errors")
        add_arguments(p)
        p.set_defaults(func=run)
    return parser


def _warning_one_line(message, category, filename, lineno, line=None):
    return f"fpirl: warning: {_one_line(message)}\n"


_INPUT_ERRORS = (FpirlInputError, FileNotFoundError, FileExistsError, IsADirectoryError, NotADirectoryError,
                 PermissionError)


def main(argv=None) -> int:
    """Entry point of the ``fpirl`` console script; returns the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in argv
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        _error(exc)
        return EXIT_USAGE
    except SystemExit as exc:  # --help / --version
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    debug = debug or getattr(args, "debug", False)
    old_format = warnings.formatwarning
    if not debug:
        warnings.formatwarning = _warning_one_line
    try:
        return int(args.func(args) or EXIT_OK)
    except (UsageError, *_INPUT_ERRORS) as exc:
        if debug:
            raise
        _error(exc)
        return EXIT_USAGE
    except KeyboardInterrupt:
        if debug:
            raise
        _error("interrupted")
        return EXIT_FAILURE
    except Exception as exc:
        if debug:
            raise
        _error(f"{type(exc).__name__}: {exc}")
        return EXIT_FAILURE
    finally:
        warnings.formatwarning = old_format


if __name__ == "__main__":
    sys.exit(main())
