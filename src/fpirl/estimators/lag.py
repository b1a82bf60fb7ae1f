r"""Second lag: residuals of the one-step model correlated with the previous step's (AR(1) innovations).

Smoothed or quantised positions (tracking software that interpolates, pixel grids, velocities
differenced from noisy positions) make consecutive increments of the drift axes correlated beyond
what the drift explains. The second-lag option keeps the fitted psi, beta and mobility ``g`` and models
the standardised residual ``z_k = r_k / sqrt(g(x_k))``, ``r_k = x_{k+1,D} - x_{k,D} - m(x_k) dt`` with
the model's drift ``m`` (:mod:`fpirl.estimators.mobility`; ``m = -grad_D psi`` when ``g = 1``), as an AR(1):

.. math::
    z_k = \rho\, z_{k-1} + \sqrt{1 - \rho^2}\;\sigma\,\epsilon_k,\qquad \sigma^2 = 2\Delta t/\beta ,

so the marginal noise is the fitted one and the one-step predictive, given the previous step, is

.. math::
    x_{k+1,D} \sim \mathcal N\big(x_{k,D} + m(x_k)\Delta t + \rho\sqrt{g(x_k)/g(x_{k-1})}\;r_{k-1},\
    (1 - \rho^2)\,2 g(x_k)\Delta t/\beta\ I\big)

(for the first transition of a segment, without a previous step, ``rho`` drops out). ``rho`` is the
least-squares slope of ``z_k`` on ``z_{k-1}`` over consecutive transitions of the training tracks
(pooled over the drift axes; a strided sample of at most 2^15 pairs), clipped to ``[-0.95, 0.95]``; runs that start within four step lengths of a mirrored
reflecting wall are left out (the fold makes such steps anti-correlated). With ``second_lag='auto'`` it is kept only
when its held-out gain over ``rho = 0`` in a K-fold cross-validation over whole tracks exceeds two
paired standard errors over tracks and 0.01 nats per transition (as the mobility's degree). The drift (and so psi, the policy and the reward) is the fitted
one; ``rho`` describes the observation process, not the agent.
"""

from __future__ import annotations

import numpy as np

from ..core._errors import FpirlInputError
from ._keep_rule import beats, track_se

#: |rho| never exceeds this
RHO_BOUND = 0.95
#: consecutive pairs used (a strided sample above this)
PAIR_SAMPLE = 1 << 15


def model_mean(est, x: np.ndarray, axes) -> np.ndarray:
    """Drift ``m(x)`` of a fitted estimator on ``axes`` (with its mobility), ``grad psi`` clipped to the box."""
    x = np.asarray(x, dtype=float)
    grid = est.grid_
    xc = x if grid.periodic else np.clip(x, grid.lower, grid.upper)
    grad = np.asarray(est.gradient(xc), dtype=float)[:, list(axes)]
    mob = getattr(est, "mobility_", None)
    if mob is None:
        return -grad, np.ones(x.shape[0])
    g = mob.g(x)
    glg = np.zeros((x.shape[0], grid.ndim))
    glg[:, list(mob.axes)] = mob.grad_log_g(x)
    return g[:, None] * (-grad + glg[:, list(axes)] / est.beta_), g


def residual_pairs(est, tracks, axes):
    """Standardised residuals ``(z_{k-1}, z_k)`` of consecutive transitions and their track."""
    seg, vals, dt = tracks.segment, tracks.values, tracks.dt
    i = np.arange(max(tracks.n_obs - 2, 0))
    i = i[seg[i] == seg[i + 2]]
    mirrored = [tracks.names.index(n) for n in str(est.settings_.get("walls_mirrored", "")).split(",") if n]
    if mirrored and not tracks.periodic:  # steps folded at a wall are anti-correlated by the fold, not the agent
        m = 4.0 * np.sqrt(2.0 * dt / est.beta_)
        lo, hi = tracks.lower[mirrored] + m, tracks.upper[mirrored] - m
        inside = np.all((vals[:, mirrored] > lo) & (vals[:, mirrored] < hi), axis=1)
        i = i[inside[i]]  # selected on the first point only: selecting on later points would bias rho
    i = i[:: max(1, i.size // PAIR_SAMPLE)]  # rho is one number: a strided sample of the pairs
    if i.size == 0:
        empty = np.zeros((0, len(axes)))
        return empty, empty, tracks.track[i]
    z = []
    for j in (i, i + 1):
        dx = vals[j + 1][:, list(axes)] - vals[j][:, list(axes)]
        if tracks.periodic:
            length = (tracks.upper - tracks.lower)[list(axes)]
            dx -= length * np.round(dx / length)
        m, g = model_mean(est, vals[j], axes)
        z.append((dx - m * dt) / np.sqrt(g)[:, None])
    return z[0], z[1], tracks.track[i]


def _rho(z0, z1):
    den = float(np.sum(z0 * z0))
    return 0.0 if den <= 0 else float(np.clip(np.sum(z0 * z1) / den, -RHO_BOUND, RHO_BOUND))


def _pair_loglik(z0, z1, rho, var):
    s2 = (1.0 - rho * rho) * var
    return np.sum(-0.5 * (z1 - rho * z0) ** 2 / s2 - 0.5 * np.log(2 * np.pi * s2), axis=1)


def fit_second_lag(est, tracks, axes, spec, folds: int = 5, random_state=0):
    """``rho`` (or None) for ``spec`` True or 'auto' (module doc); returns ``(rho, cv)`` with ``cv`` =
    ``{'rho_0': mean, 'rho': mean, 'se': paired SE}`` of the held-out pair log-likelihoods ('auto')."""
    if spec is False or spec is None:
        return None, None
    if spec not in (True, "auto"):
        raise FpirlInputError(f"second_lag must be True, False or 'auto', got {spec!r}")
    z0, z1, track = residual_pairs(est, tracks, axes)
    if z0.shape[0] < 10:
        if spec is True:
            raise FpirlInputError("the second lag needs runs of three consecutive transitions; the tracks have "
                                  f"{z0.shape[0]}")
        return None, None
    var = 2.0 * tracks.dt / est.beta_
    if spec is True:
        return _rho(z0, z1), None
    ids = np.unique(track)
    if ids.size < 2:
        return None, None
    k = min(int(folds), ids.size)
    fold_of = np.random.default_rng(random_state).permutation(ids.size) % k
    fold = fold_of[np.searchsorted(ids, track)]
    gain = np.empty(z0.shape[0])
    for f in range(k):
        held = fold == f
        rho = _rho(z0[~held], z1[~held])
        gain[held] = _pair_loglik(z0[held], z1[held], rho, var) - _pair_loglik(z0[held], z1[held], 0.0, var)
    se = track_se(gain, track)
    cv = {"gain": float(np.mean(gain)), "se": se}
    return (_rho(z0, z1) if beats(cv["gain"], se) else None), cv
