"""``fpirl evaluate``: held-out one-step predictive log-likelihood of a fitted model and the baselines."""

from __future__ import annotations

import argparse
import json

from ..core._errors import FpirlInputError
from ._common import EXIT_OK, add_column_arguments


def add_evaluate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("result", metavar="RESULT.nc", help="result file written by 'fpirl fit' on a track table")
    p.add_argument("tracks", metavar="TRACKS", help="held-out trajectory table (.csv or .parquet)")
    cols = p.add_argument_group("columns (default: the ones the result was fitted with)")
    add_column_arguments(cols)
    p.add_argument("--json", action="store_true",
                   help='print one JSON object {"transitions": n, "loglik": {"fpirl": x, "diffusion": y, '
                   '"persistent_random_walk": z}}')


def _columns(args, attrs) -> dict:
    """The columns given on the command line, else those the result records, and the stride."""
    from ..tracks.result_attrs import table_columns

    out = table_columns(attrs)
    for key in ("track", "time", "state", "action"):
        if getattr(args, key) is not None:
            out[key] = getattr(args, key)
    missing = [f"--{k}" for k in ("track", "time", "state") if not out[k]]
    if missing:
        raise FpirlInputError(f"the result does not record its table columns; give {', '.join(missing)}")
    if out["action"] is not None and not out["action"].strip():
        out["action"] = None
    return out


def cmd_evaluate(args) -> int:
    from ..evaluation.heldout import heldout_loglik
    from ..io.netcdf import read_result
    from ..tracks.reading import read_tracks

    ds = read_result(args.result)
    cols = _columns(args, ds.attrs)
    stride = cols["stride"]
    boundary = str(ds.attrs["boundary"])
    bounds = None
    if boundary == "periodic":  # positions are wrapped into the fitted period
        from ..io.netcdf import grid_from_dataset

        grid = grid_from_dataset(ds, "potential")
        bounds = list(zip(grid.lower, grid.upper))
    table = read_tracks(args.tracks, track=cols["track"], time=cols["time"], state=cols["state"],
                        action=cols["action"], boundary=boundary, bounds=bounds, stride=stride,
                        robust_box=False)  # every held-out row is scored (also outside the fitted box)
    kind = "velocity" if cols["action"] == "velocity" else ("explicit" if cols["action"] else "none")
    score = heldout_loglik(ds, table, kind=kind)
    if args.json:
        print(json.dumps(score.to_json()))
        return EXIT_OK
    print(f"fpirl evaluate: {score.transitions} held-out transitions (three consecutive observations) "
          f"in {table.n_tracks} tracks of {args.tracks}")
    print(f"{'model':<24}{'log-likelihood':>16}{'model - fpirl':>16}{'std. error':>12}")
    for name, value in score.loglik.items():
        if name == "fpirl":
            print(f"{name:<24}{value:>16.4f}")
        else:
            print(f"{name:<24}{value:>16.4f}{value - score.loglik['fpirl']:>+16.4f}"
                  f"{score.difference_se(name, 'fpirl'):>12.4f}")
    print("(mean log-density of the next position in nats per transition, in the table's units; higher is better; "
          "standard errors of the paired differences over tracks)")
    return EXIT_OK
