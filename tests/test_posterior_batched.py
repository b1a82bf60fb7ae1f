"""The batched snapshot-noise draws (fpirl.uncertainty._batched, issue 20) equal the per-draw band passes.

Oracle: ``_draw_oracle._draw``, the original one-draw-at-a-time computation of
``u = D(p)^T r(e)`` and ``b = D(e)^T r_hat`` (elementwise band passes over all pairs, no time
compression, no stacked GEMMs), fed the same generator.
"""

import numpy as np
import pytest

from fpirl import DensitySnapshots, Grid, PotentialEstimator
from fpirl.uncertainty import _batched, _many_modes
from fpirl.uncertainty._batched import BatchedDraws, draw_vectors
from _draw_oracle import _draw
from fpirl.uncertainty._snapshot_noise import _Residuals
from fpirl.weakform.matfree import NormalOperator, StreamingSnapshots


def _case(boundary, noisy, estimate_beta, n_times=9, scheme="midpoint"):
    grid = Grid([-1, -1], [1, 1], (10, 12), boundary=boundary)
    x = grid.mesh()
    t = 0.02 * np.arange(n_times)
    v = np.exp(-np.cos(np.pi * x[..., 0]) - 0.5 * np.sin(np.pi * x[..., 1]))[None] * (
        1 + 0.2 * np.exp(-5 * t)[:, None, None] * np.cos(np.pi * x[..., 0])[None])
    if noisy:
        v = v * (1 + 0.05 * np.random.default_rng(0).standard_normal(v.shape))
    s = DensitySnapshots(grid, t, v)
    est = PotentialEstimator(hermite_elements=3, time_scheme=scheme,
                             **({"estimate_beta": True} if estimate_beta else {"beta": 2.0})).fit(s)
    src = StreamingSnapshots.from_snapshots(s).normalize()
    op = NormalOperator(src, est.hermite_, compress=None, chunk_bytes=8 * grid.size * 6 * 3,  # chunks of 3 rows
                        time_scheme=scheme)
    return est, _Residuals(op, est.coef_.ravel(), 1 / est.beta_, src.dt, scheme)


@pytest.mark.parametrize("boundary, noisy, estimate_beta, scheme", [("periodic", False, True, "midpoint"),
                                                                   ("reflecting", True, False, "midpoint"),
                                                                   ("reflecting", True, True, "simpson")])
def test_batched_draws_equal_the_per_draw_computation(boundary, noisy, estimate_beta, scheme, monkeypatch):
    est, res = _case(boundary, noisy, estimate_beta, scheme=scheme)
    monkeypatch.setattr(_batched, "REDUCED_NOISE", False)  # every normal number drawn, as by the per-draw code
    # exact data: the data and residual are compressed in time; noisy data: all pairs are kept
    assert BatchedDraws(res, estimate_beta).compressed == (not noisy)
    n_draws, n_u = 5, 3
    gen = np.random.default_rng(5)
    old = [_draw(res, "multiplicative", True, gen) for _ in range(n_draws)]

    def stack(i, j):
        return np.array([np.append(o[i], [o[j]] if estimate_beta else []) for o in old]).T

    u_old, b_old = stack(0, 5), stack(1, 6)
    # one draw per batch / all draws in one batch; the band of b per test node / per data node
    # (the small-mode bands' shifts on two threads, one row of axis 0 per elementwise pass and the data's shifted
    # modes read in place, not copied, in the fourth)
    # (in double precision; the default single-precision band blocks in the last, to their rounding)
    # many-mode path (small = 0): slabs of one row and chunks of one draw on two threads when chunk = 1
    for batch_bytes, small, threads, chunk, single in ((1, 8, 1 << 18, 1 << 20, False), (1 << 28, 8, 1 << 18, 1 << 20, False),
                                                       (1 << 28, 0, 1 << 18, 1 << 20, False), (1 << 28, 8, 0, 1, False),
                                                       (1 << 28, 8, 1 << 18, 1 << 20, True), (1 << 28, 0, 0, 1, False),
                                                       (1 << 28, 0, 1 << 18, 1 << 20, True)):
        monkeypatch.setattr(_many_modes, "BAND_BYTES", 1 if chunk == 1 else 1 << 25)
        monkeypatch.setattr(_batched, "BATCH_BYTES", batch_bytes)
        monkeypatch.setattr(_batched, "SMALL_MODES", small)
        monkeypatch.setattr(_batched, "_THREAD_MIN_SIZE", threads)
        monkeypatch.setattr(_batched, "_CHUNK_BYTES", chunk)
        monkeypatch.setattr(_batched, "GATHER_BYTES", 0 if chunk == 1 else 1 << 27)  # the data's shifts read in place
        monkeypatch.setattr(_batched, "BAND_DTYPE", np.float32 if single else np.float64)
        ub, u = draw_vectors(res, "multiplicative", True, np.random.default_rng(5), n_draws, estimate_beta,
                             n_u=n_u)
        scale, tol = np.abs(u_old + b_old).max(), 1e-5 if single else 1e-11
        np.testing.assert_allclose(ub, u_old + b_old, rtol=0, atol=tol * scale)
        np.testing.assert_allclose(u, u_old[:, :n_u], rtol=0, atol=tol * scale)


