"""The Lanczos exponential of the finite-volume generator (fpirl.forward._lanczos, FiniteVolumeSolver 'lanczos')."""

from __future__ import annotations

import numpy as np
import pytest

from fpirl import FpirlInputError
from fpirl.forward import FiniteVolumeSolver


def _psi(x):
    """A smooth potential on the box ``[0, 1]^3`` (not separable)."""
    return (np.sin(2.0 * np.pi * x[..., 0]) + x[..., 0] + np.cos(np.pi * x[..., 0]) * x[..., 1] + x[..., 1] ** 2
            + 0.5 * np.sin(np.pi * x[..., 2] * x[..., 0]))


def _bump(x):
    return np.exp(-np.sum((x - np.array([0.3, 0.6, 0.5])) ** 2, axis=-1) / (2 * 0.15**2))


def _solve(method, shape, beta, times, scale=1.0, **kw):
    solver = FiniteVolumeSolver([0.0] * 3, [1.0] * 3, shape, lambda x: scale * _psi(x), beta, method=method, **kw)
    return solver, solver.solve(_bump, times)


def test_symmetrised_generator_is_symmetric_similar_and_conserves_mass():
    """``S = T L T^{-1}``, ``T = (V / pi)^{1/2}``: exactly symmetric, the same operator as ``L`` in those variables,
    negative semi-definite, and ``(V pi)^{1/2}`` (mass) is its null vector."""
    solver = FiniteVolumeSolver([0.0] * 3, [1.0] * 3, [7, 6, 5], _psi, 3.0, method="lanczos")
    sym = solver._symmetric
    S, L = sym.matrix.toarray(), solver.generator.toarray()
    assert np.array_equal(S, S.T)
    T = sym.scale
    similar = T[:, None] * L / T[None, :]
    assert np.abs(S - similar).max() < 1e-13 * np.abs(S).max()
    ev = np.linalg.eigvalsh(S)
    assert ev.max() < 1e-12 * np.abs(ev).max() and ev.min() < 0
    assert np.abs(S @ sym.null).max() < 1e-13 * np.abs(S).max()
    np.testing.assert_allclose(sym.null, np.sqrt(solver.volumes.ravel() * solver.equilibrium().ravel())
                               / np.linalg.norm(np.sqrt(solver.volumes.ravel() * solver.equilibrium().ravel())),
                               rtol=1e-12)


@pytest.mark.parametrize("rtol", [None, 1e-6])
def test_lanczos_agrees_with_expm_within_its_tolerance_and_conserves_mass(rtol):
    times = [0.0, 0.01, 0.02, 0.05, 0.2]
    _, ref = _solve("expm", 15, 2.0, times)
    solver, got = _solve("auto", 15, 2.0, times, rtol=rtol)
    assert solver.method == "lanczos" and solver.lanczos_fallbacks == 0
    tol = 1e-10 if rtol is None else rtol
    err = np.abs(got - ref).reshape(len(times), -1).max(axis=1) / np.abs(ref).reshape(len(times), -1).max(axis=1)
    assert np.all(err <= tol), err
    assert err[1:].max() > 1e-4 * tol  # stopped near its tolerance, not run to rounding (the tolerance is used)
    masses = [solver.mass(p) for p in got]
    np.testing.assert_allclose(masses, masses[0], rtol=1e-13)


def test_lanczos_agrees_with_the_rational_method_in_2d():
    lo, hi = [0.0, 0.0], [1.0, 1.5]
    psi = lambda x: np.sin(2 * np.pi * x[..., 0]) + np.cos(np.pi * x[..., 0]) * x[..., 1]  # noqa: E731
    init = lambda x: np.exp(-np.sum((x - 0.5) ** 2, axis=-1) / 0.05)  # noqa: E731
    a = FiniteVolumeSolver(lo, hi, [33, 41], psi, 3.0, method="rational").solve(init, [0.0, 0.02, 0.2])
    b = FiniteVolumeSolver(lo, hi, [33, 41], psi, 3.0, method="lanczos", rtol=1e-12).solve(init, [0.0, 0.02, 0.2])
    assert np.abs(a - b).max() < 1e-12 * a.max()


