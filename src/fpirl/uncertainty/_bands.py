"""Credible bands and result variables of a :class:`fpirl.uncertainty.CoefficientPosterior`.

Public names are re-exported by :mod:`fpirl.uncertainty` (see its module doc for the equations).
"""

from __future__ import annotations

import os
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import xarray as xr
from tqdm.auto import tqdm

from ..core._errors import FpirlInputError
from ..core._threads import one_blas_thread
from ..core._tensor import apply_along_axes
from ..mdp.recovery import DEFAULT_GAMMA, recover_mdp
from ._beta_point import corrected_beta_fit
from ._discretisation import psi_corrected_fit
from ._time_step import keep_time_step, simpson_point
from .estimate import BAND_QUANTILES, DEFAULT_SAMPLES, estimate_uncertainty

#: Threads for the band draws' MDP recoveries (grids of at least :data:`BAND_THREAD_MIN_NODES` nodes).
BAND_THREADS = min(2, os.cpu_count() or 1)
BAND_THREAD_MIN_NODES = 4096


def credible_bands(post, grid, dt: float, gamma: float | None = None, n_samples: int | None = None, rng=0,
                   quantiles=None, progress: bool = False, reward_convention: str = "soft") -> dict:
    """Pointwise 5%/95% bands of the policy and reward from posterior draws of ``[theta; 1/beta]``.

    Every draw is pushed through the MDP recovery (eqs. boltzmann_policy, gaussian_transition,
    inverse_bellman; :func:`fpirl.mdp.recover_mdp`) with its own beta, its transition rows
    interpolated in a table of exact rows (``recover_mdp(..., tabulated=True)``: within 1e-8 of the
    exact kernel's rows). Returns nodal arrays ``policy_lower``, ``policy_upper``, ``reward_lower``,
    ``reward_upper`` (empty dict when the grid lacks state or action axes).
    """
    quantiles = BAND_QUANTILES if quantiles is None else quantiles
    n_samples = DEFAULT_SAMPLES if n_samples is None else n_samples

    if not (grid.state_axes and grid.action_axes):
        return {}
    draws = post.sample(int(n_samples), rng)
    h = post.hermite
    n = h.n_coef
    policy = np.empty((len(draws),) + grid.shape)
    reward = np.empty_like(policy)
    disc = DEFAULT_GAMMA if gamma is None else gamma
    keep = np.ones(len(draws), dtype=bool)

    # the collocation matrices of psi and its first derivatives, built once for all draws
    values = [ax.matrix(c, 0) for ax, c in zip(h.axes, grid.coords)]
    slopes = [ax.matrix(c, 1) for ax, c in zip(h.axes, grid.coords)]
    # axes every draw is constant along, those the mean, every column of the factor (and every stored sample) are,
    # e.g. a track fit's psi of the velocities alone: the draws' derivative there is exactly 0, and the transition's
    # rows there are one per node (fpirl.mdp.transition). Not read from the drawn sums, which may round differently
    # (any object with ``hermite`` and ``sample`` serves: without a mean and factor, the draws themselves are read)
    mean, factor, samples = (getattr(post, k, None) for k in ("mean", "factor", "samples"))
    parts = ([np.asarray(draws)[:, :n]] if mean is None or factor is None else
             [np.asarray(mean, float).reshape(1, n), np.asarray(factor)[:n].T]
             + ([] if samples is None else [np.asarray(samples)[:, :n]]))
    constant = h.constant_along(np.vstack(parts), batch=1)

    def one(s):
        g = draws[s][n]
        if not g > 0:  # a draw of 1/beta that is not positive has no MDP
            keep[s] = False
            return
        coef = draws[s][:n].reshape(h.shape)
        psi = apply_along_axes(coef, values)
        grad = np.stack([np.zeros(grid.shape) if constant[a] else
                         apply_along_axes(coef, [slopes[b] if b == a else m for b, m in enumerate(values)])
                         for a in grid.state_axes])
        mdp = recover_mdp(grid, psi, grad, 1.0 / g, dt, disc, reward=reward_convention, tabulated=True)
        policy[s], reward[s] = mdp.policy, mdp.reward

    # the draws are independent and the transition kernels are numpy ufunc loops that release the GIL:
    # two threads (results identical to the serial loop, each draw writes its own slice); their BLAS calls
    # (thin products) on one thread each: measured 2.8x less CPU and 2-3x less wall time at 15^4 nodes
    threads = min(BAND_THREADS, len(draws)) if grid.size >= BAND_THREAD_MIN_NODES else 1
    with tqdm(total=len(draws), desc="credible bands", disable=not progress, leave=False) as bar, one_blas_thread():
        if threads <= 1:
            for s in range(len(draws)):
                one(s)
                bar.update()
        else:
            with ThreadPoolExecutor(threads) as pool:
                for _ in pool.map(one, range(len(draws))):
                    bar.update()
    if np.count_nonzero(keep) < 2:
        raise FpirlInputError("fewer than two posterior draws have a positive 1/beta: no bands")
    out = {}
    for name, arr in (("policy", policy[keep]), ("reward", reward[keep])):
        out[f"{name}_lower"], out[f"{name}_upper"] = np.quantile(arr, quantiles, axis=0)
    return out