@pytest.mark.parametrize("model, normalize, full_rank", [("multiplicative", True, False), ("additive", True, False),
                                                         ("multiplicative", False, False), ("multiplicative", True, True),
                                                         ("additive", True, True)])
def test_reduced_noise_has_the_law_of_the_mixed_noise(model, normalize, full_rank, rng):
    """The direct sampler of ``y = X e`` is linear in its normal numbers: its covariance, read off unit
    vectors, equals the dense ``X T (X T)^T`` of the noise map ``e = T z`` (oracle: the model written out).
    Full rank: every per-node covariance positive definite (their Cholesky factors), else the eigendecompositions;
    additive noise is 1 where the data show mass and 0 at the node without data."""
    from fpirl.uncertainty._reduced_noise import ReducedNoise

    L, k1, shape = 3, 6, (3, 4)
    n = 12
    X = rng.standard_normal((L, k1))
    p = rng.uniform(0.5, 2.0, (k1,) + shape)
    if not full_rank:
        X[2] = X[0] + X[1]  # a rank-deficient mix: a direction of no variance
        p[:, 0, 0] = 0.0  # no data at one node: no multiplicative noise there
    w = rng.uniform(0.5, 1.5, shape)
    on_support = (p.mean(axis=0) > 0).ravel()  # the node without data is the only one off the support
    s = p.reshape(k1, n) if model == "multiplicative" else np.ones((k1, n)) * on_support
    T = np.diag(s.ravel())  # e_k[j] = s_k[j] z_k[j] - p_k[j] sum_j' w_j' s_k[j'] z_k[j']
    if normalize:
        T -= np.einsum("kj,kl,lm->kjlm", p.reshape(k1, n), np.eye(k1), w.ravel()[None, :] * s).reshape(k1 * n, k1 * n)
    Y = np.kron(X, np.eye(n)) @ T
    sampler = ReducedNoise(X, p, model, normalize, w)
    # the Cholesky factors (lower triangular) exactly where every per-node covariance is positive definite
    if model == "multiplicative":  # (additive: one covariance for every node, its eigendecomposition)
        assert np.allclose(sampler.root, np.tril(sampler.root)) == full_rank
    m = n * L + k1 * normalize
    G = np.empty((L * n, m))
    for c in range(m):
        u = np.zeros(m)
        u[c] = 1.0
        G[:, c] = sampler.from_normals(u[:n * L].reshape(1, n, L), u[n * L:].reshape(1, k1) if normalize else None).ravel()
    np.testing.assert_allclose(G @ G.T, Y @ Y.T, rtol=0, atol=1e-13 * np.abs(Y @ Y.T).max())
    assert sampler.sample(np.random.default_rng(0), 2).shape == (2, L) + shape
    # the sampler's single-precision normals go through the same map, to single-precision rounding
    xi, eta = rng.standard_normal((4, n, L)).astype(np.float32), rng.standard_normal((4, k1))
    y64 = sampler.from_normals(xi.astype(float), eta)
    np.testing.assert_allclose(sampler.from_normals(xi, eta), y64, rtol=0, atol=1e-6 * np.abs(y64).max())


