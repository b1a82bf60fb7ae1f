r"""The mobility's model: ``log g`` a Legendre polynomial of total degree ``K`` in the drift coordinates
(:mod:`fpirl.estimators.mobility` states the SDE and how ``g`` is chosen)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core._errors import FpirlInputError
from ..core._legendre import legendre_design, multi_indices

#: |log g| never exceeds this (a polynomial extrapolates wildly where the data are sparse)
LOG_G_BOUND = 3.0
#: ``log g`` is fitted on a strided sample of at most this many transitions.
GLM_SAMPLE = 1 << 13


@dataclass
class Mobility:
    """``g(x) = exp(c @ L(u(x_axes)))``, bounded (module doc).

    Attributes
    ----------
    axes : tuple of int
        The coordinates ``g`` depends on (the drift axes), indices into the table's axes.
    lower, upper : ndarray
        Their box (``u`` = the coordinate scaled to ``[-1, 1]``, clipped).
    degree : int
    coef : ndarray
        Legendre coefficients of ``log g`` (order of :func:`multi_indices`).
    """

    axes: tuple
    lower: np.ndarray
    upper: np.ndarray
    degree: int
    coef: np.ndarray

    @property
    def alphas(self):
        return multi_indices(len(self.axes), self.degree)

    def _u(self, x):
        y = np.asarray(x, dtype=float)[:, list(self.axes)]
        return np.clip(2.0 * (y - self.lower) / (self.upper - self.lower) - 1.0, -1.0, 1.0)

    def _raw(self, x):
        return legendre_design(self._u(x), self.alphas, self.degree) @ self.coef

    def log_g(self, x: np.ndarray) -> np.ndarray:
        """``log g`` at points ``x`` of shape ``(n, d)`` (all table axes)."""
        return np.clip(self._raw(x), -LOG_G_BOUND, LOG_G_BOUND)

    def g(self, x: np.ndarray) -> np.ndarray:
        return np.exp(self.log_g(x))

    def grad_log_g(self, x: np.ndarray) -> np.ndarray:
        """``d log g / d x_a`` for ``a`` in ``axes``, shape ``(n, len(axes))`` (0 where clipped)."""
        x = np.asarray(x, dtype=float)
        y = x[:, list(self.axes)]
        u = self._u(x)
        inside = (y > self.lower) & (y < self.upper)
        live = np.abs(self._raw(x)) < LOG_G_BOUND
        scale = 2.0 / (self.upper - self.lower)
        out = np.stack([legendre_design(u, self.alphas, self.degree, j) @ self.coef * scale[j]
                        for j in range(len(self.axes))], axis=1)
        return np.where(inside & live[:, None], out, 0.0)

    def to_attrs(self, names) -> dict:
        """Result attrs ``mobility_*`` (see docs/formats.md)."""
        return {"mobility_degree": int(self.degree), "mobility_axes": ",".join(names[a] for a in self.axes),
                "mobility_lower": np.asarray(self.lower, float), "mobility_upper": np.asarray(self.upper, float),
                "mobility_coefficients": np.asarray(self.coef, float)}

    @classmethod
    def from_attrs(cls, attrs, names) -> "Mobility | None":
        """The mobility stored in a result (None when the result has none, or degree 0)."""
        if int(np.asarray(attrs.get("mobility_degree", 0)).reshape(())) <= 0:
            return None
        try:
            axes = tuple(list(names).index(n) for n in str(attrs["mobility_axes"]).split(","))
            out = cls(axes, np.atleast_1d(np.asarray(attrs["mobility_lower"], float)),
                      np.atleast_1d(np.asarray(attrs["mobility_upper"], float)),
                      int(np.asarray(attrs["mobility_degree"]).reshape(())),
                      np.atleast_1d(np.asarray(attrs["mobility_coefficients"], float)))
        except (KeyError, ValueError) as exc:
            raise FpirlInputError(f"the result's mobility attrs are incomplete or inconsistent ({exc})") from None
        if out.coef.size != out.alphas.shape[0]:
            raise FpirlInputError("the result's mobility_coefficients do not match mobility_degree")
        return out


def fit_log_g(U: np.ndarray, q: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    r"""Gamma GLM with log link: minimise ``mean_w(h + q e^{-h}) + kappa |c_{1:}|^2``, ``h = U c``.

    ``q`` are per-transition variance ratios with ``E[q] = g``; Newton steps with backtracking.
    """
    n, m = U.shape
    w0 = np.ones(n) if weights is None else np.asarray(weights, float)
    w0 = w0 / w0.sum()
    pen = np.full(m, 1e-6)
    pen[0] = 0.0

    def objective(c):
        h = np.clip(U @ c, -60.0, 60.0)
        return float(w0 @ (h + q * np.exp(-h)) + np.sum(pen * c * c))

    c = np.zeros(m)
    c[0] = np.log(max(float(w0 @ q), 1e-300))
    f = objective(c)
    for _ in range(50):
        h = np.clip(U @ c, -60.0, 60.0)
        w = q * np.exp(-h)
        grad = U.T @ (w0 * (1.0 - w)) + 2 * pen * c
        hess = (U * (w0 * w)[:, None]).T @ U + np.diag(2 * pen) + 1e-12 * np.eye(m)
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
