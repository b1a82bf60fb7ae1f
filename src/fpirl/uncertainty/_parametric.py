r"""Parametric bootstrap of the density estimator on tracks: replicate tables simulated from the fit.

The density estimator on a track table (:class:`fpirl.estimators.TrackDensityEstimator`: cloud-in-cell
snapshots, then the VSI of eq. ``vsi_regression``) carries errors that the row model of
:func:`fpirl.uncertainty.density_posterior` (independent residual rows) does not describe:

* **binning bias.** A cloud-in-cell value is a hat-function average of the density,
  ``p(x_j) + sum_i h_i^2 d_ii p(x_j) / 12 + O(h^4)`` inside the box (``O(h)`` at a wall): the snapshots are
  smoothed and the fitted ``psi`` is shrunk (2-D, 20,000 tracks, where the noise is small: ``psi`` scaled
  by 0.91 on the 10-element grid that the FE rule gives 600 tracks);
* **histogram noise that is correlated in time.** Consecutive frames hold the same particles, so a
  snapshot's sampling noise persists for as long as a particle takes to cross a cell; it enters the
  design and the diffusion term of the weak form together and moves ``psi`` either way (scaled by 1.13
  on a 40-element grid with 20,000 tracks), and it is not independent from row to row.

**The replicates.** Tables of the fitted model, eq. ``SDE``,

.. math:: dz = -\nabla\psi(z)\,dt + \sqrt{2/\beta}\,dW

on every axis of the table (the joint state-action space the estimator fits), by Euler-Maruyama
(:func:`fpirl.forward.markov.sample_sde`, folded at reflecting walls, wrapped on a periodic box) on
:func:`frame_substeps` steps per frame. Each replicate draws the table's tracks with replacement (as the
bootstrap over tracks does), restarts every segment at its first observation and runs it for as many
frames as it has, at its times: the starting positions are resampled, the paths simulated. Each
replicate is refitted with the fit's settings (same FE grid, Hermite space and ridge; beta as the fit got
it: given, or estimated the same way), giving ``x_r = [theta_r; 1/beta_r]``.

**Two stages** (:data:`STAGES`; iterative bootstrap with common random numbers). The estimator's bias
depends on ``psi``: simulated from the (shrunk) fit it comes out smaller than at the truth (rms over the
nodes, one stage: 0.036 against 0.081 on 1-D tracks, 0.028 against 0.036 on 2-D tracks). Stage 1 simulates
from ``hat x`` and finds the bias ``b_1 = mean_r x_r - hat x``; stage 2 simulates, with the same seeds, from
``hat x - b_1`` (the model whose replicates would average to the fit, to first order) and its mean shift
``b_2`` is the bias used (1-D: 0.052). More stages gain little: on 2-D tracks with walls (true bias 0.071,
0.064 simulated from the truth itself) 2, 3 and 4 stages gave 0.038, 0.041 and 0.043.

**The Hermite basis error** (where the space with ``2 n_h`` elements per axis has at most
:data:`MAX_BASIS_COEF` coefficients). The data are refitted at ``2 n_h`` elements (a space that holds the
fit's exactly), and so is every replicate of the last stage. The replicates come from a potential inside the
``n_h`` space, so their mean step ``x_{2h,r} - x_{h,r}`` is the two resolutions' difference in bias and its
spread is the step's noise; the data's step less that mean is the basis error seen from ``2 n_h``, scaled by
Richardson's ``1 / (1 - 2^{-2})`` (:data:`BASIS_RICHARDSON`) and shrunk by that noise,
``s = sqrt(max(0, 1 - V (1 + 1/R) / E))`` (:func:`basis_column`). The posterior then lives in the ``2 n_h``
space (every column carried exactly), with this column appended.

So ``Cov(x) = F F^T`` with ``F = [(x_r - mean_stage x_r) / sqrt(R - 2), s b_2]`` (all ``R`` replicates about
their own stage's mean, and one systematic column with its sign not used, like the snapshot model's bias
column), ``s = sqrt(max(0, 1 - V / (R_2 E)))`` removing the Monte Carlo noise of ``b_2`` (``V`` the last
stage's nodal variance, ``E`` the nodal energy of ``b_2``, ``R_2`` its replicates; nodal sums of the
zero-mean ``psi`` over the FE nodes), and the basis column above. ``potential_std``, the bands and beta's
interval all include the bias; the point estimate is not moved.

Measured (``benchmarks/bench_track_density_uncertainty.py``, docs/benchmarks.md): over five potentials and
two sampling regimes the 90% band covered the true ``psi`` at 0.81 of the nodes on average (0.80 without the
basis column), inside 80-98% in 18 of 30 fits; the row model 0.60 (few observations per frame) and 0.97
(many, strided), 10 of 30. Short of the target on walled boxes: 9 of 18 walled fits below 0.8 (0.52-0.79).
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from ..core._errors import FpirlInputError
from ..core.hermite import HermiteSpace
from ..distributed import run_tasks
from ..forward.markov import sample_sde
from ..tracks.table import TrackTable
from ._basis import carry_coefficients
from ._bootstrap import refit_params, resample_tracks
from ._posterior import CoefficientPosterior
from ._resolution import _nodal_energy

#: Replicates of the parametric bootstrap by default, over all stages (the std's Monte Carlo error about
#: ``1/sqrt(2 (R - 2))``: 13%).
DEFAULT_PARAMETRIC = 32
#: Euler-Maruyama substeps per frame are chosen so that ``kappa h`` stays below this (``kappa`` the largest
#: curvature of the fitted psi along an axis, ``h`` the substep): the scheme's weak error per unit time is of
#: the order of ``kappa h``.
SUBSTEP_STIFFNESS = 0.05
#: Stages of the bootstrap (module doc): the second simulates from the fit minus the first stage's bias, with
#: the first stage's seeds.
STAGES = 2
#: At most this many substeps per frame.
MAX_SUBSTEPS = 32
#: The basis column's refit at ``2 n_h`` Hermite elements only where that space has at most this many coefficients.
MAX_BASIS_COEF = 4096
#: Richardson's factor of the basis column: the error of the ``n_h`` fit is ``(x_{2h} - x_h) / (1 - 2^-p)``, p = 2.
BASIS_RICHARDSON = 4.0 / 3.0
#: Frames simulated per call of the sampler (segments still running are a prefix of the longest-first order).
_CHUNK = 64


def frame_stiffness(hermite, coef, dt: float) -> float:
    """``kappa dt`` with ``kappa = max_i max |d_ii psi|`` over a grid of 8 points per Hermite element and axis: the
    fitted drift's rate of change over one frame (the Euler-Maruyama step is unstable beyond 2)."""
    coords = [np.linspace(ax.lower, ax.upper, 8 * ax.elements + 1) for ax in hermite.axes]
    kappa = 0.0
    for i in range(hermite.ndim):
        deriv = tuple(2 if b == i else 0 for b in range(hermite.ndim))
        kappa = max(kappa, float(np.max(np.abs(hermite.evaluate_grid(coef, coords, deriv)))))
    return kappa * float(dt)


