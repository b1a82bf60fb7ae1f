"""``fpirl fit``: estimate the potential (and the MDP) from a density dataset or a trajectory table."""

from __future__ import annotations

import argparse
import inspect
import os
import re

from ..core._errors import FpirlInputError
from ._common import (EXIT_OK, _beta, _coarsen, _discount, _fit_notes, _hermite_elements, _lag, _mobility, _output_netcdf,
                      _positive_int, _print_uncertainty, _progress, _ridge, add_column_arguments, count)

#: Velocity actions, beta estimated: the note on a continuous motion from this second-lag rho on (+1/4 for one).
CONTINUOUS_VELOCITY_RHO = 0.1
#: options whose value may start with '-' (``--bounds -1:1,-1:1``): see :func:`join_negative_values`
_DASH_VALUE_OPTIONS = ("--bounds",)
_DASH_VALUE = re.compile(r"^-[\d.]")


def join_negative_values(argv: list[str]) -> list[str]:
    """``['--bounds', '-1:1,-1:1']`` -> ``['--bounds=-1:1,-1:1']`` so argparse takes it as the value.

    argparse reads a token starting with '-' as an option unless it is a plain negative number;
    bounds such as ``-1:1,-1:1`` must work as users type them.
    """
    out, i = [], 0
    while i < len(argv):
        tok = argv[i]
        if tok in _DASH_VALUE_OPTIONS and i + 1 < len(argv) and _DASH_VALUE.match(argv[i + 1]):
            out.append(f"{tok}={argv[i + 1]}")
            i += 2
        else:
            out.append(tok)
            i += 1
    return out


