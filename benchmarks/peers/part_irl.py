"""Part 3: classical IRL. imitation's MCE IRL (given the TRUE transition matrix) vs fpirl (given data).

The 2-D grid world of the paper's section 5.1 (states (s1, s2), actions (a1, a2), periodic
[-1, 1]^4, psi_GT of ``fpirl.problems.gridworld``, beta = 5, dt = 0.02), discretised on N nodes per
axis: N^2 states x N^2 actions (full: N = 15). The expert: pi_GT(a|s) ~ exp(-beta psi_GT), the
Gaussian transition T_GT, start rho_0 uniform, horizon H = 50.

* imitation: ``MCEIRL`` with T_GT as a tabular (S, A, S) matrix, a state-only reward (one weight per
  state) and the expert's exact state occupancy measure (the best demonstrations it could get).
* fpirl: only the expert's state-action density snapshots p_0..p_H (the MDP map of the expert);
  ``PotentialEstimator`` (4 Hermite elements per axis, beta = 5 as in the paper) and
  ``recover_mdp``: its own policy and transition.

Metrics: policy KL(pi_GT(.|s) || pi(.|s)) averaged over t = 0..H-1 and states weighted by the
expert's rho_t (MCE's policy depends on t); KL(rho_expert,t || rho_model,t) for t = 1..H, each
model simulated with its own transition (MCE: the true one); wall time.
"""

from __future__ import annotations

import time

import numpy as np
from _bridge import call

from fpirl import DensitySnapshots, Grid, PotentialEstimator, recover_mdp
from fpirl.mdp import boltzmann_policy
from fpirl.problems.gridworld import (
    GRIDWORLD_BETA,
    GRIDWORLD_DT,
    GRIDWORLD_LOWER,
    GRIDWORLD_NAMES,
    GRIDWORLD_ROLES,
    GRIDWORLD_STEPS,
    GRIDWORLD_UPPER,
    gridworld_truth,
)
from fpirl.forward.markov import mdp_density_map
from fpirl.mdp.transition import GaussianTransition

FLOOR = 1e-300


def tabular(grid, policy, transition):
    """Probability-mass forms on a periodic 2+2-D grid (equal node weights):
    ``pi[s, a] = w(a) pi(a|s)`` and ``T[s, a, s'] = w(s') T(s'|s, a)``."""
    S = grid.axes[0].n_nodes * grid.axes[1].n_nodes
    w_s = grid.axes[0].spacing * grid.axes[1].spacing
    w_a = grid.axes[2].spacing * grid.axes[3].spacing
    T_mass = transition.dense(max_entries=S * S * S + 1).reshape(S, S, S) * w_s
    return np.asarray(policy).reshape(S, S) * w_a, T_mass


def state_visits(rho0, pi_mass, T_mass, H: int) -> np.ndarray:
    """State distributions ``D_t``, ``t = 0..H``: ``D_{t+1}(s') = sum_{s,a} D_t(s) pi[s,a] T[s,a,s']``."""
    D = np.empty((H + 1, rho0.size))
    D[0] = rho0
    for t in range(H):  # H steps of a dense contraction (the horizon, not a loop over nodes)
        D[t + 1] = np.einsum("s,sa,sap->p", D[t], pi_mass, T_mass)
    return D


def _kl_rows(p, q):
    """KL(p_t || q_t) of probability vectors along the last axis."""
    p = np.maximum(p, 0.0)
    return np.sum(np.where(p > 0, p * (np.log(np.maximum(p, FLOOR)) - np.log(np.maximum(q, FLOOR))), 0.0), axis=-1)


def expert(N: int) -> dict:
    """The Grid World expert on ``N`` nodes per axis: the true zero-mean psi and its state gradient, the
    Boltzmann policy and Gaussian transition, their tabular masses, the uniform start and the expert's state
    distributions ``D_exp`` for ``t = 0..H``."""
    H, beta, dt = GRIDWORLD_STEPS, GRIDWORLD_BETA, GRIDWORLD_DT
    grid = Grid(GRIDWORLD_LOWER, GRIDWORLD_UPPER, N, names=GRIDWORLD_NAMES, roles=GRIDWORLD_ROLES)
    hermite, coef = gridworld_truth()
    coef = hermite.remove_mean(coef)
    psi = hermite.evaluate_grid(coef, grid.coords)
    grad_s = hermite.gradient_grid(coef, grid.coords, grid.state_axes)
    pi_gt = boltzmann_policy(grid, psi, beta)
    T_gt = GaussianTransition(grid, grad_s, beta, dt)
    pi_mass, T_mass = tabular(grid, pi_gt, T_gt)
    rho0 = np.full(N * N, 1.0 / (N * N))
    return {"grid": grid, "psi": psi, "grad_s": grad_s, "pi_gt": pi_gt, "T_gt": T_gt, "pi_mass": pi_mass,
            "T_mass": T_mass, "rho0": rho0, "D_exp": state_visits(rho0, pi_mass, T_mass, H)}


