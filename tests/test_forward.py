"""Mathematical tests of the independent forward Fokker-Planck solvers (fpirl.forward)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from fpirl import FpirlInputError, Grid
from fpirl.evaluation.metrics import log_log_slope
from fpirl.forward import (
    FiniteVolumeSolver,
    SpectralSolver,
    default_resolution,
    simulate_density,
    von_mises_bump,
)
from fpirl.forward.finite_volume import _talbot_rule, talbot_nodes

TWO_PI = 2.0 * np.pi


# --- smooth periodic potentials on [0, 2 pi]^d and their gradients ---------------------------
def trig_psi(x):
    x0 = x[..., 0]
    out = 0.6 * np.cos(x0) + 0.3 * np.sin(2.0 * x0)
    if x.shape[-1] > 1:
        x1 = x[..., 1]
        out = out + 0.5 * np.sin(x1) + 0.4 * np.cos(x0 - x1)
    if x.shape[-1] > 2:
        out = out + 0.3 * np.cos(x[..., 2] + x1)
    return out


def trig_grad(x):
    x0 = x[..., 0]
    g = [-0.6 * np.sin(x0) + 0.6 * np.cos(2.0 * x0)]
    if x.shape[-1] > 1:
        x1 = x[..., 1]
        g[0] = g[0] - 0.4 * np.sin(x0 - x1)
        g.append(0.5 * np.cos(x1) + 0.4 * np.sin(x0 - x1))
    if x.shape[-1] > 2:
        s = 0.3 * np.sin(x[..., 2] + x1)
        g[1] = g[1] - s
        g.append(-s)
    return np.stack(g, axis=-1)


# --- smooth non-periodic potential on a box (reflecting walls) --------------------------------
def box_psi(x):
    out = np.sin(2.0 * np.pi * x[..., 0]) + x[..., 0]
    if x.shape[-1] > 1:
        out = out + np.cos(np.pi * x[..., 0]) * x[..., 1] + x[..., 1] ** 2
    if x.shape[-1] > 2:
        out = out + 0.5 * np.sin(np.pi * x[..., 2] * x[..., 0])
    return out


def box_grad(x):  # the FV solver uses psi only; simulate_density checks the pair for consistency
    g = [2.0 * np.pi * np.cos(2.0 * np.pi * x[..., 0]) + 1.0]
    if x.shape[-1] > 1:
        g[0] = g[0] - np.pi * np.sin(np.pi * x[..., 0]) * x[..., 1]
        g.append(np.cos(np.pi * x[..., 0]) + 2.0 * x[..., 1])
    if x.shape[-1] > 2:
        c = 0.5 * np.pi * np.cos(np.pi * x[..., 2] * x[..., 0])
        g[0] = g[0] + c * x[..., 2]
        g.append(c * x[..., 0])
    return np.stack(g, axis=-1)


def gauss_bump(centre, width):
    centre = np.asarray(centre, dtype=float)

    def f(x):
        return np.exp(-np.sum((x - centre) ** 2, axis=-1) / (2.0 * width**2))

    return f


# ============================================================================================
# mass conservation
# ============================================================================================
@pytest.mark.parametrize("d", [1, 2])
def test_spectral_conserves_mass(d):
    lo, hi = np.zeros(d), np.full(d, TWO_PI)
    s = SpectralSolver(lo, hi, [48, 40][:d], trig_grad, 3.0)
    out = s.solve(von_mises_bump(lo, hi, np.full(d, 1.0), 3.0), [0.0, 0.1, 0.5, 2.0])
    assert np.max(np.abs(s.mass(out) - 1.0)) < 1e-10
    assert out.shape == (4, *s.shape)


@pytest.mark.parametrize("method", ["rational", "expm"])
@pytest.mark.parametrize("d", [1, 2])
def test_finite_volume_conserves_mass(d, method):
    lo, hi = np.zeros(d), np.array([1.0, 1.5])[:d]
    f = FiniteVolumeSolver(lo, hi, [41, 25][:d], box_psi, 3.0, method=method)
    out = f.solve(gauss_bump([0.3, 0.9][:d], 0.1), [0.0, 0.01, 0.1, 0.5])
    assert np.max(np.abs(f.mass(out) - 1.0)) < 1e-10
    # the generator itself conserves mass: volume-weighted column sums vanish
    colsum = f.volumes.ravel() @ f.generator
    assert np.max(np.abs(colsum)) < 1e-11 * abs(f.generator).max()


# ============================================================================================
# long-time state = exp(-beta psi) / Z
# ============================================================================================
@pytest.mark.parametrize("d", [1, 2])
def test_spectral_relaxes_to_boltzmann(d):
    beta = 1.0
    lo, hi = np.zeros(d), np.full(d, TWO_PI)
    s = SpectralSolver(lo, hi, [64, 32][:d], trig_grad, beta)
    p = s.solve(von_mises_bump(lo, hi, np.full(d, 4.0), 2.0), [20.0])[-1]
    q = np.exp(-beta * trig_psi(s.mesh()))
    q /= s.mass(q)
    assert np.max(np.abs(p - q)) / q.max() < 1e-4


@pytest.mark.parametrize("d", [1, 2])
def test_finite_volume_relaxes_to_boltzmann(d):
    beta = 3.0
    lo, hi = np.zeros(d), np.array([1.0, 1.5])[:d]
    f = FiniteVolumeSolver(lo, hi, [81, 49][:d], box_psi, beta)
    q = np.exp(-beta * box_psi(f.mesh()))
    q /= np.sum(f.volumes * q)
    # exp(-beta psi) at the nodes is the exact discrete equilibrium of the SG scheme
    np.testing.assert_allclose(f.equilibrium(), q, rtol=1e-13, atol=0)
    assert np.max(np.abs(f.generator @ q.ravel())) < 1e-10 * np.max(np.abs(f.generator.diagonal() * q.ravel()))
    p = f.solve(gauss_bump([0.8, 0.2][:d], 0.1), [30.0])[-1]
    assert np.max(np.abs(p - q)) / q.max() < 1e-4


# ============================================================================================
# psi = 0: exact heat-equation decay
# ============================================================================================
def test_spectral_heat_equation_is_exact():
    beta = 1.7
    lo, hi = np.array([-1.0, 0.5]), np.array([2.0, 2.5])
    L = hi - lo
    k = lambda m, i: TWO_PI * m / L[i]  # noqa: E731

    def exact(x, t):
        u = (x[..., 0] - lo[0], x[..., 1] - lo[1])
        return (
            1.0
            + 0.4 * np.cos(k(3, 0) * u[0]) * np.exp(-k(3, 0) ** 2 * t / beta)
            + 0.3 * np.sin(k(2, 1) * u[1]) * np.exp(-k(2, 1) ** 2 * t / beta)
            + 0.2 * np.cos(k(1, 0) * u[0] + k(4, 1) * u[1]) * np.exp(-(k(1, 0) ** 2 + k(4, 1) ** 2) * t / beta)
        ) / np.prod(L)

    s = SpectralSolver(lo, hi, [24, 20], lambda x: np.zeros_like(x), beta)
    times = [0.0, 0.01, 0.05, 0.3]
    out = s.solve(lambda x: exact(x, 0.0), times)
    for t, p in zip(times, out):
        np.testing.assert_allclose(p, exact(s.mesh(), t), rtol=0, atol=1e-13)
    # ... and between the collocation points through the trigonometric interpolant
    xs = [np.linspace(-3.0, 4.0, 13), np.linspace(0.0, 3.0, 11)]
    want = exact(np.stack(np.meshgrid(*xs, indexing="ij"), -1), 0.3)
    np.testing.assert_allclose(s.evaluate(out[-1], xs), want, atol=1e-13)


def test_single_fourier_mode_decays_at_k2_over_beta():
    beta, L, m = 2.5, 3.0, 4
    kk = TWO_PI * m / L
    s = SpectralSolver([0.0], [L], 32, lambda x: np.zeros_like(x), beta)
    times = np.linspace(0.0, 0.2, 9)
    out = s.solve(lambda x: 1.0 + 0.5 * np.cos(kk * x[..., 0]), times)
    amp = np.abs(np.fft.rfft(out, axis=1)[:, m])
    rate = -np.polyfit(times, np.log(amp), 1)[0]
    assert rate == pytest.approx(kk**2 / beta, rel=1e-10)


# ============================================================================================
# observed orders
# ============================================================================================
def test_finite_volume_is_second_order_in_space():
    beta, T = 2.0, 0.05
    init = gauss_bump([0.3], 0.15)
    ref_cells = 2048
    ref = FiniteVolumeSolver([0.0], [1.0], ref_cells + 1, box_psi, beta).solve(init, [T])[-1]
    cells = np.array([16, 32, 64, 128])
    err = []
    for n in cells:
        p = FiniteVolumeSolver([0.0], [1.0], n + 1, box_psi, beta).solve(init, [T])[-1]
        err.append(np.max(np.abs(p - ref[:: ref_cells // n])))
    slope = log_log_slope(1.0 / cells, np.array(err))
    assert FiniteVolumeSolver.space_order == 2
    assert abs(slope - FiniteVolumeSolver.space_order) < 0.15


def test_finite_volume_is_second_order_in_space_2d():
    beta, T = 2.0, 0.03
    lo, hi = [0.0, 0.0], [1.0, 1.5]
    init = gauss_bump([0.4, 0.7], 0.2)
    ref_cells = 128
    ref = FiniteVolumeSolver(lo, hi, ref_cells + 1, box_psi, beta, method="expm").solve(init, [T])[-1]
    cells = np.array([8, 16, 32])
    err = []
    for n in cells:
        p = FiniteVolumeSolver(lo, hi, n + 1, box_psi, beta).solve(init, [T])[-1]
        r = ref_cells // n
        err.append(np.max(np.abs(p - ref[::r, ::r])))
    slope = log_log_slope(1.0 / cells, np.array(err))
    assert abs(slope - FiniteVolumeSolver.space_order) < 0.3


def test_spectral_time_stepper_is_fourth_order():
    beta, T, M = 2.0, 0.5, 64
    init = von_mises_bump([0.0], [TWO_PI], [1.0], 2.0)
    ref = SpectralSolver([0.0], [TWO_PI], M, trig_grad, beta, max_step=T / 1000).solve(init, [T])[-1]
    steps = T / np.array([5, 10, 20, 40])
    err = [
        np.max(np.abs(SpectralSolver([0.0], [TWO_PI], M, trig_grad, beta, max_step=h).solve(init, [T])[-1] - ref))
        for h in steps
    ]
    assert SpectralSolver.time_order == 4
    assert abs(log_log_slope(steps, np.array(err)) - SpectralSolver.time_order) < 0.4
    # the default (CFL-based) step is well inside the asymptotic regime
    s = SpectralSolver([0.0], [TWO_PI], M, trig_grad, beta)
    assert np.max(np.abs(s.solve(init, [T])[-1] - ref)) < 1e-6


def test_spectral_space_convergence_is_exponential():
    beta, T = 2.0, 0.3
    init = von_mises_bump([0.0], [TWO_PI], [1.0], 2.0)
    xs = [np.linspace(0.0, TWO_PI, 37)]
    fine = SpectralSolver([0.0], [TWO_PI], 128, trig_grad, beta, max_step=0.005)
    ref = fine.evaluate(fine.solve(init, [T])[-1], xs)
    err = []
    for m in (16, 24, 32, 40):
        s = SpectralSolver([0.0], [TWO_PI], m, trig_grad, beta, max_step=0.005)
        err.append(np.max(np.abs(s.evaluate(s.solve(init, [T])[-1], xs) - ref)))
    assert err[-1] < 1e-9
    assert all(e2 < 0.2 * e1 for e1, e2 in zip(err, err[1:]))
    assert SpectralSolver.space_order == np.inf


def test_finite_volume_is_exact_in_time():
    """time_order = inf: the result does not depend on how the output times split [0, T], and
    equally spaced output times reuse one set of factorisations."""
    assert FiniteVolumeSolver.time_order == np.inf
    lo, hi = [0.0, 0.0], [1.0, 1.5]
    init = gauss_bump([0.4, 0.7], 0.2)
    one = FiniteVolumeSolver(lo, hi, [17, 13], box_psi, 2.0, method="rational")
    direct = one.solve(init, [0.3])[-1]
    many = FiniteVolumeSolver(lo, hi, [17, 13], box_psi, 2.0, method="rational")
    steps = many.solve(init, 0.01 * np.arange(31))  # intervals differ in the last bits
    assert many.factorisations == 1 and one.factorisations == 1
    assert np.max(np.abs(steps[-1] - direct)) < 1e-12 * direct.max()


# ============================================================================================
# interpolation
# ============================================================================================
@pytest.mark.parametrize("points", [(9, 10), (16, 7)])
def test_trigonometric_interpolant_reproduces_band_limited_functions(rng, points):
    lo, hi = np.array([-1.0, 2.0]), np.array([1.5, 3.0])
    L = hi - lo
    modes = []
    for m in points:
        ks = np.arange(-((m - 1) // 2), (m - 1) // 2 + 1)
        modes.append(ks)
    c = rng.normal(size=(modes[0].size, modes[1].size)) + 1j * rng.normal(size=(modes[0].size, modes[1].size))

    def f(x):
        ph0 = np.exp(1j * TWO_PI * np.multiply.outer((x[..., 0] - lo[0]) / L[0], modes[0]))
        ph1 = np.exp(1j * TWO_PI * np.multiply.outer((x[..., 1] - lo[1]) / L[1], modes[1]))
        val = np.einsum("...i,...j,ij->...", ph0, ph1, c).real
        # Nyquist modes of even axes, as cosines (the symmetric split)
        for i, m in enumerate(points):
            if m % 2 == 0:
                val = val + 0.7 * np.cos(np.pi * m * (x[..., i] - lo[i]) / L[i])
        return val

    s = SpectralSolver(lo, hi, points, lambda x: np.zeros_like(x), 1.0)
    nodal = f(s.mesh())
    xs = [rng.uniform(-3.0, 4.0, size=17), rng.uniform(1.0, 5.0, size=11)]  # also outside the box
    got = s.evaluate(nodal, xs)
    want = f(np.stack(np.meshgrid(*xs, indexing="ij"), axis=-1))
    np.testing.assert_allclose(got, want, atol=1e-12 * np.abs(want).max())
    # batch (time) axis in front, and exactness at the collocation points
    both = s.evaluate(np.stack([nodal, 2 * nodal]), s.coords)
    np.testing.assert_allclose(both[1], 2 * nodal, atol=1e-12 * np.abs(nodal).max())


def test_spline_interpolant_reproduces_cubics(rng):
    f = FiniteVolumeSolver([0.0, -1.0], [1.0, 1.0], [9, 12], box_psi, 1.0)

    def cubic(x):
        return 1.0 + x[..., 0] ** 3 - 2.0 * x[..., 0] * x[..., 1] ** 2 + 0.5 * x[..., 1] ** 3

    xs = [np.sort(rng.uniform(0.0, 1.0, 7)), np.sort(rng.uniform(-1.0, 1.0, 5))]
    got = f.evaluate(cubic(f.mesh()), xs)
    np.testing.assert_allclose(got, cubic(np.stack(np.meshgrid(*xs, indexing="ij"), -1)), atol=1e-12)
    with pytest.raises(FpirlInputError):
        f.evaluate(cubic(f.mesh()), [np.array([1.5]), np.array([0.0])])


def test_finite_volume_rational_and_expm_agree_with_strong_drift():
    psi = lambda x: 3.0 * box_psi(x)  # noqa: E731  (beta * range(psi) ~ 90: strongly non-normal L)
    lo, hi = [0.0, 0.0], [1.0, 1.5]
    init = gauss_bump([0.5, 0.5], 0.15)
    a = FiniteVolumeSolver(lo, hi, [33, 41], psi, 10.0, method="rational").solve(init, [0.002, 0.02, 0.2])
    b = FiniteVolumeSolver(lo, hi, [33, 41], psi, 10.0, method="expm").solve(init, [0.002, 0.02, 0.2])
    assert np.max(np.abs(a - b)) < 1e-11 * b.max()


@pytest.mark.parametrize("rtol", [1e-4, 1e-6, 1e-8, 1e-10, 1e-12])
def test_talbot_rule_with_fewer_nodes_is_within_its_tolerance(rtol):
    """The rule chosen for ``rtol`` approximates exp on (-inf, 0] within ``rtol`` (sup over a fine grid of [-50, 0] and
    a log grid to -1e6), with fewer nodes for a looser tolerance, and is exact at 0 (mass)."""
    n = talbot_nodes(rtol)
    x = -np.concatenate([np.linspace(0.0, 50.0, 20001), np.logspace(-3, 6, 2000)])
    z, w = _talbot_rule(n)
    err = np.abs(np.sum((w[:, None] / (z[:, None] - x[None])).real, axis=0) - np.exp(x))
    assert err.max() <= rtol and err[0] < 1e-14
    assert talbot_nodes(10 * rtol) <= n < talbot_nodes(None) == 28
    assert err.max() > rtol / 1e4  # not needlessly many: within about two nodes of the tolerance


def test_finite_volume_with_a_loose_tolerance_agrees_to_it():
    """``L`` is self-adjoint in the inner product weighted by ``volume / pi`` (``pi`` its equilibrium): there the
    scalar rule's error ``rtol`` bounds each interval's error, so after three intervals the error is within 3 rtol
    of the initial density's norm; pointwise it is larger by the non-normality (here beta range(psi) ~ 90)."""
    psi = lambda x: 3.0 * box_psi(x)  # noqa: E731
    lo, hi = [0.0, 0.0], [1.0, 1.5]
    init, times = gauss_bump([0.5, 0.5], 0.15), [0.02, 0.04, 0.2]
    exact_solver = FiniteVolumeSolver(lo, hi, [33, 41], psi, 10.0, method="rational")
    exact = exact_solver.solve(init, times)
    loose = FiniteVolumeSolver(lo, hi, [33, 41], psi, 10.0, method="rational", rtol=1e-8)
    weight = loose.volumes / loose.equilibrium()

    def norm(v):
        return np.sqrt(np.sum(weight * v**2, axis=(-2, -1)))

    p0 = init(exact_solver.mesh())
    err = norm(loose.solve(init, times) - exact) / norm(p0)
    assert np.all(err <= 1e-8 * np.arange(1, 4)) and err[0] > 1e-13  # (the error decays with the modes)
    assert len(loose._talbot[0]) == 8  # 16 nodes: 8 factorisations instead of 14


