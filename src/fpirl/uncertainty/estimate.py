r"""Uncertainty of a fitted potential: Bayesian VSI posterior, credible bands, beta's interval.

The penalised least-squares fit of :mod:`fpirl.estimators.identify` (eq. vsi_regression) and of the
increments estimator is the MAP estimate of a linear-Gaussian model

.. math::
    y = -X\theta - \gamma c + \varepsilon,\quad \varepsilon \sim N(0, \sigma^2 I),\qquad
    \theta \sim N\big(0, \sigma^2 (\lambda P)^{+}\big),\quad m^T\theta = 0,

with ``P`` the Gram matrix of ``int |grad psi|^2`` (the Tikhonov penalty), ``lambda`` the
absolute ridge and ``m`` the mean functional (zero-mean psi); ``gamma = 1/beta`` has a flat prior
when estimated. The posterior is Gaussian with covariance (closed form from the normal matrix)

.. math::
    \Sigma = \sigma^2 \Big(K^{-1} - \frac{c_0 c_0^T}{\mu}\Big),\qquad
    K = \begin{pmatrix} A + \lambda P + \mu m m^T & X^T c\\ c^T X & c^T c\end{pmatrix},

where ``c_0`` is the constant mode (``K c_0 = mu m``, so the correction conditions on
``m^T theta = 0`` exactly; the result does not depend on ``mu > 0``). The noise variance is

* density VSI (:func:`density_posterior`): the residual variance
  ``sigma^2 = RSS / (n_rows - tr(K^{-1} K_data))`` (effective degrees of freedom of the penalised
  fit, the GCV denominator of :func:`fpirl.estimators.identify.gcv_ridge`);
* increments (:func:`increments_posterior`): the Gaussian increment model, variance
  ``2 dt / beta`` per increment, i.e. ``2 / (beta dt)`` per velocity row; with beta estimated its
  interval is the chi-square interval of a variance estimated from ``n_rows`` residuals.

Derived quantities: ``potential_std`` on the FE nodes is ``sqrt(diag(B Sigma B^T))`` with
``B = B_1 kron ... kron B_d`` the Hermite evaluation matrix, computed by sum factorisation on
batches of columns of a factor ``Sigma = F F^T`` (never a dense nodal covariance); the 5%/95%
bands of the policy and reward come from coefficients (and ``gamma``) sampled from the posterior,
each pushed through the MDP recovery (:func:`fpirl.mdp.recover_mdp`).

The row model takes the residual rows as independent. That holds for increments; for snapshots
with noise independent from snapshot to snapshot the time differences telescope and the row model
over-states the noise (intervals 2-3.5x too wide at 2-10% noise, docs/benchmarks.md). So when the
snapshots are given (:func:`posterior`, :func:`estimate_uncertainty`) the density posterior is the
snapshot-noise model of :func:`fpirl.uncertainty._snapshot_noise.snapshot_posterior` instead: nodal noise
``sigma s_k z_k`` per snapshot propagated through the linearised estimator
``delta x = -K^{-1}[D(p)^T r(e) + D(e)^T r_hat]`` by seeded draws, ``sigma`` matched to the RSS,
the penalty kept as the prior; it also serves matrix-free fits (CG solves instead of Cholesky).
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from ..core._errors import FpirlInputError
from ..core._linalg import solve_spd
from ..core.hermite import HermiteSpace, embed_constant_axes
from ._basis import add_basis_error, coarse_refit, coarser_elements  # noqa: F401  (coarser_elements: public name)
from ._posterior import (BAND_QUANTILES, BASIS_ERROR_FACTOR, CoefficientPosterior, _conditioned_factor,  # noqa: F401
                         samples_posterior)
from ..core.density import DensitySnapshots
from ..estimators.identify import PotentialEstimator
from ..tracks.table import TrackTable
from ..weakform.matfree import StreamingSnapshots
from ._bootstrap import DEFAULT_REPLICATES, bootstrap_tracks
from ._parametric import DEFAULT_PARAMETRIC, MAX_SUBSTEPS, SUBSTEP_STIFFNESS, frame_stiffness, parametric_bootstrap
from ..estimators.track_density import TrackDensityEstimator
from ._snapshot_noise import matrix_free_posterior_seconds, snapshot_posterior
from ._time_step import add_time_step_error

#: Coefficient draws for the policy/reward bands (each draw is one MDP recovery).
DEFAULT_SAMPLES = 64
#: Methods accepted by :func:`uncertainty_extra` (and ``fpirl fit --uncertainty``).
METHODS = ("auto", "posterior", "bootstrap", "parametric", "none")
#: ``method='auto'`` skips the parametric bootstrap where the fit's ``kappa dt`` (its drift's change over one frame,
#: :func:`fpirl.uncertainty._parametric.frame_stiffness`) exceeds this: the most its substeps resolve.
STIFFNESS_LIMIT = MAX_SUBSTEPS * SUBSTEP_STIFFNESS
#: ``method='auto'`` skips a matrix-free posterior whose estimated time exceeds this (seconds).
POSTERIOR_BUDGET_S = 120.0
#: Passes of the snapshot-noise posterior over a streamed file whose residuals are not cached (pilot
#: draws, fitted data, residual sums, full-residual draws): counted 10 (docs/benchmarks.md, issue 20).
STREAMED_PASSES = 10


def streamed_read_seconds(data) -> float | None:
    """Estimated wall time of :data:`STREAMED_PASSES` reads of a streamed file (None unless ``data`` is a
    :class:`~fpirl.weakform.matfree.StreamingSnapshots` opened from a file): the time of reading its
    first snapshot (timed now), times the number of snapshots, times the passes."""
    if not isinstance(data, StreamingSnapshots) or getattr(data, "path", None) is None:
        return None
    start = time.perf_counter()
    data.read(0, 1)
    return STREAMED_PASSES * data.n_times * (time.perf_counter() - start)


def _inner(est):
    """The estimator holding the density normal equations (itself, or a wrapped PotentialEstimator)."""
    if getattr(est, "normal_equations_", None) is not None:
        return est
    inner = getattr(est, "estimator_", None)
    if inner is not None and getattr(inner, "normal_equations_", None) is not None:
        return inner
    return None


def density_posterior(est) -> CoefficientPosterior:
    """Closed-form posterior of a fitted density (VSI) estimator (module doc).

    Parameters
    ----------
    est : PotentialEstimator (or an estimator wrapping one as ``estimator_``)
        Fitted; uses ``normal_equations_``, ``penalty_``, ``coef_``, ``beta_`` and whether beta was
        estimated (``settings_['beta_estimated']``).
    """
    inner = _inner(est)
    if inner is None:
        raise FpirlInputError(f"{type(est).__name__} keeps no normal equations: no closed-form posterior")
    ne, h = inner.normal_equations_, inner.hermite_
    n = h.n_coef
    A = ne.xtx
    P = h.h1_seminorm_matrix()
    m = h.mean_functional().ravel()
    mu = np.trace(A) / n
    estimated = bool(inner.settings_.get("beta_estimated", 0))
    gamma = 1.0 / float(inner.beta_)
    theta = np.asarray(inner.coef_, dtype=float).ravel()
    prior = inner.penalty_ * P + mu * np.outer(m, m)
    if estimated:
        K_data = np.block([[A, ne.xtc[:, None]], [ne.xtc[None, :], np.array([[ne.cc]])]])
        K = K_data.copy()
        K[:n, :n] += prior
    else:
        K_data, K = A, A + prior
    b = ne.xtg + gamma * ne.xtc
    hh = ne.gg + 2 * gamma * ne.gc + gamma**2 * ne.cc
    rss = max(float(theta @ A @ theta + 2 * theta @ b + hh), 0.0)
    # by Cholesky (a shifted one where only semi-definite: an underdetermined fit is held by the tiny ridge alone)
    dof_fit = float(np.trace(solve_spd(K, K_data)))
    resid_dof = ne.n_rows - dof_fit
    if not resid_dof > 1:
        raise FpirlInputError(f"too few residual equations ({ne.n_rows}) for the {dof_fit:.0f} effective "
                              "parameters: the noise level cannot be estimated")
    sigma2 = rss / resid_dof
    F = _conditioned_factor(K, n, h, mu, sigma2)
    return CoefficientPosterior(h, theta, gamma, F, method="posterior", dof=float(resid_dof),
                                noise_variance=sigma2, beta_estimated=estimated)


def increments_posterior(est) -> CoefficientPosterior:
    """Closed-form posterior of a fitted :class:`~fpirl.estimators.IncrementsEstimator` (module doc).

    Uses the estimator's normal equations ``system_`` (:class:`~fpirl.weakform.increment_system.IncrementSystem`,
    in the space ``fit_space_`` of the axes ``fit_axes_`` psi varies along), ``penalty_``, ``beta_``
    and ``dt_``. The velocity rows have variance ``2 / (beta dt)``; with beta estimated, ``gamma = 1/beta`` gets the
    independent chi-square interval ``var(gamma) = 2 gamma^2 / n_rows``, and where the fit has a continuous-time
    beta (``beta_continuous_``) one more column, the difference of the two ``1/beta``: the interval reaches both
    readings of the tracks, an Euler chain at ``dt`` (the paper's Gaussian transition) and a diffusion observed
    every ``dt``.
    The factor is mapped to ``hermite_`` (psi constant along the other axes) exactly.
    """
    system = getattr(est, "system_", None)
    if system is None:
        raise FpirlInputError(f"{type(est).__name__} keeps no normal equations (system_): no closed-form posterior")
    h = getattr(est, "fit_space_", None) or est.hermite_
    n = h.n_coef
    A = system.A
    m = h.mean_functional().ravel()
    mu = np.trace(A) / n
    K = A + est.penalty_ * h.h1_seminorm_matrix() + mu * np.outer(m, m)
    gamma = 1.0 / float(est.beta_)
    sigma2 = 2.0 * gamma / float(est.dt_)
    F = _conditioned_factor(K, n, h, mu, sigma2)
    if h is not est.hermite_:
        F = np.vstack([_embed_columns(F[:-1], h, tuple(getattr(est, "fit_axes_", range(h.ndim))), est.hermite_),
                       F[-1:]])
    estimated = bool(est.settings_.get("beta_estimated", 0))
    if estimated:
        col = np.zeros((F.shape[0], 1))
        col[-1, 0] = gamma * np.sqrt(2.0 / system.n_rows)
        F = np.hstack([F, col])
        continuous = getattr(est, "beta_continuous_", None)
        if continuous:  # the interval reaches the continuous diffusion's beta too (fpirl.estimators._time_step_beta)
            col = np.zeros((F.shape[0], 1))
            col[-1, 0] = abs(gamma - 1.0 / float(continuous))
            F = np.hstack([F, col])
    return CoefficientPosterior(est.hermite_, np.asarray(est.coef_, dtype=float).ravel(), gamma, F,
                                method="posterior", noise_variance=sigma2, beta_estimated=estimated)


def _embed_columns(F: np.ndarray, space: HermiteSpace, kept, full: HermiteSpace) -> np.ndarray:
    """Columns of coefficients of ``space`` (axes ``kept`` of ``full``) as coefficients of ``full``,
    constant along the other axes (:func:`fpirl.core.hermite.embed_constant_axes`)."""
    return embed_constant_axes(F.T, space, kept, full, batch=1).reshape(F.shape[1], -1).T


def posterior(est, snapshots=None, rng=0, progress: bool = False) -> CoefficientPosterior:
    """The posterior of any fitted estimator (density VSI or increments).

    Density fits: with ``snapshots`` (the fitted data; DensitySnapshots or StreamingSnapshots) the
    snapshot-noise model (:func:`fpirl.uncertainty._snapshot_noise.snapshot_posterior`, seeded by ``rng``; any
    solver), else the row model (:func:`density_posterior`; assembled fits only). With beta estimated
    and in-memory snapshots, beta is also refitted at a coarser Hermite resolution and its interval
    widened by the basis error (:func:`beta_at_coarser_resolution`), and refitted with Simpson's rows to add
    the midpoint rule's time-step error (:func:`fpirl.uncertainty._time_step.add_time_step_error`).
    """
    if getattr(est, "system_", None) is not None:
        return increments_posterior(est)
    post = density_posterior(est) if snapshots is None else snapshot_posterior(est, snapshots, rng=rng,
                                                                               progress=progress)
    if post.beta_estimated:
        post.beta_pilot = getattr(_inner(est), "beta_pilot_", None)
    if isinstance(snapshots, DensitySnapshots):
        add_basis_error(post, est, snapshots)
        inner = _inner(est)
        if inner is not None:
            post.simpson_fit = add_time_step_error(post, inner, snapshots)
    return post


def estimate_uncertainty(est, method: str = "posterior", data=None, *, n_replicates: int | None = None, rng=0,
                         scheduler=None, n_jobs: int | None = None, progress: bool = False):
    """Front door: the posterior (``'posterior'``), the bootstrap over tracks (``'bootstrap'``) or None.

    Parameters
    ----------
    est : fitted estimator
    method : {'auto', 'posterior', 'bootstrap', 'parametric', 'none'}
        ``'auto'`` (the CLI's default) is ``'posterior'`` unless the fit is matrix-free and the
        posterior's estimated time (:func:`fpirl.uncertainty._snapshot_noise.matrix_free_posterior_seconds`,
        plus :func:`streamed_read_seconds` when ``data`` is streamed from a file) exceeds
        :data:`POSTERIOR_BUDGET_S`; then a warning and no uncertainty. For a
        :class:`~fpirl.estimators.TrackDensityEstimator` with its tracks, ``'auto'`` is the parametric
        bootstrap (:func:`fpirl.uncertainty._parametric.parametric_bootstrap`: the row model leaves out
        the estimator's binning bias and the time-correlated histogram noise), or the row-model
        posterior with a warning where the bootstrap would exceed :data:`POSTERIOR_BUDGET_S`.
    data : DensitySnapshots, StreamingSnapshots or TrackTable, optional
        The fitted data: snapshots give the snapshot-noise posterior (any solver) and let it bound
        beta's basis error (:func:`beta_at_coarser_resolution`); the bootstrap needs the tracks.
    n_replicates, rng, scheduler, n_jobs, progress
        Settings of the bootstrap over tracks and of the parametric one (``n_replicates``: their replicates;
        ``progress`` also shows the snapshot-noise draws) (:func:`fpirl.uncertainty._bootstrap.bootstrap_tracks`,
        :func:`fpirl.uncertainty._parametric.parametric_bootstrap`; replicates run as Dask tasks
        with ``scheduler``, else on ``n_jobs`` processes).
    """
    if method not in METHODS:
        raise FpirlInputError(f"uncertainty must be one of {', '.join(METHODS)}, got {method!r}")
    if method == "auto":
        cost = matrix_free_posterior_seconds(est)
        if cost is not None and cost > POSTERIOR_BUDGET_S:
            warnings.warn(f"no posterior: on this matrix-free fit it would take about {cost / 60:.0f} min "
                          f"(one CG solve per noise draw); ask for it with --uncertainty posterior "
                          "(API: method='posterior')", RuntimeWarning, stacklevel=2)
            return None
        reads = streamed_read_seconds(data)
        if reads is not None and (cost or 0.0) + reads > POSTERIOR_BUDGET_S:
            warnings.warn(f"no posterior: it would read the streamed file about {STREAMED_PASSES} more times "
                          f"(about {((cost or 0.0) + reads) / 60:.1f} min); ask for it with --uncertainty "
                          "posterior (API: method='posterior')", RuntimeWarning, stacklevel=2)
            return None
        method = "posterior"
        if isinstance(est, TrackDensityEstimator) and isinstance(data, TrackTable):
            stiff = frame_stiffness(est.hermite_, est.coef_, data.dt)
            post = None if stiff > STIFFNESS_LIMIT else parametric_bootstrap(
                est, data, n_replicates or DEFAULT_PARAMETRIC, rng, scheduler=scheduler, n_jobs=n_jobs,
                progress=progress, budget_s=POSTERIOR_BUDGET_S)
            if post is not None:
                return post
            why = (f"the fitted potential changes its drift by {stiff:.3g} times over one frame (kappa dt; the "
                   "model does not resolve the table's time step)" if stiff > STIFFNESS_LIMIT else
                   f"its replicates would take over {POSTERIOR_BUDGET_S / 60:.0f} min")
            warnings.warn(f"no parametric bootstrap: {why}; the row-model posterior is used instead, which leaves out "
                          "the density estimator's binning bias (ask for it with --uncertainty parametric, API: "
                          "method='parametric')", RuntimeWarning, stacklevel=2)
    if method == "parametric":
        if not (isinstance(est, TrackDensityEstimator) and isinstance(data, TrackTable)):
            raise FpirlInputError("the parametric bootstrap simulates tracks from the fit: it needs a density "
                                  "estimator fitted to a trajectory table (--estimator density), and its table")
        return parametric_bootstrap(est, data, n_replicates or DEFAULT_PARAMETRIC, rng, scheduler=scheduler,
                                    n_jobs=n_jobs, progress=progress)
    if method == "none":
        return None
    if method == "bootstrap":
        if not isinstance(data, TrackTable):
            raise FpirlInputError("the bootstrap resamples whole tracks: it needs a trajectory table")
        return bootstrap_tracks(est, data, n_replicates or DEFAULT_REPLICATES, rng, scheduler=scheduler,
                                n_jobs=n_jobs, progress=progress)
    snapshots = data if isinstance(data, (DensitySnapshots, StreamingSnapshots)) else None
    solver = (getattr(est, "settings_", None) or {}).get("solver")
    if solver in ("interpolated-flux", "gauss-flux", "mixed-flux"):  # the posterior's band passes need the exact 3^d band
        warnings.warn(f"no posterior for a {solver} fit: the snapshot-noise posterior needs the exact "
                      "operator's 3^d band per node; the result has no uncertainty variables", RuntimeWarning,
                      stacklevel=2)
        return None
    if getattr(est, "system_", None) is None and _inner(est) is None and snapshots is None:
        warnings.warn(f"no posterior for this {type(est).__name__} fit without its data: it kept no assembled "
                      "normal matrix (matrix-free solver) and the snapshot-noise posterior needs the snapshots "
                      "(data=...); the result has no uncertainty variables", RuntimeWarning, stacklevel=2)
        return None
    return posterior(est, snapshots, rng, progress=progress)


def beta_at_coarser_resolution(est, snapshots) -> float | None:
    r"""beta refitted with :func:`coarser_elements` Hermite elements (same data and settings).

    Why: ``psi`` outside the Hermite space leaves a basis error ``e = grad psi - grad psi_h``
    in the residual; its projection on the diffusion column ``c`` is not orthogonal to the
    potential columns, so it moves ``1/beta``. Measured (docs/method.md, "Beta and the basis
    error"): 2-D periodic data from the spectral solver, beta = 4, psi a trigonometric sum: beta
    comes out 8.4% high with 4 elements, 1.8% with 6, 0.8% with 8, while for psi inside the
    6-element space the fits with 6 and 12 elements are within 0.45% (FE and time error).
    The bias keeps its sign and shrinks with the element size (order about 1 from 2 to 3
    elements, 2.3 from 3 to 4, 3 and more beyond), so the coarse fit ``beta_c`` (3/4 of the elements)
    lies on the same side, further out, and ``beta - 2 (beta_c - beta)`` (:data:`BASIS_ERROR_FACTOR`)
    bounds the truth whenever the error falls by at least a third from ``beta_c`` to ``beta``.
    """
    inner = _inner(est)
    coarse = None if inner is None else coarse_refit(inner, snapshots)
    return None if coarse is None else float(coarse.beta_)
