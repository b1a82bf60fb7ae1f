"""The experiment definition."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...core._errors import FpirlInputError
from ...core.grid import Grid
from ...core.hermite import HermiteSpace
from ...mdp.recovery import DEFAULT_GAMMA
from ._truth import HermitePotential, boltzmann_initial_density



#: KL(p_t || q_t) acceptance threshold relative to KL(p_T || p_0) (paper-faithful check at the finest N).
KL_RATIO_LIMIT = 0.10


# --------------------------------------------------------------------------------------------
# the experiment definition
# --------------------------------------------------------------------------------------------
@dataclass
class ExperimentSpec:
    """Everything that defines a synthetic experiment with a known potential.

    Attributes
    ----------
    name : str
        Short identifier (file names, cache directory).
    lower, upper, names, roles, boundary
        The joint state-action box, as for :class:`~fpirl.core.grid.Grid`.
    hermite : HermiteSpace
        Space of the ground-truth potential.
    coef : ndarray, shape hermite.shape
        Coefficients of ``psi_GT`` (any additive constant; errors remove the mean).
    beta, dt : float
        Inverse temperature and snapshot spacing (= MDP time step).
    steps : int
        Number of steps; snapshots at ``t_k = k dt``, ``k = 0..steps``.
    initial : callable
        Unnormalised initial joint density ``p_0(points)`` for points of shape ``(..., d)``.
    hermite_elements : int or tuple
        Hermite elements per axis of the inference.
    gamma : float
        Discount factor of the recovered reward.
    solver_points : int or tuple, optional
        Points per axis of the forward FP solver (spectral: collocation points; finite volumes:
        nodes including the walls). Default: :func:`fpirl.forward.default_resolution` of the
        finest grid.
    solver_max_step : float, optional
        Internal step of the spectral solver (default: its CFL choice).
    transition_discretization : {'moment', 'nodal', 'projection'}
        Discretisation of ``T`` on the grids (:class:`fpirl.mdp.GaussianTransition`; default its
        default, the moment-matched kernel, exact in mass and mean and in variance on the nodes).
    eval_elements : int
        Points per axis of the evaluation grid of the L2 errors (uniform grid nodes).
    ridge : float, optional
        Relative Tikhonov weight of the fit (default: the estimator's).
    kl_zoom : (float, float), optional
        Step window of the zoomed KL panel (default ``(0.4 steps, steps)``, the paper's [20, 50]).
    figure_steps : tuple of int, optional
        Steps of the joint-density figure (default ``0, steps/2, steps``).
    title, description, initial_description : str
        Text for the report.
    result_attrs : dict
        Extra attrs of every result file (e.g. Mountain Car's physical box, ``physical_lower`` /
        ``physical_upper``).
    reward : {'soft', 'expected'}
        Reward convention of the recovered MDPs (:func:`fpirl.mdp.recover_mdp`); ``'expected'``
        reproduces the paper's reward figures.
    transfer : bool
        Add the T1/T2 transfer tables of the recovered reward on the finest grid
        (:mod:`fpirl.problems.transfer`) to the report.
    """

    name: str
    lower: Sequence[float]
    upper: Sequence[float]
    names: Sequence[str]
    roles: Sequence[str]
    boundary: str
    hermite: HermiteSpace
    coef: np.ndarray
    beta: float
    dt: float
    steps: int
    initial: Callable[[np.ndarray], np.ndarray]
    hermite_elements: int | tuple = 4
    gamma: float = DEFAULT_GAMMA
    solver_points: int | tuple | None = None
    solver_max_step: float | None = None
    transition_discretization: str = "moment"
    eval_elements: int = 20
    ridge: float | None = None
    kl_zoom: tuple | None = None
    figure_steps: tuple | None = None
    title: str = ""
    description: str = ""
    initial_description: str = ""
    result_attrs: dict = field(default_factory=dict)
    reward: str = "soft"
    transfer: bool = True

    def __post_init__(self):
        self.coef = np.asarray(self.coef, dtype=float).reshape(self.hermite.shape)
        if int(self.steps) != self.steps or self.steps < 1:
            raise FpirlInputError(f"steps must be a positive integer, got {self.steps}")
        self.steps = int(self.steps)
        if not (self.beta > 0 and self.dt > 0):
            raise FpirlInputError("beta and dt must be positive")
        if self.boundary not in ("periodic", "reflecting"):
            raise FpirlInputError(f"boundary must be 'periodic' or 'reflecting', got {self.boundary!r}")
        if self.hermite.periodic != (self.boundary == "periodic"):
            raise FpirlInputError("the ground-truth Hermite space must be periodic iff the box is")

    @classmethod
    def with_boltzmann_start(cls, *, hermite: HermiteSpace, coef, beta: float, names: Sequence[str],
                             roles: Sequence[str], **kwargs) -> "ExperimentSpec":
        """A spec on the box of ``hermite`` (periodic iff it is) that starts from
        ``p_0(s, a) = rho_0(s) pi_GT(a|s)``, uniform ``rho_0`` and the Boltzmann policy of ``psi_GT``
        (:func:`~fpirl.problems.experiment.boltzmann_initial_density`; the paper's start). Other
        fields as keywords."""
        return cls(lower=tuple(ax.lower for ax in hermite.axes), upper=tuple(ax.upper for ax in hermite.axes),
                   names=names, roles=roles, boundary="periodic" if hermite.periodic else "reflecting",
                   hermite=hermite, coef=coef, beta=float(beta),
                   initial=boltzmann_initial_density(hermite, coef, beta, roles),
                   initial_description="p0(s, a) = rho0(s) pi_GT(a|s), rho0 = 1/|S| uniform on the state box",
                   **kwargs)

    # --- derived --------------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.names)

    @property
    def times(self) -> np.ndarray:
        return self.dt * np.arange(self.steps + 1)

    def grid(self, elements) -> Grid:
        return Grid(self.lower, self.upper, elements, self.names, self.roles, self.boundary)

    @property
    def potential(self) -> HermitePotential:
        return HermitePotential(self.hermite, self.coef)

    def data_key(self) -> str:
        """Hash of everything the generated data depend on (the cache key)."""
        h = hashlib.sha256()
        h.update(np.ascontiguousarray(self.coef, dtype=np.float64).tobytes())
        meta = {
            "name": self.name, "lower": list(map(float, self.lower)), "upper": list(map(float, self.upper)),
            "names": list(self.names), "roles": list(self.roles), "boundary": self.boundary,
            "hermite": list(self.hermite.elements), "beta": float(self.beta), "dt": float(self.dt),
            "steps": self.steps, "solver_points": _jsonable(self.solver_points),
            "solver_max_step": self.solver_max_step, "transition": self.transition_discretization,
        }
        h.update(json.dumps(meta, sort_keys=True).encode())
        probe = self.grid(5).mesh()  # the initial density is a callable: hash its values on a probe grid
        h.update(np.ascontiguousarray(np.asarray(self.initial(probe), dtype=np.float64)).tobytes())
        return h.hexdigest()[:16]


def _jsonable(value):
    if value is None:
        return None
    return np.asarray(value).tolist()


def json_default(obj):
    """``json.dumps(default=...)`` for numpy scalars and arrays, paths and anything else (as text)."""
    if isinstance(obj, (np.floating, np.integer)):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    return str(obj)
