"""The Gaussian transition moves mass down the potential: the mean of T(.|s, a) is
s - dt grad_s psi(s, a) (eq. gaussian_transition). A flipped drift sign fails here."""

import numpy as np
import pytest

from fpirl import GaussianTransition, Grid

BETA, DT = 5.0, 0.05  # sigma = sqrt(2 dt / beta) = 0.14, about 1.4 node spacings


def _grid(boundary):
    # two state axes and one action axis; the state box is wide so that interior sources do not feel the walls
    return Grid([-3.0, -3.0, -1.0], [3.0, 3.0, 1.0], [60, 60, 4], names=["x", "y", "a"],
                roles=["state", "state", "action"], boundary=boundary)


def _gradient(grid):
    """A state- and action-dependent grad_s psi of size ~1 (drift ~ dt = 0.05 = half a node spacing)."""
    x, y, a = np.moveaxis(grid.mesh(), -1, 0)
    return np.stack([1.5 * np.cos(0.5 * y) + 0.8 * a, -1.2 + 0.5 * np.sin(0.7 * x) - 0.6 * a])


@pytest.mark.parametrize("discretization", ["nodal", "projection"])
def test_mean_of_transition_is_s_minus_dt_grad(discretization):
    grid = _grid("reflecting")
    grad = _gradient(grid)
    trans = GaussianTransition(grid, grad, BETA, DT, discretization=discretization)
    x, y = np.meshgrid(grid.coords[0], grid.coords[1], indexing="ij")
    mean_x, mean_y = trans.expect(x), trans.expect(y)
    mesh = grid.mesh()
    inner = (np.abs(mesh[..., 0]) < 2.0) & (np.abs(mesh[..., 1]) < 2.0)  # > 7 sigma from the walls
    want_x = mesh[..., 0] - DT * grad[0]
    want_y = mesh[..., 1] - DT * grad[1]
    shift = DT * np.abs(grad[:, inner]).max()
    err = max(np.abs(mean_x - want_x)[inner].max(), np.abs(mean_y - want_y)[inner].max())
    assert err < 1e-3 * shift  # the drift is reproduced to 0.1% (h = 0.1, sigma ~ 1.4 h)
    # the opposite sign is far off: the test can tell s - dt grad from s + dt grad
    flipped = np.abs(mean_x - (mesh[..., 0] + DT * grad[0]))[inner].max()
    assert flipped > 0.5 * shift


def test_mean_on_a_periodic_box_uses_the_nearest_image():
    grid = _grid("periodic")
    grad = _gradient(grid)
    trans = GaussianTransition(grid, grad, BETA, DT)
    # circular mean: E[exp(i k s')] = exp(i k (s - dt grad)) exp(-k^2 sigma^2 / 2) for the wrapped Gaussian
    k = 2 * np.pi / 6.0
    x = grid.coords[0][:, None] * np.ones(grid.shape[1])
    c, s = trans.expect(np.cos(k * x)), trans.expect(np.sin(k * x))
    angle = np.arctan2(s, c) / k
    want = grid.mesh()[..., 0] - DT * grad[0]
    diff = (angle - want + 3.0) % 6.0 - 3.0  # minimal image on the period 6
    assert np.abs(diff).max() < 1e-4
    np.testing.assert_allclose(np.hypot(c, s), np.exp(-0.5 * k**2 * 2 * DT / BETA), rtol=1e-6)


@pytest.mark.parametrize("boundary", ["periodic", "reflecting"])
@pytest.mark.parametrize("discretization", ["moment", "nodal", "projection"])
def test_rows_without_drift_are_the_node_rows(boundary, discretization):
    """Where grad_s psi is 0 along a state axis every source's row is that of its own node: the factor built
    from one row per node equals the 1-D kernel of every source's mean (the general path), and the other axis's
    factor (with drift) is unchanged."""
    import warnings

    from fpirl.mdp._kernel_1d import _kernel_1d

    grid = _grid(boundary)
    grad = _gradient(grid)
    grad[0] = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the approximate kernels warn at this sigma / h
        trans = GaussianTransition(grid, grad, BETA, DT, discretization=discretization)
        full = GaussianTransition(grid, grad + np.array([1e-300, 0.0])[:, None, None, None], BETA, DT,
                                  discretization=discretization)
        mean = np.broadcast_to(grid.coords[0][:, None, None], grid.shape).ravel()
        want = _kernel_1d(grid.axes[0], mean, trans.sigma, discretization)
    np.testing.assert_allclose(trans.factors[0], want, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(trans.factors[0], full.factors[0], rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(trans.factors[1], full.factors[1])
    # means 1e-9 node spacings off the nodes take the general path (the 'moment' width from its table): the rows
    # move by that much only, so the rows on the nodes (their width solved at theta = 0 alone) are the same kernel
    h = grid.axes[0].spacing
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        near = GaussianTransition(grid, grad + np.array([-1e-9 * h / DT, 0.0])[:, None, None, None], BETA, DT,
                                  discretization=discretization)
    np.testing.assert_allclose(trans.factors[0], near.factors[0], rtol=0, atol=1e-7 * trans.factors[0].max())
