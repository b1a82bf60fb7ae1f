r"""beta's point estimate corrected for the Hermite basis error where the correction stands out of the noise
(issue 20, seventh pass; used by ``fpirl fit``), else for the discretisation bias simulated at the fitted model
(:mod:`fpirl.uncertainty._discretisation`).

With beta estimated, the part of ``grad psi`` the Hermite space cannot represent biases ``gamma = 1/beta``
(docs/method.md, "Beta and the basis error"). The posterior's ``beta_corrected`` (Richardson's rule over the
Hermite resolution, :mod:`fpirl.uncertainty._basis`) removes most of that bias where the data are nearly
noise-free, and makes beta worse where the noise dominates the Richardson step: at 5% noise beta comes from block
means (:mod:`fpirl.estimators._beta_noise`), and the correction removes the Hermite part of the error while the
coarse grid's own part stays. What tells the two apart is the size of the step against the noise,

.. math::
    z = \frac{\lvert \gamma_c - \gamma \rvert}{\operatorname{sd}_{noise}(\gamma)},

``gamma_c = 1/beta_corrected`` and ``sd_noise`` the std of ``gamma`` under the snapshot noise alone (the noise columns
of the posterior factor; :attr:`~fpirl.uncertainty.CoefficientPosterior.beta_correction_z`). Where
``z > BETA_CORRECTION_MIN_Z``, ``beta_corrected`` becomes the point estimate and psi is refitted with beta fixed at
it (same data moments, settings and Hermite space: one more solve).

Measured (``benchmarks/bench_beta_refit.py``, docs/benchmarks.md): 14 cases of independent-solver data, 0/1/2/5%
noise, 4 and 6 Hermite elements, 112 fits. With the threshold 8, against the fitted beta:

* noise-free: median |beta error| 4.93% -> 1.83% (within 3%: 0.39 -> 0.71), psi median error 5.31% -> 2.29%;
* 1%: 4.93% -> 1.84%, psi 4.87% -> 3.23%; 2%: 2.62% -> 2.40%, psi 3.33% -> 3.00%;
* 5%: no fit corrected (unchanged); correcting every fit there would have doubled the psi error (8.90% against 5.56%).

The threshold was chosen by two-fold cross-validation over the 14 cases (choose on half the cases, score on the
other half): the chosen thresholds were 8 and 12 for the mean psi error, 2 and 4 for the mean beta error, and 8
scored within 0.1 point (psi) and 0.4 point (beta) of the chosen one on the held-out half, and better than never
correcting on both halves (psi 5.15% -> 4.73%, 6.44% -> 5.78%; beta 4.94% -> 3.41%, 6.27% -> 3.69%).
"""

from __future__ import annotations

import warnings

import numpy as np

from ..core.density import DensitySnapshots
from ..estimators.identify import PotentialEstimator
from ._bootstrap import refit_params
from ._discretisation import simulated_gamma_bias, simulation_too_large
from ._snapshot_noise import _density_estimator
from ._time_step import noise_sd_gamma
from ._posterior import BAND_QUANTILES, beta_bounds

#: Settings of a fit that replaced the midpoint fit by its Simpson refit
#: (:func:`fpirl.uncertainty._time_step.simpson_point`), carried into the basis-corrected refit.
SWITCH_KEYS = ("time_scheme_switched", "beta_midpoint", "time_step_z")

#: Noise standard deviations of ``1/beta`` the Richardson step must exceed for ``beta_corrected`` to become the
#: point estimate (module doc: chosen by two-fold cross-validation over the cases of bench_beta_refit.py).
BETA_CORRECTION_MIN_Z = 8.0


