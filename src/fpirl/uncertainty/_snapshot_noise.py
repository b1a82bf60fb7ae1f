r"""Posterior of a density (VSI) fit under independent snapshot noise (issue 10, used by :mod:`fpirl.uncertainty`).

The row model of :func:`fpirl.uncertainty.density_posterior` treats the residual rows as
independent. Noise that is independent from snapshot to snapshot is not: snapshot ``k`` enters
the pairs ``k - 1`` and ``k`` with opposite signs in the time differences (they telescope) and
enters the pair averages of the design too. Here the noise is modelled where it occurs,

.. math::
    p_k^{obs} = p_k + \sigma\, s_k \odot z_k,\qquad z_k \sim N(0, I)\ \text{independent over } k,

with the nodal shape ``s_k = p_k`` (multiplicative noise) or ``s_k = 1`` on the data's support and 0
where the snapshots show no mass (additive; :func:`fpirl.uncertainty._reduced_noise.noise_shape`); with
``normalize`` the draws are projected like the data (``e_k - p_k \int e_k``, unit mass). The
residual ``r(p; x) = G(p) + D(p) x`` (``G = M dot p``, ``D = [Xi(bar p), C(bar p)]``, ``x = [theta;
gamma]``) is linear in the snapshots at fixed ``x``, so the estimator ``K x = -D^T G`` moves to
first order by

.. math::
    \delta x = -K^{-1}\big[D(p)^T r(e; \hat x) + D(e)^T \hat r\big],

``\hat r`` the fitted residual (``K`` the penalised normal matrix, bordered when beta is estimated).
``S`` seeded draws ``e_s = s \odot z_s`` (unit scale) give the vectors ``u_s = D(p)^T r(e_s)`` and
``b_s = D(e_s)^T \hat r``, computed for all draws of a batch at once (:mod:`fpirl.uncertainty._batched`:
the noise summed over time onto the POD modes of the data before its residual is formed, the
``3^d`` bands formed block by block into the first axis of the adjoint walk, one GEMM over the
draws; no normal matrix of the noise). What is an expectation of the noise (``E||r(e)||^2``, the
energy per node, the second-order band) is computed exactly, not drawn
(:mod:`fpirl.uncertainty._expected`: second moments of a linear map of Gaussian noise).

* **Noise level.** ``sigma^2 = RSS / E_1[RSS]`` with ``E_1[RSS] = E||r(e) + D(p) d||^2``,
  ``d = -K^{-1} u``: the observed residual sum of squares matched to its expectation under unit
  noise, so no noise level is given. ``E||r(e)||^2`` is exact; the correction through ``d`` (of
  the order of the number of unknowns, against ``||r||^2`` of the order of the rows) is the mean
  over the first :data:`SIGMA_DRAWS` draws.
* **Shape** (``noise='auto'``): the one whose expected residual energy per node
  ``sum_k E r_k[j]^2`` (exact) has the smaller spread of ``log`` ratio to the
  observed ``sum_k \hat r_k[j]^2``, i.e. explains where the residual is large.
* **Prior.** The penalty stays a Gaussian prior: the MAP posterior covariance is
  ``K^{-1} (Cov[D^T r_noise] + sigma_0^2 lambda P) K^{-1}``, which for independent rows
  (``Cov[D^T r] = sigma_0^2 A``) is exactly the row-model ``sigma_0^2 K^{-1}`` (before the zero-mean
  conditioning). ``sigma_0^2 = RSS / (n_rows - n_x)`` keeps the scale the ridge was set against;
  the term matters only where the data carry no mass (wide intervals there). It is sampled as
  ``sqrt(lambda sigma_0^2) sum_a (kron_b R_b^{[b=a]}) w_a`` with ``G_b = R_b R_b^T`` the 1-D Gram
  factors of ``P = sum_a kron_b G_b^{[b=a]}``.

* **Bias.** The second-order (errors-in-variables) shift of the estimator,
  ``-sigma^2 K^{-1} E[D(e)^T r(e)]`` (exact), is one more column of the factor (a systematic error
  of that size, sign not used): at 30% multiplicative noise the fit shrinks psi by ~40% and this
  is the larger part of the error (docs/benchmarks.md, issue 10).

* **Resolution.** Noise is not the only error: on coarse grids the FE discretisation error of the
  weak form can exceed it (2-D, 16^2 nodes, 2% noise: the noise-only model covered 42%). When every
  axis has an even number of elements, the fit is repeated on every second node (``2h``, same
  Hermite space and settings) and the Richardson estimate of the error of the fine fit,
  ``(x_h - x_{2h}) / (2^2 - 1)`` (second-order weak form), is one more systematic column, like the bias
  (:func:`fpirl.uncertainty._resolution.resolution_error`: shrunk by the noise of both fits).

So ``Cov(x) = F F^T`` with the ``S`` columns ``F_s = -K^{-1}(sigma (u_s + b_s) + prior_s) / sqrt(S)``
and the bias and resolution columns, projected on ``m^T theta = 0``. ``K^{-1}`` is a Cholesky solve on the assembled path and
preconditioned conjugate gradients (:func:`fpirl.weakform.matfree.conjugate_gradient`, one solve per draw, plus 8 for the noise level)
on the matrix-free path.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from ..core._errors import FpirlInputError
from ._batched import BatchedDraws, draw_vectors
from ._expected import ExpectedResidual
from ._resolution import confirmed_noise, raw_sums, resolution_error
from ..core._tensor import apply_along_axes
from ..weakform.assembly import diffusion_and_rate
from ..core.density import DensitySnapshots
from ..core._threads import threaded
from ..weakform.matfree import (KroneckerPreconditioner, NormalOperator, StreamingSnapshots, _pad,
                                conjugate_gradient, h1_apply)
from ._posterior import CoefficientPosterior
from ..estimators.identify import PotentialEstimator

#: Noise shapes accepted by :func:`snapshot_posterior`.
NOISE_MODELS = ("auto", "multiplicative", "additive")
#: Draws of the snapshot noise (assembled path; each costs one band pass into its adjoint walk).
DEFAULT_DRAWS = 64
#: Draws on the matrix-free path (each costs one CG solve, the first 8 one more).
DEFAULT_DRAWS_MATFREE = 48
#: Relative residual of the CG solves of the draws (matrix-free path).
DRAW_RTOL = 1e-6
#: Draws whose ``K^{-1} u_s`` enter the expected RSS (the noise level), see :func:`snapshot_posterior`.
SIGMA_DRAWS = 8
#: Residual entries per chunk from which the band accumulation runs on two threads.
_THREAD_MIN_SIZE = 1 << 18
#: The fitted fields are kept in memory between draws below this size (else re-read per draw).
_CACHE_BYTES = 1 << 28


class _BandOperator(NormalOperator):
    """The tables, band walks and residuals of :class:`NormalOperator` without its right-hand sides, trace and
    marginals (a pass over all snapshots): the assembled path's posterior takes those from the fit."""

    def _right_hand_sides(self):
        return None


