r"""Hermite elements for density snapshots chosen by cross-validation over time (``hermite_elements='auto'``).

The residual rows of eq. vsi_regression (one per test function and time step) are split into
``F = 5`` contiguous blocks of time steps (blocks, not interleaved steps: the noise of one snapshot
enters two neighbouring steps). For every candidate number of elements the normal equations of each
block come from that block's own banded moments (:func:`fpirl.weakform.assembly.block_moments`; the
blocks' moments add up to the fit's, which are then not recomputed); the training system of block
``f`` is the total minus block ``f``, and its held-out residual follows from block ``f``'s sums alone,

.. math::
    \mathrm{RSS}_f(\theta) = \theta^T A_f \theta + 2\theta^T (b_f + \gamma c_f)
        + (g\!\cdot\!g)_f + 2\gamma (g\!\cdot\!c)_f + \gamma^2 (c\!\cdot\!c)_f .

The candidate with the smallest summed held-out ``RSS`` is fitted where it beats the fixed default
(:data:`DEFAULT_ELEMENTS`) by more than one standard error of their paired per-block difference, else
the default (:func:`chosen`). While the rule was chosen (32 simulated sets unlike the repository's, a prototype
without the block-means cap below) it kept most of the plain minimum's gain (geometric-mean psi error 6.1% at 4
elements, 4.1% with the minimum, 4.3% with this rule) and changed fewer fits (17 better, 2 worse by at most 9%,
against 22 and 3). As shipped: 6.2% -> 4.7% on those sets, 7.1% -> 4.1% on 13 sets made afterwards
(docs/benchmarks.md, "Hermite elements for density data").
The training solves are those of the fit (relative ridge, :data:`~fpirl.estimators._ridge.DEFAULT_RIDGE`
for ``ridge='gcv'``; zero-mean ``psi``) with ``gamma = 1/beta`` given, or, with beta estimated, held
at the estimate of the fit at the fixed default (:data:`DEFAULT_ELEMENTS`, noise-corrected, with
block means where that fit takes them): a plain least-squares ``1/beta`` per training system is biased
by the snapshot noise by a different amount at each resolution, which misled the choice
(docs/benchmarks.md, "Hermite elements for density data").

Candidates: :data:`CV_ELEMENTS` by dimension, the same number on every axis, capped per axis at
``max(4, N_i // 3)`` for ``N_i`` FE elements (at least three FE elements per Hermite element, never below
the fixed default: with two, the 3-D fits on 10-16 nodes per axis chose 5 or 6 elements and lost) and at
:data:`MAX_COEF` coefficients. Where beta is estimated from block means of ``c`` nodes per axis (the fit at
the default takes them where the snapshot noise dominates, :mod:`fpirl.estimators._beta_noise`), the candidates
are the same: the final fit takes its own block means, fewer halvings where its Hermite space is too fine for
the coarser grids. Until the fifteenth pass of issue 20 the cap was ``max(4, N_i // (3 c))`` there, because a
Hermite space finer than beta's block grid resolves biased beta with an interval that missed. Now, where the
choice is finer than that (:func:`exceeds_block_cap`), beta's interval reaches the pilot's beta at the default
elements (``beta_pilot_``: the two errors tend to lie on opposite sides, the block grid's low and the coarse
Hermite space's high). On 28 beta-estimated fits through the CLI (benchmarks/bench_beta_cli.py) psi's error fell
on 12 and rose on 2 (geometric mean 5.69% -> 4.35%), beta's median error 5.15% -> 3.95%, coverage 25 of 28 both
(docs/benchmarks.md, issue 20 fifteenth pass). Where the cross-validation does not
apply, ``'auto'`` is the fixed default (:data:`HIGH_DIM_ELEMENTS` on 5 or more axes): four or more axes (each candidate costs a contraction and a
factorisation of a 4-D normal matrix per block), fewer than 3 time steps, given normal equations, the
matrix-free solvers, a Dask scheduler, one quadrature point, fewer than two candidates, or blocks' moments over
:data:`CV_MOMENT_BYTES` (3-D grids above about 55^3 nodes). Cost: on a 40^3 grid with 25 snapshots the fit took
1.0 s at 4 elements and 8.2 s with the cross-validation (peak 1.4 GB); 20^3: 0.14 s and 4.7 s; 2-D 32^2: 0.02 s
and 0.14 s.
"""

from __future__ import annotations

import warnings

import numpy as np
from tqdm.auto import tqdm

from ..core._linalg import solve_spd
from ..core.density import DensitySnapshots
from ..core.hermite import HermiteSpace
from ..weakform.assembly import block_moments, build_tables, contract_moments, summed_moments, time_overlap
from ._ridge import DEFAULT_RIDGE
from ._solvers import ASSEMBLED_MEMORY_LIMIT, assembled_bytes

