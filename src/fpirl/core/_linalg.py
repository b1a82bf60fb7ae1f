"""Dense linear algebra shared by the estimators."""

from __future__ import annotations

import numpy as np
import scipy.linalg
from scipy.linalg import lapack

from ._threads import one_blas_thread

#: Relative diagonal shifts tried when a system is not numerically positive definite.
JITTERS = (1e-12, 1e-10, 1e-8)
#: Order from which :func:`cho_factor` factorises by blocks (below it: LAPACK's ``potrf`` directly).
BLOCKED_MIN = 2048
#: Block size of :func:`cho_factor`.
BLOCK = 512


def cho_factor(M: np.ndarray) -> tuple[np.ndarray, bool]:
    """Lower Cholesky factor ``M = L L^T`` as ``(L, True)`` for :func:`scipy.linalg.cho_solve`.

    From :data:`BLOCKED_MIN` unknowns it is the right-looking blocked algorithm: each ``512 x 512``
    diagonal block by LAPACK's ``potrf`` on one BLAS thread, the panel below it by a triangular
    solve, the trailing lower triangle updated block column by block column with GEMMs (``n^3 / 3``
    flops, nearly all in GEMMs). OpenBLAS's own threaded ``potrf`` synchronises its threads at every
    small step: on two shared cores it took 0.34-5.8 s for 4,096 unknowns depending on the load,
    the blocked form 0.8-1.7 s at the same loads (docs/benchmarks.md, issue 20). Raises
    :class:`numpy.linalg.LinAlgError` when ``M`` is not numerically positive definite. The upper
    triangle of ``L`` holds no meaning.
    """
    n = M.shape[0]
    if n < BLOCKED_MIN:
        return scipy.linalg.cho_factor(M, lower=True, check_finite=False)
    L = np.array(M, order="F")
    for k in range(0, n, BLOCK):
        e = min(n, k + BLOCK)
        with one_blas_thread():
            c, info = lapack.dpotrf(L[k:e, k:e], lower=1, clean=1)
        if info != 0:
            raise np.linalg.LinAlgError(f"the leading minor of order {k + info} is not positive definite")
        L[k:e, k:e] = c
        if e < n:
            P = scipy.linalg.solve_triangular(c, L[e:, k:e].T, lower=True, check_finite=False).T
            L[e:, k:e] = P
            for j in range(e, n, BLOCK):
                f = min(n, j + BLOCK)
                L[j:, j:f] -= P[j - e:] @ P[j - e : f - e].T
    return L, True


def solve_spd(M: np.ndarray, rhs: np.ndarray, keep: dict | None = None) -> np.ndarray:
    """Solve a symmetric positive (semi-)definite system by Cholesky.

    A system that is only numerically semi-definite (coefficients the data and a tiny ridge barely
    reach) is factorised with the smallest diagonal shift ``eps * tr(M) / n``, ``eps`` in
    :data:`JITTERS`, that makes it definite - a further ridge far below any the estimators use -
    and only then by least squares (an SVD, ~50x slower than Cholesky at 1,600 unknowns).
    ``keep`` (a dict), when given, receives the unshifted Cholesky factor as ``keep['factor']``
    (None when a shift was needed), for reuse with the same matrix.
    """
    # cho_factor/cho_solve directly: scipy.linalg.solve(assume_a='pos') was ~50x slower here
    # (scipy 1.17, 256 x 256: 60 ms against 1.2 ms)
    scale = np.trace(M) / M.shape[0]
    for eps in (0.0,) + JITTERS:
        try:
            factor = cho_factor(M + eps * scale * np.eye(M.shape[0]) if eps else M)
            if keep is not None:
                keep["factor"] = None if eps else factor
            return scipy.linalg.cho_solve(factor, rhs, check_finite=False)
        except (np.linalg.LinAlgError, scipy.linalg.LinAlgError):
            continue
    return scipy.linalg.lstsq(M, rhs, check_finite=False)[0]
