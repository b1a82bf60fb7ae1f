"""The matrix-free fits of :class:`fpirl.estimators.PotentialEstimator` (``solver='matrix-free'`` and the flux
quadratures): the products of the normal matrix only (:mod:`fpirl.weakform.matfree`), preconditioned CG."""

from __future__ import annotations

import functools
import time

import numpy as np

from ..weakform import matfree
from ..weakform.matfree_flux import FluxOperator
from ..weakform.matfree_gauss import GaussFluxOperator
from ..weakform.matfree_mixed import MixedFluxOperator
from ..weakform.noise_bias import correct_normal_equations
from ._beta_noise import check_estimated_beta, noise_leaves_beta_open
from ._solvers import CG_TOL


def fit_matrix_free(est, snapshots, hermite, ridge, beta, solver="matrix-free"):
    """Fit ``est`` (a :class:`fpirl.estimators.PotentialEstimator`) on a matrix-free path
    (:func:`fpirl.weakform.matfree.solve_regression`): the same learned attributes as its assembled ``fit``."""
    source = snapshots if isinstance(snapshots, matfree.StreamingSnapshots) else \
        matfree.StreamingSnapshots.from_snapshots(snapshots)
    if est.normalize:
        source = source.normalize()
    if solver == "interpolated-flux":
        operator = FluxOperator
    elif solver == "gauss-flux":
        operator = GaussFluxOperator
    elif solver == "mixed-flux":
        operator = functools.partial(MixedFluxOperator, device=est.device)
    else:
        operator = matfree.NormalOperator
    op = operator(source, hermite, time_scheme=est.time_scheme, quadrature_points=est.quadrature_points)
    raw = op.rhs
    if est.correct_noise:
        op.rhs = correct_normal_equations(op.rhs, source, hermite, time_scheme=est.time_scheme,
                                          quadrature_points=est.quadrature_points,
                                          beta_given=not est.estimate_beta)
    gamma = None if beta is None else 1.0 / beta
    tol = CG_TOL[solver] if est.cg_tol is None else est.cg_tol
    start = time.perf_counter()
    theta, gamma, lam, info = matfree.solve_regression(op, ridge, gamma, rtol=tol, progress=est.progress)
    if est.estimate_beta and noise_leaves_beta_open(op.rhs, gamma, info["schur"]):
        op.rhs = raw
        theta, gamma, lam, info = matfree.solve_regression(op, ridge, None, rtol=tol, progress=est.progress)
    info["seconds"] = time.perf_counter() - start
    ne = op.rhs  # corrected (when it is), for the identifiability; the residual from the raw sums
    identifiability = None
    if est.estimate_beta:
        identifiability = float(info["schur"] / ne.cc) if ne.cc > 0 else 0.0
        check_estimated_beta(gamma, identifiability)
    coef = hermite.remove_mean(theta)
    b = raw.xtg + gamma * raw.xtc
    hh = raw.gg + 2 * gamma * raw.gc + gamma**2 * raw.cc
    flat = coef.ravel()
    r2 = max(flat @ op.matvec(flat) + 2 * flat @ b + hh, 0.0)
    est.beta_identifiability_ = identifiability
    est.coef_, est.beta_, est.hermite_, est.grid_ = coef, 1.0 / gamma, hermite, source.grid
    est.penalty_ = float(lam)
    est.gcv_ = None
    est.residual_ = float(np.sqrt(r2 / hh)) if hh > 0 else 0.0
    est.normal_equations_ = None
    est._moments = None
    est.noise_correction_ = getattr(ne, "correction", None)
    est.beta_coarsening_ = 1
    op.rhs = raw
    est.solver_ = solver
    est.cg_info_ = info
    est.settings_ = est._settings(hermite, source.grid, ridge, "fixed", lam, solver,
                                  cg_iterations=int(sum(info["iterations"])), cg_tol=float(tol),
                                  **({"device": est.device} if solver == "mixed-flux" else {}),
                                  noise_corrected=int(est.noise_correction_ is not None),
                                  **({"beta_coarsening": 1} if est.estimate_beta else {}))
    return est
