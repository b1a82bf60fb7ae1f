r"""Models of the real-data benchmark and the arrays behind its figures.

State = position ``s``, action = velocity ``a``. Positions follow from velocities
(``s_{k+1} = s_k + a_{k+1} dt``), so psi is fitted from the *action* increments only
(``drift_axes`` = the action axes of :class:`~fpirl.estimators.IncrementsEstimator`, what
``fpirl fit ... --action velocity`` does by default):
:math:`a_{k+1} - a_k = -\nabla_a\psi(s_k, a_k)\,\Delta t + \sqrt{2\Delta t/\beta}\,\xi`.
Its cross-validation over whole training tracks chooses among psi constant in position (0 position
elements: psi(s, a) = f(a), the family that contains the persistent random walk ``f = c |a|^2``)
and psi(s, a) with 1 or 2 elements per position axis, and the ridge; the held-out tracks are never
used for any choice.

:class:`VelocityPotentialEstimator` is the velocity-only member at a given resolution: the base of
the velocity-only models.
"""

from __future__ import annotations

import time

import numpy as np

from ...estimators import IncrementsEstimator
from ...estimators._base import TrackEstimatorMixin, default_result_elements, embed_constant_axes
from ...tracks.table import TrackTable
from ...forward.track_paths import sample_velocity_tracks
from ...evaluation.track_stats import compare_tracks


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
        Cubic Hermite elements per action axis (psi is constant along every state axis).
    ridge : float
        Relative Tikhonov weight of the inner :class:`~fpirl.estimators.IncrementsEstimator`.
    """

    name = "increments (velocity-only psi)"

    def __init__(self, *, hermite_elements=3, ridge=1e-2):
        self.hermite_elements = hermite_elements
        self.ridge = ridge

    def fit(self, table: TrackTable) -> "VelocityPotentialEstimator":
        inner = IncrementsEstimator(hermite_elements=self.hermite_elements, ridge=self.ridge, walls="none")
        inner.fit(_action_table(table))
        self.hermite_, self.coef_ = embed_constant_axes(inner.hermite_, inner.coef_, table.action_axes,
                                                        table.lower, table.upper, table.periodic)
        self.beta_, self.penalty_, self.residual_, self.dt_ = inner.beta_, inner.penalty_, inner.residual_, table.dt
        self.settings_ = dict(inner.settings_, psi="velocity only")
        self.grid_ = table.grid(default_result_elements(table, self.hermite_.elements))
        self.n_transitions_ = getattr(inner, "n_transitions_", None)
        return self




def cv_summary(cv: dict) -> tuple[str, dict]:
    """The chosen candidate's label and ``{label: best mean CV score over the ridges}``."""
    labels, score = cv["labels"], np.asarray(cv["score"])
    j = list(cv["ridge"]).index(cv["chosen_ridge"])
    chosen = ",".join(map(str, cv["chosen_elements"]))
    table = {f"{lab} (ridge {cv['ridge'][int(np.argmax(score[i]))]:g})": float(score[i].max())
             for i, lab in enumerate(labels)}
    return f"{chosen} (ridge {cv['ridge'][j]:g})", table


def timed_fit(est, table):
    t0 = time.perf_counter()
    est.fit(table)
    return est, time.perf_counter() - t0


# --------------------------------------------------------------------------------------------
# arrays behind the figures (numerics stay out of the report code)
# --------------------------------------------------------------------------------------------
def arena_maps(est, mdp, grid, action_support=None) -> dict:
    r"""Functions of position on the state nodes of ``grid``.

    * ``free_energy``: the potential marginalised over velocity,
      :math:`F(s) = -\beta^{-1}\log\int_A e^{-\beta\psi(s,a)}\,da` (zero minimum);
    * ``mean_velocity``: :math:`E_\pi[a\,|\,s] = \int_A a\,\pi(a|s)\,da`, shape ``(d_a, *state_shape)``;
      with ``action_support`` (bool over the action nodes, :mod:`fpirl.mdp.support`) the mean within
      it, :math:`\int_{supp} a\,\pi\,da / \int_{supp} \pi\,da`;
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
        pol = mdp.policy
        if action_support is not None:
            shape = [1] * grid.ndim
            for a in A:
                shape[a] = grid.shape[a]
            pol = pol * np.asarray(action_support, dtype=float).reshape(shape)
            pol = pol / np.maximum(grid.integrate(pol, axes=A), 1e-300)[(...,) + (None,) * len(A)]
        out["mean_velocity"] = np.stack([grid.integrate(pol * mesh[a], axes=A) for a in A])
        out["mean_reward"] = grid.integrate(mdp.policy * mdp.reward, axes=A)
        vol = np.prod([grid.upper[i] - grid.lower[i] for i in S])
        out["reward_of_velocity"] = grid.integrate(mdp.reward, axes=S) / vol
    return out


def simulate_tracks(est, starts: np.ndarray, steps: int, dt: float, lower, upper, rng) -> np.ndarray:
    r"""Sample paths of the fitted model from observed starts ``(s_0, a_0)`` (rows of ``starts``):
    :func:`fpirl.forward.track_paths.sample_velocity_tracks` with reflecting walls, with the estimator's
    mobility ``mobility_``, second lag ``second_lag_`` and per-track noise scale ``track_noise_`` when it
    has them (the model that the held-out score uses). Returns ``(steps + 1, n, d_s)`` positions."""

    return sample_velocity_tracks(est.gradient, float(est.beta_), dt, starts, steps, lower, upper, "reflecting", rng,
                                  getattr(est, "mobility_", None), getattr(est, "second_lag_", None),
                                  getattr(est, "track_noise_", None))


def track_check(est, test: TrackTable, rng, max_lag: int | None = None):
    """Track-level check on held-out tracks: every segment of ``test`` simulated from its first
    observation for as many frames as it has, then :func:`fpirl.evaluation.track_stats.compare_tracks`
    on the positions. Returns ``(summary, observed_stats, simulated_stats)``."""

    S = list(test.state_axes)
    seg = test.segment
    first = np.flatnonzero(np.diff(seg, prepend=-1) != 0)
    lengths = np.bincount(seg)[seg[first]]
    box_lo, box_hi = est.grid_.lower, est.grid_.upper  # the fitted box (the drift is clipped to it)
    sim = simulate_tracks(est, test.values[first], int(lengths.max()) - 1, test.dt, box_lo, box_hi, rng)
    keep = np.arange(sim.shape[0])[None, :] < lengths[:, None]  # (n_segments, frames)
    paths = sim.transpose(1, 0, 2)[keep]
    ids = np.broadcast_to(np.arange(first.size)[:, None], keep.shape)[keep]
    times = np.broadcast_to(test.dt * np.arange(sim.shape[0])[None, :], keep.shape)[keep]
    box = (np.minimum(test.lower, box_lo)[S], np.maximum(test.upper, box_hi)[S])
    names, roles = tuple(test.names[i] for i in S), ("state",) * len(S)
    observed = TrackTable(test.values[:, S], seg, test.track, test.time, test.dt, names, roles, *box)
    simulated = TrackTable(paths, ids, ids, times, test.dt, names, roles, *box)
    return compare_tracks(observed, simulated, max_lag=max_lag, random_state=0)
