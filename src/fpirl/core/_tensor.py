"""Tensor-product (Kronecker) operators applied one axis at a time: sum factorisation."""

from __future__ import annotations

from typing import Sequence

import numpy as np


def apply_along_axes(values: np.ndarray, matrices: Sequence[np.ndarray]) -> np.ndarray:
    """Apply ``(M_1 kron ... kron M_k)`` to the trailing ``k = len(matrices)`` axes of ``values``.

    ``matrices[i]`` has shape ``(m_i, n_i)`` and acts on trailing axis ``i`` (of length ``n_i``);
    leading axes (time, batch) are carried along. Each step is one BLAS contraction, so the cost
    is ``sum_i m_i prod(sizes)`` instead of ``prod(m_i) prod(n_i)`` for the assembled Kronecker matrix.
    """
    lead = values.ndim - len(matrices)
    out = np.ascontiguousarray(values) if isinstance(values, np.ndarray) else values
    for i, mat in enumerate(matrices):
        out = apply_along_axis(out, lead + i, mat)
    return out


def apply_along_axis(values: np.ndarray, axis: int, matrix: np.ndarray) -> np.ndarray:
    """``matrix`` applied to axis ``axis`` of the C-contiguous ``values`` (other axes in place).

    One (batched) GEMM on a reshaped view, ``(L, n, R) -> (L, m, R)``, so no transposed copies:
    the result is C-contiguous again, ready for the next axis. Only methods and ``@`` of the arrays
    are used, so device arrays (CuPy, with a matrix on the same device) work too
    (:mod:`fpirl.weakform._device`).
    """
    shape = values.shape
    L = int(np.prod(shape[:axis], dtype=np.int64))
    R = int(np.prod(shape[axis + 1 :], dtype=np.int64))
    if not hasattr(matrix, "shape"):
        matrix = np.asarray(matrix)
    if R == 1:
        y = values.reshape(L, shape[axis]) @ matrix.T
    else:
        y = matrix @ values.reshape(L, shape[axis], R)
    return y.reshape(shape[:axis] + (matrix.shape[0],) + shape[axis + 1 :])
