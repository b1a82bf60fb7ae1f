r"""Model adequacy: how much of the observed drift is not the gradient of a potential (Helmholtz split).

FP-IRL assumes the drift of the joint process is a gradient, ``b = -grad psi`` (eq. ``SDE``). This
check fits an *unconstrained* drift to the increments and measures the part of it that no
gradient can explain:

1. Unconstrained drift. Every drift component ``j`` in ``drift_axes`` is regressed on a
   polynomial basis (tensor Legendre polynomials of total degree ``<= K`` in the coordinates
   scaled to ``[-1, 1]`` over the table's box):
   :math:`\Delta x_j / \Delta t = b_j(x) + \text{noise}`, :math:`b_j = \sum_m c_{jm} \phi_m`
   (least squares = maximum likelihood for the Gaussian transition, eq. ``gaussian_transition``).
2. Helmholtz split in the data-weighted :math:`L^2` norm
   :math:`\|f\|^2 = \frac1N \sum_i |f(x_i)|^2` (``x_i`` the transition start points): the
   gradient part is the orthogonal projection of ``b`` onto
   :math:`\{(\partial_j \varphi)_{j \in J} : \varphi \text{ polynomial of degree} \le K + 1\}`,
   which contains every gradient field of the drift space; the remainder ``r`` is the non-gradient part.
   Since derivatives of the basis are exact linear combinations of the basis, the split only needs
   the Gram matrix :math:`S = X^\top X / N` and differentiation matrices ``D_j``.
3. The reported fraction is :math:`(\|r\|^2 - B_r)/(\|b\|^2 - B_b)` clipped to ``[0, 1]``, where
   ``B_r``, ``B_b`` remove the expected contribution of the regression noise: with noise variance
   :math:`\sigma_j^2` per component, :math:`B_b = \sum_j \sigma_j^2 p/N` and
   :math:`B_r = \sum_j \sigma_j^2 (p - \operatorname{tr}(H^{-1} D_j^\top S D_j))/N`,
   :math:`H = \sum_j D_j^\top S D_j` (``p`` basis functions). So a pure gradient drift gives a
   fraction near 0 whatever the noise level, and the fraction is a property of the data, not of
   the number of transitions.
4. A percentile bootstrap over whole tracks gives the interval (tracks are resampled with
   replacement; per-track sufficient statistics make each replicate a few small matrix solves),
   shifted by the replicates' bias, ``median(boot) - fraction``, and clipped to ``[0, 1]``. A replicate
   repeats tracks, whose noise the debiasing of step 3 counts once (it assumes independent rows), so
   the replicates' fractions run high where the noise is large: on 3-D T-cell tracks (258 tracks) the
   plain percentile interval was 0.009-0.019 for an estimate of 0.007.

For tracks with velocity actions the state increments are kinematic (``s_{k+1} - s_k = a_{k+1} dt``,
never a gradient), so only the action axes are checked (``drift_axes`` default). Then only the
part of the velocity drift that curls in velocity space counts: any drift ``b_a(s, a)`` that is a
gradient in ``a`` for every ``s`` is ``-grad_a psi`` for some ``psi(s, a)``.
"""

from __future__ import annotations


import numpy as np
from numpy.polynomial import legendre

from ..core._errors import FpirlInputError
from ..core._estimator import BaseEstimator
from ..core._legendre import legendre_design, multi_indices
from ..tracks.steps import infer_action_kind

__all__ = ["HelmholtzCheck"]

_ATTR_PREFIX = "adequacy_"


def _derivative_matrices(alphas: np.ndarray, betas: np.ndarray, axes, scale: np.ndarray) -> np.ndarray:
    """``D[j]`` (p x q): coefficients in the drift basis of ``d/dx_{axes[j]}`` of each potential basis function."""
    index = {tuple(a): i for i, a in enumerate(alphas)}
    top = int(betas.max()) if betas.size else 0
    d1 = np.zeros((top + 1, top + 1))  # d1[n, m]: coefficient of P_m in P_n'
    for n in range(1, top + 1):
        c = legendre.legder(np.eye(top + 1)[n])
        d1[n, : c.size] = c
    D = np.zeros((len(axes), alphas.shape[0], betas.shape[0]))
    for j, ax in enumerate(axes):
        for k, beta in enumerate(betas):
            for m in range(beta[ax]):
                if d1[beta[ax], m] != 0.0:
                    target = beta.copy()
                    target[ax] = m
                    D[j, index[tuple(target)], k] += d1[beta[ax], m] * scale[ax]
    return D


