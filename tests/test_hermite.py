import numpy as np
import pytest

from fpirl import FpirlInputError
from fpirl.core.hermite import HermiteAxis, HermiteSpace, element_cubics, embed_constant_axes, reference_cubics


def test_reference_cubics_nodal_conditions():
    v0, v1 = reference_cubics(np.array([0.0, 1.0]), 0)
    d0, d1 = reference_cubics(np.array([0.0, 1.0]), 1)
    np.testing.assert_allclose(v0, [1, 0, 0, 0], atol=1e-15)
    np.testing.assert_allclose(v1, [0, 0, 1, 0], atol=1e-15)
    np.testing.assert_allclose(d0, [0, 1, 0, 0], atol=1e-15)
    np.testing.assert_allclose(d1, [0, 0, 0, 1], atol=1e-15)


@pytest.mark.parametrize("periodic", [True, False])
def test_nodal_interpolation(periodic):
    ax = HermiteAxis(-1.0, 2.0, 5, periodic)
    B0, B1 = ax.matrix(ax.nodes, 0), ax.matrix(ax.nodes, 1)
    # dof 2k is the value at node k, dof 2k+1 the slope
    np.testing.assert_allclose(B0[:, 0::2], np.eye(ax.n_nodes), atol=1e-14)
    np.testing.assert_allclose(B0[:, 1::2], 0, atol=1e-14)
    np.testing.assert_allclose(B1[:, 1::2], np.eye(ax.n_nodes), atol=1e-12)
    np.testing.assert_allclose(B1[:, 0::2], 0, atol=1e-12)


