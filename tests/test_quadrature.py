import numpy as np
import pytest

from fpirl.core.quadrature import composite_rule, degree_of_exactness, gauss_legendre, merged_breakpoints


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_gauss_legendre_exact_to_its_degree(n):
    x, w = gauss_legendre(n)
    deg = degree_of_exactness(n)
    for k in range(deg + 1):
        assert np.isclose(w @ x**k, 1.0 / (k + 1), rtol=1e-13, atol=1e-15)
    # and not beyond: x^(2n) is integrated with an error
    assert abs(w @ x ** (deg + 1) - 1.0 / (deg + 2)) > 1e-8


def test_composite_rule_exact_for_piecewise_quintics(rng):
    breaks = merged_breakpoints(np.linspace(-1, 1, 8), np.linspace(-1, 1, 4))
    assert np.all(np.diff(breaks) > 0) and breaks.size == 8 + 2  # -1/3, 1/3 added; shared ends merged
    x, w = composite_rule(breaks, 3)
    # a random piecewise polynomial of degree 5 with kinks at the break points
    coefs = rng.standard_normal((breaks.size - 1, 6))
    cell = np.clip(np.searchsorted(breaks, x, side="right") - 1, 0, breaks.size - 2)
    f = np.polynomial.polynomial.polyval(x, coefs[cell].T, tensor=False)
    exact = sum(
        np.polynomial.polynomial.polyval(b, np.polynomial.polynomial.polyint(c))
        - np.polynomial.polynomial.polyval(a, np.polynomial.polynomial.polyint(c))
        for a, b, c in zip(breaks[:-1], breaks[1:], coefs)
    )
    assert np.isclose(w @ f, exact, rtol=1e-12)