def _split(A, XY, YY, N, D):
    """Debiased non-gradient fraction for (batches of) sufficient statistics.

    A (..., p, p) = X^T W X, XY (..., p, m), YY (..., m), N (...,) total weight, D (m, p, q).
    Returns (fraction, raw fraction, drift energy) each of shape (...,).
    """
    p = A.shape[-1]
    ridge = 1e-10 * np.trace(A, axis1=-2, axis2=-1)[..., None, None] / p
    A_r = A + ridge * np.eye(p)
    C = np.linalg.solve(A_r, XY)  # (..., p, m)
    rss = YY - np.einsum("...pm,...pm->...m", C, XY)
    sigma2 = np.clip(rss, 0.0, None) / np.maximum(N - p, 1.0)[..., None]
    S = A / N[..., None, None]
    den = np.einsum("...pm,...pr,...rm->...", C, S, C)
    SD = np.einsum("...pr,jrq->...jpq", S, D)  # S D_j
    Hj = np.einsum("jpq,...jpr->...jqr", D, SD)  # D_j^T S D_j
    H = Hj.sum(axis=-3)
    q = H.shape[-1]
    H = H + 1e-12 * np.trace(H, axis1=-2, axis2=-1)[..., None, None] / q * np.eye(q)
    rhs = np.einsum("...jpq,...pj->...q", SD, C)
    theta = np.linalg.solve(H, rhs[..., None])[..., 0]
    R = C - np.einsum("jpq,...q->...pj", D, theta)  # remainder coefficients
    num = np.einsum("...pm,...pr,...rm->...", R, S, R)
    tr_j = np.einsum("...qr,...jrq->...j", np.linalg.inv(H), Hj)
    bias_den = sigma2.sum(axis=-1) * p / N
    bias_num = np.sum(sigma2 * (p - tr_j), axis=-1) / N
    num, den = np.broadcast_arrays(num, den)
    raw = np.divide(num, den, out=np.zeros(num.shape), where=den > 0)
    # drift indistinguishable from noise (nan) where the debiased energy is not positive; no division there
    # (a floor such as 1e-300 overflows on data in large units)
    signal = den - bias_den
    frac = np.clip(np.divide(num - bias_num, signal, out=np.full(num.shape, np.nan), where=signal > 0), 0.0, 1.0)
    return frac, raw, den


