"""Track-level ``fpirl simulate --tracks`` and ``fpirl compare TRACKS SIM.csv`` (called from :mod:`.commands`)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..core._errors import FpirlInputError
from ._common import EXIT_OK, refuse_solved

TABLE_SUFFIXES = (".csv", ".parquet", ".pq")


def is_table(path) -> bool:
    return Path(str(path)).suffix.lower() in TABLE_SUFFIXES


def read_with_result(ds, path, states_only: bool = False, args=None, single: bool = False, thin: bool = True):
    """Read a table with the columns, stride (and periodic box) of a result fitted on a table; the
    columns given in ``args`` (``--track --time --state --action``) take precedence. Every row is
    kept: positions outside a periodic box are wrapped into it (minimal image). ``single``: tracks
    of one observation are enough (start points). ``thin=False``: the result's stride is not applied (a table
    written by ``fpirl simulate``, already at the fitted time step)."""
    from ..io.netcdf import grid_from_dataset
    from ..tracks.reading import read_tracks
    from ..workflows import result_table_columns
    from ._common import table_columns_for

    if args is None:
        result_table_columns(ds.attrs)  # a result fitted on a table (one-line error if not)
    cols = table_columns_for(args, ds.attrs)
    boundary = str(ds.attrs["boundary"])
    action = None if states_only else cols["action"]
    bounds = None
    if boundary == "periodic":  # positions are wrapped into the fitted period, never dropped
        grid = grid_from_dataset(ds, "potential")
        keep = list(grid.state_axes) if action is None else range(grid.ndim)
        bounds = [(grid.lower[i], grid.upper[i]) for i in keep]
    return read_tracks(path, track=cols["track"], time=cols["time"], state=cols["state"], action=action,
                       boundary=boundary, bounds=bounds, stride=cols["stride"] if thin else 1,
                       robust_box=False, wrap=True, single=single)  # every row is kept


def cmd_simulate_tracks(args) -> int:
    """``fpirl simulate RESULT.nc --tracks N --steps K [--from TRACKS] -o SIM.csv``."""
    from ..io._files import atomic_write, check_output_path
    from ..io.netcdf import read_result
    from ..workflows import simulate_track_table

    out = check_output_path(args.output, (".csv",), inputs=(args.result, args.start))
    ds = read_result(args.result)
    refuse_solved(ds, args.result)
    start = None if args.start is None else read_with_result(ds, args.start, args=args, single=True)
    df = simulate_track_table(ds, args.tracks, args.steps, rng=args.seed, start=start)
    atomic_write(out, lambda tmp: df.to_csv(tmp, index=False))
    how = f"first observations of tracks in {args.start}" if start is not None else df.attrs.get("starts", "the result")
    print(f"fpirl simulate: {args.tracks} tracks of {args.steps} steps of dt={float(ds.attrs['dt']):g} "
          f"(starts: {how}, seed {args.seed}); wrote {out}")
    if start is None:
        print("fpirl simulate: to start from first observations of tracks instead: --from TRACKS.csv")
    print(f"fpirl simulate: compare with the data: fpirl compare TRACKS.csv {out} --result {args.result} "
          "-o compare.png")
    return EXIT_OK


def _read_plain(path, args):
    """Read a table with --track/--time/--state, defaults from the header of the simulated file."""
    import pandas as pd

    from ..tracks.reading import read_tracks

    header = list(pd.read_csv(args.simulation, nrows=0).columns) if args.simulation.lower().endswith(".csv") \
        else []
    track = args.track or (header[0] if len(header) > 2 else None)
    time = args.time or (header[1] if len(header) > 2 else None)
    state = args.state or (",".join(header[2:]) if len(header) > 2 else None)
    if not (track and time and state):
        raise FpirlInputError("give --track, --time and --state (or --result RESULT.nc) to read the tables")
    return read_tracks(path, track=track, time=time, state=state, robust_box=False)


def cmd_compare_tracks(args) -> int:
    """``fpirl compare TRACKS SIM.csv -o FIG.png [--json] [--result RESULT.nc]``."""
    from ..evaluation.track_stats import STATISTICS, compare_tracks
    from ..io._files import check_output_path
    from ..plotting.tracks import plot_track_comparison

    if not is_table(args.simulation):
        raise FpirlInputError(f"compare tracks needs two track tables, got {args.simulation!r}")
    fig = Path(args.output) if args.output else Path(args.simulation).with_name(
        Path(args.simulation).stem + "_compare.png")
    check_output_path(fig, inputs=(args.data, args.simulation))
    if args.result is not None:
        from ..io.netcdf import read_result

        ds = read_result(args.result)
        # the data thinned by the fit's stride; the simulation is already at the fitted time step
        obs = read_with_result(ds, args.data, states_only=True)
        sim = read_with_result(ds, args.simulation, states_only=True, thin=False)
    else:
        obs, sim = (_read_plain(p, args) for p in (args.data, args.simulation))
    summary, so, ss = compare_tracks(obs, sim, max_lag=args.max_lag, random_state=args.seed)
    plot_track_comparison(summary, so, ss, fig, labels=(Path(args.data).name, Path(args.simulation).name))
    if args.json:
        print(json.dumps({"tracks": {"observed": obs.n_tracks, "simulated": sim.n_tracks},
                          **{k: summary[k] for k in STATISTICS}}))
        return EXIT_OK
    print(f"fpirl compare: {obs.n_tracks} observed tracks ({args.data}) vs {sim.n_tracks} simulated "
          f"({args.simulation}), lags up to {so.curves['msd'][0][-1]:g} in time "
          f"({int(round(so.curves['msd'][0][-1] / obs.dt))} steps of dt={obs.dt:g})")
    print(f"{'statistic':<16}{'inside band':>12}{'discrepancy':>13}{'KS':>8}")
    for k in STATISTICS:
        s = summary[k]
        ks = f"{s['ks']:>8.3f}" if "ks" in s else f"{'':>8}"
        if math.isnan(s["inside_band"]):  # no lag (bin) has data in both tables
            print(f"{k:<16}  no lags or bins with data in both tables")
            continue
        print(f"{k:<16}{100 * s['inside_band']:>11.0f}%{s['discrepancy']:>13.2f}{ks}")
    print("(inside band: share of lags/bins where the simulation lies in the data's 95% band over tracks; "
          "discrepancy: mean |sim - obs| / joint band half-width, about 1 or less when they agree)")
    print(f"fpirl compare: wrote {fig}")
    return EXIT_OK
