r"""Sample tracks of a fitted model whose actions are velocities (the kinematic increments model).

With state = position ``s`` and action = velocity ``a = (s_k - s_{k-1}) / dt`` the increments
estimator fits the velocity update only (positions follow from velocities):

.. math:: a_{k+1} = a_k - \nabla_a\psi(s_k, a_k)\,\Delta t + \sqrt{2\Delta t/\beta}\,\xi_k, \qquad
          s_{k+1} = s_k + a_{k+1}\,\Delta t,

(paper eqs. ``SDE``, ``gaussian_transition``; the one-step model that ``fpirl evaluate`` scores).
With a state-dependent mobility ``g`` (:mod:`fpirl.estimators.mobility`) the drift becomes
``g (grad psi - grad log g / beta)`` and the noise variance ``2 g dt / beta``; with a second lag
``rho`` (:mod:`fpirl.estimators.lag`) the mean moves by ``rho sqrt(g_k / g_{k-1}) r_{k-1}``, the previous
step's residual ``r_{k-1} = x_{k,D} - x_{k-1,D} + eff(x_{k-1}) dt``, and the variance shrinks by
``1 - rho^2`` (not on a track's first step, which has no previous one). These are exactly the
Gaussians of :func:`fpirl.evaluation.heldout.fpirl_loglik` (both use
:func:`effective_drift`), so what is simulated is what is scored.
With a per-track noise scale (:mod:`fpirl.estimators.track_noise`) every simulated track draws its
standardised residuals from the Student-t predictive given its own earlier draws (the same predictive
that is scored; with forgetting 1 the same as a Gamma-distributed precision drawn once per track).
Substeps: where the fitted drift is so steep that the one-step map of the drift coordinates overshoots,
``1 - kappa dt < 0`` with ``kappa = max_j |d eff_j / d x_j|`` at the current point (finite differences;
e.g. a mobility at its cap ``g = 20``), the frame is integrated on ``n = ceil(max kappa dt)`` Euler
substeps of the same SDE (each map ``1 - kappa dt / n >= 0``; at most 64; drift and ``g`` at the current point, the frame's noise draw split
over the substeps so that they add up to it, the second-lag shift spread evenly). The one-step Gaussian
there flips the sign of the velocity's deviation every frame, which no continuous SDE with stationary law
``exp(-beta psi)`` does. Where ``0 <= 1 - kappa dt`` the fitted one-step map is the data's own lag-one
persistence (a regression of ``x_{k+1}`` on ``x_k``) and is simulated as it is; only overshooting steps
differ from the scored model.
Outside the fitted box the drift is the drift at the nearest point of the box, as in the held-out
evaluation (:mod:`fpirl.evaluation.heldout`), which scores observed points beyond it. A simulation, though,
compounds that drift: where ``psi`` slopes outwards at an edge of the velocity box (an edge with few data),
the held drift pushed simulated velocities away without bound (measured on the Juelich bottleneck
pedestrians, 13 of 50 tracks with steps above the data's largest, up to 10 m per 0.2 s against 0.33 m; on BT549
cells 6 of 100 tracks, steps up to 391 px against 15 px). The fitted model lives on its box, as the Fokker-Planck
equation with no-flux edges does, so simulated velocities are folded back (mirrored) at the edges of the
velocity box, as positions are at reflecting walls (where the velocity component normal to the wall flips),
or positions are wrapped on a periodic box. Models without velocity actions run the same one-step model on
all axes (:func:`sample_joint_tracks`), folded into the box on every axis. At every fold the second lag's
memory (the previous point and drift) is mirrored with the track, so that the previous residual keeps its
meaning; without that, a fold read as a residual of twice the velocity, and the second lag threw the track
back out (7 of 50 bottleneck tracks ran away with the second lag alone).
"""

from __future__ import annotations

import numpy as np

from ..core._errors import FpirlInputError
from ..core.grid import wrap_into

__all__ = ["effective_drift", "sample_joint_tracks", "sample_velocity_tracks"]

#: a step is substepped when its one-step map ``1 - kappa dt`` of the drift coordinates is negative (overshoots)
SUBSTEP_BOUND = 1.0
#: at most this many substeps per frame
MAX_SUBSTEPS = 64


def effective_drift(mob, beta: float, x: np.ndarray, grad: np.ndarray):
    r"""The drift gradient and mobility of the one-step model: ``g (grad psi - grad log g / beta)`` and
    ``g`` at ``x`` (``grad`` = ``grad psi`` at ``x``, all axes), so that
    :math:`x' \sim \mathcal N(x - \text{eff}\,\Delta t,\ 2 g \Delta t/\beta)`
    (:mod:`fpirl.estimators.mobility`; ``mob`` a :class:`~fpirl.estimators.mobility.Mobility` or None);
    without a mobility ``grad`` and ones. Shared by the held-out scoring and the track simulation."""
    if mob is None:
        return grad, np.ones(np.shape(x)[0])
    m = mob.g(x)
    glg = np.zeros_like(grad)
    glg[:, list(mob.axes)] = mob.grad_log_g(x)
    return m[:, None] * (grad - glg / beta), m



