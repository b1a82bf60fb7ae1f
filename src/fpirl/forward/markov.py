"""Forward models on the joint state-action space: the MDP density map and the SDE sampler.

* :func:`mdp_density_map` -- eq. ``density_evolution``;
* :func:`sample_sde` -- Euler-Maruyama for the Ito SDE of eq. ``SDE``
  (``dx = -grad psi(x) dt + sqrt(2/beta) dW``);
* :func:`histogram_density` -- cloud-in-cell density estimate of samples on a grid, to compare
  SDE samples with density solvers.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
from tqdm.auto import tqdm

from ..core._errors import FpirlInputError
from ..core.grid import Grid
from ..core.validation import _expand_state, _nodal, _positive, _state_weights, state_shape
from ..mdp.transition import GaussianTransition

__all__ = ["histogram_density", "mdp_density_map", "sample_sde"]


def mdp_density_map(
    grid: Grid,
    policy,
    transition: GaussianTransition,
    p0,
    steps: int,
    progress: bool = False,
    method: str = "auto",
) -> np.ndarray:
    r"""Evolve a state-action density with the MDP (eq. ``density_evolution``).

    .. math::

        p_n(s', a') = \pi(a'|s') \int_S \int_A p_{n-1}(s, a)\, T(s'|s, a)\, da\, ds,

    the integrals by the grid quadrature. Mass is conserved to round-off because ``T`` and ``pi``
    are normalised with the same quadrature.

    After the first step every density has the form ``rho_n(s) pi(a|s)``, so
    ``rho_{n+1}(s') = int_S rho_n(s) T_pi(s'|s) ds`` with the policy-averaged state kernel
    ``T_pi`` (:meth:`GaussianTransition.state_kernel`, ``n_s x n_s``): ``method='kernel'`` builds
    it once (cost of one push) and then each step is a matrix-vector product; ``'push'`` applies
    :meth:`GaussianTransition.push` at every step (memory ``O(n_s n_a)`` only); ``'auto'`` uses the
    kernel when ``n_s^2 <= 2^25``. Both give the same result to round-off.

    Parameters
    ----------
    grid : Grid
    policy : array_like, shape grid.shape
        ``pi(a|s)``, normalised over the action axes.
    transition : GaussianTransition
    p0 : array_like, shape grid.shape or state_shape(grid)
        Initial joint density ``p_0(s, a)``, or an initial state density ``rho_0(s)``, in which
        case ``p_0 = rho_0(s) pi(a|s)`` (the paper starts from a uniform ``rho_0``).
    steps : int
        Number of MDP steps (>= 0).
    progress : bool
        Show a tqdm progress bar.
    method : {'auto', 'kernel', 'push'}

    Returns
    -------
    ndarray, shape (steps + 1, *grid.shape)
        ``p_0, ..., p_steps``.
    """
    policy = _nodal(grid, policy, "policy")
    if transition.grid != grid:
        raise FpirlInputError("transition was built on a different grid")
    if method not in ("auto", "kernel", "push"):
        raise FpirlInputError(f"method must be 'auto', 'kernel' or 'push', got {method!r}")
    s_shape = state_shape(grid)
    rho = None  # state density of the previous snapshot, when it is rho * pi
    p0 = np.asarray(p0, dtype=float)
    if p0.shape == s_shape and p0.shape != grid.shape:
        rho = _nodal(grid, p0, "p0", shape=s_shape)
        p0 = _expand_state(grid, rho) * policy
    p0 = _nodal(grid, p0, "p0")
    if np.any(p0 < 0):
        raise FpirlInputError(f"p0 has negative values (min {p0.min():.3g})")
    if int(steps) != steps or steps < 0:
        raise FpirlInputError(f"steps must be a non-negative integer, got {steps}")
    steps = int(steps)
    n_s = int(np.prod(s_shape))
    use_kernel = method == "kernel" or (method == "auto" and n_s * n_s <= 1 << 25 and steps > 1)
    if use_kernel:
        kernel = transition.state_kernel(policy, max_entries=max(1 << 25, n_s * n_s)).reshape(n_s, n_s)
        w_s = _state_weights(grid).ravel()
    out = np.empty((steps + 1,) + grid.shape)
    out[0] = p0
    it = range(1, steps + 1)
    if progress:
        it = tqdm(it, desc="MDP map", unit="step")
    for n in it:
        if use_kernel and rho is not None:
            rho = ((w_s * rho.ravel()) @ kernel).reshape(s_shape)
        else:
            rho = transition.push(out[n - 1])
        out[n] = _expand_state(grid, rho) * policy
    return out


def _boundary_flags(boundary, d: int) -> np.ndarray:
    if isinstance(boundary, str):
        boundary = [boundary] * d
    boundary = list(boundary)
    if len(boundary) != d:
        raise FpirlInputError(f"need {d} boundary kinds, got {len(boundary)}")
    flags = []
    for b in boundary:
        if isinstance(b, (bool, np.bool_)):
            flags.append(bool(b))
        elif b in ("periodic", "reflecting"):
            flags.append(b == "periodic")
        else:
            raise FpirlInputError(f"boundary must be 'periodic' or 'reflecting', got {b!r}")
    return np.array(flags)


def _apply_boundary(x: np.ndarray, lower: np.ndarray, length: np.ndarray, periodic: np.ndarray) -> np.ndarray:
    """Wrap periodic coordinates into ``[lower, upper)`` and fold the others into ``[lower, upper]``."""
    period = np.where(periodic, length, 2.0 * length)
    y = np.mod(x - lower, period)
    y[y >= period] = 0.0  # np.mod can round up to the period itself
    if not np.all(periodic):
        y = np.where(~periodic & (y > length), period - y, y)
    y += lower
    return y


def sample_sde(
    gradient: Callable[[np.ndarray], np.ndarray],
    beta: float,
    x0,
    dt: float,
    steps: int,
    rng,
    lower,
    upper,
    boundary: str | Sequence[str] = "periodic",
    substeps: int = 1,
) -> np.ndarray:
    r"""Euler-Maruyama sample paths of the Fokker-Planck SDE (eq. ``SDE``).

    .. math:: dx = -\nabla\psi(x)\, dt + \sqrt{2/\beta}\, dW

    in the joint space ``x = (s, a)``, with ``x <- x - grad psi(x) h + sqrt(2 h / beta) xi``,
    ``xi ~ N(0, I)`` and ``h = dt / substeps``. After every step, periodic coordinates are wrapped
    into ``[lower, upper)`` and the others are folded (mirror reflection) into ``[lower, upper]``.
    The weak error of the scheme is O(h) (also for the symmetric reflection), so densities
    estimated from the samples carry an O(h) bias on top of the Monte-Carlo noise.

    Parameters
    ----------
    gradient : callable
        ``gradient(x)`` with ``x`` of shape ``(n, d)`` returns ``grad psi`` of shape ``(n, d)``.
    beta : float
        Inverse temperature, > 0.
    x0 : array_like, shape (n, d)
        Initial positions (mapped into the domain by the boundary rule).
    dt : float
        Time between recorded states, > 0.
    steps : int
        Number of recorded steps.
    rng : numpy.random.Generator or int
        Random generator (or a seed for :func:`numpy.random.default_rng`).
    lower, upper : array_like, shape (d,)
        Domain bounds.
    boundary : {'periodic', 'reflecting'} or sequence of them (one per axis)
    substeps : int
        Euler-Maruyama steps per recorded step.

    Returns
    -------
    ndarray, shape (steps + 1, n, d)
        Positions at times ``0, dt, ..., steps * dt``.
    """
    beta = _positive(beta, "beta")
    dt = _positive(dt, "dt")
    x = np.array(x0, dtype=float, ndmin=2)
    if x.ndim != 2:
        raise FpirlInputError(f"x0 must have shape (n, d), got {np.shape(x0)}")
    n, d = x.shape
    lower = np.broadcast_to(np.asarray(lower, dtype=float), (d,))
    upper = np.broadcast_to(np.asarray(upper, dtype=float), (d,))
    if not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper)) and np.all(upper > lower)):
        raise FpirlInputError(f"bounds must be finite with lower < upper, got {lower} and {upper}")
    if not np.all(np.isfinite(x)):
        raise FpirlInputError("x0 contains NaN or infinite values")
    periodic = _boundary_flags(boundary, d)
    if int(steps) != steps or steps < 0 or int(substeps) != substeps or substeps < 1:
        raise FpirlInputError(f"need steps >= 0 and substeps >= 1, got {steps} and {substeps}")
    rng = np.random.default_rng(rng)
    length = upper - lower
    h = dt / int(substeps)
    noise = np.sqrt(2.0 * h / beta)
    out = np.empty((int(steps) + 1, n, d))
    x = _apply_boundary(x, lower, length, periodic)
    out[0] = x
    for k in range(1, int(steps) + 1):
        for _ in range(int(substeps)):
            g = np.asarray(gradient(x), dtype=float)
            if g.shape != x.shape:
                raise FpirlInputError(f"gradient returned shape {g.shape}, expected {x.shape}")
            x = x - h * g + noise * rng.standard_normal(x.shape)
            x = _apply_boundary(x, lower, length, periodic)
        out[k] = x
    return out


def histogram_density(grid: Grid, samples, weights=None) -> np.ndarray:
    r"""Nodal density estimate of samples by cloud-in-cell (linear) deposition.

    Every sample spreads its weight onto the ``2^d`` nodes of its cell with the multilinear hat
    functions ``phi_j``; the nodal density is ``c_j = sum_i w_i phi_j(x_i) / (W v_j)``, with
    ``v_j`` the trapezoid node weight and ``W`` the total weight. Hence
    ``grid.integrate(c) == 1`` exactly, and ``c_j`` estimates ``E[phi_j(X)] / v_j``, the lumped
    L2 projection of the density onto the grid (O(h^2) smoothing bias). Samples outside the box
    are wrapped (periodic) or folded (reflecting), as the SDE sampler does.

    Parameters
    ----------
    grid : Grid
    samples : array_like, shape (..., grid.ndim)
    weights : array_like, optional
        Non-negative sample weights, shape ``samples.shape[:-1]``.

    Returns
    -------
    ndarray, shape grid.shape
    """
    x = np.asarray(samples, dtype=float)
    if x.ndim < 1 or x.shape[-1] != grid.ndim:
        raise FpirlInputError(f"samples have shape {x.shape}, expected (..., {grid.ndim}) for {grid!r}")
    x = x.reshape(-1, grid.ndim)
    wts = np.ones(x.shape[0]) if weights is None else np.asarray(weights, dtype=float).reshape(-1)
    if wts.size != x.shape[0]:
        raise FpirlInputError(f"{wts.size} weights for {x.shape[0]} samples")
    if x.shape[0] == 0:
        raise FpirlInputError("no samples")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(wts))):
        raise FpirlInputError("samples or weights contain NaN or infinite values")
    if np.any(wts < 0) or wts.sum() <= 0:
        raise FpirlInputError("weights must be non-negative with a positive sum")
    periodic = np.array([a.periodic for a in grid.axes])
    x = _apply_boundary(x, grid.lower, grid.upper - grid.lower, periodic)
    lo_idx, frac = [], []
    for i, axis in enumerate(grid.axes):
        t = (x[:, i] - axis.lower) / axis.spacing
        i0 = np.minimum(np.floor(t), axis.elements - 1).astype(np.int64)
        frac.append(t - i0)
        lo_idx.append(i0)
    counts = np.zeros(grid.size)
    for corner in np.ndindex(*(2,) * grid.ndim):  # the 2^d nodes of each sample's cell
        idx, wc = [], wts.copy()
        for i, axis in enumerate(grid.axes):
            j = lo_idx[i] + corner[i]
            if axis.periodic:
                j = j % axis.n_nodes
            idx.append(j)
            wc *= frac[i] if corner[i] else 1.0 - frac[i]
        counts += np.bincount(np.ravel_multi_index(idx, grid.shape), weights=wc, minlength=grid.size)
    return counts.reshape(grid.shape) / (wts.sum() * grid.node_weights())
