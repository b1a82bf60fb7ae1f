"""fpirl.core.grid: bringing points into the box (whole periods on a periodic one, the walls otherwise)."""

import numpy as np
import pytest

from fpirl.core.grid import into_box, wrap_into


def test_wrap_into_moves_by_whole_periods_into_the_half_open_box():
    lower, upper = np.array([-1.0, 0.0]), np.array([1.0, 3.0])
    x = np.array([[1.5, -0.5], [-3.25, 7.0], [1.0, 3.0], [-1.0, 0.0]])
    # by hand: 1.5 - 2, -0.5 + 3; -3.25 + 4, 7 - 6; upper -> lower; lower stays
    expected = np.array([[-0.5, 2.5], [0.75, 1.0], [-1.0, 0.0], [-1.0, 0.0]])
    assert np.allclose(wrap_into(x, lower, upper), expected, rtol=0, atol=1e-15)


def test_wrap_into_never_returns_the_upper_end():
    # a hair below lower: lower + mod(x - lower, period) rounds to upper itself (0.1 + 0.6 here)
    lower, upper = 0.1, 0.7
    x = np.array([np.nextafter(0.1, -1.0), 0.1 - 2e-17, -0.5 - 1e-17, 0.1])
    assert 0.1 + np.mod(x[0] - 0.1, 0.6) == upper  # the rounding this guards against
    y = wrap_into(x, lower, upper)
    assert np.all(y >= lower) and np.all(y < upper)


@pytest.mark.parametrize("periodic", [True, False])
def test_into_box_wraps_or_clips(periodic):
    lower, upper = np.zeros(2), np.array([2.0, 4.0])
    x = np.array([[2.5, -1.0], [1.0, 3.0]])
    expected = np.array([[0.5, 3.0], [1.0, 3.0]]) if periodic else np.array([[2.0, 0.0], [1.0, 3.0]])
    assert np.allclose(into_box(x, lower, upper, periodic), expected, rtol=0, atol=1e-15)
