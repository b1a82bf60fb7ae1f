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

import warnings
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.stats

from ..core._errors import FpirlInputError
from ..core._tensor import apply_along_axes
from ..core.hermite import HermiteSpace
from ._basis import coarser_elements  # noqa: F401  (public name)

#: Lower and upper quantile of the reported credible bands.
BAND_QUANTILES = (0.05, 0.95)
#: Coefficient draws for the policy/reward bands (each draw is one MDP recovery).
DEFAULT_SAMPLES = 64
#: Methods accepted by :func:`uncertainty_extra` (and ``fpirl fit --uncertainty``).
METHODS = ("auto", "posterior", "bootstrap", "none")
#: ``method='auto'`` skips a matrix-free posterior whose estimated time exceeds this (seconds).
POSTERIOR_BUDGET_S = 120.0
#: beta's interval reaches to ``beta - BASIS_ERROR_FACTOR (beta_coarse - beta)`` (see beta_at_coarser_resolution).
BASIS_ERROR_FACTOR = 2.0
#: Columns of the covariance factor per batch in :meth:`CoefficientPosterior.potential_std`.
_BATCH_BYTES = 1 << 25


@dataclass
class CoefficientPosterior:
    """Gaussian (or sampled) distribution of the Hermite coefficients of the zero-mean psi and of 1/beta.

    Attributes
    ----------
    hermite : HermiteSpace
    mean : ndarray (n_coef,)
        Coefficients of the fitted zero-mean potential.
    gamma : float
        Fitted ``1/beta``.
    factor : ndarray (n_coef + 1, r)
        ``Cov([theta; gamma]) = factor @ factor.T``; the last row is ``gamma`` (zero when beta is fixed).
    samples : ndarray (S, n_coef + 1), optional
        Draws of ``[theta; gamma]`` (bootstrap replicates); when present :meth:`sample` returns them.
    method : str
    dof : float
        Degrees of freedom of the interval quantile (``inf``: normal quantiles).
    noise_variance : float
        ``sigma^2`` per residual row.
    beta_estimated : bool
    beta_coarse : float, optional
        beta fitted at a coarser Hermite resolution (:func:`beta_at_coarser_resolution`); widens
        the beta interval by the basis-error contribution.
    noise_model : str
        ``'rows'`` (independent residual rows) or the snapshot-noise shape, ``'multiplicative'``
        or ``'additive'`` (:func:`fpirl.uncertainty._snapshot_noise.snapshot_posterior`).
    bias : ndarray (n_coef + 1,), optional
        Snapshot-noise model: the estimated second-order (errors-in-variables) bias of ``[theta; gamma]``,
        also a column of ``factor``.
    resolution : ndarray (n_coef + 1,), optional
        Snapshot-noise model on grids that can be halved: the Richardson estimate of the FE
        discretisation error of ``[theta; gamma]`` (:func:`fpirl.uncertainty._snapshot_noise.resolution_column`),
        the last column of ``factor`` (before ``basis``).
    basis : ndarray (n_coef + 1,), optional
        Snapshot-noise model with in-memory snapshots: the Richardson estimate of the Hermite basis
        error from a refit at a coarser Hermite resolution (:func:`fpirl.uncertainty._basis.basis_column`),
        the last column of ``factor``.
    beta_corrected : float, optional
        beta corrected for the basis error by the same rule (:func:`fpirl.uncertainty._basis.corrected_gamma`).
    """

    hermite: HermiteSpace
    mean: np.ndarray
    gamma: float
    factor: np.ndarray
    samples: np.ndarray | None = None
    method: str = "posterior"
    dof: float = np.inf
    noise_variance: float = float("nan")
    beta_estimated: bool = False
    beta_coarse: float | None = None
    noise_model: str = "rows"
    bias: np.ndarray | None = None
    resolution: np.ndarray | None = None
    basis: np.ndarray | None = None
    beta_corrected: float | None = None

    # ------------------------------------------------------------------------------------
    def coef_cov(self) -> np.ndarray:
        """Dense covariance of the coefficients (small problems and tests)."""
        F = self.factor[:-1]
        return F @ F.T

    def gamma_std(self) -> float:
        return float(np.sqrt(np.sum(self.factor[-1] ** 2)))

    def quantile(self, q: float) -> float:
        """Standardised quantile used for the intervals (normal, or Student t with ``dof``)."""
        return float(scipy.stats.norm.ppf(q) if not np.isfinite(self.dof) else scipy.stats.t.ppf(q, self.dof))

    def potential_std(self, coords) -> np.ndarray:
        """Posterior std of the zero-mean psi on the tensor grid ``coords``: ``sqrt(diag(B Sigma B^T))``.

        Sum factorisation on column batches of the factor (batch size bounded by ``_BATCH_BYTES``).
        """
        h = self.hermite
        mats = [ax.matrix(c, 0) for ax, c in zip(h.axes, coords)]
        shape = tuple(len(c) for c in coords)
        F = self.factor[:-1]
        var = np.zeros(shape)
        batch = max(1, _BATCH_BYTES // (8 * max(int(np.prod(shape)), h.n_coef)))
        for s in range(0, F.shape[1], batch):
            cols = np.ascontiguousarray(F[:, s:s + batch].T).reshape((-1,) + h.shape)
            var += np.sum(apply_along_axes(cols, mats) ** 2, axis=0)
        return np.sqrt(var)

    def sample(self, n: int, rng) -> np.ndarray:
        """``n`` draws of ``[theta; gamma]`` (shape ``(n, n_coef + 1)``); the stored samples if any."""
        if self.samples is not None:
            return self.samples
        rng = np.random.default_rng(rng)
        z = rng.standard_normal((n, self.factor.shape[1]))
        if np.isfinite(self.dof):  # Student t: scale mixture with the chi-square of the noise variance
            z *= np.sqrt(self.dof / rng.chisquare(self.dof, size=(n, 1)))
        return np.concatenate([self.mean, [self.gamma]])[None, :] + z @ self.factor.T

    def beta_interval(self, quantiles=BAND_QUANTILES) -> tuple[float, float]:
        """``(beta_lower, beta_upper)`` at the given quantiles (``1/gamma`` is monotone)."""
        if self.samples is not None:
            g = self.samples[:, -1]
            glo, ghi = np.quantile(g, quantiles)
        else:
            sd = self.gamma_std()
            glo, ghi = self.gamma + self.quantile(quantiles[0]) * sd, self.gamma + self.quantile(quantiles[1]) * sd
        lower, upper = (float(1.0 / ghi) if ghi > 0 else float("inf")), (float(1.0 / glo) if glo > 0 else float("inf"))
        if self.beta_coarse is not None:
            # basis error of psi leaking into 1/beta: widen towards beta - 2 (beta_coarse - beta), the
            # extrapolation that assumes the error falls by at least a third from 3/4 n_h to n_h elements
            beta = 1.0 / self.gamma
            ext = beta - BASIS_ERROR_FACTOR * (self.beta_coarse - beta)
            lower, upper = min(lower, ext), max(upper, ext)
        return lower, upper


def _conditioned_factor(K: np.ndarray, n_coef: int, hermite: HermiteSpace, mu: float, sigma2: float) -> np.ndarray:
    r"""Factor ``F`` with ``F F^T = sigma^2 (K^{-1} - c_0 c_0^T / mu)`` (zero-mean conditioning).

    ``K = C C^T`` (Cholesky), ``K^{-1} = C^{-T} C^{-1}``; the conditioning is the projection
    ``(I - c_0 m^T) C^{-T}`` (equal to the formula above because ``K c_0 = mu m``). Returns shape
    ``(n_coef + 1, len(K))`` with a zero last row when ``K`` has no ``gamma`` block.
    """
    n = K.shape[0]
    try:
        C = scipy.linalg.cholesky(K, lower=True, check_finite=False)
        F = scipy.linalg.solve_triangular(C, np.eye(n), lower=True, check_finite=False).T
    except (np.linalg.LinAlgError, scipy.linalg.LinAlgError):
        w, V = scipy.linalg.eigh(K, check_finite=False)
        keep = w > w.max() * 1e-13
        F = V[:, keep] / np.sqrt(w[keep])
    c0 = hermite.constant_mode().ravel()
    m = hermite.mean_functional().ravel()
    F[:n_coef] -= np.outer(c0, m @ F[:n_coef])
    F *= np.sqrt(sigma2)
    if n == n_coef:
        F = np.vstack([F, np.zeros((1, F.shape[1]))])
    return F


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
    dof_fit = float(np.trace(scipy.linalg.solve(K, K_data, assume_a="pos", check_finite=False)))
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

    Uses the estimator's normal equations ``system_`` (:class:`~fpirl.estimators._assembly.IncrementSystem`,
    in the space ``fit_space_`` of the axes ``fit_axes_`` psi varies along), ``penalty_``, ``beta_``
    and ``dt_``. The velocity rows have variance ``2 / (beta dt)``; with beta estimated,
    ``gamma = 1/beta`` gets the independent chi-square interval ``var(gamma) = 2 gamma^2 / n_rows``.
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
    return CoefficientPosterior(est.hermite_, np.asarray(est.coef_, dtype=float).ravel(), gamma, F,
                                method="posterior", noise_variance=sigma2, beta_estimated=estimated)


