"""Independent forward solvers for the joint-space Fokker-Planck equation.

Both solvers integrate the paper's eq. ``fokker_planck_eq``

.. math::

    \\partial_t p = \\nabla\\cdot\\left(p\\,\\nabla\\psi\\right) + \\beta^{-1}\\nabla^2 p

on a hyper-rectangle ``[lower, upper]`` in the joint space ``x = (s, a)`` of any dimension
(tested for ``d = 1..4``). They are used to make synthetic data for testing the inference, so
they deliberately share nothing with the inference's discretisation (linear finite elements,
cubic Hermite potential, weak form):

* :class:`SpectralSolver` (periodic box): Fourier pseudo-spectral collocation in space,
  integrating-factor RK4 in time with the diffusion integrated exactly;
* :class:`FiniteVolumeSolver` (reflecting, no-flux walls): vertex-centred finite volumes with
  Scharfetter-Gummel (exponentially fitted) fluxes, advanced exactly in time with the matrix
  exponential (:func:`scipy.sparse.linalg.expm_multiply`).

:func:`simulate_density` wraps both: it solves on the solver's own fine grid and brings the
snapshots onto the nodes of an fpirl :class:`~fpirl.core.grid.Grid` through the solver's own
high-order interpolant (trigonometric, resp. tensor-product cubic spline), evaluated with
per-axis matrices contracted one axis at a time (sum factorisation).
"""

from .pde import TAIL_WARNING, default_resolution, simulate_density, von_mises_bump
from .finite_volume import FiniteVolumeSolver
from .spectral import SpectralSolver

__all__ = [
    "TAIL_WARNING",
    "FiniteVolumeSolver",
    "SpectralSolver",
    "default_resolution",
    "simulate_density",
    "von_mises_bump",
]
