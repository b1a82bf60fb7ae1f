"""Noisy snapshots on fine grids fitted on a coarser grid (fpirl.estimators.noisy_grid, ``fpirl fit --coarsen``)."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import xarray as xr

from fpirl import DensitySnapshots, FpirlInputError, Grid, PotentialEstimator, write_density
from fpirl.estimators.noisy_grid import coarsened, every_second_node, relative_noise
from fpirl.forward import simulate_density, von_mises_bump

from _simdensity import grad_psi2, psi2


@functools.lru_cache(maxsize=None)
def _clean(n, boundary, n_times):
    grid = Grid([-1, -1], [1, 1], n, names=["s", "a"], roles=["state", "action"], boundary=boundary)
    times = 0.02 * np.arange(n_times)
    if boundary == "reflecting":  # a smooth density, linear in time (the noise estimate's differences vanish)
        x = np.stack(np.meshgrid(*grid.coords, indexing="ij"), -1)
        return grid, times, np.exp(-np.sum(x**2, -1))[None] * (1 + 0.5 * times[:, None, None])
    return grid, times, simulate_density(grid, psi2, grad_psi2, 4.0,
                                         von_mises_bump(grid.lower, grid.upper, [0.3, -0.4], 1.0), times)


def _data(n, noise, boundary="periodic", seed=3, n_times=8):
    grid, times, v = _clean(n, boundary, n_times)
    if noise:
        v = v * (1 + noise * np.random.default_rng(seed).standard_normal(v.shape))
    return DensitySnapshots(grid, times, np.clip(v, 0, None))


@pytest.mark.parametrize("periodic, nodes, coarse", [(True, 8, 4), (False, 9, 5)])
def test_every_second_node_keeps_the_box_and_the_walls(periodic, nodes, coarse):
    R = every_second_node(8, periodic)
    assert R.shape == (coarse, nodes)
    x = np.arange(nodes, dtype=float)
    np.testing.assert_array_equal(R @ x, x[::2][:coarse])
    if not periodic:  # both walls are coarse nodes
        assert (R @ x)[0] == 0 and (R @ x)[-1] == 8


@pytest.mark.parametrize("noise", [0.005, 0.02])
def test_relative_noise_recovers_the_injected_level(noise):
    s = _data(40, noise, n_times=12)
    assert relative_noise(s) == pytest.approx(noise, rel=0.1)
    assert relative_noise(_data(40, 0.0, n_times=12)) < 1e-4


def test_auto_halves_noisy_fine_grids_only():
    noisy = _data(64, 0.02)
    got, how = coarsened(noisy)
    assert how.factor == 2 and how.grid == noisy.grid and how.noise == pytest.approx(0.02, rel=0.15)
    assert got.grid.shape == (32, 32)
    np.testing.assert_array_equal([got.grid.lower, got.grid.upper], [noisy.grid.lower, noisy.grid.upper])
    np.testing.assert_array_equal(got.values, noisy.values[:, ::2, ::2])
    assert coarsened(_data(64, 0.0))[1].factor == 1  # noise-free: as given
    assert coarsened(_data(48, 0.02))[1].factor == 1  # halving would leave fewer than 32 elements
    walls, how = coarsened(_data(64, 0.02, boundary="reflecting"))
    assert how.factor == 2 and walls.grid.shape == (33, 33)
    np.testing.assert_array_equal(walls.values, _data(64, 0.02, boundary="reflecting").values[:, ::2, ::2])
    four, how = coarsened(noisy, 4)
    assert how.factor == 4 and four.grid.shape == (16, 16)
    for bad in (3, 0, "two"):
        with pytest.raises(FpirlInputError, match="power of two"):
            coarsened(noisy, bad)
    with pytest.raises(FpirlInputError, match=r"cannot coarsen .* x 24.* by 4: .* at least 32"):  # the user's grid
        coarsened(_data(24, 0.0), 4)


def test_cli_fits_the_coarse_grid_and_writes_the_data_grid(tmp_path, cli):
    data = _data(64, 0.02)
    write_density(tmp_path / "d.nc", data)
    opts = ["--beta", "4", "--hermite-elements", "4", "--uncertainty", "none", "--no-progress"]
    proc = cli("fit", tmp_path / "d.nc", "-o", tmp_path / "r.nc", *opts)
    assert proc.returncode == 0, proc.stderr
    assert "noise per node: fitted on Grid(s[state]: [-1, 1] x 32" in proc.stdout and "--coarsen 1" in proc.stdout
    with xr.open_dataset(tmp_path / "r.nc") as ds:
        assert ds.potential.shape == (64, 64) and int(ds.attrs["coarsen"]) == 2
        # the same as a fit to every second node, evaluated on the data's grid (the same Hermite space)
        ref = PotentialEstimator(beta=4.0, hermite_elements=4).fit(
            DensitySnapshots(Grid([-1, -1], [1, 1], 32, names=["s", "a"], roles=["state", "action"]), data.times,
                             data.values[:, ::2, ::2]))
        np.testing.assert_allclose(ds.potential.values, ref.potential_on_grid(data.grid), rtol=1e-9, atol=1e-12)
    # a simulation from the data's first snapshot runs on the result's grid, and compares with the data
    proc = cli("simulate", tmp_path / "r.nc", "--steps", 3, "--model", "fp", "--initial", tmp_path / "d.nc",
               "-o", tmp_path / "sim.nc", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    proc = cli("fit", tmp_path / "d.nc", "-o", tmp_path / "r1.nc", *opts, "--coarsen", "1")
    assert proc.returncode == 0 and "noise per node" not in proc.stdout
    with xr.open_dataset(tmp_path / "r1.nc") as ds:
        assert int(ds.attrs["coarsen"]) == 1
    cli.assert_input_error(cli("fit", tmp_path / "d.nc", "-o", tmp_path / "r2.nc", *opts, "--coarsen", "3"),
                           "power of two")
