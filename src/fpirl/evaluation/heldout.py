r"""Held-out one-step predictive log-likelihood of the fitted FP-IRL model and the baselines.

The metric (for every model, on exactly the same transitions) is the mean over held-out
transitions of :math:`\log p(s_{k+1} \mid \text{observed up to } k)` in nats, a density per unit
volume of the state columns in the table's own units. A transition is a run of three consecutive
observations of one track with no missing frame (see :mod:`fpirl.tracks.steps`).

The FP-IRL model's one-step predictive (paper eqs. ``SDE``, ``gaussian_transition``):

* with a state-dependent mobility ``g`` (:mod:`fpirl.estimators.mobility`, result attrs
  ``mobility_*``): ``grad psi`` below becomes ``g (grad psi - grad log g / beta)`` and the
  variance ``2 g dt / beta``;
* with a second lag ``rho`` (:mod:`fpirl.estimators.lag`, result attr ``second_lag_rho``): the mean
  moves by ``rho sqrt(g_k / g_{k-1}) r_{k-1}`` (the previous step's residual, from the observation
  before the transition; none for a segment's first transition) and the variance shrinks by
  ``1 - rho^2``;
* with a per-track noise scale (:mod:`fpirl.estimators.track_noise`, result attrs ``track_noise_*``):
  the Gaussian ``N(r; 0, s^2 I)`` below becomes the Student t of step ``k`` given the same track's
  earlier residuals of the held-out table (rows of a track in time order),
  :math:`\log\Gamma(\tfrac{n_k+m}{2}) - \log\Gamma(\tfrac{n_k}{2}) - \tfrac m2\log(\pi(\nu+S_k)c s^2)
  - \tfrac{n_k+m}{2}\log(1 + u_k/(\nu+S_k))`, ``u_k = |r_k|^2 / (c s^2)``, ``S_k``, ``n_k`` the
  discounted sums of the earlier ``u_j`` and of ``m`` (plus ``nu``): the product over a track is its
  marginal likelihood under a Gamma-distributed precision per track;
* explicit actions (or no actions): the MDP transition (eq. ``mdp_transition``)
  :math:`T(s'|s,a) = \mathcal N\big(s';\ s - \nabla_s\psi(s,a)\,\Delta t,\ (2\Delta t/\beta) I\big)`
  at the observed ``(s_k, a_k)``;
* actions = velocities (``a_k = (s_k - s_{k-1})/\Delta t``): the action part of the joint
  transition (eq. ``gaussian_transition``),
  :math:`a_{k+1} \sim \mathcal N\big(a_k - \nabla_a\psi(s_k,a_k)\,\Delta t,\ (2\Delta t/\beta) I\big)`,
  with the kinematic :math:`s_{k+1} = s_k + a_{k+1}\Delta t`, so
  :math:`\log p(s_{k+1}) = \log \mathcal N(a_{k+1}; \dots) - d_s \log \Delta t` (the Jacobian of
  ``a -> s``). The state part of the joint transition is not used: positions follow from velocities.

Extension beyond the fitted box: held-out points outside the box are scored, never dropped. The
drift there is the drift at the nearest point of the box (``grad psi`` evaluated at the point clipped
to the box; periodic axes wrap), and the Gaussian is taken on the whole space (not folded at the
walls, which changes the density only within a few ``sigma`` of a wall).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import xarray as xr

from ..core._errors import FpirlInputError
from ..core.grid import into_box
from ..io.netcdf import grid_from_dataset, model_from_result
from ..estimators.mobility import Mobility
from ..estimators.track_noise import TrackNoise
from ..forward.track_paths import effective_drift
from ..tracks.steps import Transitions, gaussian_logpdf, observed_transitions
from .adequacy import HelmholtzCheck
from .baselines import BASELINES, Baselines, fit_baselines

__all__ = ["MODELS", "HeldoutScore", "TransitionModel", "fpirl_loglik", "heldout_loglik"]

#: model names of :func:`heldout_loglik`, in report order
MODELS = ("fpirl",) + BASELINES


@dataclass(frozen=True)
class TransitionModel:
    """A fitted potential seen as a one-step predictive model.

    Parameters
    ----------
    gradient : callable
        ``gradient(points (n, d)) -> (n, d)``, the gradient of ``psi`` in the user's units.
    beta : float
    lower, upper : ndarray, shape (d,)
        The fitted box.
    roles : tuple of str
    names : tuple of str
    periodic : bool
    dt : float, optional
        The model's time step (checked against the table's when given).
    """

    gradient: object
    beta: float
    lower: np.ndarray
    upper: np.ndarray
    roles: tuple
    names: tuple
    periodic: bool
    dt: float | None = None
    mobility: object = None
    second_lag: float | None = None
    track_noise: object = None

    @classmethod
    def from_any(cls, model) -> TransitionModel:
        """From a result dataset, a fitted estimator (``grid_``, ``beta_``, ``gradient``) or a
        :class:`fpirl.workflows.FittedModel`."""
        if isinstance(model, cls):
            return model

        mobility = getattr(model, "mobility_", None)
        rho = getattr(model, "second_lag_", None)
        noise = getattr(model, "track_noise_", None)
        if isinstance(model, xr.Dataset):
            rho = model.attrs.get("second_lag_rho")
            rho = None if rho is None else float(np.asarray(rho).reshape(()))
            noise = TrackNoise.from_attrs(model.attrs)
            grid = grid_from_dataset(model, "potential")
            mobility = Mobility.from_attrs(model.attrs, grid.names)
            model = model_from_result(model, grid)
        grid = getattr(model, "grid_", None) or getattr(model, "grid", None)
        beta = getattr(model, "beta_", None) or getattr(model, "beta", None)
        if grid is None or beta is None or not callable(getattr(model, "gradient", None)):
            raise FpirlInputError(f"cannot score {type(model).__name__}: need a fitted estimator or a result")
        dt = getattr(model, "dt_", None) or getattr(model, "dt", None)
        return cls(model.gradient, float(beta), grid.lower, grid.upper, grid.roles, grid.names, grid.periodic,
                   None if dt is None else float(dt), mobility, rho, noise)

    @property
    def state_axes(self):
        return [i for i, r in enumerate(self.roles) if r == "state"]

    @property
    def action_axes(self):
        return [i for i, r in enumerate(self.roles) if r == "action"]

    def drift_gradient(self, x: np.ndarray) -> np.ndarray:
        """``grad psi`` at ``x`` clipped to the box, or wrapped into a periodic one (the documented extension
        outside it)."""
        x = np.asarray(x, dtype=float)
        x = into_box(x, self.lower, self.upper, self.periodic)  # periodic: the same point one or more periods off
        return np.asarray(self.gradient(x), dtype=float).reshape(x.shape)


@dataclass
class HeldoutScore:
    """Mean held-out log-likelihoods (nats per transition) and their per-transition values."""

    transitions: int
    loglik: dict
    per_transition: dict = field(repr=False, default_factory=dict)
    track: np.ndarray | None = field(repr=False, default=None)

    def to_json(self) -> dict:
        """``{"transitions": n, "loglik": {model: mean}}`` (the ``fpirl evaluate --json`` object)."""
        return {"transitions": int(self.transitions), "loglik": {k: float(v) for k, v in self.loglik.items()}}

    def standard_error(self, name: str) -> float:
        """Standard error of a model's mean over tracks (transitions of one track are correlated)."""
        return _track_se(self.per_transition[name], self.track)

    def difference_se(self, a: str, b: str) -> float:
        """Standard error over tracks of ``mean(loglik_a - loglik_b)``."""
        return _track_se(self.per_transition[a] - self.per_transition[b], self.track)


