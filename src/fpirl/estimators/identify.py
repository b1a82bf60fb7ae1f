r"""Estimators of the Fokker-Planck potential by variational system identification (paper section 4).

The estimator solves eq. vsi_regression,

.. math::
    \min_{\theta,\ \gamma}\ \sum_k \big\| g_k + \Xi_k \theta + \gamma c_k \big\|_2^2
    + \lambda\, \theta^T P \theta
    \quad\text{subject to}\quad \frac{1}{|\Omega|}\int_\Omega \psi_\theta = 0,

with ``gamma = 1/beta`` either fixed or a further unknown, ``P`` the Gram matrix of
``int |grad psi|^2`` (Tikhonov smoothing that only matters where the data carry no mass) and
``lambda = ridge * trace(A) / trace(P)``. The constant mode of psi is in the null space of the
residual; the zero-mean constraint removes it (added as a rank-one term ``mu m m^T``, which keeps
the system symmetric positive definite and is exact because the right-hand side is orthogonal
to the constant mode).
"""

from __future__ import annotations

import warnings

import numpy as np

from ..weakform import matfree
from ..weakform._device import DEVICES
from ..core._errors import FpirlInputError
from ..mdp._fitted import FittedPotentialMixin
from ..core._linalg import solve_spd
from ..core.validation import check_elements, finite_number, positive
from .._version import __version__ as _version
from ..weakform.assembly import (DataMoments, NormalEquations, TIME_SCHEMES, assemble_normal_equations,  # noqa: F401
                                 reusable_moments)
from ..weakform.noise_bias import correct_normal_equations, snapshot_noise_variance
from .hermite_cv import HermiteCVMixin
from ._beta_noise import beta_left_open, check_block, check_estimated_beta, coarse_beta, noise_share, warn_left_open
from ._fit_matfree import fit_matrix_free
from ..core.density import DensitySnapshots
from ..core.grid import Grid
from ..core.hermite import HermiteSpace
from ..distributed import accumulate_normal_equations
from ._ridge import DEFAULT_RIDGE, GCV_GRID, gcv_ridge  # noqa: F401  (public names of this module)
from ._solvers import (  # noqa: F401  (public names of this module)
    ASSEMBLED_MEMORY_LIMIT, BAND_MEMORY_LIMIT, CG_TOL, FLUX_SOLVERS, MATRIX_FREE, SOLVERS, assembled_bytes, band_bytes,
)


