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
    out = values
    for i, mat in enumerate(matrices):
        out = np.moveaxis(np.tensordot(mat, out, axes=([1], [lead + i])), 0, lead + i)
    return out