def test_reproduces_cubics_exactly(rng):
    space = HermiteSpace([-1.0, 0.0], [1.0, 3.0], [3, 4], periodic=False)
    c = rng.standard_normal((4, 4))  # f = sum c_pq x^p y^q, cubic in each variable

    def deriv(pts, alpha):
        x, y = pts[..., 0], pts[..., 1]
        out = 0.0
        for p in range(4):
            for q in range(4):
                if p < alpha[0] or q < alpha[1]:
                    continue
                fx = (p if alpha[0] else 1) * x ** (p - alpha[0])
                fy = (q if alpha[1] else 1) * y ** (q - alpha[1])
                out = out + c[p, q] * fx * fy
        return out

    coef = space.interpolate(deriv)
    pts = np.stack([rng.uniform(-1, 1, 200), rng.uniform(0, 3, 200)], -1)
    np.testing.assert_allclose(space.evaluate(coef, pts), deriv(pts, (0, 0)), rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(space.gradient(coef, pts)[:, 1], deriv(pts, (0, 1)), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("periodic", [True, False])
def test_c1_continuity_across_elements_and_seam(rng, periodic):
    ax = HermiteAxis(0.0, 1.0, 4, periodic)
    coef = rng.standard_normal(ax.n_dofs)
    eps = 1e-9
    inner = ax.breakpoints[1:-1]
    for deriv in (0, 1):
        left = ax.matrix(inner - eps, deriv) @ coef
        right = ax.matrix(inner + eps, deriv) @ coef
        np.testing.assert_allclose(left, right, atol=1e-6)
    if periodic:
        for deriv in (0, 1):
            at_upper = ax.matrix(np.array([1.0 - eps]), deriv) @ coef
            at_lower = ax.matrix(np.array([0.0 + eps]), deriv) @ coef
            np.testing.assert_allclose(at_upper, at_lower, atol=1e-6)
        # wrapping: psi(x + L) = psi(x)
        x = rng.uniform(0, 1, 50)
        np.testing.assert_allclose(ax.matrix(x + 1.0) @ coef, ax.matrix(x) @ coef, atol=1e-12)


def test_derivatives_match_finite_differences(rng):
    space = HermiteSpace([-1, -1, -1], [1, 1, 1], [3, 2, 4], periodic=True)
    coef = rng.standard_normal(space.shape)
    pts = rng.uniform(-1, 1, (40, 3))
    grad = space.gradient(coef, pts)
    h = 1e-6
    for a in range(3):
        e = np.zeros(3)
        e[a] = h
        fd = (space.evaluate(coef, pts + e) - space.evaluate(coef, pts - e)) / (2 * h)
        np.testing.assert_allclose(grad[:, a], fd, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("periodic", [True, False])
def test_gradient_agrees_with_the_grid_evaluation(rng, periodic):
    """The gathered, sum-factorised gradient against the collocation matrices on a tensor grid (4-D, walls or not,
    points on element edges included)."""
    space = HermiteSpace([-1, 0, -2, 0], [1, 2, 0, 1], [2, 3, 1, 2] if not periodic else [2, 3, 2, 2], periodic=periodic)
    coef = rng.standard_normal(space.shape)
    coords = [np.concatenate([rng.uniform(a.lower, a.upper, 3), a.breakpoints[:2]]) for a in space.axes]
    pts = np.stack(np.meshgrid(*coords, indexing="ij"), axis=-1)
    np.testing.assert_allclose(np.moveaxis(space.gradient(coef, pts), -1, 0), space.gradient_grid(coef, coords),
                               rtol=1e-12, atol=1e-12)


def test_grid_and_scattered_evaluation_agree(rng):
    space = HermiteSpace([-1, 0], [1, 2], [4, 3], periodic=False)
    coef = rng.standard_normal(space.shape)
    xs, ys = np.linspace(-1, 1, 9), np.linspace(0, 2, 7)
    mesh = np.stack(np.meshgrid(xs, ys, indexing="ij"), -1)
    np.testing.assert_allclose(space.evaluate_grid(coef, [xs, ys], (1, 0)), space.evaluate(coef, mesh, (1, 0)), atol=1e-12)


@pytest.mark.parametrize("periodic", [True, False])
def test_interpolation_order(periodic):
    """psi error O(H^4), grad psi O(H^3): fitted log-log slopes."""
    f = lambda x: np.sin(np.pi * x) + 0.3 * np.cos(2 * np.pi * x)
    df = lambda x: np.pi * np.cos(np.pi * x) - 0.6 * np.pi * np.sin(2 * np.pi * x)
    x = np.linspace(-1, 1, 2001)
    Hs, e0, e1 = [], [], []
    for n in (8, 16, 32, 64):
        ax = HermiteAxis(-1.0, 1.0, n, periodic)
        coef = np.zeros(ax.n_dofs)
        coef[0::2], coef[1::2] = f(ax.nodes), df(ax.nodes)
        Hs.append(ax.spacing)
        e0.append(np.abs(ax.matrix(x) @ coef - f(x)).max())
        e1.append(np.abs(ax.matrix(x, 1) @ coef - df(x)).max())
    assert np.polyfit(np.log(Hs), np.log(e0), 1)[0] == pytest.approx(HermiteSpace.order, abs=0.2)
    assert np.polyfit(np.log(Hs), np.log(e1), 1)[0] == pytest.approx(HermiteSpace.order - 1, abs=0.2)


def test_mean_functional_and_constant_mode(rng):
    space = HermiteSpace([-1, 0], [1, 3], [3, 4], periodic=True)
    assert np.sum(space.mean_functional() * space.constant_mode()) == pytest.approx(1.0)
    coef = space.remove_mean(rng.standard_normal(space.shape))
    xs, ys = np.linspace(-1, 1, 401)[:-1], np.linspace(0, 3, 601)[:-1]
    assert abs(space.evaluate_grid(coef, [xs, ys]).mean()) < 1e-3
    # the constant mode has zero gradient energy
    c = space.constant_mode().ravel()
    assert abs(c @ space.h1_seminorm_matrix() @ c) < 1e-12


@pytest.mark.parametrize("periodic", [False, True])
def test_constant_axes_embedding_reproduces_the_function_of_the_kept_axes(rng, periodic):
    """psi on axes (0, 2) of a 3-D box, embedded: equal to psi(x[[0, 2]]) at random points, for a
    batch of coefficient vectors (the covariance-column use) as for one."""
    low = 2 if periodic else 1
    space = HermiteSpace([-1.0, 0.0], [1.0, 2.0], [3, 4], periodic)
    full = HermiteSpace([-1.0, -5.0, 0.0], [1.0, 5.0, 2.0], [3, low, 4], periodic)
    coefs = rng.standard_normal((3,) + space.shape)
    pts = rng.uniform([-1.0, -5.0, 0.0], [1.0, 5.0, 2.0], size=(50, 3))
    batch = embed_constant_axes(coefs, space, [0, 2], full, batch=1)
    assert batch.shape == (3,) + full.shape
    for c, e in zip(coefs, batch):
        np.testing.assert_allclose(full.evaluate(e, pts), space.evaluate(c, pts[:, [0, 2]]), atol=1e-12)
        np.testing.assert_array_equal(embed_constant_axes(c, space, [0, 2], full), e)
    with pytest.raises(FpirlInputError, match="constant"):
        embed_constant_axes(coefs[0], space, [0, 2], HermiteSpace([-1, -5, 0], [1, 5, 2], [3, 3, 4], periodic))


def test_element_cubics_are_the_x_derivatives_of_the_scaled_shape_functions():
    """On an element of length H: values, x-slopes and second x-derivatives of phi_j = h_j and
    H h_j (slope dofs) against central differences of the closed forms."""
    H, xi, eps = 0.37, np.linspace(0.05, 0.95, 7), 1e-5
    closed = [lambda t: 1 - 3 * t**2 + 2 * t**3, lambda t: H * (t - 2 * t**2 + t**3),
              lambda t: 3 * t**2 - 2 * t**3, lambda t: H * (t**3 - t**2)]
    for j, f in enumerate(closed):
        np.testing.assert_allclose(element_cubics(xi, H, 0)[:, j], f(xi), atol=1e-14)
        d1 = (f(xi + eps / H) - f(xi - eps / H)) / (2 * eps)
        np.testing.assert_allclose(element_cubics(xi, H, 1)[:, j], d1, atol=1e-7)
        d2 = (f(xi + eps / H) - 2 * f(xi) + f(xi - eps / H)) / eps**2
        np.testing.assert_allclose(element_cubics(xi, H, 2)[:, j], d2, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("periodic", [True, False])
@pytest.mark.parametrize("deriv", [0, 1])
def test_gram_is_exact_cached_and_read_only(periodic, deriv):
    """``int d^k h_i d^k h_j`` against a 12-point Gauss rule per element (numpy's nodes; the products have degree
    <= 6): computed once per axis and returned read-only (the matrix-free solvers use it every iteration)."""
    ax = HermiteAxis(-1.0, 2.0, 5, periodic)
    g, w = np.polynomial.legendre.leggauss(12)
    x = np.concatenate([lo + (hi - lo) * (g + 1) / 2 for lo, hi in zip(ax.breakpoints[:-1], ax.breakpoints[1:])])
    wq = np.tile(w * ax.spacing / 2, ax.elements)
    B = ax.matrix(x, deriv)
    G = ax.gram(deriv)
    np.testing.assert_allclose(G, (B * wq[:, None]).T @ B, rtol=0, atol=1e-13 * np.abs(G).max())
    assert HermiteAxis(-1.0, 2.0, 5, periodic).gram(deriv) is G and not G.flags.writeable
    with pytest.raises(ValueError):
        G[0, 0] = 1.0


@pytest.mark.parametrize("elements, periodic", [((3,), False), ((2, 3), True), ((2, 3, 2), False), ((2, 2, 3, 2), True)])
def test_h1_seminorm_matrix_is_the_sum_of_kronecker_products(elements, periodic):
    """Oracle: the sum over the axes a of kron_b (G1 if b == a else G0), one Kronecker product each."""
    space = HermiteSpace([-1.0] * len(elements), [1.0] * len(elements), elements, periodic=periodic)
    g0 = [ax.gram(0) for ax in space.axes]
    g1 = [ax.gram(1) for ax in space.axes]
    expected = np.zeros((space.n_coef, space.n_coef))
    for a in range(space.ndim):
        K = np.ones((1, 1))
        for b in range(space.ndim):
            K = np.kron(K, g1[b] if b == a else g0[b])
        expected += K
    P = space.h1_seminorm_matrix()
    np.testing.assert_allclose(P, expected, rtol=0, atol=1e-13 * np.abs(expected).max())
    P[0, 0] += 1.0  # the result is the caller's own array (no cached Gram matrix is changed)
    np.testing.assert_allclose(space.h1_seminorm_matrix(), expected, rtol=0, atol=1e-13 * np.abs(expected).max())
    # added in place into another matrix without forming P, and its trace from the 1-D Gram matrices
    B = np.arange(expected.size, dtype=float).reshape(expected.shape) / expected.size
    np.testing.assert_allclose(space.add_h1_seminorm(B.copy(), 0.7), B + 0.7 * expected, rtol=0,
                               atol=1e-13 * np.abs(expected).max())
    # from a source matrix into fresh memory, with a rank-one term: the same values as the three passes
    v = np.linspace(-1.0, 2.0, space.n_coef)
    three = space.add_h1_seminorm(B.copy(), 0.7)
    three += 0.3 * np.outer(v, v)
    fused = space.add_h1_seminorm(np.full_like(B, np.nan), 0.7, src=B, rank_one=(0.3, v))
    np.testing.assert_array_equal(fused, three)
    np.testing.assert_allclose(fused, B + 0.7 * expected + 0.3 * np.outer(v, v), rtol=0, atol=1e-13 * np.abs(expected).max())
    assert space.h1_seminorm_trace() == pytest.approx(np.trace(expected), rel=1e-13)


@pytest.mark.parametrize("periodic", [True, False])
def test_derivative_along_an_axis_psi_is_constant_along_is_exactly_zero(rng, periodic):
    """psi embedded constant along axis 0 (a function of axis 1 alone): ``constant_along`` says so (and not for
    axis 1, nor once one value dof moves), the grid derivative along axis 0 is exactly 0 where the sum-factorised
    one is rounding noise, and the derivative along axis 1 is unchanged."""
    kept = HermiteSpace([-1.0], [2.0], [3], periodic)
    full = HermiteSpace([0.0, -1.0], [1.0, 2.0], [2 if periodic else 1, 3], periodic)
    coef = embed_constant_axes(rng.normal(size=kept.shape), kept, [1], full)
    assert full.constant_along(coef) == (True, False)
    coords = [np.linspace(0.0, 1.0, 7), np.linspace(-1.0, 2.0, 9)]
    d0 = full.evaluate_grid(coef, coords, (1, 0))
    assert d0.shape == (7, 9) and not np.any(d0)
    noise = np.einsum("pi,qj,ij->pq", full.axes[0].matrix(coords[0], 1), full.axes[1].matrix(coords[1], 0), coef)
    assert np.abs(noise).max() < 1e-12  # what the sum over the basis gives: zero up to rounding
    d1 = np.einsum("pi,qj,ij->pq", full.axes[0].matrix(coords[0], 0), full.axes[1].matrix(coords[1], 1), coef)
    np.testing.assert_allclose(full.evaluate_grid(coef, coords, (0, 1)), d1, rtol=1e-12, atol=1e-12)
    moved = coef.copy()
    moved[2, 0] += 1e-9  # a value dof of another node along axis 0
    assert full.constant_along(moved) == (False, False)
    batch = np.stack([coef, 2.0 * coef, moved])
    assert full.constant_along(batch[:2], batch=1) == (True, False)
    assert full.constant_along(batch, batch=1) == (False, False)
