r"""Per-track noise scale: a hierarchical (Gaussian-Gamma) noise model for heterogeneous populations.

Cells and pedestrians differ: each track has its own motility, so its increments are noisier or
calmer than the population's, and the scale drifts within a track. Let ``r_k`` be the residual of the
one-step Gaussian predictive of the fitted model on the ``m`` scored axes and ``s_k^2`` its variance
per axis (``2 g(x_k) dt / beta``, times ``1 - rho^2`` with a second lag; :mod:`fpirl.estimators.mobility`,
:mod:`fpirl.estimators.lag`). The track-noise model gives track ``i`` a precision ``tau_i``:

.. math::
    r_k \mid \tau_i \sim \mathcal N\big(0,\ c\,s_k^2/\tau_i\ I_m\big),\qquad
    \tau_i \sim \mathrm{Gamma}(\nu/2,\ \text{rate}\ \nu/2)\quad(\text{mean } 1),

with ``c`` the variance of a typical track relative to the pooled fit. Integrating ``tau_i`` out, the
one-step predictive of step ``k`` given the track's own earlier residuals is a multivariate Student t
(the chain rule makes the product over a track its exact marginal likelihood):

.. math::
    \log p(r_k \mid r_{<k}) = \log\Gamma\!\Big(\frac{n_k + m}{2}\Big) - \log\Gamma\!\Big(\frac{n_k}{2}\Big)
      - \frac m2 \log\big(\pi\,(\nu + S_k)\,c\,s_k^2\big)
      - \frac{n_k + m}{2}\log\Big(1 + \frac{u_k}{\nu + S_k}\Big),

    u_k = \frac{|r_k|^2}{c\,s_k^2},\qquad S_k = \sum_{j<k}\lambda^{k-1-j}u_j,\qquad
    n_k = \nu + \sum_{j<k}\lambda^{k-1-j}m

(sums over the same track, its earlier segments included). ``lambda = 1`` is the Gaussian-Gamma model
above; a forgetting factor ``lambda < 1`` discounts older steps, for a motility that changes within a
track (each factor is still a proper density given the past, so the product is a proper sequential
predictive score). The fit and its CV use at most 2^14 transitions (whole tracks drawn at random). ``nu -> inf`` with ``c = 1`` is the Gaussian of the fitted model, the paper's noise.
psi, beta, the mobility and the second lag are unchanged: the scale describes who is moving, not the
drift.

Fit (:func:`fit_track_noise`): ``(nu, c, lambda)`` maximise the sum of these log-predictives over the
training tracks' transitions (bounded L-BFGS-B, ``nu`` in [3, 10^4], ``c`` in [0.05, 20], ``lambda``
in [0, 1]; ``nu >= 3`` is the documented rule that keeps a track's mean variance ``c nu / (nu - 2)`` finite,
so the model has a mean-squared displacement and its simulation does not blow up: the expected update of
``S`` is ``lambda S + m (nu + S) / (n - 2)``, stable only for ``nu > 2``). With ``track_noise='auto'`` (:func:`select_track_noise`) it is kept only when its held-out
gain over the Gaussian in a K-fold cross-validation over whole tracks exceeds two paired standard
errors over tracks and 0.01 nats per transition (the rule of the mobility and the second lag); when its
in-sample gain on all training tracks is already at most 0.01 nats per transition (an upper bound of the
held-out gain) the CV is skipped and it is dropped.

Simulation (:meth:`TrackNoise.draw`) draws every step from this predictive given the track's own
earlier draws; with ``lambda = 1`` that is the same as drawing ``tau_i`` once per track and then
Gaussian steps (the t predictive is the Gamma mixture's Polya-urn form).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize
from scipy.special import digamma, gammaln

from ..core._errors import FpirlInputError
from ..core._threads import one_blas_thread
from .lag import model_mean
from ._keep_rule import MIN_GAIN, beats, track_se

#: bounds of (nu, c, lambda) in the fit; ``nu >= 3`` keeps the mean of a track's variance ``c / tau`` finite
#: (``nu / (nu - 2)`` times ``c``, at most 3 c) and the discounted recursion stable in the mean (it needs
#: ``nu > 2``), so simulated tracks have a mean-squared displacement (with ``nu <= 2`` it is infinite)
NU_BOUNDS = (3.0, 1e4)
SCALE_BOUNDS = (0.05, 20.0)
FORGETTING_BOUNDS = (0.0, 1.0)
#: the fit and its CV use at most this many transitions (whole tracks drawn at random; three parameters)
FIT_SAMPLE = 1 << 14
TRUE_SPELLINGS = (True, "on")
FALSE_SPELLINGS = (False, None, "off")


def track_layout(track: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(first, age)`` of rows ordered by track: the row index where each row's track starts, and the row's
    place in its track (``0, 1, ...``, integers); computed once per fit and shared by every :func:`discounted_sums`."""
    n = track.size
    start = np.r_[True, track[1:] != track[:-1]][:n]
    first = np.maximum.accumulate(np.where(start, np.arange(n), 0))
    return first, np.arange(n) - first


