"""fpirl solve / fpirl rollout, the reward callable and the gymnasium interface (small grids)."""

import warnings

import numpy as np
import pytest

from _simdensity import write_fp_density
from fpirl import Grid, HermiteSpace
from fpirl.evaluation.metrics import policy_kl
from fpirl.io import read_density, read_result, result_dataset, write_result
from fpirl.mdp import boltzmann_policy, recover_mdp
from fpirl.mdp._fitted import FittedPotentialMixin

BETA, DT, GAMMA = 3.0, 0.05, 0.9
PHYS_LO, PHYS_HI = np.array([-1.2, -0.07, -1.0]), np.array([0.6, 0.07, 1.0])


class _Fitted(FittedPotentialMixin):
    def __init__(self, grid, elements, seed):
        self.grid_ = grid
        self.hermite_ = HermiteSpace.on_grid(grid, elements)
        self.coef_ = np.random.default_rng(seed).normal(0.0, 0.4, self.hermite_.shape)
        self.beta_, self.penalty_, self.residual_, self.settings_ = BETA, 0.0, 0.0, {}


def _result(path, n_state, n_action, boundary="periodic", reward="soft", seed=0, attrs=None):
    d = n_state + n_action
    grid = Grid([-1] * d, [1] * d, 6 if d == 4 else [8, 8, 6][:d] if d == 3 else [10, 8],
                roles=["state"] * n_state + ["action"] * n_action, boundary=boundary)
    est = _Fitted(grid, 2, seed)
    mdp = recover_mdp(grid, est.potential_on_grid(), est.gradient_on_grid(axes=grid.state_axes), BETA, DT, GAMMA,
                      reward=reward)
    ds = result_dataset(est, mdp, extra=attrs or {}, dt=DT)
    write_result(path, ds)
    return path


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    d = tmp_path_factory.mktemp("rl")
    return {
        "2s2a": _result(d / "r22.nc", 2, 2),
        "2s1a": _result(d / "r21.nc", 2, 1, attrs={"physical_lower": PHYS_LO, "physical_upper": PHYS_HI}),
        "2s1a_other": _result(d / "r21b.nc", 2, 1, boundary="reflecting", seed=1),
    }


def test_solve_same_dynamics_gives_back_the_policy(results, tmp_path, cli):
    out = tmp_path / "solved.nc"
    proc = cli("solve", results["2s2a"], "-o", out)
    assert proc.returncode == 0, proc.stderr
    ds, src = read_result(out), read_result(results["2s2a"])
    assert src.attrs["reward_convention"] == "soft"
    grid = Grid([-1] * 4, [1] * 4, 6, roles=["state", "state", "action", "action"])
    assert policy_kl(src["policy"].values, ds["policy"].values, grid).max() <= 1e-10
    w = np.multiply.outer(grid.axes[2].node_weights, grid.axes[3].node_weights)
    v = np.log(np.sum(w * np.exp(-BETA * src["potential"].values), axis=(2, 3))) / BETA  # soft value of Q = -psi
    np.testing.assert_allclose(ds["value"].values, v, atol=1e-8)
    assert ds.attrs["solve_noise_scale"] == 1.0 and ds.attrs["solve_action_drift"] == 0.0
    pushed = tmp_path / "pushed.nc"
    proc = cli("solve", results["2s2a"], "--action-drift", "5", "--noise-scale", "1.5", "--drift-scale", "0.5",
               "-o", pushed)
    assert proc.returncode == 0, proc.stderr
    dp = read_result(pushed)
    assert dp.attrs["solve_action_drift"] == 5.0 and dp.attrs["solve_noise_scale"] == 1.5
    assert dp.attrs["solve_drift_scale"] == 0.5
    assert policy_kl(src["policy"].values, dp["policy"].values, grid).mean() > 1e-4
    np.testing.assert_array_equal(dp["reward"].values, src["reward"].values)
    same = tmp_path / "same.nc"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same discount, beta and dt: no warning
        assert cli("solve", results["2s2a"], "--reward-from", results["2s2a"], "-o", same).returncode == 0
    np.testing.assert_allclose(read_result(same)["policy"].values, ds["policy"].values, atol=1e-12)
    # simulate runs a fit's psi, which a re-solve leaves as it was: a solved file is refused (it simulated the fit)
    cli.assert_input_error(cli("simulate", pushed, "--steps", "2", "-o", tmp_path / "sim.nc"), "written by fpirl solve")
    assert not (tmp_path / "sim.nc").exists()
    # a reward recovered with another discount: solved with this result's, and said so
    other = read_result(results["2s2a"])
    other.attrs["gamma"] = 0.5
    write_result(tmp_path / "g05.nc", other)
    with pytest.warns(UserWarning, match=f"recovered with gamma=0.5 and is solved with this result's gamma={GAMMA:g}"):
        assert cli("solve", results["2s2a"], "--reward-from", tmp_path / "g05.nc", "-o", tmp_path / "gx.nc").returncode == 0


