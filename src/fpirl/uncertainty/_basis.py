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
nodal std, the bands and beta's interval include it).

``beta_corrected`` (beta estimated) is Richardson's rule applied to ``gamma = 1/beta`` over the same
pair ``(n_c, n_h)``, with an order that checks its own regime (:func:`observed_order`): ``gamma`` is
also fitted at ``n_h - 1`` and ``n_h - 2`` elements per axis, and the order ``p_obs`` of the three
nearest counts ``(n_h - 2, n_h - 1, n_h)`` solves

.. math::
    \frac{\gamma_{n-2} - \gamma_{n-1}}{\gamma_{n-1} - \gamma_n}
    = \frac{(n-2)^{-p} - (n-1)^{-p}}{(n-1)^{-p} - n^{-p}}.

The correction uses ``p = max(p_obs, 3)`` (:data:`BETA_ORDER_FLOOR`; 3 is the order in ``h`` of the
cubic Hermite gradient's error, through which the basis error of ``psi`` enters the drift and so
``gamma``): where the last steps converge faster than order 3 (the error collapsing as ``psi`` comes
inside the Hermite space, or the faster order 4-7 seen at 6 elements) the correction shrinks to what
that convergence supports; where the three values are not monotone, or converge slower than order 3
(pre-asymptotic: at 4 elements the three counts reach down to 2, where ``p_obs`` is below 2), it stays
the order-3 correction, never larger. The floor was 2 until issue 20's fifth pass; on eight potentials
it was not designed on (benchmarks/bench_beta_rule.py, docs/benchmarks.md) the order-2 step overshot
at 4 elements (median error 6.9%, e.g. +11.4% -> -4.4% on a coupled 2-D potential), the order-3 step
cut it to 2.5% (17 of 32 cases within 3% against 3; worse in 6, among them the trigonometric ``psi``
the order-2 floor was designed on, -0.3% -> +3.3%). The order is measured on consecutive
counts because it is a local quantity (here it rose from about 1 at 2-3 elements to 4 and more at
6-8); the step itself stays the ``3/4`` pair, whose ratio keeps the extrapolation's amplification
``1 / (r^p - 1) <= 1.05`` bounded (``r >= 5/4``, the smallest at 5 elements).
"""

from __future__ import annotations

import warnings

import numpy as np

from ..core._errors import FpirlInputError
from ..core._tensor import apply_along_axes
from ..estimators.identify import PotentialEstimator
from ._resolution import _nodal_energy
from ._snapshot_noise import _density_estimator
from ._time_step import noise_sd_gamma

#: Order in the Hermite element size assumed by the Richardson rule for the basis error of ``psi``
#: (the default floor of :func:`observed_order`).
BASIS_ORDER = 2.0
#: Floor of the order used for ``beta_corrected`` (:func:`beta_order`): the order of the cubic Hermite
#: gradient's error (module doc).
BETA_ORDER_FLOOR = 3.0
#: Upper end of the observed order searched by :func:`observed_order` (beyond it the correction is ~0).
MAX_ORDER = 64.0


def coarser_elements(elements, periodic: bool) -> tuple[int, ...] | None:
    """``round(3 n_h / 4)`` per axis (at least one element fewer), or None below the minimum."""
    n = np.asarray(elements, dtype=int)
    coarse = np.minimum(np.rint(0.75 * n).astype(int), n - 1)
    if np.any(coarse < (2 if periodic else 1)):
        return None
    return tuple(int(c) for c in coarse)


def fewer_elements(elements, periodic: bool, k: int) -> tuple[int, ...] | None:
    """``n_h - k`` elements per axis, or None below the minimum (2 periodic, else 1)."""
    n = np.asarray(elements, dtype=int) - int(k)
    if np.any(n < (2 if periodic else 1)):
        return None
    return tuple(int(c) for c in n)


def coarse_refit(inner, snapshots, elements=None):
    """The density estimator refitted with ``elements`` Hermite elements per axis (default
    :func:`coarser_elements`; same data and settings), or None. The refit re-uses the data moments of
    ``inner`` (:class:`fpirl.weakform.assembly.DataMoments`) where ``snapshots`` are its data."""

    if not isinstance(inner, PotentialEstimator):
        return None
    coarse = coarser_elements(inner.hermite_.elements, inner.hermite_.periodic) if elements is None else elements
    if coarse is None:
        return None
    params = {k: getattr(inner, k) for k in ("beta", "estimate_beta", "ridge", "time_scheme",
                                             "quadrature_points", "normalize", "correct_noise")}
    if inner.estimate_beta:  # beta from the same block means as the fine fit (fpirl.estimators._beta_noise)
        params["beta_block"] = int(getattr(inner, "beta_coarsening_", 1))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # the data moments of the fine fit (same snapshots and settings) are not recomputed
            return PotentialEstimator(hermite_elements=coarse, **params).fit(
                snapshots, _moments=getattr(inner, "_moments", None))
    except FpirlInputError:
        return None


def carry_coefficients(coef: np.ndarray, coarse, fine, batch: bool = False) -> np.ndarray:
    """Hermite interpolant in ``fine`` of the ``coarse``-space potential ``coef`` (mixed partials at the nodes):
    shape ``fine.shape``; with ``batch``, ``coef`` is ``(B, coarse.n_coef)`` and the result ``(B, fine.n_coef)``."""
    coef = np.asarray(coef, dtype=float).reshape((-1,) + coarse.shape)
    out = np.zeros((coef.shape[0],) + fine.shape)
    nodes = [fa.nodes for fa in fine.axes]
    for alpha in np.ndindex(*(2,) * fine.ndim):
        mats = [ca.matrix(x, a) for ca, x, a in zip(coarse.axes, nodes, alpha)]
        out[(slice(None),) + tuple(slice(a, None, 2) for a in alpha)] = apply_along_axes(coef, mats)
    return out.reshape(coef.shape[0], -1) if batch else out[0]


def basis_column(inner, coarse_est, noise_factor: np.ndarray, grid, estimated: bool,
                 confirmed: float = 1.0) -> np.ndarray:
    """Richardson estimate of the basis error of ``[theta; gamma]`` (module doc), noise removed by shrinkage.

    ``noise_factor``: the noise columns of the posterior factor (coefficients, ``(n_coef, S)``); their energy is
    scaled by ``confirmed`` (:func:`fpirl.uncertainty._resolution.confirmed_noise`: misfit taken for noise).
    Returns ``(n_coef + 1,)`` with the gamma entry zero when beta is given.
    """
    h, hc = inner.hermite_, coarse_est.hermite_
    theta = np.asarray(inner.coef_, dtype=float).ravel()
    diff = theta - carry_coefficients(coarse_est.coef_, hc, h).ravel()
    dg = 1.0 / inner.beta_ - 1.0 / coarse_est.beta_
    ratio = float(np.mean(np.asarray(h.elements, float) / np.asarray(hc.elements, float)))
    scale = 1.0 / (ratio**BASIS_ORDER - 1.0)
    energy = _nodal_energy(diff, h, grid)
    noise = float(confirmed) * _nodal_energy(noise_factor, h, grid)
    shrink = float(np.sqrt(max(0.0, 1.0 - noise / energy))) if energy > 0 else 0.0
    col = np.append(diff, dg if estimated else 0.0) * scale * shrink
    return col


def _difference_ratio(counts, p: float) -> float:
    """``(N_2^-p - N_1^-p) / (N_1^-p - N_0^-p)`` for element counts ``(N_0, N_1, N_2)``, ``N_0 > N_1 > N_2``."""
    n0, n1, n2 = (float(c) for c in counts)
    return float(((n1 / n2) ** p - 1.0) / (1.0 - (n1 / n0) ** p))  # divided through by N_1^-p: no underflow


def observed_order(counts, gammas, floor: float = BASIS_ORDER) -> float:
    """Order of convergence of ``gamma`` in the element count, from three counts, at least ``floor``.

    Parameters
    ----------
    counts : three floats ``N_0 > N_1 > N_2``
        (Mean) Hermite elements per axis of the fits.
    gammas : three floats
        ``gamma = 1/beta`` fitted with those counts.
    floor : float
        Returned when the values are not monotone (``(g_2 - g_1)(g_1 - g_0) <= 0``) or converge no
        faster than order ``floor``.

    Returns
    -------
    float
        ``p`` in ``[floor, MAX_ORDER]`` solving ``(g_2 - g_1)/(g_1 - g_0) = (N_2^-p - N_1^-p)/(N_1^-p - N_0^-p)``
        (the ratio of successive differences of ``g = g_inf + C N^-p``; increasing in ``p``).
    """
    g0, g1, g2 = (float(g) for g in gammas)
    da, db = g2 - g1, g1 - g0
    if not da * db > 0:
        return float(floor)
    ratio = da / db
    if ratio <= _difference_ratio(counts, floor):
        return float(floor)
    if ratio >= _difference_ratio(counts, MAX_ORDER):
        return float(MAX_ORDER)
    lo, hi = float(floor), MAX_ORDER  # bisection on the increasing ratio: 40 halvings, |error| < 64 / 2^40
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _difference_ratio(counts, mid) < ratio else (lo, mid)
    return 0.5 * (lo + hi)


def richardson(fine: float, coarse: float, ratio: float, order: float) -> float:
    """Richardson's extrapolation ``f - (f_c - f) / (r^p - 1)`` of a quantity ``f = f_inf + C N^-p``
    known at ``N`` (``fine``) and ``N / r`` (``coarse``) elements."""
    return float(fine - (coarse - fine) / (ratio**order - 1.0))


def corrected_gamma(inner, coarse_est, order: float = BASIS_ORDER) -> float:
    """``1/beta`` corrected for the basis error by Richardson's rule of the module doc with ``order`` (no shrinkage)."""
    ratio = float(np.mean(np.asarray(inner.hermite_.elements, float) / np.asarray(coarse_est.hermite_.elements, float)))
    return richardson(1.0 / inner.beta_, 1.0 / coarse_est.beta_, ratio, order)


