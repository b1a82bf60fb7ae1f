r"""Increments estimator: regress track increments on the gradient of the Hermite basis.

Sampled at the table's interval ``dt``, eq. ``SDE`` with Euler-Maruyama reads

.. math::
    x_{k+1} - x_k = -\nabla\psi(x_k)\,\Delta t + \sqrt{2\Delta t/\beta}\;\xi_k,\qquad \xi_k \sim N(0, I),

so with a constant beta the maximum-likelihood ``psi = sum_i theta_i phi_i`` is the least-squares
fit of ``v_k = (x_{k+1} - x_k) / dt`` by ``-grad psi(x_k)`` on the drift axes (see
:mod:`fpirl.weakform.increment_system`), with the same zero-mean constraint and Tikhonov penalty
``lambda int |grad psi|^2`` as :class:`fpirl.estimators.identify.PotentialEstimator`. beta follows from the
residual variance, ``2 dt / beta = RSS dt^2 / n_rows``.

Localisation noise (``noise_correction=True``): with observations ``y_k = x_k + eta_k``,
``eta_k ~ N(0, s^2)`` independent, the raw increment ``y_{k+1} - y_k`` contains ``-eta_k``, which
is correlated with the regressor ``y_k``: the drift is biased by ``-s^2 grad log p / dt``, which
grows as ``dt`` shrinks. The corrected estimator evaluates the basis at the *previous*
observation ``y_{k-1}`` (independent of ``eta_k`` and ``eta_{k+1}``; the drift moves by
``O(dt)`` in one step), and estimates the diffusion by the covariance-based estimator of
Vestergaard, Blainey and Flyvbjerg (2014) on the drift residuals ``r_k``:

.. math::
    \frac{2\Delta t}{\beta} = \langle r_k^2\rangle + 2\langle r_k r_{k+1}\rangle,
    \qquad s^2 = -\langle r_k r_{k+1}\rangle,

since ``<r_k^2> = 2 dt / beta + 2 s^2`` and ``<r_k r_{k+1}> = -s^2`` (plus ``O(dt^2)``). The
regressor noise still smooths grad psi by a Gaussian of width ``s`` (an ``O(s^2)`` bias, no longer
``O(s^2 / dt)``). An integer ``noise_correction = L`` uses the regressor ``L`` observations back and
``2 dt / beta = <r_k^2> + 2 sum_{j=1..L} <r_k r_{k+j}>``: ``L = 2`` is needed for actions
differenced from noisy positions (``v_k = (s_k - s_{k-1}) / dt``: an increment of ``v`` carries the
noise of three positions, so its noise is correlated over two lags).

Reflecting walls: a step that would cross a wall is folded back, so increments that start within
a few step lengths ``sigma = sqrt(2 dt / beta)`` of a wall are biased away from it (a spurious
repulsion of order ``sigma / dt``, far larger than the drift) and their drift is attenuated.
``walls='mirror'`` models the fold of a Gaussian step at the nearer wall (the
Euler-Maruyama sampler folds each axis independently): the increment on axis ``a`` has mean
``b(delta) - f(delta) d_a psi dt`` to first order in ``dt`` (:func:`mirror_wall_terms`), so
``b`` is subtracted from the increment and the row of the regression is scaled by ``f``; the
fit stays linear and keeps the data near the walls. ``sigma`` comes from the given beta or from
the rms increment of the transitions further than ``4 sigma`` from every wall. ``walls='drop'``
leaves out transitions starting within ``wall_margin`` rms increments of a wall (psi there is the
cubic continuation of the fit, which is noisier); ``'none'`` uses every increment as it is, which
is right for a box that is only the range of the data, without physical walls. The default
``walls='auto'`` mirrors the axes whose ``sigma`` is at most 10% of the axis and leaves the others
as they are. On periodic boxes nothing changes.
"""

from __future__ import annotations

import warnings

import numpy as np
import xarray as xr

