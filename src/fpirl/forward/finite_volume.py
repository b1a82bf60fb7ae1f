"""Scharfetter-Gummel finite-volume solver of eq. fokker_planck_eq with no-flux walls."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import expm_multiply, splu

from ..core._errors import FpirlInputError
from ..core._threads import one_blas_thread
from ..core._splines import spline_matrix
from ..core.validation import positive
from ._common import _ForwardSolver, _bounds, _per_axis
from ._lanczos import SymmetrisedGenerator

def _bernoulli(x: np.ndarray) -> np.ndarray:
    """``B(x) = x / (exp(x) - 1)`` without overflow (``B(0) = 1``)."""
    x = np.asarray(x, dtype=float)
    out = np.empty_like(x)
    small = np.abs(x) < 1e-10
    pos = x >= 1e-10
    neg = x <= -1e-10
    out[small] = 1.0 - 0.5 * x[small]
    xp = x[pos]
    out[pos] = xp * np.exp(-xp) / -np.expm1(-xp)
    xn = x[neg]
    out[neg] = xn / np.expm1(xn)
    return out


def _talbot_rule(n: int = 28) -> tuple[np.ndarray, np.ndarray]:
    """Nodes ``z_k`` and weights ``w_k`` (upper half plane, conjugate pairs folded in) with
    ``exp(x) ~ sum_k Re(w_k / (z_k - x))`` uniformly for ``x <= 0``.

    Trapezoidal rule on the cotangent contour ``z(t) = n(-0.6122 + 0.5017 t cot(0.6407 t) +
    0.2645 i t)`` of Trefethen, Weideman & Schmelzer (BIT 46, 2006), error ~3.9^-n (8.8e-15 at
    ``n = 28``, measured on ``[-1e6, 0]``). Weights are rescaled so that the rule is exact at
    ``x = 0`` (exact mass conservation).
    """
    theta = np.pi * (np.arange(n // 2) + 0.5) * 2.0 / n  # upper half: theta in (0, pi)
    a, b, c, d = -0.6122, 0.5017, 0.6407, 0.2645
    z = n * (a + b * theta / np.tan(c * theta) + 1j * d * theta)
    dz = n * (b / np.tan(c * theta) - b * c * theta / np.sin(c * theta) ** 2 + 1j * d)
    w = 2.0 * np.exp(z) * dz / (1j * n)  # factor 2: conjugate partner
    w /= np.sum(w / z).real
    return z, w


_TALBOT = _talbot_rule()


def talbot_nodes(rtol: float | None) -> int:
    """The fewest (even) Talbot nodes whose rule :func:`_talbot_rule` approximates ``exp(x)`` on ``(-inf, 0]`` within
    ``rtol`` (absolute, i.e. relative to ``exp(0) = 1``); 28 (the most accurate, ~1e-14) for ``None``.

    The rule's uniform error is about ``4.4 * 3.9^-n`` (measured on ``[-1e6, 0]``: 1.5e-9 at ``n = 16``, 6.7e-12
    at 20, 3.3e-14 at 24); ``n = ceil(log(5 / rtol) / log(3.9))`` rounded up to even, within ``[8, 28]``.
    """
    if rtol is None:
        return 28
    rtol = positive(rtol, "rtol")
    n = math.ceil(math.log(5.0 / rtol) / math.log(3.9))
    return int(min(28, max(8, n + n % 2)))


#: Most work the ``'expm'`` method takes per output interval, in products of generator entries: its scaled Taylor
#: series costs about ``5 ||L||_1 dt`` sparse products (a 4-D grid of 16^4 points at ``beta = 5``, ``dt = 0.02``:
#: 1e7; ``beta = 1e-5`` on 41^3 points: 8e14, hours). Beyond it the solver refuses with a one-line error.
EXPM_MAX_WORK = 2e10
#: Accuracy of the ``'lanczos'`` exponential when no ``rtol`` is given (relative to the largest density value): far
#: below the scheme's ``O(h^2)``, and loose enough that moderately steep potentials keep the method (module doc of
#: :mod:`fpirl.forward._lanczos`).
LANCZOS_RTOL = 1e-10


def _factorise(matrix: sp.spmatrix):
    """Sparse LU of ``z I - tau L`` for a Talbot node ``z`` (``Im z > 0``), without pivoting.

    ``L`` is diagonally similar to a symmetric negative semi-definite matrix, so ``z I - tau L``
    is a diagonal similarity transform of a complex symmetric matrix whose imaginary part
    ``Im(z) I`` is definite: every leading block is non-singular and every pivot has imaginary
    part ``>= Im(z)``, so elimination without pivoting exists (and a diagonal similarity leaves
    the pivots unchanged). Results agree with ``expm_multiply`` to ~1e-13 relative in the tests,
    also with strong drift. Threshold pivoting destroys the symmetric fill-reducing ordering
    (factorisations were 15-35x slower with it on 2-D grids).
    """
    return splu(
        matrix.tocsc(),
        permc_spec="MMD_AT_PLUS_A",
        diag_pivot_thresh=0.0,
        options={"SymmetricMode": True},
    )


# --------------------------------------------------------------------------------------------
# common base
# --------------------------------------------------------------------------------------------
class FiniteVolumeSolver(_ForwardSolver):
    r"""Scharfetter-Gummel finite-volume solver of eq. ``fokker_planck_eq`` with no-flux walls.

    Solves :math:`\partial_t p = -\nabla\cdot J`, :math:`J = -(p\nabla\psi + \beta^{-1}\nabla p)`,
    with :math:`J\cdot n = 0` on the walls of the box.

    *Space.* Vertex-centred: ``M_i`` uniform nodes per axis including both walls,
    ``x_j = lower + j h``, ``h = L / (M - 1)``; the control volume of a node is its dual cell
    (half cells at the walls). The flux through the face between neighbours ``l`` and ``r``
    along one axis is the Scharfetter-Gummel (exponential fitting) flux, exact for a
    linear ``psi`` on the edge:

    .. math::

        J_{l\to r} = \frac{1}{\beta h}\left[B(\Delta)\,p_l - B(-\Delta)\,p_r\right],\qquad
        \Delta = \beta(\psi_r - \psi_l),\quad B(x) = \frac{x}{e^x - 1}.

    Wall faces carry no flux. The resulting generator ``L`` (``dp/dt = L p``) has non-negative
    off-diagonal entries (positivity), volume-weighted column sums equal to zero (exact mass
    conservation) and ``exp(-beta psi)`` at the nodes as its exact discrete equilibrium. The
    scheme is second order in ``h`` (:attr:`space_order`).

    *Time.* Exact up to the approximation of the exponential (``rtol``; by default ~1e-14 in 1-D, 1e-10
    beyond): ``p(t_{k+1}) = exp(L (t_{k+1} - t_k)) p(t_k)``; there is no time-stepping error. ``L`` is
    similar to a symmetric negative semi-definite matrix (detailed balance with respect to
    ``exp(-beta psi)``), so its spectrum lies on ``(-inf, 0]``. Three ways to apply the exponential:

    * ``'rational'``: Talbot contour quadrature (Trefethen, Weideman & Schmelzer, BIT 2006),
      ``exp(A) v ~ sum_k w_k (z_k I - A)^{-1} v`` with 28 nodes (14 complex sparse LU
      factorisations, reused for every output interval of the same length); error below 1e-14
      uniformly on ``(-inf, 0]`` and a cost independent of ``||L|| dt``. The weights are scaled so
      that ``r(0) = 1`` exactly, hence mass is conserved to rounding.
    * ``'lanczos'``: detailed balance makes ``L`` similar to a symmetric matrix ``S``; ``exp(S dt)`` is applied
      by the Lanczos process (:mod:`fpirl.forward._lanczos`), stopped on an a-posteriori estimate within ``rtol``
      (default :data:`LANCZOS_RTOL`) of ``max p``, some 15-30 sparse products per interval, mass conserved to
      rounding. The similarity's scaling spans ``exp(beta (max psi - min psi) / 2)``, which amplifies rounding:
      where that rules the tolerance out for an interval's density, or the estimate stalls, the interval is left
      to ``'rational'`` (1-D, and 2-D up to 70,000 nodes) or ``'expm'`` (beyond).
    * ``'expm'``: :func:`scipy.sparse.linalg.expm_multiply` (scaled truncated Taylor series,
      double-precision tolerance); cost grows with ``||L|| dt ~ 4 d dt / (beta h^2)``, and an interval that
      would cost more than :data:`EXPM_MAX_WORK` is refused with a one-line error (a tiny ``beta``).

    ``'auto'`` (default) picks ``'rational'`` in 1-D and ``'lanczos'`` from 2-D on (where the scaling is
    representable; else the fallback above; in 2-D an interval with ``||L||_1 dt`` above one Lanczos application's
    (:meth:`fpirl.forward._lanczos.SymmetrisedGenerator.max_stiffness`, 400) goes to the Talbot rule, whose cost does
    not grow with it). Measured (docs/benchmarks.md): on 161^2 nodes, ``beta = 5``, two
    intervals ``dt = 0.5`` took 1.7-2.0 s rational, 0.6 s lanczos, 23 s expm; on 97^2 nodes, 30 intervals, 1.4 s
    rational against 0.18 s lanczos; on 49^3 nodes (``beta = 4``, ``||L|| dt = 44``) lanczos took a third of
    expm's time. SuperLU factorisations of 3-D and 4-D stencils are slow (seconds already at 17^3 nodes), so the
    rational method's 14 factors suit 1-D and 2-D only.

    Positivity: ``exp(t L)`` maps non-negative data to non-negative data exactly (``L`` is a
    Metzler matrix); the ~1e-14 error of the exponential's evaluation can leave negatives of
    that size relative to ``max p`` where the density is essentially zero.

    Parameters
    ----------
    lower, upper : array_like, shape (d,)
        The box (walls).
    points : int or sequence of int
        Nodes per axis ``M_i`` including both walls (at least 3).
    potential : callable
        ``potential(points)`` with points of shape ``(..., d)`` returns ``psi``, shape ``(...)``.
    beta : float
        Inverse temperature (> 0).
    method : {'auto', 'rational', 'lanczos', 'expm'}
        How ``exp(L dt) p`` is applied (see above).
    rtol : float, optional
        Accuracy of the ``'rational'`` exponential: the Talbot rule with the fewest nodes within ``rtol``
        (:func:`talbot_nodes`; each node pair is one factorisation and one solve per output time). Default: 28
        nodes, ~1e-14. For ``'lanczos'``: the stopping tolerance relative to ``max p`` (default
        :data:`LANCZOS_RTOL`). ``'expm'`` ignores it (double precision).

    Attributes
    ----------
    space_order : int
        Order in the node spacing ``h`` (2).
    time_order : float
        ``inf``: exact in time (no time stepping; see above).
    factorisations : int
        Number of sets of Talbot LU factorisations computed so far (one per distinct output
        interval; equally spaced output times need one).
    lanczos_fallbacks : int
        Intervals of ``'lanczos'`` left to the fallback method (rounding above the tolerance, or no convergence; after
        the latter ``method`` becomes the fallback's).
    generator : scipy.sparse.csr_matrix
        ``L``, shape ``(n, n)`` with ``n = prod(M_i)`` in C order over the axes.
    volumes : ndarray, shape ``shape``
        Control-volume measures (the tensor trapezoidal weights).
    """

    space_order = 2
    time_order = math.inf  # exact exponential in time

    def __init__(self, lower, upper, points, potential: Callable, beta, *, method: str = "auto", rtol=None):
        self.lower, self.upper = _bounds(lower, upper)
        d = self.lower.size
        self.points = _per_axis(points, d, 3, "points")
        self.beta = positive(beta, "beta")
        self.coords = [np.linspace(lo, hi, m) for lo, hi, m in zip(self.lower, self.upper, self.points)]
        self.spacing = (self.upper - self.lower) / (np.array(self.points) - 1)
        self._weights = []
        for m, h in zip(self.points, self.spacing):
            w = np.full(m, h)
            w[[0, -1]] *= 0.5
            self._weights.append(w)
        vol = np.ones(())
        for w in self._weights:
            vol = np.multiply.outer(vol, w)
        self.volumes = vol

        psi = np.asarray(potential(self.mesh()), dtype=float)
        if psi.shape != self.shape:
            raise FpirlInputError(f"potential returned shape {psi.shape}, expected {self.shape}")
        if not np.all(np.isfinite(psi)):
            raise FpirlInputError("potential returned NaN or infinite values")
        self.psi = psi
        self.generator = self._assemble()
        self._trace = float(self.generator.diagonal().sum())
        self._norm1 = float(abs(self.generator).sum(axis=0).max())  # ||L||_1: the expm method's cost
        if method not in ("auto", "rational", "lanczos", "expm"):
            raise FpirlInputError(f"method must be 'auto', 'rational', 'lanczos' or 'expm', got {method!r}")
        self._talbot = _TALBOT if rtol is None else _talbot_rule(talbot_nodes(rtol))
        self._lanczos_rtol = LANCZOS_RTOL if rtol is None else positive(rtol, "rtol")
        self._symmetric = None
        if method in ("auto", "lanczos") and not (method == "auto" and self.ndim == 1):
            self._symmetric = SymmetrisedGenerator(self.generator, self.volumes.ravel(), self.psi.ravel(), self.beta)
            method = "lanczos" if self._symmetric.usable() else self._fallback_method()
        elif method == "auto":
            method = "rational"
        self.method = method
        self.lanczos_fallbacks = 0
        self._factors: tuple[float, list] | None = None
        self.factorisations = 0

    def _assemble(self) -> sp.csr_matrix:
        n = int(np.prod(self.shape))
        index = np.arange(n).reshape(self.shape)
        rows, cols, data = [], [], []
        for a in range(self.ndim):
            left = [slice(None)] * self.ndim
            right = [slice(None)] * self.ndim
            left[a], right[a] = slice(0, -1), slice(1, None)
            left, right = tuple(left), tuple(right)
            shape_w = [1] * self.ndim
            shape_w[a] = -1
            area = (self.volumes / self._weights[a].reshape(shape_w))[left]  # prod_{b != a} w_b
            delta = self.beta * (self.psi[right] - self.psi[left])
            coef = area / (self.beta * self.spacing[a])
            fwd = (coef * _bernoulli(delta)).ravel()  # rate l -> r (mass per unit density at l)
            bwd = (coef * _bernoulli(-delta)).ravel()  # rate r -> l
            il, ir = index[left].ravel(), index[right].ravel()
            rows += [ir, il, il, ir]
            cols += [il, il, ir, ir]
            data += [fwd, -fwd, bwd, -bwd]
        mass_gen = sp.csr_matrix(
            (np.concatenate(data), (np.concatenate(rows), np.concatenate(cols))), shape=(n, n)
        )  # duplicates are summed
        return sp.csr_matrix(sp.diags(1.0 / self.volumes.ravel()) @ mass_gen)

    def equilibrium(self) -> np.ndarray:
        """The exact discrete equilibrium ``exp(-beta psi)`` at the nodes, unit mass."""
        q = np.exp(-self.beta * (self.psi - self.psi.min()))
        return q / float(self.mass(q))

    def _fallback_method(self) -> str:
        """Where ``'lanczos'`` cannot take an interval: ``'rational'`` in 1-D and in 2-D up to 70,000 nodes (its LU
        factors then take a few hundred MB at most), else ``'expm'`` (class doc)."""
        return "rational" if self.ndim == 1 or (self.ndim == 2 and self.generator.shape[0] <= 70_000) else "expm"

    def _expm(self, v, interval):
        stiffness = self._norm1 * interval
        if 5 * stiffness * self.generator.nnz > EXPM_MAX_WORK:  # refuse instead of running for ages
            raise FpirlInputError(
                f"the diffusion is too fast for the finite-volume solver's exponential: ||L|| dt = {stiffness:.3g} "
                f"(beta = {self.beta:.3g}) asks for about {5 * stiffness:.2g} sparse products of "
                f"{self.generator.nnz:,} entries per output interval; ask for closer output times or a coarser grid")
        return np.asarray(expm_multiply(self.generator * interval, v, traceA=self._trace * interval))

    def _lanczos(self, v, interval):
        """``exp(L interval) v`` by :mod:`fpirl.forward._lanczos`, in substeps of ``||L||_1 dt`` up to
        :meth:`~fpirl.forward._lanczos.SymmetrisedGenerator.max_stiffness` (400; less on grids too large for 100
        Krylov vectors in memory).

        The fallback method (:meth:`_fallback_method`) takes the interval instead where it needs several substeps and
        the fallback is the Talbot rule (whose cost does not grow with ``||L|| dt``), and where the estimate stalls
        (steep potentials, module doc there); where the Krylov space did not converge it takes every later one too."""
        n_sub = max(1, math.ceil(self._norm1 * interval / self._symmetric.max_stiffness()))
        if n_sub > 1 and self._fallback_method() == "rational":
            return self._rational(v, interval)  # its cost does not grow with ||L|| dt (161^2 nodes, dt 0.5: 3.1 s vs 4.0)
        if n_sub * self._symmetric.max_vectors() * self.generator.nnz > EXPM_MAX_WORK:
            return self._expm(v, interval)  # (which refuses where it is hopeless)
        p = v
        for _ in range(n_sub):
            p, steps = self._symmetric.apply(interval / n_sub, p, self._lanczos_rtol)
            if p is None:
                self.lanczos_fallbacks += 1
                fallback = self._fallback_method()
                if steps:  # the Krylov space did not converge: no use trying again
                    self.method = fallback
                return self._expm(v, interval) if fallback == "expm" else self._rational(v, interval)
        return p

    def _advance(self, state, interval):
        v = state.ravel()
        step = {"expm": self._expm, "lanczos": self._lanczos, "rational": self._rational}[self.method]
        return step(v, interval).reshape(self.shape)

    def _rational(self, v, interval):
        # equally spaced output times give intervals t_{k+1} - t_k that differ in the last bits:
        # reuse the factorisations when the interval agrees to 1e-12 relative (a time error far
        # below the 1e-14 accuracy of the rational approximation)
        with one_blas_thread():  # SuperLU's supernodes are small BLAS calls (module doc of _threads)
            if self._factors is None or not math.isclose(self._factors[0], interval, rel_tol=1e-12, abs_tol=0.0):
                self._factors = None  # release the previous factorisations first
                self.factorisations += 1
                n = v.size
                a = (self.generator * interval).astype(complex).tocsc()
                eye = sp.identity(n, dtype=complex, format="csc")
                self._factors = (
                    interval,
                    [(w, _factorise(z * eye - a)) for z, w in zip(*self._talbot)],
                )
            out = np.zeros(v.size)
            vc = v.astype(complex)
            for w, lu in self._factors[1]:
                out += (w * lu.solve(vc)).real
        return out

    def evaluation_matrices(self, coords):
        """Per-axis matrices of the tensor-product cubic (not-a-knot) spline through the nodes.

        Coordinates must lie in ``[lower, upper]``. The interpolation error, O(h^4), is far
        below the solver's O(h^2) error; at the solver's own nodes it is exact.
        """
        if len(coords) != self.ndim:
            raise FpirlInputError(f"need {self.ndim} coordinate arrays, got {len(coords)}")
        mats = []
        for c, x, lo, hi in zip(coords, self.coords, self.lower, self.upper):
            c = np.ravel(np.asarray(c, dtype=float))
            tol = 1e-12 * (hi - lo)
            if np.any(c < lo - tol) or np.any(c > hi + tol):
                raise FpirlInputError(f"coordinates outside [{lo:g}, {hi:g}] cannot be evaluated")
            mats.append(spline_matrix(x, np.clip(c, lo, hi)))
        return mats


# --------------------------------------------------------------------------------------------
# convenience
# --------------------------------------------------------------------------------------------