def beta_order(inner, coarse_est, snapshots) -> float:
    """The order ``max(p_obs, 3)`` of ``beta_corrected`` (module doc): ``gamma`` at ``n_h - 1`` and
    ``n_h - 2`` elements (refits, or ``coarse_est`` where it has that count), :func:`observed_order`
    with the floor :data:`BETA_ORDER_FLOOR`, which is also returned when one of them cannot be fitted."""
    h = inner.hermite_
    fits = {tuple(coarse_est.hermite_.elements): coarse_est}
    gammas, counts = [1.0 / inner.beta_], [float(np.mean(h.elements))]
    for k in (1, 2):
        el = fewer_elements(h.elements, h.periodic, k)
        if el is None:
            return BETA_ORDER_FLOOR
        est = fits.get(el) or coarse_refit(inner, snapshots, el)
        if est is None:
            return BETA_ORDER_FLOOR
        gammas.append(1.0 / est.beta_)
        counts.append(float(np.mean(el)))
    return observed_order(counts, gammas, floor=BETA_ORDER_FLOOR)


def remaining_bias_fraction(bias_gamma: float, gamma_shift: float | None, coarsening: int = 1) -> float:
    """Fraction ``clip(1 - |shift| / |b|, 0, 1)`` of the predicted noise bias ``b`` of ``1/beta`` that a
    noise-corrected fit still carries, ``shift`` being how far the correction moved ``1/beta``.

    0 when ``1/beta`` came from block-averaged data (``coarsening > 1``) or the shift is unknown
    (matrix-free paths); 1 when the correction did not move ``1/beta`` (e.g. smooth data, where the
    snapshot model's "noise" is mostly model error).
    """
    if coarsening > 1 or gamma_shift is None or not np.isfinite(gamma_shift):
        return 0.0
    if bias_gamma == 0:
        return 1.0
    return float(np.clip(1.0 - abs(gamma_shift) / abs(bias_gamma), 0.0, 1.0))


