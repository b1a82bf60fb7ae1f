"""Part 6: transfer of the recovered reward to changed dynamics (T1/T2), fpirl vs imitation's MCE IRL.

The 2-D grid world of part 3 (paper section 5.1; N nodes per axis, full N = 15). The expert:
``pi_GT ~ exp(-beta psi_GT)``; its reward is the soft inverse Bellman reward of ``psi_GT``. For
each change of dynamics (none = T1; action push +5, +20, noise x 2, drift x 0.5 = T2;
:func:`fpirl.problems.transfer.default_changes`) the expert's new optimum is the soft-optimal policy
of the true reward under the true changed transition. Candidates:

* fpirl (data only: the expert's state-action density snapshots, the MDP map, H = 50): the
  recovered reward re-solved under the recovered transition with the same change (``fpirl solve``);
  behaviour cloning; reward = Q; uniform (:func:`fpirl.problems.transfer.transfer_table`);
* imitation's MCE IRL, **given the true transition** and the expert's exact state occupancy
  (part 3's setting: state-only tabular reward): its reward re-solved by soft policy iteration under
  the TRUE changed transition, at MCE's own temperature 1 and the benchmark's gamma = 0.99.

Metrics: mean over states of KL(expert's new optimum || policy) and the true-reward value gap.
"""

from __future__ import annotations

import time

import numpy as np
from _bridge import call
from part_irl import expert

from fpirl import DensitySnapshots, PotentialEstimator
from fpirl.forward.markov import mdp_density_map
from fpirl.mdp.recovery import DEFAULT_GAMMA
from fpirl.problems.gridworld import GRIDWORLD_BETA, GRIDWORLD_DT, GRIDWORLD_STEPS
from fpirl.problems.transfer import TransferModel, transfer_markdown, transfer_table
from fpirl.rl import solve_soft


def run(quick: bool, cache, seed: int = 2026, log=print, N=None) -> dict:
    N = (9 if quick else 15) if N is None else N
    H, beta, dt, gamma = GRIDWORLD_STEPS, GRIDWORLD_BETA, GRIDWORLD_DT, DEFAULT_GAMMA
    ex = expert(N)
    grid, psi, grad_s, pi_gt, T_gt = ex["grid"], ex["psi"], ex["grad_s"], ex["pi_gt"], ex["T_gt"]
    T_mass, rho0, D_exp = ex["T_mass"], ex["rho0"], ex["D_exp"]
    t0 = time.perf_counter()
    rho0_density = np.full((N, N), 1.0 / (grid.axes[0].length * grid.axes[1].length))
    snaps = mdp_density_map(grid, pi_gt, T_gt, rho0_density, H)
    est = PotentialEstimator(hermite_elements=4, beta=beta).fit(DensitySnapshots(grid, dt * np.arange(H + 1), snaps))
    t_fit = time.perf_counter() - t0
    log(f"[transfer] fpirl fit on the expert's MDP-map densities: {t_fit:.1f} s")
    max_iter = 200 if quick else 1000
    out, info = call("imitation", "imitation_mce", {"horizon": H, "seed": seed, "lr": 0.05, "max_iter": max_iter},
                     {"T": T_mass, "rho0": rho0, "demo_om": D_exp.sum(axis=0)}, cache=cache, timeout=3000)
    r_mce = np.broadcast_to(np.asarray(out["reward"], dtype=float).reshape(N, N, 1, 1), grid.shape)
    log(f"[transfer] imitation MCE IRL: {info['wall_s']:.1f} s, {info['iterations']} iterations")

    def mce(change, t_true):
        return solve_soft(grid, r_mce, t_true, 1.0, gamma).policy

    table = transfer_table(grid, beta, dt, gamma, TransferModel(psi, grad_s),
                           TransferModel(est.potential_on_grid(), est.gradient_on_grid(axes=grid.state_axes)),
                           extra={"MCE IRL (true T)": mce})
    case = f"{N}^2 states x {N}^2 actions"
    rows = []
    for r in table["rows"]:
        for key, tool in (("resolved", "fpirl re-solved reward (data only)"),
                          ("behaviour_cloning", "behaviour cloning (fpirl policy)"),
                          ("MCE IRL (true T)", f"imitation {info['version']} MCE IRL (true T), reward re-solved")):
            rows.append({"case": f"{case}: {r['change']}", "tool": tool, "policy_kl": r[f"kl_{key}"],
                         "value_gap": r[f"gap_{key}"], "wall_s": t_fit if key == "resolved" else
                         (info["wall_s"] if key.startswith("MCE") else 0.0)})
    notes = [transfer_markdown(table, gamma, f"{case}, fpirl fitted on the expert's MDP-map densities "
                               f"(H = {H}), fit {t_fit:.1f} s; MCE IRL {info['wall_s']:.1f} s "
                               f"({info['iterations']} iterations, torch {info['torch']}).").replace("\n", "\n  ")]
    return {"rows": rows, "notes": notes, "N": N, "table": table}
