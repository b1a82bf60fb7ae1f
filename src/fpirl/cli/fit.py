"""``fpirl fit``: estimate the potential (and the MDP) from a density dataset or a trajectory table."""

from __future__ import annotations

import argparse

from .._errors import FpirlInputError
from ._common import (EXIT_OK, _discount, _output_netcdf, _positive_float, _positive_int, _positive_int_list,
                      _progress, _ridge)


def add_fit_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("data", metavar="DATA", help="density dataset (.nc); trajectory tables (.csv/.parquet) later")
    p.add_argument("-o", "--output", metavar="RESULT.nc", required=True, help="result file to write (netCDF)")
    p.add_argument("--hermite-elements", metavar="N|N1,N2,...", type=_positive_int_list, default=4,
                   help="Hermite elements for psi, one number or one per axis (default 4)")
    beta = p.add_mutually_exclusive_group(required=True)
    beta.add_argument("--beta", metavar="B", type=_positive_float, help="known inverse temperature")
    beta.add_argument("--estimate-beta", action="store_true", help="estimate beta jointly with psi")
    from ..identify import DEFAULT_RIDGE

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
    from ..io import data_kind, read_density, result_dataset, write_result

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

    from ..identify import PotentialEstimator

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
    from ..workflows import recover_mdp_from_fit

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
