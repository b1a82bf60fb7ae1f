"""The Fokker-Planck PDE onto an fpirl grid (the Markov map of the MDP is :mod:`fpirl.forward.markov`):
smooth periodic initial densities, default resolutions of the two solvers and
:func:`simulate_density` (solve on the solver's grid, interpolate onto an fpirl grid)."""

from __future__ import annotations

import math
import warnings
from typing import Callable

import numpy as np
import scipy.fft as sfft

from ..core._errors import FpirlInputError
from ..core.grid import Grid
from ..core._splines import spline_matrix
from ..core._tensor import apply_along_axes
from ._common import _bounds, _check_times, _ForwardSolver
from .finite_volume import FiniteVolumeSolver
from .spectral import SpectralSolver

#: Relative amplitude of the upper third of the Fourier spectrum above which
#: :func:`simulate_density` warns that the spectral solution is under-resolved. Measured on the
#: 4-D benchmark (beta = 5, max|grad psi| ~ 2-3): tail ratios 3.9e-3, 5.1e-4, 5.5e-5 at 20^4, 24^4,
#: 32^4 points went with max errors of 9e-5, 6e-6, <1e-6 relative to max p, i.e. the ratio is a
#: conservative (10-100x) proxy of the error.
TAIL_WARNING = 1e-3

# Default solver resolution (see :func:`default_resolution`): ``(minimum, multiple of elements)``.
_SPECTRAL_DEFAULT = {1: (128, 4), 2: (64, 4), 3: (40, 2), 4: (24, 1)}
_FV_DEFAULT = {1: (512, 8), 2: (128, 4), 3: (40, 2), 4: (16, 1)}


def von_mises_bump(lower, upper, centre, kappa) -> Callable[[np.ndarray], np.ndarray]:
    """Smooth periodic bump ``prod_i exp(kappa_i (cos(2 pi (x_i - c_i) / L_i) - 1))``.

    Use it as an initial density on periodic boxes: unlike a Gaussian cut at the seam it is
    smooth across the periodic boundary, so spectral solvers do not ring (docs/method.md, "Benchmark data").

    Parameters
    ----------
    lower, upper, centre : array_like, shape (d,)
    kappa : float or array_like, shape (d,)
        Concentration per axis (>= 0); width about ``L / (2 pi sqrt(kappa))``.

    Returns
    -------
    callable
        ``f(points)`` with points of shape ``(..., d)`` returning shape ``(...)``
        (unnormalised, maximum 1).
    """
    lower, upper = _bounds(lower, upper)
    centre = np.broadcast_to(np.asarray(centre, dtype=float), lower.shape).copy()
    kappa = np.broadcast_to(np.asarray(kappa, dtype=float), lower.shape).copy()
    if not (np.all(np.isfinite(centre)) and np.all(np.isfinite(kappa)) and np.all(kappa >= 0)):
        raise FpirlInputError("von_mises_bump: centre must be finite and kappa finite and >= 0")
    length = upper - lower

    def bump(points):
        x = np.asarray(points, dtype=float)
        arg = kappa * (np.cos(2.0 * np.pi * (x - centre) / length) - 1.0)
        return np.exp(arg.sum(axis=-1))

    return bump


