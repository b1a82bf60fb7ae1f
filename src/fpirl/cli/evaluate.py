"""``fpirl evaluate``: held-out one-step predictive log-likelihood of a fitted model and the baselines."""

from __future__ import annotations

import argparse
import json

from ._common import EXIT_OK, add_column_arguments, count, table_columns_for


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
          f"in {count(table.n_tracks, 'track')} of {args.tracks}")
    for line in score_table(score):
        print(line)
    print("(mean log-density of the next position in nats per transition, in the table's units; higher is better; "
          "standard errors of the paired differences over tracks)")
    return EXIT_OK


def score_table(score) -> list[str]:
    """The rows of the ``fpirl evaluate`` table: every column as wide as its widest entry plus two
    spaces, so that columns never run together (e.g. with a far outlier's huge log-likelihoods)."""
    ref = score.loglik["fpirl"]
    rows = [["model", "log-likelihood", "model - fpirl", "std. error"]]
    for name, value in score.loglik.items():
        rows.append([name, f"{value:.4f}"] if name == "fpirl" else
                    [name, f"{value:.4f}", f"{value - ref:+.4f}", f"{score.difference_se(name, 'fpirl'):.4f}"])
    widths = [max(len(r[j]) for r in rows if j < len(r)) for j in range(4)]
    widths = [max(w, m) for w, m in zip(widths, (22, 14, 14, 10))]  # the usual layout for usual values
    return [f"{r[0]:<{widths[0] + 2}}" + "".join(f"{c:>{w + 2}}" for c, w in zip(r[1:], widths[1:])) for r in rows]
