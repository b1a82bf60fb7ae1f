"""``fpirl benchmark``: the built-in experiments (one runner per problem in :data:`BENCHMARKS`)."""

from __future__ import annotations

import argparse

from ..core._errors import FpirlInputError
from ._common import EXIT_OK, _output_directory, _positive_int_list, _progress


def _elements(args):
    if args.elements is None:
        return None
    return (args.elements,) if isinstance(args.elements, int) else tuple(args.elements)


def _benchmark_mountaincar(args) -> None:
    from ..problems.mountain_car_report import run_mountaincar

    run_mountaincar(args.output, elements=_elements(args), quick=args.quick, progress=_progress(args))


def _benchmark_free_energy(args) -> None:
    from ..problems.free_energy_report import run_free_energy

    if args.elements is not None:
        raise FpirlInputError("--elements does not apply to the free-energy benchmark")
    run_free_energy(args.output, progress=_progress(args), quick=args.quick)


def _benchmark_gridworld(args) -> None:
    from ..problems.gridworld import run_gridworld

    run_gridworld(args.output, elements=_elements(args), quick=args.quick, progress=_progress(args))


def _benchmark_realdata(args) -> None:
    from ..problems.realdata import run_realdata

    if args.elements is not None:
        raise FpirlInputError("--elements does not apply to the realdata benchmark (resolutions are chosen by "
                              "cross-validation on the training tracks)")
    path = run_realdata(args.output, data=args.data, quick=args.quick, progress=_progress(args))
    print(f"fpirl benchmark realdata: wrote {path}")


#: problem name -> runner(args). Add new benchmarks here.
BENCHMARKS = {
    "gridworld": _benchmark_gridworld,
    "mountaincar": _benchmark_mountaincar,
    "free-energy": _benchmark_free_energy,
    "realdata": _benchmark_realdata,
}


def add_benchmark_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("problem", choices=tuple(BENCHMARKS), help="which benchmark to run")
    p.add_argument("--elements", metavar="N1,N2,...", type=_positive_int_list, default=None,
                   help="FE elements per axis to sweep (default: the problem's)")
    p.add_argument("--quick", action="store_true",
                   help="quick pipeline check (coarser data, fewer grids; free-energy: no parameter scan)")
    p.add_argument("-o", "--output", metavar="DIR", required=True, help="output directory (created)")
    p.add_argument("--data", metavar="DIR", default=None,
                   help="realdata: folder with the track sets (default $FPIRL_REALDATA or ../shared/realdata)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def cmd_benchmark(args) -> int:
    _output_directory(args.output)
    BENCHMARKS[args.problem](args)
    return EXIT_OK
