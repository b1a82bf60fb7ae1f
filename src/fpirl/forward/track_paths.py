r"""Sample tracks of a fitted model whose actions are velocities (the kinematic increments model).

With state = position ``s`` and action = velocity ``a = (s_k - s_{k-1}) / dt`` the increments
estimator fits the velocity update only (positions follow from velocities):

.. math:: a_{k+1} = a_k - \nabla_a\psi(s_k, a_k)\,\Delta t + \sqrt{2\Delta t/\beta}\,\xi_k, \qquad
          s_{k+1} = s_k + a_{k+1}\,\Delta t,

(paper eqs. ``SDE``, ``gaussian_transition``; the one-step model that ``fpirl evaluate`` scores).
Outside the fitted box the drift is the drift at the nearest point of the box, as in the held-out
evaluation (:mod:`fpirl.evaluation.heldout`), so velocities are not confined to the box. Positions
stay in the arena: folded back (mirror) at reflecting walls, where the velocity component normal to
the wall flips, or wrapped on a periodic box. Models without velocity actions run the joint SDE
with :func:`fpirl.forward.markov.sample_sde`.
"""

from __future__ import annotations

import numpy as np

from ..core._errors import FpirlInputError

__all__ = ["sample_velocity_tracks"]


def sample_velocity_tracks(gradient, beta: float, dt: float, starts, steps: int, lower, upper,
                           boundary: str = "reflecting", rng=None) -> np.ndarray:
    r"""Positions of sample paths of the kinematic model (module docstring) from ``(s_0, a_0)``.

    Parameters
    ----------
    gradient : callable
        ``gradient(x (n, 2 d_s)) -> (n, 2 d_s)``: ``grad psi`` in the joint space (states then
        velocities); only the velocity part is used.
    beta, dt : float
        Inverse temperature and time step (> 0).
    starts : array_like, shape (n, 2 d_s)
        Initial states and velocities.
    steps : int
        Number of steps.
    lower, upper : array_like, shape (2 d_s,)
        The fitted box (positions then velocities).
    boundary : {'reflecting', 'periodic'}
        How positions meet the edge of the position box.
    rng : numpy.random.Generator or int

    Returns
    -------
    ndarray, shape (steps + 1, n, d_s)
        Positions at times ``0, dt, ..., steps dt``.
    """
    x = np.array(starts, dtype=float, ndmin=2)
    if x.ndim != 2 or x.shape[1] % 2 or not np.all(np.isfinite(x)):
        raise FpirlInputError(f"starts must be finite (s, a) rows with as many velocities as positions, "
                              f"got shape {np.shape(starts)}")
    if not (beta > 0 and dt > 0):
        raise FpirlInputError(f"beta and dt must be positive, got {beta} and {dt}")
    rng = np.random.default_rng(rng)
    d = x.shape[1] // 2
    box_lo, box_hi = np.asarray(lower, float), np.asarray(upper, float)
    lo, hi = box_lo[:d], box_hi[:d]
    s, a = x[:, :d].copy(), x[:, d:].copy()
    sigma = np.sqrt(2.0 * dt / float(beta))
    out = np.empty((int(steps) + 1,) + s.shape)
    out[0] = s
    for k in range(int(steps)):  # a Markov chain: one vectorised step over all tracks at a time
        g = np.asarray(gradient(np.clip(np.concatenate([s, a], axis=1), box_lo, box_hi)))[:, d:]
        a = a - g * dt + sigma * rng.normal(size=a.shape)
        s = s + a * dt
        if boundary == "periodic":
            s = lo + np.mod(s - lo, hi - lo)
        else:
            below, above = s < lo, s > hi
            s = np.clip(np.where(below, 2 * lo - s, np.where(above, 2 * hi - s, s)), lo, hi)
            a = np.where(below | above, -a, a)
        out[k + 1] = s
    return out