def add_basis_error(post, est, snapshots) -> None:
    """Refit at :func:`coarser_elements` Hermite elements and add the basis error to ``post`` (in place).

    ``beta_coarse`` and ``beta_corrected`` (order :func:`beta_order`) when beta is estimated; on the snapshot-noise model the
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
        g = corrected_gamma(inner, coarse, beta_order(inner, coarse, snapshots))
        post.beta_corrected = float(1.0 / g) if g > 0 else None
    if post.noise_model == "rows":
        return
    h = post.hermite
    n = h.n_coef
    n_noise = post.factor.shape[1] - 1 - int(post.resolution is not None)  # the noise columns, then bias, resolution
    if post.beta_corrected is not None:  # the correction's step in noise standard deviations of gamma
        sd = noise_sd_gamma(post)
        post.beta_correction_z = float(abs(1.0 / post.beta_corrected - post.gamma) / sd) if sd > 0 else float("inf")
    correction = getattr(inner, "noise_correction_", None)
    if post.beta_estimated and post.bias is not None and correction is not None:
        # the fit removed the noise's bias from 1/beta (corrected least squares, fpirl.weakform.noise_bias):
        # gamma keeps only the part of the snapshot model's second-order bias that the correction did not
        # remove (in magnitude; all of it is removed with block-averaged data); psi keeps the whole column
        left = remaining_bias_fraction(post.bias[-1], correction.get("gamma_shift"),
                                       getattr(inner, "beta_coarsening_", 1))
        post.factor[-1, n_noise] *= left
        post.bias[-1] *= left
    col = basis_column(inner, coarse, post.factor[:n, :n_noise], snapshots.grid, post.beta_estimated,
                       1.0 if post.noise_confirmed is None else post.noise_confirmed)
    col[:n] -= h.constant_mode().ravel() * float(h.mean_functional().ravel() @ col[:n])
    post.basis = col
    post.factor = np.hstack([post.factor, col[:, None]])
