"""The mixed flux quadrature (fpirl.weakform.matfree_mixed): its limiting rules against the interpolated and
Gauss-point flux operators, its exactness and order against the assembled (exact) normal matrix, and its psi
against the exact quadrature's on data from an independent solver."""

import numpy as np
import pytest

from fpirl import DensitySnapshots, Grid, HermiteSpace, PotentialEstimator
from fpirl.forward import SpectralSolver, von_mises_bump
from fpirl.weakform.assembly import assemble_normal_equations
from fpirl.weakform.matfree_flux import FluxOperator
from fpirl.weakform.matfree_gauss import GaussFluxOperator
from fpirl.weakform.matfree_mixed import MixedFluxOperator


def snapshots(rng, boundary, shape, n_t=4):
    g = Grid([-1.0] * len(shape), [1.0 + 0.5 * b for b in range(len(shape))], shape, boundary=boundary)
    return DensitySnapshots(g, np.arange(n_t) * 0.1, 0.5 + rng.random((n_t,) + g.shape))


@pytest.mark.parametrize("compress", [1e-13, None])
@pytest.mark.parametrize("boundary", ["periodic", "reflecting"])
def test_limiting_rules_are_the_interpolated_and_the_gauss_point_flux(rng, boundary, compress):
    """Nodal rules on every axis give FluxOperator's products and right-hand sides, Gauss rules on every
    axis GaussFluxOperator's (the generic, unfactored path)."""
    s = snapshots(rng, boundary, [5, 4])
    H = HermiteSpace.on_grid(s.grid, (2, 3))
    C = rng.standard_normal((2, H.n_coef))
    for rules, reference in ((("nodal", "nodal"), FluxOperator), (("gauss", "gauss"), GaussFluxOperator)):
        ref = reference(s, H, chunk_bytes=1, compress=compress)
        op = MixedFluxOperator(s, H, derivative=rules[0], transverse=rules[1], chunk_bytes=1, compress=compress)
        for c in C:
            r = ref.matvec(c)
            np.testing.assert_allclose(op.matvec(c), r, rtol=0, atol=1e-12 * np.abs(r).max())
        for key in ("xtg", "xtc"):
            r = getattr(ref.rhs, key)
            np.testing.assert_allclose(getattr(op.rhs, key), r, rtol=0, atol=1e-12 * np.abs(r).max())


