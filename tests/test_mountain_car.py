"""Modified Mountain Car (paper section 5.2): soft Q-iteration, gymnasium validation, Hermite fit."""

import numpy as np
import pytest

from fpirl.problems.mountain_car import (
    MC_HERMITE_ELEMENTS,
    MC_QUICK_SOFTQ,
    MC_ROLES,
    SoftQSettings,
    fit_q_hermite,
    load_or_solve_mountain_car,
    mountain_car_spec,
    mountain_car_step,
    normalise,
    rollout_gymnasium,
    split_action_part,
)


@pytest.fixture(scope="module")
def mc_cache(tmp_path_factory):
    """One cache for the module: the soft Q of --quick is solved once, for the tests and the pipeline."""
    return tmp_path_factory.mktemp("mc-cache")


@pytest.fixture(scope="module")
def soft_q(mc_cache):
    # the coarse grid of --quick: about a second
    return load_or_solve_mountain_car(MC_QUICK_SOFTQ, mc_cache)


def test_step_matches_gymnasium(rng):
    gym = pytest.importorskip("gymnasium")
    env = gym.make("MountainCarContinuous-v0").unwrapped
    env.reset(seed=0)
    x = np.concatenate([rng.uniform(-1.2, 0.6, 200), [-1.2, -1.19, 0.44]])
    v = np.concatenate([rng.uniform(-0.07, 0.07, 200), [-0.01, -0.07, 0.07]])
    a = np.concatenate([rng.uniform(-1.3, 1.3, 200), [0.0, -1.0, 1.0]])
    x1, v1, term, rew = mountain_car_step(x, v, a)
    for i in range(x.size):
        env.state = np.array([x[i], v[i]])
        obs, r, terminated, _, _ = env.step(np.array([a[i]]))
        # gymnasium stores the state in float32 after the step
        assert obs[0] == pytest.approx(x1[i], abs=1e-6) and obs[1] == pytest.approx(v1[i], abs=1e-6)
        assert terminated == term[i]
        assert r == pytest.approx(rew[i], abs=1e-9)
    env.close()


