"""core._linalg.solve_spd: Cholesky in the caller's memory (overwrite), the jitter fallback, the kept factor."""

import numpy as np
import pytest
import scipy.linalg

from fpirl.core._linalg import _mirror_triangle, solve_spd


@pytest.mark.parametrize("order", ["C", "F"])
def test_solve_spd_in_place_equals_numpy_solve(rng, order):
    """Oracle: numpy.linalg.solve; the kept factor solves the same system (scipy's cho_solve)."""
    n = 600  # above the 512-row blocks of the triangle copy
    B = rng.standard_normal((n, n))
    M = B @ B.T + n * np.eye(n)
    b = rng.standard_normal((n, 2))
    expected = np.linalg.solve(M, b)
    keep = {}
    np.testing.assert_allclose(solve_spd(np.array(M, order=order), b, keep, overwrite=True), expected, rtol=1e-10)
    np.testing.assert_allclose(scipy.linalg.cho_solve(keep["factor"], b), expected, rtol=1e-10)
    given = M.copy()
    np.testing.assert_allclose(solve_spd(given, b), expected, rtol=1e-10)
    np.testing.assert_array_equal(given, M)  # not overwritten unless asked


def test_solve_spd_semidefinite_in_place_takes_the_same_shift(rng):
    """A rank-deficient system needs a diagonal shift: after the failed factorisation the matrix is
    restored from its untouched triangle, so overwriting gives the copy's answer (a consistent system)."""
    n = 40
    B = rng.standard_normal((n, n // 2))
    M = B @ B.T
    b = M @ rng.standard_normal(n)
    keep = {}
    x = solve_spd(M.copy(), b, keep, overwrite=True)
    assert keep["factor"] is None  # shifted: no factor of M itself
    np.testing.assert_allclose(x, solve_spd(M, b), rtol=1e-12, atol=1e-12 * np.abs(x).max())
    np.testing.assert_allclose(M @ x, b, atol=1e-8 * np.abs(b).max())


@pytest.mark.parametrize("lower", [True, False])
def test_mirror_triangle_restores_a_symmetric_matrix(rng, lower):
    n = 1100
    B = rng.standard_normal((n, n))
    M = np.asfortranarray(B + B.T)
    spoiled = M.copy(order="F")
    idx = np.tril_indices(n, -1) if lower else np.triu_indices(n, 1)
    spoiled[idx] = rng.standard_normal(idx[0].size)
    _mirror_triangle(spoiled, lower)
    np.testing.assert_array_equal(spoiled, M)