def _embed_columns(F: np.ndarray, space: HermiteSpace, kept, full: HermiteSpace) -> np.ndarray:
    """Columns of coefficients of ``space`` (axes ``kept`` of ``full``) as coefficients of ``full``,
    constant along the other axes (value dofs 1, slope dofs 0 on their single Hermite element)."""
    out = F.T.reshape((F.shape[1],) + space.shape)
    const = np.array([1.0, 0.0, 1.0, 0.0])
    for i in range(full.ndim):
        if i not in kept:
            if full.shape[i] != const.size:
                raise FpirlInputError(f"axis {i}: psi is constant there but its Hermite axis has {full.shape[i]} dofs")
            shape = [1] * (out.ndim + 1)
            shape[i + 1] = const.size
            out = np.expand_dims(out, i + 1) * const.reshape(shape)
    return out.reshape(F.shape[1], -1).T


def posterior(est, snapshots=None, rng=0, progress: bool = False) -> CoefficientPosterior:
    """The posterior of any fitted estimator (density VSI or increments).

    Density fits: with ``snapshots`` (the fitted data; DensitySnapshots or StreamingSnapshots) the
    snapshot-noise model (:func:`fpirl.uncertainty._snapshot_noise.snapshot_posterior`, seeded by ``rng``; any
    solver), else the row model (:func:`density_posterior`; assembled fits only). With beta estimated
    and in-memory snapshots, beta is also refitted at a coarser Hermite resolution and its interval
    widened by the basis error (:func:`beta_at_coarser_resolution`).
    """
    from ._snapshot_noise import snapshot_posterior
    from ..core.density import DensitySnapshots

    if getattr(est, "system_", None) is not None:
        return increments_posterior(est)
    post = density_posterior(est) if snapshots is None else snapshot_posterior(est, snapshots, rng=rng,
                                                                               progress=progress)
    if isinstance(snapshots, DensitySnapshots):
        from ._basis import add_basis_error

        add_basis_error(post, est, snapshots)
    return post


