"""Tensor products of Legendre polynomials of bounded total degree on ``[-1, 1]^d`` (the mobility's
``log g`` and the drift fits of the adequacy check)."""

from __future__ import annotations

import itertools

import numpy as np
from numpy.polynomial import legendre


def multi_indices(d: int, degree: int) -> np.ndarray:
    """Exponents of the Legendre products of total degree ``<= degree`` in ``d`` variables."""
    return np.array([m for m in itertools.product(range(degree + 1), repeat=d) if sum(m) <= degree],
                    dtype=int).reshape(-1, d)


def legendre_design(u: np.ndarray, alphas: np.ndarray, degree: int, deriv_axis: int | None = None) -> np.ndarray:
    """``X[i, m] = prod_b P_{alpha_mb}(u_ib)`` (or its derivative along ``u_{deriv_axis}``)."""
    X = np.ones((u.shape[0], alphas.shape[0]))
    for b in range(u.shape[1]):
        V = legendre.legvander(u[:, b], degree)
        if b == deriv_axis:
            D = np.zeros((degree + 1, degree + 1))  # D[n, :]: P_n' in the Legendre basis
            for n in range(1, degree + 1):
                c = legendre.legder(np.eye(degree + 1)[n])
                D[n, : c.size] = c
            V = V @ D.T
        X *= V[:, alphas[:, b]]
    return X
