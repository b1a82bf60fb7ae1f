"""The Markov decision process recovered from a potential: Boltzmann policy (eq. policy),
Gaussian transition (eq. transition), reward by the inverse Bellman equation (eq. reward; soft or
expected convention). Soft Q-iteration and re-solving the reward live in :mod:`fpirl.rl`.

The public names of the former module ``fpirl.mdp`` are re-exported here.
"""

from .recovery import (DEFAULT_GAMMA, MDP, REWARD_CONVENTIONS, GaussianTransition, boltzmann_policy,
                       inverse_bellman_reward, recover_mdp, soft_inverse_bellman_reward, soft_state_value,
                       state_marginal, state_shape)

__all__ = ['DEFAULT_GAMMA', 'GaussianTransition', 'MDP', 'REWARD_CONVENTIONS', 'boltzmann_policy',
           'inverse_bellman_reward', 'recover_mdp', 'soft_inverse_bellman_reward', 'soft_state_value',
           'state_marginal', 'state_shape']
