"""imitation's MCE IRL on a tabular MDP with a known transition matrix (imitation's venv, torch CPU).

Inputs: ``T`` (S, A, S) transition probabilities (the TRUE ones), ``rho0`` (S,), the expert's state
occupancy measure ``demo_om`` (S,; undiscounted sum over t = 0..H, as MCE IRL matches it), the
horizon H. Reward: state-only, linear in one-hot observations (``BasicRewardNet`` without hidden
layers, ``use_action=False``) = one reward per state. Returns the learned reward, the finite-horizon
MCE policy pi[t, s, a] and the state distributions D[t, s] it produces under T.
"""

import time
import warnings

import numpy as np
import peerio

params, arrays = peerio.load()
warnings.filterwarnings("ignore")
import torch as th
from imitation.algorithms import mce_irl
from imitation.rewards import reward_nets
from imitation.util import logger as imit_logger
from seals.base_envs import TabularModelPOMDP

th.manual_seed(int(params["seed"]))
th.set_num_threads(int(params.get("threads", 2)))
T = arrays["T"]
S, A, _ = T.shape
H = int(params["horizon"])
env = TabularModelPOMDP(transition_matrix=T, observation_matrix=np.eye(S, dtype=np.float32),
                        reward_matrix=np.zeros(S), horizon=H, initial_state_dist=arrays["rho0"])
t0 = time.perf_counter()
net = reward_nets.BasicRewardNet(env.observation_space, env.action_space, hid_sizes=[], use_action=False,
                                 use_next_state=False, use_done=False)
log = imit_logger.configure(format_strs=[])
mce = mce_irl.MCEIRL(arrays["demo_om"], env, net, rng=np.random.default_rng(int(params["seed"])),
                     optimizer_kwargs={"lr": float(params["lr"])}, log_interval=None, custom_logger=log)
iters = [0]
step = mce._train_step


def counted(*a, **k):
    iters[0] += 1
    return step(*a, **k)


mce._train_step = counted
mce.train(max_iter=int(params["max_iter"]))
wall = time.perf_counter() - t0
with th.no_grad():
    obs = th.as_tensor(env.observation_matrix, dtype=net.dtype)
    reward = net(obs, None, None, None).numpy().astype(float)
_, _, pi = mce_irl.mce_partition_fh(env, reward=reward)
D, _ = mce_irl.mce_occupancy_measures(env, reward=reward, pi=pi)
linf = float(np.max(np.abs(D.sum(0) - arrays["demo_om"])))
peerio.save({"wall_s": wall, "version": peerio.version("imitation"), "torch": peerio.version("torch"),
             "linf_occupancy": linf, "iterations": iters[0]}, reward=reward, pi=pi, D=D)