def sample_velocity_tracks(gradient, beta: float, dt: float, starts, steps: int, lower, upper,
                           boundary: str = "reflecting", rng=None, mobility=None,
                           second_lag: float | None = None,
                           track_noise=None) -> np.ndarray:
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
    mobility : Mobility, optional
        The fitted state-dependent mobility (:meth:`fpirl.estimators.mobility.Mobility.from_attrs`).
    second_lag : float, optional
        The fitted AR(1) coefficient ``rho`` of the residuals (result attr ``second_lag_rho``).
    track_noise : TrackNoise, optional
        The fitted per-track noise scale (:meth:`fpirl.estimators.track_noise.TrackNoise.from_attrs`).

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
    step = _OneStep(gradient, float(beta), float(dt), box_lo, box_hi, boundary == "periodic", mobility, second_lag,
                    slice(d, 2 * d), track_noise)
    out = np.empty((int(steps) + 1,) + s.shape)
    out[0] = s
    vlo, vhi, zero = box_lo[d:], box_hi[d:], np.zeros(d)
    for k in range(int(steps)):  # a Markov chain: one vectorised step over all tracks at a time
        a = step(np.concatenate([s, a], axis=1), rng)
        a, below, above = _fold(a, vlo, vhi)  # the velocity box's edges (module doc)
        step.mirror(d, below, above, vlo, vhi)
        s = s + a * dt
        if boundary == "periodic":
            s = wrap_into(s, lo, hi)
        else:
            s, below, above = _fold(s, lo, hi)
            a = np.where(below | above, -a, a)
            step.mirror(d, below, above, zero, zero)  # the velocity mirrored about 0
        out[k + 1] = s
    return out


def _mirror(x, below, above, lo, hi):
    """``x`` mirrored at ``lo`` where ``below`` and at ``hi`` where ``above`` (``x -> 2 m - x``), else kept."""
    return np.where(below, 2 * lo - x, np.where(above, 2 * hi - x, x))


def _fold(x, lo, hi):
    """``x`` folded (mirrored) into ``[lo, hi]`` per column (clipped after one fold), and the masks of the
    entries folded at ``lo`` and at ``hi``."""
    below, above = x < lo, x > hi
    return np.clip(_mirror(x, below, above, lo, hi), lo, hi), below, above