def _check_gradient(potential: Callable, gradient: Callable, lower: np.ndarray, upper: np.ndarray) -> None:
    """Warn when ``gradient`` is not the gradient of ``potential`` (e.g. a sign slip).

    Central differences (step ``1e-5 L``) at 8 fixed pseudo-random interior points; relative
    mismatch above ``1e-4`` of ``max |grad psi|`` (plus an absolute 1e-6) triggers a warning.
    """
    d = lower.size
    rng = np.random.default_rng(0)
    length = upper - lower
    x = lower + length * rng.uniform(0.05, 0.95, size=(8, d))
    step = 1e-5 * length
    shift = np.eye(d) * step  # (d, d)
    try:
        g = np.asarray(gradient(x), dtype=float)
        fp = np.asarray(potential(x[:, None, :] + shift), dtype=float)
        fm = np.asarray(potential(x[:, None, :] - shift), dtype=float)
    except Exception as exc:  # noqa: BLE001 - user callables: report, do not mask
        raise FpirlInputError(f"potential/gradient could not be evaluated at points of shape (8, {d}): {exc}") from exc
    if g.shape != (8, d) or fp.shape != (8, d):
        raise FpirlInputError(
            f"potential must map (..., {d}) -> (...) and gradient (..., {d}) -> (..., {d}); "
            f"got {fp.shape[1:] if fp.ndim else ()} and {g.shape} for 8 points"
        )
    fd = (fp - fm) / (2.0 * step)
    scale = max(float(np.max(np.abs(g))), float(np.max(np.abs(fd))))
    mismatch = float(np.max(np.abs(fd - g)))
    if mismatch > 1e-4 * scale + 1e-6:
        warnings.warn(
            f"gradient does not match finite differences of potential (max mismatch {mismatch:.2e}, "
            f"max |grad| {scale:.2e}); the two solvers use different ones of them",
            RuntimeWarning,
            stacklevel=3,
        )


def default_resolution(grid: Grid) -> tuple[int, ...]:
    """Default solver points per axis used by :func:`simulate_density`.

    Periodic (spectral): ``max(minimum, factor * N_i)`` rounded up to an FFT-friendly even size,
    with ``(minimum, factor) = (128, 4), (64, 4), (40, 2), (24, 1)`` for ``d = 1, 2, 3, 4`` (and
    ``(16, 1)`` beyond). The trigonometric interpolant is the solver's representation, so the
    nodes need not coincide with the grid's.

    Reflecting (finite volumes, O(h^2)): ``factor_i * N_i + 1`` nodes with
    ``factor_i = max(factor, ceil(minimum / N_i))`` and ``(minimum, factor) = (512, 8),
    (128, 4), (40, 2), (16, 1)`` for ``d = 1..4``: cells are nested in the grid's elements, so
    every grid node is a solver node and interpolation adds no error there.

    The sizes keep a 4-D run within a few hundred MB and about a minute; sharply peaked
    solutions (large ``beta * range(psi)``) may need more: :func:`simulate_density` warns when
    the spectral solution looks under-resolved.
    """
    d = grid.ndim
    if grid.periodic:
        minimum, factor = _SPECTRAL_DEFAULT.get(d, (16, 1))
        out = []
        for n in grid.elements:
            m = max(minimum, factor * n)
            m = sfft.next_fast_len(m + (m % 2), real=True)
            while m % 2:
                m = sfft.next_fast_len(m + 1, real=True)
            out.append(int(m))
        return tuple(out)
    minimum, factor = _FV_DEFAULT.get(d, (8, 1))
    return tuple(int(n * max(factor, math.ceil(minimum / n)) + 1) for n in grid.elements)


def _nodal_initial(grid: Grid, solver: _ForwardSolver, values) -> np.ndarray:
    """Nodal values on ``grid`` brought onto the solver's nodes by cubic splines (clipped at 0)."""
    values = np.asarray(values, dtype=float)
    if values.shape != grid.shape:
        raise FpirlInputError(f"initial density on the grid's nodes has shape {values.shape}, expected {grid.shape}")
    period = [hi - lo if grid.periodic else None for lo, hi in zip(grid.lower, grid.upper)]
    mats = [spline_matrix(c, x, p) for c, x, p in zip(grid.coords, solver.coords, period)]
    return np.maximum(apply_along_axes(values, mats), 0.0)