def test_long_intervals_are_split_into_substeps_or_left_to_the_rational_method_in_2d():
    """An interval with ``||L||_1 dt`` far beyond one substep (fast diffusion) is split and stays accurate (3-D); in
    2-D it goes to the Talbot rule (no sub-steps there: its cost does not grow with ``||L|| dt``)."""
    times = [0.0, 0.5]
    _, ref = _solve("expm", 11, 0.2, times)
    solver, got = _solve("lanczos", 11, 0.2, times)
    assert solver._norm1 * 0.5 > 2 * solver._symmetric.max_stiffness() == 800.0  # (at least three substeps)
    assert solver.lanczos_fallbacks == 0 and np.abs(got - ref).max() < 1e-10 * ref.max()
    init = lambda x: np.exp(-np.sum((x - 0.5) ** 2, axis=-1) / 0.05)  # noqa: E731
    flat = FiniteVolumeSolver([0.0, 0.0], [1.0, 1.0], 41, lambda x: x[..., 0], 0.2)
    long = flat.solve(init, [0.0, 0.002, 0.5])
    assert flat.method == "lanczos" and flat.factorisations == 1  # the long interval only
    rational = FiniteVolumeSolver([0.0, 0.0], [1.0, 1.0], 41, lambda x: x[..., 0], 0.2, method="rational")
    assert np.abs(long - rational.solve(init, [0.0, 0.002, 0.5])).max() < 1e-10 * long.max()


def test_a_steep_potential_is_left_to_expm_and_stays_accurate():
    """``beta (max psi - min psi) ~ 110``: the scaling amplifies rounding beyond the tolerance where the density
    sits high on the potential, so those intervals go to ``expm_multiply``; the result equals its."""
    times = [0.0, 0.002, 0.02]
    _, ref = _solve("expm", 9, 30.0, times, scale=1.5)
    solver, got = _solve("lanczos", 9, 30.0, times, scale=1.5)
    assert solver._symmetric.spread > 100 and solver.lanczos_fallbacks > 0
    assert np.abs(got - ref).max() <= 1e-12 * ref.max()


def test_auto_takes_lanczos_from_2d_and_rational_in_1d_and_names_the_methods():
    assert FiniteVolumeSolver([0.0] * 3, [1.0] * 3, 9, _psi, 2.0).method == "lanczos"
    assert FiniteVolumeSolver([0.0] * 2, [1.0] * 2, 9, lambda x: x[..., 0], 2.0).method == "lanczos"
    assert FiniteVolumeSolver([0.0], [1.0], 9, lambda x: x[..., 0], 2.0).method == "rational"
    with pytest.raises(FpirlInputError, match="'lanczos'"):
        FiniteVolumeSolver([0.0] * 3, [1.0] * 3, 9, _psi, 2.0, method="krylov")


def test_a_steep_potential_in_2d_is_left_to_the_rational_method():
    """In 2-D (up to 70,000 nodes) the intervals Lanczos cannot take go to the Talbot rule, not to expm_multiply (which
    is slower there); the result equals the rational method's."""
    psi = lambda x: 3.0 * (np.sin(2 * np.pi * x[..., 0]) + x[..., 0] + x[..., 1] ** 2)  # noqa: E731
    init = lambda x: np.exp(-np.sum((x - 0.5) ** 2, axis=-1) / 0.05)  # noqa: E731
    times = [0.0, 0.002, 0.02]
    ref = FiniteVolumeSolver([0.0, 0.0], [1.0, 1.5], [33, 41], psi, 10.0, method="rational").solve(init, times)
    solver = FiniteVolumeSolver([0.0, 0.0], [1.0, 1.5], [33, 41], psi, 10.0)
    got = solver.solve(init, times)
    assert solver.lanczos_fallbacks > 0 and solver.factorisations > 0
    assert np.abs(got - ref).max() <= 1e-12 * ref.max()


def test_fewer_vectors_on_a_large_grid_mean_shorter_substeps(monkeypatch):
    """Where memory allows only 20 Krylov vectors (a grid of millions of nodes; here the memory cap is lowered), each
    application takes ``||L||_1 tau <= ((20 - 8) / 4)^2 = 9`` and the result still agrees with expm."""
    import fpirl.forward._lanczos as lz

    monkeypatch.setattr(lz, "VECTOR_BYTES", 1)
    times = [0.0, 0.05, 0.1]
    _, ref = _solve("expm", 13, 2.0, times)
    solver, got = _solve("lanczos", 13, 2.0, times)
    assert solver._symmetric.max_vectors() == 20 and solver._symmetric.max_stiffness() == 9.0
    assert solver._norm1 * 0.05 > 3 * 9.0  # several substeps per interval
    assert solver.lanczos_fallbacks == 0 and np.abs(got - ref).max() < 1e-10 * ref.max()


def test_a_zero_density_stays_zero():
    solver = FiniteVolumeSolver([0.0] * 3, [1.0] * 3, 7, _psi, 2.0)
    out, products = solver._symmetric.apply(0.1, np.zeros(7**3), 1e-10)
    assert products == 0 and not out.any()
