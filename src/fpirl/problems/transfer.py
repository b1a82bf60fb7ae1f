r"""Transfer tests of a recovered reward (T1: same dynamics, T2: changed dynamics).

For a benchmark with a known ground truth ``psi_GT`` and a fit ``psi_hat`` on the same grid, and
each change of dynamics ``c`` (:class:`fpirl.rl.DynamicsChange`):

* the **expert's new optimum** ``pi*_c``: soft-optimal control (:func:`fpirl.rl.solve_soft`) of the
  true reward ``R_GT`` (soft inverse Bellman of ``psi_GT``) under the true transition changed by
  ``c``;
* four candidate policies, all built from the fit alone:

  - *re-solved reward*: soft-optimal control of the recovered reward ``R_hat`` under the
    recovered transition changed by ``c`` (what ``fpirl solve`` does);
  - *behaviour cloning*: the recovered policy ``pi_hat`` itself (it cannot react to ``c``);
  - *reward = Q*: soft-optimal control of ``Q_hat = -psi_hat`` used as the reward, same dynamics
    as the re-solve;
  - *uniform*: ``1 / |A|``;

* for each: the mean over the states of ``KL(pi*_c(.|s) || pi(.|s))`` and the true-reward value
  ``J = mean_s V^pi(s)``, the entropy-regularised value (:func:`fpirl.rl.evaluate_policy`) under
  ``R_GT`` and the true changed transition; the value gap is ``J(pi*_c) - J(pi) >= 0``.

T1 is the row without a change; T2 the others.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..core.grid import Grid
from ..evaluation.metrics import policy_kl
from ..mdp.recovery import boltzmann_policy, soft_inverse_bellman_reward
from ..rl.dynamics import DynamicsChange, changed_transition
from ..rl.solver import evaluate_policy, solve_soft

__all__ = ["CANDIDATES", "TransferModel", "default_changes", "transfer_table", "transfer_markdown"]

CANDIDATES = ("resolved", "behaviour_cloning", "reward_q", "uniform")
_LABELS = {"resolved": "re-solved reward", "behaviour_cloning": "behaviour cloning", "reward_q": "reward = Q",
           "uniform": "uniform"}


@dataclass
class TransferModel:
    """A potential on a grid with its state gradient (the truth or a fit)."""

    psi: np.ndarray
    grad_s: np.ndarray


def default_changes(grid: Grid) -> list[tuple[str, DynamicsChange]]:
    """The changes of the T1/T2 tables: none (T1); action push +5 and +20 (when there are as many
    action as state axes), noise x 2 and drift x 0.5 (T2)."""
    out = [("same dynamics (T1)", DynamicsChange())]
    if len(grid.action_axes) == len(grid.state_axes):
        out += [("action push +5", DynamicsChange(action_drift=5.0)),
                ("action push +20", DynamicsChange(action_drift=20.0))]
    out += [("noise x 2", DynamicsChange(noise_scale=2.0)), ("drift x 0.5", DynamicsChange(drift_scale=0.5))]
    return out


def _mean_kl(p, q, grid):
    w = grid.integrate(np.ones(grid.shape), axes=grid.action_axes)
    return float(np.sum(w * policy_kl(p, q, grid)) / np.sum(w))


def transfer_table(grid: Grid, beta: float, dt: float, gamma: float, truth: TransferModel, fit: TransferModel,
                   changes=None, extra=None) -> dict:
    """The T1/T2 table (module docstring).

    ``extra``: more candidates, ``{name: f(change, true_changed_transition) -> policy}`` (e.g. a
    peer's reward re-solved under the true changed transition).

    Returns
    -------
    dict
        ``rows``: one dict per change with ``change``, ``kl_<candidate>``, ``value_<candidate>``,
        ``value_expert``, ``gap_<candidate>``; ``seconds``.
    """
    t0 = time.perf_counter()
    changes = default_changes(grid) if changes is None else changes
    base_true = changed_transition(grid, truth.grad_s, beta, dt)
    base_fit = changed_transition(grid, fit.grad_s, beta, dt)
    r_true = soft_inverse_bellman_reward(-truth.psi, base_true, grid, beta, gamma)
    r_fit = soft_inverse_bellman_reward(-fit.psi, base_fit, grid, beta, gamma)
    pi_fit = boltzmann_policy(grid, fit.psi, beta)
    uniform = np.ones(grid.shape) / grid.integrate(np.ones(grid.shape), axes=grid.action_axes).flat[0]
    rows = []
    for name, change in changes:
        t_true = base_true if change.is_identity else changed_transition(grid, truth.grad_s, beta, dt, change)
        t_fit = base_fit if change.is_identity else changed_transition(grid, fit.grad_s, beta, dt, change)
        expert = solve_soft(grid, r_true, t_true, beta, gamma).policy
        cands = {
            "resolved": solve_soft(grid, r_fit, t_fit, beta, gamma).policy,
            "behaviour_cloning": pi_fit,
            "reward_q": solve_soft(grid, -fit.psi, t_fit, beta, gamma).policy,
            "uniform": uniform,
        }
        for key, make in (extra or {}).items():
            cands[key] = make(change, t_true)
        j_expert = evaluate_policy(grid, expert, r_true, t_true, beta, gamma).mean_return
        row = {"change": name, "value_expert": j_expert}
        for key, pi in cands.items():
            j = evaluate_policy(grid, pi, r_true, t_true, beta, gamma).mean_return
            row[f"kl_{key}"] = _mean_kl(expert, pi, grid)
            row[f"value_{key}"] = j
            row[f"gap_{key}"] = j_expert - j
        rows.append(row)
    return {"rows": rows, "seconds": time.perf_counter() - t0}


def transfer_markdown(table: dict, gamma: float, note: str = "", figure: str | None = None) -> str:
    """The T1/T2 tables as a report section (markdown)."""
    cands = [k[3:] for k in table["rows"][0] if k.startswith("kl_")]
    head = "| change | " + " | ".join(_LABELS.get(c, c) for c in cands) + " |"
    sep = "|---" * (len(cands) + 1) + "|"
    kl = [head, sep] + ["| " + r["change"] + " | " + " | ".join(f"{r[f'kl_{c}']:.3g}" for c in cands) + " |"
                        for r in table["rows"]]
    gap = [head.replace("| change |", "| change | expert J |"), sep + "---|"]
    gap += ["| " + r["change"] + f" | {r['value_expert']:.4g} | "
            + " | ".join(f"{r[f'gap_{c}']:.3g}" for c in cands) + " |" for r in table["rows"]]
    return "\n".join([
        "## Transfer of the recovered reward (T1: same dynamics, T2: changed dynamics)", "", note, "",
        "The expert's new optimum is the soft-optimal policy of the true reward under the true dynamics with the "
        "change; each candidate is built from the fit alone (re-solved reward: soft-optimal control of the "
        "recovered reward under the recovered dynamics with the same change, as `fpirl solve` does). "
        "Action push +K: K a_i dt added to the mean step of state axis i; noise x K: transition standard "
        "deviation times K; drift x K: the model's drift -grad_s psi times K.", "",
        "Mean over the states of KL(expert's new optimum || policy):", "", *kl, "",
        f"True-reward value gap J(expert) - J(policy) (J: entropy-regularised value under the true reward and "
        f"dynamics, mean over uniform start states, gamma = {gamma:g}; lower is better):", "", *gap, "",
        *([f"![transfer]({figure})", ""] if figure else []),
        f"Computed in {table['seconds']:.1f} s.", ""])
