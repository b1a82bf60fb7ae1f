"""Figures: every plotting function writes a non-empty image for 1-D to 4-D inputs."""

from __future__ import annotations

import os

import numpy as np
import pytest
import xarray as xr

from fpirl import FpirlInputError, Grid
from fpirl.io import grid_coords
import fpirl.plotting.fields
from fpirl.plotting import (
    nested_grid_image,
    nested_grid_layout,
    plot_convergence,
    plot_fields,
    plot_kl,
    plot_potential_comparison,
    plot_result,
    robust_range,
    symmetric_range,
)

ROLES = {
    1: ["state"],
    2: ["state", "action"],
    3: ["state", "state", "action"],
    4: ["state", "state", "action", "action"],
}


def _grid(d, n=5, boundary="periodic"):
    return Grid([-1.0] * d, [1.0] * d, n, names=[f"x{i}" for i in range(d)], roles=ROLES[d], boundary=boundary)


def _field(grid):
    x = grid.mesh()
    return np.cos(np.pi * x).sum(axis=-1) + 0.3 * x[..., 0]


def _png_ok(path):
    assert path.exists() and path.stat().st_size > 1000
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p for p in os.listdir(path.parent) if p.endswith(".tmp")] == []


def _result(grid, with_mdp=True):
    psi = _field(grid)
    dims = grid.names
    data = {"potential": (dims, psi - psi.mean())}
    if with_mdp:
        data.update(q_value=(dims, -psi), policy=(dims, np.exp(-psi)), reward=(dims, np.sin(psi)))
    return xr.Dataset(data, coords=grid_coords(grid), attrs={"boundary": grid.boundary, "beta": 2.0})


@pytest.mark.parametrize("d", [1, 2, 3, 4])
def test_potential_comparison(tmp_path, d):
    grid = _grid(d, n=6 if d <= 2 else 4)
    psi = _field(grid)
    path = plot_potential_comparison(grid, psi, 1.05 * psi, tmp_path / f"cmp{d}.png", title="t")
    _png_ok(path)


@pytest.mark.parametrize("d", [1, 2, 3, 4])
def test_plot_result(tmp_path, d):
    grid = _grid(d, n=6 if d <= 2 else 4, boundary="reflecting" if d == 3 else "periodic")
    _png_ok(plot_result(_result(grid, with_mdp=d != 1), tmp_path / f"res{d}.png"))


def test_a_solved_result_says_so_and_draws_its_own_policy(tmp_path, captured, monkeypatch):
    """A file written by fpirl solve: the title names the re-solve and its change, and no policy map is drawn from
    psi (that is the fitted policy; the figure was the fit's, byte for byte, with the dynamics unchanged)."""
    import fpirl.plotting.fields as fields

    calls = []
    monkeypatch.setattr(fields, "action_maps", lambda result: calls.append(result) or None)
    grid = _grid(3, n=4)
    plot_result(_result(grid), tmp_path / "fit.png")
    fitted = captured[-1]
    assert len(calls) == 1  # the fit's figure draws the maps of psi's policy
    solved = _result(grid)
    solved.attrs.update(solve_method="policy", solve_noise_scale=1.5, solve_drift_scale=1.0, solve_action_drift=0.0)
    _png_ok(plot_result(solved, tmp_path / "solved.png"))
    fig = captured[-1]
    assert fig.get_suptitle().startswith("fpirl solved result (soft-optimal policy of the reward, noise x 1.5")
    assert not fitted.get_suptitle().startswith("fpirl solved")
    assert len(calls) == 1  # not for the solved file: they would show the fitted policy


def test_plot_result_other_formats(tmp_path):
    path = plot_result(_result(_grid(2)), tmp_path / "res.svg")
    assert path.stat().st_size > 1000


def test_kl_and_convergence(tmp_path):
    t = 0.1 * np.arange(20)
    _png_ok(plot_kl(t, np.exp(-t), tmp_path / "kl.png"))
    _png_ok(plot_kl(t, np.exp(-t), tmp_path / "klz.png", zoom=(0.0, 0.5)))
    N = np.array([10, 20, 40, 80])
    _png_ok(plot_convergence(N, {"psi": 3.0 / N**2, "grad psi": 2.0 / N, "with zero": [1e-2, 0.0, 1e-3, 5e-4]},
                             tmp_path / "conv.png"))


