"""Corner plots of 5-D and 6-D results (fpirl.plotting.slices)."""

import numpy as np
import pytest
import xarray as xr

from fpirl import FpirlInputError, Grid
from fpirl.io import grid_coords
from fpirl.plotting import plot_result
from fpirl.plotting.slices import plot_slices, reference_node, slice_through


def _result(d, n=4):
    grid = Grid([-1.0] * d, [1.0] * d, n, names=[f"x{i}" for i in range(d)],
                roles=["state"] * (d // 2) + ["action"] * (d - d // 2))
    x = grid.mesh()
    psi = np.cos(np.pi * x).sum(axis=-1) + 0.3 * x[..., 0] * x[..., -1]
    ds = xr.Dataset({"potential": (grid.names, psi - psi.mean())}, coords=grid_coords(grid),
                    attrs={"boundary": grid.boundary, "beta": 2.0})
    return grid, ds


def test_reference_is_the_minimum_and_slices_fix_the_other_axes(rng):
    values = rng.standard_normal((3, 4, 5, 2, 3))
    ref = reference_node(values)
    assert values[ref] == values.min()
    plane = slice_through(values, ref, (1, 3))
    assert plane.shape == (4, 2)
    np.testing.assert_array_equal(plane, values[ref[0], :, ref[2], :, ref[4]])
    np.testing.assert_array_equal(slice_through(values, ref, (2,)), values[ref[0], ref[1], :, ref[3], ref[4]])


@pytest.mark.parametrize("d", [6])
def test_plot_result_draws_slices_beyond_four_axes(tmp_path, d):
    grid, ds = _result(d)
    path = plot_result(ds, tmp_path / f"res{d}.png")
    assert path.exists() and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(tmp_path.glob("*.tmp"))


def test_constant_potential_and_bad_key(tmp_path):
    grid, ds = _result(5, n=3)
    ds["potential"][:] = 0.0  # a constant psi still draws (no colour range to take)
    assert plot_slices(ds, tmp_path / "flat.png").exists()
    with pytest.raises(FpirlInputError, match="no 'policy'"):
        plot_slices(ds, tmp_path / "x.png", key="policy")