#: Elements per axis tried by ``hermite_elements='auto'``, by dimension.
CV_ELEMENTS = {1: (3, 4, 5, 6, 8, 10, 12), 2: (3, 4, 5, 6, 8), 3: (3, 4, 5, 6)}
#: Contiguous blocks of time steps (folds); fewer when there are fewer steps.
CV_BLOCKS = 5
#: Largest number of Hermite coefficients of a candidate.
MAX_COEF = 4096
#: Most bytes of the blocks' banded second moments (and their sum) for the cross-validation to apply
#: (``(F + 1) 5^d`` numbers per node: a 3-D grid of up to about 55^3 nodes).
CV_MOMENT_BYTES = 1 << 30
#: Elements per axis where the cross-validation does not apply, or where no candidate beats it clearly
#: (and of the pilot fit for beta).
DEFAULT_ELEMENTS = 4
#: Elements per axis of ``'auto'`` on 5 or more axes (no cross-validation there): ``(2 n)^d`` coefficients grow
#: fastest with ``n`` there, and at 4 elements the matrix-free CG hit its iteration cap on 8-node axes (5-D: 249 s,
#: psi 5.85%, against 18 s and 6.40% at 3; 6-D: 216 s and 7.32% against 18 s and 3.95%); on 10-node axes 4 was
#: a little more accurate in 5-D (4.14% against 4.47%, 75 s against 41 s). docs/benchmarks.md, issue 20 twelfth pass.
HIGH_DIM_ELEMENTS = 3
#: FE elements per Hermite element at least (candidates above ``N_i // FE_PER_ELEMENT`` are capped, never below
#: the default).
FE_PER_ELEMENT = 3


