"""fpirl: Fokker-Planck inverse reinforcement learning."""

from ._errors import FpirlInputError
from .density import DensitySnapshots
from .grid import Axis, Grid

__version__ = "0.1.0"

__all__ = ["Axis", "DensitySnapshots", "FpirlInputError", "Grid", "__version__"]
