"""The ridge of eq. vsi_regression: its default and generalized cross-validation."""

from __future__ import annotations

import numpy as np
import scipy.linalg

#: Default relative Tikhonov weight; chosen by ``tests/test_identify.py::test_default_ridge_is_in_the_plateau``.
DEFAULT_RIDGE = 1e-9


#: Relative ridge values searched by ``ridge='gcv'``: from the default up, so GCV never smooths less
#: than the default (on nearly consistent data GCV can undersmooth badly: on the 4-D Grid World with
#: N = 5 it picked 1e-12 when allowed to; see docs/benchmarks.md).
GCV_GRID = 10.0 ** np.arange(np.log10(DEFAULT_RIDGE), 0.25, 0.5)


def gcv_ridge(A, P, m, b, hh, n_rows, ratio):
    r"""Relative ridge minimising generalized cross-validation (Golub, Heath and Wahba, 1979).

    For the Tikhonov problem ``min ||X theta + h||^2 + lambda theta^T P theta`` with normal
    matrix ``A = X^T X``, ``b = X^T h`` and ``hh = h^T h``:

    .. math::
        \mathrm{GCV}(\lambda) = \frac{n\,\mathrm{RSS}(\lambda)}{(n - \mathrm{tr}\,H_\lambda)^2},\qquad
        \mathrm{tr}\,H_\lambda = \sum_i \frac{\sigma_i}{\sigma_i + \lambda},

    with ``sigma_i`` the generalized eigenvalues of ``(A, P + c m m^T)`` (the rank-one term makes
    the pencil definite; it acts only on the constant mode, which ``A`` ignores). One generalized
    eigendecomposition (``O(n_coef^3)``) gives the score for every ``lambda = ridge * ratio``,
    ``ridge`` in :data:`GCV_GRID`.

    Returns
    -------
    ridge : float
        The minimiser on the grid.
    table : dict
        ``ridge``, ``score`` and ``dof`` (effective number of parameters) per grid value.
    """
    B = P + (np.trace(P) / m.size) * np.outer(m, m)
    sig, V = scipy.linalg.eigh(A, B, check_finite=False)
    sig = np.clip(sig, 0.0, None)
    c = V.T @ b
    d = sig[None, :] + (GCV_GRID * ratio)[:, None]
    rss = np.maximum(hh - 2 * np.sum(c**2 / d, axis=1) + np.sum(c**2 * sig / d**2, axis=1), 0.0)
    dof = np.sum(sig / d, axis=1)
    with np.errstate(divide="ignore"):
        score = np.where(n_rows > dof, n_rows * rss / np.maximum(n_rows - dof, 0.0) ** 2, np.inf)
    k = int(np.argmin(score))
    return float(GCV_GRID[k]), {"ridge": GCV_GRID.copy(), "score": score, "dof": dof}
