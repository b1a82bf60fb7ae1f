"""fpirl: Fokker-Planck inverse reinforcement learning."""

from ._errors import FpirlInputError
from .density import DensitySnapshots
from .grid import Axis, Grid
from .hermite import HermiteSpace
from .identify import PotentialEstimator

from ._version import __version__

__all__ = ["Axis", "DensitySnapshots", "FpirlInputError", "Grid", "HermiteSpace", "PotentialEstimator", "__version__"]