def add_fit_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("data", metavar="DATA",
                   help="density dataset (.nc, or a .zarr store) or trajectory table (.csv, .parquet; see the "
                   "table options)")
    p.add_argument("-o", "--output", metavar="RESULT.nc", required=True, help="result file to write (netCDF)")
    p.add_argument("--hermite-elements", metavar="auto|N|N1,N2,...", type=_hermite_elements, default=None,
                   help="Hermite elements for psi, one number or one per axis; 'auto' (the default) chooses them "
                   "by cross-validation: over blocks of time steps for density data (1-3 axes; 4 elements on 4 "
                   "axes, 3 on more), over held-out tracks for tables")
    beta = p.add_mutually_exclusive_group()
    beta.add_argument("--beta", metavar="B", type=_beta, help="known inverse temperature")
    beta.add_argument("--estimate-beta", action="store_true",
                      help="estimate beta jointly with psi (density data need --beta or --estimate-beta; "
                      "tables estimate beta unless --beta is given)")
    from ..estimators.identify import DEFAULT_RIDGE

    p.add_argument("--ridge", metavar="R|gcv", type=_ridge, default=None,
                   help=f"relative Tikhonov weight on int |grad psi|^2 (density data: default {DEFAULT_RIDGE:g}, or "
                   "'gcv' for generalized cross-validation; tables: default chosen by cross-validation with "
                   "--hermite-elements auto)")
    p.add_argument("--gamma", metavar="G", type=_discount, default=None,
                   help="discount factor in [0, 1) for the reward (default 0.99); Q-value, policy and "
                   "reward are recovered whenever the data have state and action axes")
    p.add_argument("--reward", choices=("soft", "expected"), default="soft",
                   help="inverse Bellman convention of the reward: 'soft' (default; R = Q - gamma E[V(s')] with the "
                   "soft value V = log int exp(beta Q) da / beta, whose soft-optimal policy is the fitted one) or "
                   "'expected' (the paper's equation, V = int pi Q da)")
    p.add_argument("--time-scheme", choices=("midpoint", "explicit", "simpson"), default=None,
                   help="time discretisation of the weak-form residual (density data and --estimator density; "
                   "default midpoint, order 2 in dt; simpson: order 4, for coarse snapshot spacing)")
    p.add_argument("--coarsen", metavar="auto|K", type=_coarsen, default=None,
                   help="density data: fit every K-th node per axis (a power of two; 1: the grid "
                   "as given); 'auto' (default) halves fine grids (>= 64 elements per axis, down to 32) of snapshots "
                   "with measurable per-node noise; the result is written on the data's grid")
    p.add_argument("--quadrature-points", metavar="Q", type=_positive_int, default=None,
                   help="Gauss-Legendre points per axis and cell (density data; default 3, exact)")
    p.add_argument("--solver", choices=("auto", "assembled", "matrix-free", "interpolated-flux", "gauss-flux",
                                        "mixed-flux"),
                   default=None,
                   help="density data: 'assembled' normal matrix, 'matrix-free' conjugate gradients for 5-D "
                   "grids, 'interpolated-flux' (matrix-free, flux interpolated on the grid), "
                   "'gauss-flux' (matrix-free, flux integrated at 2^d Gauss points per cell: more accurate, "
                   "about 2^d times slower), 'mixed-flux' (matrix-free, Gauss points along the derivative axis "
                   "only: as accurate as gauss-flux, about twice the interpolated flux's cost; for 6-D) (default "
                   "auto: chosen by the memory each path would need)")
    p.add_argument("--device", choices=("cpu", "cuda"), default=None,
                   help="mixed-flux path (6-D density data): run it on a CUDA GPU through CuPy (default cpu)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    unc = p.add_argument_group("uncertainty and scale-out (docs/method.md, docs/cluster.md)")
    unc.add_argument("--uncertainty", choices=("auto", "posterior", "bootstrap", "parametric", "none"), default="auto",
                     help="auto (default): parametric for --estimator density on a table, else the posterior, "
                     "unless either would take over 2 minutes (then a warning); posterior: Bayesian posterior of psi "
                     "(and beta); bootstrap: refits on tracks resampled with replacement (tables, in parallel); "
                     "parametric: refits on tables simulated from the fit; none. Writes "
                     "potential_std, policy/reward 5%%/95%% bands and beta_lower/beta_upper into the result")
    unc.add_argument("--uncertainty-samples", metavar="N", type=_positive_int, default=None,
                     help="posterior draws for the bands (default 64), or bootstrap replicates (100; parametric 32)")
    unc.add_argument("--scheduler", metavar="local|tcp://HOST:PORT", default=None,
                     help="assemble the normal equations (and run bootstrap replicates) on Dask: 'local' starts a "
                     "LocalCluster on this machine, tcp://HOST:PORT uses a running scheduler (needs fpirl[dask])")
    table = p.add_argument_group("trajectory tables (CSV/Parquet, one row per observation; docs/formats.md)")
    add_column_arguments(table, " (required for tables)")
    table.add_argument("--boundary", choices=("periodic", "reflecting"), help="box boundary (default reflecting)")
    table.add_argument("--bounds", metavar="LO:HI,...",
                       help="one LO:HI per modelled axis, states then actions (e.g. --bounds -1:1,-1:1); "
                       "default: the data range plus 5%% on each side; required for periodic boxes; "
                       "observations outside are dropped with a warning")
    table.add_argument("--stride", metavar="K", type=_positive_int, help="keep every K-th frame (default 1)")
    table.add_argument("--estimator", choices=("density", "increments"),
                       help="increments (default): regress consecutive-observation increments on the "
                       "Hermite basis; density: cloud-in-cell snapshots and the weak-form fit")
    table.add_argument("--drift-axes", metavar="all|actions|NAMES",
                       help="increments estimator: axes whose increments are regressed (default: the action "
                       "axes with --action velocity, whose position increments are kinematic; else all)")
    table.add_argument("--noise-correction", metavar="LAG", nargs="?", const=1, type=_lag, default=None,
                       help="increments estimator: correct psi and beta for localisation noise (alone: lag 1, "
                       "for observed coordinates; 2 for velocities differenced from noisy positions)")
    table.add_argument("--second-lag", choices=("auto", "on", "off"), default=None,
                       help="increments estimator: residuals correlated with the previous step's (AR(1), for "
                       "smoothed or quantised positions; psi and beta unchanged, used by 'fpirl evaluate'); auto "
                       "(default): kept when it wins a cross-validation over tracks by 2 standard errors and 0.01 nats per transition")
    table.add_argument("--track-noise", choices=("auto", "on", "off"), default=None,
                       help="increments estimator: a noise scale of its own for every track (a Gamma-distributed "
                       "precision per track, so 'fpirl evaluate' scores a Student t given the track's earlier "
                       "residuals; psi and beta unchanged); auto (default): kept when it wins a cross-validation over "
                       "tracks by 2 standard errors and 0.01 nats per transition")
    table.add_argument("--mobility", metavar="auto|K", type=_mobility, default=None,
                       help="increments estimator: state-dependent mobility g in front of drift and noise on the "
                       "drift axes (speed/heading-dependent noise for velocities; exp(-beta psi) stays stationary): "
                       "K = degree of the polynomial log g (0: the paper's constant beta); auto (default): the degree "
                       "0, 1 or 2 by cross-validation over tracks, above 0 only when it wins by 2 standard errors and 0.01 nats")


_TABLE_OPTIONS = ("track", "time", "state", "action", "boundary", "bounds", "stride", "estimator", "drift_axes",
                  "noise_correction", "mobility", "second_lag", "track_noise")


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def cmd_fit(args) -> int:
    from ..io._zarr import is_zarr
    from ..io.netcdf import data_kind

    out = _output_netcdf(args.output, inputs=(args.data,))
    if is_zarr(args.data) or data_kind(args.data) == "netcdf":
        return _fit_density(args, out)
    return _fit_table(args, out)


# --------------------------------------------------------------------------------------------
# density datasets (.nc)
# --------------------------------------------------------------------------------------------
#: Density files larger than this (as float64) are streamed chunk by chunk instead of read whole.
STREAM_BYTES = 2e9


def _density_source(args):
    """The snapshots of a density file: read whole, or, above :data:`STREAM_BYTES` (and unless the
    assembled solver or a Dask scheduler is asked for), opened lazily and streamed by the
    matrix-free paths, so that the data never sit in memory whole."""
    from ..io.netcdf import read_density
    from ..weakform.matfree import StreamingSnapshots

    lazy = StreamingSnapshots.open(args.data)
    if 8.0 * lazy.n_times * lazy.grid.size > STREAM_BYTES and args.solver != "assembled" and args.scheduler is None:
        return lazy
    lazy.close()
    return read_density(args.data)


def _fit_density(args, out) -> int:
    from ..io.netcdf import copy_axis_attrs, result_dataset, write_result

    used = [_flag(k) for k in _TABLE_OPTIONS if getattr(args, k) is not None]
    if used:
        verb = "applies" if len(used) == 1 else "apply"
        raise FpirlInputError(f"{', '.join(used)} only {verb} to trajectory tables, not to {args.data!r}")
    if args.beta is None and not args.estimate_beta:
        raise FpirlInputError("one of the arguments --beta --estimate-beta is required for density data")
    if args.uncertainty in ("bootstrap", "parametric"):
        raise FpirlInputError(f"--uncertainty {args.uncertainty} refits on tracks: it applies to trajectory tables")
    from ..distributed import check_scheduler

    check_scheduler(args.scheduler)
    from ..estimators.noisy_grid import coarsened, on_grid

    source = _density_source(args)
    snapshots, coarsening = coarsened(source, args.coarsen or "auto")
    grid = coarsening.grid
    n_h = "auto" if args.hermite_elements is None else args.hermite_elements
    if isinstance(n_h, tuple) and len(n_h) != grid.ndim:
        raise FpirlInputError(f"--hermite-elements has {len(n_h)} values for {grid.ndim} axes {grid.names}")

    from ..estimators.identify import PotentialEstimator

    est = PotentialEstimator(
        hermite_elements=n_h,
        beta=args.beta,
        estimate_beta=bool(args.estimate_beta),
        ridge=args.ridge,
        time_scheme=args.time_scheme or "midpoint",
        quadrature_points=args.quadrature_points or 3,
        progress=_progress(args),
        solver=args.solver or "auto",
        scheduler=args.scheduler,
        device=args.device or "cpu",
    )
    est.fit(snapshots)
    from ..mdp.recovery import recover_mdp_from_fit

    post = None
    if args.uncertainty != "none":  # the posterior first: it may correct beta's point estimate (psi refitted)
        from ..uncertainty import uncertainty_and_point, uncertainty_extra
        post, est = uncertainty_and_point(est, args.uncertainty, snapshots, progress=_progress(args),
                                          switch_time_scheme=args.time_scheme is None)  # not against an explicit rule
    est = on_grid(est, grid) if coarsening.factor > 1 else est  # the result on the data's grid (module doc)
    mdp = recover_mdp_from_fit(est, snapshots.dt, args.gamma, reward=args.reward)
    gamma = mdp.gamma if mdp is not None else None
    extra = {"source": str(args.data), "source_kind": "density", "uncertainty": "none", "coarsen": coarsening.factor}
    if coarsening.factor > 1:
        extra.update(coarsen_grid=repr(snapshots.grid), coarsen_noise=coarsening.noise or 0.0)
    from ..core.density import DensitySnapshots

    if isinstance(source, DensitySnapshots):  # where the snapshots carry mass (not for streamed files: one more pass)
        from ..mdp.support import snapshot_support_extra

        extra.update(snapshot_support_extra(source))
    if args.uncertainty != "none":
        extra.update(uncertainty_extra(est, post, snapshots.dt, gamma, args.uncertainty_samples,
                                       progress=_progress(args), reward_convention=args.reward))
        from ..uncertainty import points_outside_bands

        extra.update(points_outside_bands(mdp, extra))  # (a warning where the point leaves its band)
    ds = copy_axis_attrs(result_dataset(est, mdp=mdp, dt=snapshots.dt, gamma=gamma, extra=extra), args.data)
    write_result(out, ds)
    print(
        f"fpirl fit: {grid!r}, {snapshots.n_times} snapshots, dt={snapshots.dt:g}; "
        f"beta={est.beta_:.6g}, ridge={est.penalty_:.3g}, relative residual={est.residual_:.3g}; wrote {out}"
    )
    for line in _fit_notes(est, mdp, extra):  # the ridge; why Q, policy, reward may be missing; the bands' scope
        print(f"fpirl fit: {line}")
    _print_uncertainty(extra)
    return EXIT_OK


def _fit_uncertainty(est, method, *args, **kwargs) -> dict:
    """:func:`fpirl.uncertainty.fit_uncertainty`; with ``--uncertainty none`` its answer without importing the
    uncertainty package (scipy.stats and the posterior code: a bare fit does not pay for them)."""
    if method == "none":
        return {"uncertainty": "none"}
    from ..uncertainty import fit_uncertainty

    return fit_uncertainty(est, method, *args, **kwargs)


# --------------------------------------------------------------------------------------------
# trajectory tables (.csv, .parquet)
# --------------------------------------------------------------------------------------------
def _estimator_params(args, cls, tracks) -> dict:
    """Constructor arguments of the track estimator ``cls`` from the options (errors for unsupported ones)."""
    if args.ridge == "gcv":
        raise FpirlInputError("--ridge gcv applies to density data; for tables the ridge is chosen by "
                              "cross-validation with --hermite-elements auto, or give a number")
    accepted = set(inspect.signature(cls).parameters)
    params = {"hermite_elements": "auto" if args.hermite_elements is None else args.hermite_elements,
              "beta": args.beta, "progress": _progress(args)}
    optional = {"ridge": args.ridge, "time_scheme": args.time_scheme, "quadrature_points": args.quadrature_points,
                "noise_correction": args.noise_correction, "solver": args.solver, "mobility": args.mobility,
                "device": args.device, "coarsen": args.coarsen,
                "second_lag": {"on": True, "off": False}.get(args.second_lag, args.second_lag),
                "track_noise": {"on": True, "off": False}.get(args.track_noise, args.track_noise)}
    if args.drift_axes is not None:  # the estimator resolves 'all', 'actions' and the default itself (same as the API)
        spec = args.drift_axes.strip()
        optional["drift_axes"] = spec.lower() if spec.lower() in ("all", "actions") else \
            tuple(c.strip() for c in spec.split(","))
    for key, value in optional.items():
        if value is None:
            continue
        if key not in accepted:
            raise FpirlInputError(f"{_flag(key)} does not apply to --estimator {args.estimator or 'increments'}")
        params[key] = value
    return params


def _fit_table(args, out) -> int:
    from ..io.netcdf import result_dataset, write_result
    from ..tracks.reading import read_tracks

    missing = [_flag(k) for k in ("track", "time", "state") if getattr(args, k) is None]
    if missing:
        raise FpirlInputError(f"trajectory table {args.data!r} needs {', '.join(missing)} (the column names)")
    tracks = read_tracks(
        args.data, track=args.track, time=args.time, state=args.state, action=args.action,
        boundary=args.boundary or "reflecting", bounds=args.bounds, stride=args.stride or 1,
        progress=_progress(args),
    )
    n_h = args.hermite_elements
    if isinstance(n_h, tuple) and len(n_h) != tracks.ndim:
        raise FpirlInputError(f"--hermite-elements has {len(n_h)} values for {tracks.ndim} axes {tracks.names}")

    from ..estimators import TRACK_ESTIMATORS

    name = args.estimator or "increments"
    if name not in TRACK_ESTIMATORS:
        raise FpirlInputError(f"--estimator {name} is not available (available: {', '.join(TRACK_ESTIMATORS)})")
    cls = TRACK_ESTIMATORS[name]
    from ..distributed import check_scheduler

    params = _estimator_params(args, cls, tracks)
    if check_scheduler(args.scheduler) is not None and "scheduler" in inspect.signature(cls).parameters:
        params["scheduler"] = args.scheduler
    est = cls(**params).fit(tracks)

    from ..mdp.recovery import recover_mdp_from_fit

    mdp = recover_mdp_from_fit(est, tracks.dt, args.gamma, reward=args.reward)
    gamma = mdp.gamma if mdp is not None else None
    from ..tracks.result_attrs import table_attrs

    extra = dict(est.result_extra())
    extra.update({**table_attrs(tracks, source=args.data), "estimator": name})
    from ..evaluation.heldout import fit_time_diagnostics  # baselines for 'fpirl evaluate', the adequacy check

    diagnostics, adequacy = fit_time_diagnostics(tracks)
    extra.update(diagnostics)
    from ..mdp.support import support_extra  # where the data are; policy summaries only there

    try:
        support, policy_summary = support_extra(est.grid_, tracks.values, mdp)
        extra.update(support)
    except FpirlInputError as exc:  # e.g. a grid that does not hold the observations: the fit stands
        import warnings

        warnings.warn(f"data support not stored ({exc})", stacklevel=2)
        policy_summary = None
    extra.update(_fit_uncertainty(est, args.uncertainty, tracks, tracks.dt, gamma, n_samples=args.uncertainty_samples,
                                 scheduler=args.scheduler, n_jobs=os.cpu_count(), progress=_progress(args),
                                 reward_convention=args.reward))
    if args.uncertainty != "none":
        from ..uncertainty import points_outside_bands

        extra.update(points_outside_bands(mdp, extra))  # (a warning where the point leaves its band)
    ds = result_dataset(est, mdp=mdp, dt=tracks.dt, gamma=gamma, extra=extra)
    write_result(out, ds)
    import numpy as np

    elements = est.settings_.get("hermite_elements") or ",".join(str(int(e)) for e in np.atleast_1d(est.hermite_.elements))
    chosen = {"cv": "chosen by cross-validation", "rule": "by the documented rule"}.get(
        est.settings_.get("hermite_selection"), "fixed")
    constant = est.settings_.get("psi_constant_along")
    if constant:
        chosen += f"; psi constant along {constant}"
    print(
        f"fpirl fit: {count(tracks.n_obs, 'observation')}, {count(tracks.n_tracks, 'track')}, "
        f"{count(len(tracks.pairs()[0]), 'transition')}, "
        f"dt={tracks.dt:g}; {name} estimator: beta={est.beta_:.6g} ({'fixed' if args.beta else 'estimated'}), "
        f"Hermite elements {elements} ({chosen}), ridge={_relative_ridge(est)}; wrote {out}"
    )
    for line in _fit_notes(est, mdp):
        print(f"fpirl fit: {line}")
    if policy_summary is not None:
        acts = ",".join(est.grid_.names[i] for i in est.grid_.action_axes)
        vec = lambda v: "(" + ", ".join(f"{x:.4g}" for x in v) + ")"  # noqa: E731
        print(f"fpirl fit: policy averaged over the observed states, within the data's support: mode {acts} = "
              f"{vec(policy_summary.mode)}, mean {vec(policy_summary.mean)}; "
              f"{policy_summary.mass_outside:.1%} of its mass lies outside the support")
    st = est.settings_
    if "mobility_degree" in st:
        cv = f" (held-out log-likelihood by degree {st['mobility_cv']})" if st.get("mobility_cv") else ""
        print(f"fpirl fit: mobility: degree {int(st['mobility_degree'])} of log g{cv}; second lag rho="
              f"{float(st.get('second_lag_rho', 0.0)):.4g} ({'0: none' if not st.get('second_lag_rho') else 'kept'})")
    rho = float(st.get("second_lag_rho", 0.0))
    if args.action == "velocity" and args.beta is None and rho >= CONTINUOUS_VELOCITY_RHO:
        print(f"fpirl fit: the velocity increments are correlated from step to step (second lag rho = {rho:.3g}; "
              "velocities that are position differences of a continuous motion give about +1/4): beta is the "
              "one-step value of an Euler chain of velocities, and for such a motion it reads high (its velocity "
              "increments carry about 2/3 of the noise variance: beta up to about 1.5x the motion's)")
    if "track_noise" in st:
        cv = (f" (cross-validated gain {float(st['track_noise_cv_gain']):+.4f} ± {float(st['track_noise_cv_se']):.4f} "
              "nats per transition)") if "track_noise_cv_gain" in st else (
            f" (in-sample gain {float(st['track_noise_train_gain']):+.4f} nats per transition: not worth a CV)"
            if "track_noise_train_gain" in st else "")
        kept = (f"nu={float(st['track_noise_nu']):.4g}, scale={float(st['track_noise_scale']):.4g}, forgetting="
                f"{float(st['track_noise_forgetting']):.4g}") if int(st["track_noise"]) else "off"
        print(f"fpirl fit: per-track noise scale: {kept}{cv}")
    refit = refit_options(est.settings_)
    if refit:
        print(f"fpirl fit: the same model with fixed choices: {refit}")
    _compare_options(args, cls, params, tracks)
    _print_uncertainty(extra)
    if adequacy is not None:
        print(f"fpirl fit: model adequacy: {adequacy.summary()}")
        if adequacy.violated_:
            import warnings

            warnings.warn(f"the drift is clearly not a gradient (non-gradient fraction {adequacy.fraction_:.2f}, "
                          f"interval from {adequacy.interval_[0]:.2f}): psi, the policy and the reward describe only "
                          "the gradient part of the motion", stacklevel=2)
    return EXIT_OK


#: options whose effect on the held-out score is measured against the defaults (tables)
_COMPARED = ("estimator", "noise_correction", "drift_axes", "mobility", "second_lag", "track_noise")


def _compare_options(args, cls, params, tracks) -> None:
    """With a non-default modelling option, fit the defaults too and print both held-out scores
    (:func:`fpirl.evaluation.plausibility.compare_with_default`); warn when the option scores lower."""
    given = [_flag(k) + ("" if getattr(args, k) is True else f" {getattr(args, k)}") for k in _COMPARED
             if getattr(args, k) not in (None, 0, "increments", "auto", "off")]
    if not given:
        return
    from ..estimators import IncrementsEstimator
    from ..evaluation.plausibility import FitWarning, compare_with_default

    default = {"estimator": IncrementsEstimator, "hermite_elements": "auto", "beta": args.beta}
    res = compare_with_default(tracks, cls, {**params, "progress": False}, default)
    if res is None:
        return
    text = (f"{', '.join(given)} scores {res['option']:.4f} against {res['default']:.4f} for the defaults "
            f"(held-out one-step log-likelihood, nats per transition, 30% of the tracks held out; difference "
            f"{res['option'] - res['default']:+.4f} ± {res['se']:.4f}; diffusion {res['diffusion']:.4f})")
    print(f"fpirl fit: {text}")
    if res["option"] < res["default"] - 1e-9 * max(1.0, abs(res["default"])):  # not round-off of the same model
        import warnings

        warnings.warn(f"{text}: the option makes the model worse on held-out tracks", FitWarning, stacklevel=2)


def _relative_ridge(est) -> str:
    rel = est.settings_.get("ridge_relative")
    return f"{est.penalty_:.3g}" if rel is None else f"{float(rel)!r} relative ({est.penalty_:.3g} absolute)"


def refit_options(settings: dict) -> str:
    """The options that refit exactly the model of a track fit without any cross-validation
    (the choices it printed, typed back): Hermite elements (0 = psi constant along the axis),
    relative ridge (full precision), drift axes, noise-correction lag, mobility degree, second lag and per-track noise scale (on or off)."""
    if "hermite_elements" not in settings or "ridge_relative" not in settings:
        return ""
    out = [f"--hermite-elements {settings['hermite_elements']}", f"--ridge {float(settings['ridge_relative'])!r}"]
    if settings.get("drift_axes"):
        out.append(f"--drift-axes {settings['drift_axes']}")
    if int(settings.get("noise_correction", 0) or 0):
        out.append(f"--noise-correction {int(settings['noise_correction'])}")
    if "mobility_degree" in settings:
        out.append(f"--mobility {int(settings['mobility_degree'])}")
    if "second_lag_rho" in settings:
        out.append(f"--second-lag {'on' if float(settings['second_lag_rho']) else 'off'}")
    if "track_noise" in settings:
        out.append(f"--track-noise {'on' if int(settings['track_noise']) else 'off'}")
    return " ".join(out)