def run(quick: bool, cache, seed: int = 2026, log=print, N=None) -> dict:
    N = (9 if quick else 15) if N is None else N
    H = GRIDWORLD_STEPS
    beta, dt = GRIDWORLD_BETA, GRIDWORLD_DT
    ex = expert(N)
    grid, psi, pi_gt, T_gt = ex["grid"], ex["psi"], ex["pi_gt"], ex["T_gt"]
    pi_mass, T_mass, rho0, D_exp = ex["pi_mass"], ex["T_mass"], ex["rho0"], ex["D_exp"]
    S = N * N
    # fpirl: only the expert's state-action densities (the MDP map; same numbers as D_exp * pi)
    t0 = time.perf_counter()
    rho0_density = np.full((N, N), 1.0 / (grid.axes[0].length * grid.axes[1].length))
    snaps = mdp_density_map(grid, pi_gt, T_gt, rho0_density, H)
    t_data = time.perf_counter() - t0
    t0 = time.perf_counter()
    est = PotentialEstimator(hermite_elements=4, beta=beta).fit(DensitySnapshots(grid, dt * np.arange(H + 1), snaps))
    mdp = recover_mdp(grid, est.potential_on_grid(), est.gradient_on_grid(axes=grid.state_axes), beta, dt)
    t_fit = time.perf_counter() - t0
    pi_f, T_f = tabular(grid, mdp.policy, mdp.transition)
    D_f = state_visits(rho0, pi_f, T_f, H)
    kl_pol_f = _kl_rows(pi_mass, pi_f)  # (S,)
    pol_f = float(np.mean(np.sum(D_exp[:H] * kl_pol_f[None, :], axis=1)))
    dens_f = _kl_rows(D_exp[1:], D_f[1:])
    rows = [{"case": f"{N}^2 states x {N}^2 actions, H = {H}", "tool": "fpirl (data only)",
             "settings": "VSI, 4 Hermite el./axis, beta = 5 fixed; recover_mdp",
             "policy_kl": pol_f, "density_kl_max": float(dens_f.max()), "density_kl": dens_f, "wall_s": t_fit,
             "note": f"psi rel. error {_rel(est.potential_on_grid(), psi):.1%}; data made in {t_data:.2f} s"}]
    log(f"[irl] fpirl: policy KL {pol_f:.4g}, max_t KL(rho) {dens_f.max():.4g}, fit+recover {t_fit:.1f} s")
    # imitation: true T, the expert's occupancy measure
    max_iter = 200 if quick else 1000
    out, info = call("imitation", "imitation_mce",
                     {"horizon": H, "seed": seed, "lr": 0.05, "max_iter": max_iter},
                     {"T": T_mass, "rho0": rho0, "demo_om": D_exp.sum(axis=0)}, cache=cache, timeout=3000)
    pi_m = out["pi"]  # (H, S, A)
    kl_pol_m = _kl_rows(pi_mass[None], pi_m)  # (H, S)
    pol_m = float(np.mean(np.sum(D_exp[:H] * kl_pol_m, axis=1)))
    dens_m = _kl_rows(D_exp[1:], out["D"][1:H + 1])
    rows.append({"case": rows[0]["case"], "tool": f"imitation {info['version']} MCE IRL (true T)",
                 "settings": f"state-only tabular reward, Adam lr 0.05, <= {max_iter} iterations",
                 "policy_kl": pol_m, "density_kl_max": float(dens_m.max()), "density_kl": dens_m,
                 "wall_s": info["wall_s"],
                 "note": f"torch {info['torch']}; {info['iterations']} iterations; final occupancy mismatch (L-inf) "
                         f"{info['linf_occupancy']:.2g}"})
    log(f"[irl] imitation MCE: policy KL {pol_m:.4g}, max_t KL(rho) {dens_m.max():.4g}, {info['wall_s']:.1f} s")
    uniform = float(np.mean(np.sum(D_exp[:H] * _kl_rows(pi_mass, np.full_like(pi_mass, 1.0 / S))[None], axis=1)))
    drift = _kl_rows(D_exp[1:], D_exp[:1])
    notes = [f"reference: a uniform policy has policy KL {uniform:.4g} to the expert",
             (f"scale of the state dynamics: max_t KL(rho_expert,t || rho_0) = {drift.max():.3g}; the state occupancy "
              "that MCE IRL matches does not pin down the expert's action preferences (actions move the next state "
              "only by grad_s psi dt), so a nearly uniform policy under a state-only reward reproduces it"),
             f"grid: {N} nodes per axis ({S} states x {S} actions); the tabular T has {S ** 3:,} entries"]
    return {"rows": rows, "notes": notes, "N": N, "horizon": H}


def _rel(f, g):
    f, g = f - f.mean(), g - g.mean()
    return float(np.sqrt(np.sum((f - g) ** 2) / np.sum(g**2)))