class _OneStep:
    """One draw of the scored one-step Gaussian on the axes ``axes`` (module doc), remembering the
    previous point of every track for the second lag."""

    def __init__(self, gradient, beta, dt, lower, upper, periodic, mobility, rho, axes, noise=None):
        self.gradient, self.beta, self.dt, self.lower, self.upper = gradient, beta, dt, lower, upper
        self.periodic, self.mobility, self.axes = periodic, mobility, axes
        self.rho = None if rho is None else float(rho)
        self.prev = None  # (x_{k-1}, eff(x_{k-1}), g(x_{k-1}))
        self.noise, self.noise_state = noise, None  # per-track noise scale and its (S, N) per track

    def mirror(self, first: int, below, above, lo, hi):
        """The second lag's memory mirrored with the tracks that were folded: columns ``first, first + 1, ...``
        of the previous point at the entries ``below`` (mirror ``lo``) and ``above`` (mirror ``hi``), ``x -> 2 m - x``,
        and their drift ``eff -> -eff``: the previous residual changes sign with the track, as it would for the
        mirrored path."""
        if self.prev is None or not (np.any(below) or np.any(above)):
            return
        x, eff, g = (np.array(v, dtype=float, copy=True) for v in self.prev)
        cols = slice(first, first + below.shape[1])
        x[:, cols] = _mirror(x[:, cols], below, above, lo, hi)
        eff[:, cols] = np.where(below | above, -eff[:, cols], eff[:, cols])
        self.prev = (x, eff, g)

    def drift(self, x):
        xc = x if self.periodic else np.clip(x, self.lower, self.upper)  # heldout.TransitionModel.drift_gradient
        grad = np.asarray(self.gradient(xc), dtype=float).reshape(x.shape)
        return effective_drift(self.mobility, self.beta, x, grad)

    def __call__(self, x, rng):
        """``x_{k+1}`` on the axes (velocities: ``a_{k+1}``) given the points ``x`` of all tracks."""
        eff, g = self.drift(x)
        ax = self.axes
        mean = x[:, ax] - eff[:, ax] * self.dt
        var = (2.0 * self.dt / self.beta) * g
        if self.rho is not None and self.prev is not None:
            xp, effp, gp = self.prev
            r_prev = x[:, ax] - xp[:, ax] + effp[:, ax] * self.dt
            if self.periodic and self.wrap is not None:
                r_prev = r_prev - self.wrap * np.round(r_prev / self.wrap)
            mean = mean + self.rho * np.sqrt(g / gp)[:, None] * r_prev
            var = var * (1.0 - self.rho ** 2)
        self.prev = (x, eff, g)
        if self.noise is None:
            z = rng.normal(size=mean.shape)
        else:
            if self.noise_state is None:
                self.noise_state = self.noise.start(mean.shape[0])
            z, self.noise_state = self.noise.draw(self.noise_state, mean.shape[1], rng)
        out = mean + np.sqrt(var)[:, None] * z
        stiff, n_sub = self.stiffness(x, eff)
        if n_sub > 1:  # the one-step map overshoots there: substeps of the same SDE (module doc)
            out[stiff] = self.substeps(x[stiff], mean[stiff] - (x[stiff][:, ax] - eff[stiff][:, ax] * self.dt),
                                       var[stiff] / g[stiff], z[stiff], n_sub, rng)
        return out

    def stiffness(self, x, eff):
        """Rows whose one-step map overshoots, ``kappa dt > SUBSTEP_BOUND`` with ``kappa = max_j |d eff_j / d x_j|``
        on the axes (finite differences), and the number of substeps ``ceil(max kappa dt / SUBSTEP_BOUND)``."""
        cols = np.arange(x.shape[1])[self.axes]
        span = (self.upper - self.lower)[cols]
        kappa = np.zeros(x.shape[0])
        for j, c in enumerate(cols):
            eps = 1e-5 * span[j]
            xe = x.copy()
            xe[:, c] += eps
            kappa = np.maximum(kappa, np.abs(self.drift(xe)[0][:, c] - eff[:, c]) / eps)
        stiff = kappa * self.dt > SUBSTEP_BOUND
        if not np.any(stiff):
            return stiff, 1
        return stiff, int(min(MAX_SUBSTEPS, np.ceil(np.max(kappa[stiff]) * self.dt / SUBSTEP_BOUND)))

    def substeps(self, x, shift, var_per_g, z, n, rng):
        """``n`` Euler substeps of ``h = dt / n`` on the axes from ``x`` (other coordinates fixed): drift
        ``eff`` and variance ``var_per_g g h / dt`` at the current point, the second-lag shift spread evenly
        and the frame's standardised draw ``z`` split so that the substeps' noises sum to it."""
        ax, h = self.axes, self.dt / n
        y = x.copy()
        zeta = rng.normal(size=(n,) + z.shape)
        xi = z[None] / np.sqrt(n) + zeta - zeta.mean(axis=0, keepdims=True)  # unit variance each, sum sqrt(n) z
        for j in range(n):
            eff, g = self.drift(y)
            y[:, ax] = y[:, ax] - eff[:, ax] * h + shift / n + np.sqrt(var_per_g * g * h / self.dt)[:, None] * xi[j]
        return y[:, ax]

    wrap = None  # box lengths on the axes when differences of them are minimal images (joint model, periodic)


def sample_joint_tracks(gradient, beta: float, dt: float, starts, steps: int, lower, upper,
                        boundary: str = "reflecting", rng=None, mobility=None,
                        second_lag: float | None = None,
                        track_noise=None) -> np.ndarray:
    r"""Sample paths of the one-step model on all axes (tables without velocity actions).

    .. math:: x_{k+1} = x_k - \text{eff}(x_k)\,\Delta t + \rho\sqrt{g_k/g_{k-1}}\,r_{k-1}
              + \sqrt{(1-\rho^2)\,2 g(x_k)\Delta t/\beta}\;\xi_k

    with ``eff = g (grad psi - grad log g / beta)`` (``g = 1``, ``rho = 0`` without them: the
    Euler-Maruyama step of eq. ``SDE`` with step ``dt``), the Gaussian that
    :func:`fpirl.evaluation.heldout.fpirl_loglik` scores on the state axes, applied to every axis;
    then wrapped (periodic) or folded (reflecting) into the box as
    :func:`fpirl.forward.markov.sample_sde` does.

    Returns
    -------
    ndarray, shape (steps + 1, n, d)
    """
    x = np.array(starts, dtype=float, ndmin=2)
    if x.ndim != 2 or not np.all(np.isfinite(x)):
        raise FpirlInputError(f"starts must be finite rows, got shape {np.shape(starts)}")
    if not (beta > 0 and dt > 0):
        raise FpirlInputError(f"beta and dt must be positive, got {beta} and {dt}")
    rng = np.random.default_rng(rng)
    lo, hi = np.asarray(lower, float), np.asarray(upper, float)
    periodic = boundary == "periodic"
    step = _OneStep(gradient, float(beta), float(dt), lo, hi, periodic, mobility, second_lag, slice(None), track_noise)
    if periodic:
        step.wrap = hi - lo
    out = np.empty((int(steps) + 1,) + x.shape)
    out[0] = x
    for k in range(int(steps)):
        x = step(x, rng)
        if periodic:
            x = wrap_into(x, lo, hi)
        else:
            x, below, above = _fold(x, lo, hi)
            step.mirror(0, below, above, lo, hi)
        out[k + 1] = x
    return out
