r"""Choice of the Hermite resolution and the ridge of the increments estimator by cross-validation.

Tracks (never single transitions: consecutive increments of one track are correlated through its
path) are split at random into ``K`` folds. For every candidate resolution the normal equations
of every fold are assembled in one pass (:func:`~fpirl.weakform.increment_system.assemble_increments`
with the fold as group); the training system of fold ``f`` is the total minus fold ``f``, and
the held-out score follows from fold ``f``'s own statistics without touching the points again:

.. math::
    \mathrm{RSS}_f(\theta) = \theta^T A_f \theta + 2 b_f^T \theta + c_f .

The score is the held-out Gaussian log-likelihood of the increments on the drift axes in nats per
transition (eq. ``SDE`` sampled with Euler-Maruyama), with the increment variance
``sigma^2 = 2 dt / beta`` from the training residual (or the given beta):

.. math::
    \ell_f = -\frac{|D|}{2}\log(2\pi\sigma^2) - \frac{\mathrm{RSS}_f\,\Delta t^2}{2\sigma^2 n_f}.

Selection rule (``cv_rule``): ``'min'`` (default) takes the best mean score; ``'1se'`` takes the coarsest
resolution (then the largest ridge) whose mean score is within one standard error of the best,
the standard error being that of the *paired* per-fold difference to the best candidate (the
fold-to-fold spread of the raw scores is mostly noise shared by all candidates, so the unpaired
rule would always pick the coarsest model). On the 2-D benchmark (docs/benchmarks.md) ``'1se'``
picked 2 elements where 3 were better in 2 of 3 seeds with 2000 tracks (error 1.21x the best fixed
resolution on average, against 1.13x for ``'min'``), and both agreed with fewer tracks; hence
``'min'``.
"""

from __future__ import annotations

import numpy as np
from tqdm.auto import tqdm

from ..core._errors import FpirlInputError
from ..core._threads import halves, one_blas_thread
from ..weakform.increment_system import IncrementSystem, assemble_increments, candidate_space
from ._base import solve_spd
from ..distributed import candidate_fold_systems

#: Relative ridges searched with ``hermite_elements='auto'`` and ``ridge=None``.
CV_RIDGES = (1e-6, 1e-4, 1e-3, 1e-2)
#: Elements per axis tried by default, by dimension (capped by ``max_coef`` and the data).
CV_ELEMENTS = {1: tuple(range(2, 13)), 2: tuple(range(2, 9)), 3: (2, 3, 4, 5), 4: (2, 3, 4)}
#: At least this many regression rows per Hermite coefficient for a candidate to be tried.
MIN_ROWS_PER_COEF = 20
CV_RULES = ("min", "1se")


def solve_increments(system: IncrementSystem, P: np.ndarray, m: np.ndarray, ridge: float):
    r"""Penalised least squares ``(A + lambda P + s m m^T) theta = -b`` (zero-mean psi).

    ``lambda = ridge * tr(A) / tr(P)`` (relative weight, as in
    :class:`fpirl.estimators.identify.PotentialEstimator`); the rank-one term ``s m m^T`` with
    ``s = tr(A) / n_coef`` fixes the constant mode (the right-hand side is orthogonal to it, so
    the constraint ``m . theta = 0`` holds exactly). Returns ``theta`` and ``lambda``.
    """
    A = system.A
    tr = np.trace(A)
    if not tr > 0:
        raise FpirlInputError("the transitions carry no information on psi (no increments in the box?)")
    lam = ridge * tr / np.trace(P)
    M = A + lam * P
    M += (tr / A.shape[0]) * np.outer(m, m)
    return solve_spd(M, -system.b, overwrite=True), float(lam)  # M: this call's own (no copy)


def n_coefficients(elements, periodic: bool) -> int:
    """Hermite coefficients of a candidate (axes with 0 elements carry none: psi is constant along them)."""
    return int(np.prod([2 * (e if periodic else e + 1) for e in elements if e > 0]))


def candidate_elements(d: int, periodic: bool, n_rows: int, max_coef: int, candidates=None,
                       drift_axes=None) -> list[tuple[int, ...]]:
    """Candidate resolutions, one tuple of elements per axis, capped by the data and the size.

    When every axis is a drift axis, the candidates are uniform, ``(e,) * d`` for ``e`` in
    ``candidates`` (default :data:`CV_ELEMENTS` for ``d``). When some axes are not regressed
    (``drift_axes`` a proper subset, e.g. the velocity axes of position/velocity tracks, whose
    position increments are kinematic), those axes get their own, coarse resolution ``n_o`` in
    ``{0, m, m + 1}`` (``m`` the smallest Hermite axis: 1 element, 2 if periodic; ``0`` means psi is
    constant along them, the family that contains the persistent random walk ``psi = c |a|^2``)
    while the drift axes take ``e`` in ``candidates`` (default :data:`CV_ELEMENTS` for their number).
    A candidate is kept when it has at most ``max_coef`` coefficients and ``n_rows`` regression rows
    give at least :data:`MIN_ROWS_PER_COEF` per coefficient; if none is, the smallest is returned.
    """
    drift = list(range(d)) if drift_axes is None else sorted(int(a) for a in drift_axes)
    cands = tuple(candidates) if candidates is not None else CV_ELEMENTS.get(len(drift), (2, 3))
    low = 2 if periodic else 1
    others = (0, low, low + 1) if len(drift) < d else (None,)
    out = [tuple(e if i in drift else n_o for i in range(d)) for n_o in others for e in cands]
    keep = [c for c in out
            if n_coefficients(c, periodic) <= max_coef and n_coefficients(c, periodic) * MIN_ROWS_PER_COEF <= n_rows]
    return keep or [min(out, key=lambda c: n_coefficients(c, periodic))]


