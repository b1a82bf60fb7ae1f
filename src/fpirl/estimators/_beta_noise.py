r"""Beta from noisy density snapshots: when the corrected fit is noise-dominated, estimate beta on
block-averaged data (issue 20, used by :class:`fpirl.estimators.PotentialEstimator`).

The corrected least squares of :mod:`fpirl.weakform.noise_bias` removes the noise's bias from
``1/beta`` but not its scatter: the noise part of ``c.c`` fluctuates, and when it is large compared
with the Schur complement of ``1/beta`` (the part of ``c.c`` that the potential columns do not
explain, which is what fixes ``1/beta``) the estimate scatters by tens of percent (measured: 2-D,
32^2 nodes, 31 snapshots, 5% noise: standard deviation 3.5 for beta = 4).

**Rule.** Let ``rho = E[c.c]_noise / S_gamma`` (the subtracted noise term of ``c.c`` over the
corrected Schur complement). The relative scatter of the corrected beta grows about like
``0.05 rho`` (measured on the 2-D data below: ``rho`` = 0.03, 0.19, 0.75 at 0.2, 0.5, 1% noise; 3.5%
scatter at 1%), the smoothing error of block means is 1-2% (below), so while ``rho >``
:data:`NOISE_SHARE_MAX`, beta is estimated from the
snapshots averaged over blocks of ``2^d`` nodes (a grid with half the nodes per axis, shifted by
half a node; the noise of the block means stays independent from node to node, with a quarter of
the variance in 2-D, and the stiffness matrix on the coarse grid amplifies it four times less),
with the same estimator (corrected, and coarsened again if still noise-dominated). The potential is
then fitted on the original grid with that beta (exactly the fit with beta given). On noise-free
data ``rho`` is ~0 and nothing changes. Block averaging smooths the signal by ``O(h^2)`` (the
second-order error of the weak form itself); measured on the 2-D data: beta 4.24 instead of 4.33
(4 elements), 4.04 instead of 4.07 (6 elements) without noise, and with 5% noise mean 4.27 /
3.97, standard deviation 0.08 / 0.11 over four seeds.

Bounded (reflecting) grids take every second node instead (block means would not sit on the walls):
the noise is not averaged but amplified four times less; measured on 2-D finite-volume data with
walls (33^2 nodes, beta = 4, 4 seeds): 1% noise 3.95 +- 0.02, 2% 3.99 +- 0.06 against 4.24 and 4.92
for the corrected fit alone (whose remaining bias is second order: the noise of ``X^T c`` inflates
``X^T c . A^-1 X^T c``, which the first-moment correction does not remove). An axis with an odd number
of elements ``n`` goes to ``n // 2`` elements through the linear density at the coarse nodes (spacing a
little over two fine spacings: each fine node feeds one coarse node, so the noise stays independent,
its variance times ``(1 - t)^2 + t^2``, between 1/2 and 1). A coarse grid keeps at least
:data:`MIN_COARSE_NODES` elements and :data:`COARSE_PER_ELEMENT` (1.5) per Hermite element on every
axis. Where the correction leaves ``1/beta`` undetermined (the most noise-dominated case) block means
are tried before the fallback to plain least squares (which overestimated beta 20-fold on such data).
"""

from __future__ import annotations

import warnings

import numpy as np

from ..core._errors import FpirlInputError
from ..core._tensor import apply_along_axes
from ..core.density import DensitySnapshots
from ..core.grid import Grid
from ..weakform.noise_bias import CorrectedNormalEquations

