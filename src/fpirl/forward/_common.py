"""Shared helpers and the base class of the forward solvers."""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np
from tqdm import tqdm

from ..core._errors import FpirlInputError
from ..core._tensor import apply_along_axes


# --------------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------------
def _bounds(lower, upper) -> tuple[np.ndarray, np.ndarray]:
    lower = np.atleast_1d(np.asarray(lower, dtype=float))
    upper = np.atleast_1d(np.asarray(upper, dtype=float))
    if lower.ndim != 1 or lower.shape != upper.shape or lower.size == 0:
        raise FpirlInputError(f"bounds must be 1-D and of equal length, got {lower.shape} and {upper.shape}")
    if not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper)) and np.all(upper > lower)):
        raise FpirlInputError(f"bounds must be finite with lower < upper, got {lower} and {upper}")
    return lower, upper


def _per_axis(points, d: int, minimum: int, what: str) -> tuple[int, ...]:
    arr = np.atleast_1d(np.asarray(points))
    if arr.ndim != 1 or arr.size not in (1, d):
        raise FpirlInputError(f"{what}: need an int or {d} ints, got {points!r}")
    arr = np.broadcast_to(arr, (d,))
    if not np.all(arr == np.round(arr)) or np.any(arr < minimum):
        raise FpirlInputError(f"{what}: need integers >= {minimum}, got {points!r}")
    return tuple(int(m) for m in arr)


def _check_times(times) -> np.ndarray:
    times = np.atleast_1d(np.asarray(times, dtype=float))
    if times.ndim != 1 or times.size == 0:
        raise FpirlInputError(f"times must be a non-empty 1-D sequence, got shape {times.shape}")
    if not np.all(np.isfinite(times)) or times[0] < 0 or np.any(np.diff(times) < 0):
        raise FpirlInputError("times must be finite, >= 0 (the initial time is 0) and non-decreasing")
    return times


def _mesh(coords: Sequence[np.ndarray]) -> np.ndarray:
    return np.stack(np.meshgrid(*coords, indexing="ij"), axis=-1)



class _ForwardSolver:
    """Shared bookkeeping: own tensor grid, initial data, output loop, interpolation.

    Every solver states its accuracy with two class attributes of one meaning: ``space_order``,
    the order of the error in the node spacing (``inf`` for spectral accuracy), and
    ``time_order``, the order in the time step (``inf`` when time is integrated exactly).
    """

    coords: list[np.ndarray]
    space_order: float
    time_order: float

    @property
    def ndim(self) -> int:
        return len(self.coords)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(c.size for c in self.coords)

    def mesh(self) -> np.ndarray:
        """Coordinates of the solver's own nodes, shape ``(*shape, ndim)``."""
        return _mesh(self.coords)

    def mass(self, values: np.ndarray) -> np.ndarray:
        """Integral of nodal ``values`` (leading batch axes allowed) with the solver's quadrature."""
        values = np.asarray(values, dtype=float)
        out = apply_along_axes(values, [w[None, :] for w in self._weights])
        return out.reshape(values.shape[: values.ndim - self.ndim])

    def _initial_values(self, initial) -> np.ndarray:
        if callable(initial):
            p0 = np.asarray(initial(self.mesh()), dtype=float)
        else:
            p0 = np.array(initial, dtype=float)
        if p0.shape != self.shape:
            raise FpirlInputError(f"initial density has shape {p0.shape}, expected {self.shape}")
        if not np.all(np.isfinite(p0)):
            raise FpirlInputError("initial density contains NaN or infinite values")
        if np.any(p0 < 0):
            raise FpirlInputError(f"initial density has negative values (min {p0.min():.3g})")
        mass = float(self.mass(p0))
        if not mass > 0:
            raise FpirlInputError("initial density has zero mass")
        return p0 / mass

    def _advance(self, state, interval: float):  # pragma: no cover - abstract
        raise NotImplementedError

    def _to_state(self, p0: np.ndarray):
        return p0

    def _to_values(self, state) -> np.ndarray:
        return state

    def _observe(self, state) -> None:
        pass

    def run(self, initial, times, *, progress: bool = False) -> Iterator[tuple[float, np.ndarray]]:
        """Yield ``(t_k, p(t_k))`` on the solver's nodes for each requested output time.

        Parameters
        ----------
        initial : callable or array_like
            Initial density at ``t = 0``: a callable mapping points ``(..., d)`` to values ``(...)``,
            or values on the solver's nodes. It need not be normalised (it is scaled to unit mass
            with the solver's quadrature) but must be finite and non-negative.
        times : array_like
            Output times, non-decreasing, ``>= 0``; ``0`` returns the (normalised) initial data.
        progress : bool
            Show a tqdm progress bar over the output times.
        """
        times = _check_times(times)
        state = self._to_state(self._initial_values(initial))
        bar = None
        if progress:
            bar = tqdm(total=times.size, desc=type(self).__name__, unit="snapshot")
        t = 0.0
        try:
            for tk in times:
                if tk > t:
                    state = self._advance(state, float(tk - t))
                    t = float(tk)
                self._observe(state)
                if bar is not None:
                    bar.update(1)
                yield float(tk), self._to_values(state)
        finally:
            if bar is not None:
                bar.close()

    def solve(self, initial, times, *, progress: bool = False) -> np.ndarray:
        """All snapshots on the solver's nodes, shape ``(len(times), *shape)``; see :meth:`run`."""
        return np.stack([p for _, p in self.run(initial, times, progress=progress)])

    def evaluation_matrices(self, coords: Sequence[np.ndarray]) -> list[np.ndarray]:  # pragma: no cover
        raise NotImplementedError

    def evaluate(self, values: np.ndarray, coords: Sequence[np.ndarray]) -> np.ndarray:
        """Evaluate the solver's interpolant of nodal ``values`` on the tensor grid ``coords``.

        Parameters
        ----------
        values : ndarray, shape ``(..., *shape)``
            Nodal values (leading batch axes, e.g. time, are allowed).
        coords : sequence of 1-D arrays
            Target coordinates per axis.

        Returns
        -------
        ndarray, shape ``(..., len(coords[0]), ..., len(coords[d-1]))``
        """
        values = np.asarray(values, dtype=float)
        if values.shape[values.ndim - self.ndim :] != self.shape:
            raise FpirlInputError(f"values have shape {values.shape}, trailing axes must be {self.shape}")
        return apply_along_axes(values, self.evaluation_matrices(coords))


# --------------------------------------------------------------------------------------------
# periodic: Fourier pseudo-spectral + integrating-factor RK4
# --------------------------------------------------------------------------------------------
