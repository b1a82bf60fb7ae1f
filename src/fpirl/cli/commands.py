"""``fpirl plot``, ``demo``, ``simulate`` and ``compare``."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..core._errors import FpirlInputError
from ._common import (EXIT_OK, _output_directory, _output_netcdf, _positive_int, _progress, _seed, add_column_arguments,
                      refuse_solved)


# --------------------------------------------------------------------------------------------
# plot
# --------------------------------------------------------------------------------------------
def add_plot_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("result", metavar="RESULT.nc", help="result file written by 'fpirl fit'")
    p.add_argument("-o", "--output", metavar="FIG.png", required=True, help="figure to write (.png, .pdf, .svg, ...)")


def cmd_plot(args) -> int:
    from ..io.netcdf import read_result
    from ..plotting._common import check_figure_path
    from ..plotting.fields import plot_result

    check_figure_path(args.output, inputs=(args.result,))
    path = plot_result(read_result(args.result), args.output)
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
    from ..problems.demo import run_demo

    run_demo(_output_directory(args.output), progress=_progress(args))
    return EXIT_OK


# --------------------------------------------------------------------------------------------
# simulate
# --------------------------------------------------------------------------------------------
def add_simulate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("result", metavar="RESULT.nc", help="result file written by 'fpirl fit'")
    p.add_argument("--steps", metavar="K", type=_positive_int, required=True, help="number of time steps of dt")
    p.add_argument("--model", choices=("mdp", "fp"), default=None,
                   help="densities: MDP density map (eq. density_evolution) or the Fokker-Planck PDE (default mdp)")
    p.add_argument("--initial", metavar="DENSITY.nc",
                   help="density dataset whose first snapshot is the start (default: uniform states x policy)")
    tracks = p.add_argument_group("tracks (a result fitted on a track table; writes a track table)")
    tracks.add_argument("--tracks", metavar="N", type=_positive_int, default=None,
                        help="simulate N tracks of the fitted increments model (output SIM.csv)")
    tracks.add_argument("--from", dest="start", metavar="TRACKS",
                        help="draw the starts from rows of this table (default: exp(-beta psi) on the grid)")
    tracks.add_argument("--seed", metavar="S", type=_seed, default=0, help="random seed (default 0)")
    add_column_arguments(p.add_argument_group("columns of the --from table (default: the ones the result was fitted "
                                              "with)"))
    p.add_argument("-o", "--output", metavar="SIM.nc|SIM.csv", required=True,
                   help="density dataset to write (SIM.csv with --tracks)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def cmd_simulate(args) -> int:
    from ..io.netcdf import model_from_result, read_density, read_result, write_density
    from ..workflows import simulate_model

    given = [f"--{k}" for k in ("track", "time", "state", "action") if getattr(args, k) is not None]
    if given and args.start is None:
        raise FpirlInputError(f"{', '.join(given)}: columns of a --from table; give --tracks N --from TRACKS")
    if args.tracks is not None:
        if args.model is not None or args.initial is not None:
            raise FpirlInputError("--model and --initial are for densities; --tracks simulates tracks")
        from .tracks import cmd_simulate_tracks

        return cmd_simulate_tracks(args)
    if args.start is not None:
        raise FpirlInputError("--from needs --tracks N")
    args.model = args.model or "mdp"

    out = _output_netcdf(args.output, inputs=(args.result, args.initial))
    ds = read_result(args.result)
    refuse_solved(ds, args.result)
    model = model_from_result(ds)
    initial = None
    if args.initial is not None:
        start = read_density(args.initial)
        if start.grid != model.grid:
            raise FpirlInputError(f"--initial is on {start.grid!r}, the result on {model.grid!r}")
        initial = start.values[0]
    sim = simulate_model(model, args.steps, args.model, initial, progress=_progress(args))
    write_density(out, sim, attrs={"source": "fpirl simulate", "simulation_model": args.model,
                                   "simulation_result": str(args.result),
                                   "simulation_initial": "" if args.initial is None else str(args.initial)})
    print(f"fpirl simulate: {args.steps} steps of dt={model.dt:g} with the {args.model} model; wrote {out}")
    return EXIT_OK


# --------------------------------------------------------------------------------------------
# compare
# --------------------------------------------------------------------------------------------
def add_compare_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("data", metavar="DATA.nc|TRACKS", help="observed density dataset, or observed track table")
    p.add_argument("simulation", metavar="SIM.nc|SIM.csv",
                   help="simulated density dataset or track table ('fpirl simulate')")
    p.add_argument("-o", "--output", metavar="FIG.png", default=None,
                   help="figure (default: SIM_kl.png, or SIM_compare.png for tracks, next to SIM)")
    tracks = p.add_argument_group("tracks (MSD, velocity autocorrelation, speed and turning angles)")
    tracks.add_argument("--result", metavar="RESULT.nc", default=None,
                        help="read both tables with the columns (and periodic box) of this result")
    note = "(default: the {} column{} of SIM.csv)"
    tracks.add_argument("--track", metavar="COL", help="column with the track ids " + note.format("first", ""))
    tracks.add_argument("--time", metavar="COL", help="column with the times " + note.format("second", ""))
    tracks.add_argument("--state", metavar="C1,C2", help="position columns " + note.format("remaining", "s"))
    tracks.add_argument("--max-lag", metavar="K", type=_positive_int, default=None,
                        help="largest lag in frames (default: half the median track length, at most 100)")
    tracks.add_argument("--seed", metavar="S", type=_seed, default=0, help="bootstrap seed (default 0)")
    tracks.add_argument("--json", action="store_true", help="print one JSON object with the numbers")


_MODEL_NAMES = {"mdp": "MDP density map", "fp": "Fokker-Planck PDE"}


def cmd_compare(args) -> int:
    from ..io.netcdf import read_attrs, read_density
    from ..plotting._common import check_figure_path
    from ..plotting.fields import plot_kl
    from ..workflows import compare_snapshots, kl_reference
    from .tracks import cmd_compare_tracks, is_table

    if is_table(args.data):
        return cmd_compare_tracks(args)
    if is_table(args.simulation):  # a track simulation against a density file
        raise FpirlInputError(f"{args.simulation!r} is a trajectory table and {args.data!r} is not: tracks are "
                              "compared with tracks, e.g. fpirl compare TRACKS.csv SIM.csv --result RESULT.nc")

    fig = Path(args.output) if args.output else Path(args.simulation).with_name(Path(args.simulation).stem + "_kl.png")
    check_figure_path(fig, inputs=(args.data, args.simulation))
    data = read_density(args.data)
    times, kl = compare_snapshots(data, read_density(args.simulation))
    reference = kl_reference(data)
    attrs = read_attrs(args.simulation)
    model = _MODEL_NAMES.get(str(attrs.get("simulation_model")), "model unknown (not written by fpirl simulate)")
    if attrs.get("simulation_result"):
        model += f" of {Path(str(attrs['simulation_result'])).name}"
    print("time\tKL(data || simulation)")
    for t, k in zip(times, kl):
        print(f"{t:.6g}\t{k:.6g}")
    print(f"fpirl compare: the data move by KL(p_last || p_first) = {reference:.3g}; a model that explains them "
          f"keeps KL(data || simulation) well below that (the benchmarks accept < 10%: {0.1 * reference:.3g}); "
          f"here the maximum is {float(kl.max()):.3g} ({100 * float(kl.max()) / reference:.1f}%)"
          if reference > 0 else "fpirl compare: the data do not change over the run (KL(p_last || p_first) = 0)")
    if str(attrs.get("simulation_model")) == "mdp" and reference > 0 and float(kl.max()) > 0.1 * reference:
        print("fpirl compare: note: the MDP density map (the paper's discrete-time model) draws every action afresh "
              "from the policy at each step, so on snapshots of a Fokker-Planck process, whose actions move "
              "continuously, it departs from them by design; fpirl simulate RESULT.nc --model fp simulates the "
              "Fokker-Planck PDE of the same fit")
    if attrs.get("simulation_model") and not str(attrs.get("simulation_initial", "")):
        print("fpirl compare: note: the simulation started from uniform states x policy, not from the data's first "
              f"snapshot; to compare the dynamics from the same start: fpirl simulate RESULT.nc --initial {args.data} ...")
    plot_kl(times, kl, fig, reference=reference,
            label=f"KL({Path(args.data).name} || {Path(args.simulation).name})",
            title=f"data {Path(args.data).name} vs simulation {Path(args.simulation).name} ({model})")
    print(f"fpirl compare: wrote {fig}")
    return EXIT_OK
