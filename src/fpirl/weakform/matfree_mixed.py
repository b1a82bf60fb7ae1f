r"""Matrix-free normal operator with a per-axis flux quadrature between the interpolated and the exact one (issue 20).

The convective term of the Galerkin residual (eq. fokker_planck_residual) for axis ``a``,
``int d_a w_j p d_a psi dx``, is a tensor product of 1-D integrals: along the *derivative axis*
``a`` the integrand ``w_j' p d_a psi`` is ``(1/h) x`` linear ``x`` quadratic on an FE cell (where psi has
no Hermite break), along every *transverse axis* ``b != a`` it is ``N_j p g`` with ``p`` linear and
``g`` the Hermite function. A rule is chosen per kind of axis; each is a triple ``(T, P, H)``: the
density at the rule's points ``P q``, the Hermite values there ``H theta`` and the test weights
``T[j, x]``, so that

.. math::
    \Xi_a(q)\,\theta = (\otimes_b T_b)\big[(\otimes_b P_b)\,q \odot (\otimes_b H_b^{[b=a]})\,\theta\big].

Derivative axis: ``'nodal'`` (``T = D``, ``P = I``, ``H = E^1``: the interpolated flux,
:mod:`fpirl.weakform.matfree_flux`) or ``'gauss'`` (2 Gauss points per cell: ``T = V'^T Omega``,
``P = V``, ``H = H^1``; exact where psi is cubic on the cell). Transverse axes: ``'nodal'``
(``T = M``, ``P = I``, ``H = E^0``), ``'corrected'`` or ``'gauss'`` (``T = V^T Omega``, ``P = V``,
``H = H^0``). The *corrected* rule keeps the FE nodes as points but integrates the triple product
``int N_j N_m g`` with ``g`` at the midpoint by averaging, ``M_{jm} (g_j + g_m) / 2``, instead of
``M_{jm} g_m``:

.. math::
    \int N_j\,p\,g\,dx \approx \big(M'(p \odot g)\big)_j + g_j\,(L p)_j
    = \big(M' \big[(M'^{-1} M p) \odot g\big]\big)_j + O(h^4),\qquad
    M' = M - L,\quad L = \tfrac{h}{12}\,\mathrm{tridiag}(1, -2, 1),

exact for ``g`` linear on the two cells of ``N_j`` (nodal: ``g`` constant) and ``O(h^2)`` more
accurate than the nodal rule for smooth ``g`` (the kinks of ``p`` at the nodes are integrated
exactly); ``L`` has zero rows at the ends of a non-periodic axis (there the rule is the nodal one).
So the corrected rule is again a triple ``(T = M', P = M'^{-1} M, H = E^0)`` and, as a product of
1-D rules, no ``2^d`` or ``3^d`` band is needed.

When every transverse rule is ``'nodal'`` or ``'corrected'`` the test weights factor as
``otimes_b T_b = (otimes_b N_b) tilde T_a`` (``N = M`` or ``M'``, ``tilde T_a = N_a^{-1} T_a`` on
axis ``a`` only), as in :mod:`fpirl.weakform.matfree_flux`; one product ``A c`` then costs, per POD
mode and axis ``a``, four one-axis products (the density at the points ``X_a``, ``tilde T_a``, the
transverse ``N^T N`` share and ``tilde T_a^T``), the arrays along ``a`` having ``2 n`` entries with the
Gauss derivative rule (``d`` arrays of ``2 n^d`` numbers held, against ``2^d n^d`` for
:mod:`fpirl.weakform.matfree_gauss`). Otherwise (a ``'gauss'`` transverse rule) a generic, slower
path applies the triples as written. Rate and diffusion terms, the trace that scales the ridge, the
preconditioner and the CG solve are those of :class:`fpirl.weakform.matfree_flux.FluxOperator`.
"""

from __future__ import annotations

import numpy as np

from ..core._errors import FpirlInputError
from ..core._tensor import apply_along_axes
from ._device import BatchedMixedFlux, array_namespace
from ..core._threads import threaded
from .matfree_flux import FluxOperator, hat_derivative_matrix
from .matfree_gauss import gauss_tables

__all__ = ["MixedFluxOperator", "corrected_mass"]

#: The densities at the rules' points of all POD modes are kept between products up to this many bytes.
POINTS_CACHE_BYTES = 2e9
DERIVATIVE_RULES = ("nodal", "gauss")
TRANSVERSE_RULES = ("nodal", "corrected", "gauss")


