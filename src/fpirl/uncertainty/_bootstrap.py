"""Bootstrap over whole tracks: refit a track estimator on tables resampled track by track.

Tracks (never single transitions: consecutive increments of one track share its path) are drawn
with replacement; a track drawn twice enters twice as two tracks. Every replicate refits the
estimator at the resolution, ridge and mobility degree of the original fit (the CV choices are not
repeated; psi stays constant along the axes the fit left out), and
the replicates' ``[theta; 1/beta]`` form the sample that :mod:`fpirl.uncertainty` turns into
``potential_std``, percentile bands and beta's interval. Replicates are independent pure tasks
(:func:`fpirl.distributed.run_tasks`: Dask, a process pool, or serial).
"""

from __future__ import annotations

import numpy as np

from ..core._errors import FpirlInputError
from ..distributed import run_tasks
from ..tracks.table import TrackTable
from ._posterior import samples_posterior
import warnings

#: Bootstrap replicates by default.
DEFAULT_REPLICATES = 100


def resample_tracks(tracks: TrackTable, chosen) -> TrackTable:
    """The table of the tracks ``chosen`` (indices, repeats allowed), each copy a track of its own."""
    chosen = np.asarray(chosen, dtype=np.int64)
    order = np.argsort(tracks.track, kind="stable")  # rows of each track stay in segment/time order
    counts = np.bincount(tracks.track, minlength=tracks.n_tracks)
    starts = np.concatenate([[0], np.cumsum(counts)])
    lengths = counts[chosen]
    copy = np.repeat(np.arange(chosen.size), lengths)
    offset = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    rows = order[starts[chosen][copy] + offset]
    seg = tracks.segment[rows]
    new_seg = np.concatenate([[0], np.cumsum((np.diff(copy) != 0) | (np.diff(seg) != 0))]) if rows.size else rows
    return TrackTable(tracks.values[rows], new_seg, copy, tracks.time[rows], tracks.dt, tracks.names, tracks.roles,
                      tracks.lower, tracks.upper, tracks.boundary, None, tracks.source)


def refit_params(est) -> dict:
    """Constructor arguments reproducing ``est`` at its fitted resolution and ridge, without progress."""
    params = est.get_params(deep=False)
    kept = tuple(getattr(est, "fit_axes_", range(est.hermite_.ndim)))
    chosen = est.settings_.get("hermite_elements")
    if len(kept) < est.hermite_.ndim:  # psi constant along the other axes: 0 elements there, as chosen
        params["hermite_elements"] = tuple(int(e) for e in str(chosen).split(","))
    else:
        params["hermite_elements"] = tuple(int(e) for e in est.hermite_.elements)
    if "mobility" in params:  # the mobility degree of the fit (its CV is not repeated either)
        params["mobility"] = int(est.settings_.get("mobility_degree", 0))
    if "fe_elements" in params:
        params["fe_elements"] = tuple(int(e) for e in est.grid_.elements)
    ridge = est.settings_.get("ridge_relative")
    if "ridge" in params and ridge is not None:
        params["ridge"] = float(ridge)
    if "progress" in params:
        params["progress"] = False
    if "scheduler" in params:
        params["scheduler"] = None  # the replicates are the parallel tasks
    return params


def _replicate(chosen, tracks, cls, params):

    with warnings.catch_warnings():  # the plausibility notes were given for the original fit
        warnings.simplefilter("ignore")
        est = cls(**params).fit(resample_tracks(tracks, chosen))
    return np.concatenate([np.asarray(est.coef_, dtype=float).ravel(), [1.0 / est.beta_]])


def bootstrap_tracks(est, tracks: TrackTable, n_replicates: int = DEFAULT_REPLICATES, rng=0, *, scheduler=None,
                     n_jobs: int | None = None, progress: bool = False):
    """Bootstrap distribution of a fitted track estimator (module doc) as a
    :class:`~fpirl.uncertainty.CoefficientPosterior` with ``method='bootstrap'``."""

    if int(n_replicates) != n_replicates or n_replicates < 2:
        raise FpirlInputError(f"the bootstrap needs at least 2 replicates, got {n_replicates!r}")
    if tracks.n_tracks < 2:
        raise FpirlInputError("the bootstrap over tracks needs at least 2 tracks")
    gen = np.random.default_rng(rng)
    draws = [gen.integers(0, tracks.n_tracks, tracks.n_tracks) for _ in range(int(n_replicates))]
    samples = run_bootstrap(draws, tracks, type(est), refit_params(est), scheduler, n_jobs, progress)
    return samples_posterior(est, np.asarray(samples), method="bootstrap")


def run_bootstrap(draws, tracks, cls, params, scheduler, n_jobs, progress):
    return run_tasks(_replicate, draws, scheduler=scheduler, n_jobs=n_jobs, progress=progress, desc="bootstrap",
                     shared=(tracks, cls, params))
