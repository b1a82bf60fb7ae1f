"""Exact second moments of the snapshot-noise residual (fpirl.uncertainty._expected, issue 20).

Oracle: the per-draw Monte Carlo code ``_draw_oracle._draw`` (noise made by ``_batched._noise``,
band passes over all pairs) fed, in place of random normals, every unit vector ``z = e_c`` in turn:
its outputs are quadratic in ``z``, so their sum over the unit vectors is their exact expectation
under ``z ~ N(0, I)`` (brute force, no formula shared with the code under test).
"""

import numpy as np
import pytest

from fpirl import DensitySnapshots, Grid, PotentialEstimator
from fpirl.uncertainty._expected import ExpectedResidual
from fpirl.uncertainty._reduced_noise import EIG_RTOL
from _draw_oracle import _draw
from fpirl.uncertainty._snapshot_noise import _Residuals
from fpirl.weakform.matfree import NormalOperator, StreamingSnapshots


class _UnitNormals:
    """Stands in for a generator: ``standard_normal`` hands out the next entries of one unit vector."""

    def __init__(self, size, c):
        self.z, self.pos = np.zeros(size), 0
        self.z[c] = 1.0

    def standard_normal(self, shape):
        n = int(np.prod(shape))
        out = self.z[self.pos:self.pos + n].reshape(shape)
        self.pos += n
        return out


def _case(boundary, scheme, rng):
    grid = Grid([-1, -1], [1, 1], (6, 7), boundary=boundary)
    x = grid.mesh()
    t = 0.05 * np.arange(6)
    v = np.exp(-np.cos(np.pi * x[..., 0]) - 0.5 * np.sin(np.pi * x[..., 1]))[None] * (
        1 + 0.2 * np.exp(-5 * t)[:, None, None] * np.cos(np.pi * x[..., 0])[None])
    v = v * (1 + 0.05 * rng.standard_normal(v.shape))  # noisy: no time compression of the data
    v[:, 0, :] *= 3.0  # a steep profile: the normalisation terms matter
    s = DensitySnapshots(grid, t, v)
    est = PotentialEstimator(hermite_elements=2, estimate_beta=True, time_scheme=scheme).fit(s)
    src = StreamingSnapshots.from_snapshots(s).normalize()
    op = NormalOperator(src, est.hermite_, compress=None, time_scheme=scheme,
                        chunk_bytes=8 * grid.size * 6 * 2)  # chunks of 2 rows: the carried snapshot(s)
    res = _Residuals(op, est.coef_.ravel(), 1 / est.beta_, src.dt, scheme)
    return res, ExpectedResidual(res).pfull


@pytest.mark.parametrize("boundary, scheme, model, normalize", [
    ("periodic", "midpoint", "multiplicative", True), ("reflecting", "explicit", "additive", True),
    ("reflecting", "midpoint", "multiplicative", False), ("periodic", "simpson", "multiplicative", True)])
def test_exact_moments_equal_the_brute_force_expectation(boundary, scheme, model, normalize, rng):
    res, pfull = _case(boundary, scheme, rng)
    size = pfull.size
    energy = rr = qg = 0.0
    q = 0.0
    for c in range(size):  # E f(z) = sum_c f(e_c) for f quadratic in z ~ N(0, I)
        _, _, qc, rrc, ec, _, _, qgc = _draw(res, model, normalize, _UnitNormals(size, c))
        energy, rr, q, qg = energy + ec, rr + rrc, q + qc, qg + qgc
    ex = ExpectedResidual(res, rtol=EIG_RTOL)  # every mode of the normalisation terms: exact
    got = ex.energy(model, normalize)
    np.testing.assert_allclose(got, energy, rtol=1e-9, atol=1e-12 * energy.max())
    np.testing.assert_allclose(got.sum(), rr, rtol=1e-9)
    qv, g = ex.bias(model, normalize, True)
    np.testing.assert_allclose(qv, q, rtol=0, atol=1e-9 * np.abs(q).max())
    np.testing.assert_allclose(g, qg, rtol=1e-9, atol=1e-9 * abs(qg))


@pytest.mark.parametrize("boundary, model, normalize", [("periodic", "multiplicative", True),
                                                        ("reflecting", "additive", False)])
def test_bias_through_xi_alone_is_the_part_linear_in_theta(boundary, model, normalize, rng):
    """``xi_only``: the bias band through ``Xi(bar e) theta`` alone. ``W`` is linear in ``B = Xi(.) theta + gamma C``
    and ``A``, so it equals the full bias minus the full bias of the same residual with ``theta = 0``."""
    res, _ = _case(boundary, "midpoint", rng)
    zero = _Residuals(res.op, np.zeros(res.op.hermite.n_coef), res.gamma, res.dt, res.scheme)
    full, g_full = ExpectedResidual(res, rtol=EIG_RTOL).bias(model, normalize, True)
    part, g_part = ExpectedResidual(zero, rtol=EIG_RTOL).bias(model, normalize, True)
    xi, g_xi = ExpectedResidual(res, rtol=EIG_RTOL).bias(model, normalize, True, xi_only=True)
    np.testing.assert_allclose(xi, full - part, rtol=0, atol=1e-10 * np.abs(full).max())
    assert g_xi == pytest.approx(g_full - g_part, rel=1e-9, abs=1e-12 * abs(g_full))
    assert np.abs(xi).max() > 1e-3 * np.abs(full).max()  # not trivially zero


@pytest.mark.parametrize("seed, model", [(0, "multiplicative"), (2, "additive")])
def test_default_mode_cut_moves_only_a_small_part_of_the_normalisation_terms(seed, model):
    """The default cut of the modes of ``p_i`` and ``v_i`` (``NORMALIZE_RTOL``) drops modes here (5% noise on six
    snapshots, a steep profile) and changes only the normalisation terms, by a small part of them: the exact
    expectations (every mode) are the oracle, the terms' size their difference to ``normalize=False``."""
    res, p = _case("periodic", "midpoint", np.random.default_rng(seed))
    cut, exact = ExpectedResidual(res), ExpectedResidual(res, rtol=EIG_RTOL)
    e, e0, e_plain = cut.energy(model, True), exact.energy(model, True), exact.energy(model, False)
    assert cut._cache["p"][0].shape[1] < p.shape[0]  # modes were dropped
    assert np.abs(e - e0).max() <= 0.01 * np.abs(e0 - e_plain).max()
    assert np.abs(e - e0).max() <= 1e-3 * e0.max() and abs(e.sum() - e0.sum()) <= 1e-3 * e0.sum()
    (b, g), (b0, g0), (b_plain, _) = (x.bias(model, flag, True) for x, flag in ((cut, True), (exact, True), (exact, False)))
    assert np.abs(b - b0).max() <= 0.15 * np.abs(b0 - b_plain).max()
    assert abs(g - g0) <= 0.05 * abs(g0)
