"""The data moments of the assembly (fpirl.weakform._moments, fpirl.weakform.assembly.DataMoments):
brute-force oracles for the banded moments in both layouts, the time-mode compression against the
dense reference assembly, and the refits that re-use the moments (issue 20)."""

import itertools
import pickle
import warnings

import numpy as np
import pytest

from fpirl import DensitySnapshots, Grid, PotentialEstimator
from fpirl.core.hermite import HermiteSpace
from fpirl.weakform import _moments, assembly, noise_bias
from fpirl.weakform._reference import reference_normal_equations


def _brute_banded(left, right, periodic, halo):
    """``out[n, delta] = sum_k left_k[n] right_k[n + delta]`` node by node (zero outside a bounded grid)."""
    shape = left.shape[1:]
    out = np.zeros(shape + (2 * halo + 1,) * len(shape))
    for n in itertools.product(*map(range, shape)):
        for delta in itertools.product(range(-halo, halo + 1), repeat=len(shape)):
            m = np.add(n, delta)
            if periodic:
                m = m % shape
            elif np.any(m < 0) or np.any(m >= shape):
                continue
            out[n + tuple(np.add(delta, halo))] = left[(slice(None),) + n] @ right[(slice(None),) + tuple(m)]
    d = len(shape)  # interleave (n_1, delta_1, ...), as the assembly stores it
    return out.transpose([x for b in range(d) for x in (b, d + b)]).reshape(tuple(s * (2 * halo + 1) for s in shape))


@pytest.mark.parametrize("periodic", [True, False])
@pytest.mark.parametrize("K", [3, 11])  # snapshot axis first (few) and last (many, with the mirror)
@pytest.mark.parametrize("shape", [(6, 5), (5, 4, 6), (2, 3, 2, 4), (3, 4, 1)])
def test_banded_moments_equal_brute_force(rng, periodic, K, shape):
    p, h = rng.random((K,) + shape), rng.random((K,) + shape)
    second = _brute_banded(p, p, periodic, 2)
    np.testing.assert_allclose(_moments._second_moment(p, periodic), second, rtol=1e-13)
    expected = _brute_banded(h, p, periodic, 1)
    np.testing.assert_allclose(_moments._first_moment(h, p, periodic), expected, rtol=1e-13)
    padded = _moments._padded(p, periodic, 2)  # shared with the second moment, two h in one pass
    both = _moments._first_moments([h, p], p, periodic, padded)
    np.testing.assert_allclose(both[0], expected, rtol=1e-13)
    np.testing.assert_allclose(both[1], _brute_banded(p, p, periodic, 1), rtol=1e-13)
    np.testing.assert_allclose(_moments._second_moment(p, periodic, padded), second, rtol=1e-13)


def test_time_modes_reproduce_the_snapshots_and_drop_only_null_modes(rng):
    base = rng.random((3, 7, 6))
    low = np.einsum("km,m...->k...", rng.random((12, 3)), base)  # rank 3 in time
    W, q = _moments.time_modes(low)
    assert W.shape == (12, 3) and q.shape == (3, 7, 6)
    np.testing.assert_allclose(W.T @ W, np.eye(3), atol=1e-14)
    P, Q = low.reshape(12, -1), q.reshape(3, -1)
    np.testing.assert_allclose(W @ Q, P, rtol=0, atol=1e-14 * np.abs(P).max())  # Pbar = W Q
    full = rng.random((5, 7, 6))
    W, q = _moments.time_modes(full)
    assert W is None and q is full  # nothing to drop: the snapshots themselves


@pytest.mark.parametrize("boundary", ["periodic", "reflecting"])
@pytest.mark.parametrize("rank", [2, None])
def test_assembly_with_time_modes_equals_dense_reference(rng, boundary, rank):
    g = Grid([-1.0, -1.0], [1.0, 1.0], (6, 7), boundary=boundary)
    K = 12
    vals = rng.random((K,) + g.shape)
    if rank:  # a relaxation with few time modes: the second moment runs over them
        vals = np.einsum("km,m...->k...", rng.random((K, rank)), rng.random((rank,) + g.shape))
    s = DensitySnapshots(g, np.arange(K) * 0.1, vals)
    H = HermiteSpace.on_grid(g, (2, 3))
    fast = assembly.assemble_normal_equations(s, H)
    ref = reference_normal_equations(s, H)
    for name in ("xtx", "xtg", "xtc", "gg", "gc", "cc"):
        a, b = getattr(fast, name), getattr(ref, name)
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-12 * np.max(np.abs(b)), err_msg=name)


@pytest.mark.parametrize("estimate_beta", [False, True])
def test_refit_reuses_the_moments_and_equals_a_fresh_fit(rng, monkeypatch, estimate_beta):
    from fpirl.uncertainty._basis import coarse_refit

    g = Grid([-1.0, -1.0], [1.0, 1.0], 12, boundary="periodic")
    x, y = np.moveaxis(g.mesh(), -1, 0)
    t = 0.05 * np.arange(9)
    vals = np.exp(-2 * (np.cos(np.pi * x)[None] + 0.5 * np.sin(np.pi * y)[None]) * (1 - np.exp(-t))[:, None, None])
    s = DensitySnapshots(g, t, vals * (1 + 0.01 * rng.standard_normal(vals.shape)))
    params = {"estimate_beta": True} if estimate_beta else {"beta": 2.0}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fine = PotentialEstimator(hermite_elements=4, **params).fit(s)
        fresh = PotentialEstimator(hermite_elements=3, **params, beta_block=(
            fine.beta_coarsening_ if estimate_beta else None)).fit(s)
        calls, var_calls = [], []
        real = assembly.data_moments
        monkeypatch.setattr("fpirl.weakform.assembly.data_moments", lambda *a, **k: calls.append(1) or real(*a, **k))
        real_var = noise_bias.snapshot_noise_variance
        monkeypatch.setattr("fpirl.estimators.identify.snapshot_noise_variance",
                            lambda *a: var_calls.append(1) or real_var(*a))
        refit = coarse_refit(fine, s)
        assert var_calls == []  # the noise variance of the data is kept with the moments
        other = coarse_refit(fine, DensitySnapshots(g, t, s.values.copy()))  # other data object: recomputed
    assert refit._moments is fine._moments and calls == [1] and other._moments is not fine._moments
    np.testing.assert_allclose(refit.coef_, fresh.coef_, rtol=1e-12, atol=1e-12 * np.abs(fresh.coef_).max())
    assert refit.beta_ == pytest.approx(fresh.beta_, rel=1e-12)
    for name in ("xtx", "xtg", "xtc"):
        np.testing.assert_array_equal(getattr(refit.normal_equations_, name), getattr(fresh.normal_equations_, name))
    assert "_moments" not in pickle.loads(pickle.dumps(fine)).__dict__
    assert fine._moments.noise_variance is not False  # the noise correction (beta given or estimated) keeps it