# ============================================================================================
# positivity
# ============================================================================================
@pytest.mark.parametrize("method", ["rational", "expm"])
def test_finite_volume_preserves_positivity(method):
    beta = 5.0
    psi = lambda x: 3.0 * np.sin(2.0 * np.pi * x[..., 0]) + 2.0 * x[..., 0]  # noqa: E731
    f = FiniteVolumeSolver([0.0], [1.0], 101, psi, beta, method=method)
    # the generator is a Metzler matrix: exp(t L) maps non-negative data to non-negative data
    off = f.generator - sp.diags(f.generator.diagonal())
    assert off.min() >= 0.0
    out = f.solve(lambda x: np.maximum(0.0, x[..., 0] - 0.8), [0.0, 1e-4, 1e-3, 0.01, 0.1, 1.0])
    # exact up to the ~1e-14 accuracy of the matrix exponential
    assert out.min() >= -1e-14 * out.max()
    assert np.all(out[-1] > 0)


def test_finite_volume_positivity_2d():
    f = FiniteVolumeSolver([0.0, 0.0], [1.0, 1.5], [33, 25], box_psi, 4.0)
    out = f.solve(lambda x: (x[..., 0] < 0.25) & (x[..., 1] > 1.0), [0.0, 0.001, 0.05, 0.5])
    assert out.min() >= -1e-14 * out.max()