def _density_estimator(est):
    for cand in (est, getattr(est, "estimator_", None)):
        if isinstance(cand, PotentialEstimator) and getattr(cand, "coef_", None) is not None:
            return cand
    raise FpirlInputError(f"{type(est).__name__} is not a fitted density estimator: no snapshot-noise posterior")


class _Residuals:
    """Residual fields ``r(q; x) = G(q) + Xi(bar q) theta + gamma C(bar q)`` chunk by chunk, and the band sums."""

    def __init__(self, op, theta, gamma, dt, scheme):
        self.op, self.gamma, self.dt, self.scheme = op, gamma, dt, scheme
        self.U = op._forward(theta)
        d = op.d
        sub = "".join(chr(ord("a") + b) for b in range(d))
        self.expr = f"{sub}k,{sub}k->{sub}"
        size = 8 * 4 * op.grid.size * op.source.n_times
        self._cache = [] if size <= _CACHE_BYTES else None
        self._csr = None
        self._filled = False

    def _pad(self, q):
        return _pad(q, self.op.grid.periodic)

    def xi_band(self):
        """The band ``U`` of ``Xi(.) theta`` as one sparse matrix on the padded grid, built once
        (:meth:`fpirl.weakform.matfree.NormalOperator._band_matrix`), or None where its pattern is too large."""
        if self._csr is None:
            pshape = tuple(n + 2 for n in self.op.shape)
            csr = self.op._band_matrix(self.U, pshape)
            self._csr = False if csr is None else csr
        return self._csr if self._csr is not False else None

    def xi_theta(self, P: np.ndarray) -> np.ndarray:
        """``Xi(q) theta = sum_l shift_l(q) U[l]`` ``(*grid, m)`` from the padded ``P`` ``(*grid + 2, m)``: one
        sparse product (:meth:`xi_band`), or ``3^d`` elementwise passes where its pattern would be too large."""
        op, csr = self.op, self.xi_band()
        if csr is not None:
            return (csr @ P.reshape(-1, P.shape[-1])).reshape(op.shape + (P.shape[-1],))
        r = np.zeros(op.shape + (P.shape[-1],))
        for idx, view in op._views(P):
            r += view * self.U[op._key(idx)][..., None]
        return r

    def apply(self, q):
        """``(bar q, C bar q, r(q))`` for a block of snapshots ``q`` (shape ``(m, *grid)``)."""
        qbar, g, c = diffusion_and_rate(q, self.dt, self.op.tables, self.scheme)
        r = np.moveaxis(self.xi_theta(self._pad(qbar)), -1, 0) + g
        r += self.gamma * c
        return qbar, c, r

    def accumulate(self, W, r, qbar):
        """``W[l, j] += sum_k r_k[j] bar q_k[j + l]`` (the band whose adjoint walk is ``Xi(bar q)^T r``)."""
        R = np.ascontiguousarray(np.moveaxis(r, 0, -1))
        views = list(self.op._views(self._pad(qbar)))

        def work(part):  # disjoint slices of W per shift: safe on two threads (einsum releases the GIL)
            for idx, view in part:
                W[self.op._key(idx)] += np.einsum(self.expr, R, view)

        if R.size < _THREAD_MIN_SIZE:  # small bands: a thread pool costs more than it saves
            work(views)
        else:
            threaded(work, views)

    def fitted(self):
        """Per chunk: ``(block, bar p, C bar p, r_hat)`` of the fitted data (cached when small)."""
        if self._cache is not None and self._filled:
            yield from self._cache
            return
        if self._cache is not None:
            self._cache = []
        for block in self.op.source.pair_chunks(self.op.chunk, self.op.overlap):
            item = (block,) + self.apply(block)
            if self._cache is not None:
                self._cache.append(item)
            yield item
        self._filled = self._cache is not None


