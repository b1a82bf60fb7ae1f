"""fpirl: Fokker-Planck inverse reinforcement learning.

The public API is what this module exports (``fpirl.__all__``); the submodules are
implementation detail and may be reorganised.
"""

from ._errors import FpirlInputError
from ._version import __version__
from .density import DensitySnapshots
from .forward import FiniteVolumeSolver, SpectralSolver, simulate_density, von_mises_bump
from .grid import Axis, Grid
from .hermite import HermiteSpace
from .estimators import TRACK_ESTIMATORS, IncrementsEstimator, TrackDensityEstimator
from .identify import PotentialEstimator
from .io import read_density, read_result, result_dataset, write_density, write_result
from .mdp import MDP, GaussianTransition, boltzmann_policy, inverse_bellman_reward, recover_mdp
from .metrics import free_energy, free_energy_mdp, kl_divergence, l2_error, policy_kl, relative_l2_error
from .simulate import histogram_density, mdp_density_map, sample_sde
from .binning import cloud_in_cell
from .tracks import TrackTable
from .tracks_io import read_tracks
from .adequacy import HelmholtzCheck
from .baselines import Baselines, fit_baselines
from .heldout import heldout_loglik

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