# ============================================================================================
# simulate_density
# ============================================================================================
@pytest.mark.parametrize("boundary", ["periodic", "reflecting"])
@pytest.mark.parametrize("d", [1, 2, 3])
def test_simulate_density_shape_mass_positivity(boundary, d):
    elements = {1: 12, 2: 8, 3: 4}[d]
    if boundary == "periodic":
        lo, hi = np.zeros(d), np.full(d, TWO_PI)
        psi, grad = trig_psi, trig_grad
        init = von_mises_bump(lo, hi, np.linspace(1.0, 3.0, d), 2.0)
        resolution = {1: None, 2: 32, 3: 24}[d]
    else:
        lo, hi = np.zeros(d), np.array([1.0, 1.5, 0.8])[:d]
        psi, grad = box_psi, box_grad
        init = gauss_bump(0.5 * (lo + hi), 0.2)
        resolution = {1: None, 2: 33, 3: 13}[d]
    grid = Grid(lo, hi, elements, boundary=boundary)
    times = 0.02 * np.arange(4)
    out = simulate_density(grid, psi, grad, 2.0, init, times, resolution=resolution)
    assert out.shape == (times.size, *grid.shape)
    assert np.all(np.isfinite(out)) and out.min() >= 0.0
    np.testing.assert_allclose(grid.integrate(out), 1.0, atol=1e-12)
    # first snapshot is the normalised initial density (sampled smoothly onto the grid)
    p0 = init(grid.mesh())
    p0 = p0 / grid.integrate(p0)
    assert np.max(np.abs(out[0] - p0)) < 0.05 * p0.max()
    assert not np.allclose(out[-1], out[0])