def corrected_beta_fit(est, post, snapshots, min_z: float = BETA_CORRECTION_MIN_Z, *, discretisation: bool = True,
                       progress: bool = False):
    """The density fit with beta fixed at its corrected point estimate: ``post.beta_corrected`` where the basis
    correction stands out of the noise, else (``discretisation``) the fitted beta less its discretisation bias
    estimated by a simulation at the fitted model (:func:`fpirl.uncertainty._discretisation.simulated_gamma_bias`).

    Parameters
    ----------
    est : PotentialEstimator (or an estimator wrapping one as ``estimator_``)
        Fitted with beta estimated.
    post : CoefficientPosterior
        Its posterior with the snapshots (:func:`fpirl.uncertainty.posterior`): ``beta_corrected`` and
        ``beta_correction_z``. Moved in place to the new point estimate when there is one: its ``mean`` and
        ``gamma`` (the factor, i.e. the spread, is kept) and ``beta_bounds``, the union of the fitted beta's interval
        and the corrected beta's noise interval (``1/beta_c`` plus or minus the 95% normal quantile times the std of
        ``1/beta`` under the snapshot noise alone).
    snapshots : DensitySnapshots
        The fitted data.
    min_z : float
        The threshold on ``z`` of the basis correction (module doc).
    discretisation : bool
        Where the basis correction is not made, remove the simulated discretisation bias (time step and grid) of
        ``1/beta``.
    progress : bool
        A tqdm bar over the simulation's snapshots.

    Returns
    -------
    PotentialEstimator or None
        The refit at the fit's ridge (``settings_`` records how that ridge was chosen, ``beta_estimated = 1``,
        ``beta_fitted``, ``beta_correction_z``; ``beta_basis_corrected = 1`` where the basis correction was made;
        ``beta_discretisation_corrected = 1``, ``beta_simulated`` (beta fitted to the simulated snapshots) and
        ``beta_discretisation_z`` (the bias in noise standard deviations of ``1/beta``) where the discretisation bias
        was removed), or None where there is no correction.
    """
    if post is None or not post.beta_estimated or not isinstance(snapshots, DensitySnapshots):
        return None
    z = post.beta_correction_z
    basis = post.beta_corrected is not None and z is not None and z > min_z
    inner = _density_estimator(est)
    gamma = 1.0 / float(post.beta_corrected) if basis else float(post.gamma)
    # where the basis correction was made its Richardson step already holds the discretisation bias's change with the
    # Hermite resolution (measured: subtracting b as well overshot, module doc of _discretisation): one or the other
    simulated = None
    if discretisation and not basis:
        if simulation_too_large(snapshots.grid, snapshots.n_times):
            post.discretisation_unsimulated = True  # said by fpirl fit: beta keeps that bias (most 4-D grids)
        else:
            simulated = simulated_gamma_bias(inner, snapshots, progress)
    if simulated is not None and gamma - simulated[0] <= 0:  # a bias as large as gamma: not a small correction
        simulated = None
    sd = noise_sd_gamma(post)  # the std of gamma under the snapshot noise alone
    # the bias in noise standard deviations of gamma, recorded (no threshold: module doc of _discretisation)
    z_sim = None
    if simulated is not None:
        z_sim = float(abs(simulated[0]) / sd) if sd > 0 else float("inf")
        gamma -= simulated[0]
    if not basis and simulated is None:
        return None
    params = refit_params(inner)
    params.update(beta=1.0 / gamma, estimate_beta=False, beta_block=None)
    with warnings.catch_warnings():  # the fit's own warnings were shown once already
        warnings.simplefilter("ignore")
        refit = PotentialEstimator(**params).fit(snapshots, _moments=getattr(inner, "_moments", None))
    more = {"beta_basis_corrected": 1} if basis else {}
    if simulated is not None:
        more.update(beta_discretisation_corrected=1, beta_simulated=float(simulated[1]), beta_discretisation_z=z_sim)
    refit.settings_ = {**refit.settings_, "ridge_selection": inner.settings_.get("ridge_selection", "fixed"),
                       "beta_estimated": 1, "beta_noise_corrected": inner.settings_.get("beta_noise_corrected", 0),
                       "beta_coarsening": int(getattr(inner, "beta_coarsening_", 1)), **more,
                       "beta_fitted": float(inner.beta_), **({} if z is None else {"beta_correction_z": float(z)}),
                       **{k: inner.settings_[k] for k in SWITCH_KEYS if k in inner.settings_}}
    refit.beta_coarsening_, refit.gcv_ = int(getattr(inner, "beta_coarsening_", 1)), getattr(inner, "gcv_", None)
    lo, hi = post.beta_interval()
    # the fitted beta's interval, and the corrected point's own noise interval (the snapshot noise's spread of 1/beta
    # around it; the systematic columns are what the correction acted on): before, the interval reached only the point
    # itself, so a correction that hit the truth could end a hair short of it
    half = post.quantile(BAND_QUANTILES[1]) * sd
    clo, chi = beta_bounds(1.0 / float(refit.beta_) - half, 1.0 / float(refit.beta_) + half)
    bounds = (min(lo, clo), max(hi, chi))
    post.mean = np.asarray(refit.coef_, dtype=float).ravel()
    post.gamma = 1.0 / float(refit.beta_)
    post.beta_bounds = bounds
    return refit
