r"""A generalisation of the paper's model tried on the real tracks: velocity-dependent mobility.

Real tracks show noise that grows with speed and depends on heading, which a constant ``beta``
cannot express. The generalisation keeps psi, the policy and the reward meaningful by putting a
*mobility* ``g(a) > 0`` in front of both the drift and the noise of the velocity:

.. math::

    da = \big[-g(a)\,\nabla_a\psi(a) + \beta^{-1}\nabla_a g(a)\big]\,dt + \sqrt{2 g(a)/\beta}\;dW .

Its Fokker-Planck equation is :math:`\partial_t p = \nabla_a\cdot\big(g\,(p\nabla_a\psi + \beta^{-1}\nabla_a p)\big)`,
so :math:`p \propto e^{-\beta\psi}` is still stationary for every ``g``: the Boltzmann policy
(eq. ``boltzmann_policy``), ``Q = -psi`` and the inverse-Bellman reward keep their meaning; ``g = 1`` is
the paper's SDE (eq. ``SDE``). The mobility only changes how fast (and how noisily) velocities relax.

Fit (on training tracks only): (1) psi and beta by the increments estimator (velocity-only psi);
(2) ``log g`` a Legendre polynomial (total degree chosen by CV, at most 3) in the velocity scaled to
the box, by maximum likelihood of the squared residuals (a Gamma GLM with log link, Newton steps),
normalised to mean ``log g = 0`` over the data and bounded to ``|log g| <= 3`` (``(g, psi, beta) -> (c g, psi / c, c beta)`` leaves the process unchanged); (3) psi and
beta refitted by weighted least squares with ``g`` fixed (weights ``1/g``, the ``grad g / beta`` term
moved to the left), steps (2)-(3) twice. The one-step predictive is the Euler-Maruyama Gaussian
:math:`a_{k+1} \sim \mathcal N(a_k + [\dots]\Delta t,\ 2 g(a_k)\Delta t/\beta\ I)`.
"""

from __future__ import annotations

import numpy as np

from ...tracks.steps import Transitions, gaussian_logpdf
from ...evaluation.adequacy import _legendre_design, _multi_indices
from ...core.hermite import HermiteSpace
from ._model import VelocityPotentialEstimator, _action_table
from ...tracks.steps import observed_transitions

LOG_G_DEGREE = 3
#: |log g| never exceeds this (mobility within a factor e^3 of its typical value)
LOG_G_BOUND = 3.0


def _row_kron(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a[:, :, None] * b[:, None, :]).reshape(a.shape[0], -1)


