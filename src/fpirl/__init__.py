"""fpirl: Fokker-Planck inverse reinforcement learning.

The public API is what this module exports (``fpirl.__all__``); the submodules are
implementation detail and may be reorganised.

Names are imported on first use (module ``__getattr__``), so ``import fpirl`` and the command
line start without loading numpy, scipy, xarray or matplotlib.
"""

from __future__ import annotations

import importlib

from ._errors import FpirlInputError
from ._version import __version__

#: public name -> submodule that defines it (imported on first access)
_LAZY = {
    "Axis": ".grid",
    "Baselines": ".baselines",
    "DensitySnapshots": ".density",
    "FiniteVolumeSolver": ".forward",
    "GaussianTransition": ".mdp",
    "Grid": ".grid",
    "HelmholtzCheck": ".adequacy",
    "HermiteSpace": ".hermite",
    "IncrementsEstimator": ".estimators",
    "MDP": ".mdp",
    "PotentialEstimator": ".identify",
    "SpectralSolver": ".forward",
    "TRACK_ESTIMATORS": ".estimators",
    "TrackDensityEstimator": ".estimators",
    "TrackTable": ".tracks",
    "boltzmann_policy": ".mdp",
    "cloud_in_cell": ".binning",
    "fit_baselines": ".baselines",
    "free_energy": ".metrics",
    "free_energy_mdp": ".metrics",
    "heldout_loglik": ".heldout",
    "histogram_density": ".simulate",
    "inverse_bellman_reward": ".mdp",
    "kl_divergence": ".metrics",
    "l2_error": ".metrics",
    "mdp_density_map": ".simulate",
    "policy_kl": ".metrics",
    "read_density": ".io",
    "read_result": ".io",
    "read_tracks": ".tracks_io",
    "recover_mdp": ".mdp",
    "relative_l2_error": ".metrics",
    "result_dataset": ".io",
    "sample_sde": ".simulate",
    "simulate_density": ".forward",
    "von_mises_bump": ".forward",
    "write_density": ".io",
    "write_result": ".io",
}

__all__ = [
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

