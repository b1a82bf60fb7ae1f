"""fpirl: Fokker-Planck inverse reinforcement learning.

The public API is what this module exports (``fpirl.__all__``); the submodules are
implementation detail and may be reorganised.

Names are imported on first use (module ``__getattr__``), so ``import fpirl`` and the command
line start without loading numpy, scipy, xarray or matplotlib.
"""

from __future__ import annotations

import importlib

from ._compat import install as _install_compat
from .core._errors import FpirlInputError, NotFittedError
from ._version import __version__

_install_compat()  # the old flat import paths (fpirl.core.hermite, fpirl.estimators.identify, ...) keep working

#: public name -> submodule that defines it (imported on first access)
_LAZY = {
    "DynamicsChange": ".rl",
    "changed_transition": ".rl",
    "transition_from_result": ".rl",
    "solve_soft": ".rl",
    "evaluate_policy": ".rl",
    "reward_function": ".rl",
    "solve_result": ".rl",
    "RecoveredPolicy": ".rl.gym",
    "rollout": ".rl.gym",
    "reward_wrapper": ".rl.gym",
    "Axis": ".core.grid",
    "Baselines": ".evaluation.baselines",
    "DensitySnapshots": ".core.density",
    "FiniteVolumeSolver": ".forward",
    "GaussianTransition": ".mdp",
    "Grid": ".core.grid",
    "HelmholtzCheck": ".evaluation.adequacy",
    "HermiteSpace": ".core.hermite",
    "IncrementsEstimator": ".estimators",
    "MDP": ".mdp",
    "PotentialEstimator": ".estimators.identify",
    "SpectralSolver": ".forward",
    "TRACK_ESTIMATORS": ".estimators",
    "TrackDensityEstimator": ".estimators",
    "TrackTable": ".tracks",
    "boltzmann_policy": ".mdp",
    "cloud_in_cell": ".tracks.binning",
    "fit_baselines": ".evaluation.baselines",
    "free_energy": ".evaluation.metrics",
    "free_energy_mdp": ".evaluation.metrics",
    "heldout_loglik": ".evaluation.heldout",
    "histogram_density": ".forward.markov",
    "inverse_bellman_reward": ".mdp",
    "kl_divergence": ".evaluation.metrics",
    "l2_error": ".evaluation.metrics",
    "mdp_density_map": ".forward.markov",
    "policy_kl": ".evaluation.metrics",
    "read_density": ".io",
    "read_result": ".io",
    "read_tracks": ".tracks.reading",
    "recover_mdp": ".mdp",
    "relative_l2_error": ".evaluation.metrics",
    "result_dataset": ".io",
    "sample_sde": ".forward.markov",
    "simulate_density": ".forward",
    "von_mises_bump": ".forward",
    "write_density": ".io",
    "write_result": ".io",
}

__all__ = [
    "DynamicsChange",
    "changed_transition",
    "transition_from_result",
    "solve_soft",
    "evaluate_policy",
    "reward_function",
    "solve_result",
    "RecoveredPolicy",
    "rollout",
    "reward_wrapper",
    "Axis",
    "Baselines",
    "DensitySnapshots",
    "FiniteVolumeSolver",
    "FpirlInputError",
    "GaussianTransition",
    "Grid",
    "HelmholtzCheck",
    "HermiteSpace",
    "IncrementsEstimator",
    "MDP",
    "NotFittedError",
    "PotentialEstimator",
    "SpectralSolver",
    "TRACK_ESTIMATORS",
    "TrackDensityEstimator",
    "TrackTable",
    "__version__",
    "boltzmann_policy",
    "cloud_in_cell",
    "fit_baselines",
    "free_energy",
    "free_energy_mdp",
    "heldout_loglik",
    "histogram_density",
    "inverse_bellman_reward",
    "kl_divergence",
    "l2_error",
    "mdp_density_map",
    "policy_kl",
    "read_density",
    "read_result",
    "read_tracks",
    "recover_mdp",
    "relative_l2_error",
    "result_dataset",
    "sample_sde",
    "simulate_density",
    "von_mises_bump",
    "write_density",
    "write_result",
]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fpirl' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))

