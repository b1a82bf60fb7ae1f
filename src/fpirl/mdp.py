"""Recover the MDP (Q-function, policy, transition, reward) from a Fokker-Planck potential.

Paper section 3, DESIGN section 3. With ``x = (s, a)`` the joint state-action variable and
``psi`` the potential of the Fokker-Planck PDE on a :class:`~fpirl.grid.Grid`:

* ``Q(s, a) = -psi(s, a)`` (Value-Potential Equivalence, eq. ``conjecture_equivalence``);
* ``pi(a|s) = exp(beta Q(s,a)) / int_A exp(beta Q(s,a')) da'`` (eq. ``boltzmann_policy``);
* ``T(s'|s,a)`` Gaussian in ``s'`` with mean ``s - grad_s psi(s,a) dt`` and covariance
  ``(2 dt / beta) I`` (eq. ``gaussian_transition`` marginalised over ``a'``, eq. ``mdp_transition``);
* ``R(s,a) = Q(s,a) - gamma E_{s'~T(.|s,a), a'~pi(.|s')} Q(s',a')`` (eq. ``inverse_bellman``).

Everything acts on NODAL arrays of shape ``grid.shape``; functions of the state only have the
shape of the state axes (``state_shape(grid)``, in the order of ``grid.state_axes``). Integrals
use the grid's own trapezoid quadrature (:meth:`Grid.integrate`), also over the actions.

The transition kernel is separable (a product of 1-D Gaussians, one per state axis), so it is
stored as one factor matrix of shape ``(n_sources, n_nodes_axis)`` per state axis, where
``n_sources = grid.size`` enumerates all joint nodes ``(s, a)`` in C order. No dense
``(n_s n_a) x n_s`` matrix is formed except by :meth:`GaussianTransition.dense` (tests only).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr

from ._errors import FpirlInputError
from .grid import Axis, Grid

#: Default discount factor. The paper only requires ``gamma in [0, 1)`` and states no value.
DEFAULT_GAMMA = 0.99

_DISCRETIZATIONS = ("nodal", "projection")
_BLOCK_ELEMENTS = 1 << 22  # ~32 MB of float64 per temporary block

__all__ = [
    "DEFAULT_GAMMA",
    "GaussianTransition",
    "MDP",
    "boltzmann_policy",
    "inverse_bellman_reward",
    "recover_mdp",
    "state_marginal",
    "state_shape",
]


# --------------------------------------------------------------------------------------------
# small helpers shared with simulate.py / metrics.py
# --------------------------------------------------------------------------------------------
def state_shape(grid: Grid) -> tuple[int, ...]:
    """Shape of a nodal function of the state only (state axes in grid order)."""
    return tuple(grid.shape[i] for i in grid.state_axes)


def _expand_state(grid: Grid, values: np.ndarray) -> np.ndarray:
    """Insert size-1 action axes into ``(*lead, *state_shape)`` so it broadcasts to ``grid.shape``."""
    lead = values.ndim - len(grid.state_axes)
    for i in grid.action_axes:  # ascending, so earlier insertions sit at lower positions
        values = np.expand_dims(values, lead + i)
    return values


def _state_weights(grid: Grid) -> np.ndarray:
    """Tensor-product trapezoid weights over the state axes, shape ``state_shape(grid)``."""
    w = np.ones(())
    for i in grid.state_axes:
        w = np.multiply.outer(w, grid.axes[i].node_weights)
    return w


def _nodal(grid: Grid, values, name: str, lead: int = 0, shape=None) -> np.ndarray:
    values = np.asarray(values, dtype=float)
    shape = grid.shape if shape is None else shape
    if values.ndim != lead + len(shape) or values.shape[lead:] != tuple(shape):
        want = ("(...,) " if lead else "") + str(tuple(shape))
        raise FpirlInputError(f"{name} has shape {values.shape}, expected {want} for {grid!r}")
    if not np.all(np.isfinite(values)):
        raise FpirlInputError(f"{name} contains NaN or infinite values")
    return values


def _positive(value, name: str) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise FpirlInputError(f"{name} must be a positive number, got {value!r}") from None
    if not (np.isfinite(value) and value > 0):
        raise FpirlInputError(f"{name} must be a positive finite number, got {value}")
    return value


def _check_gamma(gamma) -> float:
    gamma = float(gamma)
    if not (0.0 <= gamma < 1.0):
        raise FpirlInputError(f"discount factor gamma must lie in [0, 1), got {gamma}")
    return gamma


def _require_axes(grid: Grid):
    if not grid.state_axes:
        raise FpirlInputError(f"the grid has no state axis: {grid!r}")
    if not grid.action_axes:
        raise FpirlInputError(f"the grid has no action axis: {grid!r}")


def state_marginal(grid: Grid, p) -> np.ndarray:
    """State marginal ``rho(s) = int_A p(s, a) da`` of nodal joint densities.

    Parameters
    ----------
    grid : Grid
    p : array_like, shape (..., *grid.shape)

    Returns
    -------
    ndarray, shape (..., *state_shape(grid))
    """
    p = np.asarray(p, dtype=float)
    return grid.integrate(p, axes=grid.action_axes)


# --------------------------------------------------------------------------------------------
# policy
# --------------------------------------------------------------------------------------------
def boltzmann_policy(grid: Grid, psi, beta: float) -> np.ndarray:
    r"""Boltzmann policy of the potential on the grid nodes (eq. ``boltzmann_policy``).

    .. math::

        \pi(a|s) = \frac{\exp(\beta Q(s,a))}{\int_A \exp(\beta Q(s,a'))\,da'},
        \qquad Q = -\psi,

    evaluated with a log-sum-exp shift (the per-state maximum of ``beta Q`` over the actions), so
    it is stable for arbitrarily large ``beta * psi``. The action integral is the grid's
    trapezoid quadrature over ``grid.action_axes``; hence ``grid.integrate(pi, action_axes) == 1``
    for every state node, to round-off.

    Parameters
    ----------
    grid : Grid
        Joint grid with at least one state and one action axis.
    psi : array_like, shape grid.shape
        Potential at the nodes.
    beta : float
        Inverse temperature, > 0.

    Returns
    -------
    ndarray, shape grid.shape
        ``pi(a|s)``, a density in ``a`` for every state node.
    """
    _require_axes(grid)
    psi = _nodal(grid, psi, "psi")
    beta = _positive(beta, "beta")
    acts = grid.action_axes
    logits = -beta * psi
    shift = logits.max(axis=acts, keepdims=True)
    unnorm = np.exp(logits - shift)  # in (0, 1], equal to 1 at the arg-max: Z > 0 always
    z = grid.integrate(unnorm, axes=acts)
    return unnorm / _expand_state(grid, z)


# --------------------------------------------------------------------------------------------
# transition
# --------------------------------------------------------------------------------------------
def _ramp_mean(m: np.ndarray, sigma: float) -> np.ndarray:
    """``E[max(Y, 0)]`` for ``Y ~ N(m, sigma^2)``."""
    z = m / sigma
    return m * ndtr(z) + sigma * np.exp(-0.5 * z * z) / np.sqrt(2.0 * np.pi)


def _wrap(d: np.ndarray, period: float) -> np.ndarray:
    """Map differences into ``[-period/2, period/2)``."""
    return d - period * np.floor(d / period + 0.5)


def _n_images(extent: float, period: float) -> int:
    """Periodic images on each side so that every neglected image lies > ``extent`` away."""
    return max(0, int(np.ceil(extent / period - 0.5)))


def _nodal_kernel(diffs, period: float, sigma: float) -> np.ndarray:
    """Sum over images of ``exp(-(d + n period)^2 / (2 sigma^2))`` for every ``d`` in ``diffs``.

    ``diffs`` is a list of arrays ``(n_rows, n_nodes)`` (one per mirror source). The result is
    scaled by a per-row constant (a log-sum-exp shift), which the later normalisation removes.
    """
    if sigma < 0.5 * period:
        n = np.arange(-_n_images(9.0 * sigma, period), _n_images(9.0 * sigma, period) + 1) * period
        expo = np.concatenate([-((_wrap(d, period)[..., None] + n) ** 2) for d in diffs], axis=-1)
        expo /= 2.0 * sigma * sigma
        expo -= expo.max(axis=(1, 2), keepdims=True)
        return np.exp(expo).sum(axis=-1)
    # Wide kernel: the Fourier (theta-function) series converges in a handful of terms.
    k = np.arange(1, 64)
    amp = np.exp(-2.0 * (np.pi * sigma * k / period) ** 2)
    k, amp = k[amp > 1e-18], amp[amp > 1e-18]
    out = np.zeros(diffs[0].shape)
    for d in diffs:
        out += 1.0 + 2.0 * np.cos((2.0 * np.pi / period) * d[..., None] * k) @ amp
    return out


def _projected_kernel(diffs, period: float, sigma: float, h: float) -> np.ndarray:
    """Sum over images of ``E[hat((X - x_j)/h)]`` for ``X ~ N(mu, sigma^2)``, ``d = x_j - mu``.

    Uses ``(h - |D|)_+ = R(D + h) - 2 R(D) + R(D - h)`` with the ramp ``R`` and the closed form of
    ``E[R(Y)]`` for a Gaussian ``Y``.
    """
    n = np.arange(-_n_images(9.0 * sigma + h, period), _n_images(9.0 * sigma + h, period) + 1) * period
    out = np.zeros(diffs[0].shape)
    for d in diffs:
        m = -(_wrap(d, period)[..., None] + n)  # mean of X - x_j over the images
        val = _ramp_mean(m + h, sigma) - 2.0 * _ramp_mean(m, sigma) + _ramp_mean(m - h, sigma)
        out += np.maximum(val, 0.0).sum(axis=-1) / h
    return out


def _outer_sum(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """``sum_r outer(left[r], right[r])`` for ``left (N, m)``, ``right (N, n)``.

    Done as a batch of small GEMMs over groups of ``k`` rows plus a sum, instead of one
    ``(m x N) @ (N x n)`` GEMM: multithreaded BLAS handles that tall-skinny shape badly (measured
    60x slower on a 2-core machine shared with other processes), while small GEMMs run
    single-threaded at full speed. Extra work: a sum of ``N m n / k`` numbers.
    """
    n_rows, m = left.shape
    n = right.shape[1]
    k = int(np.clip(131072 // max(1, m * n), 32, 512))
    nb = n_rows // k
    out = left[nb * k :].T @ right[nb * k :]
    if nb:
        step = max(1, _BLOCK_ELEMENTS // (m * n))  # batches per chunk: bounded temporary
        for b in range(0, nb, step):
            e = min(nb, b + step)
            lb = left[b * k : e * k].reshape(e - b, k, m).transpose(0, 2, 1)
            rb = right[b * k : e * k].reshape(e - b, k, n)
            out += np.matmul(lb, rb).sum(axis=0)
    return out


def _kernel_1d(axis: Axis, mean: np.ndarray, sigma: float, discretization: str) -> np.ndarray:
    """Normalised 1-D transition factor ``K[r, j] ~ N(x_j; mean_r, sigma^2)`` on one axis.

    Periodic axes wrap the Gaussian (sum over periodic images); reflecting axes fold it at the
    walls (method of images: a periodic sum of period ``2 L`` of the sources ``mu`` and ``-mu``
    measured from the lower wall). Rows are scaled so that ``K @ axis.node_weights == 1``.
    """
    x = axis.nodes - axis.lower
    mu = mean - axis.lower
    w = axis.node_weights
    out = np.empty((mean.size, x.size))
    period = axis.length if axis.periodic else 2.0 * axis.length
    n_img = 2 * _n_images(9.0 * sigma + axis.spacing, period) + 1
    block = max(1, _BLOCK_ELEMENTS // (x.size * n_img * (1 if axis.periodic else 2)))
    for start in range(0, mean.size, block):
        m = mu[start : start + block, None]
        diffs = [x - m] if axis.periodic else [x - m, x + m]
        if discretization == "nodal":
            k = _nodal_kernel(diffs, period, sigma)
        else:
            k = _projected_kernel(diffs, period, sigma, axis.spacing)
            if not axis.periodic:  # the two mirror hats of a wall node are the same hat
                k[:, [0, -1]] *= 0.5
            k /= w
        out[start : start + block] = k
    # Entries below 1e-30 of their row's maximum cannot affect any sum; zeroing them keeps
    # subnormal numbers (which slow BLAS down by orders of magnitude) out of the contractions.
    out[out < 1e-30 * out.max(axis=1, keepdims=True)] = 0.0
    out /= (out @ w)[:, None]
    return out


class GaussianTransition:
    r"""Discretised MDP transition ``T(s'|s,a)`` of a Fokker-Planck potential.

    Eq. ``gaussian_transition`` marginalised over ``a'`` (eq. ``mdp_transition``):

    .. math::

        T(s'|s,a) = \prod_{k=1}^{d_s} \mathcal{N}\big(s'_k;\; s_k - \partial_{s_k}\psi(s,a)\,\Delta t,
        \; 2\Delta t/\beta\big),

    wrapped (sum over periodic images) on periodic axes and folded at reflecting walls (method of
    images), so no probability leaves the domain.

    Discretisation: each 1-D factor is sampled on the state nodes of its axis
    (``discretization='nodal'``, the paper's pointwise kernel, the default), or projected onto the
    nodal hat functions, ``K_j = E[phi_j(X)] / w_j`` (``'projection'``). Either way every factor
    is then normalised so that the grid quadrature of ``T`` over ``s'`` is exactly 1 (to
    round-off) for every source node ``(s, a)``: ``sum_{s'} w(s') T(s'|s,a) = 1`` with ``w`` the
    trapezoid node weights. Accuracy of the discrete kernel's moments, with
    ``sigma = sqrt(2 dt / beta)`` and node spacing ``h`` (measured, worst case over positions):

    * nodal: aliasing error ~ ``exp(-2 pi^2 sigma^2 / h^2)``; mean off by 2e-2 h and variance by
      +-14% at ``sigma = h/2``, 4e-4 h and 0.2% at ``sigma = 0.7 h``, negligible for
      ``sigma >= h``; at ``sigma = 0.3 h`` the kernel collapses onto one node (mean off by 0.2 h);
    * projection: the mean is exact for any ``sigma`` (hats reproduce linear functions), the
      variance is ``sigma^2 + h^2/6`` (the hat smoothing), so prefer it only when ``sigma < h/2``.

    Storage is separable: ``factors[k]`` has shape ``(grid.size, n_nodes of state axis k)``, rows
    indexed by the joint source node ``(s, a)`` in C order of ``grid.shape``.

    Parameters
    ----------
    grid : Grid
        Joint state-action grid.
    grad_s_psi : array_like, shape (len(grid.state_axes), *grid.shape)
        ``d psi / d s_k`` at the nodes, one slice per state axis (in ``grid.state_axes`` order).
    beta : float
        Inverse temperature, > 0.
    dt : float
        Time step of the MDP, > 0.
    discretization : {'nodal', 'projection'}
        See above.
    """

    def __init__(self, grid: Grid, grad_s_psi, beta: float, dt: float, discretization: str = "nodal"):
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
        self.sigma = float(np.sqrt(2.0 * self.dt / self.beta))
        self.state_shape = state_shape(grid)
        self.factors = []
        for k, i in enumerate(grid.state_axes):
            axis = grid.axes[i]
            coord = axis.nodes.reshape([-1 if j == i else 1 for j in range(grid.ndim)])
            mean = np.broadcast_to(coord - grad[k] * self.dt, grid.shape).ravel()
            self.factors.append(_kernel_1d(axis, mean, self.sigma, discretization))
        self._w_joint = grid.node_weights()
        self._w_state = _state_weights(grid)

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


# --------------------------------------------------------------------------------------------
# reward and container
# --------------------------------------------------------------------------------------------
def inverse_bellman_reward(q, policy, transition: GaussianTransition, grid: Grid, gamma: float = DEFAULT_GAMMA):
    r"""Reward from the inverse Bellman equation (eq. ``inverse_bellman``).

    .. math::

        R(s,a) = Q(s,a) - \gamma\, E_{s'\sim T(\cdot|s,a),\, a'\sim\pi(\cdot|s')}\big[Q(s',a')\big],

    i.e. ``r = (I - gamma T_MP) q`` on the nodes, computed without a matrix as
    ``V(s') = int_A pi(a'|s') Q(s',a') da'`` (grid quadrature) followed by
    ``R = Q - gamma * transition.expect(V)``.

    Parameters
    ----------
    q : array_like, shape grid.shape
        Q-function at the nodes (``-psi`` under the Value-Potential Equivalence).
    policy : array_like, shape grid.shape
        ``pi(a|s)`` at the nodes (normalised over the action axes).
    transition : GaussianTransition
    grid : Grid
    gamma : float, default 0.99
        Discount factor in ``[0, 1)`` (the paper fixes no value).

    Returns
    -------
    ndarray, shape grid.shape
    """
    q = _nodal(grid, q, "q")
    policy = _nodal(grid, policy, "policy")
    gamma = _check_gamma(gamma)
    if transition.grid != grid:
        raise FpirlInputError("transition was built on a different grid")
    value = grid.integrate(policy * q, axes=grid.action_axes)
    return q - gamma * transition.expect(value)


@dataclass
class MDP:
    """The MDP recovered from a potential (paper section 3).

    Attributes
    ----------
    grid : Grid
    beta, dt, gamma : float
    q_value : ndarray, shape grid.shape
        ``Q = -psi``.
    policy : ndarray, shape grid.shape
        Boltzmann policy ``pi(a|s)``.
    transition : GaussianTransition
        ``T(s'|s,a)``.
    reward : ndarray, shape grid.shape
        ``R`` from the inverse Bellman equation.
    """

    grid: Grid
    beta: float
    dt: float
    gamma: float
    q_value: np.ndarray
    policy: np.ndarray
    transition: GaussianTransition
    reward: np.ndarray


def recover_mdp(
    grid: Grid,
    psi,
    grad_s_psi,
    beta: float,
    dt: float,
    gamma: float = DEFAULT_GAMMA,
    discretization: str = "nodal",
) -> MDP:
    """Q-function, policy, transition and reward of a potential (paper section 3).

    ``Q = -psi`` (eq. ``conjecture_equivalence``), ``pi`` by eq. ``boltzmann_policy``
    (:func:`boltzmann_policy`), ``T`` by eqs. ``gaussian_transition`` / ``mdp_transition``
    (:class:`GaussianTransition`) and ``R`` by eq. ``inverse_bellman``
    (:func:`inverse_bellman_reward`).

    Parameters
    ----------
    grid : Grid
    psi : array_like, shape grid.shape
    grad_s_psi : array_like, shape (len(grid.state_axes), *grid.shape)
    beta, dt : float
        Inverse temperature and MDP time step, both > 0.
    gamma : float, default 0.99
        Discount factor in ``[0, 1)``.
    discretization : {'nodal', 'projection'}
        Transition discretisation, see :class:`GaussianTransition`.

    Returns
    -------
    MDP
    """
    gamma = _check_gamma(gamma)
    psi = _nodal(grid, psi, "psi")
    q = -psi
    policy = boltzmann_policy(grid, psi, beta)
    transition = GaussianTransition(grid, grad_s_psi, beta, dt, discretization=discretization)
    reward = inverse_bellman_reward(q, policy, transition, grid, gamma)
    return MDP(grid, float(beta), float(dt), gamma, q, policy, transition, reward)