def corrected_mass(fe, mass: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(M', L)``: ``L = (h / 12) tridiag(1, -2, 1)`` (zero end rows on a non-periodic axis), ``M' = M - L``.

    ``M'`` has the interior rows ``(h / 12) (1, 10, 1)``, the rule ``int N_j f = h (f_{j-1} + 10 f_j +
    f_{j+1}) / 12`` exact for cubic ``f``.
    """
    n, h = fe.n_nodes, fe.spacing
    L = np.zeros((n, n))
    j = np.arange(n) if fe.periodic else np.arange(1, n - 1)
    np.add.at(L, (j, (j - 1) % n), h / 12)
    np.add.at(L, (j, j), -2 * h / 12)
    np.add.at(L, (j, (j + 1) % n), h / 12)
    return mass - L, L


class MixedFluxOperator(FluxOperator):
    """``c -> A c`` with a per-axis flux rule (see the module docstring).

    Same parameters and interface as :class:`fpirl.weakform.matfree_flux.FluxOperator`, plus
    ``derivative`` (``'nodal'`` or ``'gauss'``) and ``transverse`` (``'nodal'``, ``'corrected'`` or
    ``'gauss'``), keywords. ``('nodal', 'nodal')`` is the interpolated flux, ``('gauss', 'gauss')``
    the Gauss-point flux (2 points per FE cell); the default ``('gauss', 'corrected')`` costs about
    twice the interpolated flux. ``device='cuda'`` runs the products on a GPU through CuPy (all
    POD modes batched, :mod:`fpirl.weakform._device`; the set-up stays on the CPU); it needs a
    factored transverse rule (``'nodal'`` or ``'corrected'``).
    """

    def __init__(self, source, hermite, *, derivative: str = "gauss", transverse: str = "corrected",
                 device: str = "cpu", **kwargs):
        if derivative not in DERIVATIVE_RULES or transverse not in TRANSVERSE_RULES:
            raise FpirlInputError(f"unknown flux rule ({derivative!r}, {transverse!r}): derivative one of "
                                  f"{DERIVATIVE_RULES}, transverse one of {TRANSVERSE_RULES}")
        self._xp = array_namespace(device)  # checks the name; fails early when CuPy or the GPU is missing
        if device != "cpu" and transverse == "gauss":
            raise FpirlInputError("device='cuda' needs the 'nodal' or 'corrected' transverse rule")
        self.derivative, self.transverse, self.device = derivative, transverse, device
        self._batched = None
        super().__init__(source, hermite, **kwargs)

    # --- the 1-D rules ----------------------------------------------------------------------
    def _setup_flux(self) -> None:
        super()._setup_flux()
        d = self.d
        rules_d, rules_t = [], []
        for b, (tb, fe, ha) in enumerate(zip(self.tables, self.grid.axes, self.hermite.axes)):
            E0, E1 = self._E[b]
            eye = np.eye(fe.n_nodes)
            if self.derivative == "gauss" or self.transverse == "gauss":
                w, V, Vd, H0, H1 = gauss_tables(fe, ha, 2)
            rules_d.append((hat_derivative_matrix(fe), eye, E1) if self.derivative == "nodal"
                           else (Vd.T * w, V, H1))
            if self.transverse == "nodal":
                rules_t.append((tb.mass, eye, E0))
            elif self.transverse == "corrected":
                Mc, _ = corrected_mass(fe, tb.mass)
                rules_t.append((Mc, np.linalg.solve(Mc, tb.mass), E0))
            else:
                rules_t.append((V.T * w, V, H0))
        self._rules = [[rules_d[b] if b == a else rules_t[b] for b in range(d)] for a in range(d)]
        self._factored = self.transverse != "gauss"
        if self._factored:  # otimes_b T_b = (otimes_b N_b) tilde T_a, N = the transverse T
            N = [r[0] for r in rules_t]
            self._NtN = [n.T @ n for n in N]
            self._Nt = [n.T for n in N]
            self._Ta = [np.linalg.solve(N[a], rules_d[a][0]) for a in range(d)]
            self._TaT = [t.T.copy() for t in self._Ta]
            self._Pt = [r[1] for r in rules_t]  # transverse density matrices
            # X_a = (P^d_a P_t,a^{-1}) on axis a applied to Y = (otimes_b P_t,b) q
            self._Xa = [rules_d[a][1] @ np.linalg.inv(self._Pt[a]) for a in range(d)]
            self._identity_density = self.transverse == "nodal"

    def _right_hand_sides(self):
        """On a device: the set-up's pass over the time pairs batched there (:mod:`fpirl.weakform._device`)."""
        if self.device == "cpu":
            return super()._right_hand_sides()
        self._setup_flux()
        self._batched = BatchedMixedFlux(self, self._xp)
        ne, self.trace, self.marginals = self._batched.right_hand_sides()
        return ne

    def _accumulators(self) -> list[np.ndarray]:
        return [np.zeros(tuple(r[1].shape[0] for r in rules)) for rules in self._rules]

    def _points(self, q: np.ndarray) -> list[np.ndarray]:
        """``X_a = (otimes_b P_b) q``: the density at the points of every axis ``a``'s rule."""
        if not self._factored:
            return [apply_along_axes(q, [r[1] for r in rules]) for rules in self._rules]
        Y = q if self._identity_density else apply_along_axes(q, self._Pt)
        return [self._apply_axis(Y, a, self._Xa[a]) for a in range(self.d)]

    # --- Hermite coefficients <-> gradients at the points -----------------------------------
    def _gradients(self, c: np.ndarray) -> list[np.ndarray]:
        x = np.asarray(c, dtype=float).reshape(self.hermite.shape)
        return [apply_along_axes(x, [r[2] for r in rules]) for rules in self._rules]

    def _gradients_adjoint(self, h: list[np.ndarray]) -> np.ndarray:
        out = np.zeros(self.hermite.shape)
        for ha, rules in zip(h, self._rules):
            out += apply_along_axes(ha, [r[2].T for r in rules])
        return out.ravel()

    # --- residual <-> accumulators ----------------------------------------------------------
    def _test_adjoint(self, r: np.ndarray, X: list[np.ndarray], h: list[np.ndarray]) -> None:
        """``h_a += X_a * (otimes_b T_b)^T r``; with the factored rules ``r`` already carries ``otimes_b N_b^T``."""
        for a in range(self.d):
            if self._factored:
                t = self._apply_axis(r, a, self._TaT[a])
            else:
                t = apply_along_axes(r, [T.T for T, _, _ in self._rules[a]])
            np.multiply(t, X[a], out=t)
            h[a] += t

    def _accumulate_residual(self, q: np.ndarray, r: np.ndarray, h: list[np.ndarray]) -> None:
        if self._factored:
            r = apply_along_axes(r, self._Nt)
        self._test_adjoint(r, self._points(q), h)

    # --- products ---------------------------------------------------------------------------
    def _matvec(self, c: np.ndarray) -> np.ndarray:
        if self.device != "cpu":
            if self._batched is None:
                self._batched = BatchedMixedFlux(self, self._xp)
            self.n_matvec += 1
            return self._batched.matvec(c)
        g = self._gradients(c)
        if self._modes is not None:
            parts = [list(enumerate(self._modes))]
            size = sum(int(np.prod(hh.shape)) for hh in self._accumulators())
            if getattr(self, "_cache", None) is None and 8 * size * self.n_modes <= POINTS_CACHE_BYTES:
                self._cache = [None] * self.n_modes
        else:
            parts = (list(enumerate(pbar, -len(pbar))) for _, (pbar, _) in self._pbar_chunks())
        cache = getattr(self, "_cache", None)
        sums = []

        def work(items):
            h = self._accumulators()
            buf = self._accumulators()
            for m, q in items:
                if cache is not None and m >= 0:
                    if cache[m] is None:
                        cache[m] = self._points(q)
                    X = cache[m]
                else:
                    X = self._points(q)
                if self._factored:
                    u = self._apply_axis(np.multiply(X[0], g[0], out=buf[0]), 0, self._Ta[0])
                    for a in range(1, self.d):
                        u += self._apply_axis(np.multiply(X[a], g[a], out=buf[a]), a, self._Ta[a])
                    self._test_adjoint(apply_along_axes(u, self._NtN), X, h)
                else:
                    r = sum(apply_along_axes(X[a] * g[a], [T for T, _, _ in self._rules[a]]) for a in range(self.d))
                    self._test_adjoint(r, X, h)
            sums.append(h)

        for items in parts:
            threaded(work, items)
        h = [sum(s[a] for s in sums) for a in range(self.d)]
        self.n_matvec += 1
        return self._gradients_adjoint(h)