def choose_shape(res, normalize, expected=None) -> tuple[str, dict]:
    """The noise shape whose expected residual energy per node best matches the observed one (module doc;
    the expectation exact, :class:`fpirl.uncertainty._expected.ExpectedResidual`)."""
    expected = ExpectedResidual(res) if expected is None else expected
    obs = np.zeros(res.op.shape)
    for *_, rhat in res.fitted():
        obs += np.sum(rhat * rhat, axis=0)
    tiny = 1e-300 + 1e-12 * obs.max()
    scores = {}
    for model in NOISE_MODELS[1:]:
        exp = expected.energy(model, normalize)
        ratio = np.log((obs + tiny) / (exp + 1e-12 * exp.max() + 1e-300))
        scores[model] = float(np.var(ratio))
    return min(scores, key=scores.get), scores


def _prior_draws(hermite, n, rng) -> np.ndarray:
    """``n`` draws of ``N(0, P)``, ``P = sum_a kron_b G_b^{[b=a]}`` (columns, shape ``(n_coef, n)``)."""
    fac = []
    for ax in hermite.axes:
        pair = []
        for k in (0, 1):
            w, V = scipy.linalg.eigh(ax.gram(k))
            pair.append(V * np.sqrt(np.clip(w, 0.0, None)))
        fac.append(pair)
    out = np.zeros((n,) + hermite.shape)
    for a in range(hermite.ndim):
        z = rng.standard_normal((n,) + hermite.shape)
        out += apply_along_axes(z, [fac[b][int(b == a)] for b in range(hermite.ndim)])
    return out.reshape(n, -1).T