from ..core._errors import FpirlInputError
from .._version import __version__ as _version
from ..tracks.steps import infer_action_kind
from ..tracks.table import TrackTable
from ..weakform.increment_system import assemble_increments
from ._base import (TrackEstimatorMixin, check_beta, check_elements, check_ridge, check_tracks, resolve_drift_axes,
                    default_result_elements, embed_constant_axes)
from ._increment_data import _regression_data, increment_variance, mirror_wall_terms  # noqa: F401 (public here)
from ._plausibility import warn_implausible
from .lag import fit_second_lag
from ._time_step_beta import time_step_factor
from .track_noise import SCALE_BOUNDS, check_track_noise, fit_track_noise, select_track_noise
from .mobility import check_mobility, fit_increments_mobility
from .selection import (CV_RIDGES, CV_RULES, candidate_elements, candidate_label, candidate_space, cross_validate,
                        solve_increments, track_folds)
from ..distributed import accumulate_increments

#: Relative ridge with a fixed resolution and ``ridge=None``.
DEFAULT_RIDGE = 1e-4
#: Ways to handle reflecting walls.
WALL_TREATMENTS = ("auto", "mirror", "drop", "none")
#: ``walls='auto'`` mirrors an axis only if its step ``sigma`` is at most this fraction of the axis.
WALL_AUTO_MAX = 0.1
#: With ``walls='drop'``: distance from a wall, in rms increments per axis, inside which transitions are dropped.
WALL_MARGIN = 2.0
#: The dropped strip never exceeds this fraction of an axis.
WALL_MARGIN_CAP = 0.1
#: Largest number of Hermite coefficients tried by the automatic resolution.
MAX_AUTO_COEF = 1600


def _distributed_increments(space, points, velocity, drift, weights, scheduler):
    return accumulate_increments(space, points, velocity, drift, weights, scheduler=scheduler)