class HelmholtzCheck(BaseEstimator):
    """Non-gradient fraction of the drift, with a bootstrap interval over tracks (see module docstring).

    Parameters
    ----------
    degree : int, default 3
        Total degree ``K`` of the polynomial drift (cubic drift, quartic potential).
    drift_axes : sequence of int, optional
        Axes whose drift is checked (default: the action axes for velocity actions, else all axes).
    n_boot : int, default 200
        Bootstrap replicates over tracks.
    level : float, default 0.9
        Coverage of the (bias-shifted) percentile interval.
    threshold : float, default 0.2
        The gradient assumption is flagged as clearly violated when the lower end of the interval
        exceeds this fraction.
    random_state : int or Generator, default 0

    Attributes
    ----------
    fraction_ : float
        Debiased non-gradient fraction of the drift energy (NaN when no drift is detectable).
    raw_fraction_ : float
        The same without the noise correction.
    interval_ : tuple of float
        Bootstrap percentile interval, shifted by the replicates' median bias (module doc, step 4).
    drift_energy_ : float
        ``||b||^2`` (data-weighted mean squared drift).
    n_transitions_, n_tracks_ : int
    drift_axes_ : tuple of int
    violated_ : bool
    """

    def __init__(self, *, degree=3, drift_axes=None, n_boot=200, level=0.9, threshold=0.2, random_state=0):
        self.degree = degree
        self.drift_axes = drift_axes
        self.n_boot = n_boot
        self.level = level
        self.threshold = threshold
        self.random_state = random_state

    def fit(self, table) -> HelmholtzCheck:
        """Fit the unconstrained drift of ``table`` (a :class:`~fpirl.tracks.TrackTable`) and split it."""
        K = int(self.degree)
        if K < 1:
            raise FpirlInputError(f"degree must be >= 1, got {self.degree}")
        axes = self.drift_axes
        if axes is None:
            axes = table.action_axes if infer_action_kind(table) == "velocity" else tuple(range(table.ndim))
        axes = tuple(int(a) for a in axes)
        if not axes or any(not 0 <= a < table.ndim for a in axes):
            raise FpirlInputError(f"drift_axes must be axes of the table (0..{table.ndim - 1}), got {axes}")
        i0, _ = table.pairs()
        x, dx = table.increments()
        alphas = multi_indices(table.ndim, K)
        betas = multi_indices(table.ndim, K + 1)
        betas = betas[np.any(betas[:, list(axes)] > 0, axis=1)]  # constant along the drift axes: no gradient
        p = alphas.shape[0]
        if x.shape[0] < 2 * p:
            raise FpirlInputError(f"need at least {2 * p} transitions for the adequacy check, got {x.shape[0]}")
        length = table.upper - table.lower
        u = np.clip(2.0 * (x - table.lower) / length - 1.0, -1.0, 1.0)
        X = legendre_design(u, alphas, K)
        Y = dx[:, list(axes)] / table.dt
        D = _derivative_matrices(alphas, betas, axes, 2.0 / length)

        track = table.track[i0]
        order = np.argsort(track, kind="stable")
        tracks, start = np.unique(track[order], return_index=True)
        bounds = np.append(start, order.size)
        T = tracks.size
        A_t = np.empty((T, p, p))
        XY_t = np.empty((T, p, len(axes)))
        YY_t = np.empty((T, len(axes)))
        N_t = np.diff(bounds).astype(float)
        for t in range(T):  # one small GEMM per track
            rows = order[bounds[t]:bounds[t + 1]]
            Xt, Yt = X[rows], Y[rows]
            A_t[t], XY_t[t], YY_t[t] = Xt.T @ Xt, Xt.T @ Yt, np.sum(Yt**2, axis=0)

        frac, raw, energy = _split(A_t.sum(0), XY_t.sum(0), YY_t.sum(0), np.asarray(N_t.sum()), D)
        rng = np.random.default_rng(self.random_state)
        w = rng.multinomial(T, np.full(T, 1.0 / T), size=int(self.n_boot)).astype(float)
        boot, _, _ = _split(np.einsum("bt,tpq->bpq", w, A_t), np.einsum("bt,tpm->bpm", w, XY_t), w @ YY_t, w @ N_t, D)
        boot = boot[np.isfinite(boot)]
        tail = 50.0 * (1.0 - self.level)
        lo, hi = (np.percentile(boot, [tail, 100.0 - tail]) if boot.size else (np.nan, np.nan))
        if boot.size and np.isfinite(frac):  # the replicates' own bias removed (module doc, step 4)
            shift = float(np.median(boot)) - float(frac)
            lo, hi = float(np.clip(lo - shift, 0.0, 1.0)), float(np.clip(hi - shift, 0.0, 1.0))

        self.fraction_ = float(frac)
        self.raw_fraction_ = float(raw)
        self.interval_ = (float(lo), float(hi))
        self.drift_energy_ = float(energy)
        self.n_transitions_ = int(x.shape[0])
        self.n_tracks_ = int(T)
        self.drift_axes_ = axes
        self.drift_names_ = tuple(table.names[a] for a in axes)
        self.violated_ = bool(np.isfinite(lo) and lo > self.threshold)
        return self

    def to_attrs(self) -> dict:
        """Result-file attrs (``adequacy_*``)."""
        self._check_fitted()
        return {
            f"{_ATTR_PREFIX}nongradient_fraction": self.fraction_,
            f"{_ATTR_PREFIX}nongradient_lower": self.interval_[0],
            f"{_ATTR_PREFIX}nongradient_upper": self.interval_[1],
            f"{_ATTR_PREFIX}level": float(self.level),
            f"{_ATTR_PREFIX}degree": int(self.degree),
            f"{_ATTR_PREFIX}drift_axes": ",".join(self.drift_names_),
            f"{_ATTR_PREFIX}violated": int(self.violated_),
        }

    def summary(self) -> str:
        """One line for the CLI."""
        self._check_fitted()
        lo, hi = self.interval_
        if not np.isfinite(self.fraction_):
            return (f"no drift of {', '.join(self.drift_names_)} detectable above the noise (pure diffusion?): "
                    "the non-gradient fraction is undefined, nothing to check")
        interval = (f"{100 * self.level:.0f}% bootstrap interval over {self.n_tracks_} tracks: {lo:.3f}-{hi:.3f}"
                    if np.isfinite(lo) and np.isfinite(hi) else f"no bootstrap interval: {self.n_tracks_} tracks")
        text = f"non-gradient fraction of the drift of {', '.join(self.drift_names_)}: {self.fraction_:.3f} ({interval})"
        return text
