import itertools

import numpy as np
import pytest
from scipy import integrate

from fpirl import DensitySnapshots, Grid
from fpirl.weakform.assembly import TIME_ORDER, assemble_normal_equations, axis_tables, hat_matrix, time_pairs
from fpirl.core._errors import FpirlInputError
from fpirl.core.grid import Axis
from fpirl.core.hermite import HermiteAxis, HermiteSpace
from fpirl.weakform._reference import reference_normal_equations


def _hat(fe, j, x, k=0):
    """Independent hat function of node ``j`` of a uniform FE axis (or its derivative), periodic wrap."""
    d = x - (fe.lower + j * fe.spacing)
    if fe.periodic:
        d = (d + 0.5 * fe.length) % fe.length - 0.5 * fe.length
    inside = np.abs(d) < fe.spacing
    return np.where(inside, 1 - np.abs(d) / fe.spacing, 0.0) if k == 0 else \
        np.where(inside, -np.sign(d) / fe.spacing, 0.0)


@pytest.mark.parametrize("periodic", [True, False])
def test_axis_tables_match_scipy_quad(periodic):
    fe = Axis("x", -1.0, 1.0, 7, periodic=periodic)
    ha = HermiteAxis(-1.0, 1.0, 3, periodic)  # not nested with the FE grid
    tb = axis_tables(fe, ha, 3)
    hat = lambda j, x, k=0: _hat(fe, j, x, k)
    herm = lambda i, x, k=0: ha.matrix(np.atleast_1d(x), k)[0, i]
    breaks = np.union1d(fe.lower + fe.spacing * np.arange(fe.elements + 1), ha.breakpoints)

    def quad(f):
        return sum(integrate.quad(f, a, b, epsabs=1e-13)[0] for a, b in zip(breaks[:-1], breaks[1:]))

    # linear elements: the analytic mass (h/6 [2 1; 1 2] per element) and stiffness (1/h [1 -1; -1 1])
    h, n = fe.spacing, fe.n_nodes
    mass = np.diag(np.full(n, 2 * h / 3)) + h / 6 * (np.eye(n, k=1) + np.eye(n, k=-1))
    stiff = np.diag(np.full(n, 2 / h)) - (np.eye(n, k=1) + np.eye(n, k=-1)) / h
    if periodic:
        mass[0, -1] = mass[-1, 0] = h / 6
        stiff[0, -1] = stiff[-1, 0] = -1 / h
    else:
        mass[0, 0] = mass[-1, -1] = h / 3
        stiff[0, 0] = stiff[-1, -1] = 1 / h
    np.testing.assert_allclose(tb.mass, mass, atol=1e-14)
    np.testing.assert_allclose(tb.stiffness, stiff, atol=1e-13)
    for j, i, l in [(2, 1, -1), (3, 4, 0), (5, 2, 1), (0, ha.n_dofs - 1, 1), (fe.n_nodes - 1, 0, -1)]:
        n = (j + l) % fe.n_nodes
        if not periodic and not 0 <= j + l < fe.n_nodes:
            continue
        for u in (0, 1):
            ref = quad(lambda x: hat(n, x) * herm(i, x, u) * hat(j, x, u))
            assert tb.t[u, j, i, l + 1] == pytest.approx(ref, abs=1e-12)


def test_hat_matrix_is_the_hat_basis(rng):
    """hat_matrix (values and slopes) against the independent hats, both boundaries."""
    for periodic in (True, False):
        fe = Axis("x", -1.0, 2.0, 6, periodic=periodic)
        x = rng.uniform(-1.0, 2.0, 50)
        for k in (0, 1):
            ref = np.stack([_hat(fe, j, x, k) for j in range(fe.n_nodes)], axis=1)
            np.testing.assert_allclose(hat_matrix(fe, x, k), ref, atol=1e-13)


