"""Fourier pseudo-spectral solver of eq. fokker_planck_eq on periodic boxes."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import scipy.fft as sfft

from ..core._errors import FpirlInputError
from ..core.validation import positive
from ._common import _ForwardSolver, _bounds, _per_axis

#: Most RK4 steps between two output times before :class:`SpectralSolver` refuses (a result with a
#: potential of huge magnitude would otherwise need ~1e200 steps and never finish).
MAX_STEPS_PER_INTERVAL = 100_000


def _trig_matrix(x: np.ndarray, lower: float, length: float, m: int) -> np.ndarray:
    """Matrix ``E`` (``len(x) x m``) with ``E @ samples`` = trigonometric interpolant at ``x``.

    Samples are at ``lower + j length / m``. For even ``m`` the Nyquist mode is split
    symmetrically (``cos(m theta / 2)``, no sine part), so the interpolant is real and the
    unique one of minimal degree.
    """
    theta = 2.0 * np.pi * (np.asarray(x, dtype=float) - lower) / length
    kmax = (m - 1) // 2
    k = np.arange(1, kmax + 1)
    j = np.arange(m)
    phase_nodes = 2.0 * np.pi * ((np.outer(j, k) % m) / m)  # exact reduction of k * theta_j
    kt = np.outer(theta, k)
    mat = 1.0 + 2.0 * (np.cos(kt) @ np.cos(phase_nodes).T + np.sin(kt) @ np.sin(phase_nodes).T)
    if m % 2 == 0:
        mat += np.outer(np.cos(0.5 * m * theta), np.where(j % 2 == 0, 1.0, -1.0))
    return mat / m


class SpectralSolver(_ForwardSolver):
    r"""Fourier pseudo-spectral solver of eq. ``fokker_planck_eq`` on a periodic box.

    Solves :math:`\partial_t p = \nabla\cdot(p\nabla\psi) + \beta^{-1}\nabla^2 p` with periodic
    boundaries in every axis.

    *Space.* Collocation on ``M_i`` uniform points per axis, ``x_j = lower + j L / M``
    (``j = 0..M-1``; the point at ``upper`` is the periodic image of ``lower``). The state is the
    real FFT (``rfftn``) of the nodal values. The drift ``div(p grad psi)`` is evaluated
    pseudo-spectrally in conservative form: ``grad psi`` is sampled once at the collocation points
    (from the user's callable), ``p grad_i psi`` is formed pointwise and differentiated with
    ``i k_i`` (the Nyquist wavenumber's derivative is set to zero, the usual choice for odd
    derivatives). The mean (``k = 0``) mode is untouched by the drift, so mass is conserved to
    rounding. Accuracy in space is spectral (exponential for smooth, periodic data); no
    de-aliasing is applied, so resolve the solution (see :attr:`tail_ratio`).

    *Time.* Integrating-factor RK4: with ``v = exp(|k|^2 t / beta) p_hat`` the diffusion is
    integrated exactly and classical RK4 is applied to the drift, giving order ``4`` in the step
    (:attr:`time_order`). Between consecutive output times the solver takes ``n`` equal steps,
    ``n = ceil(interval / max_step)``, so that steps land exactly on the output times.

    Parameters
    ----------
    lower, upper : array_like, shape (d,)
        The periodic box.
    points : int or sequence of int
        Collocation points per axis ``M_i`` (at least 4).
    gradient : callable
        ``gradient(points)`` with ``points`` of shape ``(..., d)`` returns ``grad psi``, shape
        ``(..., d)``; it must be periodic for the result to be meaningful.
    beta : float
        Inverse temperature (> 0).
    max_step : float, optional
        Largest internal time step. Default ``cfl / drift_rate`` (and no limit when ``psi`` is
        constant: the solution is then the exact heat-equation decay in one step).
    cfl : float
        Safety factor for the default step (default ``1.0``). ``drift_rate = sum_i k_max,i
        max|d_i psi| + max|laplacian psi|`` bounds the spectral radius of the discrete drift
        operator; RK4 is stable for ``|lambda dt| <~ 2.8`` on the imaginary and real axes, so
        ``cfl = 1`` keeps a factor ~2.8 of margin, and the resolved modes (``|k| << k_max``) are
        integrated with a relative error far below the spatial one.
    workers : int, optional
        Threads for :mod:`scipy.fft` (default: scipy's default, one thread).

    Attributes
    ----------
    time_order : int
        Order of the time stepper in the step ``h`` (4).
    space_order : float
        ``inf``: spectral accuracy in space (faster than any power of ``1/M`` for smooth data).
    drift_rate : float
        The stability bound described under ``cfl``.
    max_step : float
        The internal step limit in use.
    tail_ratio : float
        Largest ratio, over the snapshots produced so far, of the biggest Fourier amplitude
        among modes with ``|k_i| > M_i / 3`` in some axis to the mean mode: a resolution
        diagnostic, typically 10-100x the actual relative error (see ``TAIL_WARNING``).
    """

    time_order = 4
    space_order = math.inf  # spectral: faster than any power of 1/M for smooth periodic data

    def __init__(self, lower, upper, points, gradient: Callable, beta, *, max_step=None, cfl=1.0, workers=None):
        self.lower, self.upper = _bounds(lower, upper)
        d = self.lower.size
        self.points = _per_axis(points, d, 4, "points")
        self.beta = positive(beta, "beta")
        self.workers = workers
        self.length = self.upper - self.lower
        self.coords = [lo + (hi - lo) * np.arange(m) / m for lo, hi, m in zip(self.lower, self.upper, self.points)]
        self._weights = [np.full(m, L / m) for m, L in zip(self.points, self.length)]

        grad = np.asarray(gradient(self.mesh()), dtype=float)
        if grad.shape != (*self.shape, d):
            raise FpirlInputError(f"gradient returned shape {grad.shape}, expected {(*self.shape, d)}")
        if not np.all(np.isfinite(grad)):
            raise FpirlInputError("gradient returned NaN or infinite values")
        self._grad_stack = np.ascontiguousarray(np.moveaxis(grad, -1, 0))  # (d, *shape)

        # wavenumbers, broadcast to the rfftn layout (last axis halved)
        self._ik = []
        k2 = 0.0
        tail = np.zeros((), dtype=bool)
        for i, (m, L) in enumerate(zip(self.points, self.length)):
            idx = np.fft.rfftfreq(m, 1.0 / m) if i == d - 1 else np.fft.fftfreq(m, 1.0 / m)
            k = 2.0 * np.pi / L * idx
            bshape = [1] * d
            bshape[i] = k.size
            k = k.reshape(bshape)
            k2 = k2 + k**2
            ik = 1j * k
            if m % 2 == 0:
                ik = np.where(np.abs(idx.reshape(bshape)) == m // 2, 0.0, ik)
            self._ik.append(ik)
            tail = tail | (np.abs(idx.reshape(bshape)) > m / 3.0)
        self._k2 = np.broadcast_to(k2, self._spectral_shape).copy()
        self._tail = np.broadcast_to(tail, self._spectral_shape)
        self.tail_ratio = 0.0

        kmax = 2.0 * np.pi / self.length * (np.array(self.points) // 2)
        div = self._irfft(sum(ik * self._rfft(g) for ik, g in zip(self._ik, self._grad_stack)))
        self.drift_rate = float(sum(km * np.max(np.abs(g)) for km, g in zip(kmax, self._grad_stack)) + np.max(np.abs(div)))
        if not np.isfinite(self.drift_rate):
            raise FpirlInputError("the potential is too steep for the spectral solver (its gradient overflows); "
                                  "check the result (coefficients of huge magnitude?)")
        if max_step is None:
            cfl = float(cfl)
            if not (np.isfinite(cfl) and cfl > 0):
                raise FpirlInputError(f"cfl must be positive, got {cfl}")
            max_step = cfl / self.drift_rate if self.drift_rate > 0 else np.inf
        max_step = float(max_step)
        if not max_step > 0:
            raise FpirlInputError(f"max_step must be positive, got {max_step}")
        self.max_step = max_step
        self._cached_step = None
        self.steps_taken = 0

    # --- FFT plumbing -----------------------------------------------------------------
    @property
    def _spectral_shape(self) -> tuple[int, ...]:
        return (*self.points[:-1], self.points[-1] // 2 + 1)

    def _rfft(self, values):
        return sfft.rfftn(values, axes=range(self.ndim), workers=self.workers)

    def _irfft(self, coeffs):
        return sfft.irfftn(coeffs, s=self.points, axes=range(self.ndim), workers=self.workers)

    def _drift(self, coeffs):
        """Fourier coefficients of ``div(p grad psi)`` for ``p`` given by its coefficients (the ``d`` fluxes
        ``p grad_i psi`` transformed in one batched call)."""
        p = self._irfft(coeffs)
        flux = sfft.rfftn(np.multiply(self._grad_stack, p), axes=range(1, self.ndim + 1), workers=self.workers)
        out = self._ik[0] * flux[0]
        for ik, f in zip(self._ik[1:], flux[1:]):
            out += ik * f
        return out

    def _step(self, u, h: float):
        if self._cached_step != h:
            self._e1 = np.exp(self._k2 * (-0.5 * h / self.beta))  # exp(L h / 2), L = -|k|^2 / beta
            self._e2 = self._e1 * self._e1
            self._cached_step = h
        e1, e2 = self._e1, self._e2
        k1 = self._drift(u)
        k2 = self._drift(e1 * (u + (0.5 * h) * k1))
        k3 = self._drift(e1 * u + (0.5 * h) * k2)
        k4 = self._drift(e2 * u + h * (e1 * k3))
        self.steps_taken += 1
        return e2 * (u + (h / 6.0) * k1) + (h / 6.0) * (2.0 * e1 * (k2 + k3) + k4)

    # --- base-class hooks -------------------------------------------------------------
    def _to_state(self, p0):
        return self._rfft(p0)

    def _to_values(self, state):
        return self._irfft(state)

    def _advance(self, state, interval):
        n = max(1.0, math.ceil(interval / self.max_step * (1.0 - 1e-12))) if np.isfinite(self.max_step) else 1
        if n > MAX_STEPS_PER_INTERVAL:  # RK4 is only stable below max_step: refuse instead of running for ages
            raise FpirlInputError(
                f"the potential is too steep for the spectral solver: {n:.3g} internal steps per output interval "
                f"(stable step {self.max_step:.3g} for drift rate {self.drift_rate:.3g}), more than "
                f"{MAX_STEPS_PER_INTERVAL:,}; check the result (coefficients of huge magnitude?) or ask for closer "
                "output times")
        n = int(n)
        h = interval / n
        for _ in range(n):
            state = self._step(state, h)
        return state

    def _observe(self, state):
        mean = abs(state.flat[0])
        if mean > 0 and self._tail.any():
            self.tail_ratio = max(self.tail_ratio, float(np.max(np.abs(state[self._tail])) / mean))

    # --- interpolation ----------------------------------------------------------------
    def evaluation_matrices(self, coords):
        """Per-axis matrices of the trigonometric interpolant at ``coords`` (any real values).

        ``evaluate`` contracts them axis by axis; the result is exact for the solver's
        band-limited representation. For even ``M`` the Nyquist mode is split symmetrically.
        """
        if len(coords) != self.ndim:
            raise FpirlInputError(f"need {self.ndim} coordinate arrays, got {len(coords)}")
        return [
            _trig_matrix(np.ravel(c), lo, L, m) for c, lo, L, m in zip(coords, self.lower, self.length, self.points)
        ]


# --------------------------------------------------------------------------------------------
# reflecting: vertex-centred finite volumes with Scharfetter-Gummel fluxes
# --------------------------------------------------------------------------------------------