def test_soft_q_satisfies_bellman_at_nodes(soft_q):
    mq = soft_q
    assert mq.error_bound <= mq.settings.tol
    # Q(s, a) = r + gamma (1 - done) V(s') with V bilinear at the next state, checked at random nodes
    rng = np.random.default_rng(1)
    i, j, k = (rng.integers(0, n, 50) for n in mq.q.shape)
    x, v, a = mq.position[i], mq.velocity[j], mq.action[k]
    x1, v1, term, r = mountain_car_step(x, v, a)
    from fpirl.problems.mountain_car_rl import _bilinear

    idx, w = _bilinear(mq.position, mq.velocity, x1, v1)
    v_next = np.sum(w * mq.v.ravel()[idx], axis=1)
    np.testing.assert_allclose(mq.q[i, j, k], r + mq.settings.gamma * (~term) * v_next, atol=1e-5)
    # the value is highest near the goal with positive speed
    assert mq.v[-1, -1] > mq.v[mq.position.size // 3, mq.velocity.size // 2]


def test_policy_reaches_goal_in_gymnasium(soft_q):
    pytest.importorskip("gymnasium")
    out = rollout_gymnasium(soft_q, episodes=100, seed=0)
    assert out["goals"] >= 90, out
    assert np.median(out["steps"]) < 300


def test_hermite_fit_is_least_squares_and_reports_error(soft_q):
    fit = fit_q_hermite(soft_q, (4, 4, 2))
    coords = [np.linspace(-1, 1, n) for n in soft_q.q.shape]
    B = [ax.matrix(c) for ax, c in zip(fit.hermite.axes, coords)]
    resid = fit.hermite.evaluate_grid(fit.coef, coords) - soft_q.q
    # normal equations of the Kronecker least-squares problem: B^T r = 0 along every axis jointly
    g, gq = resid, soft_q.q
    for M in B:
        g = np.tensordot(g, M, axes=([0], [0]))
        gq = np.tensordot(gq, M, axes=([0], [0]))
    assert np.abs(g).max() < 1e-10 * np.abs(gq).max()
    assert 0 < fit.relative_error < 0.5
    np.testing.assert_allclose(fit.rms_error, np.sqrt(np.mean(resid**2)))
    finer = fit_q_hermite(soft_q, (8, 8, 2))
    assert finer.relative_error < fit.relative_error


def test_normalise_maps_box_to_unit_cube():
    pts = np.array([[-1.2, -0.07, -1.0], [0.6, 0.07, 1.0], [-0.3, 0.0, 0.0]])
    np.testing.assert_allclose(normalise(pts), [[-1, -1, -1], [1, 1, 1], [0, 0, 0]], atol=1e-12)


def test_split_action_part_is_exact(soft_q):
    fit = fit_q_hermite(soft_q, MC_HERMITE_ELEMENTS)
    q_state, q_action = split_action_part(fit)
    np.testing.assert_allclose(q_state + q_action, fit.coef, atol=1e-12)
    coords = [np.linspace(-1, 1, 9), np.linspace(-1, 1, 7), np.linspace(-1, 1, 201)[:-1]]
    qs = fit.hermite.evaluate_grid(q_state, coords)
    qa = fit.hermite.evaluate_grid(q_action, coords)
    np.testing.assert_allclose(qs, qs[:, :, :1] * np.ones_like(qs), atol=1e-10)  # constant in the force
    # zero force mean at every state: the trapezoid rule is spectrally accurate for periodic cubics
    assert np.abs(qa.mean(axis=2)).max() < 1e-6 * np.abs(qa).max()


def test_spec_scaling_and_sign(soft_q):
    fit = fit_q_hermite(soft_q, MC_HERMITE_ELEMENTS)
    spec = mountain_car_spec(fit, beta=5.0, dt=0.02, psi_range=2.0, action_contrast=3.0, steps=4)
    coords = [np.linspace(-1, 1, 41)] * 3
    psi = spec.hermite.evaluate_grid(spec.coef, coords)
    q_state, q_action = (fit.hermite.evaluate_grid(c, coords) for c in split_action_part(fit))
    # state part: range 2 and sign flipped; action part: 90th percentile of beta x range over the force = 3
    psi_state = psi.mean(axis=2)
    assert np.ptp(psi_state) == pytest.approx(2.0, rel=0.02)
    assert np.corrcoef(psi_state.ravel(), q_state[:, :, 0].ravel())[0, 1] == pytest.approx(-1.0, abs=1e-4)
    assert np.percentile(5.0 * np.ptp(psi, axis=2), 90) == pytest.approx(3.0, rel=1e-10)
    assert np.corrcoef((psi - psi_state[..., None]).ravel(), q_action.ravel())[0, 1] == pytest.approx(-1.0, abs=1e-3)
    assert abs(psi.mean()) < 0.05  # zero mean over the domain (the grid mean is close)
    assert spec.roles == MC_ROLES and spec.boundary == "periodic"


def test_cache_roundtrip(tmp_path):
    s = SoftQSettings(n_position=31, n_velocity=25, n_action=5, tol=1e-3)
    a = load_or_solve_mountain_car(s, tmp_path)
    b = load_or_solve_mountain_car(s, tmp_path)
    np.testing.assert_array_equal(a.q, b.q)
    assert len(list(tmp_path.glob("mountain_car_q_*.npz"))) == 1


def test_run_mountaincar_quick_pipeline(tmp_path, soft_q, mc_cache):
    from fpirl.problems.mountain_car_report import run_mountaincar

    s = run_mountaincar(tmp_path, elements=(8, 12), quick=True, progress=False, verbose=False, episodes=0,
                        cache_dir=mc_cache)
    assert s["mountain_car"]["soft_q"]["iterations"] == soft_q.iterations  # the soft Q came from the cache
    assert s["elements"] == [8, 12]
    per = s["per_N"]
    assert per[12]["fp"]["psi_error"] < per[8]["fp"]["psi_error"]
    assert per[12]["fp"]["kl_ratio"] < 0.1
    mc = s["mountain_car"]
    assert 0 < mc["fit"]["relative_error"] < 0.5
    assert mc["policy_contrast"]["p90"] == pytest.approx(3.0, rel=1e-10)  # a peaked ground-truth policy
    assert per[12]["fp"]["policy_kl_mean"] < per[8]["fp"]["policy_kl_mean"]
    text = (tmp_path / "report.md").read_text()
    assert "Mountain Car: the RL step and the modified problem" in text and "soft Q-iteration" in text
    assert "Quick run" in text and "policy KL mean" in text
    for f in ("result_N8.nc", "result_N12.nc", "fig_soft_q.png", "summary.json", "report.md"):
        assert (tmp_path / f).exists()
    # the result records how its normalised box maps onto gymnasium's units; the report has the T1/T2 tables
    from fpirl.io import read_result

    ds = read_result(tmp_path / "result_N12.nc")
    np.testing.assert_allclose(ds.attrs["physical_lower"], [-1.2, -0.07, -1.0])
    np.testing.assert_allclose(ds.attrs["physical_upper"], [0.6, 0.07, 1.0])
    assert ds.attrs["reward_convention"] == "soft"
    assert "Transfer of the recovered reward" in text and (tmp_path / "fig_transfer.png").stat().st_size > 1000
    t1 = s["transfer"]["rows"][0]
    assert t1["kl_resolved"] == pytest.approx(t1["kl_behaviour_cloning"], rel=1e-6)  # same dynamics: the same policy
