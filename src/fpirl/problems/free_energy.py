r"""Empirical free-energy minimisation in the 2-D Grid World MDP (paper section 3.2.3).

The paper's setting: state ``s = (x, y)`` in ``[-1, 1]^2`` (walls at the box edges), action
``a = (v_x, v_y)`` in ``[-a_max, a_max]^2`` (the paper gives no action bound; ``a_max = 1``),

.. math::

    R(s, a) = |x| - y - \sqrt{v_x^2 + v_y^2},\qquad
    s' \sim \mathcal{N}\big(s + a\,\Delta t,\ \sigma^2 I\big).

Walls: the Gaussian is **reflected** at the walls (method of images, i.e. the next position is
mirrored back into the box), as in :class:`fpirl.mdp.GaussianTransition` on a reflecting grid,
whose kernel this module uses (``GaussianTransition(grid, grad_s_psi=-a, beta=2 dt / sigma^2,
dt)`` has mean ``s + a dt`` and variance ``sigma^2``). No probability leaves the box.

Steps:

1. the optimal entropy-regularised policy by soft value iteration
   (:func:`fpirl.problems.soft_q.soft_value_iteration`) with temperature ``1 / beta`` and
   discount ``gamma``: ``Q = R + gamma E[V(s')]``, ``V = beta^{-1} log int exp(beta Q) da``,
   ``pi* = exp(beta (Q - V))``;
2. the state-action density evolved under ``pi*`` from a uniform state density by the MDP map
   (eq. ``density_evolution``), ``p_n(s', a') = pi*(a'|s') int int p_{n-1}(s, a) T(s'|s, a) da ds``;
3. the free energy of eq. ``free_energy_mdp`` along the evolution,

   .. math:: F(\rho, \pi) = -\int_S \rho \int_A \pi Q\, da\, ds - \beta^{-1}\big(H_s(\rho) + H_{a|s}(\pi)\big)
             = \int_S \rho(s)\big(-V(s) + \beta^{-1}\log\rho(s)\big)\, ds

   (the second form because ``pi*`` is the Boltzmann policy of ``Q``), computed with
   :func:`fpirl.metrics.free_energy_mdp`. Its lower bound over all state densities is
   ``F_min = -beta^{-1} log int exp(beta V) ds``, attained at the Gibbs density
   ``rho_G ~ exp(beta V)``; ``F - F_min = beta^{-1} KL(rho || rho_G)``.

Whether ``F`` falls **monotonically** is the paper's empirical claim, not a theorem: the MDP
map's stationary density is not ``rho_G`` in general, and only ``KL(rho_n || rho_inf)`` (to the
chain's own stationary density) is guaranteed not to increase (data-processing inequality).
:func:`run_free_energy` measures both and scans the parameters (see its report).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from .._errors import FpirlInputError
from ..grid import Grid
from ..mdp import GaussianTransition, boltzmann_policy
from ..metrics import free_energy_mdp
from .soft_q import soft_value_iteration

__all__ = [
    "FreeEnergyCurve",
    "FreeEnergyParams",
    "GridWorldMDP",
    "free_energy_curve",
    "gridworld_mdp",
    "run_free_energy",
]


@dataclass(frozen=True)
class FreeEnergyParams:
    """Parameters of the free-energy demonstration (defaults: the reported run).

    Attributes
    ----------
    state_elements, action_elements : int
        Grid elements per state / action axis (reflecting grid: ``elements + 1`` nodes).
    action_bound : float
        ``a in [-action_bound, action_bound]^2``.
    dt : float
        MDP time step in the mean ``s + a dt``.
    sigma : float
        Standard deviation of the Gaussian transition per axis.
    gamma : float
        Discount of the soft value iteration.
    beta : float
        Inverse temperature: the soft value iteration uses temperature ``1 / beta`` and the free
        energy the same ``beta``.
    steps : int
        MDP steps of the density evolution.
    """

    state_elements: int = 20
    action_elements: int = 10
    action_bound: float = 1.0
    dt: float = 0.1
    sigma: float = 0.1
    gamma: float = 0.9
    beta: float = 1.0
    steps: int = 200

    def label(self) -> str:
        return (f"dt={self.dt:g}, sigma={self.sigma:g}, gamma={self.gamma:g}, beta={self.beta:g}, "
                f"grid {self.state_elements}^2 x {self.action_elements}^2")


@dataclass
class GridWorldMDP:
    r"""The Grid World MDP on a reflecting 4-D grid ``(x, y, vx, vy)``.

    The transition factorises per state axis, and the factor of axis ``x`` depends only on
    ``(x, v_x)`` (mean ``x + v_x dt``), so with ``Kx[i, k, p] = T_x(x'_p | x_i, vx_k)`` (and
    ``Ky`` alike)

    .. math::
        E[V(s')|s, a] = \sum_{p,q} w_p w_q\, K_x[i,k,p]\, K_y[j,l,q]\, V(x'_p, y'_q),
        \qquad
        \rho'(x'_p, y'_q) = \sum_{ijkl} W_{ijkl}\, p_{ijkl}\, K_x[i,k,p]\, K_y[j,l,q],

    with trapezoid weights ``w`` (state) and ``W`` (joint): two small tensor contractions.
    The factors are those of :class:`fpirl.mdp.GaussianTransition` (nodal, normalised in the
    grid quadrature, reflected at the walls), so both maps equal its ``expect`` / ``push``.
    """

    grid: Grid
    reward: np.ndarray
    kx: np.ndarray
    ky: np.ndarray
    dt: float
    sigma: float

    def expect(self, v: np.ndarray) -> np.ndarray:
        """``E_{s'~T(.|s,a)}[v(s')]`` for every joint node, shape ``grid.shape``."""
        ws = np.outer(self.grid.axes[0].node_weights, self.grid.axes[1].node_weights)
        return np.einsum("ikp,jlq,pq->ijkl", self.kx, self.ky, v * ws, optimize=True)

    def push(self, p: np.ndarray) -> np.ndarray:
        """Next-state density ``int int p(s, a) T(s'|s, a) da ds``, shape ``(nx, ny)``."""
        return np.einsum("ijkl,ikp,jlq->pq", p * self.grid.node_weights(), self.kx, self.ky, optimize=True)


def gridworld_mdp(state_elements: int = 20, action_elements: int = 10, dt: float = 0.1, sigma: float = 0.1,
                  action_bound: float = 1.0) -> GridWorldMDP:
    r"""Build the Grid World MDP of paper section 3.2.3 on a reflecting grid.

    ``R(s, a) = |x| - y - sqrt(vx^2 + vy^2)`` at the nodes; ``T(s'|s, a) = N(s + a dt, sigma^2 I)``
    reflected at the walls ``x, y = +-1``.
    """
    if not (dt > 0 and sigma > 0 and action_bound > 0):
        raise FpirlInputError(f"need dt, sigma, action_bound > 0, got {dt}, {sigma}, {action_bound}")
    b = float(action_bound)
    grid = Grid([-1.0, -1.0, -b, -b], [1.0, 1.0, b, b], [state_elements, state_elements, action_elements, action_elements],
                names=["x", "y", "vx", "vy"], roles=["state", "state", "action", "action"], boundary="reflecting")
    x, y, vx, vy = np.meshgrid(*grid.coords, indexing="ij", sparse=True)
    reward = np.abs(x) - y - np.sqrt(vx**2 + vy**2)
    # GaussianTransition has mean s - grad_s(psi) dt and variance 2 dt / beta: choose
    # grad_s(psi) = -a and beta = 2 dt / sigma^2.
    grad = -np.stack(np.broadcast_arrays(vx, vy, np.zeros(grid.shape))[:2])
    trans = GaussianTransition(grid, grad, 2.0 * dt / sigma**2, dt)
    nx, ny = grid.shape[0], grid.shape[1]
    kx = trans.factors[0].reshape(grid.shape + (nx,))[:, 0, :, 0, :]
    ky = trans.factors[1].reshape(grid.shape + (ny,))[0, :, 0, :, :]
    return GridWorldMDP(grid, np.broadcast_to(reward, grid.shape).copy(), kx, ky, float(dt), float(sigma))


@dataclass
class FreeEnergyCurve:
    """Free energy along the density evolution (output of :func:`free_energy_curve`).

    Attributes
    ----------
    params : FreeEnergyParams
    mdp : GridWorldMDP
    q, v, policy : ndarray
        Soft-optimal Q, V and Boltzmann policy.
    iterations : int
        Soft value iterations.
    rho : ndarray, shape (steps + 1, nx, ny)
        State densities ``rho_n``.
    free_energy : ndarray, shape (steps + 1,)
        ``F(rho_n, pi*)`` (eq. ``free_energy_mdp``).
    free_energy_min : float
        ``-beta^{-1} log int exp(beta V) ds``, the minimum over all state densities.
    kl_stationary : ndarray, shape (steps + 1,)
        ``KL(rho_n || rho_inf)`` to the chain's stationary density (monotone by theory).
    increments : ndarray
        ``F_{n+1} - F_n``.
    seconds : dict
    """

    params: FreeEnergyParams
    mdp: GridWorldMDP
    q: np.ndarray
    v: np.ndarray
    policy: np.ndarray
    iterations: int
    rho: np.ndarray
    free_energy: np.ndarray
    free_energy_min: float
    rho_stationary: np.ndarray
    kl_stationary: np.ndarray
    seconds: dict = field(default_factory=dict)

    @property
    def increments(self) -> np.ndarray:
        return np.diff(self.free_energy)

    @property
    def tolerance(self) -> float:
        """Round-off level of an increment: ``1e-12 * max|F|``."""
        return 1e-12 * float(np.max(np.abs(self.free_energy)))

    @property
    def monotone(self) -> bool:
        """No increment larger than round-off."""
        return bool(np.all(self.increments <= self.tolerance))

    @property
    def max_increase(self) -> float:
        return float(max(self.increments.max(), 0.0))

    @property
    def n_increases(self) -> int:
        return int(np.sum(self.increments > self.tolerance))

    @property
    def drop(self) -> float:
        """``F_0 - F_end``."""
        return float(self.free_energy[0] - self.free_energy[-1])

    def plateau_change(self, fraction: float = 0.1) -> float:
        """``|F_end - F_{end - k}| / (F_0 - F_end)`` over the last ``fraction`` of the steps."""
        k = max(1, round(fraction * (self.free_energy.size - 1)))
        drop = self.drop
        return float(abs(self.free_energy[-1] - self.free_energy[-1 - k]) / drop) if drop > 0 else np.inf

    def gap_to_minimum(self) -> float:
        """``F_end - F_min = beta^{-1} KL(rho_end || rho_Gibbs)``."""
        return float(self.free_energy[-1] - self.free_energy_min)


def _state_integral(grid: Grid, f: np.ndarray) -> float:
    return float(np.sum(np.outer(grid.axes[0].node_weights, grid.axes[1].node_weights) * f))


def free_energy_curve(params: FreeEnergyParams = FreeEnergyParams(), progress: bool = False) -> FreeEnergyCurve:
    r"""Soft-optimal policy, density evolution from a uniform start, and the free energy curve.

    See the module docstring for the equations. The evolution starts from
    ``rho_0 = 1 / |S| = 1/4``, ``p_0 = rho_0 pi*``; the stationary density ``rho_inf`` is the
    fixed point of ``rho -> push(rho pi*)`` (power iteration to a relative change of 1e-12).
    """
    t0 = time.perf_counter()
    mdp = gridworld_mdp(params.state_elements, params.action_elements, params.dt, params.sigma, params.action_bound)
    grid = mdp.grid
    wa = np.outer(grid.axes[2].node_weights, grid.axes[3].node_weights)
    alpha = 1.0 / params.beta
    sol = soft_value_iteration(mdp.reward, mdp.expect, wa, alpha, params.gamma, action_axes=(2, 3), tol=1e-9)
    policy = boltzmann_policy(grid, -sol.q, params.beta)
    t1 = time.perf_counter()

    rho = np.empty((params.steps + 1,) + grid.shape[:2])
    rho[0] = 0.25
    it = range(1, params.steps + 1)
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(it, desc="free energy: MDP map", unit="step")
    for n in it:
        rho[n] = mdp.push(rho[n - 1][:, :, None, None] * policy)
    fe = free_energy_mdp(rho, policy, sol.q, params.beta, grid)
    # the minimum over rho: -1/beta log int exp(beta V) ds (log-sum-exp)
    bv = params.beta * sol.v
    fmin = -(bv.max() + np.log(_state_integral(grid, np.exp(bv - bv.max())))) / params.beta

    # stationary density of the chain rho -> push(rho pi)
    r = rho[-1].copy()
    for _ in range(200_000):
        r_new = mdp.push(r[:, :, None, None] * policy)
        change = np.max(np.abs(r_new - r)) / np.max(r_new)
        r = r_new
        if change < 1e-12:
            break
    ws = np.outer(grid.axes[0].node_weights, grid.axes[1].node_weights)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(rho > 0, rho / np.maximum(r, 1e-300), 1.0)
        kl_stat = np.sum(ws * np.where(rho > 0, rho * np.log(ratio), 0.0), axis=(1, 2))
    t2 = time.perf_counter()
    return FreeEnergyCurve(params, mdp, sol.q, sol.v, policy, sol.iterations, rho, np.asarray(fe), float(fmin), r,
                           kl_stat, {"soft value iteration": t1 - t0, "evolution": t2 - t1})


#: One-at-a-time variations around the default parameters, for the monotonicity scan.
SCAN = (
    {},
    {"dt": 0.05},
    {"dt": 0.2},
    {"dt": 0.3},
    {"sigma": 0.05},
    {"sigma": 0.2},
    {"gamma": 0.5},
    {"gamma": 0.95},
    {"beta": 0.2},
    {"beta": 5.0},
    {"dt": 0.3, "sigma": 0.2},
)


def _figure(curve: FreeEnergyCurve, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    grid = curve.mdp.grid
    steps = np.arange(curve.free_energy.size)
    snaps = [0, min(10, steps[-1]), min(50, steps[-1]), int(steps[-1])]
    fig = plt.figure(figsize=(12, 6.5), constrained_layout=True)
    gs = fig.add_gridspec(2, 4)
    ax = fig.add_subplot(gs[0, :2])
    ax.plot(steps, curve.free_energy, lw=2, label=r"$F(\rho_n, \pi^*)$")
    ax.axhline(curve.free_energy_min, color="k", ls="--", lw=1, label=r"$F_{min} = -\beta^{-1}\log\int e^{\beta V}ds$")
    ax.set_xlabel("MDP step n")
    ax.set_ylabel("free energy")
    ax.set_title("free energy (eq. free_energy_mdp) under the soft-optimal policy")
    ax.legend()
    ax2 = fig.add_subplot(gs[0, 2:])
    inc = curve.increments
    ax2.semilogy(steps[1:], np.maximum(-inc, 1e-18), label="decrease  $F_{n-1} - F_n$")
    if np.any(inc > curve.tolerance):
        ax2.semilogy(steps[1:], np.where(inc > curve.tolerance, inc, np.nan), "r.", label="increase")
    ax2.semilogy(steps, np.maximum(curve.kl_stationary, 1e-18), label=r"KL$(\rho_n \| \rho_\infty)$")
    ax2.set_xlabel("MDP step n")
    ax2.set_title("per-step change of F; KL to the stationary density")
    ax2.legend()
    x, y = grid.coords[0], grid.coords[1]
    vmax = float(max(curve.rho[n].max() for n in snaps))
    for k, n in enumerate(snaps):
        a = fig.add_subplot(gs[1, k])
        im = a.imshow(curve.rho[n].T, origin="lower", extent=(x[0], x[-1], y[0], y[-1]), vmin=0, vmax=vmax,
                      cmap="viridis")
        a.set_title(rf"$\rho_{{{n}}}(x, y)$")
        a.set_xlabel("x")
        if k == 0:
            a.set_ylabel("y")
    fig.colorbar(im, ax=fig.axes[-1], shrink=0.8)
    fig.suptitle(f"Grid World free energy: {curve.params.label()}")
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def run_free_energy(outdir="fpirl-free-energy", progress: bool = True, *, params: FreeEnergyParams | None = None,
                    scan: bool = True, verbose: bool = True) -> dict:
    """Free-energy demonstration end to end: curve, figure, parameter scan and ``report.md``.

    Parameters
    ----------
    outdir : path
        Output directory (created if missing): ``free_energy.png``, ``free_energy.csv`` and
        ``report.md``.
    progress : bool
        Progress bars.
    params : FreeEnergyParams, optional
        Main run (default :class:`FreeEnergyParams`).
    scan : bool
        Also run the one-at-a-time parameter scan :data:`SCAN` (about a minute) and tabulate
        monotonicity.
    verbose : bool
        Print a summary.

    Returns
    -------
    dict
        ``curve`` (FreeEnergyCurve), ``scan`` (list of dicts), ``report``, ``figure``, ``seconds``.
    """
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    params = FreeEnergyParams() if params is None else params
    t0 = time.perf_counter()
    curve = free_energy_curve(params, progress=progress)
    fig = _figure(curve, outdir / "free_energy.png")
    np.savetxt(outdir / "free_energy.csv",
               np.column_stack([np.arange(curve.free_energy.size), curve.free_energy, curve.kl_stationary]),
               delimiter=",", header="step,free_energy,kl_to_stationary", comments="")
    rows = []
    if scan:
        for change in SCAN:
            p = replace(params, **change)
            c = curve if not change else free_energy_curve(p)
            rows.append({"change": ", ".join(f"{k}={v:g}" for k, v in change.items()) or "(default)",
                         "params": p, "monotone": c.monotone, "n_increases": c.n_increases,
                         "max_increase": c.max_increase, "drop": c.drop, "plateau": c.plateau_change(),
                         "gap": c.gap_to_minimum(), "kl_monotone": bool(np.all(np.diff(c.kl_stationary) <= 1e-12))})
    seconds = time.perf_counter() - t0
    report = _report(curve, rows, seconds)
    (outdir / "report.md").write_text(report)
    if verbose:
        print(f"fpirl free-energy: F {curve.free_energy[0]:.4f} -> {curve.free_energy[-1]:.4f} "
              f"(F_min {curve.free_energy_min:.4f}) over {params.steps} steps; monotone: {curve.monotone}; "
              f"wrote {outdir / 'report.md'} ({seconds:.1f} s)", flush=True)
    return {"curve": curve, "scan": rows, "report": outdir / "report.md", "figure": fig, "seconds": seconds}


def _report(curve: FreeEnergyCurve, rows, seconds: float) -> str:
    p = curve.params
    F = curve.free_energy
    marks = [n for n in (0, 1, 2, 5, 10, 20, 50, 100, 150, 200, 300, 500) if n < F.size]
    if F.size - 1 not in marks:
        marks.append(F.size - 1)
    lines = [
        "# Free energy in the Grid World MDP (paper section 3.2.3)",
        "",
        ("State `s = (x, y)` in `[-1, 1]^2` with walls, action `a = (vx, vy)` in "
        f"`[-{p.action_bound:g}, {p.action_bound:g}]^2`, reward `R = |x| - y - sqrt(vx^2 + vy^2)`, "
        "transition `s' ~ N(s + a dt, sigma^2 I)` **reflected at the walls** (method of images)."),
        ("Optimal entropy-regularised policy by soft value iteration "
        f"(temperature 1/beta, {curve.iterations} backups to a sup-norm error bound of 1e-9); the state-action "
        "density is evolved by the MDP map from a uniform state density; F is eq. `free_energy_mdp` with the "
        "soft-optimal Q."),
        "",
        f"Parameters: {p.label()} (nodes {curve.mdp.grid.shape}), {p.steps} steps.",
        "",
        "| step | F |",
        "|---:|---:|",
        *[f"| {n} | {F[n]:.6f} |" for n in marks],
        "",
        (f"* F falls from {F[0]:.4f} to {F[-1]:.4f} (drop {curve.drop:.4f}); change over the last 10% of the "
        f"steps: {100 * curve.plateau_change():.3g}% of the drop (plateau)."),
        (f"* Lower bound over all state densities F_min = {curve.free_energy_min:.4f}; the plateau lies "
        f"{curve.gap_to_minimum():.4f} above it (= KL(rho_end || rho_Gibbs) / beta): the chain's stationary "
        "density is not the Gibbs density exp(beta V)/Z, so F does not reach its minimum."),
        (f"* Monotone: **{'yes' if curve.monotone else 'no'}** (increments above round-off: {curve.n_increases}, "
        f"largest increase {curve.max_increase:.3g})."),
        (f"* KL(rho_n || rho_inf) to the chain's own stationary density falls monotonically: "
         f"**{'yes' if np.all(np.diff(curve.kl_stationary) <= 1e-12) else 'no'}** (guaranteed by the "
         "data-processing inequality: the Lyapunov function of the MDP map is this KL, not F)."),
        "",
    ]
    if rows:
        lines += [
            "## Parameter scan (one change at a time from the parameters above)",
            "",
            "| change | F monotone | increases | largest increase | drop F_0 - F_end | plateau change | F_end - F_min |",
            "|---|---|---:|---:|---:|---:|---:|",
            *[f"| {r['change']} | {'yes' if r['monotone'] else '**no**'} | {r['n_increases']} | "
              f"{r['max_increase']:.2g} | {r['drop']:.4g} | {100 * r['plateau']:.2g}% | {r['gap']:.4g} |" for r in rows],
            "",
        ]
        bad = [r["change"] for r in rows if not r["monotone"]]
        if bad:
            lines.append(
                "Verdict: the paper's claim (monotone decrease to a minimum at equilibrium) holds for "
                f"{len(rows) - len(bad)} of {len(rows)} settings; it fails for {', '.join(bad)}: there F first falls, "
                "then rises slightly before settling (the increases are small compared with the drop). "
                "In no setting does F reach its minimum F_min: it plateaus at the free energy of the chain's "
                "stationary density."
            )
        else:
            lines.append("Verdict: F fell monotonically to a plateau in every setting of the scan; it plateaus above "
                         "F_min (the chain's stationary density is not the Gibbs density).")
        lines.append("")
    lines += [f"Wall time: {seconds:.1f} s. Figure: `free_energy.png`; data: `free_energy.csv`.", ""]
    return "\n".join(lines)
