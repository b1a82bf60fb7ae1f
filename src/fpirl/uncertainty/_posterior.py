"""The distribution of the fitted Hermite coefficients and of ``1/beta``
(:class:`CoefficientPosterior`), which every uncertainty method returns: the closed-form and
snapshot-noise posteriors (:mod:`fpirl.uncertainty.estimate`,
:mod:`fpirl.uncertainty._snapshot_noise`) and the bootstrap (:mod:`fpirl.uncertainty._bootstrap`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.linalg
import scipy.special

from ..core._errors import FpirlInputError
from ..core._tensor import apply_along_axes
from ..core.hermite import HermiteSpace

#: Lower and upper quantile of the reported credible bands.
BAND_QUANTILES = (0.05, 0.95)
#: beta's interval reaches to ``1 / (gamma - BASIS_ERROR_FACTOR (gamma_coarse - gamma))``, ``gamma = 1/beta``
#: (:func:`widened_by_basis_error`, :func:`fpirl.uncertainty.beta_at_coarser_resolution`).
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
    beta_pilot : float, optional
        beta from block means at the default Hermite elements, where the fit's elements (chosen by
        cross-validation) are finer than the block grid resolves (``beta_pilot_`` of
        :class:`fpirl.estimators.PotentialEstimator`); the interval reaches it.
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
    beta_correction_z : float, optional
        ``|1/beta_corrected - 1/beta|`` in standard deviations of ``1/beta`` under the snapshot noise alone
        (the factor's noise columns): how far the correction stands out of the noise
        (:func:`fpirl.uncertainty._beta_point.corrected_beta_fit`).
    beta_bounds : tuple, optional
        ``(beta_lower, beta_upper)`` fixed when the posterior was moved to a corrected point estimate
        (:meth:`beta_interval` returns it: the interval of the fitted beta, reaching the corrected one).
    replicates : int, optional
        Parametric bootstrap: the tables simulated and refitted, all stages
        (:func:`fpirl.uncertainty._parametric.parametric_bootstrap`).
    time_step : ndarray (n_coef + 1,), optional
        beta estimated from in-memory snapshots (assembled midpoint or explicit fit): the time-step error of
        ``gamma``, the fit minus its refit with Simpson's rows (:mod:`fpirl.uncertainty._time_step`; zero psi
        entries), the last column of ``factor``. Beta given, on the posterior of a fit switched to Simpson's rows:
        psi's step between the two rules (zero ``gamma`` entry).
    psi_step : ndarray (n_coef,), optional
        Beta given: psi's coefficients of the midpoint fit minus those of its Simpson refit (kept for the
        switched fit's column, :func:`fpirl.uncertainty._time_step.keep_time_step`).
    beta_simpson : float, optional
        beta of that refit.
    time_step_z : float, optional
        ``|gamma - 1/beta_simpson|`` in standard deviations of ``gamma`` under the snapshot noise alone (beta given:
        psi's step, :func:`fpirl.uncertainty._time_step.psi_step_z`).
    noise_confirmed : float, optional
        Snapshot-noise posterior: the share of ``noise_variance`` the snapshots' time differences confirm
        (:func:`fpirl.uncertainty._resolution.confirmed_noise`; scales the noise terms of the systematic columns'
        shrinkage).
    simpson_fit : PotentialEstimator, optional
        That refit (:func:`fpirl.uncertainty._time_step.simpson_point` may make it the point estimate).
    discretisation_unsimulated : bool
        Beta estimated: its discretisation bias (time step and grid) was to be simulated and removed, but the
        simulation is over the size limit (:func:`fpirl.uncertainty._discretisation.simulation_too_large`): beta and
        its interval leave that bias out.
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
    beta_pilot: float | None = None
    noise_model: str = "rows"
    bias: np.ndarray | None = None
    resolution: np.ndarray | None = None
    basis: np.ndarray | None = None
    beta_corrected: float | None = None
    beta_correction_z: float | None = None
    beta_bounds: tuple | None = None
    replicates: int | None = None
    time_step: np.ndarray | None = None
    beta_simpson: float | None = None
    time_step_z: float | None = None
    psi_step: np.ndarray | None = field(default=None, repr=False)
    noise_confirmed: float | None = None
    simpson_fit: object = field(default=None, repr=False)
    discretisation_unsimulated: bool = False

    # ------------------------------------------------------------------------------------
    def coef_cov(self) -> np.ndarray:
        """Dense covariance of the coefficients (small problems and tests)."""
        F = self.factor[:-1]
        return F @ F.T

    def gamma_std(self) -> float:
        return float(np.sqrt(np.sum(self.factor[-1] ** 2)))

    def quantile(self, q: float) -> float:
        """Standardised quantile used for the intervals (normal, or Student t with ``dof``)."""
        return float(scipy.special.ndtri(q) if not np.isfinite(self.dof) else scipy.special.stdtrit(self.dof, q))

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
        """``(beta_lower, beta_upper)`` at the given quantiles (``1/gamma`` is monotone); :attr:`beta_bounds` when set."""
        if self.beta_bounds is not None and tuple(quantiles) == tuple(BAND_QUANTILES):
            return self.beta_bounds
        if self.samples is not None:
            g = self.samples[:, -1]
            glo, ghi = np.quantile(g, quantiles)
        else:
            sd = self.gamma_std()
            glo, ghi = self.gamma + self.quantile(quantiles[0]) * sd, self.gamma + self.quantile(quantiles[1]) * sd
        lower, upper = beta_bounds(glo, ghi)
        if self.beta_coarse is not None:
            lower, upper = widened_by_basis_error((lower, upper), self.gamma, 1.0 / self.beta_coarse)
        if self.beta_pilot is not None:  # the block grid's error at a Hermite space finer than it resolves
            lower, upper = min(lower, self.beta_pilot), max(upper, self.beta_pilot)
        return lower, upper


def beta_bounds(gamma_lower: float, gamma_upper: float) -> tuple[float, float]:
    """beta's interval ``(1 / gamma_upper, 1 / gamma_lower)`` from one of ``gamma = 1/beta`` (monotone); an end of
    ``gamma`` at or below 0 leaves beta unbounded there (``inf``)."""
    return ((float(1.0 / gamma_upper) if gamma_upper > 0 else float("inf")),
            (float(1.0 / gamma_lower) if gamma_lower > 0 else float("inf")))


def widened_by_basis_error(bounds, gamma: float, gamma_coarse: float) -> tuple[float, float]:
    r"""``bounds`` of beta widened to reach ``1 / (gamma - F (gamma_c - gamma))``, ``F`` = :data:`BASIS_ERROR_FACTOR`.

    The basis error of psi leaks into ``gamma = 1/beta`` (the unknown of the least squares, eq.
    vsi_regression); the fit at 3/4 of the Hermite elements, ``gamma_c``, lies on the same side further out,
    and the extrapolation covers the truth whenever the error falls by at least a third from ``3 n_h / 4`` to
    ``n_h`` elements. It is made in ``gamma``, where the error enters, so that the bound stays positive: where
    ``gamma - F (gamma_c - gamma) <= 0`` the data do not bound beta from above (``upper = inf``). For small
    steps it equals the extrapolation in beta, ``beta - F (beta_c - beta)``, to first order.
    """
    lower, upper = bounds
    g_ext = gamma - BASIS_ERROR_FACTOR * (gamma_coarse - gamma)
    ext = 1.0 / g_ext if g_ext > 0 else float("inf")
    return min(lower, ext), max(upper, ext)


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
