"""The time modes the snapshot-noise draws keep (fpirl.uncertainty._truncation, issue 20).

Oracle for the mode energies: the residual map ``res.apply`` of the fitted operator fed the unit-scale
noise ``s * e_c`` of every unit vector ``e_c`` (all snapshots, all nodes) in turn, mixed in time by the
mode's vector: the sum of the squared norms over ``c`` is the exact expectation under ``z ~ N(0, I)``.
"""

import numpy as np
import pytest

from fpirl import DensitySnapshots, Grid, PotentialEstimator
from fpirl.uncertainty import _batched
from fpirl.uncertainty._batched import BatchedDraws, draw_vectors
from fpirl.uncertainty._expected import ExpectedResidual
from fpirl.uncertainty._snapshot_noise import _Residuals
from fpirl.uncertainty._truncation import energy_tolerance, kept_modes, mode_energies
from fpirl.weakform.assembly import time_pairs
from fpirl.weakform.matfree import NormalOperator, StreamingSnapshots


def _case(boundary, rng, shape=(6, 7), times=6, noise=0.05):
    grid = Grid([-1, -1], [1, 1], shape, boundary=boundary)
    x = grid.mesh()
    t = 0.05 * np.arange(times)
    v = np.exp(-np.cos(np.pi * x[..., 0]) - 0.5 * np.sin(np.pi * x[..., 1]))[None] * (
        1 + 0.2 * np.exp(-5 * t)[:, None, None] * np.cos(np.pi * x[..., 0])[None])
    v = v * (1 + noise * rng.standard_normal(v.shape))
    s = DensitySnapshots(grid, t, v)
    est = PotentialEstimator(hermite_elements=2, beta=2.0).fit(s)
    src = StreamingSnapshots.from_snapshots(s).normalize()
    op = NormalOperator(src, est.hermite_, compress=None, time_scheme="midpoint")
    return _Residuals(op, est.coef_.ravel(), 1 / est.beta_, src.dt, "midpoint")


@pytest.mark.parametrize("boundary, model", [("periodic", "multiplicative"), ("reflecting", "additive")])
def test_mode_energies_equal_the_brute_force_expectation(boundary, model, rng):
    res = _case(boundary, rng)
    ex = ExpectedResidual(res)
    p = ex.pfull
    k1 = p.shape[0]
    V = np.linalg.qr(rng.standard_normal((k1 - 1, 3)))[0]  # three time vectors of the pairs
    W = np.linalg.qr(rng.standard_normal((k1 - 1, 2)))[0]
    Tb, Td = time_pairs(np.eye(k1), res.op.source.dt, "midpoint")
    wu, wb = mode_energies(ex, model, V, np.ones(3), W, np.ones(2), Tb, Td)
    s = p if model == "multiplicative" else np.ones_like(p)
    eu, eb = np.zeros(3), np.zeros(2)
    for c in range(p.size):  # E ||f(z)||^2 = sum_c ||f(e_c)||^2 for f linear in z ~ N(0, I)
        e = np.zeros(p.size)
        e[c] = 1.0
        e = e.reshape(p.shape) * s
        ebar, _, r = res.apply(e)
        eu += np.sum(np.tensordot(V, r, axes=(0, 0)) ** 2, axis=tuple(range(1, r.ndim)))
        eb += np.sum(np.tensordot(W, ebar, axes=(0, 0)) ** 2, axis=tuple(range(1, r.ndim)))
    np.testing.assert_allclose(wu, eu, rtol=1e-10)
    np.testing.assert_allclose(wb, eb, rtol=1e-10)


def test_kept_modes_drop_the_smallest_terms_below_the_tolerance():
    wu, wb = np.array([1.0, 1e-3, 2e-3, 1e-5]), np.array([5e-4, 1e-6])
    total = wu.sum() + wb.sum()
    ku, kb = kept_modes(wu, wb, 1.6e-3 / total)  # 1e-6 + 1e-5 + 5e-4 + 1e-3 = 1.511e-3 <= 1.6e-3 < + 2e-3
    assert ku.tolist() == [True, False, True, False] and kb.tolist() == [True, False]  # one b term kept
    ku, kb = kept_modes(wu, np.array([5e-3, 1e-6]), 1.6e-3 / total)
    assert ku.tolist() == [True, False, True, False] and kb.tolist() == [True, False]
    ku, kb = kept_modes(wu, wb, 0.0)
    assert ku.all() and kb.all()
    ku, kb = kept_modes(wu, wb, 0.99)  # at least one term per side
    assert ku.tolist() == [True, False, False, False] and kb.tolist() == [True, False]
    assert energy_tolerance(50) == pytest.approx((0.3 / 10.0) ** 2)


def test_truncated_draws_stay_within_the_dropped_energy(rng, monkeypatch):
    """Same noise (per-snapshot draws), modes dropped by the rule: the draws' vectors move by about the
    square root of the dropped energy share (the energies are a ranking; a factor 3 of slack), and
    with a zero tolerance they are the untruncated ones exactly."""
    monkeypatch.setattr(_batched, "REDUCED_NOISE", False)
    res = _case("periodic", rng, shape=(8, 9), times=12, noise=0.03)
    ex = ExpectedResidual(res)
    full, _ = draw_vectors(res, "multiplicative", True, np.random.default_rng(4), 8, False)
    bd = BatchedDraws(res, False)
    (lq, V), (lr, W) = bd.spectra
    wu, wb = mode_energies(ex, "multiplicative", V, lq, W, lr, bd.Tb, bd.Td)
    tol = 1e-3
    ku, kb = kept_modes(wu, wb, tol)
    assert not (ku.all() and kb.all())  # the case drops modes
    dropped = (wu[~ku].sum() + wb[~kb].sum()) / (wu.sum() + wb.sum())
    monkeypatch.setattr("fpirl.uncertainty._batched.energy_tolerance", lambda n: tol)
    got, _ = draw_vectors(res, "multiplicative", True, np.random.default_rng(4), 8, False, bd=bd, expected=ex)
    assert (bd.M, bd.Mr) == (ku.sum(), kb.sum())
    change = np.linalg.norm(got - full) / np.linalg.norm(full)
    assert 0 < change <= 3 * np.sqrt(dropped)
    monkeypatch.setattr("fpirl.uncertainty._batched.energy_tolerance", lambda n: 0.0)
    same, _ = draw_vectors(res, "multiplicative", True, np.random.default_rng(4), 8, False,
                           bd=BatchedDraws(res, False), expected=ex)
    np.testing.assert_allclose(same, full, rtol=0, atol=1e-12 * np.abs(full).max())
