r"""Matrix-free normal operator with the interpolated flux (group finite elements), for 5-D and 6-D.

The exact operator of :mod:`fpirl.weakform.matfree` integrates, for every FE test function, the triple
products of its gradient, the data hats and the Hermite gradients: ``3^d`` numbers per node and
time pair, i.e. ``729 x 10^6`` per product at 6-D with ``10^6`` nodes (about 17 GB held). Here the
flux ``p grad psi`` of the Galerkin residual (eq. fokker_planck_residual) is replaced by its nodal
interpolant in the linear FE space, the *product approximation* of group finite elements:

.. math::
    \int \partial_a w_j\, p\, \partial_a\psi\,dx \;\approx\;
    \sum_m \Big(\int \partial_a w_j N_m\,dx\Big)\, p_m\, \partial_a\psi(x_m),

exact whenever ``p d_a psi`` is piecewise multilinear and, like the exact quadrature, consistent
to ``O(h^2)``; the rate term ``int w_j dot p`` and the diffusion term ``int grad w_j . grad p``
stay exact. With ``M`` the 1-D FE mass matrix, ``D[j, m] = int w_j' N_m`` and ``E^u`` the Hermite
values (``u = 0``) or slopes (``u = 1``) at the FE nodes, the residual of a time pair with pair
density ``q`` is

.. math::
    \Xi(q)\,\theta = \sum_a K_a\big(q \odot G_a\theta\big),\qquad
    K_a = \otimes_b (D \text{ if } b = a \text{ else } M) = \big(\otimes_b M\big)\, \tilde D_a,\quad
    G_a = \otimes_b E_b^{[b = a]},

with ``tilde D = M^{-1} D`` acting on axis ``a`` only. So one product ``A c = sum_k Xi_k^T Xi_k c``
is ``g_a = G_a c`` once, then per time pair (or POD mode, see
:meth:`fpirl.weakform.matfree.NormalOperator._compress`)

.. math::
    u = \sum_a \tilde D_a (q \odot g_a),\qquad v = (\otimes_b M_b^2)\, u,\qquad
    h_a \mathrel{+}= q \odot \tilde D_a^T v,

and ``A c = sum_a G_a^T h_a``: ``3 d`` one-axis products with ``n x n`` matrices per pair, no
``3^d`` band, memory ``O(d n_nodes)``. The same preconditioned CG
(:func:`fpirl.weakform.matfree.solve_regression`), zero-mean term and penalty apply. The trace of ``A``
(which scales the relative ridge) is exact: ``sum_k sum_{a,a'} q_k^T (otimes_b H_b^{[b=a][b=a']}) q_k``
with ``H^{uv}[m, m'] = (T^{u T} T^v)[m, m'] (E^v E^{u T})[m', m]``, ``T^0 = M``, ``T^1 = D``.
"""

from __future__ import annotations

import numpy as np

from ._krylov import Marginals
from ..core._tensor import apply_along_axes
from ..core._threads import one_blas_thread
from ..core._threads import threaded
from .assembly import NormalEquations
from .matfree import NormalOperator

__all__ = ["FluxOperator", "hat_derivative_matrix", "one_blas_thread"]



def hat_derivative_matrix(fe) -> np.ndarray:
    """``D[j, m] = int w_j'(x) N_m(x) dx`` for the hat functions of one FE axis (dimensionless).

    Interior rows are ``(1/2, 0, -1/2)`` at ``m = j - 1, j, j + 1``; on a non-periodic axis the end
    rows are ``(-1/2, -1/2)`` and ``(1/2, 1/2)``; periodic axes wrap.
    """
    n = fe.n_nodes
    D = np.zeros((n, n))
    j = np.arange(n)
    if fe.periodic:
        np.add.at(D, (j, (j - 1) % n), 0.5)
        np.add.at(D, (j, (j + 1) % n), -0.5)
    else:
        D[j[1:], j[:-1]] = 0.5
        D[j[:-1], j[1:]] = -0.5
        D[0, 0], D[-1, -1] = -0.5, 0.5
    return D


