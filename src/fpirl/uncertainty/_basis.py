r"""The Hermite basis error in the posterior: a refit at a coarser Hermite resolution (issue 20).

``psi`` outside the Hermite space leaves a basis error that no noise model sees: with 4 elements
and 5% noise the noise-only 90% band covered the true ``psi`` at 67-74% of the nodes (2-D,
spectral-solver data, docs/benchmarks.md). The fit is repeated with :func:`coarser_elements`
(``n_c = round(3 n_h / 4)``) Hermite elements per axis, same data and settings, and the coarse
``x_c = [theta_c; gamma_c]`` is carried into the fine space (Hermite interpolation: values and
mixed first partials of the coarse ``psi`` at the fine Hermite nodes). If the error falls like
``n^{-p}``, Richardson's rule gives the error of the fine fit

.. math::
    x - x_h \approx -\frac{x_c - x_h}{(n_h / n_c)^p - 1},\qquad p = 2 \ (:data:`BASIS_ORDER`),

(the order measured for beta from 3 to 4 elements was 2.3, higher beyond: ``p = 2`` is the
conservative choice at coarse resolution). ``x_h - x_c`` also carries noise; as for the resolution
column the noise part is removed by the shrinkage ``s = sqrt(max(0, 1 - V / E))``
(``V`` the nodal posterior variance of ``psi_h`` summed over nodes, ``E`` the nodal energy of
``psi_h - psi_c``), so at fine resolution, where the difference is mostly noise, the column
vanishes. The column enters the factor of the posterior as one more systematic column (so the
nodal std, the bands and beta's interval include it), and ``gamma`` corrected by the same rule
gives the basis-error-corrected beta (``beta_corrected``).
"""

from __future__ import annotations

import warnings

import numpy as np

from ..core._errors import FpirlInputError
from ..core._tensor import apply_along_axes
from ..estimators.identify import PotentialEstimator
from ._snapshot_noise import _density_estimator

#: Order in the Hermite element size assumed by the Richardson rule for the basis error.
BASIS_ORDER = 2.0


def coarser_elements(elements, periodic: bool) -> tuple[int, ...] | None:
    """``round(3 n_h / 4)`` per axis (at least one element fewer), or None below the minimum."""
    n = np.asarray(elements, dtype=int)
    coarse = np.minimum(np.rint(0.75 * n).astype(int), n - 1)
    if np.any(coarse < (2 if periodic else 1)):
        return None
    return tuple(int(c) for c in coarse)


def coarse_refit(inner, snapshots):
    """The density estimator refitted with :func:`coarser_elements` (same data and settings), or None."""

    if not isinstance(inner, PotentialEstimator):
        return None
    coarse = coarser_elements(inner.hermite_.elements, inner.hermite_.periodic)
    if coarse is None:
        return None
    params = {k: getattr(inner, k) for k in ("beta", "estimate_beta", "ridge", "time_scheme",
                                             "quadrature_points", "normalize")}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return PotentialEstimator(hermite_elements=coarse, **params).fit(snapshots)
    except FpirlInputError:
        return None


def carry_coefficients(coef: np.ndarray, coarse, fine) -> np.ndarray:
    """Hermite interpolant in ``fine`` of the ``coarse``-space potential ``coef`` (mixed partials at the nodes)."""
    coef = np.asarray(coef, dtype=float).reshape(coarse.shape)
    out = np.zeros(fine.shape)
    nodes = [fa.nodes for fa in fine.axes]
    for alpha in np.ndindex(*(2,) * fine.ndim):
        mats = [ca.matrix(x, a) for ca, x, a in zip(coarse.axes, nodes, alpha)]
        out[tuple(slice(a, None, 2) for a in alpha)] = apply_along_axes(coef, mats)
    return out


def basis_column(inner, coarse_est, noise_factor: np.ndarray, grid, estimated: bool) -> np.ndarray:
    """Richardson estimate of the basis error of ``[theta; gamma]`` (module doc), noise removed by shrinkage.

    ``noise_factor``: the noise columns of the posterior factor (coefficients, ``(n_coef, S)``).
    Returns ``(n_coef + 1,)`` with the gamma entry zero when beta is given.
    """
    h, hc = inner.hermite_, coarse_est.hermite_
    theta = np.asarray(inner.coef_, dtype=float).ravel()
    diff = theta - carry_coefficients(coarse_est.coef_, hc, h).ravel()
    dg = 1.0 / inner.beta_ - 1.0 / coarse_est.beta_
    ratio = float(np.mean(np.asarray(h.elements, float) / np.asarray(hc.elements, float)))
    scale = 1.0 / (ratio**BASIS_ORDER - 1.0)
    mats = [ax.matrix(c) for ax, c in zip(h.axes, grid.coords)]

    def nodal(cols):
        v = apply_along_axes(cols.T.reshape((-1,) + h.shape), mats)
        return v - v.reshape(v.shape[0], -1).mean(axis=1).reshape((-1,) + (1,) * grid.ndim)

    energy = float(np.sum(nodal(diff[:, None]) ** 2))
    noise = float(np.sum(nodal(noise_factor) ** 2))
    shrink = float(np.sqrt(max(0.0, 1.0 - noise / energy))) if energy > 0 else 0.0
    col = np.append(diff, dg if estimated else 0.0) * scale * shrink
    return col


def corrected_gamma(inner, coarse_est) -> float:
    """``1/beta`` corrected for the basis error by the Richardson rule of the module doc (no shrinkage)."""
    ratio = float(np.mean(np.asarray(inner.hermite_.elements, float) / np.asarray(coarse_est.hermite_.elements, float)))
    g, gc = 1.0 / inner.beta_, 1.0 / coarse_est.beta_
    return g - (gc - g) / (ratio**BASIS_ORDER - 1.0)


def add_basis_error(post, est, snapshots) -> None:
    """Refit at :func:`coarser_elements` Hermite elements and add the basis error to ``post`` (in place).

    ``beta_coarse`` and ``beta_corrected`` when beta is estimated; on the snapshot-noise model the
    basis column (:func:`fpirl.uncertainty._basis.basis_column`) is appended to the factor.
    """

    try:
        inner = _density_estimator(est)
    except FpirlInputError:
        return
    coarse = coarse_refit(inner, snapshots)
    if coarse is None:
        return
    if post.beta_estimated:
        post.beta_coarse = float(coarse.beta_)
        g = corrected_gamma(inner, coarse)
        post.beta_corrected = float(1.0 / g) if g > 0 else None
    if post.noise_model == "rows":
        return
    h = post.hermite
    n = h.n_coef
    n_noise = post.factor.shape[1] - 1 - int(post.resolution is not None)
    col = basis_column(inner, coarse, post.factor[:n, :n_noise], snapshots.grid, post.beta_estimated)
    col[:n] -= h.constant_mode().ravel() * float(h.mean_functional().ravel() @ col[:n])
    post.basis = col
    post.factor = np.hstack([post.factor, col[:, None]])