#: Block length of :func:`first_order_sums` (16,384 rows: 0.18 ms at 32, 0.25 ms at 64, 0.29 ms at 128).
FILTER_BLOCK = 32


def first_order_sums(x: np.ndarray, lam: float) -> np.ndarray:
    r"""``G_k = sum_{j<k} lam^{k-1-j} x_j`` along the last axis of ``x`` (the recurrence ``G_k = lam G_{k-1} +
    x_{k-1}``, ``G_0 = 0``).

    By blocks of ``B =`` :data:`FILTER_BLOCK` rows: the sums within each block are one product with the block's
    ``B x B`` Toeplitz matrix of powers ``T[k, j] = lam^{k-1-j}`` (``j < k``), and the value at each block's start
    ``C_b`` obeys the same recurrence over the blocks with factor ``lam^B`` and inputs ``lam G_{b, B-1} + x_{b, B-1}``
    (the block's own sum carried one step), solved by this function again; then ``G_{b, k} += lam^k C_b``. No power
    of ``lam`` is negative, so nothing overflows for ``0 <= lam <= 1``; rounding is that of sums of ``B`` terms.
    """
    x = np.asarray(x, dtype=float)
    lead, n = x.shape[:-1], x.shape[-1]
    B = FILTER_BLOCK
    m = -(-n // B)
    if n % B:
        X = np.zeros(lead + (m * B,))
        X[..., :n] = x
    else:
        X = x
    X = X.reshape(lead + (m, B))
    p = np.power(lam, np.arange(B + 1, dtype=float))  # lam^0 .. lam^B (0^0 = 1)
    e = np.arange(B)[:, None] - 1 - np.arange(B)[None, :]  # k - 1 - j
    T = np.where(e >= 0, p[np.maximum(e, 0)], 0.0)
    G = X @ T.T
    if m > 1:
        G += first_order_sums(lam * G[..., -1] + X[..., -1], float(p[B]))[..., None] * p[:B]
    return G.reshape(lead + (m * B,))[..., :n]


def _powers(lam: float, age: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(lam^a, a lam^(a-1))`` for every place ``a = 0 .. max(age)`` in a track (``0^0 = 1``; the second is
    the derivative in ``lam``, 0 at ``a = 0``): tables that rows gather by their ``age``."""
    a = np.arange(int(age.max()) + 1 if age.size else 1)
    return np.power(lam, a), a * np.power(lam, np.maximum(a - 1, 0))


def discounted_sums(x: np.ndarray, track: np.ndarray, lam: float, derivative: bool = False, layout=None):
    r"""``S_k = sum_{j<k, same track} lam^{k-1-j} x_j`` for transitions ordered by track (rows of one
    track contiguous, in time order); :func:`first_order_sums` over all rows minus the carry-over from earlier
    tracks. With ``derivative`` also ``dS_k / d lam``. ``x`` may stack several series, ``(r, n)``, filtered
    together; ``layout``: :func:`track_layout` of ``track`` where the caller has it."""
    x = np.asarray(x, dtype=float)
    n = x.shape[-1]
    if n == 0:
        return (x.copy(), x.copy()) if derivative else x.copy()
    first, age = track_layout(track) if layout is None else layout
    carry = first_order_sums(x, lam)  # G_k = lam G_{k-1} + x_{k-1}
    pw, dpw = _powers(lam, age)
    decay = pw[age]
    out = carry - decay * carry[..., first]
    if not derivative:
        return out
    dcarry = first_order_sums(carry, lam)  # dG_k/dlam = G_{k-1} + lam dG_{k-1}/dlam
    return out, dcarry - dpw[age] * carry[..., first] - decay * dcarry[..., first]


def _discounted_counts(m: int, lam: float, age: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(N, dN/dlam)`` per place in a track: ``N(a) = m sum_{i<a} lam^i``, the discounted count of the module
    doc (:func:`discounted_sums` of the constant ``m``, which depends on the row's ``age`` only)."""
    pw, dpw = _powers(lam, age)
    return m * np.r_[0.0, np.cumsum(pw)[:-1]], m * np.r_[0.0, np.cumsum(dpw)[:-1]]


def _per_place(nu: float, m: int, lam: float, age: np.ndarray) -> tuple[np.ndarray, ...]:
    """What the predictive needs per place ``a`` in a track (tables that rows gather by ``age``): the degrees of
    freedom ``n = nu + N``, ``gammaln((n + m)/2) - gammaln(n/2)``, ``(digamma((n + m)/2) - digamma(n/2)) / 2``
    and ``dN/dlam``."""
    N, dN = _discounted_counts(m, lam, age)
    n = nu + N
    return (n, gammaln(0.5 * (n + m)) - gammaln(0.5 * n), 0.5 * (digamma(0.5 * (n + m)) - digamma(0.5 * n)), dN)


def _student_log_pdf(w, n, b, c, m, norm):
    """``log p`` of an ``m``-variate Student t residual with ``n`` degrees of freedom, squared norm ``c w``
    and scale ``b c / n`` per axis (the predictive of the module doc, ``n = nu + N``, ``b = nu + S``);
    ``norm = gammaln((n + m) / 2) - gammaln(n / 2)`` (:func:`_per_place`)."""
    return norm - 0.5 * m * np.log(np.pi * b * c) - 0.5 * (n + m) * np.log1p(w / b)


def _loglik_and_gradient(u, m, track, p, layout=None):
    """Mean log-predictive of :class:`TrackNoise` at ``p = (log nu, log c, lambda)`` and its gradient
    (``layout``: :func:`track_layout` of ``track`` where the caller has it). What depends on a row's place in
    its track only (the discounted count ``N`` and the gamma functions of ``n = nu + N``) is evaluated once per
    place and gathered."""
    nu, c, lam = np.exp(p[0]), np.exp(p[1]), float(p[2])
    layout = track_layout(track) if layout is None else layout
    age = layout[1]
    w = u / c
    S, dS = discounted_sums(w, track, lam, derivative=True, layout=layout)
    n, norm, psi_n, dN = (t[age] for t in _per_place(nu, m, lam, age))
    b = nu + S
    ll = _student_log_pdf(w, n, b, c, m, norm)
    d_n = psi_n - 0.5 * np.log1p(w / b)
    d_b = -0.5 * m / b + 0.5 * (n + m) * w / (b * (b + w))
    d_w = -0.5 * (n + m) / (b + w)
    grad = np.array([nu * np.mean(d_n + d_b),  # d/d log nu: n and b both move with nu
                     np.mean(-S * d_b - w * d_w) - 0.5 * m,  # d/d log c: w and S scale as 1/c
                     np.mean(d_b * dS + d_n * dN)])
    return float(np.mean(ll)), grad


@dataclass(frozen=True)
class TrackNoise:
    """The fitted per-track noise scale (module doc): ``nu``, ``scale`` (``c``) and ``forgetting`` (``lambda``)."""

    nu: float
    scale: float
    forgetting: float

    def log_predictive(self, u: np.ndarray, m: int, track: np.ndarray) -> np.ndarray:
        r"""``log p(z_k | z_{<k})`` of the standardised residuals ``z_k = r_k / s_k`` (``u = |z_k|^2``,
        ``m`` axes), rows ordered by track (module doc; ``log p(r_k) = this - m log s_k``)."""
        u = np.asarray(u, dtype=float)
        w = u / self.scale
        lam = float(self.forgetting)
        layout = track_layout(track)
        n, norm = (t[layout[1]] for t in _per_place(self.nu, m, lam, layout[1])[:2])
        return _student_log_pdf(w, n, self.nu + discounted_sums(w, track, lam, layout=layout), self.scale, m, norm)

    def draw(self, state, m: int, rng):
        """Standardised residuals ``z`` (``(n, m)``) for ``n`` tracks from the predictive given ``state``
        (``(S, N)`` arrays, or None at the tracks' start); returns ``(z, new_state)``."""
        if state is None:
            raise FpirlInputError("TrackNoise.draw needs the tracks' state (S, N); start with TrackNoise.start(n)")
        S, N = state
        n = self.nu + N
        shape2 = (self.nu + S) / n
        chi = rng.chisquare(n) / n
        u = rng.normal(size=(S.size, m)) * np.sqrt(shape2 / chi)[:, None]
        lam = float(self.forgetting)
        return u * np.sqrt(self.scale), (lam * S + np.sum(u * u, axis=1), lam * N + m)

    @staticmethod
    def start(n: int):
        """The state of ``n`` tracks without earlier steps."""
        return np.zeros(n), np.zeros(n)

    def to_attrs(self) -> dict:
        """Result attrs ``track_noise_nu``, ``track_noise_scale``, ``track_noise_forgetting`` (docs/formats.md)."""
        return {"track_noise_nu": float(self.nu), "track_noise_scale": float(self.scale),
                "track_noise_forgetting": float(self.forgetting)}

    @classmethod
    def from_attrs(cls, attrs) -> "TrackNoise | None":
        """The track-noise model stored in a result (None when it has none)."""
        if "track_noise_nu" not in attrs:
            return None
        try:
            vals = [float(np.asarray(attrs[k]).reshape(())) for k in
                    ("track_noise_nu", "track_noise_scale", "track_noise_forgetting")]
        except (KeyError, ValueError, TypeError) as exc:
            raise FpirlInputError(f"the result's track_noise attrs are incomplete ({exc})") from None
        if not (vals[0] > 0 and vals[1] > 0 and 0 <= vals[2] <= 1):
            raise FpirlInputError(f"the result's track_noise attrs are out of range: nu, scale, forgetting = {vals}")
        return cls(*vals)


def check_track_noise(spec):
    """``'auto'``, True (``'on'``) or False (``'off'``, None)."""
    if isinstance(spec, str) and spec == "auto":
        return "auto"
    if any(spec is s or (isinstance(spec, str) and spec == s) for s in TRUE_SPELLINGS) or spec is np.True_:
        return True
    if any(spec is s or (isinstance(spec, str) and spec == s) for s in FALSE_SPELLINGS) or spec is np.False_:
        return False
    raise FpirlInputError(f"track_noise must be 'auto', True/'on' or False/'off', got {spec!r}")


def standardised_residuals(est, tracks, axes, rng=None):
    """``u_k = |r_k|^2 / s_k^2`` of the transitions of ``tracks`` under the fitted estimator (its psi,
    beta, mobility and second lag, the predictive of :func:`fpirl.evaluation.heldout.fpirl_loglik` on
    the drift ``axes``), ordered by track, and the track of each: every transition, or with ``rng`` whole
    tracks drawn at random up to :data:`FIT_SAMPLE` transitions."""
    seg, vals, dt = tracks.segment, tracks.values, tracks.dt
    i = np.flatnonzero(seg[1:] == seg[:-1])
    if rng is not None and i.size > FIT_SAMPLE:
        ids, counts = np.unique(tracks.track[i], return_counts=True)
        order = rng.permutation(ids.size)
        take = ids[order[: int(np.searchsorted(np.cumsum(counts[order]), FIT_SAMPLE)) + 1]]
        i = i[np.isin(tracks.track[i], take)]
    ax = list(axes)
    dx = vals[i + 1][:, ax] - vals[i][:, ax]
    if tracks.periodic:
        length = (tracks.upper - tracks.lower)[ax]
        dx -= length * np.round(dx / length)
    m, g = model_mean(est, vals[i], ax)
    r = dx - m * dt
    var = 2.0 * dt / est.beta_ * g
    rho = getattr(est, "second_lag_", None)
    if rho is not None and i.size:
        has = np.r_[False, (i[1:] == i[:-1] + 1)]  # the previous transition of the segment exists
        prev = np.flatnonzero(has)
        r[prev] = r[prev] - rho * np.sqrt(g[prev] / g[prev - 1])[:, None] * r[prev - 1]
        var = var * np.where(has, 1.0 - rho * rho, 1.0)
    u = np.sum(r * r, axis=1) / var
    order = np.argsort(tracks.track[i], kind="stable")
    return u[order], tracks.track[i][order]


def _gaussian(u, m):
    return -0.5 * u - 0.5 * m * np.log(2.0 * np.pi)


def fit_track_noise(u: np.ndarray, m: int, track: np.ndarray, starts=(0.9, 1.0)) -> TrackNoise:
    """Maximum-likelihood ``(nu, c, lambda)`` of the sequential predictive (module doc) on standardised
    residuals ``u`` ordered by track (L-BFGS-B from ``nu = 5``, ``c = 1`` and each ``lambda`` in ``starts``)."""
    layout = track_layout(track)

    def negll(p):
        val, grad = _loglik_and_gradient(u, m, track, p, layout)
        return -val, -grad

    bounds = [tuple(np.log(NU_BOUNDS)), tuple(np.log(SCALE_BOUNDS)), FORGETTING_BOUNDS]
    best = None
    for lam0 in starts:  # a start on each side: the likelihood in lambda can have a ridge at 1
        with one_blas_thread():  # L-BFGS-B's small BLAS calls: 6x slower on two threads
            res = minimize(negll, [np.log(5.0), 0.0, lam0], jac=True, method="L-BFGS-B", bounds=bounds)
        if best is None or res.fun < best.fun:
            best = res
    return TrackNoise(float(np.exp(best.x[0])), float(np.exp(best.x[1])), float(best.x[2]))


def select_track_noise(est, tracks, axes, spec, folds: int = 5, random_state=0):
    """The :class:`TrackNoise` (or None) for ``spec`` True or 'auto' (module doc); returns
    ``(noise, cv)`` with ``cv = {'gain': mean held-out gain over the Gaussian, 'se': paired SE}`` ('auto')."""
    spec = check_track_noise(spec)
    if spec is False:
        return None, None
    u, track = standardised_residuals(est, tracks, axes, np.random.default_rng(random_state))
    m = len(list(axes))
    ids = np.unique(track)
    if u.size < 10 or ids.size < 2:
        if spec is True:
            raise FpirlInputError(f"the track-noise model needs transitions of at least two tracks; the table has "
                                  f"{u.size} transitions of {ids.size} track(s)")
        return None, None
    noise = fit_track_noise(u, m, track)
    if spec is True:
        return noise, None
    train_gain = float(np.mean(noise.log_predictive(u, m, track) - _gaussian(u, m)))
    if train_gain <= MIN_GAIN:  # its in-sample gain bounds the held-out one: the CV would drop it
        return None, {"gain": float("nan"), "se": float("nan"), "train_gain": train_gain}
    k = min(int(folds), ids.size)
    fold_of = np.random.default_rng(random_state).permutation(ids.size) % k
    fold = fold_of[np.searchsorted(ids, track)]
    gain = np.empty(u.size)
    for f in range(k):
        held = fold == f
        noise = fit_track_noise(u[~held], m, track[~held], starts=(0.9,))
        gain[held] = noise.log_predictive(u[held], m, track[held]) - _gaussian(u[held], m)
    cv = {"gain": float(np.mean(gain)), "se": track_se(gain, track), "train_gain": train_gain}
    keep = beats(cv["gain"], cv["se"])
    return (noise if keep else None), cv
