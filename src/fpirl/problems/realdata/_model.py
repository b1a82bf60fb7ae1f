r"""Models of the real-data benchmark: candidates, cross-validated choice, and the arrays behind the figures.

State = position ``s``, action = velocity ``a``. Positions follow from velocities
(``s_{k+1} = s_k + a_{k+1} dt``), so psi is fitted from the *action* increments only
(``drift_axes`` = the action axes of :class:`~fpirl.estimators.IncrementsEstimator`):
:math:`a_{k+1} - a_k = -\nabla_a\psi(s_k, a_k)\,\Delta t + \sqrt{2\Delta t/\beta}\,\xi`.

Candidates (all of them the paper's model, with psi in a tensor cubic Hermite space):

* ``joint (n_s, n_a)``: psi(s, a) with ``n_s`` elements per position axis and ``n_a`` per velocity axis;
* ``velocity-only n_a``: psi(s, a) = f(a) (the special case without position dependence), fitted on
  the velocity columns alone and embedded exactly in the joint Hermite space (constant along the
  position axes). ``f = c |a|^2`` is the persistent random walk, so this family contains it.

The candidate (and its relative ridge) is chosen by K-fold cross-validation over whole *training*
tracks with the held-out metric itself (mean one-step log-likelihood of the next position); the
held-out tracks are never used for any choice.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..._transitions import observed_transitions
from ...estimators import IncrementsEstimator
from ...estimators._base import TrackEstimatorMixin, default_result_elements
from ...heldout import fpirl_loglik
from ...hermite import HermiteSpace
from ...tracks import TrackTable

#: (family, elements, ridge) tried by cross-validation
CANDIDATES = (
    ("velocity-only", 2, 1e-4), ("velocity-only", 2, 1e-2), ("velocity-only", 3, 1e-2),
    ("velocity-only", 4, 1e-2), ("velocity-only", 6, 1e-2),
    ("joint", (1, 2), 1e-2), ("joint", (2, 2), 1e-2),
)
QUICK_CANDIDATES = (("velocity-only", 2, 1e-2), ("velocity-only", 4, 1e-2), ("joint", (1, 2), 1e-2))
CV_FOLDS = 3


def _action_table(table: TrackTable) -> TrackTable:
    A = list(table.action_axes)
    return TrackTable(table.values[:, A], table.segment, table.track, table.time, table.dt,
                      tuple(table.names[a] for a in A), ("state",) * len(A), table.lower[A], table.upper[A],
                      table.boundary, table.track_ids)


class VelocityPotentialEstimator(TrackEstimatorMixin):
    """psi(s, a) = f(a): the increments estimator on the action columns, embedded in the joint space.

    Parameters
    ----------
    hermite_elements : int
        Cubic Hermite elements per action axis (one element, i.e. a constant, along every state axis).
    ridge : float
        Relative Tikhonov weight of the inner :class:`~fpirl.estimators.IncrementsEstimator`.
    """

    name = "increments (velocity-only psi)"

    def __init__(self, hermite_elements=3, ridge=1e-2):
        self.hermite_elements = hermite_elements
        self.ridge = ridge

    def fit(self, table: TrackTable) -> VelocityPotentialEstimator:
        inner = IncrementsEstimator(hermite_elements=self.hermite_elements, ridge=self.ridge, walls="none")
        inner.fit(_action_table(table))
        S = table.state_axes
        elements = tuple(1 if i in S else int(self.hermite_elements) for i in range(table.ndim))
        self.hermite_ = HermiteSpace(table.lower, table.upper, elements, periodic=table.periodic)
        const = np.array([1.0, 0.0, 1.0, 0.0])  # psi = 1 on one element: values 1, slopes 0
        coef = np.ones(())
        inner_coef = np.asarray(inner.coef_).reshape(inner.hermite_.shape)
        for i in range(table.ndim):  # states come first in a TrackTable
            coef = np.multiply.outer(coef, const) if i in S else coef
        self.coef_ = np.multiply.outer(coef, inner_coef).reshape(self.hermite_.shape)
        self.beta_, self.ridge_, self.residual_, self.dt_ = inner.beta_, inner.ridge_, inner.residual_, table.dt
        self.settings_ = dict(inner.settings_, psi="velocity only")
        self.grid_ = table.grid(default_result_elements(table, elements))
        self.n_transitions_ = getattr(inner, "n_transitions_", None)
        return self


def make_estimator(family: str, elements, ridge: float, action_axes):
    """A candidate estimator (unfitted): see the module docstring."""
    if family == "velocity-only":
        return VelocityPotentialEstimator(hermite_elements=elements, ridge=ridge)
    n_s, n_a = elements
    el = tuple(n_a if i in action_axes else n_s for i in range(2 * len(action_axes)))
    return IncrementsEstimator(hermite_elements=el, ridge=ridge, drift_axes=list(action_axes), walls="none")


def candidate_label(family, elements, ridge) -> str:
    el = f"{elements[0]} x {elements[1]}" if isinstance(elements, tuple) else str(elements)
    return f"{family} {el}, ridge {ridge:g}"


@dataclass
class Selection:
    family: str
    elements: object
    ridge: float
    scores: dict  # label -> mean CV log-likelihood (nats / transition)

    @property
    def label(self) -> str:
        return candidate_label(self.family, self.elements, self.ridge)


def select_model(train: TrackTable, candidates=CANDIDATES, folds=CV_FOLDS, seed=0, progress=None) -> Selection:
    """Choose a candidate by K-fold CV over whole training tracks (best mean held-out log-likelihood)."""
    fold = np.random.default_rng(seed).permutation(train.n_tracks) % folds
    parts = [(train.select_tracks(np.flatnonzero(fold != f)), train.select_tracks(np.flatnonzero(fold == f)))
             for f in range(folds)]
    scores = {}
    for fam, el, r in candidates:
        total, n = 0.0, 0
        for fit_part, val in parts:
            est = make_estimator(fam, el, r, train.action_axes).fit(fit_part)
            ll = fpirl_loglik(est, observed_transitions(val, "velocity"))
            total, n = total + float(ll.sum()), n + ll.size
        scores[candidate_label(fam, el, r)] = total / n
        if progress is not None:
            progress.update(1)
    best = max(candidates, key=lambda c: scores[candidate_label(*c)])
    return Selection(best[0], best[1], best[2], scores)


def timed_fit(est, table):
    t0 = time.perf_counter()
    est.fit(table)
    return est, time.perf_counter() - t0


# --------------------------------------------------------------------------------------------
# arrays behind the figures (numerics stay out of the report code)
# --------------------------------------------------------------------------------------------
def arena_maps(est, mdp, grid) -> dict:
    r"""Functions of position on the state nodes of ``grid``.

    * ``free_energy``: the potential marginalised over velocity,
      :math:`F(s) = -\beta^{-1}\log\int_A e^{-\beta\psi(s,a)}\,da` (zero minimum);
    * ``mean_velocity``: :math:`E_\pi[a\,|\,s] = \int_A a\,\pi(a|s)\,da`, shape ``(d_a, *state_shape)``;
    * ``mean_reward``: :math:`\int_A \pi(a|s) R(s,a)\,da`;
    * ``reward_of_velocity``: R averaged uniformly over the arena, as a function of the velocity.
    """
    S, A = grid.state_axes, grid.action_axes
    beta = float(est.beta_)
    psi = est.potential_on_grid(grid)
    logits = -beta * psi
    shift = logits.max(axis=A, keepdims=True)
    z = grid.integrate(np.exp(logits - shift), axes=A)
    free = -(np.log(z) + np.squeeze(shift, axis=A)) / beta
    free = free - free.min()
    out = {"free_energy": np.where(free < 1e-9 / beta, 0.0, free)}  # round-off of a flat F is 0
    if mdp is not None:
        mesh = np.meshgrid(*grid.coords, indexing="ij")
        out["mean_velocity"] = np.stack([grid.integrate(mdp.policy * mesh[a], axes=A) for a in A])
        out["mean_reward"] = grid.integrate(mdp.policy * mdp.reward, axes=A)
        vol = np.prod([grid.upper[i] - grid.lower[i] for i in S])
        out["reward_of_velocity"] = grid.integrate(mdp.reward, axes=S) / vol
    return out


def simulate_tracks(est, starts: np.ndarray, steps: int, dt: float, lower, upper, rng) -> np.ndarray:
    r"""Sample paths of the fitted model from observed starts ``(s_0, a_0)`` (rows of ``starts``).

    Velocity: :math:`a_{k+1} = a_k - \nabla_a\psi(s_k, a_k)\Delta t + \sqrt{2\Delta t/\beta}\,\xi`,
    mirrored at the walls of the velocity box (the model's reflecting box); position:
    :math:`s_{k+1} = s_k + a_{k+1}\Delta t`, mirrored at the walls of the position box (the velocity
    component normal to a wall flips). Returns ``(steps + 1, n, d_s)`` positions.
    """
    d_s = starts.shape[1] // 2
    lo, hi = np.asarray(lower[:d_s], float), np.asarray(upper[:d_s], float)
    a_lo, a_hi = np.asarray(lower[d_s:], float), np.asarray(upper[d_s:], float)
    box_lo, box_hi = np.asarray(lower, float), np.asarray(upper, float)
    s, a = starts[:, :d_s].copy(), starts[:, d_s:].copy()
    sigma = np.sqrt(2.0 * dt / float(est.beta_))
    out = np.empty((steps + 1,) + s.shape)
    out[0] = s
    for k in range(steps):
        g = est.gradient(np.clip(np.concatenate([s, a], axis=1), box_lo, box_hi))[:, d_s:]
        a = a - g * dt + sigma * rng.normal(size=a.shape)
        a = np.clip(np.where(a < a_lo, 2 * a_lo - a, np.where(a > a_hi, 2 * a_hi - a, a)), a_lo, a_hi)
        s = s + a * dt
        below, above = s < lo, s > hi
        s = np.where(below, 2 * lo - s, np.where(above, 2 * hi - s, s))
        a = np.where(below | above, -a, a)
        out[k + 1] = np.clip(s, lo, hi)
    return out
