"""The MDP state transition ``T(s'|s,a)`` (paper eqs. gaussian_transition, mdp_transition).

A Gaussian in ``s'`` with mean ``s - grad_s psi(s,a) dt`` and covariance ``(2 dt / beta) I``,
wrapped on periodic axes and reflected at walls. The kernel is separable (a product of 1-D
Gaussians, one per state axis), so it is stored as one factor matrix of shape
``(n_sources, n_nodes_axis)`` per state axis, where ``n_sources = grid.size`` enumerates all joint
nodes ``(s, a)`` in C order. No dense ``(n_s n_a) x n_s`` matrix is formed except by
:meth:`GaussianTransition.dense` (tests only).
"""

from __future__ import annotations

import warnings

import numpy as np

from ..core._errors import FpirlInputError
from ..core.grid import Grid
from ..core.validation import _nodal, _positive, _require_axes, _state_weights, state_shape
from ._kernel_1d import _BLOCK_ELEMENTS, _kernel_1d, _outer_sum

_DISCRETIZATIONS = ("moment", "nodal", "projection")
#: below these sigma / h the approximate kernels' moments are off by more than ~1% (warned about)
_POOR_BELOW = {"nodal": 0.7, "projection": 4.0}

# --------------------------------------------------------------------------------------------
# transition
# --------------------------------------------------------------------------------------------
class GaussianTransition:
    r"""Discretised MDP transition ``T(s'|s,a)`` of a Fokker-Planck potential.

    Eq. ``gaussian_transition`` marginalised over ``a'`` (eq. ``mdp_transition``):

    .. math::

        T(s'|s,a) = \prod_{k=1}^{d_s} \mathcal{N}\big(s'_k;\; s_k - \partial_{s_k}\psi(s,a)\,\Delta t,
        \; 2\Delta t/\beta\big),

    wrapped (sum over periodic images) on periodic axes and folded at reflecting walls (method of
    images), so no probability leaves the domain.

    Discretisation of each 1-D factor (every factor is then normalised so that the grid quadrature
    of ``T`` over ``s'`` is exactly 1, to round-off, for every source node ``(s, a)``:
    ``sum_{s'} w(s') T(s'|s,a) = 1`` with ``w`` the trapezoid node weights). With
    ``sigma = sqrt(2 dt / beta)``, node spacing ``h`` and the moments taken with the node weights:

    * ``'moment'`` (default): the hat projection ``K_j = E[phi_j(X)] / w_j`` of a Gaussian
      ``X ~ N(mu, tau^2)`` whose width ``tau <= sigma`` is chosen per source so that the kernel's
      variance is exactly ``sigma^2`` (the hats interpolate ``x^2`` from above, adding
      ``E[(X - x_l)(x_r - X)]``; ``tau`` comes from a monotone 1-D equation, see
      ``fpirl.mdp._kernel_1d._moment_tau2``). The mean is exact for any ``sigma`` (hats reproduce linear
      functions), the variance exact wherever a non-negative kernel can have it: when
      ``sigma^2 < h^2 theta (1 - theta)`` (``theta`` the source's position in its cell, possible
      only for ``sigma < h/2``) no non-negative nodal kernel with mean ``mu`` is that narrow, and
      the kernel is the two-node one of least variance ``h^2 theta (1 - theta)``. Measured
      (test): mean within 1e-13 h and variance within 1e-5 relative of ``max(sigma^2,
      h^2 theta (1 - theta))`` at ``sigma / h`` = 0.2, 0.5, 1, 2. Walls fold the Gaussian as
      below (``tau`` from the interior rule);
    * ``'nodal'`` (the paper's pointwise kernel): aliasing error ~ ``exp(-2 pi^2 sigma^2 / h^2)``;
      mean off by 2e-2 h and variance by +-14% at ``sigma = h/2``, 4e-4 h and 0.2% at
      ``sigma = 0.7 h``, negligible for ``sigma >= h``; at ``sigma = 0.3 h`` the kernel collapses
      onto one node (mean off by 0.2 h);
    * ``'projection'``: ``tau = sigma``: exact mean, variance ``sigma^2 + h^2/6``.

    The two approximate kernels warn (RuntimeWarning) below ``sigma / h`` = 0.7 ('nodal') and 4
    ('projection'), where their moments are off by more than about 1%.

    Storage is separable: ``factors[k]`` has shape ``(grid.size, n_nodes of state axis k)``, rows
    indexed by the joint source node ``(s, a)`` in C order of ``grid.shape``. Where ``grad_s psi`` is 0
    along state axis ``k`` at every node (psi constant along it: a track fit's psi of the velocities alone),
    every mean is its own node's, so that factor's rows are computed once per node and gathered.

    Parameters
    ----------
    grid : Grid
        Joint state-action grid.
    grad_s_psi : array_like, shape ``(len(grid.state_axes), *grid.shape)``
        ``d psi / d s_k`` at the nodes, one slice per state axis (in ``grid.state_axes`` order).
    beta : float
        Inverse temperature, > 0.
    dt : float
        Time step of the MDP, > 0.
    discretization : {'moment', 'nodal', 'projection'}
        See above (default 'moment').
    tabulated : bool, default False
        Interpolate the factors of 'projection', and of 'moment' at ``sigma > h/2``, in a table of
        exact rows (8,192 mean offsets per node spacing, computed once per ``sigma``, spacing and
        period and cached) instead of computing every row; used for axes with more than 8,192 rows
        (others are exact). The mean stays exact, the rows normalised, the variance within 2e-8
        relative of the exact kernel's, and every row within 1e-8 of its maximum of the exact row
        (tests/test_transition_table.py): ~8x faster at 15^4 nodes, for the many recoveries of the
        credible bands (:func:`fpirl.uncertainty.credible_bands`).
    """

    def __init__(self, grid: Grid, grad_s_psi, beta: float, dt: float, discretization: str = "moment",
                 tabulated: bool = False):
        _require_axes(grid)
        ds = len(grid.state_axes)
        grad = _nodal(grid, grad_s_psi, "grad_s_psi", lead=1)
        if grad.shape[0] != ds:
            raise FpirlInputError(f"grad_s_psi has {grad.shape[0]} components, expected {ds} (one per state axis)")
        if discretization not in _DISCRETIZATIONS:
            raise FpirlInputError(f"discretization must be one of {_DISCRETIZATIONS}, got {discretization!r}")
        self.grid = grid
        self.beta = _positive(beta, "beta")
        self.dt = _positive(dt, "dt")
        self.discretization = discretization
        self.tabulated = bool(tabulated)
        self.sigma = float(np.sqrt(2.0 * self.dt / self.beta))
        self.warn_if_poor(stacklevel=3)
        self.state_shape = state_shape(grid)
        self.factors = []
        for k, i in enumerate(grid.state_axes):
            axis = grid.axes[i]
            shape_i = [-1 if j == i else 1 for j in range(grid.ndim)]
            if not np.any(grad[k]):  # no drift along this axis: every source's mean is its own node, so its row is
                # that node's row (one row per node, gathered; e.g. psi constant along the positions of tracks)
                node = np.broadcast_to(np.arange(axis.n_nodes).reshape(shape_i), grid.shape).ravel()
                self.factors.append(_kernel_1d(axis, axis.nodes, self.sigma, discretization, self.tabulated)[node])
                continue
            mean = np.broadcast_to(axis.nodes.reshape(shape_i) - grad[k] * self.dt, grid.shape).ravel()
            self.factors.append(_kernel_1d(axis, mean, self.sigma, discretization, self.tabulated))
        self._w_joint = grid.node_weights()
        self._w_state = _state_weights(grid)

    def warn_if_poor(self, stacklevel: int = 2) -> None:
        """RuntimeWarning when an approximate kernel ('nodal', 'projection') is used below the
        ``sigma / h`` where its mean or variance errs by more than about 1% (``_POOR_BELOW``)."""
        if self.discretization not in _POOR_BELOW:
            return
        ratio = min(self.sigma / self.grid.axes[i].spacing for i in self.grid.state_axes)
        if ratio < _POOR_BELOW[self.discretization]:
            warnings.warn(
                f"the {self.discretization!r} transition kernel is inaccurate at sigma / h = {ratio:.2g} "
                f"(< {_POOR_BELOW[self.discretization]:g}: mean or variance off by more than ~1%); the default "
                "'moment' kernel is exact there", RuntimeWarning, stacklevel=stacklevel + 1,
            )

    @property
    def n_sources(self) -> int:
        return self.grid.size

    def _block(self, inner: int) -> int:
        return max(1, _BLOCK_ELEMENTS // max(1, inner))

    def push(self, p) -> np.ndarray:
        r"""Next-state density of a state-action density (eqs. ``mdp_transition``, ``density_evolution``).

        .. math:: \rho'(s') = \int_S\int_A p(s,a)\, T(s'|s,a)\, da\, ds

        with the grid quadrature over ``(s, a)``. Mass is conserved to round-off:
        ``int rho' ds' = int p ds da``.

        Parameters
        ----------
        p : array_like, shape grid.shape

        Returns
        -------
        ndarray, shape state_shape
        """
        p = _nodal(self.grid, p, "p")
        c = (p * self._w_joint).ravel()
        f = self.factors
        if len(f) == 1:
            return _outer_sum(c[:, None], f[0])[0]
        inner = int(np.prod(self.state_shape[:-1]))
        out = np.zeros((inner, self.state_shape[-1]))
        block = self._block(inner)
        for start in range(0, c.size, block):
            sl = slice(start, start + block)
            m = c[sl, None] * f[0][sl]
            for fk in f[1:-1]:  # row-wise Kronecker (Khatri-Rao) product
                m = (m[:, :, None] * fk[sl, None, :]).reshape(m.shape[0], -1)
            out += _outer_sum(m, f[-1][sl])
        return out.reshape(self.state_shape)

    def expect(self, v) -> np.ndarray:
        r"""Expectation of a state function under the transition, for every source node.

        .. math:: (\mathcal{T} v)(s,a) = E_{s'\sim T(\cdot|s,a)}[v(s')] = \int_S T(s'|s,a)\, v(s')\, ds'

        with the grid quadrature over ``s'``; ``expect(1) == 1`` to round-off.

        Parameters
        ----------
        v : array_like, shape state_shape

        Returns
        -------
        ndarray, shape grid.shape
        """
        v = _nodal(self.grid, v, "v", shape=self.state_shape)
        vw = (v * self._w_state).reshape(-1, self.state_shape[-1])  # (inner, n_last)
        f = self.factors
        out = np.empty(self.n_sources)
        block = self._block(vw.shape[0])
        for start in range(0, out.size, block):
            sl = slice(start, start + block)
            acc = f[-1][sl] @ vw.T  # (rows, prod of the other state axes)
            for fk in f[-2::-1]:
                acc = np.einsum("rij,rj->ri", acc.reshape(acc.shape[0], -1, fk.shape[1]), fk[sl])
            out[sl] = acc[:, 0]
        return out.reshape(self.grid.shape)

    def _by_state(self, values: np.ndarray) -> np.ndarray:
        """Reorder an array of shape ``(*grid.shape, *tail)`` to ``(n_states, n_actions, *tail)``."""
        g = self.grid
        perm = list(g.state_axes) + list(g.action_axes) + list(range(g.ndim, values.ndim))
        n_s = int(np.prod(self.state_shape))
        return np.transpose(values, perm).reshape((n_s, g.size // n_s) + values.shape[g.ndim :])

    def state_kernel(self, policy, max_entries: int = 1 << 25) -> np.ndarray:
        r"""State-to-state transition under a policy (eqs. ``mdp_transition``, ``density_evolution``).

        .. math:: T_\pi(s'|s) = \int_A \pi(a|s)\, T(s'|s,a)\, da

        (grid quadrature over the actions). It is a dense ``n_s x n_s`` array (no action index),
        meant for repeated pushes of densities of the form ``rho(s) pi(a|s)``:
        ``push(rho * pi) == tensordot(w_s * rho, T_pi)``. Its grid quadrature over ``s'`` is 1.

        Parameters
        ----------
        policy : array_like, shape grid.shape
        max_entries : int
            Refuse (FpirlInputError) if ``n_s^2`` exceeds this.

        Returns
        -------
        ndarray, shape (*state_shape, *state_shape)
        """
        policy = _nodal(self.grid, policy, "policy")
        n_s = int(np.prod(self.state_shape))
        if n_s * n_s > max_entries:
            raise FpirlInputError(f"state kernel would have {n_s * n_s} entries (> {max_entries})")
        w_a = np.ones(())
        for i in self.grid.action_axes:
            w_a = np.multiply.outer(w_a, self.grid.axes[i].node_weights)
        wpi = self._by_state(policy) * w_a.reshape(1, -1)  # (n_s, n_a): pi(a|s) w(a)
        f = [self._by_state(fk.reshape(self.grid.shape + (-1,))) for fk in self.factors]  # (n_s, n_a, n_k)
        if len(f) == 1:
            out = np.matmul(wpi[:, None, :], f[0])[:, 0, :]
        else:
            inner = int(np.prod(self.state_shape[:-1]))
            out = np.empty((n_s, inner, self.state_shape[-1]))
            block = max(1, _BLOCK_ELEMENTS // (f[0].shape[1] * inner))
            for start in range(0, n_s, block):
                sl = slice(start, start + block)
                m = wpi[sl, :, None] * f[0][sl]
                for fk in f[1:-1]:
                    m = (m[..., None] * fk[sl, :, None, :]).reshape(m.shape[:2] + (-1,))
                out[sl] = np.matmul(m.transpose(0, 2, 1), f[-1][sl])
        return out.reshape(self.state_shape + self.state_shape)

    def dense(self, max_entries: int = 4_000_000) -> np.ndarray:
        """Dense kernel values ``T(s'|s,a)``, shape ``(*grid.shape, *state_shape)`` (tiny grids only).

        Raises
        ------
        FpirlInputError
            If the result would exceed ``max_entries`` entries.
        """
        n_out = int(np.prod(self.state_shape))
        if self.n_sources * n_out > max_entries:
            raise FpirlInputError(
                f"dense transition would have {self.n_sources * n_out} entries (> {max_entries}); use push/expect"
            )
        t = self.factors[0]
        for fk in self.factors[1:]:
            t = (t[:, :, None] * fk[:, None, :]).reshape(t.shape[0], -1)
        return t.reshape(self.grid.shape + self.state_shape)

    def __repr__(self):
        return (
            f"GaussianTransition(dt={self.dt:g}, beta={self.beta:g}, sigma={self.sigma:.3g}, "
            f"{self.discretization}, {self.grid!r})"
        )
