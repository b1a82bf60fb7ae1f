"""Reinforcement learning with the recovered reward: re-solve it under the same or changed
dynamics, evaluate policies, and act in gymnasium environments.

* :mod:`~fpirl.rl.dynamics`: the transition of a result, optionally changed (noise scale, drift
  scale, action push, extra drift);
* :mod:`~fpirl.rl.solver`: soft policy iteration and soft value iteration, policy evaluation;
* :mod:`~fpirl.rl.reward`: the recovered reward as a callable of ``(s, a)``;
* :mod:`~fpirl.rl.gym`: a recovered policy, a reward wrapper and rollouts for gymnasium (the
  ``gym`` extra);
* :mod:`~fpirl.rl.soft_q`: generic soft value iteration with a user-supplied expectation.
"""

from .dynamics import DynamicsChange, changed_transition, transition_from_result
from .reward import RecoveredReward, reward_function
from .solved import solve_result
from .solver import PolicyEvaluation, SoftSolution, evaluate_policy, soft_optimal_policy, solve_soft
from .soft_q import SoftQSolution, soft_policy, soft_state_value, soft_value_iteration

__all__ = ["DynamicsChange", "PolicyEvaluation", "RecoveredReward", "SoftQSolution", "SoftSolution",
           "changed_transition", "evaluate_policy", "reward_function", "soft_optimal_policy", "soft_policy",
           "soft_state_value", "soft_value_iteration", "solve_result", "solve_soft", "transition_from_result"]