def _track_se(values: np.ndarray, track: np.ndarray) -> float:
    n = values.size
    if track is None or n < 2:
        return float("nan")
    _, inv = np.unique(track, return_inverse=True)
    m = inv.max() + 1
    if m < 2:
        return float("nan")
    resid = np.bincount(inv, weights=values - values.mean(), minlength=m)  # per-track sums of deviations
    return float(np.sqrt(m / (m - 1) * np.sum(resid**2)) / n)


def check_compatible(model: TransitionModel, table) -> None:
    """One-line :class:`FpirlInputError` when the table's axes or time step disagree with the model's."""
    if tuple(table.names) != tuple(model.names) or tuple(table.roles) != tuple(model.roles):
        want = ", ".join(f"{n}[{r}]" for n, r in zip(model.names, model.roles))
        got = ", ".join(f"{n}[{r}]" for n, r in zip(table.names, table.roles))
        raise FpirlInputError(f"table axes ({got}) do not match the result's ({want})")
    if model.dt is not None and not np.isclose(table.dt, model.dt, rtol=1e-6, atol=0.0):
        raise FpirlInputError(
            f"the table's sampling interval dt={table.dt:g} differs from the result's dt={model.dt:g} (units or stride)"
        )


def fpirl_loglik(model, tr: Transitions) -> np.ndarray:
    """Per-transition ``log p(s_{k+1} | s_k, a_k)`` of the FP-IRL model (see module docstring)."""
    model = TransitionModel.from_any(model)
    resid, var, logjac = fpirl_predictive(model, tr)
    if model.track_noise is None:
        return gaussian_logpdf(resid, 0.0, var) + logjac
    m = resid.shape[1]  # per-track noise scale: the Student t given the track's earlier residuals
    order = np.argsort(tr.track, kind="stable")
    out = np.empty(tr.n)
    u = np.sum(resid * resid, axis=1) / var
    out[order] = model.track_noise.log_predictive(u[order], m, tr.track[order])
    return out - 0.5 * m * np.log(var) + logjac