class FluxOperator(NormalOperator):
    """``c -> A c`` for the interpolated-flux residual (see the module docstring).

    Same parameters, attributes and interface as :class:`fpirl.weakform.matfree.NormalOperator` (which it
    extends: streaming, POD compression, right-hand sides ``rhs``, ``trace``, ``marginals``);
    ``quadrature_points`` is unused (the flux term needs no quadrature).
    """

    def _setup_flux(self) -> None:
        self._div = [np.linalg.solve(tb.mass, hat_derivative_matrix(tb.fe)) for tb in self.tables]
        self._lap = [np.linalg.solve(tb.mass, tb.stiffness) for tb in self.tables]
        self._mass = [tb.mass for tb in self.tables]
        self._mass2 = [tb.mass @ tb.mass for tb in self.tables]
        self._E = [(ha.matrix(fe.nodes, 0), ha.matrix(fe.nodes, 1))
                   for fe, ha in zip(self.grid.axes, self.hermite.axes)]

    # --- Hermite coefficients <-> nodal gradients -------------------------------------------
    def _gradients(self, c: np.ndarray) -> list[np.ndarray]:
        """``g_a = (otimes_b E_b^{[b=a]}) c``: ``d_a psi`` at the FE nodes, one array per axis."""
        x = np.asarray(c, dtype=float).reshape(self.hermite.shape)
        return [apply_along_axes(x, [E[int(b == a)] for b, E in enumerate(self._E)]) for a in range(self.d)]

    def _gradients_adjoint(self, h: list[np.ndarray]) -> np.ndarray:
        """``sum_a G_a^T h_a`` (flat)."""
        out = np.zeros(self.hermite.shape)
        for a, ha in enumerate(h):
            out += apply_along_axes(ha, [E[int(b == a)].T for b, E in enumerate(self._E)])
        return out.ravel()

    def _accumulate(self, q: np.ndarray, v: np.ndarray, h: list[np.ndarray]) -> None:
        """``h_a += q * tilde D_a^T v`` for every axis ``a``."""
        for a in range(self.d):
            h[a] += q * self._apply_axis(v, a, self._div[a].T)

    def _accumulate_residual(self, q: np.ndarray, r: np.ndarray, h: list[np.ndarray]) -> None:
        """``h`` += the part of ``Xi(q)^T r`` before :meth:`_gradients_adjoint` (``r``: a residual on the nodes)."""
        self._accumulate(q, apply_along_axes(r, self._mass), h)

    def _flux_shape(self) -> tuple[int, ...]:
        """Shape of the accumulators ``h_a`` (the FE nodes here)."""
        return self.shape

    def _accumulators(self) -> list[np.ndarray]:
        """Zero accumulators ``h_a``, one per axis."""
        return [np.zeros(self._flux_shape()) for _ in range(self.d)]

    # --- products ---------------------------------------------------------------------------
    def matvec(self, c: np.ndarray) -> np.ndarray:
        """``A c`` (flat): ``sum_k Xi(q_k)^T Xi(q_k) c`` over the POD modes (or streamed time pairs),
        with BLAS on one thread (:func:`one_blas_thread`)."""
        with one_blas_thread():
            return self._matvec(c)

    def _matvec(self, c: np.ndarray) -> np.ndarray:
        g = self._gradients(c)
        parts = [self._modes] if self._modes is not None else (pbar for _, (pbar, _) in self._pbar_chunks())
        sums = []

        def work(modes):
            h = [np.zeros(self.shape) for _ in range(self.d)]
            for q in modes:
                u = np.zeros(self.shape)
                for a in range(self.d):
                    u += self._apply_axis(q * g[a], a, self._div[a])
                self._accumulate(q, apply_along_axes(u, self._mass2), h)
            sums.append(h)

        for modes in parts:
            threaded(work, list(modes))
        h = [sum(s[a] for s in sums) for a in range(self.d)]
        self.n_matvec += 1
        return self._gradients_adjoint(h)

    def _right_hand_sides(self) -> NormalEquations:
        with one_blas_thread():
            return self._flux_right_hand_sides()

    def _flux_right_hand_sides(self) -> NormalEquations:
        self._setup_flux()
        d = self.d
        hg, hc = self._accumulators(), self._accumulators()
        gg = gc = cc = 0.0
        n_rows = 0
        trace = 0.0
        trace_mats = self._flux_trace_matrices()
        marg = Marginals(self.shape)
        for _, (pbar, pdot) in self._pbar_chunks():
            if self._pod is not None:  # the trace then follows from the modes (NormalOperator._setup)
                self._pod.add(pbar)
            else:
                trace += self._trace_term(pbar, trace_mats)
            marg.add(pbar)
            for q, qdot in zip(pbar, pdot):
                g = apply_along_axes(qdot, self._mass)
                lap = np.zeros(self.shape)
                for a in range(d):
                    lap += self._apply_axis(q, a, self._lap[a])
                c = apply_along_axes(lap, self._mass)
                gg += float(np.vdot(g, g))
                gc += float(np.vdot(g, c))
                cc += float(np.vdot(c, c))
                n_rows += g.size
                self._accumulate_residual(q, g, hg)
                self._accumulate_residual(q, c, hc)
        self.trace = trace if self._pod is None else None
        self.marginals = marg.normalised()
        return NormalEquations(None, self._gradients_adjoint(hg), self._gradients_adjoint(hc), gg, gc, cc, n_rows)

    def _trace_matrices(self):
        return self._flux_trace_matrices()

    def _flux_trace_matrices(self):
        """Per axis: ``H^{uv}[m, m'] = (T^{u T} T^v)[m, m'] (E^v E^{u T})[m', m]`` for ``u, v in {0, 1}``."""
        out = []
        for tb, E in zip(self.tables, self._E):
            T = (tb.mass, hat_derivative_matrix(tb.fe))
            out.append({(u, v): (T[u].T @ T[v]) * (E[v] @ E[u].T).T for u in (0, 1) for v in (0, 1)})
        return out