def frame_substeps(hermite, coef, dt: float) -> int:
    """Euler-Maruyama substeps per frame: ``ceil(kappa dt / SUBSTEP_STIFFNESS)`` in ``[1, MAX_SUBSTEPS]``
    (:func:`frame_stiffness`)."""
    return int(np.clip(np.ceil(frame_stiffness(hermite, coef, dt) / SUBSTEP_STIFFNESS), 1, MAX_SUBSTEPS))


def simulate_like(tracks: TrackTable, hermite, coef, beta: float, rng, substeps: int = 1) -> TrackTable:
    """A table of the model ``dz = -grad psi dt + sqrt(2/beta) dW`` shaped like ``tracks``: the same rows
    (segments, tracks, times), every segment started at its first observation (module doc)."""
    rng = np.random.default_rng(rng)
    seg = np.asarray(tracks.segment)
    lengths = np.bincount(seg)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    order = np.argsort(-lengths, kind="stable")  # longest first: the running segments are a prefix
    out = np.empty_like(np.asarray(tracks.values, dtype=float))
    x = np.asarray(tracks.values, dtype=float)[starts[order]]
    out[starts[order]] = x
    gradient = lambda z: hermite.gradient(coef, z)  # noqa: E731
    boundary = "periodic" if tracks.periodic else "reflecting"
    done = 1
    while True:
        running = int(np.count_nonzero(lengths[order] > done))
        if running == 0:
            return TrackTable(out, tracks.segment, tracks.track, tracks.time, tracks.dt, tracks.names, tracks.roles,
                              tracks.lower, tracks.upper, tracks.boundary, tracks.track_ids, tracks.source)
        steps = int(min(_CHUNK, lengths[order[0]] - done))
        x = x[:running]
        path = sample_sde(gradient, beta, x, tracks.dt, steps, rng, tracks.lower, tracks.upper, boundary, substeps)
        ids = order[:running]
        for k in range(1, steps + 1):
            alive = lengths[ids] > done + k - 1
            out[starts[ids[alive]] + done + k - 1] = path[k][alive]
        x = path[-1]
        done += steps