def fpirl_predictive(model, tr: Transitions):
    """The Gaussian one-step predictive of the FP-IRL model (module docstring) as ``(r, var, logjac)``:
    the residual ``r`` of the observed next value from the predictive mean (``(n, m)``, ``m`` scored
    axes), the variance per axis (``(n,)``) and the log-Jacobian to the density of ``s_{k+1}``
    (``-d_s log dt`` for velocity actions, else 0), so that
    ``log p = log N(r; 0, var I) + logjac`` (:func:`fpirl_loglik`)."""
    model = TransitionModel.from_any(model)
    S, A = model.state_axes, model.action_axes
    g = model.drift_gradient(tr.x)
    var = 2.0 * tr.dt / model.beta
    g, m = _effective_gradient(model, tr.x, g)
    var = var * m
    axes = A if tr.kind == "velocity" else S
    shift = 0.0
    if model.second_lag is not None and tr.x_prev is not None:  # AR(1) residuals (fpirl.estimators.lag)
        rho = float(model.second_lag)
        has = np.all(np.isfinite(tr.x_prev), axis=1)
        xp = np.where(has[:, None], tr.x_prev, tr.x)
        gp, mp = _effective_gradient(model, xp, model.drift_gradient(xp))
        prev = tr.x[:, axes] - xp[:, axes]
        if model.periodic and tr.kind != "velocity":
            length = (model.upper - model.lower)[axes]
            prev = prev - length * np.round(prev / length)
        r_prev = prev + gp[:, axes] * tr.dt
        shift = np.where(has[:, None], rho * np.sqrt(m / mp)[:, None] * r_prev, 0.0)
        var = var * np.where(has, 1.0 - rho * rho, 1.0)
    var = np.broadcast_to(np.asarray(var, dtype=float), (tr.n,))
    if tr.kind == "velocity":
        if len(A) != len(S):
            raise FpirlInputError("velocity actions need one action axis per state axis")
        mean = tr.v_prev - g[:, A] * tr.dt + shift
        return tr.v_next - mean, var, -len(S) * np.log(tr.dt)
    return tr.step - (-g[:, S] * tr.dt + shift), var, 0.0


def _effective_gradient(model: TransitionModel, x, grad):
    """``g (grad psi - grad log g / beta)`` and ``g`` with a mobility (:mod:`fpirl.estimators.mobility`),
    else ``grad psi`` and 1."""
    return effective_drift(model.mobility, model.beta, x, grad)


def heldout_loglik(model, table, baselines: Baselines | None = None, kind: str | None = None,
                   extra: dict | None = None, check: bool = True) -> HeldoutScore:
    """Mean held-out one-step log-likelihood of the FP-IRL model and the baselines on ``table``.

    Parameters
    ----------
    model
        Result dataset, fitted estimator or :class:`TransitionModel`.
    table : TrackTable
        Held-out tracks, read with the same columns and units as the training table.
    baselines : Baselines, optional
        Fitted baselines (default: from the result's attrs when ``model`` is a result dataset).
    kind : {'velocity', 'explicit', 'none'}, optional
        How the table's actions were made (default: inferred from the table).
    extra : dict, optional
        More models ``name -> callable(Transitions) -> (n,) log-densities``, scored on the same transitions.
    check : bool
        Check that the table's axes and dt match the model's.

    Returns
    -------
    HeldoutScore
    """
    if baselines is None and isinstance(model, xr.Dataset):
        baselines = Baselines.from_attrs(model.attrs)
    tmodel = TransitionModel.from_any(model)
    if check:
        check_compatible(tmodel, table)
    tr = observed_transitions(table, kind)
    if tr.n == 0:
        raise FpirlInputError("the held-out table has no run of three consecutive observations to score")
    if not tmodel.periodic:
        outside = np.mean(np.any((tr.x < tmodel.lower) | (tr.x > tmodel.upper), axis=1))
        if outside > 0.5:
            warnings.warn(f"{outside:.0%} of the held-out transitions start outside the fitted box (scored with the "
                          "drift at the nearest point of the box); are the units the same?", stacklevel=2)
    per = {"fpirl": fpirl_loglik(tmodel, tr)}
    if baselines is not None:
        per.update(baselines.loglik(tr))
    for name, fn in (extra or {}).items():
        per[name] = np.asarray(fn(tr), dtype=float)
    return HeldoutScore(tr.n, {k: float(np.mean(v)) for k, v in per.items()}, per, tr.track)


def fit_time_diagnostics(tracks, random_state=0):
    """What ``fpirl fit`` stores next to a model fitted on a track table: the fitted baselines
    (:func:`fpirl.evaluation.baselines.fit_baselines`) and the adequacy check (:class:`fpirl.evaluation.adequacy.HelmholtzCheck`).

    Either is skipped (with a warning) when the table is too small for it.

    Returns
    -------
    attrs : dict
        Result attrs ``baseline_*`` and ``adequacy_*``.
    check : HelmholtzCheck or None
    """
    attrs, check = {}, None
    try:
        attrs.update(fit_baselines(tracks).to_attrs())
    except FpirlInputError as exc:
        warnings.warn(f"baselines not fitted ({exc}); 'fpirl evaluate' will not work on this result", stacklevel=2)
    try:
        check = HelmholtzCheck(random_state=random_state).fit(tracks)
        attrs.update(check.to_attrs())
    except FpirlInputError as exc:
        warnings.warn(f"model adequacy not checked ({exc})", stacklevel=2)
    return attrs, check