def simulate_density(
    grid: Grid,
    potential: Callable,
    gradient: Callable,
    beta,
    initial,
    times,
    *,
    resolution=None,
    progress: bool = False,
    max_step=None,
    rtol=None,
) -> np.ndarray:
    """Solve eq. ``fokker_planck_eq`` accurately and return the density on ``grid``'s nodes.

    Dispatches on ``grid.boundary``: ``'periodic'`` uses :class:`SpectralSolver` (which needs
    only ``gradient``), ``'reflecting'`` uses :class:`FiniteVolumeSolver` (which needs only
    ``potential``). The solver runs on its own grid (``resolution``) and each snapshot is
    brought onto the grid nodes with the solver's interpolant (trigonometric, resp. cubic
    spline). ``gradient`` is checked against central differences of ``potential`` at a few
    points (a :class:`RuntimeWarning` on mismatch), and the spectral solver warns when its
    solution looks under-resolved (:attr:`SpectralSolver.tail_ratio` above ``TAIL_WARNING``).
    After interpolation, tiny negative values (ringing of the trigonometric interpolant, rounding)
    are clipped to 0 and every snapshot is renormalised to unit mass with ``grid.integrate``
    (the trapezoidal rule of the grid), so the output is a valid density *on the grid*.

    Parameters
    ----------
    grid : Grid
    potential, gradient : callable
        ``psi(points) -> (...)`` and ``grad psi(points) -> (..., d)`` for points ``(..., d)``.
    beta : float
        Inverse temperature.
    initial : callable or ndarray
        Unnormalised, non-negative initial density at ``t = 0``, ``initial(points) -> (...)``.
        On periodic boxes it should be smooth across the seam (see :func:`von_mises_bump`).
        Or its values on ``grid``'s nodes (shape ``grid.shape``): brought onto the solver's nodes by
        the cubic interpolating spline along each axis (periodic on periodic axes, not-a-knot ends
        on walled ones), clipped at 0.
    times : array_like, shape (n_t,)
        Output times (``>= 0``, non-decreasing; include ``0`` for the initial snapshot).
    resolution : int or sequence of int, optional
        Solver points per axis (FV: including both walls). Default :func:`default_resolution`.
    progress : bool
        Show a tqdm progress bar.
    max_step : float, optional
        Internal step of the spectral solver (default: its CFL-based choice); ignored by the FV
        solver, which is exact in time.
    rtol : float, optional
        Accuracy of the finite-volume solver's exponential in time, relative to the density's maximum (default
        ~1e-14 in 1-D, where a looser one takes fewer factorisations,
        :func:`fpirl.forward.finite_volume.talbot_nodes`; 1e-10 from 2-D on, the Lanczos process of
        :mod:`fpirl.forward._lanczos`); ignored by the spectral solver.

    Returns
    -------
    ndarray, shape ``(n_t, *grid.shape)``
    """
    if not isinstance(grid, Grid):
        raise FpirlInputError(f"grid must be an fpirl Grid, got {type(grid).__name__}")
    times = _check_times(times)
    _check_gradient(potential, gradient, grid.lower, grid.upper)
    res = default_resolution(grid) if resolution is None else resolution
    if grid.periodic:
        solver: _ForwardSolver = SpectralSolver(grid.lower, grid.upper, res, gradient, beta, max_step=max_step)
    else:
        solver = FiniteVolumeSolver(grid.lower, grid.upper, res, potential, beta, rtol=rtol)
    mats = solver.evaluation_matrices(grid.coords)
    if not callable(initial):
        initial = _nodal_initial(grid, solver, initial)
    out = np.empty((times.size, *grid.shape))
    for k, (_, p) in enumerate(solver.run(initial, times, progress=progress)):
        q = np.maximum(apply_along_axes(p, mats), 0.0)
        mass = float(grid.integrate(q))
        if not mass > 0:
            raise FpirlInputError("simulated density vanished on the grid nodes; check the inputs")
        out[k] = q / mass
    if isinstance(solver, SpectralSolver) and solver.tail_ratio > TAIL_WARNING:
        warnings.warn(
            f"spectral solution may be under-resolved (high-mode amplitude {solver.tail_ratio:.1e} of the mean "
            f"at {solver.points} points); pass a larger resolution",
            RuntimeWarning,
            stacklevel=2,
        )
    return out

