r"""The paper's synthetic Grid World experiment (section 5.1), end to end.

Ground truth (fixed)
--------------------
Domain ``[-1, 1]^4``, periodic; state ``(s1, s2)``, action ``(a1, a2)``. The potential
``psi_GT`` is the periodic cubic Hermite interpolant with 4 Hermite elements per axis (values and
all mixed first partials ``d^alpha f``, ``alpha in {0,1}^4``, at the ``4^4`` nodes) of

.. math::

    f(s, a) = \frac{(1 + \cos\pi s_1)(1 + \sin\pi s_2)}{4}
      + \frac12\Big[\frac{1 - \cos\pi(a_1 - m_1(s))}{2} + \frac{1 - \cos\pi(a_2 - m_2(s))}{2}\Big],

    m_1(s) = \tfrac12 \sin(\pi s_1)\,\frac{1 + \sin\pi s_2}{2},\qquad
    m_2(s) = -\tfrac12 \cos(\pi s_2)\,\frac{1 + \cos\pi s_1}{2},

whose range is ``[0, 2]`` (state part in ``[0, 1]``, action part in ``[0, 1]``). The preferred
action ``a = m(s)`` depends on the state. ``beta = 5``, ``dt = 0.02``, snapshots ``t = 0..50``,
initial density ``p0(s, a) = rho0(s) pi_GT(a|s)`` with ``rho0 = 1/|S|`` uniform, discount
``gamma = 0.99`` (:data:`fpirl.mdp.DEFAULT_GAMMA`; the paper states no value). Inference uses the
same Hermite space (4 elements per axis) with ``beta`` fixed.

The mixed partials of ``f`` are computed exactly (to rounding) with a small forward-mode algebra
of multilinear jets (:class:`MultilinearJet`): a jet in ``d`` variables carries the ``2^d``
derivatives ``d^alpha g``, ``alpha in {0,1}^d``, and elementary functions act on it through their
Taylor series (truncated after ``d`` terms, exact because every infinitesimal squares to zero).

The pipeline (data, fits, metrics, figures, report) is the generic
:func:`fpirl.problems.experiment.run_experiment`; :func:`run_gridworld` only fixes the problem.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..core.hermite import HermiteSpace
from ..mdp.recovery import DEFAULT_GAMMA
from .experiment import ExperimentSpec, run_experiment

__all__ = [
    "GRIDWORLD_BETA",
    "GRIDWORLD_DT",
    "GRIDWORLD_ELEMENTS",
    "GRIDWORLD_QUICK_ELEMENTS",
    "GRIDWORLD_STEPS",
    "MultilinearJet",
    "gridworld_f",
    "gridworld_partials",
    "gridworld_spec",
    "run_gridworld",
]

GRIDWORLD_BETA = 5.0
GRIDWORLD_DT = 0.02
GRIDWORLD_STEPS = 50
GRIDWORLD_HERMITE_ELEMENTS = 4
GRIDWORLD_LOWER = (-1.0, -1.0, -1.0, -1.0)
GRIDWORLD_UPPER = (1.0, 1.0, 1.0, 1.0)
GRIDWORLD_NAMES = ("s1", "s2", "a1", "a2")
GRIDWORLD_ROLES = ("state", "state", "action", "action")
#: FE elements per axis of the paper's convergence study.
GRIDWORLD_ELEMENTS = (5, 7, 9, 11, 13, 15)
#: ``--quick``: the pipeline check run in CI.
GRIDWORLD_QUICK_ELEMENTS = (5, 7)
#: Points per axis of the spectral FP solver that makes the data (full run / ``--quick``);
#: chosen by comparing two resolutions on the N = 15 grid (see ``benchmarks/bench_gridworld.py``).
GRIDWORLD_SOLVER_POINTS = 24
GRIDWORLD_QUICK_SOLVER_POINTS = 16


# --------------------------------------------------------------------------------------------
# multilinear jets: exact mixed first partials
# --------------------------------------------------------------------------------------------
class MultilinearJet:
    r"""Truncated Taylor polynomial in ``d`` nilpotent infinitesimals (``eps_i^2 = 0``).

    ``c[S]`` (``S`` a bit mask over the ``d`` variables) holds ``d^S g`` at the base points, the
    mixed partial with one derivative in every variable of ``S``. Products follow the Leibniz rule
    ``(xy)_S = sum_{T subset S} x_T y_{S - T}``; a smooth function ``g`` acts through
    ``g(x0 + n) = sum_{k <= d} g^{(k)}(x0) n^k / k!`` (``n^{d+1} = 0``).

    Parameters
    ----------
    c : ndarray, shape (2^d, ...)
    """

    __array_priority__ = 100

    def __init__(self, c: np.ndarray):
        self.c = np.asarray(c, dtype=float)
        d = self.c.shape[0].bit_length() - 1
        if self.c.shape[0] < 1 or 2**d != self.c.shape[0]:
            raise ValueError(f"a jet needs 2^d components, got {self.c.shape[0]}")
        self.d = d

    @classmethod
    def variable(cls, values, index: int, d: int) -> MultilinearJet:
        """The independent variable ``x_index`` with base values ``values``."""
        values = np.asarray(values, dtype=float)
        c = np.zeros((2**d,) + values.shape)
        c[0] = values
        c[1 << index] = 1.0
        return cls(c)

    # --- algebra -----------------------------------------------------------------------
    def _lift(self, other) -> MultilinearJet:
        if isinstance(other, MultilinearJet):
            return other
        c = np.zeros_like(self.c)
        c[0] = other
        return MultilinearJet(c)

    def __add__(self, other):
        return MultilinearJet(self.c + self._lift(other).c)

    __radd__ = __add__

    def __neg__(self):
        return MultilinearJet(-self.c)

    def __sub__(self, other):
        return MultilinearJet(self.c - self._lift(other).c)

    def __rsub__(self, other):
        return MultilinearJet(self._lift(other).c - self.c)

    def __mul__(self, other):
        if not isinstance(other, MultilinearJet):
            return MultilinearJet(self.c * other)
        x, y = self.c, other.c
        out = np.zeros(np.broadcast_shapes(x.shape, y.shape))
        for S in range(2**self.d):
            T = S
            while True:  # all subsets T of S
                out[S] += x[T] * y[S ^ T]
                if T == 0:
                    break
                T = (T - 1) & S
        return MultilinearJet(out)

    __rmul__ = __mul__

    def __truediv__(self, other):
        if isinstance(other, MultilinearJet):
            raise TypeError("division by a jet is not needed here")
        return MultilinearJet(self.c / other)

    def apply(self, derivatives: Sequence[np.ndarray]) -> MultilinearJet:
        """``g(self)`` given ``derivatives[k] = g^{(k)}(base values)`` for ``k = 0..d``."""
        nil = MultilinearJet(self.c.copy())
        nil.c[0] = 0.0
        out = np.zeros_like(self.c)
        out[0] = derivatives[0]
        power = None
        fact = 1.0
        for k in range(1, self.d + 1):
            power = nil if power is None else power * nil
            fact *= k
            out = out + derivatives[k] * power.c / fact
        return MultilinearJet(out)

    def cos(self) -> MultilinearJet:
        c, s = np.cos(self.c[0]), np.sin(self.c[0])
        cycle = (c, -s, -c, s)
        return self.apply([cycle[k % 4] for k in range(self.d + 1)])

    def sin(self) -> MultilinearJet:
        c, s = np.cos(self.c[0]), np.sin(self.c[0])
        cycle = (s, c, -s, -c)
        return self.apply([cycle[k % 4] for k in range(self.d + 1)])

    def partial(self, alpha: Sequence[int]) -> np.ndarray:
        """``d^alpha g`` for ``alpha in {0,1}^d``."""
        mask = sum(int(a) << i for i, a in enumerate(alpha))
        return self.c[mask]


def _cos(x):
    return x.cos() if isinstance(x, MultilinearJet) else np.cos(x)


def _sin(x):
    return x.sin() if isinstance(x, MultilinearJet) else np.sin(x)


def gridworld_f(s1, s2, a1, a2):
    """The smooth function ``f(s, a)`` of the module docstring (plain arrays or jets)."""
    pi = np.pi
    state = (1 + _cos(pi * s1)) * (1 + _sin(pi * s2)) / 4
    m1 = 0.5 * _sin(pi * s1) * (1 + _sin(pi * s2)) / 2
    m2 = -0.5 * _cos(pi * s2) * (1 + _cos(pi * s1)) / 2
    action = 0.5 * ((1 - _cos(pi * (a1 - m1))) / 2 + (1 - _cos(pi * (a2 - m2))) / 2)
    return state + action


def gridworld_partials(points: np.ndarray, alpha: Sequence[int]) -> np.ndarray:
    """Mixed partial ``d^alpha f`` at points of shape ``(..., 4)``, ``alpha in {0,1}^4`` (exact)."""
    points = np.asarray(points, dtype=float)
    jets = [MultilinearJet.variable(points[..., i], i, 4) for i in range(4)]
    return gridworld_f(*jets).partial(alpha)


# --------------------------------------------------------------------------------------------
# the experiment
# --------------------------------------------------------------------------------------------
def gridworld_truth(hermite_elements: int = GRIDWORLD_HERMITE_ELEMENTS) -> tuple[HermiteSpace, np.ndarray]:
    """``(HermiteSpace, coef)`` of ``psi_GT`` (the interpolant of ``f``; not mean-shifted, range ~[0, 2])."""
    hermite = HermiteSpace(GRIDWORLD_LOWER, GRIDWORLD_UPPER, hermite_elements, periodic=True)
    return hermite, hermite.interpolate(gridworld_partials)


def gridworld_spec(quick: bool = False, solver_points: int | None = None) -> ExperimentSpec:
    """The :class:`ExperimentSpec` of the Grid World experiment.

    Parameters
    ----------
    quick : bool
        Use the cheaper FP solver resolution of ``--quick`` (a pipeline check; the data are then
        less accurate, which only matters for the finer grids).
    solver_points : int, optional
        Override the spectral solver's points per axis.
    """
    hermite, coef = gridworld_truth()
    if solver_points is None:
        solver_points = GRIDWORLD_QUICK_SOLVER_POINTS if quick else GRIDWORLD_SOLVER_POINTS
    return ExperimentSpec.with_boltzmann_start(
        hermite=hermite, coef=coef, beta=GRIDWORLD_BETA, names=GRIDWORLD_NAMES, roles=GRIDWORLD_ROLES,
        name="gridworld", title="Synthetic Grid World (paper section 5.1)", dt=GRIDWORLD_DT, steps=GRIDWORLD_STEPS,
        hermite_elements=GRIDWORLD_HERMITE_ELEMENTS, gamma=DEFAULT_GAMMA, solver_points=solver_points,
        description=(
            "psi_GT = periodic cubic Hermite interpolant (4 elements per axis) of "
            "f(s,a) = (1+cos(pi s1))(1+sin(pi s2))/4 + 0.5[(1-cos(pi(a1-m1)))/2 + (1-cos(pi(a2-m2)))/2], "
            "m1 = 0.5 sin(pi s1)(1+sin(pi s2))/2, m2 = -0.5 cos(pi s2)(1+cos(pi s1))/2"
        ),
    )


def run_gridworld(
    outdir,
    elements: Sequence[int] | None = None,
    quick: bool = False,
    progress: bool = True,
    cache_dir=None,
    solver_points: int | None = None,
    verbose: bool = True,
) -> dict:
    """Run the Grid World experiment (``fpirl benchmark gridworld``).

    Parameters
    ----------
    outdir : path
        Output directory (created): ``result_N{N}.nc`` (fit on FP data), ``result_N{N}_mdp.nc``
        (fit on MDP-map data), ``report.md`` and the figures.
    elements : sequence of int, optional
        FE elements per axis to sweep (default 5, 7, ..., 15; ``quick``: 5, 7).
    quick : bool
        CI pipeline check: N = 5, 7 (unless ``elements`` is given) and a cheaper FP solve. Both
        grids have fewer FE nodes than psi has Hermite coefficients (625 and 2,401 < 4,096): psi is
        underdetermined there and large errors are expected (the paper's own starting point); the
        run checks the pipeline, not accuracy.
    progress : bool
        tqdm progress bars.
    cache_dir : path, optional
        Where generated data are cached (default ``outdir / 'cache'``); a second run reuses them.
    solver_points : int, optional
        Override the spectral solver's resolution.

    Returns
    -------
    dict
        All numbers (see :func:`fpirl.problems.experiment.run_experiment`).
    """
    if elements is None:
        elements = GRIDWORLD_QUICK_ELEMENTS if quick else GRIDWORLD_ELEMENTS
    spec = gridworld_spec(quick=quick, solver_points=solver_points)
    outdir = Path(outdir)
    cache_dir = outdir / "cache" if cache_dir is None else Path(cache_dir)
    return run_experiment(spec, elements, outdir, cache_dir, progress=progress, verbose=verbose,
                          note=QUICK_NOTE if quick else "")


#: What the report of ``--quick`` says about the run.
QUICK_NOTE = (
    "**Quick run** (`--quick`): a check that the pipeline runs end to end (coarser FP data, N = 5 and 7 "
    "by default), not a measurement of accuracy. On these grids psi is underdetermined: the grids have fewer "
    "FE nodes (625 and 2,401) than psi has Hermite coefficients (4,096), so the fit is shaped by the ridge and "
    "errors of several hundred percent there are expected. They are the paper's own starting point, not a "
    "failure. What to check: the run completes, and the errors fall from N = 5 to N = 7. Accurate numbers "
    "need the full sweep (N up to 15; docs/benchmarks.md)."
)
