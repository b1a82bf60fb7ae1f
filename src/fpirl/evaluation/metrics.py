"""Error norms, KL divergences, free energies and observed convergence orders (docs/method.md).

All integrals use the grid's trapezoid quadrature (:meth:`Grid.integrate`). Functions that take
densities accept a single nodal array ``(*grid.shape)`` or a stack ``(n_t, *grid.shape)`` and then
return one value per time.
"""

from __future__ import annotations

import numpy as np

from ..core._errors import FpirlInputError
from ..core.grid import Grid
from ..core.validation import _positive, _state_weights, state_shape

__all__ = ["free_energy", "free_energy_mdp", "gradient_l2_error", "kl_divergence", "l2_error", "log_log_slope",
           "policy_kl", "relative_l2_error"]

#: Floor applied to the second argument of a KL divergence before taking its logarithm.
KL_FLOOR = 1e-300
#: Negative entries down to ``-NEGATIVE_TOLERANCE * max|p|`` (round-off of numerical solvers)
#: are treated as zeros; more negative entries are an input error.
NEGATIVE_TOLERANCE = 1e-8


def _finite(values, name: str) -> np.ndarray:
    values = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(values)):
        raise FpirlInputError(f"{name} contains NaN or infinite values")
    return values


def _density(values, name: str, grid: Grid, shape=None) -> np.ndarray:
    """Validate a (stack of) nodal densities; clip round-off negatives to 0."""
    values = _finite(values, name)
    shape = grid.shape if shape is None else tuple(shape)
    k = len(shape)
    if values.ndim not in (k, k + 1) or values.shape[values.ndim - k :] != shape:
        raise FpirlInputError(f"{name} has shape {values.shape}, expected {shape} or (n_t, *{shape})")
    if values.size and values.min() < 0:
        scale = np.abs(values).max()
        if values.min() < -NEGATIVE_TOLERANCE * scale:
            raise FpirlInputError(f"{name} has negative values (min {values.min():.3g})")
        values = np.maximum(values, 0.0)
    return values


def _plogp(p: np.ndarray, q: np.ndarray | None = None) -> np.ndarray:
    """``p log p`` (or ``p log(p/q)`` for ``q > 0``) with ``0 log 0 = 0``, for ``p >= 0``."""
    pos = p > 0
    logp = np.log(np.where(pos, p, 1.0))
    if q is not None:
        logp = logp - np.log(q)
    return np.where(pos, p * logp, 0.0)


def l2_error(f, f_true, subtract_mean: bool = False) -> float:
    r"""Root-mean-square error on an evaluation grid (the paper's L2 error).

    .. math:: e(f) = \sqrt{\operatorname{mean}\big((f - f_{true})^2\big)}

    the mean taken over all entries (nodes of a uniform evaluation grid). With
    ``subtract_mean=True`` each function's own mean is removed first (potentials are defined only
    up to a constant).

    Parameters
    ----------
    f, f_true : array_like, same shape

    Returns
    -------
    float
    """
    f = _finite(f, "f")
    f_true = _finite(f_true, "f_true")
    if f.shape != f_true.shape:
        raise FpirlInputError(f"shape mismatch: {f.shape} vs {f_true.shape}")
    if f.size == 0:
        raise FpirlInputError("empty arrays")
    if subtract_mean:
        f = f - f.mean()
        f_true = f_true - f_true.mean()
    return float(np.sqrt(np.mean((f - f_true) ** 2)))


def relative_l2_error(f, f_true, subtract_mean: bool = False) -> float:
    r""":func:`l2_error` divided by the standard deviation of ``f_true``.

    .. math:: e_{rel}(f) = e(f) / \operatorname{std}(f_{true})

    Raises
    ------
    FpirlInputError
        If ``f_true`` is constant.
    """
    err = l2_error(f, f_true, subtract_mean)
    scale = float(np.std(np.asarray(f_true, dtype=float)))
    if scale == 0:
        raise FpirlInputError("f_true is constant: the relative error is undefined")
    return err / scale


def gradient_l2_error(g, g_true, relative: bool = False) -> float:
    r"""RMS over the points of the Euclidean norm of a gradient error (leading axis: components).

    .. math:: e(\nabla f) = \sqrt{\operatorname{mean}_x \sum_k (g_k - g_{true,k})^2}

    With ``relative=True`` divided by the same norm of ``g_true``.

    Parameters
    ----------
    g, g_true : array_like, shape (n_components, ...)
    relative : bool

    Raises
    ------
    FpirlInputError
        On a shape mismatch, or ``relative`` with ``g_true == 0``.
    """
    g = _finite(g, "g")
    g_true = _finite(g_true, "g_true")
    if g.shape != g_true.shape or g.ndim < 1:
        raise FpirlInputError(f"shape mismatch: {g.shape} vs {g_true.shape}")
    err = float(np.sqrt(np.mean(np.sum((g - g_true) ** 2, axis=0))))
    if not relative:
        return err
    ref = float(np.sqrt(np.mean(np.sum(g_true**2, axis=0))))
    if ref == 0:
        raise FpirlInputError("g_true vanishes: the relative error is undefined")
    return err / ref


def log_log_slope(h, errors) -> float:
    r"""Least-squares slope of ``log(error)`` against ``log(h)`` (an observed convergence order).

    Non-finite and non-positive errors are left out; ``nan`` when fewer than two remain. With
    ``h`` a resolution such as elements per axis ``N``, a method of order ``p`` gives ``-p``; with
    ``h`` a spacing or time step it gives ``+p``.
    """
    h, err = np.asarray(h, dtype=float).ravel(), np.asarray(errors, dtype=float).ravel()
    if h.shape != err.shape:
        raise FpirlInputError(f"{err.size} errors for {h.size} resolutions")
    ok = np.isfinite(err) & (err > 0) & np.isfinite(h) & (h > 0)
    if ok.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(h[ok]), np.log(err[ok]), 1)[0])


