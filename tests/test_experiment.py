"""The generic experiment pipeline (fpirl.problems.experiment) on small 2-D problems."""

import numpy as np
import pytest

from fpirl import FpirlInputError, HermiteSpace
from fpirl.io import read_density, read_result
from fpirl.problems.experiment import (
    ExperimentSpec,
    boltzmann_initial_density,
    potential_errors,
    run_experiment,
)


def _f(points, alpha):
    s, a = points[..., 0], points[..., 1]
    u = np.pi * (a - 0.5 * np.sin(np.pi * s))
    du = -0.5 * np.pi**2 * np.cos(np.pi * s)
    return {
        (0, 0): -np.cos(u) + 0.3 * np.cos(np.pi * s),
        (1, 0): np.sin(u) * du - 0.3 * np.pi * np.sin(np.pi * s),
        (0, 1): np.pi * np.sin(u),
        (1, 1): np.pi * np.cos(u) * du,
    }[tuple(alpha)]


def small_spec(boundary="periodic", steps=20, **kw):
    periodic = boundary == "periodic"
    hermite = HermiteSpace([-1, -1], [1, 1], 4, periodic=periodic)
    coef = 0.5 * hermite.interpolate(_f)
    roles = ("state", "action")
    return ExperimentSpec(
        name=f"small-{boundary}", lower=(-1, -1), upper=(1, 1), names=("s", "a"), roles=roles,
        boundary=boundary, hermite=hermite, coef=coef, beta=5.0, dt=0.02, steps=steps,
        initial=boltzmann_initial_density(hermite, coef, 5.0, roles),
        eval_elements=40, **kw,
    )


def test_hermite_potential_tensor_and_scattered_agree(rng):
    spec = small_spec()
    pot = spec.potential
    coords = [np.linspace(-1, 0.9, 7), np.linspace(-0.8, 1, 5)]
    mesh = np.stack(np.meshgrid(*coords, indexing="ij"), axis=-1)
    scattered = mesh.reshape(-1, 2)[rng.permutation(35)]
    np.testing.assert_allclose(pot(scattered), spec.hermite.evaluate(spec.coef, scattered), atol=1e-13)
    np.testing.assert_allclose(pot(mesh), spec.hermite.evaluate(spec.coef, mesh), atol=1e-13)
    np.testing.assert_allclose(pot.gradient(mesh), spec.hermite.gradient(spec.coef, mesh), atol=1e-12)
    np.testing.assert_allclose(pot.gradient(scattered), spec.hermite.gradient(spec.coef, scattered), atol=1e-12)


def test_boltzmann_initial_density_normalisation(rng):
    spec = small_spec()
    from fpirl.core.quadrature import composite_rule

    xs, ws = composite_rule(np.linspace(-1, 1, 9), 8)
    mesh = np.stack(np.meshgrid(xs, xs, indexing="ij"), axis=-1)
    p0 = spec.initial(mesh)
    assert ws @ p0 @ ws == pytest.approx(1.0, rel=1e-10)
    np.testing.assert_allclose(p0 @ ws, 0.5, rtol=1e-10)  # uniform rho0 = 1/|S|, |S| = 2
    # scattered points give the same values
    pts = np.column_stack([rng.uniform(-1, 1, 30), rng.uniform(-1, 1, 30)])
    tens = [spec.initial(np.array([[[p[0], p[1]]]]))[0, 0] for p in pts]
    np.testing.assert_allclose(spec.initial(pts), tens, rtol=1e-12)


def test_potential_errors_zero_for_truth_and_mean_invariant():
    spec = small_spec()
    g = spec.grid(20)
    e = potential_errors(spec, spec.hermite, spec.coef + 3.0 * spec.hermite.constant_mode(), g)
    assert e["psi_error"] < 1e-12 and e["grad_error"] < 1e-12
    e = potential_errors(spec, spec.hermite, 1.1 * spec.coef, g)
    assert e["psi_relative_error"] == pytest.approx(0.1, rel=1e-6)
    assert e["grad_relative_error"] == pytest.approx(0.1, rel=1e-6)


def test_data_key_depends_on_the_truth():
    a, b = small_spec(), small_spec()
    assert a.data_key() == b.data_key()
    b.coef = 1.01 * b.coef
    assert a.data_key() != b.data_key()
    assert small_spec(solver_points=48).data_key() != a.data_key()


def test_spec_validation():
    with pytest.raises(FpirlInputError, match="steps"):
        small_spec(steps=0)
    spec = small_spec()
    with pytest.raises(FpirlInputError, match="periodic"):
        ExperimentSpec(**{**spec.__dict__, "boundary": "reflecting"})
    with pytest.raises(FpirlInputError, match="element"):
        run_experiment(spec, [1], "unused", progress=False, verbose=False)


@pytest.mark.parametrize("boundary", ["periodic", "reflecting"])
def test_pipeline_small_2d(tmp_path, boundary):
    spec = small_spec(boundary, solver_points=48 if boundary == "periodic" else 65)
    summary = run_experiment(spec, [10, 20], tmp_path / "out", tmp_path / "cache", progress=False, verbose=False)
    per = summary["per_N"]
    assert per[20]["fp"]["psi_error"] < per[10]["fp"]["psi_error"]
    assert per[20]["fp"]["psi_relative_error"] < (0.1 if boundary == "periodic" else 0.2)
    assert 0 < per[20]["fp"]["kl_ratio"] < 0.1
    ds = read_result(tmp_path / "out" / "result_N20.nc")
    assert ds.attrs["metric_psi_error"] == pytest.approx(per[20]["fp"]["psi_error"])
    assert ds["policy_kl"].dims == ("s",)
    assert (tmp_path / "out" / "report.md").exists() and (tmp_path / "out" / "summary.json").exists()
    # the cached data follow the density contract
    cached = sorted((tmp_path / "cache").glob("*/fp_N20_*.nc"))
    assert cached and read_density(cached[0]).grid == spec.grid(20)
    again = run_experiment(spec, [10, 20], tmp_path / "out", tmp_path / "cache", progress=False, verbose=False)
    assert again["data"]["cache_hits"] == again["data"]["cache_lookups"]
    assert again["data"]["fp_solver"]["cache_hit"]