#: Coarsen while the noise term of ``c.c`` exceeds this multiple of the corrected Schur complement
#: (module doc: where the corrected estimate's scatter, about ``0.05 rho`` of beta, passes the
#: ``O(h^2)`` smoothing error of the block means, 1-2%).
NOISE_SHARE_MAX = 0.25
#: Fewest elements per axis of a coarsened grid. The coarse grid's own discretisation error grows as it
#: gets coarser (2-D finite-volume data with walls: beta -1.7% noise-free on 16 elements, -4.5% to -8% on 8
#: at 2-5% noise), but where the noise dominates (rho > NOISE_SHARE_MAX) the fine grid's error is larger:
#: with 16 here, grids of 16-31 elements were never coarsened (2-D 24^2 walls at 5%: +89%); with 8, on 14
#: cases of independent-solver data the median |error| at 5% noise went from 13% to 3.6%
#: (benchmarks/bench_beta_coarse.py, docs/benchmarks.md, issue 20 sixth pass).
MIN_COARSE_NODES = 8
#: Fewest coarse elements per Hermite element. With 2, a fine Hermite space was never coarsened on moderate grids
#: (10 elements on 32^2: beta +57% to +1885% at 5% noise); with 1.5, on 5 cases at 6-10 elements and 0-5% noise
#: (benchmarks/bench_beta_coarse.py --rules 8/2,8/1.5), the median |error| went 8.5% -> 1.2% at 2% noise and
#: 47% -> 3.7% at 5%, unchanged noise-free (docs/benchmarks.md, issue 20 sixth pass).
COARSE_PER_ELEMENT = 1.5


def beta_left_open(ne, gamma, schur) -> bool:
    """Whether the noise-corrected system leaves ``1/beta`` undetermined (non-positive Schur complement or
    ``gamma``): the most noise-dominated case, where block means are tried first (:func:`coarse_beta`)."""
    return isinstance(ne, CorrectedNormalEquations) and not (gamma > 0 and schur > 0)


def warn_left_open(gamma) -> None:
    """The warning of the fallback to plain least squares (nothing else determines ``1/beta``)."""
    warnings.warn(
        "the snapshot noise leaves beta undetermined once its bias is removed (corrected 1/beta = "
        f"{gamma:.3g}); falling back to plain least squares, which overestimates beta on noisy data - "
        "give --beta, or use more or less noisy snapshots", RuntimeWarning, stacklevel=3,
    )


def noise_leaves_beta_open(ne, gamma, schur) -> bool:
    """True (with a warning) when the noise-corrected system does not determine ``1/beta``
    (:func:`beta_left_open`): the fit then falls back to plain least squares."""
    if not beta_left_open(ne, gamma, schur):
        return False
    warn_left_open(gamma)
    return True


def noise_share(ne, schur: float) -> float:
    """``rho = E[c.c]_noise / S_gamma`` (module doc); 0 for uncorrected equations, inf when ``S_gamma <= 0``."""
    if not isinstance(ne, CorrectedNormalEquations) or ne.correction is None:
        return 0.0
    return float(ne.correction["cc"] / schur) if schur > 0 else float("inf")


def _restriction(n: int, periodic: bool) -> tuple[np.ndarray, float]:
    """``(R, shift)``: the 1-D map from an axis of ``n`` elements to ``n // 2`` (module doc) and the coarse
    grid's shift in fine spacings.

    Even ``n``: pair means on the grid shifted by half a node (periodic), every second node (walls). Odd ``n``:
    the linear finite-element density evaluated at the coarse nodes (spacing ``n / (n // 2) > 2`` fine
    spacings, so each fine node enters at most one coarse node: the noise stays independent from node to
    node, its variance times ``(1 - t)^2 + t^2`` at fraction ``t`` between the bracketing nodes, varying
    slowly; walls kept).
    """
    m = n // 2
    nodes = n if periodic else n + 1
    coarse = m if periodic else m + 1
    R = np.zeros((coarse, nodes))
    if n % 2 == 0:
        j = np.arange(coarse)
        if periodic:
            R[j, 2 * j] = R[j, (2 * j + 1) % n] = 0.5
            return R, 0.5
        R[j, 2 * j] = 1.0
        return R, 0.0
    x = np.arange(coarse) * (n / m)  # coarse nodes in fine spacings
    left = np.floor(x).astype(int)
    t = x - left
    R[np.arange(coarse), left % nodes] += 1.0 - t
    R[np.arange(coarse), (left + 1) % nodes if periodic else np.minimum(left + 1, n)] += t
    return R, 0.0