def kl_divergence(p, q, grid: Grid, floor: float = KL_FLOOR):
    r"""Kullback-Leibler divergence of nodal densities with the grid quadrature.

    .. math:: KL(p \| q) = \int p(x) \log\frac{p(x)}{q(x)}\, dx

    with ``0 log 0 = 0`` and ``q`` floored at ``floor`` (so a ``q`` that vanishes where ``p`` does
    not gives a large, finite value). The densities are not renormalised; for unit-mass ``p``
    and ``q`` the result is >= 0.

    Parameters
    ----------
    p, q : array_like, shape grid.shape or ``(n_t, *grid.shape)``
        Non-negative densities (stacks are compared time by time; one of them may be a single
        array, broadcast over the other's times).
    grid : Grid
    floor : float

    Returns
    -------
    float or ndarray, shape (n_t,)
    """
    out = _kl(p, q, grid, floor, axes=None)
    return float(out) if np.ndim(out) == 0 else out


def _kl(p, q, grid: Grid, floor: float, axes, names=("p", "q")):
    """``int p log(p / max(q, floor))`` over ``axes`` (all when None) with the grid quadrature."""
    p, q = np.broadcast_arrays(_density(p, names[0], grid), _density(q, names[1], grid))
    return grid.integrate(_plogp(p, np.maximum(q, floor)), axes=axes)


def policy_kl(pi, pi_hat, grid: Grid, floor: float = KL_FLOOR) -> np.ndarray:
    r"""Per-state KL divergence between two policies, over the action axes.

    .. math:: KL\big(\pi(\cdot|s) \,\|\, \hat\pi(\cdot|s)\big) = \int_A \pi(a|s) \log\frac{\pi(a|s)}{\hat\pi(a|s)}\, da

    Parameters
    ----------
    pi, pi_hat : array_like, shape grid.shape (or a stack ``(n, *grid.shape)``)
    grid : Grid
    floor : float
        Floor of ``pi_hat``.

    Returns
    -------
    ndarray, shape state_shape(grid) (or ``(n, *state_shape)``)
    """
    return _kl(pi, pi_hat, grid, floor, axes=grid.action_axes, names=("pi", "pi_hat"))


def free_energy(p, psi, beta: float, grid: Grid):
    r"""Free energy of a density in a potential (eq. ``free_energy``).

    .. math:: F(p, \psi) = \int_\Omega \psi\, p\, dx + \beta^{-1} \int_\Omega p \log p\, dx

    (``-beta^{-1} H(p)`` with the differential entropy ``H``), grid quadrature, ``0 log 0 = 0``.
    Its minimum over unit-mass ``p`` is ``-beta^{-1} log Z`` at the Gibbs density
    ``exp(-beta psi) / Z``; along the Fokker-Planck evolution it does not increase.

    Parameters
    ----------
    p : array_like, shape grid.shape or ``(n_t, *grid.shape)``
    psi : array_like, shape grid.shape
    beta : float
    grid : Grid

    Returns
    -------
    float or ndarray, shape (n_t,)
    """
    p = _density(p, "p", grid)
    psi = _finite(psi, "psi")
    if psi.shape != grid.shape:
        raise FpirlInputError(f"psi has shape {psi.shape}, expected {grid.shape}")
    beta = _positive(beta, "beta")
    out = grid.integrate(psi * p + _plogp(p) / beta)
    return float(out) if np.ndim(out) == 0 else out


def free_energy_mdp(rho, pi, q, beta: float, grid: Grid):
    r"""Free energy of a physics-based MDP (eq. ``free_energy_mdp``).

    .. math::

        F(\rho, \pi) = -\int_S \rho(s) \int_A \pi(a|s) Q(s,a)\, da\, ds
        - \beta^{-1}\big(H_s(\rho) + H_{a|s}(\pi)\big),

    with ``H_s(rho) = -int rho log rho ds`` and
    ``H_{a|s}(pi) = -int rho(s) int pi(a|s) log pi(a|s) da ds``; grid quadrature throughout. For
    ``p = rho pi`` with ``int pi da = 1`` (in the grid quadrature) and ``q = -psi`` it equals
    :func:`free_energy` ``(p, psi)`` (chain rule of the entropy).

    Parameters
    ----------
    rho : array_like, shape state_shape(grid) or ``(n_t, *state_shape)``
        State density.
    pi : array_like, shape grid.shape
        Policy ``pi(a|s)``.
    q : array_like, shape grid.shape
        Q-function.
    beta : float
    grid : Grid

    Returns
    -------
    float or ndarray, shape (n_t,)
    """
    rho = _density(rho, "rho", grid, shape=state_shape(grid))
    pi = _density(pi, "pi", grid)
    if pi.shape != grid.shape:
        raise FpirlInputError(f"pi has shape {pi.shape}, expected {grid.shape}")
    q = _finite(q, "q")
    if q.shape != grid.shape:
        raise FpirlInputError(f"q has shape {q.shape}, expected {grid.shape}")
    beta = _positive(beta, "beta")
    acts = grid.action_axes
    per_state = grid.integrate(-pi * q + _plogp(pi) / beta, axes=acts)  # int pi (-Q + log(pi)/beta) da
    lead = rho.ndim - len(state_shape(grid))
    state_axes = tuple(range(lead, rho.ndim))
    out = np.sum(_state_weights(grid) * (rho * per_state + _plogp(rho) / beta), axis=state_axes)
    return float(out) if np.ndim(out) == 0 else out