class IncrementsEstimator(TrackEstimatorMixin):
    """Fit psi (and beta) to tracks by least squares on their increments (eq. ``SDE``).

    Parameters
    ----------
    hermite_elements : 'auto', int or tuple of int
        Cubic Hermite elements per axis; ``'auto'`` (default) chooses them, and the ridge when
        ``ridge`` is None, by K-fold cross-validation over whole tracks
        (:mod:`fpirl.estimators.selection`).
    beta : float, optional
        Fixed inverse temperature; None estimates it from the residual variance.
    ridge : float, optional
        Relative Tikhonov weight on ``int |grad psi|^2`` (``lambda = ridge tr(A) / tr(P)``); None:
        chosen by CV with ``'auto'``, else :data:`DEFAULT_RIDGE`.
    drift_axes : sequence of int or str, 'all', 'actions' or None
        Axes (indices or names) whose increments enter the regression. None (default): the action
        axes when the actions are velocities (read with ``action='velocity'``, or equal to the
        backward differences of the states), else all: for position/velocity data the position
        increments are kinematic. psi is then determined along the other axes only by the penalty
        (or constant along them, 0 elements). The CLI uses the same rule.
    noise_correction : bool or int
        Correct drift and beta for localisation noise (module doc): the lag ``L`` of the regressor
        (``True`` = 1, for observed coordinates; 2 for actions differenced from noisy positions,
        whose increments share the noise of three positions). Needs runs of ``L + 2`` observations.
    walls : {'auto', 'mirror', 'drop', 'none'}
        Treatment of reflecting walls (module doc): model the fold on every drift axis
        (``'mirror'``), or only on the axes whose step ``sigma`` is at most 10% of the axis
        (``'auto'``, default: a thin boundary layer, where the flat-wall model holds; axes with
        large steps, e.g. velocities derived from noisy positions, are left alone); drop the
        transitions within ``wall_margin`` rms increments (at most 10% of the axis) of a wall; or
        nothing (``'none'``: a box without physical walls, e.g. the range of the data).
    wall_margin : float
        Strip width for ``walls='drop'``.
    cv_folds : int
        Folds (of whole tracks) for ``'auto'``.
    cv_elements : sequence of int, optional
        Candidate elements per axis for ``'auto'`` (default by dimension, capped by the data).
    cv_rule : {'min', '1se'}
        The best mean held-out score (default) or the paired one-standard-error rule (coarser;
        it lost accuracy on the benchmark of docs/benchmarks.md).
    fe_elements : int or tuple, optional
        Elements of the FE grid the result is written on (default
        :func:`~fpirl.estimators._base.default_result_elements`).
    random_state : int
        Seed of the fold assignment.
    scheduler : None, 'local', 'tcp://HOST:PORT' or dask.distributed.Client
        With a fixed resolution: assemble the normal equations as a map-reduce over chunks of
        transitions on Dask (:func:`fpirl.distributed.accumulate_increments`).
    progress : bool
    mobility : 'auto', int or None
        State-dependent mobility ``g`` on the drift axes (:mod:`fpirl.estimators.mobility`): noise and
        relaxation that depend on the drift coordinates (speed and heading for velocity actions),
        with ``exp(-beta psi)`` still stationary. An int is the total degree of the polynomial
        ``log g`` (0 or None: the paper's constant-beta model); ``'auto'`` (default) chooses the degree
        among 0, 1, 2 by cross-validation over whole tracks and keeps a degree above 0 only when it
        beats 0 by two paired standard errors and 0.01 nats per transition. Not combined with ``noise_correction`` (then 0).
    second_lag : 'auto', bool
        Residuals correlated with the previous step's, an AR(1) coefficient ``rho``
        (:mod:`fpirl.estimators.lag`: smoothed or quantised positions); psi, beta and the mobility are
        unchanged, only the one-step predictive of ``evaluate`` uses ``rho``. ``'auto'`` (default) keeps it
        when it wins a cross-validation over tracks by two paired standard errors and 0.01 nats per transition.
    track_noise : 'auto', bool or 'on'/'off'
        A noise scale of its own for every track (heterogeneous populations;
        :mod:`fpirl.estimators.track_noise`): a Gamma-distributed precision per track, integrated out, so
        the one-step predictive of ``evaluate`` is a Student t given the track's earlier residuals; psi,
        beta, the mobility and the second lag are unchanged. ``'auto'`` (default) keeps it when it wins a
        cross-validation over tracks by two paired standard errors and 0.01 nats per transition.

    Attributes
    ----------
    coef_, beta_, hermite_, grid_, penalty_, residual_, settings_, dt_
        As :class:`fpirl.estimators.identify.PotentialEstimator`; ``residual_`` is ``sqrt(RSS / sum v^2)``.
    localization_noise_ : float or None
        With ``noise_correction`` and beta estimated: ``sqrt`` of half the excess of the raw
        increment variance over the corrected one (for observed coordinates, lag 1: the std ``s`` of
        the position noise, drift-axis units).
    cv_ : dict or None
        The CV curve (:func:`~fpirl.estimators.selection.cross_validate`) with ``'auto'``.
    n_transitions_ : int
    mobility_ : Mobility or None
        The fitted mobility (None: constant, the paper's model).
    second_lag_ : float or None
        ``rho`` of the second lag (None: not used).
    track_noise_ : TrackNoise or None
        ``nu``, scale and forgetting factor of the per-track noise scale (None: not used).
    mobility_cv_ : dict or None
        ``{degree: mean held-out log-likelihood}`` of the mobility CV (``mobility='auto'``).
    beta_continuous_ : float or None
        Where beta was estimated and the tracks may be a diffusion observed every ``dt`` (no velocity actions,
        mobility, second lag or noise correction): the beta of the continuous diffusion, ``beta_`` corrected by
        the local linearisation of the one-step variance (:mod:`fpirl.estimators._time_step_beta`; result attr
        ``beta_continuous``, and its difference is a column of beta's interval); else None. ``beta_`` itself is
        the one-step (Euler, the paper's Gaussian transition) value.
    system_ : IncrementSystem
        Normal equations of the final fit (``A``, ``b``, ``c``, counts), e.g. for the posterior of
        :mod:`fpirl.uncertainty`.
    """

    name = "increments"

    def __init__(self, *, hermite_elements="auto", beta=None, ridge=None, drift_axes=None, noise_correction=False,
                 walls="auto", wall_margin=WALL_MARGIN, cv_folds=5, cv_elements=None, cv_rule="min", fe_elements=None,
                 random_state=0, progress=False, scheduler=None, mobility="auto", second_lag="auto",
                 track_noise="auto"):
        self.hermite_elements = hermite_elements
        self.beta = beta
        self.ridge = ridge
        self.drift_axes = drift_axes
        self.noise_correction = noise_correction
        self.walls = walls
        self.wall_margin = wall_margin
        self.cv_folds = cv_folds
        self.cv_elements = cv_elements
        self.cv_rule = cv_rule
        self.fe_elements = fe_elements
        self.random_state = random_state
        self.progress = progress
        self.scheduler = scheduler
        self.mobility = mobility
        self.second_lag = second_lag
        self.track_noise = track_noise

    def _drift_axes(self, tracks: TrackTable) -> list[int]:
        return resolve_drift_axes(self.drift_axes, tracks)

    def fit(self, tracks: TrackTable) -> "IncrementsEstimator":
        """Fit psi (and beta) to the transitions of ``tracks``."""
        tracks = check_tracks(tracks)
        beta = check_beta(self.beta)
        drift = self._drift_axes(tracks)
        auto = isinstance(self.hermite_elements, str)
        if auto and self.hermite_elements != "auto":
            raise FpirlInputError(f"hermite_elements must be 'auto' or integers, got {self.hermite_elements!r}")
        if self.cv_rule not in CV_RULES:
            raise FpirlInputError(f"cv_rule must be one of {', '.join(CV_RULES)}, got {self.cv_rule!r}")
        if int(self.cv_folds) != self.cv_folds or self.cv_folds < 2:
            raise FpirlInputError(f"cv_folds must be an integer >= 2, got {self.cv_folds!r}")
        check_track_noise(self.track_noise)
        minimum = 2 if tracks.periodic else 1
        ridge = None if self.ridge is None else check_ridge(self.ridge)
        try:
            wall_margin = float(self.wall_margin)
        except (TypeError, ValueError):
            wall_margin = float("nan")
        if not (np.isfinite(wall_margin) and wall_margin >= 0):
            raise FpirlInputError(f"wall_margin must be a non-negative number, got {self.wall_margin!r}")
        if self.walls not in WALL_TREATMENTS:
            raise FpirlInputError(f"walls must be one of {', '.join(WALL_TREATMENTS)}, got {self.walls!r}")
        nc = self.noise_correction
        if isinstance(nc, (bool, np.bool_)) or nc is None:
            lag = int(bool(nc))
        elif isinstance(nc, (int, np.integer)) and 0 <= nc <= 5:
            lag = int(nc)
        else:
            raise FpirlInputError(f"noise_correction must be True/False or a lag 0..5, got {nc!r}")
        points, start, dx, track = _regression_data(tracks, lag)
        weights = None
        margin = np.zeros(tracks.ndim)
        var_margin = margin
        if not tracks.periodic and dx.shape[0] and self.walls == "drop" and wall_margin > 0:
            margin = np.minimum(wall_margin * np.sqrt(np.mean(dx * dx, axis=0)),
                                WALL_MARGIN_CAP * (tracks.upper - tracks.lower))
            keep = np.all((start >= tracks.lower + margin) & (start <= tracks.upper - margin), axis=1)
            points, start, dx, track = points[keep], start[keep], dx[keep], track[keep]
            var_margin = margin
        if points.shape[0] == 0:
            need = f"{lag + 2} consecutive observations (noise_correction)" if lag else "two"
            raise FpirlInputError(f"no track has {need} consecutive observations away from the walls: nothing to regress")
        dt = tracks.dt
        dx = dx[:, drift]
        mirrored = []
        if not tracks.periodic and self.walls in ("mirror", "auto"):
            lo, hi = tracks.lower[drift], tracks.upper[drift]
            if beta is not None:
                sigma = np.full(len(drift), np.sqrt(2.0 * dt / beta))
            else:
                rms = np.sqrt(np.mean(dx * dx, axis=0))
                far = np.all((start[:, drift] > lo + 4 * rms) & (start[:, drift] < hi - 4 * rms), axis=1)
                sigma = np.sqrt(np.mean(dx[far] ** 2, axis=0)) if np.count_nonzero(far) > 10 else rms
            use = np.ones(len(drift), dtype=bool) if self.walls == "mirror" else sigma <= WALL_AUTO_MAX * (hi - lo)
            if np.any(use):
                shift, weights = mirror_wall_terms(start[:, drift], lo, hi, sigma)
                shift[:, ~use] = 0.0
                weights[:, ~use] = 1.0
                dx = dx - shift
                # beta from the transitions that cannot have touched a wall
                var_margin = np.zeros(tracks.ndim)
                var_margin[np.asarray(drift)[use]] = np.minimum(4 * sigma, 0.25 * (hi - lo))[use]
                mirrored = [drift[j] for j in np.flatnonzero(use)]
        velocity = dx / dt
        periodic = tracks.periodic
        cv = None
        if auto:
            cands = candidate_elements(tracks.ndim, periodic, velocity.size, MAX_AUTO_COEF,
                                       None if self.cv_elements is None else
                                       [check_elements(e, 1, "cv_elements", minimum)[0] for e in self.cv_elements],
                                       drift)
            folds, k = track_folds(track, int(track.max()) + 1, int(self.cv_folds), self.random_state)
            ridges = CV_RIDGES if ridge is None else (ridge,)
            cv = cross_validate(tracks.lower, tracks.upper, periodic, points, velocity, drift, folds, k, dt,
                                      cands, ridges, beta, self.cv_rule, self.progress, weights,
                                      scheduler=self.scheduler)
            elements = cv["chosen_elements"]
            ridge = cv["chosen_ridge"]
        else:
            elements = check_elements(self.hermite_elements, tracks.ndim, minimum=0, auto=True)
            bad = [tracks.names[i] for i, e in enumerate(elements) if 0 < e < minimum or (e == 0 and i in drift)]
            if bad:
                raise FpirlInputError(f"hermite_elements {candidate_label(elements)}: axes {', '.join(bad)} need at "
                                      f"least {minimum} elements (0, psi constant along an axis, only on axes "
                                      "whose increments are not regressed)")
            ridge = DEFAULT_RIDGE if ridge is None else ridge
        fit_space, kept = candidate_space(tracks.lower, tracks.upper, periodic, elements)
        if auto:
            system = cv.pop("system")
        else:
            system = assemble_increments(fit_space, points[:, kept], velocity, [kept.index(a) for a in drift],
                                         row_weights=weights)[0] if self.scheduler is None else \
                _distributed_increments(fit_space, points[:, kept], velocity, [kept.index(a) for a in drift], weights,
                                        self.scheduler)
        theta, lam = solve_increments(system, fit_space.h1_seminorm_matrix(), fit_space.mean_functional().ravel(),
                                      ridge)
        mobility = check_mobility(self.mobility)
        mob, mob_cv, refit = None, None, None
        if mobility != 0 and lag == 0:
            mob, mob_cv, refit = fit_increments_mobility(
                mobility, tracks, fit_space, kept, drift, points, velocity, weights, track, ridge, theta, beta,
                int(self.cv_folds), self.random_state,
                None if check_track_noise(self.track_noise) is False else fit_track_noise)
        elif mobility not in (0, "auto"):
            raise FpirlInputError("mobility cannot be combined with noise_correction")
        if refit is not None:
            theta, lam, system, beta = refit[0], refit[1], refit[2], (refit[3] if beta is None else beta)
        space, coef = embed_constant_axes(fit_space, fit_space.remove_mean(theta), kept, tracks.lower,
                                          tracks.upper, periodic)
        rss = system.rss(fit_space.remove_mean(theta))
        noise = None
        if mob is not None:
            beta_ = beta
        elif beta is None:
            explicit = bool(mirrored)
            var_dx, noise = increment_variance(tracks, space, coef, drift, rss, system.n_rows, var_margin,
                                                  explicit, lag)
            if not var_dx > 0:
                raise FpirlInputError("the increments have no residual variance: beta cannot be estimated; give beta")
            beta_ = 2.0 * dt / var_dx
        else:
            beta_ = beta
        fe = default_result_elements(tracks, space.elements) if self.fe_elements is None else \
            check_elements(self.fe_elements, tracks.ndim, "fe_elements", 2)
        # every check passed: the learned attributes, all at once
        self.cv_ = cv
        self.localization_noise_ = noise
        self.mobility_, self.mobility_cv_ = mob, mob_cv
        self.coef_ = coef
        self.beta_ = float(beta_)
        self.hermite_ = space
        self.grid_ = tracks.grid(fe)
        self.penalty_ = lam
        self.residual_ = float(np.sqrt(rss / system.c)) if system.c > 0 else 0.0
        self.dt_ = dt
        self.n_transitions_ = int(system.n_transitions)
        self.system_ = system  # normal equations in fit_space_, for fpirl.uncertainty.increments_posterior
        self.fit_space_ = fit_space
        self.fit_axes_ = tuple(kept)
        self.settings_ = {
            "estimator": self.name,
            "hermite_elements": candidate_label(elements),  # 0: psi constant along the axis (typed back as is)
            "psi_constant_along": ",".join(tracks.names[i] for i in range(tracks.ndim) if i not in kept),
            "hermite_selection": "cv" if auto else "fixed",
            "fe_elements": ",".join(map(str, fe)),
            "ridge_relative": float(ridge),
            "ridge_selection": "cv" if (auto and self.ridge is None) else "fixed",
            "ridge_absolute": lam,
            "beta_estimated": int(beta is None),
            "noise_correction": lag,
            "walls": self.walls if not tracks.periodic else "periodic",
            "walls_mirrored": ",".join(tracks.names[a] for a in mirrored),
            "wall_margin": ",".join(f"{v:.4g}" for v in margin),
            "drift_axes": ",".join(tracks.names[a] for a in drift),
            "n_transitions": int(system.n_transitions),
            "dt": float(dt),
            "fpirl_version": _version,
        }
        if auto:
            self.settings_.update(cv_folds=cv["folds"], cv_rule=cv["rule"])
        if self.localization_noise_ is not None:
            self.settings_["localization_noise"] = self.localization_noise_
        n_coef = fit_space.n_coef + (0 if self.mobility_ is None else self.mobility_.coef.size)
        self.warnings_ = warn_implausible(tracks, self.beta_, drift, n_coef, int(system.n_rows))
        self.second_lag_, lag_cv = fit_second_lag(self, tracks, drift, self.second_lag, int(self.cv_folds),
                                                   self.random_state)
        self.settings_["second_lag_rho"] = 0.0 if self.second_lag_ is None else self.second_lag_
        self.settings_["second_lag_selection"] = "cv" if self.second_lag == "auto" else "fixed"
        if lag_cv:
            self.settings_["second_lag_cv_gain"] = lag_cv["gain"]
        self._fit_track_noise(tracks, drift)
        self.beta_continuous_ = self.time_step_factor_ = None
        if (mob is None and self.second_lag_ is None and lag == 0
                and not (tracks.action_axes and infer_action_kind(tracks) == "velocity")):
            # the one-step variance factor of a continuous diffusion observed every dt, and beta of that reading
            # (fpirl.estimators._time_step_beta)
            inside = np.ones(start.shape[0], dtype=bool) if periodic else np.all(
                (start >= tracks.lower + var_margin) & (start <= tracks.upper - var_margin), axis=1)
            self.time_step_factor_ = time_step_factor(lambda p: space.gradient(coef, p), start[inside], drift, dt,
                                                      tracks.upper - tracks.lower)
            if beta is None:
                self.beta_continuous_ = self.beta_ * self.time_step_factor_
                self.settings_["beta_time_step_factor"] = self.time_step_factor_
        self.settings_["mobility_degree"] = 0 if self.mobility_ is None else self.mobility_.degree
        self.settings_["mobility_selection"] = "cv" if mobility == "auto" else "fixed"
        if self.mobility_cv_:
            self.settings_["mobility_cv"] = ",".join(f"{k}:{v:.6g}" for k, v in self.mobility_cv_.items())
        return self

    def _fit_track_noise(self, tracks, drift) -> None:
        """``track_noise_`` and its settings (after psi, beta, the mobility and the second lag)."""
        noise, cv = select_track_noise(self, tracks, drift, self.track_noise, int(self.cv_folds), self.random_state)
        self.track_noise_ = noise
        self.settings_["track_noise"] = int(noise is not None)
        self.settings_["track_noise_selection"] = "cv" if check_track_noise(self.track_noise) == "auto" else "fixed"
        if cv:
            self.settings_["track_noise_train_gain"] = cv["train_gain"]
            if np.isfinite(cv["gain"]):
                self.settings_["track_noise_cv_gain"] = cv["gain"]
                self.settings_["track_noise_cv_se"] = cv["se"]
        if noise is not None:
            self.settings_.update(noise.to_attrs())
            lo, hi = SCALE_BOUNDS
            if not lo * (1 + 1e-6) < noise.scale < hi * (1 - 1e-6):
                warnings.warn(f"the per-track noise scale reached a bound of its range {lo:g}-{hi:g} (attr "
                              "track_noise_scale): the increments' spread is far from the 2 dt/beta the fit implies, so beta does not "
                              "describe the noise (another option of this fit, e.g. --noise-correction, is the "
                              "likely cause; compare with the defaults)", stacklevel=3)

    def result_extra(self) -> dict:
        """The CV curve as DataArrays over ``cv_candidate`` (labels, :func:`~.selection.candidate_label`) x ``cv_ridge``: ``cv_score`` (mean held-out
        log-likelihood, nats per transition), ``cv_score_std`` (its std over folds) and ``cv_score_se``
        (paired standard error of the difference to the best, what the '1se' rule uses)."""
        self._check_fitted()
        out = {} if getattr(self, "mobility_", None) is None else self.mobility_.to_attrs(self.grid_.names)
        if getattr(self, "beta_continuous_", None) is not None:  # beta of the continuous diffusion
            out["beta_continuous"] = float(self.beta_continuous_)
        if getattr(self, "second_lag_", None) is not None:
            out["second_lag_rho"] = float(self.second_lag_)
        if getattr(self, "track_noise_", None) is not None:
            out.update(self.track_noise_.to_attrs())
        if self.cv_ is None:
            return out
        cv = self.cv_
        coords = {"cv_candidate": cv["labels"], "cv_ridge": cv["ridge"]}
        dims = ("cv_candidate", "cv_ridge")
        attrs = {"units": "nats per transition", "rule": cv["rule"], "folds": cv["folds"],
                 "chosen_candidate": candidate_label(cv["chosen_elements"]), "chosen_ridge": cv["chosen_ridge"],
                 "candidates": "Hermite elements per axis (" + ",".join(self.grid_.names) + "); 0: psi constant "
                 "along that axis"}
        return {
            **out,
            "cv_score": xr.DataArray(cv["score"], coords=coords, dims=dims,
                                     attrs={"long_name": "held-out increment log-likelihood (mean over folds)", **attrs}),
            "cv_score_std": xr.DataArray(cv["std"], coords=coords, dims=dims,
                                         attrs={"long_name": "std over folds of the held-out log-likelihood"}),
            "cv_score_se": xr.DataArray(cv["se_paired"], coords=coords, dims=dims,
                                        attrs={"long_name": "standard error of the per-fold difference to the best"}),
        }
