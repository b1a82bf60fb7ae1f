r"""State-dependent mobility: noise (and relaxation rate) that depends on the drift coordinates.

Real tracks show noise that grows with speed and depends on heading, which a constant ``beta``
cannot express. A *mobility* ``g(x) > 0`` in front of both the drift and the noise on the drift
axes ``D`` (for position/velocity tracks: the velocity axes, so ``g`` depends on speed and heading),

.. math::

    dx_D = \big[-g(x)\,\nabla_D\psi(x) + \beta^{-1}\nabla_D g(x)\big]\,dt + \sqrt{2 g(x)/\beta}\;dW ,

keeps :math:`p \propto e^{-\beta\psi}` stationary for every ``g`` (its Fokker-Planck flux is
:math:`-g\,(p\nabla\psi + \beta^{-1}\nabla p)`, zero for the Boltzmann density), so psi, the Boltzmann
policy (eq. ``boltzmann_policy``), ``Q = -psi`` and the inverse-Bellman reward keep their meaning;
``g = 1`` is the paper's SDE (eq. ``SDE``). ``g`` only changes how fast and how noisily the drift
coordinates relax.

``log g`` is a Legendre polynomial of total degree ``K`` in the drift coordinates scaled to
``[-1, 1]`` over the box (clipped outside it), normalised to mean 0 over the training transitions
(``(g, psi, beta) -> (c g, psi / c, c beta)`` leaves the process unchanged) and bounded to
``|log g| <= 3``. Degree 1 tilts the noise with the heading, degree 2 adds the speed.

Fit (alternating, :func:`fit_mobility`): (a) ``log g`` by maximum likelihood of the squared drift
residuals given psi (a Gamma GLM with log link, Newton steps with backtracking); (b) psi and beta by
weighted least squares with ``g`` fixed: with the mirror-wall factor ``f`` of
:mod:`fpirl.estimators.increments` (1 away from walls) the one-step model is
``v = f g (-grad psi + grad log g / beta) + sqrt(2 g / (beta dt)) xi``, whose likelihood in psi is
the regression of ``sqrt(g) (v / g - f grad log g / beta)`` on ``-sqrt(g) f grad psi``
(:func:`fpirl.estimators._assembly.assemble_increments` with those rows). Two rounds.

One-step predictive (what ``fpirl evaluate`` scores, :func:`fpirl.evaluation.heldout.fpirl_loglik`):
the Euler-Maruyama Gaussian
:math:`x'_D \sim \mathcal N\big(x_D + [-g\nabla_D\psi + g\nabla_D\log g/\beta]\Delta t,\ 2 g\Delta t/\beta\ I\big)`.

Degree by cross-validation over whole tracks (:func:`select_mobility_degree`): on each fold, psi,
beta and ``log g`` are fitted on the other folds (one alternation from their constant-mobility psi) and
the held-out transitions scored; a degree above 0 is kept only when its held-out gain over degree 0 exceeds
:data:`KEEP_SE` standard errors of the paired difference over tracks and :data:`MIN_GAIN` = 0.01
nats per transition (the documented rule: the paper's model unless the data clearly ask for more; a
smaller gain, e.g. a resolution misfit that varies over the box, is not worth a second field). With the
per-track noise scale not off (:mod:`fpirl.estimators.track_noise`), each fold's held-out transitions are
scored with it, fitted on that fold's training residuals, so that differences between tracks are not
taken for noise that depends on the state (skipped when its in-sample gain on the constant-mobility
residuals is at most :data:`MIN_GAIN`). The CV runs on at most :data:`CV_SAMPLE`
transitions (whole tracks drawn at random); the final fit uses all. Steps that may have been folded
at a reflecting wall (mirror factor below :data:`WALL_FREE`) are left out of the fit of ``log g``: their
smaller variance is the wall's, not the agent's; they are not scored by the CV either. Only
state axes count as walls here: an action box (the range of the velocities) has none.
"""

from __future__ import annotations


import numpy as np

from ..core._errors import FpirlInputError
from ._assembly import assemble_increments
from .selection import solve_increments, track_folds
from ._keep_rule import KEEP_SE, MIN_GAIN, beats, track_se  # noqa: F401  (named in the docstrings)
from ._mobility_basis import GLM_SAMPLE, LOG_G_BOUND, Mobility, fit_log_g  # noqa: F401  (LOG_G_BOUND: named in the docstrings)
from ..core._legendre import legendre_design, multi_indices