def candidate_label(elements) -> str:
    """``'3,3'``; ``0`` on an axis means psi is constant along it."""
    return ",".join(str(int(e)) for e in elements)


def track_folds(track_of_row: np.ndarray, n_tracks: int, folds: int, rng) -> tuple[np.ndarray, int]:
    """Fold of every row, whole tracks per fold (random assignment, balanced by track count)."""
    k = min(int(folds), int(n_tracks))
    if k < 2:
        raise FpirlInputError(
            "choosing the resolution automatically needs at least 2 tracks with transitions; "
            "give the Hermite elements explicitly (--hermite-elements; hermite_elements= in Python)"
        )
    fold_of_track = np.random.default_rng(rng).permutation(n_tracks) % k
    return fold_of_track[track_of_row], k


def _loglik(rss: float, n_trans: int, n_drift: int, var_v: float, dt: float) -> float:
    var_x = var_v * dt * dt
    return float(-0.5 * n_drift * np.log(2 * np.pi * var_x) - rss / (2.0 * var_v * n_trans))


def cross_validate(lower, upper, periodic, points, velocity, drift_axes, fold_of_row, n_folds, dt,
                   elements, ridges, beta=None, rule="min", progress=False, row_weights=None,
                   scheduler=None) -> dict:
    """K-fold CV over ``elements x ridges``; returns the curve and the chosen pair (see the module doc).

    ``elements`` is a list of candidates, one tuple of elements per axis (:func:`candidate_elements`);
    a candidate is fitted in :func:`candidate_space` (axes with 0 elements left out).

    Returns
    -------
    dict
        ``elements`` (n_e, d), ``labels`` (n_e strings, :func:`candidate_label`), ``ridge`` (n_r,), ``score`` and ``std`` (n_e, n_r) (mean and standard
        deviation over folds of the held-out log-likelihood, nats per transition), ``se_paired``
        (n_e, n_r) (standard error of the per-fold difference to the best candidate), ``fold_scores``
        (n_e, n_r, K), ``chosen_elements``, ``chosen_ridge``, ``best_elements``, ``best_ridge``,
        ``rule``, ``folds`` and ``system`` (the normal equations of all transitions at the chosen
        resolution, in its :func:`candidate_space`, so the final fit needs no further pass over the data).
    """
    if rule not in CV_RULES:
        raise FpirlInputError(f"cv_rule must be one of {', '.join(CV_RULES)}, got {rule!r}")
    n_drift = len(drift_axes)
    scores = np.empty((len(elements), len(ridges), n_folds))
    totals = []
    it = elements
    if progress:
        it = tqdm(elements, desc="CV resolution", unit="candidate")
    precomputed = None
    if scheduler is not None:  # one Dask task per candidate resolution (fpirl.distributed)

        precomputed = candidate_fold_systems(lower, upper, periodic, points, velocity, drift_axes, fold_of_row,
                                             n_folds, elements, row_weights, scheduler=scheduler)
    for i, e in enumerate(it):
        space, kept = candidate_space(lower, upper, periodic, e)
        P = space.h1_seminorm_matrix()
        m = space.mean_functional().ravel()
        systems = assemble_increments(space, points[:, kept], velocity, [kept.index(a) for a in drift_axes],
                                      fold_of_row, n_folds, row_weights) if precomputed is None else precomputed[i]
        total = systems[0]
        for s in systems[1:]:
            total = total + s
        totals.append(total)
        jobs = [(f, j) for f in range(len(systems)) for j in range(len(ridges))]

        def run(part):  # called below within this candidate's iteration (no late binding)
            fold, train = None, None
            for f, j in part:
                if f != fold:  # the training system of this fold (once per fold and thread)
                    fold, train = f, total - systems[f]
                theta, _ = solve_increments(train, P, m, ridges[j])
                var_v = 2.0 / (beta * dt) if beta is not None else train.rss(theta) / train.n_rows
                scores[i, j, f] = _loglik(systems[f].rss(theta), systems[f].n_transitions, n_drift, var_v, dt)

        # the (fold, ridge) solves in two contiguous halves on two threads, one BLAS thread each (a Cholesky
        # factorisation of a thousand unknowns gains less from a second BLAS thread than from a second one of its own)
        with one_blas_thread():
            halves(lambda sl: run(jobs[sl]), len(jobs))
    mean = scores.mean(axis=2)
    std = scores.std(axis=2, ddof=1) if n_folds > 1 else np.zeros_like(mean)
    best = np.unravel_index(int(np.argmax(mean)), mean.shape)
    chosen = best
    diff = scores - scores[best][None, None, :]
    se = diff.std(axis=2, ddof=1) / np.sqrt(n_folds)  # paired standard error of the difference to the best
    if rule == "1se":
        ok = mean >= mean[best] - se
        # fewest coefficients first, then the largest ridge
        for i in sorted(range(len(elements)), key=lambda i: n_coefficients(elements[i], periodic)):
            js = np.flatnonzero(ok[i])
            if js.size:
                chosen = (i, int(js[np.argmax(np.asarray(ridges)[js])]))
                break
    return {
        "elements": np.asarray(elements, dtype=np.int64).reshape(len(elements), -1),
        "labels": [candidate_label(e) for e in elements],
        "ridge": np.asarray(ridges, dtype=float),
        "score": mean,
        "std": std,
        "se_paired": se,
        "fold_scores": scores,
        "chosen_elements": tuple(int(v) for v in elements[chosen[0]]),
        "chosen_ridge": float(ridges[chosen[1]]),
        "best_elements": tuple(int(v) for v in elements[best[0]]),
        "best_ridge": float(ridges[best[1]]),
        "rule": rule,
        "folds": int(n_folds),
        "system": totals[chosen[0]],
    }
