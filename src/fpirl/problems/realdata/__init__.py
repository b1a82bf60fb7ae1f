"""Real-data benchmark: FP-IRL on shipped cell and pedestrian tracks (``fpirl benchmark realdata``).

For every set found in the data folder (see :mod:`._data`): state = position, action = velocity,
reflecting walls, a seeded 70/30 split by whole tracks; the increments estimator exactly as
``fpirl fit ... --action velocity`` runs it (resolution and ridge chosen by cross-validation on the
training tracks, see :mod:`._model`) and the density
estimator; the held-out one-step log-likelihood of both against the diffusion and persistent-random-
walk baselines (:mod:`fpirl.evaluation.heldout`); the non-gradient fraction of the drift
(:class:`fpirl.evaluation.adequacy.HelmholtzCheck`); a result file, held-out CSV and a figure per set, and
``report.md``.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from ...core._errors import FpirlInputError
from ...estimators import IncrementsEstimator, TrackDensityEstimator
from ...evaluation.adequacy import HelmholtzCheck
from ...evaluation.baselines import fit_baselines
from ...evaluation.heldout import fpirl_loglik, heldout_loglik
from ...io.netcdf import atomic_write, result_dataset, write_result
from ...tracks.result_attrs import table_attrs
from ...mdp.support import support_extra
from ...workflows import recover_mdp_from_fit
from ._data import DATA_ENV, TRACK_SETS, TrackSet, available_sets, locate_data, read_set
from ._model import arena_maps, cv_summary, simulate_tracks, track_check
from ._report import set_figure, write_report
from ...plotting.tracks import plot_track_comparison

__all__ = ["DATA_ENV", "TRACK_SETS", "TrackSet", "locate_data", "run_realdata", "run_set"]

TRAIN_FRACTION = 0.7
SEED = 0


def _subset_csv(src: Path, spec: TrackSet, ids, out: Path) -> Path:
    df = pd.read_csv(src)
    keep = df[spec.track].astype(str).isin({str(i) for i in ids})
    atomic_write(out, lambda tmp: df[keep].to_csv(tmp, index=False))
    return out


#: Velocity-axis elements tried by the cross-validation of a quick run (default: the estimator's own list).
QUICK_ELEMENTS = (2, 3)


def run_set(spec: TrackSet, data_dir: Path, out: Path, quick: bool = False, progress=None, density: bool = True,
            cv_elements=None, max_tracks: int | None = None) -> dict:
    """Fit, evaluate and draw one set; returns its report row (``density=False`` skips the density
    estimator, ``cv_elements`` overrides the velocity-axis elements the cross-validation tries,
    ``max_tracks`` keeps the first tracks of the set only: a pipeline check)."""

    folder = out / spec.name
    folder.mkdir(parents=True, exist_ok=True)
    # held-out tracks keep every row (all are scored); the training tracks get the default robust box
    table, csv = read_set(spec, data_dir, out / "data", robust_box=False)
    if max_tracks is not None and max_tracks < table.n_tracks:
        table = table.select_tracks(np.arange(int(max_tracks)))
    train, test = table.split_tracks(TRAIN_FRACTION, SEED)
    robust, _ = read_set(spec, data_dir, out / "data")
    train = robust.select_tracks(np.flatnonzero(np.isin(robust.track_ids, train.track_ids)))
    base = fit_baselines(train, "velocity")

    if cv_elements is None and quick:
        cv_elements = QUICK_ELEMENTS
    t0 = time.perf_counter()
    est = IncrementsEstimator(drift_axes=train.action_axes, cv_elements=cv_elements).fit(train)
    fit_time = time.perf_counter() - t0
    if progress is not None:
        progress.update(1)
    chosen, cv_scores = cv_summary(est.cv_)

    t0 = time.perf_counter()
    dens, dens_fn = None, {}
    if density:
        try:
            dens = TrackDensityEstimator().fit(train)
            dens_fn = {"fpirl_density": lambda tr: fpirl_loglik(dens, tr)}
        except FpirlInputError as exc:  # reported, not fatal
            warnings.warn(f"{spec.name}: density estimator failed ({exc})", stacklevel=2)
    density_time = time.perf_counter() - t0

    # the paper's constant-beta model (no mobility, no second lag, one noise scale) at the same CV
    t0 = time.perf_counter()
    prev = IncrementsEstimator(drift_axes=train.action_axes, cv_elements=cv_elements, mobility=0,
                               second_lag=False, track_noise=False).fit(train)
    mobility_time = time.perf_counter() - t0
    dens_fn["fpirl_constant"] = lambda tr: fpirl_loglik(prev, tr)
    # the previous default: mobility and second lag by CV, one noise scale for all tracks
    t0 = time.perf_counter()
    plain = IncrementsEstimator(drift_axes=train.action_axes, cv_elements=cv_elements, track_noise=False).fit(train)
    previous_time = time.perf_counter() - t0
    dens_fn["fpirl_no_track_noise"] = lambda tr: fpirl_loglik(plain, tr)

    score = heldout_loglik(est, test, base, kind="velocity", extra=dens_fn)
    check = HelmholtzCheck(random_state=SEED).fit(train)

    mdp = recover_mdp_from_fit(est, train.dt)
    extra = {**base.to_attrs(), **check.to_attrs(), **est.result_extra(), **table_attrs(train, source=csv),
             "estimator": "increments"}
    support, policy_summary = support_extra(est.grid_, train.values, mdp, warn=False)
    extra.update(support)
    write_result(folder / "result.nc", result_dataset(est, mdp=mdp, dt=train.dt, gamma=mdp.gamma, extra=extra))
    for part, name in ((train, "train.csv"), (test, "test.csv")):
        _subset_csv(csv, spec, part.track_ids, folder / name)

    maps = arena_maps(est, mdp, est.grid_, action_support=policy_summary.action_support)
    rng = np.random.default_rng(SEED)
    show = rng.permutation(test.n_tracks)[: min(30, test.n_tracks)]
    observed, starts, lengths = [], [], []
    S = list(test.state_axes)
    for t in show:
        rows = np.flatnonzero(test.track == t)
        seg = test.segment[rows[0]]
        rows = rows[test.segment[rows] == seg]
        observed.append(test.values[rows][:, S])
        starts.append(test.values[rows[0]])
        lengths.append(rows.size)
    sim = simulate_tracks(est, np.asarray(starts), max(lengths) - 1, train.dt, train.lower, train.upper, rng)
    simulated = [sim[:n, i] for i, n in enumerate(lengths)]
    fig = set_figure(folder / "figure.png", spec.name, est.grid_, maps, observed, simulated, spec.units)

    tracks_summary, obs_stats, sim_stats = track_check(est, test, rng)
    tracks_fig = plot_track_comparison(tracks_summary, obs_stats, sim_stats, folder / "tracks.png",
                                       labels=("held-out tracks", "simulated (same starts and lengths)"),
                                       units=tuple(u.strip() for u in spec.units.split(",")))

    command = (f"fpirl fit {csv} -o result.nc --track {spec.track} --time {spec.time} --state {','.join(spec.state)} "
               "--action velocity" + (f"  (the full run; this one tried {cv_elements} velocity elements)"
                                      if cv_elements is not None else ""))
    return {
        "set": spec.name, "what": spec.what, "units": spec.units, "dt": train.dt,
        "train_tracks": train.n_tracks, "test_tracks": test.n_tracks, "transitions": score.transitions,
        **score.loglik, "fpirl_density": score.loglik.get("fpirl_density", float("nan")),
        "se_vs_prw": score.difference_se("fpirl", "persistent_random_walk"),
        "se_vs_diffusion": score.difference_se("fpirl", "diffusion"),
        "adequacy": check.fraction_, "adequacy_lo": check.interval_[0], "adequacy_hi": check.interval_[1],
        "chosen": chosen, "cv": cv_scores, "fit_time": fit_time,
        "density_time": density_time, "beta": est.beta_, "D": base.diffusion_D, "alpha": base.prw_alpha,
        "sigma": base.prw_sigma, "figure": f"{spec.name}/{fig.name}", "command": command,
        "density_beta": float(dens.beta_) if dens is not None else float("nan"),
        "constant": score.loglik["fpirl_constant"], "mobility_degree": est.settings_["mobility_degree"],
        "second_lag": est.settings_["second_lag_rho"], "mobility_cv": est.mobility_cv_ or {},
        "mobility_time": mobility_time, "previous_time": previous_time,
        "se_vs_constant": score.difference_se("fpirl", "fpirl_constant"),
        "no_track_noise": score.loglik["fpirl_no_track_noise"],
        "se_vs_no_track_noise": score.difference_se("fpirl", "fpirl_no_track_noise"),
        "track_noise": ("off" if est.track_noise_ is None else
                        f"nu {est.track_noise_.nu:.3g}, c {est.track_noise_.scale:.3g}, "
                        f"lambda {est.track_noise_.forgetting:.3g}"),
        "track_noise_cv": (est.settings_.get("track_noise_cv_gain", float("nan")),
                           est.settings_.get("track_noise_cv_se", float("nan"))),
        "previous_mobility": (plain.settings_["mobility_degree"], plain.settings_["second_lag_rho"]),
        "track_check": tracks_summary, "track_figure": f"{spec.name}/{tracks_fig.name}",
        "policy_mode": policy_summary.mode, "policy_mean": policy_summary.mean,
        "policy_outside": policy_summary.mass_outside,
    }


def run_realdata(out, data=None, sets=None, quick: bool = False, progress: bool = True, density: bool = True,
                 cv_elements=None, max_tracks: int | None = None) -> Path:
    """Run the benchmark on every available set; writes ``out/report.md`` and per-set folders.

    Parameters
    ----------
    out : path
        Output directory (created).
    data : path, optional
        The real-data folder (default: ``$FPIRL_REALDATA`` or ``../shared/realdata`` next to the
        repository). The corridor set is shipped with the package and always available; without a
        data folder it is the only one.
    sets : list of str, optional
        Names of the sets to run (default: all available).
    quick : bool
        Fewer cross-validation candidates (:data:`QUICK_ELEMENTS`).
    density : bool
        Also fit and score the density estimator.
    cv_elements : sequence of int, optional
        Velocity-axis elements tried by the cross-validation (default: the estimator's own list).
    max_tracks : int, optional
        Keep only the first ``max_tracks`` tracks of every set (a pipeline check, not a measurement).
    """
    data_dir = locate_data(data)
    specs = available_sets(data_dir, sets)
    if data_dir is None:
        print(f"fpirl benchmark realdata: no real-data folder (--data DIR or ${DATA_ENV}); running the set shipped "
              f"with fpirl ({', '.join(s.name for s in specs) or 'none of those asked for'})")
    if not specs:
        where = "the shipped sets" if data_dir is None else repr(str(data_dir))
        raise FpirlInputError(f"no known track set in {where} (expected e.g. {TRACK_SETS[0].file})")
    out = Path(out)
    (out / "data").mkdir(parents=True, exist_ok=True)
    bar = None
    if progress:
        bar = tqdm(total=len(specs), desc="realdata sets", unit="set")
    rows = []
    t0 = time.perf_counter()
    try:
        for spec in specs:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # bounds/margin notes of the readers
                rows.append(run_set(spec, data_dir, out, quick, bar, density, cv_elements, max_tracks))
    finally:
        if bar is not None:
            bar.close()
    total = time.perf_counter() - t0
    settings = {"train_fraction": TRAIN_FRACTION, "seed": SEED,
                "closing": ["", f"Total wall time: {total:.0f} s.", ""]}
    return write_report(out / "report.md", rows, settings)
