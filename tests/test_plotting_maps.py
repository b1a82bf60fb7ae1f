"""Readable figures of position/velocity results: the velocity map drawn once when psi does not
depend on position, labelled and ticked axes, the policy as a map over velocity with its support."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import fpirl.plotting.fields as fields
from fpirl.core.grid import Grid
from fpirl.core.hermite import HermiteSpace
from fpirl.io import grid_coords
from fpirl.mdp.maps import action_maps
from fpirl.mdp.recovery import boltzmann_policy
from fpirl.mdp.support import support_extra

M, C, BETA = np.array([0.4, -0.2]), 2.0, 5.0  # psi = C |a - M|^2 (+ slope * x): policy N(M, 1 / (2 BETA C))


def _result(rng, slope=0.0):
    grid = Grid([0, 0, -1.5, -1.5], [4, 3, 1.5, 1.5], [2, 2, 12, 12], names=["x", "y", "v_x", "v_y"],
                roles=["state", "state", "action", "action"], boundary="reflecting")
    hs = HermiteSpace.on_grid(grid, 2)

    def derivative(p, alpha):
        a = p[..., 2:] - M
        out = np.zeros(p.shape[:-1])
        if alpha == (0, 0, 0, 0):
            out = C * np.sum(a**2, axis=-1) + slope * p[..., 0]
        elif alpha == (1, 0, 0, 0):
            out = out + slope
        elif alpha in ((0, 0, 1, 0), (0, 0, 0, 1)):
            out = 2 * C * a[..., alpha.index(1) - 2]
        return out

    coef = hs.interpolate(derivative)
    psi = hs.evaluate_grid(coef, grid.coords)
    dims = grid.names
    ds = xr.Dataset({"potential": (dims, psi - psi.mean()), "policy": (dims, boltzmann_policy(grid, psi, BETA)),
                     "reward": (dims, -psi),
                     "hermite_coefficients": (tuple(f"hermite_{n}" for n in dims), coef)},
                    coords=grid_coords(grid),
                    attrs={"boundary": "reflecting", "beta": BETA, "dt": 0.1, "hermite_elements": np.array([2] * 4),
                           "state_dims": "x,y", "action_dims": "v_x,v_y"})
    pts = np.column_stack([rng.uniform(0, 4, 2000), rng.uniform(0, 3, 2000), M + 0.3 * rng.normal(size=(2000, 2))])
    pts = np.clip(pts, grid.lower, grid.upper)
    extra, _ = support_extra(grid, pts)
    ds = ds.assign(data_density=extra["data_density"], data_support=extra["data_support"])
    ds.attrs["data_observations"] = extra["data_observations"]
    return ds


@pytest.mark.parametrize("slope", [0.0, 0.5])
def test_action_maps_are_the_analytic_policy(rng, slope):
    maps = action_maps(_result(rng, slope), n=61)
    assert maps["constant"] is (slope == 0.0)
    vx, vy = maps["coords"]
    pbar = maps["policy"]
    assert np.trapezoid(np.trapezoid(pbar, vy, axis=1), vx) == pytest.approx(1.0, rel=1e-6)
    assert np.allclose(maps["mode"], M, atol=vx[1] - vx[0])
    assert np.allclose(maps["mean"], M, atol=0.02)
    assert maps["support"].any() and not maps["support"].all()
    ds = _result(rng, slope)
    del ds.attrs["data_observations"]  # older results: the action support from the stored joint mask
    old = action_maps(ds, n=61)
    assert old["support"].any() and np.allclose(old["mode"], M, atol=vx[1] - vx[0])


def _figure(monkeypatch, ds, tmp_path):
    seen = {}

    def keep(fig, path, dpi=100):
        seen["fig"] = fig
        return path

    monkeypatch.setattr(fields, "_save", keep)
    fields.plot_result(ds, tmp_path / "r.png")
    return seen["fig"]


def test_psi_constant_in_position_is_drawn_once_over_velocity(rng, monkeypatch, tmp_path):
    fig = _figure(monkeypatch, _result(rng), tmp_path)
    axes = [a for a in fig.axes if a.get_visible() and a.get_xlabel()]
    assert not any("(outer)" in a.get_xlabel() for a in axes)  # no nested grid of identical panels
    maps = [a for a in axes if a.get_xlabel() == "v_x" and a.get_ylabel() == "v_y"]
    assert len(maps) == 3  # potential, policy, reward: once each
    for a in maps:
        assert len(a.get_xticks()) > 2 and len(a.get_yticks()) > 2
    policy = next(a for a in maps if "policy" in a.get_title())
    assert len(policy.images) == 2 and policy.collections  # the map, the grey no-data overlay, its contour
    assert {t.get_text() for t in policy.get_legend().get_texts()} == {"mode (within the data)",
                                                                       "mean (within the data)"}


def test_psi_depending_on_position_keeps_the_nested_grid_and_adds_a_velocity_map(rng, monkeypatch, tmp_path):
    fig = _figure(monkeypatch, _result(rng, slope=0.5), tmp_path)
    labels = [a.get_xlabel() for a in fig.axes if a.get_visible()]
    nested = [lab for lab in labels if "(outer)" in lab]
    assert len(nested) == 3 and all("v_x \u2192 [-1.5, 1.5]" in lab for lab in nested)
    assert "v_x" in labels
