"""The batched snapshot-noise draws (fpirl.uncertainty._batched, issue 20) equal the per-draw band passes.

Oracle: ``_snapshot_noise._draw``, the original one-draw-at-a-time computation of
``u = D(p)^T r(e)``, ``b = D(e)^T r_hat``, the bias band and ``||r(e)||^2`` (elementwise band
passes over all pairs, no time compression, no stacked GEMMs), fed the same generator.
"""

import numpy as np
import pytest

from fpirl import DensitySnapshots, Grid, PotentialEstimator
from fpirl.uncertainty import _batched
from fpirl.uncertainty._batched import BatchedDraws, draw_vectors
from fpirl.uncertainty._snapshot_noise import _draw, _Residuals
from fpirl.weakform.matfree import NormalOperator, StreamingSnapshots


def _case(boundary, noisy, estimate_beta):
    grid = Grid([-1, -1], [1, 1], (10, 12), boundary=boundary)
    x = grid.mesh()
    t = 0.02 * np.arange(9)
    v = np.exp(-np.cos(np.pi * x[..., 0]) - 0.5 * np.sin(np.pi * x[..., 1]))[None] * (
        1 + 0.2 * np.exp(-5 * t)[:, None, None] * np.cos(np.pi * x[..., 0])[None])
    if noisy:
        v = v * (1 + 0.05 * np.random.default_rng(0).standard_normal(v.shape))
    s = DensitySnapshots(grid, t, v)
    est = PotentialEstimator(hermite_elements=3, **({"estimate_beta": True} if estimate_beta else {"beta": 2.0})).fit(s)
    src = StreamingSnapshots.from_snapshots(s).normalize()
    op = NormalOperator(src, est.hermite_, compress=None, chunk_bytes=8 * grid.size * 6 * 3)  # chunks of 3 pairs
    return est, _Residuals(op, est.coef_.ravel(), 1 / est.beta_, src.dt, "midpoint")


@pytest.mark.parametrize("boundary, noisy, estimate_beta", [("periodic", False, True), ("reflecting", True, False)])
def test_batched_draws_equal_the_per_draw_computation(boundary, noisy, estimate_beta, monkeypatch):
    est, res = _case(boundary, noisy, estimate_beta)
    # exact data: the data and residual are compressed in time; noisy data: all pairs are kept
    assert BatchedDraws(res, estimate_beta).compressed == (not noisy)
    n_draws, n_u = 5, 3
    gen = np.random.default_rng(5)
    old = [_draw(res, "multiplicative", True, gen) for _ in range(n_draws)]

    def stack(i, j):
        return np.array([np.append(o[i], [o[j]] if estimate_beta else []) for o in old]).T

    u_old, b_old, q_old = stack(0, 5), stack(1, 6), stack(2, 7)
    rr_old = np.array([o[3] for o in old])
    # one draw per batch / all draws in one batch; the band of b per test node / per data node
    for batch_bytes, small in ((1, 8), (1 << 28, 8), (1 << 28, 0)):
        monkeypatch.setattr(_batched, "BATCH_BYTES", batch_bytes)
        monkeypatch.setattr(_batched, "SMALL_MODES", small)
        ub, u, q, rr = draw_vectors(res, "multiplicative", True, np.random.default_rng(5), n_draws, estimate_beta,
                                    n_u=n_u)
        scale = np.abs(u_old + b_old).max()
        np.testing.assert_allclose(ub, u_old + b_old, rtol=0, atol=1e-11 * scale)
        np.testing.assert_allclose(u, u_old[:, :n_u], rtol=0, atol=1e-11 * scale)
        np.testing.assert_allclose(q, q_old[:, :q.shape[1]], rtol=1e-11, atol=1e-13 * np.abs(q_old).max())
        np.testing.assert_allclose(rr, rr_old[:len(rr)], rtol=1e-12)