def test_solve_bad_input_one_line_nothing_written(results, tmp_path, cli):
    out = tmp_path / "s.nc"
    cli.assert_input_error(cli("solve", results["2s1a"], "--action-drift", "2", "-o", out), "action axes")
    for opt, val in (("--noise-scale", "nan"), ("--noise-scale", "0"), ("--drift-scale", "-1"),
                     ("--drift-scale", "inf"), ("--action-drift", "nan")):
        cli.assert_input_error(cli("solve", results["2s1a"], opt, val, "-o", out), opt)
    nopol = tmp_path / "nopol.nc"
    write_result(nopol, read_result(results["2s1a"]).drop_vars("policy"))
    cli.assert_input_error(cli("solve", nopol, "-o", out), "no policy")
    cli.assert_input_error(cli("solve", results["2s1a"], "--reward-from", results["2s1a_other"], "-o", out),
                           "another grid")
    cli.assert_only(tmp_path, "nopol.nc")


@pytest.mark.parametrize("boundary,reward", [("periodic", "soft"), ("reflecting", "expected")])
def test_reward_function_equals_the_nodal_reward(tmp_path, boundary, reward):
    from fpirl.rl import reward_function

    path = _result(tmp_path / "r.nc", 2, 1, boundary=boundary, reward=reward, seed=3)
    ds = read_result(path)
    rf = reward_function(ds)
    grid = rf.grid
    pts = np.stack(np.meshgrid(*grid.coords, indexing="ij"), axis=-1)
    np.testing.assert_allclose(rf(pts), ds["reward"].values, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(rf(pts[..., :2], pts[..., 2:]), ds["reward"].values, rtol=1e-10, atol=1e-10)
    # between the nodes it is continuous: half-way values lie near the mean of the neighbours
    mid = 0.5 * (pts[2, 3, 1] + pts[3, 3, 1])
    assert abs(rf(mid) - 0.5 * (ds["reward"].values[2, 3, 1] + ds["reward"].values[3, 3, 1])) < 0.1


def test_recovered_policy_units_and_probabilities(results):
    from fpirl.rl.gym import RecoveredPolicy

    ds = read_result(results["2s1a"])
    pol = RecoveredPolicy(ds, "recovered", seed=0)
    grid = pol.grid
    i, j = 3, 5
    s_grid = np.array([grid.coords[0][i], grid.coords[1][j]])
    obs = PHYS_LO[:2] + (s_grid + 1) / 2 * (PHYS_HI[:2] - PHYS_LO[:2])  # into physical units
    pi = boltzmann_policy(grid, ds["potential"].values, BETA)[i, j] * grid.axes[2].node_weights
    np.testing.assert_allclose(pol.probabilities(obs)[0], pi, rtol=1e-10)
    acts = np.array([pol.predict(obs) for _ in range(200)])
    assert acts.min() >= -1.0 and acts.max() <= 1.0 and acts.shape == (200, 1)
    best = grid.coords[2][np.argmax(pi)]
    np.testing.assert_allclose(pol.predict(obs, deterministic=True), [best], atol=1e-12)
    res = RecoveredPolicy(ds, "resolved")
    np.testing.assert_allclose(res.probabilities(obs), pol.probabilities(obs), atol=1e-9)


def test_reward_wrapper_and_rollout(results, cli):
    gym = pytest.importorskip("gymnasium")
    from fpirl.rl import reward_function
    from fpirl.rl.gym import RecoveredPolicy, reward_wrapper, rollout

    ds = read_result(results["2s1a"])
    rf = reward_function(ds)
    env = reward_wrapper(gym.make("MountainCarContinuous-v0", max_episode_steps=5), ds)
    obs, _ = env.reset(seed=1)
    for a in (0.5, -1.0, 1.0):
        s = -1 + 2 * (np.asarray(obs) - PHYS_LO[:2]) / (PHYS_HI[:2] - PHYS_LO[:2])
        expect = rf(s, [a])
        obs, r, *_ = env.step(np.array([a], dtype=np.float32))
        assert r == pytest.approx(float(expect), rel=1e-12)
    env.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # mapped units: no warning on the box's edges
        out = rollout("MountainCarContinuous-v0", RecoveredPolicy(ds), episodes=2, seed=0, max_steps=30)
    assert out["episodes"] == 2 and list(out["steps"]) == [30, 30] and out["goals"] == 0
    # without the physical_* attrs, observations are read in the box's own units: an env observing -1.5 on a
    # [-1, 1] box is wrapped onto it (Mountain Car's positions below -1 were, silently: 0 of 5 goals), and said so

    class Far(gym.Env):
        observation_space = gym.spaces.Box(-5.0, 5.0, (2,), np.float32)
        action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            self.k = 0
            return np.array([-1.5, 0.0], np.float32), {}

        def step(self, action):
            self.k += 1
            return np.array([-1.5, 0.0], np.float32), 0.0, False, self.k >= 3, {}

    bare = ds.copy()
    for k in ("physical_lower", "physical_upper"):
        bare.attrs.pop(k)
    with pytest.warns(UserWarning, match="6 of 6 observations lay outside the result's box .* are the units the same"):
        rollout(Far(), RecoveredPolicy(bare), episodes=2, seed=0)
    proc = cli("rollout", results["2s1a"], "--env", "MountainCarContinuous-v0", "--episodes", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    import json

    summary = json.loads(proc.stdout)
    assert summary["episodes"] == 1 and len(summary["steps"]) == 1
    cli.assert_input_error(cli("rollout", results["2s1a"], "--env", "NoSuchEnv-v9", "--episodes", "1"), "NoSuchEnv")
    # spaces that do not match the result's axes: one line naming the space, not an assertion deep in the env
    cli.assert_input_error(cli("rollout", results["2s1a"], "--env", "MountainCar-v0", "--episodes", "1"),
                           "MountainCar-v0: its action space is Discrete(3)")
    cli.assert_input_error(cli("rollout", results["2s2a"], "--env", "MountainCarContinuous-v0", "--episodes", "1"),
                           "the result has 2 continuous action axes")
    with pytest.raises(Exception, match="observation space"):
        reward_wrapper(gym.make("Pendulum-v1"), ds)


def test_fit_reward_convention_option(tmp_path, cli):
    data = write_fp_density(tmp_path / "d.nc", 10, 8)
    grid = read_density(data).grid
    out = tmp_path / "expected.nc"
    proc = cli("fit", data, "-o", out, "--hermite-elements", "3", "--beta", "4", "--uncertainty", "none",
               "--no-progress", "--reward", "expected")
    assert proc.returncode == 0, proc.stderr
    exp = read_result(out)
    assert exp.attrs["reward_convention"] == "expected"
    from fpirl.cli import build_parser
    from fpirl.rl import transition_from_result

    assert build_parser().parse_args(["fit", str(data), "-o", "r.nc", "--beta", "1"]).reward == "soft"
    pi, q, gamma, beta = exp["policy"].values, exp["q_value"].values, exp.attrs["gamma"], 4.0
    tr = transition_from_result(exp)
    w = grid.axes[1].node_weights
    v_soft = np.log(np.sum(w * np.exp(beta * q), axis=1)) / beta
    np.testing.assert_allclose(exp["reward"].values, q - gamma * tr.expect(np.sum(w * pi * q, axis=1)), atol=1e-10)
    ent = -np.sum(w * pi * np.log(pi), axis=1)
    np.testing.assert_allclose(v_soft - np.sum(w * pi * q, axis=1), ent / beta, atol=1e-10)  # V_soft = E_pi Q + H / beta
