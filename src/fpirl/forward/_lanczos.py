r"""The exponential of a detailed-balance generator by the symmetric Lanczos process (used by
:class:`fpirl.forward.finite_volume.FiniteVolumeSolver`, method ``'lanczos'``).

The finite-volume generator ``L = V^{-1} G`` (``V`` the control volumes, ``G`` the mass rates) satisfies detailed
balance with respect to ``pi = exp(-beta psi)``: ``G diag(pi)`` is symmetric. With ``T = (V / pi)^{1/2}``,

.. math::
    S = T L T^{-1} = V^{-1/2} \pi^{-1/2} (G \pi) \pi^{-1/2} V^{-1/2}

is symmetric negative semi-definite, its null vector ``u = (V \pi)^{1/2}`` (mass conservation), and

.. math::
    e^{\tau L} p = T^{-1} e^{\tau S} (T p).

``e^{tau S} q`` is taken from the Krylov space of ``S`` and ``q`` (Lanczos with full re-orthogonalisation,
``e^{tau S} q ~ |q| V_m e^{tau T_m} e_1``, ``T_m`` tridiagonal): its error falls superlinearly once ``m`` exceeds
about ``sqrt(tau rho(S))``, so an interval costs some 15-30 sparse products where the Taylor series of
:func:`scipy.sparse.linalg.expm_multiply` takes about ``5 ||L||_1 tau``. The component along ``u`` is kept
exactly (``e^{tau S} u = u``) and the process runs on the rest, so mass is conserved to rounding.

The iteration stops on the a-posteriori estimate of the first neglected term, ``tau beta_m |e_m^T phi_1(tau T_m)
e_1| |q| v_{m+1}`` (Saad, SIAM J. Numer. Anal. 29, 1992; ``phi_1(z) = (e^z - 1)/z``), carried back to the
density (``T^{-1} v_{m+1}``) and measured against ``max |p|``. ``T`` spans ``exp(beta (max psi - min psi) / 2)``;
rounding in the symmetric variables is amplified by up to that factor in ``p`` (the estimate above does not see
it). Where that rounding, ``~1e-15 |T p| max(1 / T) / sqrt(n)``, is not well below the tolerance (a density with mass
where ``exp(-beta psi)`` is small, on a steep potential) or the estimate does not reach the tolerance within
:data:`MAX_VECTORS`, the caller falls back to its other method for that interval (the Talbot rule in 1-D and 2-D, ``expm_multiply``
beyond).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.sparse as sp

#: Most Lanczos vectors kept (an interval that needs more is split into substeps or left to ``expm_multiply``).
MAX_VECTORS = 100
#: Memory of the Lanczos vectors (bytes): fewer vectors on very large grids.
VECTOR_BYTES = 1 << 29
#: Safety factor between the requested tolerance and the a-posteriori estimate (the estimate keeps one term).
SAFETY = 0.1
#: Relative rounding of the symmetric variables assumed by :meth:`SymmetrisedGenerator.apply` (a few ulps).
ROUNDING = 1e-15


def _phi1(z: np.ndarray) -> np.ndarray:
    """``(e^z - 1) / z`` (1 at 0), for ``z <= 0``."""
    out = np.ones_like(z)
    big = np.abs(z) > 1e-8
    out[big] = np.expm1(z[big]) / z[big]
    out[~big] += 0.5 * z[~big]
    return out


class SymmetrisedGenerator:
    """``S = T L T^{-1}`` (module doc) with ``T = (V / pi)^{1/2}`` and the unit null vector of ``S``.

    Parameters
    ----------
    generator : scipy.sparse matrix
        ``L`` (``dp/dt = L p``), detailed balance with respect to ``exp(-beta psi)``.
    volumes, psi : ndarray
        Control volumes and the potential at the nodes (raveled in the generator's order).
    beta : float
    """

    def __init__(self, generator, volumes: np.ndarray, psi: np.ndarray, beta: float):
        shifted = beta * (psi - psi.min())
        self.spread = float(shifted.max())  # beta (max psi - min psi): T's range is exp(spread / 2)
        self.scale = np.exp(0.5 * (np.log(volumes) + shifted))
        self.inverse_scale = 1.0 / self.scale
        S = sp.diags(self.scale) @ generator @ sp.diags(self.inverse_scale)
        self.matrix = ((S + S.T) * 0.5).tocsr()  # symmetric up to rounding already: made exact
        u = np.sqrt(volumes) * np.exp(-0.5 * shifted)
        self.null = u / np.linalg.norm(u)

    def max_vectors(self) -> int:
        """Lanczos vectors allowed: :data:`MAX_VECTORS`, fewer where they would take more than :data:`VECTOR_BYTES`
        (at least 20)."""
        return int(min(MAX_VECTORS, max(20, VECTOR_BYTES // (8 * self.null.size))))

    def max_stiffness(self) -> float:
        """The largest ``||L||_1 tau`` one application is given: the Krylov error falls fast once the space's dimension
        exceeds about ``4 sqrt(rho tau) + 8`` (measured: 20-32 vectors at ``||L||_1 tau = 44``; ``||L||_1 >= rho``), so
        ``((m - 8) / 4)^2`` for ``m`` :meth:`max_vectors`, at most 400."""
        return float(min(400.0, ((self.max_vectors() - 8) / 4.0) ** 2))

    def usable(self) -> bool:
        """Whether the scaling ``T`` is representable (``beta (max psi - min psi)`` below ~1400)."""
        return self.spread < 1400.0

    def apply(self, tau: float, p: np.ndarray, tol: float) -> tuple[np.ndarray | None, int]:
        """``(e^{tau L} p, products)`` within ``tol`` of ``max |p|`` (module doc); ``(None, 0)`` where rounding in the
        symmetric variables, ``~1e-15 |T p| max(1 / T)``, is already above ``tol max |p|`` (``p`` has mass where
        ``exp(-beta psi)`` is small on a steep potential; the rounding of a vector of unit norm is taken as spread
        over its ``n`` entries), ``(None, products)`` where the estimate did not reach
        ``tol`` within the vectors allowed."""
        q = self.scale * p
        top = float(np.abs(p).max())
        if top == 0.0:
            return np.zeros_like(p), 0
        floor = ROUNDING * float(np.linalg.norm(q)) / np.sqrt(q.size) * float(self.inverse_scale.max()) / top
        if floor > SAFETY * tol:
            return None, 0
        along = float(self.null @ q)
        rest = q - along * self.null
        m_max = self.max_vectors()
        w, steps = self._krylov(tau, rest, SAFETY * tol * top, m_max)
        if w is None:
            return None, steps
        return (along * self.null + w) * self.inverse_scale, steps

    def _krylov(self, tau, q, tol, m_max):
        """``e^{tau S} q`` by Lanczos (full re-orthogonalisation), stopped on the density-space estimate."""
        nrm = float(np.linalg.norm(q))
        if nrm == 0.0:
            return np.zeros_like(q), 0
        basis = np.empty((m_max + 1, q.size))
        basis[0] = q / nrm
        alpha, off = np.zeros(m_max), np.zeros(m_max)
        for j in range(m_max):
            w = self.matrix @ basis[j]
            alpha[j] = basis[j] @ w
            w -= alpha[j] * basis[j]
            if j:
                w -= off[j - 1] * basis[j - 1]
            w -= (basis[: j + 1] @ w) @ basis[: j + 1]  # full re-orthogonalisation (keeps T_m faithful)
            off[j] = np.linalg.norm(w)
            broke = off[j] <= 1e-14 * abs(alpha[: j + 1]).max(initial=1e-300)  # an invariant subspace: exact
            basis[j + 1] = w / off[j] if not broke else 0.0
            if broke or (j >= 3 and j % 2 == 1) or j == m_max - 1:
                ev, vec = scipy.linalg.eigh_tridiagonal(alpha[: j + 1], off[:j])
                coeff = vec @ (np.exp(tau * ev) * vec[0])
                if broke:
                    return nrm * (coeff @ basis[: j + 1]), j + 1
                last = vec[-1] @ (_phi1(tau * ev) * vec[0])
                err = nrm * tau * off[j] * abs(last) * float(np.abs(basis[j + 1] * self.inverse_scale).max())
                if err <= tol:
                    return nrm * (coeff @ basis[: j + 1]), j + 1
        return None, m_max