def _replicate(seed, tracks, cls, params, hermite, coef, beta, substeps, fine_params=None):
    """``[theta; 1/beta]`` of the estimator refitted on one simulated table (a pure task); with ``fine_params``
    followed by those of the refit at :func:`finer_elements` on the same table."""
    rng = np.random.default_rng(seed)
    table = simulate_like(resample_tracks(tracks, rng.integers(0, tracks.n_tracks, tracks.n_tracks)), hermite, coef,
                          beta, rng, substeps)
    return np.concatenate([_refit(cls, p, table) for p in ([params] if fine_params is None else [params, fine_params])])


def _refit(cls, params, table) -> np.ndarray:
    with warnings.catch_warnings():  # the plausibility notes were given for the original fit
        warnings.simplefilter("ignore")
        est = cls(**params).fit(table)
    return np.concatenate([np.asarray(est.coef_, dtype=float).ravel(), [1.0 / est.beta_]])


def finer_elements(hermite) -> tuple[int, ...] | None:
    """``2 n_h`` Hermite elements per axis (a space that holds the fit's exactly), or None when that space would
    have over :data:`MAX_BASIS_COEF` coefficients."""
    fine = tuple(2 * int(e) for e in hermite.elements)
    n_coef = int(np.prod([2 * e + (0 if hermite.periodic else 2) for e in fine]))
    return fine if n_coef <= MAX_BASIS_COEF else None


def basis_column(est, x_hat, fine_fit, replicates, fine_space) -> np.ndarray:
    """The Hermite basis error of ``x_hat`` as a column of the ``2 n_h`` space (module doc), noise removed.

    ``fine_fit``: ``[theta_f; 1/beta_f]`` of the data refitted at ``2 n_h`` elements; ``replicates``: rows
    ``[theta_r; 1/beta_r; theta_{f,r}; 1/beta_{f,r}]`` of the last stage.
    """
    n = est.hermite_.n_coef
    step = replicates[:, n + 1:] - _carried(replicates[:, :n + 1].T, est.hermite_, fine_space).T
    # the data's step less the replicates' mean step (the two resolutions' difference in bias)
    diff = fine_fit - _carried(x_hat[:, None], est.hermite_, fine_space)[:, 0] - step.mean(axis=0)
    return BASIS_RICHARDSON * _shrinkage(diff, step - step.mean(axis=0), 1.0 + 1.0 / len(step), fine_space,
                                         est.grid_) * diff


def _carried(cols: np.ndarray, hermite, fine_space) -> np.ndarray:
    """Columns ``[theta; 1/beta]`` of ``hermite``'s space as columns of ``fine_space`` (:func:`carry_coefficients`;
    ``1/beta`` unchanged)."""
    return np.vstack([carry_coefficients(cols[:-1].T, hermite, fine_space, batch=True).T, cols[-1:]])


def _shrinkage(shift, centred, noise_share, hermite, grid) -> float:
    """``sqrt(max(0, 1 - c V / E))``: the share of ``shift`` that stands out of the noise, ``V`` the nodal variance
    of the replicates ``centred`` (rows about their mean), ``c = noise_share`` the part of it in ``shift``
    (``1/R`` for a mean of ``R`` replicates), ``E`` the nodal energy of ``shift`` (zero-mean psi, FE nodes)."""
    n = hermite.n_coef
    energy = _nodal_energy(shift[:n], hermite, grid)
    noise = _nodal_energy(centred[:, :n].T, hermite, grid) / (len(centred) - 1)
    return float(np.sqrt(max(0.0, 1.0 - noise_share * noise / energy))) if energy > 0 else 0.0


