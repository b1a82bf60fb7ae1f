"""Cubic interpolating splines as matrices (fpirl.core._splines) against polynomials and periodic functions."""

import numpy as np

from fpirl.core._splines import spline_matrix


def test_not_a_knot_spline_is_exact_for_cubics_and_interpolates(rng):
    nodes = np.sort(rng.uniform(-1, 1, 9))
    x = rng.uniform(nodes[0], nodes[-1], 25)
    cubic = lambda t: 0.3 - t + 2 * t**2 - 0.7 * t**3  # noqa: E731
    np.testing.assert_allclose(spline_matrix(nodes, x) @ cubic(nodes), cubic(x), atol=1e-12)
    np.testing.assert_allclose(spline_matrix(nodes, nodes), np.eye(9), atol=1e-12)


def test_periodic_spline_interpolates_wraps_and_converges_at_fourth_order():
    errors = []
    for n in (12, 36):
        nodes = -1 + 2 * np.arange(n) / n
        x = np.linspace(-1, 1, 41)
        R = spline_matrix(nodes, x, period=2.0)
        f = lambda t: np.exp(np.sin(np.pi * t))  # noqa: E731
        errors.append(np.abs(R @ f(nodes) - f(x)).max())
        np.testing.assert_allclose(spline_matrix(nodes, nodes, period=2.0), np.eye(n), atol=1e-12)
        np.testing.assert_allclose(spline_matrix(nodes, x + 2.0, period=2.0), R, atol=1e-12)
        np.testing.assert_allclose(R.sum(axis=1), 1.0, atol=1e-12)  # constants are reproduced
    assert np.log(errors[0] / errors[1]) / np.log(3) > 3.5, errors