def uncertainty_extra(est, post, dt: float, gamma: float | None = None, n_samples: int | None = None, rng=0,
                      progress: bool = False, reward_convention: str = "soft") -> dict:
    """Variables and attrs for :func:`fpirl.io.result_dataset` (its ``extra``) from a posterior.

    ``potential_std`` (nodal posterior std of the zero-mean psi), ``policy_lower``/``policy_upper``
    and ``reward_lower``/``reward_upper`` (5%/95%, when the MDP is recovered), and the attrs
    ``uncertainty`` (method), ``uncertainty_noise`` (snapshot-noise shape, density fits with their
    data), ``uncertainty_resolution`` (1 when the discretisation-error column is included), ``uncertainty_basis``
    (1 when the Hermite basis-error column is included), ``uncertainty_samples``, ``uncertainty_replicates``
    (parametric bootstrap) and, with beta estimated, ``beta_lower`` and
    ``beta_upper`` (5%/95%), ``uncertainty_time_step`` (1 when the time-step column is included), ``beta_simpson``
    (beta refitted with Simpson's rows), ``time_step_z`` (that step in noise standard deviations of ``1/beta``; with
    beta given, psi's step in noise standard deviations of psi on the nodes, where it was measured), ``beta_corrected`` (beta corrected for the Hermite basis error) and ``beta_correction_z`` (that correction in
    noise standard deviations of ``1/beta``) and ``beta_discretisation_simulated = 0`` where beta's discretisation bias
    was to be simulated but the simulation is over the size limit. ``post=None`` gives ``{'uncertainty': 'none'}``.
    """
    n_samples = DEFAULT_SAMPLES if n_samples is None else n_samples
    if post is None:
        return {"uncertainty": "none"}
    grid = est.grid_
    dims = grid.names
    out = {"uncertainty": post.method}
    if post.noise_model != "rows":  # density fits with their snapshots: the snapshot-noise model's shape
        out["uncertainty_noise"] = post.noise_model
        out["uncertainty_resolution"] = int(post.resolution is not None)
        out["uncertainty_basis"] = int(post.basis is not None)
    elif post.replicates is not None:  # the parametric bootstrap
        out["uncertainty_basis"] = int(post.basis is not None)
    with one_blas_thread():  # thin sum-factorisation products: 2.4x faster on one BLAS thread at 15^4 nodes
        std = post.potential_std(grid.coords)
    out["potential_std"] = xr.DataArray(std, dims=dims, attrs={
        "long_name": "posterior std of the zero-mean potential psi", "method": post.method})
    bands = credible_bands(post, grid, dt, gamma, n_samples, rng, progress=progress,
                           reward_convention=reward_convention)
    for key, value in bands.items():
        what, side = key.split("_")
        q = BAND_QUANTILES[0] if side == "lower" else BAND_QUANTILES[1]
        out[key] = xr.DataArray(value, dims=dims, attrs={"long_name": f"{q:.0%} pointwise credible bound of the {what}",
                                                         "method": post.method})
    if bands:
        out["uncertainty_samples"] = int(len(post.samples) if post.samples is not None else n_samples)
    if post.replicates is not None:
        out["uncertainty_replicates"] = int(post.replicates)
    if post.beta_estimated:
        out["beta_lower"], out["beta_upper"] = post.beta_interval()
        if post.beta_coarse is not None:
            out["beta_coarse"] = post.beta_coarse
        if post.beta_pilot is not None:
            out["beta_pilot"] = post.beta_pilot
        if post.beta_corrected is not None:
            out["beta_corrected"] = post.beta_corrected
        if post.beta_correction_z is not None:
            out["beta_correction_z"] = post.beta_correction_z
        out["uncertainty_time_step"] = int(post.time_step is not None)
        if post.beta_simpson is not None:
            out["beta_simpson"] = post.beta_simpson
        if post.discretisation_unsimulated:
            out["beta_discretisation_simulated"] = 0
    if post.time_step_z is not None:  # of 1/beta, or of psi with beta given
        out["time_step_z"] = post.time_step_z
    return out


#: ``fpirl fit`` warns when the point policy or reward lies outside its band at more than this share of the nodes
#: with data (:func:`points_outside_bands`).
BAND_MISS_WARNING = 0.2


