"""``fpirl evaluate``: held-out one-step predictive log-likelihood of a fitted model and the baselines."""

from __future__ import annotations

import argparse
import json

from ._common import EXIT_OK, add_column_arguments, table_columns_for


def add_evaluate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("result", metavar="RESULT.nc", help="result file written by 'fpirl fit' on a track table")
    p.add_argument("tracks", metavar="TRACKS", help="held-out trajectory table (.csv or .parquet)")
    cols = p.add_argument_group("columns (default: the ones the result was fitted with)")
    add_column_arguments(cols)
    p.add_argument("--json", action="store_true",
                   help='print one JSON object {"transitions": n, "loglik": {"fpirl": x, "diffusion": y, '
                   '"persistent_random_walk": z}}')


def cmd_evaluate(args) -> int:
    from ..evaluation.heldout import heldout_loglik
    from ..io.netcdf import read_result
    from .tracks import read_with_result

    ds = read_result(args.result)
    cols = table_columns_for(args, ds.attrs)
    table = read_with_result(ds, args.tracks, args=args)
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
