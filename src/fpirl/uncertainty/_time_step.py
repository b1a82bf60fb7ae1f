r"""The time-step column of a density posterior with beta estimated: the midpoint rule's error by Simpson's rule.

Used by :func:`fpirl.uncertainty.estimate.posterior` (docs/method.md, "Time step").

``beta`` is identified by the transients only, and the midpoint rows (eq. fokker_planck_residual_1 with
:func:`fpirl.weakform.assembly.time_pairs`) integrate a mode ``exp(-lambda t)`` with the relative error
``(lambda dt)^2 / 12``. Where the snapshots are far apart against the data's fast modes (walls, an initial
density far from equilibrium) that error biases ``1/beta`` by more than its noise: on a walled box sampled
every ``dt = 0.2`` (noise-free data from the finite-volume solver) beta came out 12-25% high, with an interval
that missed it. Simpson's rows (order 4) on the same data move it most of the way back, so the refit with
``time_scheme='simpson'`` (same data, settings, Hermite space, relative ridge and beta block) gives the column

.. math::
    t = x_{\mathrm{midpoint}} - x_{\mathrm{Simpson}},\qquad x = [\theta; 1/\beta],

the estimate of the fit's time-discretisation error. Its ``1/beta`` entry is appended to the posterior's
factor like the basis column (a systematic error of either sign, not moved into the point estimate), so beta's
interval and the policy and reward bands hold it; its psi part is left out: with beta estimated the psi bands
already covered 0.86-1.0 of the nodes on the sweep of docs/benchmarks.md ("Time step"), the column would only
widen them. The entry is not shrunk: the two fits see the same data and much of their noise cancels in it;
where it does not (5% noise: the noise correction weighs the rows of the two rules differently) it widens
beta's interval, which errs on the safe side (measured there: [0.75, 1.15] -> [0.63, 1.82] for a true 1).
Fits with beta given get no column (the cost, one more fit, is kept off the default of the 4-D benchmark);
nor do Simpson fits, matrix-free fits, streamed data or fewer than 3 snapshots.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..core._errors import FpirlInputError
from ..core.density import DensitySnapshots
from ..estimators.identify import PotentialEstimator
from ._bootstrap import refit_params


def simpson_refit(inner: PotentialEstimator, snapshots: DensitySnapshots) -> PotentialEstimator | None:
    """``inner`` refitted to ``snapshots`` with Simpson's rows (same Hermite space, relative ridge and beta
    block), or None where that does not apply (already Simpson, fewer than 3 snapshots, an unfit refit)."""
    if inner.time_scheme == "simpson" or snapshots.n_times < 3:
        return None
    params = refit_params(inner)
    params["time_scheme"] = "simpson"
    if inner.estimate_beta:
        params["beta_block"] = int(getattr(inner, "beta_coarsening_", 1))
    try:
        with warnings.catch_warnings():  # the fit's own warnings were shown once already
            warnings.simplefilter("ignore")
            return PotentialEstimator(**params).fit(snapshots)
    except FpirlInputError:
        return None


def add_time_step_error(post, inner: PotentialEstimator, snapshots) -> None:
    """Append the time-step column of the module doc to ``post`` (in place; ``post.time_step``), where beta was
    estimated from in-memory snapshots by a midpoint or explicit fit."""
    if not (post.beta_estimated and isinstance(snapshots, DensitySnapshots) and isinstance(inner, PotentialEstimator)):
        return
    ref = simpson_refit(inner, snapshots)
    if ref is None:
        return
    col = np.zeros(post.factor.shape[0])
    col[-1] = 1.0 / inner.beta_ - 1.0 / ref.beta_  # gamma only (module doc)
    post.time_step = col
    post.beta_simpson = float(ref.beta_)
    post.factor = np.hstack([post.factor, col[:, None]])