def points_outside_bands(mdp, extra: dict) -> dict:
    """Attrs ``policy_outside_band`` and ``reward_outside_band``: the share of the nodes (those in ``data_support``
    where ``extra`` has it) at which the point estimate of the recovered MDP lies outside its 5%/95% band
    (``extra`` from :func:`uncertainty_extra`), with a warning above :data:`BAND_MISS_WARNING`.

    The bands are quantiles of the MDP recovered from each posterior draw; the point estimate is the MDP of the
    posterior's centre. The recovery is nonlinear (softmax policy, the soft value's log-sum-exp), so where the
    posterior is wide (e.g. an underdetermined fit: more Hermite coefficients than nodes) the draws' rewards move
    away from the centre's, and the plug-in estimate can lie outside its own band (measured: a density-estimator fit
    of pedestrian tracks, the reward outside its band at 57% of the nodes with data)."""
    out = {}
    if mdp is None:
        return out
    support = extra.get("data_support")
    mask = None if support is None else np.asarray(getattr(support, "values", support)) > 0
    for what in ("policy", "reward"):
        lower, upper, point = extra.get(f"{what}_lower"), extra.get(f"{what}_upper"), getattr(mdp, what, None)
        if lower is None or upper is None or point is None:
            continue
        lo, hi, p = (np.asarray(getattr(v, "values", v), dtype=float) for v in (lower, upper, point))
        if p.shape != lo.shape:
            continue
        tol = 1e-9 * max(float(np.max(np.abs(np.nan_to_num(p)))), 1.0)
        outside = (p < lo - tol) | (p > hi + tol)
        sel = np.ones(p.shape, bool) if mask is None or mask.shape != p.shape or not mask.any() else mask
        share = float(np.mean(outside[sel]))
        out[f"{what}_outside_band"] = share
        if share > BAND_MISS_WARNING:
            where = "nodes with data" if sel is mask else "nodes"
            std, beta = extra.get("potential_std"), getattr(mdp, "beta", None)
            scale = "" if std is None or beta is None else (
                f" (beta x psi's posterior std: {float(beta) * float(np.median(np.asarray(std)[sel])):.3g} at the median "
                f"{'node with data' if sel is mask else 'node'})")
            warnings.warn(f"the {what}'s point estimate lies outside its 90% band at {share:.0%} of the {where}: the "
                          f"posterior is wide on the scale 1/beta of the MDP's exponentials{scale}, so the recovery's "
                          "nonlinearity (softmax policy, log-sum-exp value) moves the draws away from the point "
                          f"estimate; read the band ({what}_lower, {what}_upper) rather than the point", stacklevel=2)
    return out


def fit_uncertainty(est, method: str, data, dt: float, gamma: float | None = None, *, n_samples: int | None = None,
                    scheduler=None, n_jobs: int | None = None, rng=0, progress: bool = False,
                    reward_convention: str = "soft") -> dict:
    """What ``fpirl fit --uncertainty METHOD`` adds to the result of a track fit (:func:`estimate_uncertainty`
    then :func:`uncertainty_extra`); ``{'uncertainty': 'none'}`` when there is none. (For density data the
    command first calls :func:`uncertainty_and_point`, which may correct beta's point estimate.)"""

    post = estimate_uncertainty(est, method, data, n_replicates=n_samples, rng=rng, scheduler=scheduler,
                                n_jobs=n_jobs, progress=progress)
    parametric = post is not None and post.method == "parametric"  # n_samples were its replicates, not band draws
    return uncertainty_extra(est, post, dt, gamma, None if parametric else n_samples, rng, progress, reward_convention)


def uncertainty_and_point(est, method: str, data, *, progress: bool = False, switch_time_scheme: bool = True,
                          discretisation: bool = True):
    """``(post, fit)``: :func:`estimate_uncertainty` (``method`` as there); where the time step's error (of beta; of
    psi with beta given) stands out of the noise, the fit with Simpson's rows and its posterior instead
    (:func:`fpirl.uncertainty._time_step.simpson_point`; not with ``switch_time_scheme=False``, which ``fpirl fit``
    passes when ``--time-scheme`` was given); then, with beta estimated, the fit with beta's point estimate
    corrected for the Hermite basis error where that correction stands out of the noise, else (``discretisation``)
    for the time step and grid by a simulation at the fitted model
    (:func:`fpirl.uncertainty._beta_point.corrected_beta_fit`), and with beta given (``discretisation``) the fit with
    psi's simulated discretisation bias removed (:func:`fpirl.uncertainty._discretisation.psi_corrected_fit`);
    ``post`` is moved to the fit returned, else ``est``.
    ``fpirl fit`` recovers the MDP and writes the result from ``fit``; a refit keeps how the Hermite elements
    were chosen (``hermite_cv_`` and the ``settings_`` keys ``hermite_selection``, ``hermite_cv_*``)."""
    chosen = {k: v for k, v in getattr(est, "settings_", {}).items() if k.startswith(("hermite_selection", "hermite_cv"))}
    cv = getattr(est, "hermite_cv_", None)
    post = estimate_uncertainty(est, method, data, progress=progress)
    simpson = simpson_point(est, post) if switch_time_scheme else None
    if post is not None:
        post.simpson_fit = None  # its moments and normal matrix are not kept through the bands
    if simpson is not None:  # the time step stands out of the noise: the Simpson refit and its own posterior
        first, est = post, simpson
        post = estimate_uncertainty(est, method, data, progress=progress)
        keep_time_step(post, first)
    better = corrected_beta_fit(est, post, data, discretisation=discretisation, progress=progress)
    if better is None and discretisation:  # beta given: psi's simulated discretisation bias
        better = psi_corrected_fit(est, post, data, progress=progress)
    fit = est if better is None else better
    if chosen and hasattr(fit, "settings_"):
        fit.settings_ = {**fit.settings_, **chosen}
        fit.hermite_cv_ = cv
    return post, fit