def test_simulate_density_reflecting_matches_solver_nodes():
    grid = Grid([0.0, 0.0], [1.0, 1.5], [5, 6], boundary="reflecting")
    init = gauss_bump([0.3, 0.9], 0.2)
    res = default_resolution(grid)
    assert all((r - 1) % n == 0 for r, n in zip(res, grid.elements))  # grid nodes are solver nodes
    out = simulate_density(grid, box_psi, box_grad, 2.0, init, [0.0, 0.05], resolution=[21, 25])
    f = FiniteVolumeSolver(grid.lower, grid.upper, [21, 25], box_psi, 2.0)
    p = f.solve(init, [0.05])[-1][::4, ::4]
    np.testing.assert_allclose(out[-1], p / grid.integrate(p), rtol=1e-12, atol=1e-14)


def test_simulate_density_periodic_agrees_across_resolutions():
    grid = Grid([0.0, 0.0], [TWO_PI, TWO_PI], [10, 10])
    init = von_mises_bump(grid.lower, grid.upper, [1.0, 2.0], 2.0)
    times = [0.0, 0.1, 0.3]
    a = simulate_density(grid, trig_psi, trig_grad, 2.0, init, times, resolution=40, max_step=0.01)
    b = simulate_density(grid, trig_psi, trig_grad, 2.0, init, times, resolution=[48, 56], max_step=0.01, progress=True)
    assert np.max(np.abs(a - b)) < 1e-9 * a.max()


