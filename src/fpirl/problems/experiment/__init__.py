r"""Generic synthetic-experiment pipeline: known potential -> data -> fits -> metrics -> report.

Used by the Grid World benchmark (:mod:`fpirl.problems.gridworld`, paper section 5.1) and
reusable by other problems (Mountain Car). Given a ground-truth potential in a Hermite space
(:class:`ExperimentSpec`) and a list of finite-element resolutions ``N``, :func:`run_experiment`

1. makes two kinds of data on every ``N^d`` grid (docs/method.md, "Benchmark data"), cached on disk:

   * **FP PDE data**: one accurate solve of eq. ``fokker_planck_eq`` with the independent
     forward solver (:class:`~fpirl.forward.SpectralSolver` on periodic boxes,
     :class:`~fpirl.forward.FiniteVolumeSolver` with walls) at a resolution of its own, cached
     once, then brought onto each grid with the solver's own interpolant (trigonometric, exact
     for the spectral representation; resp. the cubic spline). Tiny negative values of the
     interpolant (ringing, ~1e-6 of the maximum) are clipped to 0 and every snapshot is
     renormalised to unit mass with the grid's quadrature; the largest clipped value is reported;
   * **MDP-map data** (eq. ``density_evolution``): ``p_n = pi(a'|s') int int p_{n-1} T`` with the
     ground-truth policy and transition recovered on the grid itself (:func:`fpirl.mdp.recover_mdp`);

2. fits psi on each data set (beta fixed, :class:`~fpirl.estimators.identify.PotentialEstimator`), recovers
   Q, pi, T and R (:func:`fpirl.mdp.recover_mdp`);
3. measures (docs/method.md): the paper's L2 error of psi (each function's mean removed) and of
   ``d psi / d s`` on a fine evaluation grid, also relative to the standard deviation of the
   truth; ``KL(p_t || q_t)`` for ``t = 0..steps`` where ``p_t`` is the MDP-map evolution under the
   ground truth and ``q_t`` under the recovered policy and transition, both from the same
   ``p_0``; the per-state policy KL; the relative error of the reward;
4. writes ``result_N{N}.nc`` (fit on FP data) and ``result_N{N}_mdp.nc`` (fit on MDP-map data)
   following the result contract (docs/formats.md), the figures and ``report.md``.

Conventions
-----------
* Gradient error: ``sqrt(mean_x sum_k (d_k psi - d_k psi_GT)^2)`` over the state axes ``k``
  (Euclidean norm of the gradient error, RMS over the evaluation grid); its relative version
  divides by the same norm of ``grad_s psi_GT`` (which has zero mean on a periodic box).
* Ground-truth MDP quantities use ``psi_GT`` with its mean removed, exactly like the fit (the
  reward depends on the additive constant of Q through ``(1 - gamma) c``).
* The initial density of the MDP map is ``spec.initial`` at the grid nodes, scaled to unit mass
  with the grid's quadrature.
"""

from ._data import HermitePotential, boltzmann_initial_density, fp_data, fp_solution, mdp_map_data
from ._evaluate import potential_errors
from ._pipeline import ExperimentData, run_experiment
from ._spec import KL_RATIO_LIMIT, ExperimentSpec, json_default

__all__ = [
    "KL_RATIO_LIMIT",
    "ExperimentData",
    "ExperimentSpec",
    "HermitePotential",
    "boltzmann_initial_density",
    "fp_data",
    "fp_solution",
    "json_default",
    "mdp_map_data",
    "potential_errors",
    "run_experiment",
]