def _element_cap(fe_elements: int, coarsening: int = 1) -> int:
    """Most Hermite elements on an axis of ``fe_elements`` FE elements: :data:`FE_PER_ELEMENT` FE elements of the
    grid coarsened ``coarsening`` times per Hermite element, never below the default (module text)."""
    return max(DEFAULT_ELEMENTS, fe_elements // (FE_PER_ELEMENT * coarsening))


def candidate_elements(grid) -> list[tuple[int, ...]]:
    """The candidates of ``grid`` (distinct, in increasing order), capped as in the module text."""
    out = []
    for n in CV_ELEMENTS.get(grid.ndim, ()):
        el = tuple(min(n, _element_cap(e)) for e in grid.elements)
        if el not in out and HermiteSpace.on_grid(grid, el).n_coef <= MAX_COEF:
            out.append(el)
    return out


def exceeds_block_cap(grid, elements, coarsening: int) -> bool:
    """Whether ``elements`` are finer on some axis than ``max(4, N_i // (3 c))``: finer than the grid of beta's
    block means (``c`` nodes per axis) resolves at three FE elements per Hermite element (module text)."""
    return any(el > _element_cap(n, coarsening) for el, n in zip(elements, grid.elements))


def held_out_rss(parts, hermite: HermiteSpace, ridge: float, gamma: float) -> np.ndarray:
    """Held-out ``RSS_f`` of each block ``f`` (module text) from the blocks' normal equations ``parts``."""
    xtx = parts[0].xtx.copy()
    for p in parts[1:]:
        xtx += p.xtx
    rhs = sum(p.xtg + gamma * p.xtc for p in parts)
    m = hermite.mean_functional().ravel()
    mm = np.outer(m, m)  # the zero-mean term, scaled per block
    out = []
    for part in parts:
        A = np.subtract(xtx, part.xtx)
        tr = float(np.trace(A))
        M = hermite.add_h1_seminorm(A, ridge * tr / hermite.h1_seminorm_trace())
        M += (tr / A.shape[0]) * mm
        b = part.xtg + gamma * part.xtc
        theta = solve_spd(M, -(rhs - b), overwrite=True)
        out.append(theta @ part.xtx @ theta + 2.0 * theta @ b + part.gg + 2.0 * gamma * part.gc + gamma**2 * part.cc)
    return np.array(out)


def chosen(scores: dict, default: tuple) -> tuple:
    """The candidate with the smallest summed held-out RSS where it beats ``default``'s by more than one
    standard error of their paired per-block difference (``sqrt(F)`` times its standard deviation over the
    ``F`` blocks), else ``default``. ``scores``: per candidate, the held-out RSS of each block."""
    best = min(scores, key=lambda el: scores[el].sum())
    diff = scores[default] - scores[best]
    se = float(np.std(diff, ddof=1) * np.sqrt(diff.size)) if diff.size > 1 else 0.0
    return best if diff.sum() > se else default


class HermiteCVMixin:
    """``fit`` with ``hermite_elements='auto'`` for :class:`fpirl.estimators.identify.PotentialEstimator`."""

    def _fit_auto(self, snapshots, normal_equations, moments):
        """Choose the elements (module text), then fit at them; sets ``hermite_cv_`` (None where the
        default was taken) and the ``settings_`` keys ``hermite_selection``, ``hermite_cv_blocks``, ``hermite_cv_candidates``,
        ``hermite_cv_score`` (summed held-out RSS over ``g.g``)."""
        grid = snapshots.grid
        cands = candidate_elements(grid)
        steps = snapshots.n_times - time_overlap(self.time_scheme)  # time rows
        applies = (isinstance(snapshots, DensitySnapshots) and normal_equations is None and self.scheduler is None
                   and self.solver in ("auto", "assembled") and self.quadrature_points >= 2 and len(cands) >= 2
                   and steps >= 3
                   and assembled_bytes(grid, HermiteSpace.on_grid(grid, cands[-1]), snapshots.n_times) <= ASSEMBLED_MEMORY_LIMIT
                   and (CV_BLOCKS + 1) * 5**grid.ndim * grid.size * 8 <= CV_MOMENT_BYTES)
        if not applies:
            return self._fit_default(snapshots, normal_equations, moments)
        data = snapshots.normalized() if self.normalize else snapshots
        n_blocks = min(CV_BLOCKS, steps)
        blocks = block_moments(data, n_blocks, time_scheme=self.time_scheme,
                               quadrature_points=self.quadrature_points, source=snapshots, normalize=self.normalize)
        total = summed_moments(blocks)
        if self.estimate_beta:  # 1/beta of the fit at the fixed default, held over the candidates
            params = {**self.get_params(deep=False), "hermite_elements": DEFAULT_ELEMENTS, "progress": False}
            with warnings.catch_warnings():  # the final fit shows the same warnings once
                warnings.simplefilter("ignore")
                pilot = type(self)(**params).fit(snapshots, _moments=total)
            gamma = 1.0 / pilot.beta_
        else:
            gamma = 1.0 / float(self.beta)
        ridge = DEFAULT_RIDGE if self.ridge is None or isinstance(self.ridge, str) else float(self.ridge)
        scores = {}
        for el in tqdm(cands, desc="Hermite elements (CV)", disable=not self.progress, leave=False):
            hermite = HermiteSpace.on_grid(grid, el)
            tables = build_tables(grid, hermite, self.quadrature_points)
            scores[el] = held_out_rss([contract_moments(m, tables) for m in blocks], hermite, ridge, gamma)
        best = chosen(scores, (DEFAULT_ELEMENTS,) * grid.ndim)
        self.fit(snapshots, _moments=total, _elements=best)
        # beta from block means with a Hermite space finer than their grid resolves: its interval also reaches the
        # pilot's beta (at the default elements), see the module text
        self.beta_pilot_ = (float(pilot.beta_) if self.estimate_beta and pilot.beta_coarsening_ > 1
                            and exceeds_block_cap(grid, best, int(pilot.beta_coarsening_)) else None)
        norm = total.gg if total.gg > 0 else 1.0
        self.hermite_cv_ = {el: float(s.sum()) / norm for el, s in scores.items()}
        self.settings_ = {**self.settings_, "hermite_selection": "cv", "hermite_cv_blocks": n_blocks,
                          "hermite_cv_candidates": ";".join(",".join(map(str, el)) for el in scores),
                          "hermite_cv_score": ";".join(f"{s.sum() / norm:.6g}" for s in scores.values())}
        return self

    def _fit_default(self, snapshots, normal_equations, moments):
        """The fit at :data:`DEFAULT_ELEMENTS` (:data:`HIGH_DIM_ELEMENTS` on 5 or more axes), or fewer where psi would
        have more coefficients than the grid has nodes (at least 2), where the cross-validation does not apply."""
        grid = snapshots.grid
        n = DEFAULT_ELEMENTS if grid.ndim <= 4 else HIGH_DIM_ELEMENTS
        while n > 2 and HermiteSpace.on_grid(grid, (n,) * grid.ndim).n_coef > grid.size:
            n -= 1  # no more coefficients than nodes (walled 9^4 nodes: 4 elements are 10^4 coefficients)
        self.fit(snapshots, normal_equations, _moments=moments, _elements=(n,) * grid.ndim)
        self.hermite_cv_ = self.beta_pilot_ = None
        self.settings_ = {**self.settings_, "hermite_selection": "default"}
        return self