class PotentialEstimator(HermiteCVMixin, FittedPotentialMixin):
    """Identify ``psi`` (and optionally ``beta``) from density snapshots (eq. vsi_regression).

    Parameters
    ----------
    hermite_elements : int, tuple of int or 'auto'
        Cubic Hermite elements per axis for psi (``n_h,i``, coarser than the FE grid); ``'auto'``
        chooses them by cross-validation over blocks of time steps (:mod:`fpirl.estimators.hermite_cv`).
    beta : float, optional
        Inverse temperature, when fixed (the paper's experiments).
    estimate_beta : bool
        Estimate ``1/beta`` jointly as one more linear unknown; it must come out positive.
    ridge : float or 'gcv', optional
        Relative Tikhonov weight on ``int |grad psi|^2`` (default :data:`DEFAULT_RIDGE`), or
        ``'gcv'`` to choose it by generalized cross-validation (:func:`gcv_ridge`; one
        generalized eigendecomposition of the normal matrix, ~15 s at 4,096 coefficients):
        advisable for noisy data or grids with fewer nodes than coefficients.
    time_scheme : {'midpoint', 'explicit', 'simpson'}
        Midpoint (second order in dt, default), the paper's literal explicit form, or Simpson's rule over two
        steps (fourth order; for coarse snapshot spacing, where the midpoint rule biases beta and psi;
        :func:`fpirl.weakform.assembly.time_pairs`).
    quadrature_points : int
        Gauss-Legendre points per cell and axis; 3 is exact.
    normalize : bool
        Scale every snapshot to unit mass before fitting (FP dynamics conserve mass).
    progress : bool
        Show a tqdm progress bar.
    scheduler : None, 'local', 'tcp://HOST:PORT' or dask.distributed.Client
        Assemble the normal equations as a map-reduce over snapshot chunks on Dask
        (:func:`fpirl.distributed.accumulate_normal_equations`; same result to rounding).
    solver : {'auto', 'assembled', 'matrix-free', 'interpolated-flux', 'gauss-flux', 'mixed-flux'}
        ``'assembled'``: the normal matrix by sum factorisation (:mod:`fpirl.weakform.assembly`), Cholesky;
        ``'matrix-free'``: only its products (:mod:`fpirl.weakform.matfree`), preconditioned CG, streaming
        over the snapshots (5-D); ``'interpolated-flux'``: the flux ``p grad psi`` interpolated in the FE
        space (:mod:`fpirl.weakform.matfree_flux`, ``O(d)`` numbers per node instead of ``3^d``; 6-D);
        ``'gauss-flux'``: the flux at composite Gauss points by sum factorisation
        (:mod:`fpirl.weakform.matfree_gauss`, exact, ~``2^d`` times the work); ``'mixed-flux'``: 2 Gauss
        points along the derivative axis, a corrected nodal rule across it (:mod:`fpirl.weakform.matfree_mixed`,
        the exact psi to ~0.1% at ~twice the interpolated cost). ``'auto'`` (default): assembled unless
        :func:`assembled_bytes` exceeds :data:`ASSEMBLED_MEMORY_LIMIT` (or the data stream), then the
        exact matrix-free path unless :func:`band_bytes` exceeds :data:`BAND_MEMORY_LIMIT`, then the mixed flux.
    cg_tol : float or None
        Relative residual at which the matrix-free CG solves stop; None (default): :data:`CG_TOL`
        of the path (1e-10 exact, 1e-6 the flux quadratures).
    correct_noise : bool
        Default True: remove the expected snapshot-noise terms from the sums ``X^T g``, ``X^T c``, ``g.g``,
        ``g.c``, ``c.c`` (corrected least squares, :mod:`fpirl.weakform.noise_bias`; ~0 on smooth data),
        with beta estimated or given: the noise of the averaged snapshots in the potential columns ``X``
        correlates with its own image in the diffusion column ``c = K bar p`` (amplified like ``1/h^2``),
        which biases ``psi`` even when beta is given (walled 2-D histograms of 200,000 SDE paths, 4 Hermite
        elements, beta given: psi 15.9% off without, 3.8% with; docs/benchmarks.md, issue 20 thirteenth pass).
        With beta given, not where the noise is under :data:`fpirl.weakform.noise_bias.GIVEN_MIN_SHARE` of
        ``c.c`` (there its effect on psi is negligible either way, and it is costly in 6-D).
    beta_block : int or None
        With ``estimate_beta``: nodes per axis averaged into one for beta (1, 2, 4, ...); None
        (default): 1 unless the corrected fit is noise-dominated (:mod:`fpirl.estimators._beta_noise`).
    device : {'cpu', 'cuda'}
        Where the products of ``solver='mixed-flux'`` run: ``'cuda'`` batches all POD modes on a GPU
        through CuPy (optional; :mod:`fpirl.weakform._device`), same psi to the CG tolerance; the
        path must resolve to the mixed flux, else a one-line error.

    Attributes
    ----------
    coef_ : ndarray, shape ``hermite_.shape``
        Hermite coefficients of the zero-mean potential.
    beta_ : float
        Inverse temperature (given or estimated).
    hermite_ : HermiteSpace
    grid_ : Grid
    penalty_ : float
        The absolute Tikhonov weight ``lambda = ridge * tr(A) / tr(P)`` used (``ridge`` is relative).
    normal_equations_ : NormalEquations or None
        The assembled sufficient statistics ``X^T X``, ``X^T g``, ``X^T c``, ``g.g``, ``g.c``, ``c.c``
        and the row count (:class:`fpirl.weakform.assembly.NormalEquations`), e.g. to refit with another ridge
        (``fit(..., normal_equations=...)``) or for the posterior of :mod:`fpirl.uncertainty`; None
        on the matrix-free path.
    gcv_ : dict or None
        With ``ridge='gcv'``: the searched relative ridges, their GCV scores and effective dofs.
    residual_ : float
        Relative residual ``||R|| / ||g + c / beta||`` of the fit.
    beta_identifiability_ : float or None
        With ``estimate_beta``: Schur complement of ``1/beta`` relative to ``c.c``; near 0 means the
        data hardly constrain beta (e.g. data at equilibrium).
    solver_ : str
        The path used, ``'assembled'``, ``'matrix-free'``, ``'interpolated-flux'``, ``'gauss-flux'`` or
        ``'mixed-flux'``.
    cg_info_ : dict or None
        Matrix-free path: CG iterations per solve, final relative residuals, products with ``A``
        (``matvecs``) and the wall time of the solve (``seconds``).
    noise_correction_ : dict or None
        With ``correct_noise``: the expected noise terms subtracted from ``X^T g``,
        ``X^T c``, ``g.g``, ``g.c``, ``c.c`` (``normal_equations_`` keeps the raw sums), and on the assembled
        path with beta estimated ``gamma_shift`` (how far that moved ``1/beta``); None otherwise (too few snapshots
        for the noise estimate, beta given and the noise negligible) or after the fallback.
    beta_coarsening_ : int
        Nodes per axis averaged into one for beta (1: none; :mod:`fpirl.estimators._beta_noise`).
    settings_ : dict
    hermite_cv_ : dict or None
        With ``hermite_elements='auto'``: ``{elements: summed held-out RSS / g.g}`` per candidate; None
        where the fixed default was taken (or elements were given).
    beta_pilot_ : float or None
        With ``hermite_elements='auto'`` and beta from block means: the pilot fit's beta (at the default
        elements) where the chosen elements are finer than the block grid resolves; beta's interval reaches it
        (:mod:`fpirl.estimators.hermite_cv`). None otherwise.
    """

    hermite_cv_ = None
    beta_pilot_ = None

    def __init__(
        self,
        *,
        hermite_elements=4,
        beta=None,
        estimate_beta=False,
        ridge=None,
        time_scheme="midpoint",
        quadrature_points=3,
        normalize=True,
        progress=False,
        solver="auto",
        cg_tol=None,
        scheduler=None,
        correct_noise=True,
        beta_block=None,
        device="cpu",
    ):
        self.hermite_elements = hermite_elements
        self.beta = beta
        self.estimate_beta = estimate_beta
        self.ridge = ridge
        self.time_scheme = time_scheme
        self.quadrature_points = quadrature_points
        self.normalize = normalize
        self.progress = progress
        self.scheduler = scheduler
        self.solver = solver
        self.cg_tol = cg_tol
        self.correct_noise = correct_noise
        self.beta_block = beta_block
        self.device = device

    # ------------------------------------------------------------------------------------
    def _check_params(self, grid: Grid) -> dict:
        """Every parameter checked before any work (one-line :class:`FpirlInputError` each).

        Returns the validated ``beta`` (None when estimated), ``ridge`` (a number or ``'gcv'``) and
        ``elements`` (one per axis of ``grid``).
        """
        if self.estimate_beta and self.beta is not None:
            raise FpirlInputError("give either a fixed beta or estimate_beta=True, not both")
        beta = None
        if not self.estimate_beta:
            if self.beta is None:
                raise FpirlInputError("beta is required (or set estimate_beta=True)")
            beta = positive(self.beta, "beta")
        if isinstance(self.ridge, str):
            if self.ridge != "gcv":
                raise FpirlInputError(f"ridge must be a non-negative number or 'gcv', got {self.ridge!r}")
            ridge = "gcv"
        else:
            ridge = DEFAULT_RIDGE if self.ridge is None else finite_number(self.ridge, "ridge")
            if not ridge >= 0:
                raise FpirlInputError(f"ridge must be non-negative, got {self.ridge}")
        elements = None if isinstance(self.hermite_elements, str) and self.hermite_elements == "auto" else \
            check_elements(self.hermite_elements, grid.ndim, minimum=2 if grid.periodic else 1, axis_names=grid.names,
                           auto=True)
        if self.time_scheme not in TIME_SCHEMES:
            raise FpirlInputError(f"time_scheme must be one of {', '.join(TIME_SCHEMES)}, got {self.time_scheme!r}")
        if not (isinstance(self.quadrature_points, (int, np.integer)) and 1 <= self.quadrature_points <= 10):
            raise FpirlInputError(f"quadrature_points must be an integer 1..10, got {self.quadrature_points!r}")
        if self.solver not in SOLVERS:
            raise FpirlInputError(f"solver must be one of {', '.join(SOLVERS)}, got {self.solver!r}")
        if self.cg_tol is not None:
            positive(self.cg_tol, "cg_tol")
        check_block(self.beta_block)
        if self.device not in DEVICES:
            raise FpirlInputError(f"device must be one of {', '.join(DEVICES)}, got {self.device!r}")
        return {"beta": beta, "ridge": ridge, "elements": elements}

    def fit(self, snapshots: DensitySnapshots, normal_equations: NormalEquations | None = None, *,
            _moments: DataMoments | None = None, _elements=None) -> "PotentialEstimator":
        """Fit psi (and beta) to density snapshots.

        Parameters
        ----------
        snapshots : DensitySnapshots or fpirl.weakform.matfree.StreamingSnapshots
            Streamed snapshots (read chunk by chunk) take the matrix-free path.
        normal_equations : NormalEquations, optional
            Re-use an assembled system (e.g. when sweeping ``ridge``); must come from the same data.
        _moments : DataMoments, optional
            Internal: the data moments of an assembled fit of the same ``snapshots`` object (its
            ``_moments``), re-used when they match the settings (refits at other Hermite resolutions;
            :func:`fpirl.weakform.assembly.data_moments`). The assembled path keeps its moments in
            ``_moments`` (not copied, not pickled).
        _elements : tuple of int, optional
            Internal: the elements per axis that ``hermite_elements='auto'`` chose.
        """
        streaming = isinstance(snapshots, matfree.StreamingSnapshots)
        if not (isinstance(snapshots, DensitySnapshots) or streaming):
            raise FpirlInputError("fit expects DensitySnapshots (or StreamingSnapshots)")
        grid = snapshots.grid
        params = self._check_params(grid)
        if _elements is not None:
            params["elements"] = tuple(_elements)
        elif params["elements"] is None:  # 'auto' (fpirl.estimators.hermite_cv)
            return self._fit_auto(snapshots, normal_equations, _moments)
        if self.time_scheme == "simpson" and snapshots.n_times < 3 and normal_equations is None:
            raise FpirlInputError(f"time_scheme 'simpson' needs at least 3 snapshots, got {snapshots.n_times}")
        ridge = params["ridge"]
        hermite = HermiteSpace.on_grid(grid, params["elements"])
        if grid.size < hermite.n_coef:
            warnings.warn(
                f"the FE grid has {grid.size} nodes but psi has {hermite.n_coef} Hermite coefficients: "
                "psi is underdetermined and shaped by the ridge; refine the grid or use fewer Hermite elements",
                RuntimeWarning, stacklevel=2,
            )
        solver = self.solver
        if solver == "auto":
            big = assembled_bytes(grid, hermite, snapshots.n_times) > ASSEMBLED_MEMORY_LIMIT
            solver = "matrix-free" if (streaming or big) and normal_equations is None else "assembled"
            if solver == "matrix-free" and band_bytes(grid) > BAND_MEMORY_LIMIT:
                solver = "mixed-flux"
        if self.device != "cpu" and solver != "mixed-flux":
            raise FpirlInputError(f"device={self.device!r} runs only the mixed-flux products; this fit takes "
                                  f"solver={solver!r} (use solver='mixed-flux' or device='cpu')")
        if solver in MATRIX_FREE:
            if normal_equations is not None:
                raise FpirlInputError("normal_equations can only be re-used by the assembled solver")
            if ridge == "gcv":
                raise FpirlInputError("ridge='gcv' needs the assembled normal matrix; use solver='assembled' "
                                      "or a numeric ridge")
            return fit_matrix_free(self, snapshots, hermite, ridge, params["beta"], solver)
        if streaming:
            raise FpirlInputError("streamed snapshots need solver='matrix-free' (or 'auto')")
        given = snapshots
        if self.normalize:
            snapshots = snapshots.normalized()
        ne = normal_equations
        if ne is None and self.scheduler is not None:
            ne = accumulate_normal_equations(snapshots, hermite, scheduler=self.scheduler, time_scheme=self.time_scheme,
                                             quadrature_points=self.quadrature_points, progress=self.progress)
        moments = None
        if ne is None:
            moments = reusable_moments(_moments, given, snapshots, normalize=self.normalize,
                                       time_scheme=self.time_scheme, quadrature_points=self.quadrature_points)
            ne = assemble_normal_equations(
                snapshots, hermite, time_scheme=self.time_scheme,
                quadrature_points=self.quadrature_points, progress=self.progress, moments=moments,
            )
        raw = ne
        if self.correct_noise:
            if moments is not None and moments.noise_variance is False:  # kept for the refits, like the moments
                moments.noise_variance = snapshot_noise_variance(snapshots)
            ne = correct_normal_equations(ne, snapshots, hermite, time_scheme=self.time_scheme,
                                          quadrature_points=self.quadrature_points,
                                          variance=False if moments is None else moments.noise_variance,
                                          beta_given=not self.estimate_beta)
        A = ne.xtx
        scale = np.trace(A) / A.shape[0]
        if not scale > 0:
            raise FpirlInputError("the data carry no information on psi (all-zero density?)")
        m = hermite.mean_functional().ravel()
        ratio = np.trace(A) / hermite.h1_seminorm_trace()

        def solve(lam, fixed=None):
            """``theta, gamma, schur``; one Cholesky factorisation of ``M = A + lam P + scale m m^T``
            serves both right-hand sides of the bordered system (Schur complement for ``1/beta``);
            ``fixed``: ``1/beta`` given (from the block-averaged data)."""
            # A + lam P + scale m m^T in one pass by row blocks (P never formed: fresh memory is costly)
            M = hermite.add_h1_seminorm(np.empty_like(A), lam, src=A, rank_one=(scale, m))
            if not self.estimate_beta or fixed is not None:
                gamma = 1.0 / params["beta"] if fixed is None else fixed
                keep = {}
                theta = solve_spd(M, -(ne.xtg + gamma * ne.xtc), keep, overwrite=True)  # M: this call's own
                self._factor = (float(lam), keep.get("factor"))  # the posterior's K (beta given): reused there
                return theta, gamma, None
            y1, y2 = solve_spd(M, np.stack([ne.xtg, ne.xtc], axis=1), overwrite=True).T
            schur = ne.cc - float(ne.xtc @ y2)
            gamma = (float(ne.xtc @ y1) - ne.gc) / schur if schur != 0 else float("nan")
            return -(y1 + gamma * y2), float(gamma), schur

        gcv = None
        if ridge == "gcv":
            # with beta estimated, 1/beta is held at its default-ridge estimate while choosing the ridge
            gamma0 = solve(DEFAULT_RIDGE * ratio)[1] if self.estimate_beta else 1.0 / params["beta"]
            hh0 = ne.gg + 2 * gamma0 * ne.gc + gamma0**2 * ne.cc
            ridge, gcv = gcv_ridge(A, hermite.h1_seminorm_matrix(), m, ne.xtg + gamma0 * ne.xtc, hh0, ne.n_rows, ratio)
        lam = ridge * ratio
        theta, gamma, schur = solve(lam)
        coarsening, correction = 1, getattr(ne, "correction", None)
        share = noise_share(ne, schur) if self.estimate_beta else 0.0
        if self.estimate_beta and beta_left_open(ne, gamma, schur):  # block means first, else plain LS
            opened, share = gamma, float("inf")
            ne, correction = raw, None  # solve() reads the enclosing ne
            theta, gamma, schur = solve(lam)
        else:
            opened = None
        psi_corrected = correction is not None
        identifiability = None
        if self.estimate_beta:
            identifiability = float(schur / ne.cc) if ne.cc > 0 else 0.0
            got = coarse_beta(self, snapshots, params["elements"], share)
            if got is None and opened is not None:
                warn_left_open(opened)
            if got is not None:  # beta from block means (noise-dominated, or beta_block given)
                # psi from the raw sums: with the corrected ones psi was worse on 6 of 20 such sets, better on 1
                # (the block means' beta errs high, the raw sums' bias of psi partly offsets it; docs/benchmarks.md)
                coarsening, ne, psi_corrected = got[1], raw, False
                theta, gamma = solve(lam, 1.0 / got[0])[:2]
            elif correction is not None:  # how far the correction moved 1/beta (read by the posterior)
                ne, corrected = raw, ne
                correction = {**correction, "gamma_shift": gamma - solve(lam)[1]}
                ne = corrected
            check_estimated_beta(gamma, identifiability)
        coef = hermite.remove_mean(theta)
        b = raw.xtg + gamma * raw.xtc
        hh = raw.gg + 2 * gamma * raw.gc + gamma**2 * raw.cc
        flat = coef.ravel()
        r2 = max(flat @ A @ flat + 2 * flat @ b + hh, 0.0)
        # learned attributes only now, after every check passed
        self.gcv_ = gcv
        self.beta_identifiability_ = identifiability
        self.coef_ = coef
        self.beta_ = 1.0 / gamma
        self.hermite_ = hermite
        self.grid_ = grid
        self.penalty_ = float(lam)
        self.residual_ = float(np.sqrt(r2 / hh)) if hh > 0 else 0.0
        self.normal_equations_ = raw  # the data's sums (the posteriors rebuild the same from the data)
        self._moments = moments  # for refits of the same data at other Hermite resolutions (uncertainty._basis)
        self.noise_correction_ = correction
        self.beta_coarsening_ = coarsening
        self.solver_ = "assembled"
        self.cg_info_ = None
        self.settings_ = self._settings(hermite, grid, ridge, "gcv" if gcv is not None else "fixed", lam, "assembled",
                                        noise_corrected=int(psi_corrected),
                                        **({"beta_coarsening": coarsening} if self.estimate_beta else {}))
        return self

    def __getstate__(self) -> dict:
        """Pickled without the data moments (``_moments``: large, and tied to one snapshots object)."""
        state = self.__dict__.copy()
        state.pop("_moments", None)
        return state

    def _settings(self, hermite, grid, ridge, selection, lam, solver, **more) -> dict:
        """``settings_``: the solver settings written into the result (attrs ``solver_<key>``)."""
        return {
            "estimator": "density",
            "hermite_elements": ",".join(map(str, hermite.elements)),
            "fe_elements": ",".join(map(str, grid.elements)),
            "ridge_relative": float(ridge),
            "ridge_selection": selection,
            "ridge_absolute": float(lam),
            "time_scheme": self.time_scheme,
            "quadrature_points": int(self.quadrature_points),
            "beta_estimated": int(bool(self.estimate_beta)),
            "beta_noise_corrected": int(bool(self.estimate_beta and self.correct_noise)),
            "normalize": int(bool(self.normalize)),
            "solver": solver,
            **more,
            "fpirl_version": _version,
        }