def test_simulate_density_warns_when_underresolved():
    grid = Grid([0.0], [TWO_PI], [8])
    sharp = lambda x: 10.0 * np.cos(x)  # noqa: E731
    with pytest.warns(RuntimeWarning, match="under-resolved"):
        simulate_density(grid, lambda x: sharp(x[..., 0]), lambda x: -10.0 * np.sin(x), 5.0,
                         von_mises_bump([0.0], [TWO_PI], [1.0], 1.0), [0.0, 2.0], resolution=16)


def test_default_resolution():
    assert default_resolution(Grid([0], [1], [10])) == (128,)
    assert default_resolution(Grid([0, 0], [1, 1], [40, 10])) == (160, 64)
    assert default_resolution(Grid([0] * 4, [1] * 4, 10)) == (24,) * 4
    assert default_resolution(Grid([0], [1], [10], boundary="reflecting")) == (521,)
    assert default_resolution(Grid([0, 0], [1, 1], [40, 10], boundary="reflecting")) == (161, 131)
    assert all(m % 2 == 0 for m in default_resolution(Grid([0] * 3, [1] * 3, [7, 21, 33])))


# ============================================================================================
# helpers and input validation
# ============================================================================================
def test_von_mises_bump_is_smooth_and_periodic():
    lo, hi = np.array([-1.0, 0.0]), np.array([2.0, 5.0])
    f = von_mises_bump(lo, hi, [-0.9, 4.5], [3.0, 1.0])
    x = np.array([[-1.0, 0.0], [2.0, 5.0], [-1.0, 5.0], [2.0, 0.0]])
    np.testing.assert_allclose(f(x), f(x[0]), rtol=1e-14)
    assert f(np.array([-0.9, 4.5])) == pytest.approx(1.0)
    pts = np.array([[0.3, 1.2], [1.1, 2.2]])
    want = np.exp(3.0 * (np.cos(TWO_PI * (pts[:, 0] + 0.9) / 3.0) - 1) + (np.cos(TWO_PI * (pts[:, 1] - 4.5) / 5.0) - 1))
    np.testing.assert_allclose(f(pts), want, rtol=1e-14)