#: Degrees of log g tried by ``mobility='auto'``.
MOBILITY_DEGREES = (0, 1, 2)
#: Alternations (log g, then psi and beta) of the final fit, and of each fold's fit in the degree CV.
ROUNDS = 2
CV_ROUNDS = 1
#: The degree CV runs on at most this many transitions (whole tracks drawn at random); the final fit uses all.
CV_SAMPLE = 1 << 14
#: Rows whose mirror-wall factor is below this on some axis (steps that may have been folded at a
#: wall, whose variance is smaller) are left out of the fit of ``log g``.
WALL_FREE = 0.99
#: At least this many transitions per coefficient of log g.
MIN_PER_COEF = 50


def _log_g_from_residuals(mob: Mobility, x, resid, beta, dt, n_drift, rows=None) -> Mobility:
    """Refit ``log g`` of ``mob`` from velocity residuals ``resid`` (n, |D|) at points ``x``."""
    rows = np.arange(x.shape[0]) if rows is None else np.flatnonzero(rows) if np.asarray(rows).dtype == bool \
        else np.asarray(rows)
    rows = rows[:: max(1, rows.size // GLM_SAMPLE)]  # a strided sample: log g has at most 20 coefficients
    U = legendre_design(mob._u(x[rows]), mob.alphas, mob.degree)
    q = np.sum(resid[rows] ** 2, axis=1) * dt * beta / (2.0 * n_drift)
    c = fit_log_g(U, q)
    c[0] -= np.mean(U @ c)
    return Mobility(mob.axes, mob.lower, mob.upper, mob.degree, c)


def one_step_loglik(mob: Mobility | None, x, v, grad_psi, f, beta, dt, squared=False) -> np.ndarray:
    """Per-transition Gaussian log-density of the drift-axis velocities ``v``, shape ``(n, n_drift)`` (module doc);
    with ``squared`` also the standardised squared residuals ``|r|^2 / var``."""
    n_drift = v.shape[1]
    if mob is None:
        g, glg = np.ones(x.shape[0]), np.zeros_like(v)
    else:
        g, glg = mob.g(x), mob.grad_log_g(x)
    mean = f * g[:, None] * (-grad_psi + glg / beta)
    var = 2.0 * g / (beta * dt)
    r2 = np.sum((v - mean) ** 2, axis=1)
    ll = -0.5 * (r2 / var + n_drift * np.log(2.0 * np.pi * var)) - n_drift * np.log(dt)
    return (ll, r2 / var) if squared else ll


def fit_mobility(degree: int, x, v, f, axes, lower, upper, solve, gradient, beta_fixed, dt, rounds=ROUNDS,
                 theta=None, walls=None):
    """Alternate ``log g`` and (psi, beta) (module doc).

    Parameters
    ----------
    x : ndarray
        Points, shape ``(n, d)``.
    v : ndarray
        Velocities on the drift axes, shape ``(n, n_drift)`` (wall shift removed).
    f : ndarray
        Mirror factors, shape ``(n, n_drift)``.
    solve : callable
        ``solve(velocity_rows, row_weights) -> theta``.
    gradient : callable
        ``gradient(theta)``: grad psi at ``x``, shape ``(n, n_drift)``.
    beta_fixed : float or None
        None to estimate beta.
    theta : ndarray, optional
        The constant-mobility fit when already known.
    walls : ndarray of bool, optional
        The drift axes whose walls are physical (state axes), one flag per drift axis.

    Returns
    -------
    tuple
        ``(mobility, theta, beta)``.
    """
    n_drift = v.shape[1]
    mob = Mobility(tuple(axes), np.asarray(lower, float), np.asarray(upper, float), int(degree),
                   np.zeros(multi_indices(len(axes), degree).shape[0]))
    theta = solve(v, f) if theta is None else theta
    grad = gradient(theta)
    resid = v + f * grad
    beta = beta_fixed if beta_fixed is not None else 2.0 * v.size / (dt * np.sum(resid**2))
    away = _away_from_walls(f, walls)  # log g from the steps that cannot have been folded at a wall
    away = away if np.count_nonzero(away) >= 0.5 * away.size else None
    for _ in range(int(rounds)):
        mob = _log_g_from_residuals(mob, x, v - f * mob.g(x)[:, None] * (-grad + mob.grad_log_g(x) / beta),
                                    beta, dt, n_drift, away)
        g, glg = mob.g(x)[:, None], mob.grad_log_g(x)
        sq = np.sqrt(g)
        theta = solve(sq * (v / g - f * glg / beta), sq * f)
        grad = gradient(theta)
        resid = v - f * g * (-grad + glg / beta)
        if beta_fixed is None:
            beta = 2.0 * v.size / (dt * np.sum(resid**2 / g))
    return mob, theta, float(beta)


def select_mobility_degree(fit, score, fold, n_folds, track, degrees=MOBILITY_DEGREES):
    """Degree of ``log g`` by K-fold CV over whole tracks (module doc).

    ``fit(degree, rows) -> model`` fits psi, beta and ``log g`` on the training rows;
    ``score(model, rows) -> (n_rows,)`` held-out log-likelihoods. Returns
    ``(degree, {degree: mean held-out log-likelihood}, {degree: paired SE vs the first degree})``.
    """
    per = {}
    for deg in degrees:
        ll = np.empty(fold.size)
        for k in range(n_folds):
            held = np.flatnonzero(fold == k)
            ll[held] = score(fit(deg, np.flatnonzero(fold != k)), held)
        per[deg] = ll
    ok = np.isfinite(per[degrees[0]])  # rows the score leaves out (NaN)
    mean = {d: float(np.mean(ll[ok])) for d, ll in per.items()}
    se = {d: track_se(per[d][ok] - per[degrees[0]][ok], track[ok]) for d in degrees}
    ok = [d for d in degrees if d == degrees[0] or beats(mean[d] - mean[degrees[0]], se[d])]
    return max(ok, key=mean.get), mean, se


def fit_increments_mobility(spec, tracks, fit_space, kept, drift, points, velocity, weights, track, ridge, theta0,
                            beta_fixed, folds, random_state, noise_fit=None):
    """The mobility step of :class:`fpirl.estimators.IncrementsEstimator` (module doc).

    With ``noise_fit`` (:func:`fpirl.estimators.track_noise.fit_track_noise`) the degrees are compared
    under the per-track noise scale fitted on each fold's training tracks: heterogeneity between
    tracks is then not mistaken for noise that depends on the state.

    ``spec`` is ``'auto'`` or a degree > 0. Returns ``(mobility or None, cv scores or None, refit)``
    with ``refit = (theta, lambda, system, beta)`` of the weighted fit (None when no mobility is kept).
    """
    P, m = fit_space.h1_seminorm_matrix(), fit_space.mean_functional().ravel()
    dk = [kept.index(a) for a in drift]
    pts = points[:, kept]
    f = np.ones_like(velocity) if weights is None else np.asarray(weights, float)
    lo, hi = tracks.lower[drift], tracks.upper[drift]
    dt = tracks.dt
    state = {}

    def solver(rows):
        def solve(vel, rw):
            system = assemble_increments(fit_space, pts[rows], vel, dk, row_weights=rw)[0]
            theta, lam = solve_increments(system, P, m, ridge)
            state.update(system=system, lam=lam)
            return theta
        return solve

    def gradient(rows):
        return lambda theta: fit_space.gradient(fit_space.remove_mean(theta), pts[rows])[:, dk]

    fold_theta = {}

    sel = np.arange(velocity.shape[0])

    def fit(deg, rows):
        theta = fold_theta[rows.size, int(rows[0])]
        rows = sel[rows]
        if deg == 0:
            r = velocity[rows] + f[rows] * gradient(rows)(theta)
            beta = beta_fixed if beta_fixed is not None else 2.0 * r.size / (dt * np.sum(r**2))
            return None, theta, beta
        return fit_mobility(deg, points[rows], velocity[rows], f[rows], drift, lo, hi, solver(rows), gradient(rows),
                            beta_fixed, dt, rounds=CV_ROUNDS, theta=theta, walls=walls)

    walls = np.array([tracks.roles[a] == "state" for a in drift])
    away = _away_from_walls(f, walls)
    away = away if np.count_nonzero(away) >= 0.5 * away.size else np.ones_like(away)

    def score(model, rows):  # NaN for steps that may have been folded at a wall (not the agent's noise)
        mob, theta, beta = model
        if noise_fit is not None:
            return _track_noise_score(model, rows)
        rows = sel[rows]
        ll = one_step_loglik(mob, points[rows], velocity[rows], gradient(rows)(theta), f[rows], beta, dt)
        return np.where(away[rows], ll, np.nan)

    def _track_noise_score(model, held):
        """The t predictive of the held rows with (nu, c, lambda) fitted on the other rows of ``sel``."""
        mob, theta, beta = model
        every = np.arange(sel.size)
        ll, u = one_step_loglik(mob, points[sel], velocity[sel], gradient(sel)(theta), f[sel], beta, dt, squared=True)
        ok = away[sel]
        is_held = np.zeros(sel.size, bool)
        is_held[held] = True
        tr = track[sel]
        n_drift = velocity.shape[1]
        train = every[ok & ~is_held][np.argsort(tr[ok & ~is_held], kind="stable")]
        noise = noise_fit(u[train], n_drift, tr[train], starts=(0.9,))
        test = every[ok & is_held][np.argsort(tr[ok & is_held], kind="stable")]
        out = np.full(sel.size, np.nan)
        # log t(z) - log N(z): the Gaussian log-likelihood keeps the variance and Jacobian terms
        out[test] = ll[test] + noise.log_predictive(u[test], n_drift, tr[test]) \
            + 0.5 * u[test] + 0.5 * n_drift * np.log(2.0 * np.pi)
        return out[held]

    n_tracks = np.unique(track).size
    degree, scores = spec, None
    n_coef = {d: multi_indices(len(drift), d).shape[0] for d in MOBILITY_DEGREES + (3,)}
    if spec == "auto":
        usable = tuple(d for d in MOBILITY_DEGREES if n_coef[d] * MIN_PER_COEF <= velocity.shape[0])
        if n_tracks < max(2, int(folds)) or len(usable) < 2:
            return None, None, None
        if sel.size > CV_SAMPLE:  # whole tracks at random up to CV_SAMPLE transitions
            ids, counts = np.unique(track, return_counts=True)
            order = np.random.default_rng(random_state).permutation(ids.size)
            take = ids[order[: int(np.searchsorted(np.cumsum(counts[order]), CV_SAMPLE)) + 1]]
            sel = np.flatnonzero(np.isin(track, take))
        if noise_fit is not None and not _heterogeneous(noise_fit, points[sel], velocity[sel],
                                                        gradient(sel)(theta0), f[sel], beta_fixed, dt, away[sel],
                                                        track[sel]):
            noise_fit = None  # one noise scale fits all tracks: the degrees are compared with the Gaussian
        _, sub_track = np.unique(track[sel], return_inverse=True)
        fold, k = track_folds(sub_track, int(sub_track.max()) + 1, folds, random_state)
        systems = assemble_increments(fit_space, pts[sel], velocity[sel], dk, fold, k, f[sel])  # every fold's system
        total = systems[0]
        for sy in systems[1:]:
            total = total + sy
        for j in range(k):  # constant-mobility psi of each training part, keyed by its rows
            rows = np.flatnonzero(fold != j)
            fold_theta[rows.size, int(rows[0])] = solve_increments(total - systems[j], P, m, ridge)[0]
        degree, scores, _ = select_mobility_degree(fit, score, fold, k, sub_track, usable)
    elif n_coef[degree] * MIN_PER_COEF > velocity.shape[0]:
        raise FpirlInputError(f"mobility degree {degree} needs at least {n_coef[degree] * MIN_PER_COEF} "
                              f"transitions, got {velocity.shape[0]}")
    if degree == 0:
        return None, scores, None
    every = np.arange(velocity.shape[0])
    mob, theta, beta = fit_mobility(degree, points, velocity, f, drift, lo, hi, solver(every), gradient(every),
                                    beta_fixed, dt, theta=theta0, walls=walls)
    return mob, scores, (theta, state["lam"], state["system"], beta)


def _heterogeneous(noise_fit, x, v, grad, f, beta_fixed, dt, ok, track) -> bool:
    """Whether the per-track noise scale gains more than :data:`MIN_GAIN` nats per transition over the
    Gaussian in-sample on the constant-mobility residuals (an upper bound of its held-out gain: below it the
    track-noise CV would drop it, and the mobility degrees are compared without it)."""
    r = v + f * grad
    beta = beta_fixed if beta_fixed is not None else 2.0 * r.size / (dt * np.sum(r**2))
    _, u = one_step_loglik(None, x, v, grad, f, beta, dt, squared=True)
    rows = np.flatnonzero(ok)
    rows = rows[np.argsort(track[rows], kind="stable")]
    if rows.size < 10:
        return False
    m = v.shape[1]
    noise = noise_fit(u[rows], m, track[rows], starts=(0.9,))
    gain = noise.log_predictive(u[rows], m, track[rows]) + 0.5 * u[rows] + 0.5 * m * np.log(2.0 * np.pi)
    return float(np.mean(gain)) > MIN_GAIN


def _away_from_walls(f, walls) -> np.ndarray:
    """Rows whose mirror factor is at least :data:`WALL_FREE` on every drift axis with physical walls
    (state axes; an action box such as the range of the velocities has no walls to fold at)."""
    f = np.asarray(f)
    walls = np.ones(f.shape[1], bool) if walls is None else np.asarray(walls, bool)
    return np.all((f >= WALL_FREE) | ~walls[None, :], axis=1)


def check_mobility(value):
    """``'auto'``, None/False/0 (off) or a degree 1..3."""
    if value is None or value is False:
        return 0
    if isinstance(value, str):
        if value == "auto":
            return "auto"
        raise FpirlInputError(f"mobility must be 'auto' or a degree 0..3, got {value!r}")
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and 0 <= value <= 3:
        return int(value)
    raise FpirlInputError(f"mobility must be 'auto' or a degree 0..3, got {value!r}")