class _Solver:
    """``K^{-1}`` and ``K_data`` on the assembled (Cholesky) or matrix-free (CG) path; ``x = [theta; gamma]``."""

    def __init__(self, inner, op, estimated, rtol):
        h = inner.hermite_
        self.n, self.estimated = h.n_coef, estimated
        self.m = h.mean_functional().ravel()
        ne = inner.normal_equations_
        lam = inner.penalty_
        if ne is not None:
            A = ne.xtx
            mu = np.trace(A) / self.n
            Kd = np.block([[A, ne.xtc[:, None]], [ne.xtc[None, :], np.array([[ne.cc]])]]) if estimated else A
            self.Kd = Kd
            lam_fit, factor = getattr(inner, "_factor", (None, None))
            if estimated or factor is None or lam_fit != float(lam):  # else the fit's factor of this same K
                K = Kd.copy()
                K[:self.n, :self.n] += lam * h.h1_seminorm_matrix() + mu * np.outer(self.m, self.m)
                factor = scipy.linalg.cho_factor(K, lower=True, check_finite=False)
            self.chol = factor
            self.xtc, self.cc = ne.xtc, ne.cc
            return

        self.chol, self.op, self.rtol = None, op, rtol
        mu = op.trace / self.n
        self.M = lambda c: op.matvec(c) + lam * h1_apply(h, c) + mu * self.m * float(self.m @ c)
        self.pre = KroneckerPreconditioner(h, op.matvec, mu, op.marginals, list(op.grid.axes))
        self.xtc, self.cc = op.rhs.xtc, op.rhs.cc
        if estimated:
            self.y2 = self._cg(self.xtc)
            self.schur = self.cc - float(self.xtc @ self.y2)

    def _cg(self, b):
        return conjugate_gradient(self.M, b, self.pre, rtol=self.rtol, maxiter=2000)[0]

    def solve(self, V: np.ndarray) -> np.ndarray:
        """``K^{-1} V`` for the columns of ``V`` (bordered: Schur complement of ``gamma``)."""
        if self.chol is not None:
            return scipy.linalg.cho_solve(self.chol, V, check_finite=False)
        out = np.empty_like(V)
        for s in range(V.shape[1]):
            y = self._cg(V[: self.n, s])
            if self.estimated:
                dg = (V[self.n, s] - float(self.xtc @ y)) / self.schur
                out[: self.n, s], out[self.n, s] = y - dg * self.y2, dg
            else:
                out[:, s] = y
        return out

    def data_apply(self, Y: np.ndarray) -> np.ndarray:
        """``K_data Y`` (``A`` bordered by ``X^T c`` and ``c.c`` when gamma is estimated)."""
        if self.chol is not None:
            return self.Kd @ Y
        out = np.empty_like(Y)
        for s in range(Y.shape[1]):
            out[: self.n, s] = self.op.matvec(Y[: self.n, s])
            if self.estimated:
                out[: self.n, s] += self.xtc * Y[self.n, s]
                out[self.n, s] = float(self.xtc @ Y[: self.n, s]) + self.cc * Y[self.n, s]
        return out


