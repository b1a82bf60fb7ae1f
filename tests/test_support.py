"""Where the data are: the support stored with a result, and policy summaries taken only there."""

from __future__ import annotations

import numpy as np
import pytest

from fpirl.core.grid import Grid
from fpirl.mdp.recovery import boltzmann_policy
from fpirl.mdp.support import data_support, policy_summary, support_extra

MODE_OFF = np.array([-0.96, 2.02])  # where the policy would peak: no observed velocity there
DATA_MODE = np.array([1.14, 0.11])  # where the observed velocities are


def _pedestrian_like(rng, n=3000):
    grid = Grid([0.0, -1.5, -1.0], [4.0, 2.5, 3.0], [2, 16, 16], names=["x", "v_x", "v_y"],
                roles=["state", "action", "action"], boundary="reflecting")
    pts = np.column_stack([rng.uniform(0, 4, n), DATA_MODE + 0.15 * rng.normal(size=(n, 2))])
    mesh = grid.mesh()
    psi = np.sum((mesh[..., 1:] - MODE_OFF) ** 2, axis=-1)  # minimum far from the data
    return grid, pts, boltzmann_policy(grid, psi, 5.0)


def test_density_and_support_mark_where_the_data_are(rng):
    grid, pts, _ = _pedestrian_like(rng)
    density, mask = data_support(grid, pts)
    assert grid.integrate(density) == pytest.approx(1.0)
    # brute force: a node further than one cell from every observation (in velocity) has no data
    mesh = grid.mesh().reshape(-1, 3)
    h = grid.spacing[1:]
    near = np.array([np.any(np.all(np.abs(pts[:, 1:] - node[1:]) < h, axis=1)) for node in mesh])
    assert not np.any(mask.ravel() & ~near)
    assert mask.sum() > 4


def test_no_policy_mode_outside_the_data_support(rng):
    """The pedestrian case: the policy's mass sits at a velocity the data never show; the reported
    and stored mode lies where the data are, and a warning says the rest is an extrapolation."""
    from fpirl.mdp.recovery import MDP

    grid, pts, policy = _pedestrian_like(rng)
    mesh = grid.mesh()
    raw_mode = mesh[np.unravel_index(np.argmax(policy), policy.shape)][1:]
    assert np.allclose(raw_mode, MODE_OFF, atol=grid.spacing[1])  # the unrestricted policy peaks off the data
    mdp = MDP(grid, 5.0, 0.1, 0.9, -np.zeros(grid.shape), policy, None, np.zeros(grid.shape))
    with pytest.warns(UserWarning, match="no observations"):
        extra, summary = support_extra(grid, pts, mdp)
    mode = np.asarray(extra["policy_mode"])
    h = grid.spacing[1:]
    assert np.sum(np.all(np.abs(pts[:, 1:] - mode) < h, axis=1)) >= 10  # observations right next to the mode
    assert np.linalg.norm(mode - MODE_OFF) > 1.5
    assert extra["policy_mass_outside_support"] > 0.9
    assert np.all(np.abs(extra["policy_mean_action"] - DATA_MODE) < 1.0)
    assert set(np.unique(extra["data_support"].values)) == {0, 1}
    # a policy that lives on the data: nothing outside, the mode is its peak, no warning
    on = boltzmann_policy(grid, np.sum((mesh[..., 1:] - DATA_MODE) ** 2, axis=-1), 20.0)  # sd 0.16 as the data
    s = policy_summary(grid, on, data_support(grid, pts)[0], len(pts))
    assert s.mass_outside < 0.05 and np.allclose(s.mode, DATA_MODE, atol=grid.spacing[1])


def _trapped_snapshots():
    """A narrow Gaussian that drifts a little inside a wide walled box: the corners never see mass."""
    from fpirl import DensitySnapshots

    grid = Grid([-3.0, -3.0], [3.0, 3.0], 24, boundary="reflecting", names=["s0", "a0"], roles=["state", "action"])
    x, y = np.moveaxis(grid.mesh(), -1, 0)
    t = 0.05 * np.arange(8)
    vals = np.stack([np.exp(-((x - 0.1 * k) ** 2 + y**2) / 0.5) for k in range(t.size)])
    return DensitySnapshots(grid, t, vals), x, y


def test_snapshot_support_is_where_the_time_mean_density_is(rng):
    from fpirl.mdp.support import snapshot_support

    s, x, y = _trapped_snapshots()
    density, mask = snapshot_support(s)
    assert s.grid.integrate(density) == pytest.approx(1.0)
    mean = s.values.mean(0)
    np.testing.assert_array_equal(mask, mean >= 1e-3 * mean.max())
    assert mask[12, 12] and not mask[0, 0] and 0.2 < mask.mean() < 0.8  # the centre is in, the corners are out


def test_fit_of_density_data_records_the_support_and_notes_an_empty_region(tmp_path, capsys):
    from fpirl import DensitySnapshots, write_density
    from fpirl.cli import main
    from fpirl.io import read_result

    s, x, y = _trapped_snapshots()
    wide = DensitySnapshots(s.grid, s.times, s.values + 0.2)  # mass everywhere
    for name, data, empty in (("trapped", s, True), ("wide", wide, False)):
        path, out = tmp_path / f"{name}.nc", tmp_path / f"{name}_r.nc"
        write_density(path, data)
        assert main(["fit", str(path), "-o", str(out), "--beta", "2", "--hermite-elements", "3", "--uncertainty",
                     "none", "--no-progress"]) == 0
        printed = capsys.readouterr().out
        res = read_result(out)
        support = res["data_support"].values
        assert res.attrs["data_support_share"] == pytest.approx(support.mean())
        assert ("elsewhere psi is the ridge's extrapolation" in printed) == empty, printed
        assert (support.mean() < 0.95) == empty and s.grid.integrate(res["data_density"].values) == pytest.approx(1)