def test_batch_vectors_from_the_time_mixes_equal_those_from_the_noise():
    """Given the time mixes of the noise (what the direct sampler draws), the batched vectors equal those
    computed from all normal numbers (the gamma row through the residual modes: to the compression)."""
    est, res = _case("periodic", False, True, n_times=21)
    bd = BatchedDraws(res, True)
    assert bd.reduced_noise("multiplicative", True) is not None  # smooth data: few mixes
    gen = np.random.default_rng(2)
    noises = np.array([bd.noise(*("multiplicative", True), gen) for _ in range(3)])
    ub, u = bd.batch_vectors(noises, 2)
    mixed = np.matmul(bd.mix, noises.reshape(3, bd.K + 1, -1))
    ub2, u2 = bd.batch_vectors(noises[:0], 2, mixed=mixed)
    # the residuals are walked in single precision (BAND_DTYPE): the two routes' double-precision mixes
    # (one 2-D product per draw, one stacked product) may round to neighbouring singles, so they agree to
    # single-precision rounding (measured: 1.9e-6 of the largest entry), not bit for bit
    tol = 100 * np.finfo(_batched.BAND_DTYPE).eps
    np.testing.assert_allclose(ub2, ub, rtol=0, atol=tol * np.abs(ub).max())
    np.testing.assert_allclose(u2, u, rtol=0, atol=tol * np.abs(u).max())


@pytest.mark.parametrize("boundary", ["periodic", "reflecting"])
def test_many_mode_path_in_3d_equals_the_per_draw_computation(boundary, monkeypatch):
    """The many-mode path (:mod:`fpirl.uncertainty._many_modes`, forced with ``SMALL_MODES = 0``) in 3-D,
    where the slab's walk carries both states over two axes: equal to the per-draw band passes, to 1e-11
    in double precision and 1e-5 (of the largest entry) in single; slabs of one row, one draw a chunk."""
    grid = Grid([-1] * 3, [1] * 3, (5, 6, 7), boundary=boundary)
    x = grid.mesh()
    t = 0.02 * np.arange(6)
    v = np.exp(-np.cos(np.pi * x[..., 0]) - 0.5 * np.sin(np.pi * x[..., 1]) + 0.3 * x[..., 2] ** 2)[None] * (
        1 + 0.2 * np.exp(-5 * t)[:, None, None, None] * np.cos(np.pi * x[..., 0])[None])
    v = v * (1 + 0.05 * np.random.default_rng(1).standard_normal((t.size,) + grid.shape))
    s = DensitySnapshots(grid, t, v)
    est = PotentialEstimator(hermite_elements=2, beta=2.0).fit(s)
    src = StreamingSnapshots.from_snapshots(s).normalize()
    op = NormalOperator(src, est.hermite_, compress=None)
    res = _Residuals(op, est.coef_.ravel(), 1 / est.beta_, src.dt, "midpoint")
    monkeypatch.setattr(_batched, "REDUCED_NOISE", False)
    monkeypatch.setattr(_batched, "SMALL_MODES", 0)
    gen = np.random.default_rng(3)
    old = [_draw(res, "multiplicative", True, gen) for _ in range(3)]
    ub_old = np.array([o[0] + o[1] for o in old]).T
    u_old = np.array([o[0] for o in old]).T
    for single, band_bytes in ((False, 1), (True, 1), (True, 1 << 25)):
        monkeypatch.setattr(_batched, "BAND_DTYPE", np.float32 if single else np.float64)
        monkeypatch.setattr(_many_modes, "BAND_BYTES", band_bytes)
        ub, u = draw_vectors(res, "multiplicative", True, np.random.default_rng(3), 3, False, n_u=2)
        tol = (1e-5 if single else 1e-11) * np.abs(ub_old).max()
        np.testing.assert_allclose(ub, ub_old, rtol=0, atol=tol)
        np.testing.assert_allclose(u, u_old[:, :2], rtol=0, atol=tol)
