r"""beta of the increments estimator read as that of a continuous diffusion observed every ``dt`` (local
linearisation of the one-step variance).

The increments estimator fits the one-step Gaussian :math:`x_{k+1} \sim N(x_k - \nabla\psi(x_k)\,\Delta t,\
2\Delta t/\beta)` (eqs. ``SDE``, ``gaussian_transition``): the paper's MDP transition, exact for tracks that are an
Euler chain at the interval :math:`\Delta t`. Tracks sampled every :math:`\Delta t` from the continuous diffusion
:math:`dx = -\nabla\psi\,dt + \sqrt{2/\beta}\,dW` have a smaller one-step covariance where :math:`\psi` is convex:
with the drift linearised at the start point (Hessian :math:`H` of :math:`\psi`, eigenvalues :math:`\lambda_j`;
Ozaki's local linearisation),

.. math::
    \operatorname{Cov}(x_{k+1} \mid x_k) = \frac{2}{\beta} \int_0^{\Delta t} e^{-2Hs}\,ds
    = \frac{2\Delta t}{\beta}\,\varphi(H\Delta t),\qquad \varphi(z) = \frac{1 - e^{-2z}}{2z}
    = 1 - z + \tfrac23 z^2 - \dots,

so on such tracks the one-step fit returns :math:`\hat\beta \approx \beta / \bar\varphi`, :math:`\bar\varphi` the
mean of :math:`\varphi(\lambda_j\Delta t)` over the drift axes and the transitions: too high by about
:math:`\langle\Delta\psi\rangle\,\Delta t / d` (measured on twelve simulated diffusions, periodic and walled, with
``lambda dt`` up to 0.09: +0.4% to +9.1%, the one-step interval missing in 11; docs/benchmarks.md). The continuous
diffusion's beta is :math:`\hat\beta\,\bar\varphi` with :math:`\psi`'s fitted Hessian (within 0.6% on those twelve).
The tracks alone rarely tell the two readings apart, so ``beta_`` stays the one-step value and the continuous one
is reported beside it (``beta_continuous_``, attr ``beta_continuous``), its difference a column of beta's
interval (:func:`fpirl.uncertainty.increments_posterior`), which then covers either reading.

It applies where the tracks may be a diffusion observed at ``dt`` on every drift axis: not to velocity actions
(their rows are finite differences of the positions), nor with a mobility, a second lag or a noise correction
(models of real tracks' measurement noise and persistence).
"""

from __future__ import annotations

import numpy as np

#: relative finite-difference step of the Hessian (of the box's span per axis); the Hermite psi is piecewise cubic
HESSIAN_STEP = 1e-5


def _phi(z: np.ndarray) -> np.ndarray:
    """``(1 - exp(-2 z)) / (2 z)``, 1 at 0 (its series below ``1e-6``)."""
    z = np.asarray(z, dtype=float)
    small = np.abs(z) < 1e-6
    safe = np.where(small, 1.0, z)
    return np.where(small, 1.0 - z + (2.0 / 3.0) * z * z, -np.expm1(-2.0 * safe) / (2.0 * safe))


def time_step_factor(gradient, points: np.ndarray, axes, dt: float, span: np.ndarray) -> float:
    r"""``phi_bar``: the mean of :math:`\varphi(\lambda_j \Delta t)` over ``points`` and the eigenvalues of
    :math:`\psi`'s Hessian on ``axes`` (module doc).

    Parameters
    ----------
    gradient : callable
        ``gradient(points (n, D)) -> (n, D)``, the gradient of the fitted psi.
    points : ndarray (n, D)
        Start points of the transitions that beta was estimated from.
    axes : sequence of int
        The drift axes (``d`` of them).
    dt : float
    span : ndarray (D,)
        The box's length per axis (for the finite-difference step).
    """
    axes = list(axes)
    x = np.asarray(points, dtype=float)
    if x.shape[0] == 0 or not axes:
        return 1.0
    d = len(axes)
    H = np.empty((x.shape[0], d, d))
    for j, a in enumerate(axes):
        h = HESSIAN_STEP * float(span[a])
        up, down = x.copy(), x.copy()
        up[:, a] += h
        down[:, a] -= h
        H[:, :, j] = (np.asarray(gradient(up))[:, axes] - np.asarray(gradient(down))[:, axes]) / (2.0 * h)
    H = 0.5 * (H + np.swapaxes(H, 1, 2))
    return float(np.mean(_phi(np.linalg.eigvalsh(H) * dt)))
