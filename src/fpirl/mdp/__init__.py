"""The Markov decision process recovered from a potential: Boltzmann policy (eq. policy),
Gaussian transition (eq. transition), reward by the inverse Bellman equation (eq. reward),
and soft Q-iteration.

The public names of the former module ``fpirl.mdp`` are re-exported here.
"""

from .recovery import (DEFAULT_GAMMA, MDP, GaussianTransition, boltzmann_policy, inverse_bellman_reward,
                       recover_mdp, state_marginal, state_shape)

__all__ = ['DEFAULT_GAMMA', 'GaussianTransition', 'MDP', 'boltzmann_policy', 'inverse_bellman_reward',
           'recover_mdp', 'state_marginal', 'state_shape']