def test_gradient_potential_mismatch_warns():
    grid = Grid([0.0], [TWO_PI], [8])
    init = von_mises_bump([0.0], [TWO_PI], [1.0], 1.0)
    with pytest.warns(RuntimeWarning, match="gradient does not match"):
        simulate_density(grid, trig_psi, lambda x: -trig_grad(x), 1.0, init, [0.0, 0.01], resolution=16)


def test_bad_inputs_raise():
    grid = Grid([0.0], [1.0], [8])
    ok = dict(potential=trig_psi, gradient=trig_grad, beta=1.0, initial=lambda x: np.ones(x.shape[:-1]))
    with pytest.raises(FpirlInputError):
        simulate_density(grid, **{**ok, "beta": -1.0}, times=[0.0, 0.1])
    with pytest.raises(FpirlInputError):
        simulate_density(grid, **ok, times=[0.2, 0.1])
    with pytest.raises(FpirlInputError):
        simulate_density(grid, **{**ok, "initial": lambda x: x[..., 0] - 0.5}, times=[0.1])
    with pytest.raises(FpirlInputError):
        simulate_density(grid, **{**ok, "gradient": lambda x: x[..., 0]}, times=[0.1])
    with pytest.raises(FpirlInputError):
        FiniteVolumeSolver([0.0], [1.0], 9, lambda x: np.full(x.shape[:-1], np.nan), 1.0)
    with pytest.raises(FpirlInputError):
        FiniteVolumeSolver([0.0], [1.0], 9, box_psi, 1.0, method="euler")
    for rtol in (0.0, -1e-8, float("nan")):
        with pytest.raises(FpirlInputError, match="rtol"):
            FiniteVolumeSolver([0.0], [1.0], 9, box_psi, 1.0, rtol=rtol)
    with pytest.raises(FpirlInputError):
        SpectralSolver([1.0], [0.0], 16, trig_grad, 1.0)