def test_nested_grid_image_layout():
    grid = Grid([0, 0, 0, 0], [1, 1, 1, 1], [2, 3, 4, 5], names=["a1", "s1", "s2", "a2"],
                roles=["action", "state", "state", "action"])
    assert nested_grid_layout(grid) == ((1, 2), (0, 3))
    values = np.arange(grid.size, dtype=float).reshape(grid.shape)
    img = nested_grid_image(values, grid)
    # outer (s1: 3 columns of blocks, s2: 4 rows of blocks), inner blocks of a1 (2 cols) x a2 (5 rows), gaps of 1
    assert img.shape == (4 * 5 + 3, 3 * 2 + 2)
    i, j, k, l = 2, 3, 1, 4  # s1, s2, a1, a2
    assert img[j * 6 + l, i * 3 + k] == values[k, i, j, l]
    assert np.isnan(img[5, :]).all() and np.isnan(img[:, 2]).all()


def test_nested_grid_image_one_inner_axis():
    grid = _grid(3, n=4)
    values = np.arange(grid.size, dtype=float).reshape(grid.shape)
    img = nested_grid_image(values, grid)
    assert img.shape == (4, 4 * 4 + 3)  # strips touch vertically, gaps between columns of blocks
    assert img[2, 1 * 5 + 3] == values[1, 2, 3]


def test_bad_figure_input(tmp_path):
    grid = _grid(2)
    with pytest.raises(FpirlInputError, match="unknown image type"):
        plot_potential_comparison(grid, _field(grid), _field(grid), tmp_path / "x.xyz")
    with pytest.raises(FpirlInputError, match="shape"):
        plot_potential_comparison(grid, _field(grid), _field(grid)[:2], tmp_path / "x.png")
    with pytest.raises(FpirlInputError, match="3 or 4 axes"):
        nested_grid_image(_field(grid), grid)
    assert os.listdir(tmp_path) == []


@pytest.fixture
def captured(monkeypatch):
    """The Figure objects the plotting functions save (the files are still written)."""
    figs = []
    save = fpirl.plotting.fields._save

    def keep(fig, path):
        figs.append(fig)
        return save(fig, path)

    monkeypatch.setattr(fpirl.plotting.fields, "_save", keep)
    return figs


def test_convergence_fitted_lines_are_drawn_and_labelled(tmp_path, captured):
    N = np.array([10.0, 20.0, 40.0, 80.0])
    err = 3.0 / N**2
    err[0] = 1.0  # outside the fit range: the line must not follow it
    _png_ok(plot_convergence(N, {"psi": err}, tmp_path / "c.png", fit_range=N[1:]))
    ax = captured[-1].axes[0]
    dashed = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
    assert len(dashed) == 1 and dashed[0].get_linewidth() >= 1.5
    x, y = dashed[0].get_data()
    assert x.min() == pytest.approx(20.0) and x.max() == pytest.approx(80.0)
    np.testing.assert_allclose(y, 3.0 / x**2, rtol=1e-10)  # the least-squares line through the fitted points
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "fit N = 20..80: slope -2.00" in labels


def test_colour_limits_are_robust_to_spikes(tmp_path, captured, rng):
    values = rng.normal(size=2000)
    values[:3] = [1e6, -1e6, np.nan]
    lo, hi = robust_range(values)
    assert -5 < lo < -2 and 2 < hi < 5
    m = symmetric_range(values)[1]
    assert symmetric_range(values)[0] == -m and 2 < m < 5
    assert robust_range(np.ones(5)) is None
    # the comparison figure takes its scale from the truth; a spike in the fit does not change it
    grid = _grid(2, n=8)
    truth = _field(grid)
    fit = truth.copy()
    fit[2, 3] = 1e3
    plot_potential_comparison(grid, truth, fit, tmp_path / "cmp.png")
    clims = [ax.images[0].get_clim() for ax in captured[-1].axes if ax.images]
    assert clims[0] == clims[1] == pytest.approx(robust_range(truth))
    assert clims[2][1] < 1e3 and clims[2][0] == -clims[2][1]


def test_plot_fields_shares_the_reference_scale(tmp_path, captured):
    grid = _grid(4, n=4)
    truth = _field(grid)
    _png_ok(plot_fields(grid, [("truth", truth), ("fit", 3.0 * truth)], tmp_path / "f.png", title="t"))
    clims = [ax.images[0].get_clim() for ax in captured[-1].axes if ax.images]
    assert clims[0] == clims[1] == pytest.approx(robust_range(truth))
    with pytest.raises(FpirlInputError, match="no panels"):
        plot_fields(grid, [], tmp_path / "g.png")


def test_kl_figure_shows_the_expected_size(tmp_path, captured):
    t = 0.1 * np.arange(20)
    _png_ok(plot_kl(t, 1e-3 * t, tmp_path / "kl.png", reference=0.5, title="data a.nc vs simulation b.nc (MDP)"))
    fig = captured[-1]
    assert fig.get_suptitle() == "data a.nc vs simulation b.nc (MDP)"
    levels = sorted(ln.get_ydata()[0] for ln in fig.axes[0].get_lines() if ln.get_linestyle() in ("--", ":"))
    assert levels == pytest.approx([0.05, 0.5])