class MobilityModel:
    """Velocity-only psi with a velocity-dependent mobility (module docstring).

    Parameters
    ----------
    hermite_elements : int
        Hermite elements per velocity axis for psi.
    ridge : float
        Relative weight of the ``int |grad psi|^2`` penalty.
    degree : int
        Total degree of the polynomial ``log g``.
    """

    def __init__(self, hermite_elements=3, ridge=1e-2, degree=LOG_G_DEGREE, iterations=2):
        self.hermite_elements = hermite_elements
        self.ridge = ridge
        self.degree = degree
        self.iterations = iterations

    # --- pieces ------------------------------------------------------------------------
    def _u(self, a):
        return np.clip(2.0 * (a - self.lower_) / (self.upper_ - self.lower_) - 1.0, -1.0, 1.0)

    def log_g(self, a: np.ndarray) -> np.ndarray:
        """``log g``, bounded to ``[-LOG_G_BOUND, LOG_G_BOUND]`` (a polynomial extrapolates wildly
        where the data are sparse; bounded features keep one tracking jump from dominating)."""
        return np.clip(_legendre_design(self._u(a), self.alphas_, self.degree) @ self.c_, -LOG_G_BOUND, LOG_G_BOUND)

    def grad_log_g(self, a: np.ndarray) -> np.ndarray:
        h = 1e-6 * (self.upper_ - self.lower_)
        out = np.empty_like(a)
        for j in range(a.shape[1]):
            e = np.zeros(a.shape[1])
            e[j] = h[j]
            out[:, j] = (self.log_g(a + e) - self.log_g(a - e)) / (2 * h[j])
        inside = (a > self.lower_) & (a < self.upper_)
        return np.where(inside, out, 0.0)  # log g is constant along clipped directions

    def _design(self, a):
        """Gradient design ``B[j] (n, n_coef)``: d psi / d a_j at the points."""
        mats = [(ax.matrix(a[:, b], 0), ax.matrix(a[:, b], 1)) for b, ax in enumerate(self.space_.axes)]
        out = []
        for j in range(a.shape[1]):
            m = mats[0][int(j == 0)]
            for b in range(1, a.shape[1]):
                m = _row_kron(m, mats[b][int(j == b)])
            out.append(m)
        return out

    def drift(self, a: np.ndarray) -> np.ndarray:
        a = np.clip(a, self.lower_, self.upper_)
        g = np.exp(self.log_g(a))[:, None]
        grad_psi = self.space_.gradient(self.coef_, a)
        return -g * grad_psi + g * self.grad_log_g(a) / self.beta_

    # --- fit ---------------------------------------------------------------------------
    def _fit_log_g(self, U, q):
        """Gamma GLM (log link) of the per-transition variance ratios q: minimise the convex
        ``f(c) = mean(h + q e^{-h}) + kappa |c_{1:}|^2``, ``h = U c``, by Newton steps with backtracking."""
        n, m = U.shape
        kappa = 1e-6
        pen = np.full(m, kappa)
        pen[0] = 0.0

        def objective(c):
            h = np.clip(U @ c, -60.0, 60.0)
            return float(np.mean(h + q * np.exp(-h)) + np.sum(pen * c * c))

        c = np.zeros(m)
        c[0] = np.log(max(float(np.mean(q)), 1e-300))
        f = objective(c)
        for _ in range(50):
            h = np.clip(U @ c, -60.0, 60.0)
            w = q * np.exp(-h)
            grad = U.T @ (1.0 - w) / n + 2 * pen * c
            hess = (U * w[:, None]).T @ U / n + np.diag(2 * pen) + 1e-12 * np.eye(m)
            step = np.linalg.lstsq(hess, grad, rcond=None)[0]
            t = 1.0
            while t > 1e-6:
                f_new = objective(c - t * step)
                if f_new <= f:
                    break
                t *= 0.5
            else:
                break
            c, f_old, f = c - t * step, f, f_new
            if f_old - f < 1e-12 * (1.0 + abs(f)):
                break
        return c

    def fit(self, table):
        sub = _action_table(table)
        base = VelocityPotentialEstimator(hermite_elements=self.hermite_elements, ridge=self.ridge).fit(table)
        A = list(table.action_axes)
        self.lower_, self.upper_ = table.lower[A], table.upper[A]
        self.space_ = HermiteSpace(self.lower_, self.upper_, self.hermite_elements, periodic=False)
        i0, i1 = sub.pairs()
        a0 = np.clip(sub.values[i0], self.lower_, self.upper_)
        y = (sub.values[i1] - sub.values[i0]) / table.dt  # velocity increments per unit time
        d, dt = y.shape[1], table.dt
        B = self._design(a0)
        P = self.space_.h1_seminorm_matrix()
        m = self.space_.mean_functional().ravel()
        self.alphas_ = _multi_indices(d, self.degree)
        U = _legendre_design(self._u(a0), self.alphas_, self.degree)
        grad_psi = base.gradient(np.clip(table.values[i0], table.lower, table.upper))[:, A]
        self.beta_ = float(base.beta_)
        self.c_ = np.zeros(self.alphas_.shape[0])
        for _ in range(int(self.iterations)):
            # (2) mobility from the residuals of the current drift
            g = np.exp(self.log_g(a0))[:, None]
            resid = y + g * grad_psi - g * self.grad_log_g(a0) / self.beta_
            q = np.sum(resid**2, axis=1) * dt * self.beta_ / (2.0 * d)
            self.c_ = self._fit_log_g(U, q)
            self.c_[0] -= np.mean(U @ self.c_)  # mean log g = 0 over the data (g's scale goes into beta)
            # (3) psi and beta by weighted least squares with g fixed
            g = np.exp(self.log_g(a0))
            rhs_y = y - g[:, None] * self.grad_log_g(a0) / self.beta_
            sq = np.sqrt(g)
            Ab = sum((B[j] * sq[:, None]).T @ (B[j] * sq[:, None]) for j in range(d))
            bb = sum((B[j] * sq[:, None]).T @ (rhs_y[:, j] / sq) for j in range(d))
            tr = np.trace(Ab)
            lam = self.ridge * tr / np.trace(P)
            coef = np.linalg.solve(Ab + lam * P + (tr / Ab.shape[0]) * np.outer(m, m), -bb)
            self.coef_ = coef.reshape(self.space_.shape)
            grad_psi = np.stack([Bj @ coef for Bj in B], axis=1)
            resid = rhs_y + g[:, None] * grad_psi
            self.beta_ = float(2.0 * d * y.shape[0] / (dt * np.sum(resid**2 / g[:, None])))
        self.dt_ = dt
        return self

    def loglik(self, tr: Transitions) -> np.ndarray:
        """Per-transition log-density of the next position (velocity tables)."""
        A = slice(tr.v_prev.shape[1], None)
        a = tr.x[:, A]
        g = np.exp(self.log_g(np.clip(a, self.lower_, self.upper_)))
        mean = tr.v_prev + self.drift(a) * tr.dt
        return gaussian_logpdf(tr.v_next, mean, 2.0 * g * tr.dt / self.beta_) - a.shape[1] * np.log(tr.dt)


def select_mobility(train, hermite_elements, ridge, degrees=(0, 1, 2), folds=3, seed=0):
    """Degree of ``log g`` by K-fold CV over whole training tracks (degree 0 is the paper's model).

    Returns ``(degree, {degree: mean CV log-likelihood})``.
    """
    fold = np.random.default_rng(seed).permutation(train.n_tracks) % folds
    scores = {}
    for deg in degrees:
        total, n = 0.0, 0
        for f in range(folds):
            part = train.select_tracks(np.flatnonzero(fold != f))
            val = observed_transitions(train.select_tracks(np.flatnonzero(fold == f)), "velocity")
            ll = MobilityModel(hermite_elements, ridge, degree=deg).fit(part).loglik(val)
            total, n = total + float(ll.sum()), n + ll.size
        scores[deg] = total / n
    return max(scores, key=scores.get), scores