def estimate_uncertainty(est, method: str = "posterior", data=None, *, n_replicates: int | None = None, rng=0,
                         scheduler=None, n_jobs: int | None = None, progress: bool = False):
    """Front door: the posterior (``'posterior'``), the bootstrap over tracks (``'bootstrap'``) or None.

    Parameters
    ----------
    est : fitted estimator
    method : {'auto', 'posterior', 'bootstrap', 'none'}
        ``'auto'`` (the CLI's default) is ``'posterior'`` unless the fit is matrix-free and the
        posterior's estimated time (:func:`fpirl.uncertainty._snapshot_noise.matrix_free_posterior_seconds`) exceeds
        :data:`POSTERIOR_BUDGET_S`; then a warning and no uncertainty.
    data : DensitySnapshots, StreamingSnapshots or TrackTable, optional
        The fitted data: snapshots give the snapshot-noise posterior (any solver) and let it bound
        beta's basis error (:func:`beta_at_coarser_resolution`); the bootstrap needs the tracks.
    n_replicates, rng, scheduler, n_jobs, progress
        Bootstrap settings (``progress`` also shows the snapshot-noise draws) (:func:`fpirl.uncertainty._bootstrap.bootstrap_tracks`; replicates run as Dask tasks
        with ``scheduler``, else on ``n_jobs`` processes).
    """
    from ._bootstrap import DEFAULT_REPLICATES, bootstrap_tracks
    from ..core.density import DensitySnapshots
    from ..weakform.matfree import StreamingSnapshots
    from ..tracks.table import TrackTable

    if method not in METHODS:
        raise FpirlInputError(f"uncertainty must be one of {', '.join(METHODS)}, got {method!r}")
    if method == "auto":
        from ._snapshot_noise import matrix_free_posterior_seconds

        cost = matrix_free_posterior_seconds(est)
        if cost is not None and cost > POSTERIOR_BUDGET_S:
            warnings.warn(f"no posterior: on this matrix-free fit it would take about {cost / 60:.0f} min "
                          f"(one CG solve per noise draw); ask for it with --uncertainty posterior "
                          "(API: method='posterior')", RuntimeWarning, stacklevel=2)
            return None
        method = "posterior"
    if method == "none":
        return None
    if method == "bootstrap":
        if not isinstance(data, TrackTable):
            raise FpirlInputError("the bootstrap resamples whole tracks: it needs a trajectory table")
        return bootstrap_tracks(est, data, n_replicates or DEFAULT_REPLICATES, rng, scheduler=scheduler,
                                n_jobs=n_jobs, progress=progress)
    snapshots = data if isinstance(data, (DensitySnapshots, StreamingSnapshots)) else None
    solver = (getattr(est, "settings_", None) or {}).get("solver")
    if solver == "interpolated-flux":  # the posterior's band passes would need the exact 3^d-band operator
        warnings.warn("no posterior for an interpolated-flux fit: the snapshot-noise posterior needs the exact "
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
    from ._basis import coarse_refit

    inner = _inner(est)
    coarse = None if inner is None else coarse_refit(inner, snapshots)
    return None if coarse is None else float(coarse.beta_)


def samples_posterior(est, samples: np.ndarray, method: str = "bootstrap") -> CoefficientPosterior:
    """A sampled distribution (e.g. bootstrap replicates ``[theta; gamma]`` per row) around the fit."""
    samples = np.asarray(samples, dtype=float)
    h = est.hermite_
    if samples.ndim != 2 or samples.shape[1] != h.n_coef + 1 or samples.shape[0] < 2:
        raise FpirlInputError(f"need at least 2 samples of {h.n_coef + 1} values, got shape {samples.shape}")
    F = (samples - samples.mean(axis=0)).T / np.sqrt(samples.shape[0] - 1)
    return CoefficientPosterior(h, np.asarray(est.coef_, dtype=float).ravel(), 1.0 / float(est.beta_), F,
                                samples=samples, method=method,
                                beta_estimated=bool(est.settings_.get("beta_estimated", 0)))

