r"""Matrix-free normal operator with the exact flux integrand at Gauss points (issue 20), for 5-D and 6-D.

The interpolated flux of :mod:`fpirl.weakform.matfree_flux` replaces ``p d_a psi`` by its nodal
interpolant; its quadrature error (second order) dominates the psi error in 6-D. Here the convective
term of the Galerkin residual (eq. fokker_planck_residual) is integrated as it stands,

.. math::
    (\Xi(q)\,\theta)_j = \sum_a \int \partial_a w_j\; p\; \partial_a\psi\,dx
    \approx \sum_a \sum_x \omega_x\, \partial_a w_j(x)\, p(x)\, \partial_a\psi(x),

with a tensor-product composite Gauss rule: on every axis, ``n_g`` Gauss-Legendre points on each
FE cell (default), or on each interval between the merged FE nodes and Hermite break points
(``split=True``; :func:`fpirl.core.quadrature.composite_rule`). Split with ``n_g = 3`` the rule is exact
(degree ``<= 5`` per axis on each interval), so the operator equals the exact (assembled) normal
matrix; the default ``n_g = 2`` per FE cell is exact to degree 3 where psi has no break in the cell
and consistent to ``O(h^4)`` where it has (the interpolated flux: ``O(h^2)``).
Sum factorisation: with the 1-D tabulations ``V = [N_m(x)]``, ``V' = [N_m'(x)]`` of the hats and
``H^u = [d^u h_i(x)]`` of the Hermite functions, and ``omega`` folded into ``V``,

.. math::
    P = (\otimes_b \Omega_b V_b)\, q,\qquad \Psi_a = (\otimes_b H_b^{[b=a]})\,\theta,\qquad
    \Xi(q)\theta = \sum_a (\otimes_b V_b^{(\prime)[b=a]})^T (P \odot \Psi_a),

and ``Xi(q)^T r = sum_a (otimes_b H_b^{[b=a]})^T (P .* (otimes_b V_b^{(')[b=a]}) r)``. One product
``A c = sum_k Xi_k^T Xi_k c`` over the POD modes (or streamed pairs) costs ``1 + 2 d`` transforms of
arrays with ``Q^d`` entries per mode (``Q`` Gauss points per axis) and holds ``2 d`` such arrays: no
``3^d`` band, but ``(Q / n)^d`` times the interpolated flux's work and memory (``2^d`` with the default rule). The rate and diffusion terms, the trace used to scale the
ridge (the interpolated flux's), the preconditioner and the CG solve are those of
:class:`fpirl.weakform.matfree_flux.FluxOperator`.
"""

from __future__ import annotations

import numpy as np

from ..core._tensor import apply_along_axes
from ..core.quadrature import composite_rule, merged_breakpoints
from .assembly import hat_matrix
from .matfree_flux import FluxOperator

__all__ = ["GaussFluxOperator", "gauss_tables"]


def gauss_tables(fe, hermite_axis, points: int = 2, split: bool = False):
    """1-D tabulations of one axis at the composite Gauss points.

    Parameters
    ----------
    fe : Axis
        FE axis (hat functions ``N_m``).
    hermite_axis : HermiteAxis
    points : int
        Gauss-Legendre points per interval: per FE cell, or per piece of it between Hermite break
        points with ``split``.
    split : bool
        Split the FE cells at the Hermite break points (default False: the intervals are the FE cells).

    Returns
    -------
    w : ndarray (Q,)
        Gauss weights ``omega_x``.
    V, Vd : ndarray (Q, n)
        ``N_m(x)`` and ``N_m'(x)``.
    H0, H1 : ndarray (Q, n_dofs)
        ``h_i(x)`` and ``h_i'(x)``.
    """
    breaks = fe.lower + fe.spacing * np.arange(fe.elements + 1)
    if split:
        breaks = merged_breakpoints(breaks, hermite_axis.breakpoints)
    x, w = composite_rule(breaks, points)
    return (w, hat_matrix(fe, x), hat_matrix(fe, x, 1),
            hermite_axis.matrix(x, 0), hermite_axis.matrix(x, 1))


class GaussFluxOperator(FluxOperator):
    """``c -> A c`` with the flux integrand at Gauss points (see the module docstring).

    Same parameters and interface as :class:`fpirl.weakform.matfree_flux.FluxOperator`, plus
    ``flux_points`` and ``split`` (keywords): Gauss points per interval, and whether the FE cells are
    split at the Hermite break points. ``flux_points=3, split=True`` is exact; the default
    ``flux_points=2, split=False`` (``2^d`` points per FE cell) is exact where psi is cubic on the cell
    and ``O(h^4)`` consistent on the cells a Hermite break cuts, against ``O(h^2)`` for the
    interpolated flux.
    """

    def __init__(self, source, hermite, *, flux_points: int = 2, split: bool = False, **kwargs):
        self.flux_points, self.split = int(flux_points), bool(split)
        super().__init__(source, hermite, **kwargs)

    def _setup_flux(self) -> None:
        super()._setup_flux()
        self._gauss = [gauss_tables(fe, ha, self.flux_points, self.split)
                       for fe, ha in zip(self.grid.axes, self.hermite.axes)]
        self._test = [(V, Vd) for _, V, Vd, _, _ in self._gauss]
        self._weighted = [w[:, None] * V for w, V, _, _, _ in self._gauss]

    def _flux_shape(self) -> tuple[int, ...]:
        return tuple(w.size for w, *_ in self._gauss)

    def _density(self, q: np.ndarray) -> np.ndarray:
        """``omega p`` at the Gauss points."""
        return apply_along_axes(q, self._weighted)

    def _test_gradient(self, r: np.ndarray, a: int) -> np.ndarray:
        """``sum_j r_j d_a w_j`` at the Gauss points."""
        return apply_along_axes(r, [T[int(b == a)] for b, T in enumerate(self._test)])

    def _test_gradient_adjoint(self, f: np.ndarray, a: int) -> np.ndarray:
        """``int d_a w_j f`` on the nodes for ``f`` at the Gauss points (weights already in ``f``)."""
        return apply_along_axes(f, [T[int(b == a)].T for b, T in enumerate(self._test)])

    def _gradients(self, c: np.ndarray) -> list[np.ndarray]:
        """``d_a psi`` at the Gauss points, one array per axis."""
        x = np.asarray(c, dtype=float).reshape(self.hermite.shape)
        return [apply_along_axes(x, [G[3 + int(b == a)] for b, G in enumerate(self._gauss)]) for a in range(self.d)]

    def _gradients_adjoint(self, h: list[np.ndarray]) -> np.ndarray:
        out = np.zeros(self.hermite.shape)
        for a, ha in enumerate(h):
            out += apply_along_axes(ha, [G[3 + int(b == a)].T for b, G in enumerate(self._gauss)])
        return out.ravel()

    def _accumulate_residual(self, q: np.ndarray, r: np.ndarray, h: list[np.ndarray], P=None) -> None:
        P = self._density(q) if P is None else P
        for a in range(self.d):
            h[a] += P * self._test_gradient(r, a)

    def _matvec(self, c: np.ndarray) -> np.ndarray:
        g = self._gradients(c)
        parts = [self._modes] if self._modes is not None else (pbar for _, (pbar, _) in self._pbar_chunks())
        h = [np.zeros(self._flux_shape()) for _ in range(self.d)]
        for modes in parts:
            for q in modes:
                P = self._density(q)
                r = np.zeros(self.shape)
                for a in range(self.d):
                    r += self._test_gradient_adjoint(P * g[a], a)
                self._accumulate_residual(q, r, h, P)
        self.n_matvec += 1
        return self._gradients_adjoint(h)
