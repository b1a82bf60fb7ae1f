"""Dense linear algebra of the estimators (fpirl.core._linalg)."""

import numpy as np
import pytest
import scipy.linalg

from fpirl.core import _linalg


@pytest.fixture
def small_blocks(monkeypatch):
    """The blocked Cholesky on small matrices: blocks of 8 from 20 unknowns."""
    monkeypatch.setattr(_linalg, "BLOCKED_MIN", 20)
    monkeypatch.setattr(_linalg, "BLOCK", 8)


@pytest.mark.parametrize("n", [20, 37, 64])
def test_blocked_cholesky_equals_lapack(small_blocks, rng, n):
    X = rng.standard_normal((n, n + 5))
    M = X @ X.T + 1e-3 * np.eye(n)
    L, lower = _linalg.cho_factor(M)
    ref = scipy.linalg.cholesky(M, lower=True)  # the oracle: LAPACK's unblocked potrf
    assert lower
    np.testing.assert_allclose(np.tril(L), ref, rtol=0, atol=1e-12 * np.abs(ref).max())
    b = rng.standard_normal((n, 2))
    np.testing.assert_allclose(M @ scipy.linalg.cho_solve((L, lower), b), b, atol=1e-9)


def test_blocked_cholesky_rejects_an_indefinite_matrix_and_solve_spd_shifts_it(small_blocks, rng):
    X = rng.standard_normal((30, 30))
    M = X @ X.T
    M[25, 25] = -1.0  # a negative pivot in the fourth block
    with pytest.raises(np.linalg.LinAlgError):
        _linalg.cho_factor(M)
    # semi-definite (rank 29): solved with the smallest diagonal shift, and the factor is not kept
    S = X[:, :29] @ X[:, :29].T
    keep = {}
    x = _linalg.solve_spd(S, S @ np.ones(30), keep)
    assert keep["factor"] is None or np.all(np.isfinite(keep["factor"][0]))
    np.testing.assert_allclose(S @ x, S @ np.ones(30), atol=1e-6 * np.abs(S).max())