def snapshot_posterior(est, snapshots, *, noise: str = "auto", n_draws: int | None = None, rng=0,
                       rtol: float = DRAW_RTOL, progress: bool = False, resolve: bool = True):
    """Posterior of a density fit under independent snapshot noise (module doc, eq. for ``delta x``).

    Parameters
    ----------
    est : PotentialEstimator (or an estimator wrapping one as ``estimator_``)
        Fitted on ``snapshots``, by either solver (assembled: Cholesky; matrix-free: CG).
    snapshots : DensitySnapshots or fpirl.weakform.matfree.StreamingSnapshots
        The data of the fit.
    noise : {'auto', 'multiplicative', 'additive'}
        Noise shape ``s_k = p_k`` or ``1`` on the data's support; ``'auto'`` picks by the residual profile (:func:`choose_shape`).
    n_draws : int, optional
        Noise draws ``S`` (:data:`DEFAULT_DRAWS`, :data:`DEFAULT_DRAWS_MATFREE` on the matrix-free
        path); the std carries a relative Monte Carlo error of about ``1 / sqrt(2 S)``.
    rng : seed or Generator
    rtol : float
        Relative residual of the CG solves (matrix-free path).
    progress : bool
        A tqdm bar over the draws (each is a pass over all snapshots).
    resolve : bool
        Add the resolution column (:func:`fpirl.uncertainty._resolution.resolution_column`) where the grid can be halved.

    Returns
    -------
    CoefficientPosterior
        ``factor`` with ``S`` columns, ``noise_variance = sigma^2`` (per unit-shape noise),
        ``noise_model`` the shape used, normal quantiles.
    """
    if noise not in NOISE_MODELS:
        raise FpirlInputError(f"noise must be one of {', '.join(NOISE_MODELS)}, got {noise!r}")
    inner = _density_estimator(est)
    h = inner.hermite_
    given = snapshots
    if isinstance(snapshots, DensitySnapshots):
        snapshots = StreamingSnapshots.from_snapshots(snapshots)
    if not isinstance(snapshots, StreamingSnapshots):
        raise FpirlInputError("the snapshot-noise posterior needs the fitted density snapshots")
    if snapshots.grid.shape != inner.grid_.shape:
        raise FpirlInputError(f"snapshots on a {snapshots.grid.shape} grid, the fit on {inner.grid_.shape}")
    assembled = inner.normal_equations_ is not None
    if n_draws is None:
        n_draws = DEFAULT_DRAWS if assembled else DEFAULT_DRAWS_MATFREE
    if not (isinstance(n_draws, (int, np.integer)) and n_draws >= 2):
        raise FpirlInputError(f"n_draws must be an integer >= 2, got {n_draws!r}")
    source = snapshots.normalize() if inner.normalize else snapshots
    op = (_BandOperator if assembled else NormalOperator)(source, h, time_scheme=inner.time_scheme,
                                                         quadrature_points=inner.quadrature_points,
                                                         compress=None if assembled else 1e-13)
    estimated = bool(inner.settings_.get("beta_estimated", 0))
    gamma = 1.0 / float(inner.beta_)
    theta = np.asarray(inner.coef_, dtype=float).ravel()
    res = _Residuals(op, theta, gamma, source.dt, inner.time_scheme)
    gen = np.random.default_rng(rng)
    g_noise, g_prior, _ = (np.random.default_rng(s) for s in gen.integers(2**62, size=3))
    bd = BatchedDraws(res, estimated)
    expected = ExpectedResidual(res, bd.pfull)
    if noise == "auto":
        noise = choose_shape(res, inner.normalize, expected)[0]

    n, nx = h.n_coef, h.n_coef + int(estimated)
    # all draws through batched contractions, the noise summed over time first (fpirl.uncertainty._batched)
    m = min(n_draws, SIGMA_DRAWS)
    UB, U = draw_vectors(res, noise, inner.normalize, g_noise, n_draws, estimated, progress=progress, n_u=m, bd=bd,
                         expected=expected)
    rr = float(np.sum(expected.energy(noise, inner.normalize)))  # E||r(e)||^2, exact
    Q = np.zeros((nx, 1))  # E D(bar e)^T r(e), exact
    # beta given, psi from noise-corrected sums: only the part of the bias those sums keep (X^T X's noise); the
    # whole bias (of the raw sums' fit) for the resolution column's shrinkage (fpirl.uncertainty._resolution.raw_sums)
    xi_only = not estimated and bool(inner.settings_.get("noise_corrected", 0))
    Q[:n, 0], qg = expected.bias(noise, inner.normalize, estimated, xi_only=xi_only)
    if xi_only and resolve and raw_sums(inner):
        Q = np.hstack([Q, np.zeros((nx, 1))])
        Q[:n, 1] = expected.bias(noise, inner.normalize, estimated)[0]
    if estimated:
        Q[n, 0] = qg
    rss = n_rows = 0
    for *_, rhat in res.fitted():
        rss += float(np.vdot(rhat, rhat))
        n_rows += rhat.size
    solver = _Solver(inner, op, estimated, rtol)
    sigma0_2 = rss / max(n_rows - nx, 1)
    prior = np.zeros((nx, n_draws))
    prior[:n] = np.sqrt(inner.penalty_ * sigma0_2) * _prior_draws(h, n_draws, g_prior)
    if solver.chol is not None:
        # one Cholesky solve for all right-hand sides (K^{-1} is linear: sigma enters after the solve)
        Z = solver.solve(np.hstack([U, UB, prior, Q]))
        m_u = U.shape[1]
        Y, ZB, ZP, ZQ = np.split(Z, [m_u, m_u + n_draws, m_u + 2 * n_draws], axis=1)
    else:
        Y = solver.solve(U)
    # E_1[RSS]: E||r(e)||^2 exact; the correction through d_s = -K^{-1} u_s (of the order of the
    # number of unknowns, against ||r||^2 of the order of the rows) from the first few draws
    correction = -2 * np.sum(U * Y, axis=0) + np.sum(Y * solver.data_apply(Y), axis=0)
    e_rss = float(rr + np.mean(correction))
    if not (e_rss > 0 and rss > 0):
        raise FpirlInputError("the residual of the fit is zero: the noise level cannot be estimated")
    sigma2 = rss / e_rss
    if solver.chol is not None:
        F = -(np.sqrt(sigma2) * ZB + ZP) / np.sqrt(n_draws)
        bias = -sigma2 * ZQ
    else:
        F = -solver.solve(np.sqrt(sigma2) * UB + prior) / np.sqrt(n_draws)  # one solve per draw
        bias = -sigma2 * solver.solve(Q)  # second order: E[D(e)^T r(e)] (and the raw sums' where computed)
    mean_functional = solver.m
    moments = getattr(inner, "_moments", None)  # the fit's noise variance of these same data, where it kept one
    kept = moments.noise_variance if moments is not None and moments.source is given else False
    confirmed = confirmed_noise(source, noise, sigma2, kept) if resolve else None
    # the coarse fit of the resolution column runs next: this posterior's operators (band fields, the bordered
    # system where gamma is estimated) are not held through it (a lower peak; fresh pages are costly)
    del solver, bd, expected, res, op, source, snapshots
    resolution = (resolution_error(inner, given, estimated, F[:n], bias[:n, -1], snapshot_posterior, noise, gen,
                                   confirmed) if resolve else None)
    F = np.hstack([F, bias[:, :1]] + ([] if resolution is None else [resolution[:, None]]))
    n_res = 0 if resolution is None else 1
    F[:n] -= np.outer(h.constant_mode().ravel(), mean_functional @ F[:n])
    if not estimated:
        F = np.vstack([F, np.zeros((1, F.shape[1]))])
    return CoefficientPosterior(h, theta, gamma, F, method="posterior", noise_variance=sigma2,
                                beta_estimated=estimated, noise_model=noise, bias=F[:, F.shape[1] - 1 - n_res].copy(),
                                resolution=None if resolution is None else F[:, -1].copy(), noise_confirmed=confirmed)