def separable_coefficients(rng, H):
    """Hermite coefficients of a random ``psi = sum_b f_b(x_b)``: ``d_a psi`` is constant across axis ``a``."""
    ones = [np.tile([1.0, 0.0], ax.n_dofs // 2) for ax in H.axes]
    c = np.zeros(H.shape)
    for a, ax in enumerate(H.axes):
        term = np.ones(())
        for b in range(H.ndim):
            term = np.multiply.outer(term, rng.standard_normal(ax.n_dofs) if b == a else ones[b])
        c += term
    return c.ravel()


@pytest.mark.parametrize("boundary,shape", [("periodic", [6, 6]), ("reflecting", [6, 6]), ("periodic", [6, 4, 6])])
def test_exact_where_the_gradient_is_constant_across_its_axis(rng, boundary, shape):
    """Hermite breaks on FE nodes (psi quadratic per cell along the derivative axis: 2 Gauss points are
    exact) and a separable psi: the residual ``Xi theta`` is exact, so the quadratic form
    ``theta . A theta`` and ``theta . X^T g`` equal the assembled path's; a coupled psi does not."""
    g = Grid([-1.0] * len(shape), [1.0] * len(shape), shape, boundary=boundary)
    s = DensitySnapshots(g, np.arange(3) * 0.1, 0.5 + rng.random((3,) + g.shape))
    H = HermiteSpace.on_grid(g, [3 if n > 4 else 2 for n in shape])
    ne = assemble_normal_equations(s, H)
    op = MixedFluxOperator(s, H)
    theta = separable_coefficients(rng, H)
    exact = theta @ ne.xtx @ theta
    assert theta @ op.matvec(theta) == pytest.approx(exact, rel=1e-12)
    assert theta @ op.rhs.xtg == pytest.approx(theta @ ne.xtg, rel=1e-12)
    coupled = rng.standard_normal(H.n_coef)
    assert abs(coupled @ op.matvec(coupled) / (coupled @ ne.xtx @ coupled) - 1) > 1e-6


def test_quadrature_error_converges_at_fourth_order():
    """Smooth density and a coupled Hermite psi (2 elements per axis) on periodic grids of 16 and 32 nodes
    per axis: ``||(A_mixed - A) theta|| / ||A theta||`` (``A`` assembled, exact) falls by 2^3.5 or more
    per halving of h (observed 3.9), the interpolated flux's by about 2^2."""
    errors = []
    for n in (16, 32):
        g = Grid([-1.0, -1.0], [1.0, 1.0], [n, n], boundary="periodic")
        X, Y = np.meshgrid(*g.coords, indexing="ij")
        p = np.exp(np.cos(np.pi * (X - 0.3)) + 0.5 * np.sin(np.pi * (Y + 0.2)) + 0.3 * np.cos(np.pi * (X + Y)))
        s = DensitySnapshots(g, [0.0, 0.1], np.stack([p, 1.1 * p]))
        H = HermiteSpace.on_grid(g, (2, 2))

        def psi(P, alpha):  # cos(pi x + 0.3) + 0.5 sin(pi x + 0.2) cos(pi y - 0.4) and its mixed partials
            x, y = P[..., 0], P[..., 1]
            fx = [np.cos(np.pi * x + 0.3), -np.pi * np.sin(np.pi * x + 0.3)][alpha[0]] * (alpha[1] == 0)
            gx = [np.sin(np.pi * x + 0.2), np.pi * np.cos(np.pi * x + 0.2)][alpha[0]]
            gy = [np.cos(np.pi * y - 0.4), -np.pi * np.sin(np.pi * y - 0.4)][alpha[1]]
            return fx + 0.5 * gx * gy

        theta = H.interpolate(psi).ravel()
        ref = assemble_normal_equations(s, H).xtx @ theta
        errors.append([np.linalg.norm(op(s, H).matvec(theta) - ref) / np.linalg.norm(ref)
                       for op in (MixedFluxOperator, FluxOperator)])
    (mixed16, flux16), (mixed32, flux32) = errors
    assert np.log2(mixed16 / mixed32) > 3.5, errors
    assert 1.7 < np.log2(flux16 / flux32) < 2.3, errors
    assert mixed32 < 0.01 * flux32, errors


def test_fit_matches_the_exact_quadrature_on_a_coupled_potential():
    """2-D coupled psi, data from the Fourier pseudo-spectral solver (independent) on 10 x 10 nodes: the
    mixed flux's psi is the exact quadrature's (assembled) to a small fraction of the interpolated flux's
    distance (observed 0.07% against 4.2% of psi; psi error 4.4%)."""
    H = HermiteSpace([-1.0, -1.0], [1.0, 1.0], 3, True)

    def psi(P, alpha):
        x, y = P[..., 0], P[..., 1]
        fx = [np.cos(np.pi * x + 0.3), -np.pi * np.sin(np.pi * x + 0.3)][alpha[0]] * (alpha[1] == 0)
        fy = [0.45 * np.cos(np.pi * y - 0.7), -0.45 * np.pi * np.sin(np.pi * y - 0.7)][alpha[1]] * (alpha[0] == 0)
        gx = [np.sin(np.pi * x - 0.7), np.pi * np.cos(np.pi * x - 0.7)][alpha[0]]
        gy = [np.cos(np.pi * y - 0.3), -np.pi * np.sin(np.pi * y - 0.3)][alpha[1]]
        return 0.6 * fx + fy + 0.4 * gx * gy

    coef = H.interpolate(psi)
    solver = SpectralSolver([-1.0, -1.0], [1.0, 1.0], 48, lambda x: H.gradient(coef, x), 2.0)
    times = 0.02 * np.arange(12)
    values = solver.solve(von_mises_bump([-1.0, -1.0], [1.0, 1.0], [0.4, -0.3], 1.5), times)
    grid = Grid([-1.0, -1.0], [1.0, 1.0], 10, boundary="periodic")
    data = DensitySnapshots(grid, times, np.clip(solver.evaluate(values, grid.coords), 0.0, None))
    x = -1.0 + (np.arange(40) + 0.37) / 20

    def field(c):
        f = H.evaluate_grid(c, [x, x])
        return f - f.mean()

    fits = {s: field(PotentialEstimator(hermite_elements=3, beta=2.0, solver=s).fit(data).coef_)
            for s in ("assembled", "mixed-flux", "interpolated-flux")}
    scale = np.linalg.norm(field(coef))
    to_exact = {s: np.linalg.norm(fits[s] - fits["assembled"]) / scale for s in ("mixed-flux", "interpolated-flux")}
    assert to_exact["mixed-flux"] < 0.1 * to_exact["interpolated-flux"], to_exact
    assert np.linalg.norm(fits["mixed-flux"] - field(coef)) / scale < 0.1


@pytest.mark.parametrize("solver", ["mixed-flux", "gauss-flux"])
def test_flux_quadrature_fit_has_no_posterior(rng, solver):
    """Like the interpolated flux: no snapshot-noise posterior (it needs the exact 3^d band), a warning."""
    from fpirl.uncertainty import estimate_uncertainty

    g = Grid([-1.0, -1.0], [1.0, 1.0], [6, 5], boundary="periodic")
    s = DensitySnapshots(g, np.arange(4) * 0.1, 0.5 + 0.1 * rng.random((4,) + g.shape))
    est = PotentialEstimator(hermite_elements=2, beta=2.0, solver=solver).fit(s)
    assert est.solver_ == solver and est.settings_["solver"] == solver
    with pytest.warns(RuntimeWarning, match=solver):
        assert estimate_uncertainty(est, "posterior", s) is None


def test_unknown_rule_is_an_input_error(rng):
    from fpirl import FpirlInputError

    s = snapshots(rng, "periodic", [4, 4], n_t=2)
    with pytest.raises(FpirlInputError, match="unknown flux rule"):
        MixedFluxOperator(s, HermiteSpace.on_grid(s.grid, (2, 2)), derivative="simpson")
