"""Cloud-in-cell deposit: hat-function weights, mass conservation, linear moments, periodic wrap."""

import numpy as np
import pytest

from fpirl import Grid
from fpirl.core._errors import FpirlInputError
from fpirl.tracks.binning import cloud_in_cell


def _hat_weights_reference(grid, x, w=None):
    """Independent reference: evaluate every nodal hat function at every point (dense), weighted by ``w``."""
    nodes = grid.mesh().reshape(-1, grid.ndim)
    h = grid.spacing
    diff = x[:, None, :] - nodes[None, :, :]
    if grid.periodic:
        length = grid.upper - grid.lower
        diff -= length * np.round(diff / length)
    hat = np.clip(1.0 - np.abs(diff) / h, 0.0, None).prod(axis=-1)
    return (hat if w is None else w[:, None] * hat).sum(axis=0).reshape(grid.shape)


@pytest.mark.parametrize("boundary", ["periodic", "reflecting"])
def test_matches_dense_hat_functions_and_conserves_mass(rng, boundary):
    grid = Grid([-1, 0, 2], [1, 3, 2.5], (4, 5, 3), boundary=boundary)
    x = grid.lower + (grid.upper - grid.lower) * rng.random((500, 3))
    m = cloud_in_cell(grid, x)
    assert m.shape == grid.shape
    np.testing.assert_allclose(m, _hat_weights_reference(grid, x), atol=1e-12)
    assert m.sum() == pytest.approx(500.0, rel=1e-13)
    w = rng.random(500)
    mw = cloud_in_cell(grid, x, weights=w)
    assert mw.sum() == pytest.approx(w.sum(), rel=1e-13)



@pytest.mark.parametrize("boundary", ["periodic", "reflecting"])
def test_labels_deposit_one_field_per_label(rng, boundary):
    """With ``labels``, every field is the dense hat-function deposit of its own points (empty labels give zero
    fields); bad labels are a one-line error."""
    grid = Grid([-1, 0], [1, 3], (4, 5), boundary=boundary)
    x = grid.lower + (grid.upper - grid.lower) * rng.random((300, 2))
    labels = rng.integers(0, 5, 300)
    labels[labels == 3] = 4  # label 3 stays empty
    w = rng.random(300)
    m = cloud_in_cell(grid, x, w, labels=labels, n_labels=6)
    assert m.shape == (6,) + grid.shape
    for k in range(6):
        sel = labels == k
        np.testing.assert_allclose(m[k], _hat_weights_reference(grid, x[sel], w[sel]), rtol=0, atol=1e-12)
    assert not m[3].any() and not m[5].any()
    with pytest.raises(FpirlInputError, match="labels"):
        cloud_in_cell(grid, x, labels=labels, n_labels=4)
    with pytest.raises(FpirlInputError, match="labels"):
        cloud_in_cell(grid, x, labels=labels + 0.5, n_labels=6)


def test_reproduces_linear_first_moments(rng):
    grid = Grid([-1, -2], [1, 3], (5, 7), boundary="reflecting")
    x = grid.lower + (grid.upper - grid.lower) * rng.random((1000, 2))
    x[:3] = [[-1, -2], [1, 3], [1, -2]]  # corners and walls included
    w = rng.random(1000)
    m = cloud_in_cell(grid, x, w)
    mesh = grid.mesh()
    for k in range(2):
        assert np.sum(m * mesh[..., k]) == pytest.approx(np.sum(w * x[:, k]), rel=1e-12)
    # a point exactly on a node puts all its mass there
    on_node = cloud_in_cell(grid, [[-1 + 2 * 0.4, -2 + 5 * 3 / 7]])
    assert on_node[2, 3] == pytest.approx(1.0) and on_node.sum() == pytest.approx(1.0)


def test_periodic_wrap():
    grid = Grid([-1], [1], 4, boundary="periodic")  # nodes -1, -0.5, 0, 0.5
    m = cloud_in_cell(grid, [[0.875]])  # in the last cell, 3/4 of the way to the seam
    np.testing.assert_allclose(m, [0.75, 0.0, 0.0, 0.25])
    # a point outside the box is wrapped into it first
    np.testing.assert_allclose(cloud_in_cell(grid, [[0.875 - 2.0]]), m, atol=1e-12)
    np.testing.assert_allclose(cloud_in_cell(grid, [[1.0]]), [1.0, 0, 0, 0])
    # first moment in the interior of the periodic box (cells away from the seam)
    x = np.array([[-0.9], [-0.2], [0.3], [0.45]])
    m = cloud_in_cell(grid, x)
    assert np.sum(m * grid.coords[0]) == pytest.approx(x.sum())


def test_bad_input():
    grid = Grid([0, 0], [1, 1], 4, boundary="reflecting")
    with pytest.raises(FpirlInputError, match="outside the reflecting box"):
        cloud_in_cell(grid, [[0.5, 0.5], [1.5, 0.5]])
    with pytest.raises(FpirlInputError, match="shape"):
        cloud_in_cell(grid, np.zeros((3, 3)))
    with pytest.raises(FpirlInputError, match="NaN"):
        cloud_in_cell(grid, [[0.1, 0.2], [np.nan, 0.3]])
    assert cloud_in_cell(grid, np.zeros((0, 2))).sum() == 0.0