def test_quadrature_is_exact_with_three_points_but_not_two(rng):
    # in 1-D the integrand N h' w' has degree 3; the undifferentiated axes of 2-D give degree 5
    g = Grid([-1.0, -1.0], [1.0, 1.0], [9, 8])
    s = DensitySnapshots(g, [0.0, 0.1, 0.2], rng.random((3,) + g.shape))
    H = HermiteSpace.on_grid(g, 4)
    a3 = assemble_normal_equations(s, H, quadrature_points=3).xtx
    a5 = assemble_normal_equations(s, H, quadrature_points=5).xtx
    a2 = assemble_normal_equations(s, H, quadrature_points=2).xtx
    np.testing.assert_allclose(a3, a5, rtol=1e-12, atol=1e-12 * np.abs(a5).max())
    assert np.abs(a2 - a5).max() > 1e-8 * np.abs(a5).max()


CASES = [
    (1, 7, 2),
    (2, (6, 7), (2, 3)),
    (3, (5, 4, 6), (2, 2, 3)),
]


@pytest.mark.parametrize("boundary", ["periodic", "reflecting"])
@pytest.mark.parametrize("d, elements, hermite_elements", CASES)
@pytest.mark.parametrize("scheme", ["midpoint", "explicit", "simpson"])
def test_fast_assembly_equals_dense_reference(rng, boundary, d, elements, hermite_elements, scheme):
    g = Grid([-1.0] * d, [1.0] * d, elements, boundary=boundary)
    s = DensitySnapshots(g, np.arange(4) * 0.1, rng.random((4,) + g.shape))
    H = HermiteSpace.on_grid(g, hermite_elements)
    fast = assemble_normal_equations(s, H, time_scheme=scheme)
    ref = reference_normal_equations(s, H, time_scheme=scheme)
    for name in ("xtx", "xtg", "xtc", "gg", "gc", "cc"):
        a, b = getattr(fast, name), getattr(ref, name)
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-12 * np.max(np.abs(b)), err_msg=name)
    assert fast.n_rows == ref.n_rows


def test_constant_potential_is_in_the_null_space(rng):
    g = Grid([-1.0, -1.0], [1.0, 1.0], 8)
    s = DensitySnapshots(g, [0.0, 0.1, 0.2], rng.random((3,) + g.shape))
    H = HermiteSpace.on_grid(g, 3)
    ne = assemble_normal_equations(s, H)
    c = H.constant_mode().ravel()
    assert np.abs(ne.xtx @ c).max() < 1e-12 * np.abs(ne.xtx).max()
    assert abs(c @ ne.xtg) < 1e-10 * np.abs(ne.xtg).max()


def test_time_pairs():
    v = np.arange(4.0)[:, None] ** 2
    pbar, pdot = time_pairs(v, 0.5, "midpoint")
    np.testing.assert_allclose(pbar[:, 0], [0.5, 2.5, 6.5])
    np.testing.assert_allclose(pdot[:, 0], [2, 6, 10])
    np.testing.assert_allclose(time_pairs(v, 0.5, "explicit")[0][:, 0], [0, 1, 4])
    pbar, pdot = time_pairs(v, 0.5, "simpson")  # windows [t_k, t_{k+2}]
    np.testing.assert_allclose(pbar[:, 0], [8 / 6, 26 / 6])
    np.testing.assert_allclose(pdot[:, 0], [4, 8])
    with pytest.raises(FpirlInputError, match="at least 3 snapshots"):
        time_pairs(v[:2], 0.5, "simpson")