def block_averaged(snapshots: DensitySnapshots, elements) -> DensitySnapshots | None:
    """The snapshots on a grid with half the elements per axis (rounded down; module doc), or None.

    Periodic grids: means over blocks of ``2^d`` nodes, on the grid shifted by half a node. Bounded grids:
    every second node, the walls kept (block means would not sit on the walls; the noise is not averaged,
    only amplified four times less). An axis with an odd element count: the linear density at the coarse
    nodes (:func:`_restriction`). None where a coarse axis would have fewer than :data:`MIN_COARSE_NODES`
    elements or :data:`COARSE_PER_ELEMENT` per Hermite element.
    """
    grid = snapshots.grid
    shape = np.asarray(grid.elements)
    if np.any(shape // 2 < np.maximum(MIN_COARSE_NODES, COARSE_PER_ELEMENT * np.asarray(elements))):
        return None
    maps = [_restriction(int(n), grid.periodic) for n in shape]
    shift = np.array([sh for _, sh in maps]) * grid.spacing
    coarse = Grid(grid.lower + shift, grid.upper + shift, tuple(int(n) for n in shape // 2), grid.names,
                  grid.roles, grid.boundary)
    return DensitySnapshots(coarse, snapshots.times, apply_along_axes(snapshots.values, [R for R, _ in maps]))


def check_block(block) -> None:
    """``beta_block``: None or a power of two (one-line :class:`FpirlInputError` otherwise)."""
    if block is None:
        return
    if not (isinstance(block, (int, np.integer)) and block >= 1 and (int(block) & (int(block) - 1)) == 0):
        raise FpirlInputError(f"beta_block must be a power of two (1, 2, 4, ...), got {block!r}")


def coarse_beta(est, snapshots: DensitySnapshots, elements, share: float):
    """beta from block means for the estimator ``est`` (its settings refitted on :func:`block_averaged`
    snapshots): ``(beta, block)`` with ``block`` the nodes per axis averaged (2, 4, ...), or None
    (no block means: ``est.beta_block`` is 1, or None and ``share <=`` :data:`NOISE_SHARE_MAX`, or the
    grid cannot be coarsened).

    With ``est.beta_block = b > 1`` the snapshots are averaged ``log2 b`` times and refitted without
    further blocks (the basis-error refits of the posterior use the fine fit's block so that their
    differences compare like with like); with None the rule of the module doc (recursive).
    """
    forced = est.beta_block
    if forced == 1 or (forced is None and not share > NOISE_SHARE_MAX):
        return None
    coarse, block = snapshots, 1
    while block < (forced or 2):
        coarse = block_averaged(coarse, elements)
        if coarse is None:
            return None
        block *= 2
    params = {k: getattr(est, k) for k in ("estimate_beta", "ridge", "time_scheme", "quadrature_points",
                                           "normalize", "correct_noise")}
    try:
        with warnings.catch_warnings():  # the block grid is internal: its node count is not the user's grid's
            warnings.filterwarnings("ignore", message="the FE grid has", category=RuntimeWarning)
            fit = type(est)(hermite_elements=tuple(int(e) for e in elements), solver="assembled",
                            beta_block=1 if forced else None, **params).fit(coarse)
    except FpirlInputError:
        return None
    return float(fit.beta_), block * int(fit.beta_coarsening_)


def check_estimated_beta(gamma: float, identifiability: float) -> None:
    """An estimated ``1/beta`` must be positive; warn when the data hardly constrain it."""
    if not gamma > 0:
        raise FpirlInputError(
            f"estimated 1/beta = {gamma:.3g} is not positive: the data do not determine beta "
            "(beta is identified only by transients; data at equilibrium cannot fix it) - give --beta"
        )
    if identifiability < 1e-6:
        warnings.warn(
            "beta is poorly identified by these data (they may start near equilibrium); "
            "consider fixing beta", RuntimeWarning, stacklevel=4,
        )