def parametric_bootstrap(est, tracks: TrackTable, n_replicates: int = DEFAULT_PARAMETRIC, rng=0, *,
                         scheduler=None, n_jobs: int | None = None, progress: bool = False,
                         budget_s: float | None = None, stages: int = STAGES,
                         basis: bool = True) -> CoefficientPosterior | None:
    """The posterior of the module doc (``method='parametric'``) of a fitted track density estimator.

    The replicates are split evenly over ``stages`` (the same seeds in each); each stage simulates from the
    fit moved by the bias that the previous stage found (``x_{k+1} = hat x - b_k``); the factor holds every
    stage's spread and the last stage's bias.
    ``budget_s``: the first replicate runs in this process and is timed; when the rest would exceed the
    budget (divided among ``n_jobs`` workers) None is returned, so that the caller can fall back; when only the
    refits at ``2 n_h`` elements would exceed it, the basis column is left out. ``basis=False`` leaves it out.
    """
    if int(n_replicates) != n_replicates or n_replicates < 2 * stages:
        raise FpirlInputError(f"the parametric bootstrap needs at least {2 * stages} replicates, got {n_replicates!r}")
    stages = int(stages)
    if getattr(est, "grid_", None) is None or getattr(est, "coef_", None) is None:
        raise FpirlInputError(f"{type(est).__name__} is not fitted: no parametric bootstrap")
    h, grid, beta = est.hermite_, est.grid_, float(est.beta_)
    coef = np.asarray(est.coef_, dtype=float).ravel()
    x_hat = np.append(coef, 1.0 / beta)
    estimated = bool(est.settings_.get("beta_estimated", 0))
    per_stage = int(n_replicates) // stages
    seeds = np.random.default_rng(rng).integers(0, 2**63 - 1, per_stage)  # common random numbers in every stage
    params = refit_params(est)
    fine = finer_elements(h) if basis else None
    fine_params = None if fine is None else {**params, "hermite_elements": fine}
    fine_fit, fine_seconds = None, 0.0
    if fine_params is not None:  # the data at 2 n_h elements (the basis column), timed for the budget
        t = time.perf_counter()
        try:
            fine_fit = _refit(type(est), fine_params, tracks)
        except FpirlInputError:
            fine_params = None
        fine_seconds = time.perf_counter() - t
    workers = max(1, n_jobs or 1)
    x_sim, spread = x_hat, []
    for k in range(stages):
        last = k + 1 == stages
        shared = (tracks, type(est), params, h, x_sim[:-1].reshape(h.shape), 1.0 / x_sim[-1],
                  frame_substeps(h, x_sim[:-1].reshape(h.shape), tracks.dt), fine_params if last else None)
        first, todo = [], seeds
        if k == 0:
            t = time.perf_counter()
            first, todo = [_replicate(seeds[0], *shared)], seeds[1:]
            rest = (time.perf_counter() - t) * (per_stage * stages - 1) / workers
            if budget_s is not None and rest > budget_s:
                return None
            if budget_s is not None and fine_params is not None and rest + fine_seconds * per_stage / workers > budget_s:
                fine_params = None  # the refits at 2 n_h would not fit in the budget: no basis column
        rows = np.vstack(first + run_tasks(_replicate, todo, scheduler=scheduler, n_jobs=n_jobs, progress=progress,
                                           desc=f"parametric bootstrap {k + 1}/{stages}", shared=shared))
        samples = rows[:, :x_hat.size]
        spread.append(samples - samples.mean(axis=0))
        bias = samples.mean(axis=0) - x_sim  # the estimator's bias at x_sim
        if not estimated:
            bias[-1] = 0.0
        if k + 1 < stages:  # iterative bootstrap: the model whose replicates average to the fit
            x_next = x_hat - bias
            x_sim = x_next if x_next[-1] > 0 else np.append(x_next[:-1], x_hat[-1])
    bias = bias * _shrinkage(bias, spread[-1], 1.0 / len(spread[-1]), h, grid)
    centred = np.vstack(spread)  # every stage's spread about its own mean (the stages' models differ by the bias)
    if not estimated:
        centred[:, -1] = 0.0
    factor = np.hstack([centred.T / np.sqrt(len(centred) - stages), bias[:, None]])
    post = CoefficientPosterior(h, coef, 1.0 / beta, factor, method="parametric", beta_estimated=estimated,
                                bias=bias, replicates=per_stage * stages)
    return post if fine_params is None else _with_basis_column(post, est, fine_params, fine_fit, rows, estimated)


def _with_basis_column(post, est, fine_params, fine_fit, rows, estimated):
    """``post`` carried into the ``2 n_h`` space (exactly: that space holds the fit's) with :func:`basis_column`
    appended to its factor."""
    h = est.hermite_
    fine_space = HermiteSpace.on_grid(est.grid_, fine_params["hermite_elements"])
    x_hat = np.append(post.mean, post.gamma)
    col = basis_column(est, x_hat, fine_fit, rows, fine_space)
    if not estimated:
        col[-1] = 0.0
    fine = _carried(np.column_stack([x_hat, post.bias, post.factor]), h, fine_space)  # mean, bias, factor together
    return CoefficientPosterior(fine_space, fine[:-1, 0], post.gamma, np.hstack([fine[:, 2:], col[:, None]]),
                                method="parametric", beta_estimated=estimated, bias=fine[:, 1], basis=col,
                                replicates=post.replicates)
