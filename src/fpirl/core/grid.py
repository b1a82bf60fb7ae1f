"""Uniform tensor-product grids over a joint state-action hyper-rectangle.

Node placement (docs/formats.md, "Density dataset"): every axis ``i`` is split into ``N_i`` equal elements of
width ``h_i = (upper_i - lower_i) / N_i``.

* periodic axis: ``N_i`` distinct nodes ``x_j = lower + j h`` for ``j = 0..N_i-1``; the node at
  ``upper`` is identified with the one at ``lower``;
* reflecting axis: ``N_i + 1`` nodes ``x_j = lower + j h`` for ``j = 0..N_i``.

Nodal arrays always have shape ``grid.shape`` (one entry per node, C order over the axes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ._errors import FpirlInputError

BOUNDARIES = ("periodic", "reflecting")
ROLES = ("state", "action")
#: Box sides (and snapshot spacings, :class:`fpirl.core.density.DensitySnapshots`) outside this range leave
#: double precision in the weak form (``h^-d`` on 6 axes, ``1/dt^2`` in the noise terms): rescale the units.
SCALE_RANGE = (1e-30, 1e30)


def check_scale(value: float, what: str) -> None:
    """A one-line error where ``value`` (a length or a time step) lies outside :data:`SCALE_RANGE`."""
    lo, hi = SCALE_RANGE
    if not lo <= abs(value) <= hi:
        raise FpirlInputError(f"{what} {value:.3g} is outside [{lo:g}, {hi:g}]: rescale the units "
                              "(the weak form's powers of it would leave double precision)")


def wrap_into(x, lower, upper) -> np.ndarray:
    """Points ``x`` moved by whole periods into ``[lower, upper)`` per axis (the minimal image of a periodic box).

    ``lower + mod(x - lower, upper - lower)``, where a result that rounds up to ``upper`` (a point a hair below
    ``lower``) is ``lower``: the same point of the torus, never outside the half-open box.
    """
    x = np.asarray(x, dtype=float)
    lower, upper = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    y = lower + np.mod(x - lower, upper - lower)
    return np.where(y >= upper, lower, y)


def into_box(x, lower, upper, periodic: bool) -> np.ndarray:
    """Points ``x`` brought into the box ``[lower, upper]``: wrapped by whole periods (:func:`wrap_into`) where
    ``periodic``, else clipped to the walls."""
    if periodic:
        return wrap_into(x, lower, upper)
    return np.clip(np.asarray(x, dtype=float), lower, upper)


@dataclass(frozen=True)
class Axis:
    """One axis of a uniform grid: ``elements`` equal cells on ``[lower, upper]``."""

    name: str
    lower: float
    upper: float
    elements: int
    role: str = "state"
    periodic: bool = True

    def __post_init__(self):
        if not (np.isfinite(self.lower) and np.isfinite(self.upper)) or self.upper <= self.lower:
            raise FpirlInputError(
                f"axis {self.name!r}: bounds must be finite with lower < upper, got [{self.lower}, {self.upper}]"
            )
        check_scale(self.upper - self.lower, f"axis {self.name!r}: the box side")
        if int(self.elements) != self.elements or self.elements < 2:
            raise FpirlInputError(f"axis {self.name!r}: need at least 2 elements, got {self.elements}")
        if self.role not in ROLES:
            raise FpirlInputError(f"axis {self.name!r}: role must be 'state' or 'action', got {self.role!r}")

    @property
    def length(self) -> float:
        return float(self.upper - self.lower)

    @property
    def spacing(self) -> float:
        """Element width ``h = (upper - lower) / elements``."""
        return self.length / self.elements

    @property
    def n_nodes(self) -> int:
        return self.elements if self.periodic else self.elements + 1

    @property
    def nodes(self) -> np.ndarray:
        """Node coordinates ``lower + j h``."""
        return self.lower + self.spacing * np.arange(self.n_nodes)

    @property
    def node_weights(self) -> np.ndarray:
        """Trapezoidal weights: ``h`` per node (periodic) or ``h/2`` at the two walls."""
        w = np.full(self.n_nodes, self.spacing)
        if not self.periodic:
            w[[0, -1]] *= 0.5
        return w


class Grid:
    """Tensor product of uniform :class:`Axis` objects (the finite-element grid).

    Parameters
    ----------
    lower, upper : sequence of float
        Bounds of the hyper-rectangle, one per axis.
    elements : int or sequence of int
        Number of elements per axis.
    names : sequence of str, optional
        Axis names (default ``x0, x1, ...``).
    roles : sequence of {'state', 'action'}, optional
        Role of each axis (default: all 'state').
    boundary : {'periodic', 'reflecting'}
        Periodic box (the paper) or no-flux walls.
    """

    def __init__(self, lower, upper, elements, names=None, roles=None, boundary="periodic"):
        lower = np.atleast_1d(np.asarray(lower, dtype=float))
        upper = np.atleast_1d(np.asarray(upper, dtype=float))
        if lower.shape != upper.shape or lower.ndim != 1:
            raise FpirlInputError(f"bounds must be 1-D and of equal length, got {lower.shape} and {upper.shape}")
        d = lower.size
        elements = np.broadcast_to(np.asarray(elements), (d,))
        names = [f"x{i}" for i in range(d)] if names is None else list(names)
        roles = ["state"] * d if roles is None else list(roles)
        if len(names) != d or len(roles) != d:
            raise FpirlInputError(f"need {d} names and roles, got {len(names)} and {len(roles)}")
        if len(set(names)) != d:
            raise FpirlInputError(f"axis names must be distinct, got {names}")
        if boundary not in BOUNDARIES:
            raise FpirlInputError(f"boundary must be 'periodic' or 'reflecting', got {boundary!r}")
        self.boundary = boundary
        self.axes = tuple(
            Axis(str(n), float(lo), float(hi), int(e), str(r), boundary == "periodic")
            for n, lo, hi, e, r in zip(names, lower, upper, elements, roles)
        )

    # --- basic properties -------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.axes)

    @property
    def periodic(self) -> bool:
        return self.boundary == "periodic"

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(a.n_nodes for a in self.axes)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.axes)

    @property
    def roles(self) -> tuple[str, ...]:
        return tuple(a.role for a in self.axes)

    @property
    def lower(self) -> np.ndarray:
        return np.array([a.lower for a in self.axes])

    @property
    def upper(self) -> np.ndarray:
        return np.array([a.upper for a in self.axes])

    @property
    def elements(self) -> tuple[int, ...]:
        return tuple(a.elements for a in self.axes)

    @property
    def spacing(self) -> np.ndarray:
        return np.array([a.spacing for a in self.axes])

    @property
    def volume(self) -> float:
        """Measure of the domain, ``prod(upper - lower)``."""
        return float(np.prod(self.upper - self.lower))

    @property
    def state_axes(self) -> tuple[int, ...]:
        return tuple(i for i, a in enumerate(self.axes) if a.role == "state")

    @property
    def action_axes(self) -> tuple[int, ...]:
        return tuple(i for i, a in enumerate(self.axes) if a.role == "action")

    @property
    def coords(self) -> list[np.ndarray]:
        """Node coordinates per axis."""
        return [a.nodes for a in self.axes]

    def mesh(self) -> np.ndarray:
        """All node coordinates, shape ``(*shape, ndim)``."""
        return np.stack(np.meshgrid(*self.coords, indexing="ij"), axis=-1)

    def node_weights(self) -> np.ndarray:
        """Tensor-product trapezoidal weights, shape ``shape``: ``integrate(f) = sum(w * f)``.

        For nodal values of a multilinear (P1/Q1) function this quadrature is exact.
        """
        w = np.ones(())
        for a in self.axes:
            w = np.multiply.outer(w, a.node_weights)
        return w

    def integrate(self, values: np.ndarray, axes: Sequence[int] | None = None) -> np.ndarray:
        """Integrate nodal values over all axes, or over ``axes`` only (exact for Q1 functions)."""
        values = np.asarray(values)
        lead = values.ndim - self.ndim
        axes = range(self.ndim) if axes is None else axes
        out = values
        for i in sorted(axes, reverse=True):
            w = self.axes[i].node_weights
            out = np.tensordot(out, w, axes=([lead + i], [0]))
        return out

    def with_elements(self, elements) -> "Grid":
        """Same domain, names, roles and boundary with another element count."""
        return Grid(self.lower, self.upper, elements, self.names, self.roles, self.boundary)

    def __eq__(self, other):
        return isinstance(other, Grid) and self.axes == other.axes and self.boundary == other.boundary

    def __repr__(self):
        ax = ", ".join(f"{a.name}[{a.role}]: [{a.lower:g}, {a.upper:g}] x {a.elements}" for a in self.axes)
        return f"Grid({ax}; {self.boundary})"