@pytest.mark.parametrize("scheme", sorted(TIME_ORDER))
def test_time_scheme_exactness_and_order(scheme):
    """A row integrates ``dot p = f`` over its window: exact for polynomials ``p`` of degree ``TIME_ORDER``
    (``f`` of degree one less), and the row error of ``p = exp(-t)`` falls as ``dt^TIME_ORDER`` (log-log slope)."""
    order = TIME_ORDER[scheme]
    t = 0.3 + 0.25 * np.arange(7)
    for deg in range(order + 1):  # p = t^deg, f = deg t^(deg - 1)
        p = t[:, None] ** deg
        f = deg * t[:, None] ** max(deg - 1, 0) if deg else 0 * t[:, None]
        np.testing.assert_allclose(time_pairs(p, 0.25, scheme)[1], time_pairs(f, 0.25, scheme)[0], atol=1e-12)
    p = t[:, None] ** (order + 1)
    f = (order + 1) * t[:, None] ** order
    assert np.abs(time_pairs(p, 0.25, scheme)[1] - time_pairs(f, 0.25, scheme)[0]).max() > 1e-6
    steps = 0.2 / 2.0 ** np.arange(5)
    err = []
    for dt in steps:
        tt = dt * np.arange(3)[:, None]
        pdot, pbar = time_pairs(np.exp(-tt), dt, scheme)[1], time_pairs(-np.exp(-tt), dt, scheme)[0]
        err.append(abs(pdot[0, 0] - pbar[0, 0]))  # the first row's local error, relative to |p| ~ 1
    slope = np.polyfit(np.log(steps), np.log(err), 1)[0]
    assert abs(slope - order) < 0.15, slope


def _kron_contraction(S, vtables):
    """Brute force ``sum_{a,a'} sum_{n,delta} S[n, delta] prod_b V_b^{[b=a][b=a']}`` with dense Kronecker
    products of the 1-D tables (rows: the pair indices ``(i_b, i'_b)`` of all axes, in C order)."""
    d = S.ndim
    total = 0.0
    for a, a2 in itertools.product(range(d), repeat=2):
        K = np.ones((1, 1))
        for b in range(d):
            K = np.kron(K, vtables[b][(int(b == a), int(b == a2))])
        total = total + K @ S.ravel()
    return total


def _mirror(M, n, nd):
    """``M[(i, i'), (m, delta)] -> M[(i', i), (m + delta, -delta)]`` on a periodic axis of ``n`` nodes
    (columns ``5 m + delta + 2``); for S (one row) the relation ``S[m, delta] = S[m + delta, -delta]``."""
    rows, cols = M.shape
    M = M.reshape(nd, nd, n, 5) if rows > 1 else M.reshape(1, 1, n, 5)
    out = np.empty_like(M)
    for m in range(n):
        for k, delta in enumerate(range(-2, 3)):
            out[:, :, (m + delta) % n, 4 - k] = M[:, :, m, k]
    return (out.transpose(1, 0, 2, 3) if rows > 1 else out).reshape(rows, cols)


