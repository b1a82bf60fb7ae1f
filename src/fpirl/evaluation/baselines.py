r"""Baseline models of tracked motion for held-out comparison with the fitted FP-IRL model.

Both are fitted by maximum likelihood on the training table's transitions (three consecutive
observations ``s_{k-1}, s_k, s_{k+1}`` of one track, see :func:`fpirl.tracks.steps.observed_transitions`)
and score the next observed state ``s_{k+1}`` in the table's units (a density per unit volume of
the state columns, natural logarithm):

* **diffusion**: :math:`s_{k+1} \sim \mathcal N(s_k, 2 D \Delta t\, I)` (Brownian motion), with
  :math:`\hat D = \overline{|s_{k+1} - s_k|^2} / (2 d_s \Delta t)`;
* **persistent random walk** (the standard cell-migration model): an isotropic AR(1) on the
  velocities :math:`v_k = (s_k - s_{k-1})/\Delta t`,
  :math:`v_{k+1} = \alpha v_k + \sigma \xi`, :math:`\xi \sim \mathcal N(0, I)`, with
  :math:`\hat\alpha = \sum v_k\cdot v_{k+1} / \sum |v_k|^2` and
  :math:`\hat\sigma^2 = \overline{|v_{k+1} - \hat\alpha v_k|^2} / d_s`; then
  :math:`\log p(s_{k+1}) = \log \mathcal N(v_{k+1}; \alpha v_k, \sigma^2 I) - d_s \log \Delta t`.

The fitted parameters are stored in a result file as attrs (:meth:`Baselines.to_attrs`), so
``fpirl evaluate`` needs only the result and the held-out table.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core._errors import FpirlInputError
from ..tracks.steps import Transitions, gaussian_logpdf, observed_transitions

__all__ = ["BASELINES", "Baselines", "fit_baselines"]

#: names of the baseline models, in report order
BASELINES = ("diffusion", "persistent_random_walk")

_ATTRS = {
    "diffusion_D": "baseline_diffusion_D",
    "prw_alpha": "baseline_prw_alpha",
    "prw_sigma": "baseline_prw_sigma",
    "n_transitions": "baseline_transitions",
}


@dataclass(frozen=True)
class Baselines:
    """Fitted diffusion and persistent-random-walk models.

    Attributes
    ----------
    diffusion_D : float
        Diffusion coefficient ``D`` (state units^2 / time).
    prw_alpha : float
        Velocity persistence ``alpha`` of the AR(1) (per frame).
    prw_sigma : float
        Velocity noise ``sigma`` (state units / time).
    n_transitions : int
        Training transitions used.
    """

    diffusion_D: float
    prw_alpha: float
    prw_sigma: float
    n_transitions: int

    def loglik(self, tr: Transitions) -> dict:
        """Per-transition log-densities of ``s_{k+1}``: ``{'diffusion': (n,), 'persistent_random_walk': (n,)}``."""
        d_s, dt = tr.v_next.shape[1], tr.dt
        diff = gaussian_logpdf(tr.step, 0.0, 2.0 * self.diffusion_D * dt)
        prw = gaussian_logpdf(tr.v_next, self.prw_alpha * tr.v_prev, self.prw_sigma**2) - d_s * np.log(dt)
        return {"diffusion": diff, "persistent_random_walk": prw}

    def to_attrs(self) -> dict:
        """Result-file attrs ``baseline_diffusion_D``, ``baseline_prw_alpha``, ``baseline_prw_sigma``,
        ``baseline_transitions``."""
        return {attr: getattr(self, key) for key, attr in _ATTRS.items()}

    @classmethod
    def from_attrs(cls, attrs) -> Baselines:
        """Rebuild from result attrs; :class:`FpirlInputError` when they are missing."""
        missing = [a for a in _ATTRS.values() if a not in attrs]
        if missing:
            raise FpirlInputError(
                f"the result has no fitted baselines (missing attrs {', '.join(missing)}); fit it from a track table"
            )
        vals = {key: float(np.asarray(attrs[attr]).reshape(())) for key, attr in _ATTRS.items()}
        vals["n_transitions"] = int(vals["n_transitions"])
        return cls(**vals)


def fit_baselines(table, kind: str | None = None) -> Baselines:
    """Fit both baselines by maximum likelihood on the transitions of a training table.

    Parameters
    ----------
    table : TrackTable
    kind : {'velocity', 'explicit', 'none'}, optional
        How the table's actions were made (default: inferred).

    Returns
    -------
    Baselines
    """
    tr = observed_transitions(table, kind)
    if tr.n < 2:
        raise FpirlInputError(
            f"need at least 2 runs of three consecutive observations to fit the baselines, got {tr.n}"
        )
    d_s = tr.v_next.shape[1]
    step2 = np.sum(tr.step**2, axis=1)
    D = float(np.mean(step2) / (2.0 * d_s * tr.dt))
    vv = float(np.sum(tr.v_prev**2))
    alpha = float(np.sum(tr.v_prev * tr.v_next) / vv) if vv > 0 else 0.0
    sigma2 = float(np.mean(np.sum((tr.v_next - alpha * tr.v_prev) ** 2, axis=1)) / d_s)
    if not (D > 0 and sigma2 > 0):
        raise FpirlInputError("the training tracks do not move (zero displacement variance); cannot fit the baselines")
    return Baselines(D, alpha, float(np.sqrt(sigma2)), tr.n)
