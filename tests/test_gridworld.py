"""The Grid World ground truth (paper section 5.1) and the quick benchmark pipeline end to end."""

import itertools

import numpy as np
import pytest

from fpirl.io import read_density, read_result
from fpirl.problems.experiment import ExperimentData
from fpirl.problems.gridworld import (
    GRIDWORLD_BETA,
    GRIDWORLD_STEPS,
    MultilinearJet,
    gridworld_f,
    gridworld_partials,
    gridworld_spec,
    gridworld_truth,
    run_gridworld,
)

ALPHAS = list(itertools.product((0, 1), repeat=4))


def test_jet_partials_match_finite_differences(rng):
    x = rng.uniform(-1, 1, size=(40, 4))
    h = 1e-3
    for alpha in ALPHAS:
        idx = [i for i in range(4) if alpha[i]]
        fd = np.zeros(len(x))
        for signs in itertools.product((-1, 1), repeat=len(idx)):
            y = x.copy()
            for s, i in zip(signs, idx):
                y[:, i] += s * h
            fd += np.prod(signs) * gridworld_f(*y.T)
        fd /= (2 * h) ** len(idx)
        np.testing.assert_allclose(gridworld_partials(x, alpha), fd, atol=2e-4, err_msg=str(alpha))


def test_jet_algebra_product_rule():
    x = MultilinearJet.variable(np.array([0.3]), 0, 2)
    y = MultilinearJet.variable(np.array([-0.7]), 1, 2)
    g = (x * y).sin()  # d^2/dx dy sin(xy) = cos(xy) - xy sin(xy)
    xy = 0.3 * -0.7
    np.testing.assert_allclose(g.partial((1, 1)), np.cos(xy) - xy * np.sin(xy))
    np.testing.assert_allclose(g.partial((1, 0)), -0.7 * np.cos(xy))


def test_f_range_and_hermite_interpolant():
    g = np.linspace(-1, 1, 41)
    mesh = np.meshgrid(g, g, g, g, indexing="ij")
    f = gridworld_f(*mesh)
    assert f.min() == pytest.approx(0.0, abs=1e-12) and f.max() == pytest.approx(2.0, abs=1e-12)
    hermite, coef = gridworld_truth()
    assert hermite.elements == (4, 4, 4, 4) and hermite.periodic
    psi = hermite.evaluate_grid(coef, [g] * 4)
    err = np.abs(psi - f).max()
    assert err < 0.1  # cubic Hermite interpolation error with H = 0.5
    assert psi.min() > -err and psi.max() < 2 + err


def test_interpolant_reproduces_all_mixed_partials_at_the_nodes():
    hermite, coef = gridworld_truth()
    nodes = hermite.axes[0].nodes
    mesh = np.stack(np.meshgrid(*[nodes] * 4, indexing="ij"), axis=-1)
    for alpha in ALPHAS:
        np.testing.assert_allclose(hermite.evaluate_grid(coef, [nodes] * 4, alpha),
                                   gridworld_partials(mesh, alpha), atol=1e-12, err_msg=str(alpha))


def test_ground_truth_is_periodic(rng):
    hermite, coef = gridworld_truth()
    x = rng.uniform(-1, 1, size=(200, 4))
    for axis in range(4):
        y = x.copy()
        y[:, axis] += 2.0
        np.testing.assert_allclose(gridworld_f(*y.T), gridworld_f(*x.T), atol=1e-12)
        for alpha in ALPHAS[:4]:
            np.testing.assert_allclose(gridworld_partials(y, alpha), gridworld_partials(x, alpha), atol=1e-11)
        # the interpolant's value and slope are continuous across the seam
        lo, hi = x.copy(), x.copy()
        lo[:, axis], hi[:, axis] = -1.0, 1.0 - 1e-12
        np.testing.assert_allclose(hermite.evaluate(coef, lo), hermite.evaluate(coef, hi), atol=1e-9)
        np.testing.assert_allclose(hermite.gradient(coef, lo), hermite.gradient(coef, hi), atol=1e-8)


def test_initial_density_is_uniform_in_state_times_boltzmann_policy():
    spec = gridworld_spec(quick=True)
    hermite, coef = gridworld_truth()
    from fpirl.core.quadrature import composite_rule

    xa, wa = composite_rule(np.linspace(-1, 1, 5), 8)
    s = np.array([-0.9, 0.1, 0.55])
    coords = [s, s, xa, xa]
    mesh = np.stack(np.meshgrid(*coords, indexing="ij"), axis=-1)
    p0 = spec.initial(mesh)
    marginal = np.einsum("ijkl,k,l->ij", p0, wa, wa)
    np.testing.assert_allclose(marginal, 0.25, rtol=1e-10)  # rho0 = 1/|S|, |S| = 4
    psi = hermite.evaluate_grid(coef, coords)
    ratio = p0 * np.exp(GRIDWORLD_BETA * psi)  # = 1 / (|S| Z(s)): constant in the action
    np.testing.assert_allclose(ratio / ratio[:, :, :1, :1], 1.0, rtol=1e-10)


def test_quick_pipeline_end_to_end_and_cache(tmp_path):
    out = tmp_path / "out"
    cache = tmp_path / "cache"
    first = run_gridworld(out, quick=True, progress=False, cache_dir=cache, verbose=False)
    assert first["elements"] == [5, 7]
    for n in (5, 7):
        ds = read_result(out / f"result_N{n}.nc")
        assert {"potential", "q_value", "policy", "reward", "potential_true", "kl_divergence"} <= set(ds.data_vars)
        assert ds.attrs["beta"] == GRIDWORLD_BETA and ds.attrs["data_kind"] == "fp"
        assert ds["kl_divergence"].sizes["time"] == 51
        assert read_result(out / f"result_N{n}_mdp.nc").attrs["data_kind"] == "mdp"
    report = (out / "report.md").read_text()
    assert "| N | data | psi error" in report and "| 7 | FP PDE |" in report and "| 5 | MDP map |" in report
    assert "error floor" in report
    assert "**Quick run**" in report and "underdetermined" in report and "not a failure" in report
    for name in first["figures"].values():
        assert (out / name).stat().st_size > 1000, name
    assert {"q_value", "reward", "policy", "density", "kl", "convergence_psi", "convergence_grad"} <= set(first["figures"])
    per = first["per_N"]
    for q in ("psi_error", "grad_error"):
        assert per[7]["fp"][q] < per[5]["fp"][q], q
    assert np.isfinite(per[7]["fp"]["kl_ratio"]) and first["kl_curve_fp"][0] == pytest.approx(0.0, abs=1e-12)
    assert first["data"]["cache_hits"] == 0

    # a second pass over the same cache: every grid's data are read back unchanged, without
    # solving (or even loading) the FP solution again
    spec = gridworld_spec(quick=True)
    again = ExperimentData(spec, [5, 7], cache)
    for n in (5, 7):
        grid = spec.grid(n)
        fp, _ = again.fp(grid)
        np.testing.assert_array_equal(fp.values, read_density(next(cache.glob(f"*/fp_N{n}_*.nc"))).values)
        assert again.mdp(grid, truth=None).values.shape == (GRIDWORLD_STEPS + 1, *grid.shape)
    assert again.hits == again.lookups == 4 and again.solve_seconds == 0.0
