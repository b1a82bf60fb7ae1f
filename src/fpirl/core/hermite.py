r"""Tensor-product piecewise cubic Hermite space for the potential (paper section 4.1).

On each axis ``[lower, upper]`` split into ``n_h`` elements of width ``H`` with nodes ``X_k``,
every node carries two dofs: the value and the slope (paper's :math:`h_{2j-1}, h_{2j}`). With the
reference cubics (eq. hermite_basis)

.. math::
    \bar h_1 = 1 - 3\xi^2 + 2\xi^3,\quad \bar h_2 = \xi - 2\xi^2 + \xi^3,\quad
    \bar h_3 = 3\xi^2 - 2\xi^3,\quad \bar h_4 = -\xi^2 + \xi^3,

cell ``k`` carries ``psi(x) = v_k h1 + H s_k h2 + v_{k+1} h3 + H s_{k+1} h4`` with
``xi = (x - X_k) / H``, so the slope dof is the true derivative. A periodic axis has ``n_h``
nodes (the node at ``upper`` is the node at ``lower``), a non-periodic axis ``n_h + 1``.
Dof ``2k + alpha`` of an axis is ``d^alpha psi / dx^alpha (X_k)``; the tensor-product dof
``theta[i_1, ..., i_d]`` with ``i_b = 2 k_b + alpha_b`` is the mixed partial
``d^alpha psi (X_k)``, ``alpha in {0,1}^d`` (eq. potential_funciton).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Sequence

import numpy as np

from ._errors import FpirlInputError
from ._tensor import apply_along_axes
from .grid import wrap_into
from .quadrature import composite_rule

#: Degree of the piecewise polynomials; interpolation error is O(H^4) for psi, O(H^3) for grad psi.
ORDER = 4


def reference_cubics(xi: np.ndarray, deriv: int = 0) -> np.ndarray:
    r"""Reference Hermite cubics on ``[0, 1]`` (or their ``deriv``-th xi-derivative), shape ``(*xi.shape, 4)``.

    The four functions, in dof order (value left, slope left, value right, slope right):

    .. math::
        h_0 = 1 - 3\xi^2 + 2\xi^3,\quad h_1 = \xi - 2\xi^2 + \xi^3,\quad
        h_2 = 3\xi^2 - 2\xi^3,\quad h_3 = \xi^3 - \xi^2.

    This is the one definition of the shape functions in fpirl; :func:`element_cubics` scales them
    to an element.
    """
    xi = np.asarray(xi, dtype=float)
    if deriv not in (0, 1, 2):
        raise ValueError(f"derivative order must be 0, 1 or 2, got {deriv}")
    out = np.empty(xi.shape + (4,))
    x2 = xi * xi
    if deriv == 0:
        x3 = x2 * xi
        out[..., 2] = 3 * x2 - 2 * x3  # h_2;  h_0 = 1 - h_2
        out[..., 0] = 1 - out[..., 2]
        out[..., 1] = xi - 2 * x2 + x3
        out[..., 3] = x3 - x2
    elif deriv == 1:
        out[..., 2] = 6 * xi - 6 * x2  # h_2';  h_0' = -h_2'
        out[..., 0] = -out[..., 2]
        out[..., 1] = 1 - 4 * xi + 3 * x2
        out[..., 3] = 3 * x2 - 2 * xi
    else:
        out[..., 2] = 6 - 12 * xi  # h_2'';  h_0'' = -h_2''
        out[..., 0] = -out[..., 2]
        out[..., 1] = 6 * xi - 4
        out[..., 3] = 6 * xi - 2
    return out


def element_cubics(xi: np.ndarray, spacing: float, deriv: int = 0) -> np.ndarray:
    r"""The 4 local Hermite functions of an element of length ``H = spacing`` at local coordinates
    ``xi``, differentiated ``deriv`` times in ``x = x_0 + H xi``: shape ``(*xi.shape, 4)``.

    The slope dofs are in ``x`` units: ``phi_1 = H h_1``, ``phi_3 = H h_3``; so
    ``d^k phi_j / dx^k = H^{-k} h_j^{(k)}`` for the value dofs and ``H^{1-k} h_j^{(k)}`` for the slope dofs.
    """
    H = spacing
    vals = reference_cubics(xi, deriv) / H**deriv
    vals[..., 1] *= H
    vals[..., 3] *= H
    return vals


@dataclass(frozen=True)
class HermiteAxis:
    """Piecewise cubic Hermite functions on one axis (value and slope dof per node)."""

    lower: float
    upper: float
    elements: int
    periodic: bool = True

    def __post_init__(self):
        if int(self.elements) != self.elements or self.elements < 1:
            raise FpirlInputError(f"need at least one Hermite element per axis, got {self.elements}")
        if self.periodic and self.elements < 2:
            raise FpirlInputError("a periodic Hermite axis needs at least 2 elements")

    @property
    def spacing(self) -> float:
        return (self.upper - self.lower) / self.elements

    @property
    def n_nodes(self) -> int:
        return self.elements if self.periodic else self.elements + 1

    @property
    def n_dofs(self) -> int:
        return 2 * self.n_nodes

    @property
    def nodes(self) -> np.ndarray:
        return self.lower + self.spacing * np.arange(self.n_nodes)

    @property
    def breakpoints(self) -> np.ndarray:
        """Element end points, ``elements + 1`` values from lower to upper."""
        return self.lower + self.spacing * np.arange(self.elements + 1)

    def locate(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Cell index and local coordinate ``xi in [0, 1]`` of points (wrapped if periodic)."""
        x = np.asarray(x, dtype=float)
        if self.periodic:
            x = wrap_into(x, self.lower, self.upper)
        t = (x - self.lower) / self.spacing
        cell = np.clip(np.floor(t).astype(np.intp), 0, self.elements - 1)
        return cell, t - cell

    def local_basis(self, x: np.ndarray, deriv: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """The 4 non-zero basis functions at ``x``: dof indices and values, each ``(*x.shape, 4)``."""
        cell, xi = self.locate(x)
        vals = element_cubics(xi, self.spacing, deriv)
        right = (cell + 1) % self.n_nodes if self.periodic else cell + 1
        idx = np.stack([2 * cell, 2 * cell + 1, 2 * right, 2 * right + 1], axis=-1)
        return idx, vals

    def matrix(self, x: np.ndarray, deriv: int = 0) -> np.ndarray:
        """Dense collocation matrix ``B[p, i] = d^deriv h_i(x_p)``, shape ``(len(x), n_dofs)``."""
        x = np.asarray(x, dtype=float).ravel()
        idx, vals = self.local_basis(x, deriv)
        B = np.zeros((x.size, self.n_dofs))
        np.add.at(B, (np.repeat(np.arange(x.size), 4), idx.ravel()), vals.ravel())
        return B

    def gram(self, deriv: int = 0, quadrature_points: int = 4) -> np.ndarray:
        """Exact Gram matrix ``int d^deriv h_i d^deriv h_j dx`` (degree <= 6, 4 points suffice).

        Computed once per axis, derivative and rule (the axis is immutable) and returned read-only: the
        matrix-free solvers apply the H1 penalty by these matrices in every iteration."""
        try:
            return _gram(self, int(deriv), int(quadrature_points))
        except TypeError:  # an unhashable field (e.g. a 0-d array bound): not cached
            return _gram.__wrapped__(self, int(deriv), int(quadrature_points))

    def integrals(self) -> np.ndarray:
        """``int h_i dx`` for every dof."""
        x, w = composite_rule(self.breakpoints, 2)
        return w @ self.matrix(x)


@lru_cache(maxsize=256)
def _gram(axis: HermiteAxis, deriv: int, quadrature_points: int) -> np.ndarray:
    """:meth:`HermiteAxis.gram`, cached (read-only)."""
    x, w = composite_rule(axis.breakpoints, quadrature_points)
    B = axis.matrix(x, deriv)
    G = (B * w[:, None]).T @ B
    G.flags.writeable = False
    return G


class HermiteSpace:
    """Tensor product of :class:`HermiteAxis` objects: ``phi_i = prod_b h_{i_b}(x_b)`` (eq. hermite_basis).

    Parameters
    ----------
    lower, upper : sequence of float
        Domain bounds.
    elements : int or sequence of int
        Hermite elements per axis ``n_h,i``.
    periodic : bool
        Periodic (the paper) or non-periodic (for reflecting walls) on every axis.
    """

    order = ORDER

    def __init__(self, lower, upper, elements, periodic=True):
        lower = np.atleast_1d(np.asarray(lower, dtype=float))
        upper = np.atleast_1d(np.asarray(upper, dtype=float))
        elements = np.broadcast_to(np.asarray(elements), lower.shape)
        self.periodic = bool(periodic)
        self.axes = tuple(HermiteAxis(float(a), float(b), int(n), self.periodic) for a, b, n in zip(lower, upper, elements))

    @classmethod
    def on_grid(cls, grid, elements) -> "HermiteSpace":
        """Hermite space on the domain of a :class:`~fpirl.core.grid.Grid` (periodic iff the grid is)."""
        return cls(grid.lower, grid.upper, elements, grid.periodic)

    @property
    def ndim(self) -> int:
        return len(self.axes)

    @property
    def elements(self) -> tuple[int, ...]:
        return tuple(a.elements for a in self.axes)

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the coefficient tensor, ``2 * nodes`` per axis."""
        return tuple(a.n_dofs for a in self.axes)

    @property
    def n_coef(self) -> int:
        return int(np.prod(self.shape))

    def constant_along(self, coef: np.ndarray, batch: int = 0) -> tuple[bool, ...]:
        """Per axis: whether ``psi = sum coef phi`` is exactly constant along it, for every set of coefficients
        (``batch`` leading axes): every slope dof 0 and every value dof equal to the first node's (for each point
        of the other axes). The value basis functions sum to 1, so such a ``psi`` has derivative 0 along the axis
        (in exact arithmetic; summed in floating point the derivative is rounding noise instead)."""
        c = np.asarray(coef)
        c = c.reshape(c.shape[:batch] + self.shape)
        out = []
        for a, ax in enumerate(self.axes):
            v = np.moveaxis(c, batch + a, 0).reshape(ax.n_dofs // 2, 2, -1)
            out.append(bool(not np.any(v[:, 1]) and np.all(v[:, 0] == v[:1, 0])))
        return tuple(out)

    # --- evaluation ---------------------------------------------------------------------
    def evaluate_grid(self, coef: np.ndarray, coords: Sequence[np.ndarray], deriv: Sequence[int] | None = None) -> np.ndarray:
        """``d^deriv psi`` on the tensor grid ``coords`` (one 1-D array per axis), by sum factorisation; exactly 0
        where it differentiates along an axis ``psi`` is constant along (:meth:`constant_along`)."""
        deriv = (0,) * self.ndim if deriv is None else tuple(deriv)
        coef = np.asarray(coef).reshape(self.shape)
        if any(deriv) and any(k and const for k, const in zip(deriv, self.constant_along(coef))):
            return np.zeros(tuple(np.size(c) for c in coords))
        mats = [ax.matrix(c, k) for ax, c, k in zip(self.axes, coords, deriv)]
        return apply_along_axes(coef, mats)

    def gradient_grid(self, coef: np.ndarray, coords: Sequence[np.ndarray], axes: Sequence[int] | None = None) -> np.ndarray:
        """Partial derivatives along ``axes`` (default all) on a tensor grid, shape ``(len(axes), *grid)``."""
        axes = range(self.ndim) if axes is None else axes
        return np.stack([self.evaluate_grid(coef, coords, tuple(int(b == a) for b in range(self.ndim))) for a in axes])

    def evaluate(self, coef: np.ndarray, points: np.ndarray, deriv: Sequence[int] | None = None) -> np.ndarray:
        """``d^deriv psi`` at scattered points of shape ``(..., d)``: gathers the 4^d local dofs per point."""
        points = np.asarray(points, dtype=float)
        lead = points.shape[:-1]
        pts = points.reshape(-1, self.ndim)
        deriv = (0,) * self.ndim if deriv is None else tuple(deriv)
        coef = np.asarray(coef).reshape(self.shape)
        flat_index = np.zeros((pts.shape[0],) + (1,) * 0, dtype=np.intp)[:, None]
        weights = np.ones((pts.shape[0], 1))
        strides = np.cumprod((self.shape[1:] + (1,))[::-1])[::-1]
        for b, (ax, k) in enumerate(zip(self.axes, deriv)):
            idx, vals = ax.local_basis(pts[:, b], k)
            flat_index = (flat_index[:, :, None] + strides[b] * idx[:, None, :]).reshape(pts.shape[0], -1)
            weights = (weights[:, :, None] * vals[:, None, :]).reshape(pts.shape[0], -1)
        return np.einsum("pk,pk->p", coef.ravel()[flat_index], weights).reshape(lead)

    def gradient(self, coef: np.ndarray, points: np.ndarray) -> np.ndarray:
        """Gradient at scattered points, shape ``(..., d)``: the ``4^d`` local dofs of every point gathered once,
        then each partial ``sum_k c_k prod_b h_{k_b}^{(delta_ab)}(x_b)`` by sum factorisation over the axes."""
        points = np.asarray(points, dtype=float)
        lead, d = points.shape[:-1], self.ndim
        pts = points.reshape(-1, d)
        n = pts.shape[0]
        coef = np.asarray(coef).reshape(self.shape)
        strides = np.cumprod((self.shape[1:] + (1,))[::-1])[::-1]
        flat_index = np.zeros((n, 1), dtype=np.intp)
        values, slopes = [], []
        for b, ax in enumerate(self.axes):
            idx, vals = ax.local_basis(pts[:, b], 0)
            values.append(vals)
            slopes.append(element_cubics(ax.locate(pts[:, b])[1], ax.spacing, 1))
            flat_index = (flat_index[:, :, None] + strides[b] * idx[:, None, :]).reshape(n, -1)
        local = coef.ravel()[flat_index].reshape((n,) + (4,) * d)
        out = np.empty((n, d))
        for a in range(d):
            r = local
            for b in reversed(range(d)):  # contract the last local axis with axis b's values (slopes on axis a)
                r = np.matmul(r.reshape(n, -1, 4), (slopes[b] if b == a else values[b])[:, :, None])
            out[:, a] = r.reshape(n)
        return out.reshape(lead + (d,))

    # --- construction -------------------------------------------------------------------
    def interpolate(self, derivative: Callable[[np.ndarray, tuple[int, ...]], np.ndarray]) -> np.ndarray:
        """Hermite interpolant of a C^1 function from its mixed partials at the nodes.

        Parameters
        ----------
        derivative : callable
            ``derivative(points, alpha)`` returns ``d^alpha f`` at points of shape ``(..., d)`` for
            every ``alpha in {0, 1}^d``.
        """
        mesh = np.stack(np.meshgrid(*[a.nodes for a in self.axes], indexing="ij"), axis=-1)
        coef = np.zeros(self.shape)
        for alpha in np.ndindex(*(2,) * self.ndim):
            sl = tuple(slice(a_, None, 2) for a_ in alpha)
            coef[sl] = derivative(mesh, tuple(alpha))
        return coef

    def constant_mode(self) -> np.ndarray:
        """Coefficients of ``psi = 1`` (all value dofs 1, all derivative dofs 0)."""
        coef = np.zeros(self.shape)
        coef[(slice(0, None, 2),) * self.ndim] = 1.0
        return coef

    def mean_functional(self) -> np.ndarray:
        """Vector ``m`` with ``m . coef = mean of psi over the domain``."""
        m = np.ones(())
        for ax in self.axes:
            m = np.multiply.outer(m, ax.integrals() / (ax.upper - ax.lower))
        return m

    def remove_mean(self, coef: np.ndarray) -> np.ndarray:
        """Coefficients of ``psi - mean(psi)``."""
        coef = np.asarray(coef, dtype=float).reshape(self.shape)
        return coef - np.sum(self.mean_functional() * coef) * self.constant_mode()

    def h1_seminorm_matrix(self) -> np.ndarray:
        """Gram matrix of ``int grad psi . grad psi``, i.e. ``sum_a kron_b (G1 if b == a else G0)``
        (:meth:`add_h1_seminorm` into zeros)."""
        return self.add_h1_seminorm(np.zeros((self.n_coef, self.n_coef)))

    def add_h1_seminorm(self, out: np.ndarray, scale: float = 1.0, *, src: np.ndarray | None = None,
                        rank_one: tuple[float, np.ndarray] | None = None) -> np.ndarray:
        """``out += scale * P`` in place for ``P`` = :meth:`h1_seminorm_matrix`, without forming ``P`` (one pass
        over ``out`` by row blocks; the same rounding as ``P * scale + out``). Returns ``out``.

        With ``src``, ``out = src + scale * P`` instead (``out`` may be uninitialised: the copy is part of the same
        pass); with ``rank_one = (c, v)``, ``+ c v v^T`` as well, row by row after ``P`` (as
        ``out[rows] += c * np.outer(v[rows], v)``): the penalised normal matrix ``A + lam P + c m m^T`` of the
        estimators in one pass over memory instead of three.

        Over the leading axes ``S = sum_a kron_b (G1 if b == a else G0)`` and ``T = kron_b G0``; one axis
        more: ``S <- kron(S, G0_b) + kron(T, G1_b)``, ``T <- kron(T, G0_b)``; the last axis's two Kronecker
        products are formed by broadcasting, a block of rows at a time (no full-size temporaries).
        ``out`` (and ``src``): C-contiguous ``(n_coef, n_coef)`` float arrays.
        """
        shape = (self.n_coef, self.n_coef)
        src = None if src is None else np.ascontiguousarray(src, dtype=float)
        for name, arr in (("out", out), ("src", src)):
            if arr is not None and not (arr.flags.c_contiguous and arr.shape == shape):
                raise ValueError(f"add_h1_seminorm needs a C-contiguous {shape} array as {name}")

        def finish(rows, block):  # out[rows] = (src or out)[rows] + block (+ the rank-one rows)
            if src is None:
                out[rows] += block
            else:
                np.add(src[rows], block, out=out[rows])
            if rank_one is not None:
                c, v = rank_one
                out[rows] += c * np.outer(v[rows], v)

        if self.ndim == 1:
            finish(slice(None), self.axes[0].gram(1) * scale)
            return out
        g0 = [ax.gram(0) for ax in self.axes]
        g1 = [ax.gram(1) for ax in self.axes]
        S, T = g1[0], g0[0]
        for b in range(1, self.ndim - 1):
            S = np.kron(S, g0[b])
            S += np.kron(T, g1[b])
            T = np.kron(T, g0[b])
        n, k = S.shape[0], g0[-1].shape[0]
        step = max(1, 2**18 // (n * k * k))  # rows of S per block: about 2 MB of temporaries
        for i in range(0, n, step):
            block = S[i : i + step, None, :, None] * g0[-1][None, :, None, :]
            block += T[i : i + step, None, :, None] * g1[-1][None, :, None, :]
            block *= scale
            finish(slice(i * k, min(n, i + step) * k), block.reshape(-1, n * k))
        return out

    def h1_seminorm_trace(self) -> float:
        """``tr P`` of :meth:`h1_seminorm_matrix`: ``sum_a prod_b tr(G1 if b == a else G0)``."""
        t0 = [np.trace(ax.gram(0)) for ax in self.axes]
        t1 = [np.trace(ax.gram(1)) for ax in self.axes]
        return float(sum(np.prod([t1[b] if b == a else t0[b] for b in range(self.ndim)]) for a in range(self.ndim)))

    def __repr__(self):
        return f"HermiteSpace(elements={self.elements}, periodic={self.periodic}, n_coef={self.n_coef})"


def embed_constant_axes(coef, space: HermiteSpace, kept, full: HermiteSpace, batch: int = 0) -> np.ndarray:
    """Coefficients of ``space`` (a function of the axes ``kept`` of ``full``) as coefficients of
    ``full``, constant along the other axes: ``psi_full(x) = psi(x[kept])`` exactly.

    Each other axis of ``full`` must be the smallest Hermite axis (1 element, or 2 periodic ones:
    4 dofs), carrying the coefficients of a constant (values 1, slopes 0). ``batch`` leading axes
    of ``coef`` (e.g. columns of a covariance factor) are carried along. Returns shape
    ``coef.shape[:batch] + full.shape``.
    """
    kept = list(kept)
    out = np.asarray(coef, dtype=float)
    lead = out.shape[:batch]
    out = out.reshape(lead + space.shape)
    const = np.array([1.0, 0.0, 1.0, 0.0])  # the two nodes of one element (or two periodic ones)
    for i in range(full.ndim):
        if i not in kept:
            if full.shape[i] != const.size:
                raise FpirlInputError(f"axis {i}: psi is constant there but its Hermite axis has {full.shape[i]} dofs")
            shape = [1] * (out.ndim + 1)
            shape[batch + i] = const.size
            out = np.expand_dims(out, batch + i) * const.reshape(shape)
    return out
