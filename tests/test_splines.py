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


def test_not_a_knot_spline_converges_at_fourth_order_on_uneven_nodes(rng):
    """Observed order of the max error on a smooth function, nodes perturbed by 20% of a spacing."""
    f = lambda t: np.sin(3 * t) + np.exp(t)  # noqa: E731
    errors = []
    for n in (16, 48):
        nodes = np.linspace(-1, 1, n)
        nodes[1:-1] += 0.2 * (2 / (n - 1)) * rng.uniform(-1, 1, n - 2)
        x = np.linspace(-1, 1, 301)
        errors.append(np.abs(spline_matrix(nodes, x) @ f(nodes) - f(x)).max())
    assert np.log(errors[0] / errors[1]) / np.log(3) > 3.5, errors


def test_few_nodes_give_the_interpolating_polynomial(rng):
    for m in (2, 3, 4):
        nodes = np.sort(rng.uniform(-1, 1, m))
        x = rng.uniform(-1.5, 1.5, 11)  # extrapolated too
        coef = rng.standard_normal(m)
        poly = lambda t: np.polyval(coef, t)  # noqa: E731  (degree m - 1)
        np.testing.assert_allclose(spline_matrix(nodes, x) @ poly(nodes), poly(x), atol=1e-11)


def test_spline_matrix_equals_scipys_splines(rng):
    """Not-a-knot (``make_interp_spline``, degree min(3, m - 1)) and periodic (``CubicSpline``) on uneven nodes,
    points inside and outside the nodes."""
    from scipy.interpolate import CubicSpline, make_interp_spline

    for m in (2, 3, 4, 5, 9, 17, 300):
        nodes = np.sort(rng.uniform(-1, 1, m))
        x = rng.uniform(-1.3, 1.3, 40)
        ref = make_interp_spline(nodes, np.eye(m), k=min(3, m - 1), axis=0)(x)
        np.testing.assert_allclose(spline_matrix(nodes, x), ref, atol=1e-11)
        period = 2.5
        if m >= 2:
            closed = np.append(nodes, nodes[0] + period)
            spline = CubicSpline(closed, np.vstack([np.eye(m), np.eye(m)[:1]]), axis=0, bc_type="periodic")
            wrapped = nodes[0] + np.mod(x - nodes[0], period)
            np.testing.assert_allclose(spline_matrix(nodes, x, period=period), spline(wrapped), atol=1e-11)