def matrix_free_posterior_seconds(est) -> float | None:
    """Estimated wall time of :func:`snapshot_posterior` for a matrix-free density fit (else None).

    ``(S + 9 + [beta estimated]) x (CG iterations of the fit's solve, scaled by
    log(DRAW_RTOL) / log(fit tolerance)) + 3 S`` products with ``A``
    (one CG solve per draw, ``SIGMA_DRAWS`` more for the noise level and one for the bias, and the
    band passes of the draws) at the fit's time per product. None for assembled fits (cheap) and
    interpolated-flux fits (no posterior).
    """
    for cand in (est, getattr(est, "estimator_", None)):
        info = getattr(cand, "cg_info_", None)
        if info:
            break
    else:
        return None
    if (getattr(cand, "settings_", None) or {}).get("solver") in ("interpolated-flux", "gauss-flux", "mixed-flux"):
        return None
    if not info.get("matvecs") or "seconds" not in info:
        return None
    per_product = info["seconds"] / info["matvecs"]
    solves = DEFAULT_DRAWS_MATFREE + SIGMA_DRAWS + 1 + int(len(info["iterations"]) > 1)
    fit_tol = float((getattr(cand, "settings_", None) or {}).get("cg_tol", DRAW_RTOL))
    # CG's residual falls about geometrically: iterations scale with log(tolerance)
    iterations = max(info["iterations"]) * min(1.0, np.log(DRAW_RTOL) / np.log(min(fit_tol, 0.5)))
    return float((solves * iterations + 3 * DEFAULT_DRAWS_MATFREE) * per_product)