@pytest.mark.parametrize("chunk", [7, 64, 2**21])
def test_blocked_contraction_equals_kronecker_brute_force(rng, monkeypatch, chunk):
    """Random 1-D tables and moment with the symmetry of the assembly's (``V_vu`` the mirror of
    ``V_uv``, S its own mirror), rows that vanish (Hermite pairs without overlap), 2-D to 4-D, the
    contraction's chunks and blocks forced small: ``A`` (the blocks of first-axis pairs ``i_1 <= i'_1``
    contracted, the others their transposes) against all ``d^2`` dense Kronecker products."""
    from fpirl.weakform import _contraction

    monkeypatch.setattr(_contraction, "_CHUNK_DOUBLES", chunk)
    monkeypatch.setattr(_contraction, "_BETWEEN_DOUBLES", 4 * chunk)  # blocks of the first axis's rows
    for nodes, dofs in (((4,), (3,)), ((3, 4), (2, 3)), ((2, 3, 1), (2, 3, 2)), ((1, 2, 1, 2), (2, 2, 1, 2)),
                        ((1, 1, 2, 1, 1), (2, 1, 2, 2, 1))):
        vtables = []
        for n, nd in zip(nodes, dofs):
            tb = {(0, 1): rng.standard_normal((nd * nd, 5 * n))}
            tb[(1, 0)] = _mirror(tb[(0, 1)], n, nd)
            for u in (0, 1):
                m = rng.standard_normal((nd * nd, 5 * n))
                tb[(u, u)] = m + _mirror(m, n, nd)
            for m in tb.values():
                m[[nd - 1, (nd - 1) * nd] if nd > 1 else []] = 0.0  # a dof pair without overlap: rows dropped
            vtables.append(tb)
        S = rng.standard_normal(tuple(5 * n for n in nodes))
        mirrored = S
        for b, n in enumerate(nodes):  # the mirror of all axes at once, one axis after the other
            moved = np.moveaxis(mirrored, b, -1)
            mirrored = np.moveaxis(np.stack([_mirror(row[None], n, 1)[0] for row in moved.reshape(-1, 5 * n)])
                                   .reshape(moved.shape), -1, b)
        S = S + mirrored
        A = _contraction.normal_matrix(S.copy(), vtables, dofs)
        np.testing.assert_array_equal(A, A.T)  # exactly symmetric (diagonal blocks symmetrised, the others mirrored)
        d = len(dofs)
        # the brute force in the pair layout (i_1 i'_1, ..., i_d i'_d), regrouped into rows (i) and columns (i')
        ref = _kron_contraction(S, vtables).reshape(tuple(x for nd in dofs for x in (nd, nd)))
        ref = ref.transpose(list(range(0, 2 * d, 2)) + list(range(1, 2 * d, 2))).reshape(A.shape)
        np.testing.assert_allclose(A, ref, rtol=1e-11,
                                   atol=1e-11 * np.abs(S).sum())


@pytest.mark.parametrize("boundary, elements, hermite_elements", [("periodic", (4, 3, 5), (2, 3, 2)),
                                                                 ("reflecting", (3, 3, 3, 3), 1)])
def test_blocked_assembly_equals_dense_reference(rng, monkeypatch, boundary, elements, hermite_elements):
    """The whole assembly with the contraction in many small chunks, against the dense column-by-column one."""
    from fpirl.weakform import _contraction

    monkeypatch.setattr(_contraction, "_CHUNK_DOUBLES", 50)
    monkeypatch.setattr(_contraction, "_BETWEEN_DOUBLES", 500)
    d = len(elements)
    g = Grid([-1.0] * d, [1.0] * d, elements, boundary=boundary)
    s = DensitySnapshots(g, np.arange(3) * 0.1, rng.random((3,) + g.shape))
    H = HermiteSpace.on_grid(g, hermite_elements)
    fast = assemble_normal_equations(s, H)
    ref = reference_normal_equations(s, H)
    np.testing.assert_allclose(fast.xtx, ref.xtx, rtol=1e-11, atol=1e-12 * np.abs(ref.xtx).max())


def test_view_never_copies(rng):
    """The contraction's GEMMs write into reshaped views: a reshape that would copy is refused."""
    from fpirl.weakform._contraction import _view

    a = rng.standard_normal((4, 6))
    v = _view(a, (2, 2, 6))
    v[1, 1, 5] = 7.0
    assert a[3, 5] == 7.0
    with pytest.raises(ValueError, match="cannot be viewed"):
        _view(a.T, (24,))


@pytest.mark.parametrize("split", [2**22, 1000])
def test_touched_empty_writes_one_value_per_page(monkeypatch, split):
    """The pre-touched work arrays: the shape asked for, one zero every 512 doubles (a page), on one thread
    or, from the split size on, on two."""
    from fpirl.weakform import _contraction

    monkeypatch.setattr(_contraction, "TOUCH_SPLIT_DOUBLES", split)
    a = _contraction.touched_empty((7, 3, 1001))
    assert a.shape == (7, 3, 1001) and a.flags.c_contiguous and a.flags.writeable
    np.testing.assert_array_equal(a.reshape(-1)[::512], 0.0)
