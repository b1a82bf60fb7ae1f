"""The fit's solver paths: their names, default CG tolerances and the memory estimates behind
``solver='auto'`` (:class:`fpirl.estimators.identify.PotentialEstimator`)."""

from __future__ import annotations

from ..core.grid import Grid
from ..core.hermite import HermiteSpace
from ..weakform.matfree import band_bytes  # noqa: F401  (the exact matrix-free path's memory, re-exported)

#: ``solver='auto'`` uses the matrix-free path when the assembled one would need more memory than this.
ASSEMBLED_MEMORY_LIMIT = 3e9
#: ``solver='auto'`` uses the mixed-flux operator when the exact matrix-free band would need more than this.
BAND_MEMORY_LIMIT = 3e9
SOLVERS = ("auto", "assembled", "matrix-free", "interpolated-flux", "gauss-flux", "mixed-flux")
MATRIX_FREE = ("matrix-free", "interpolated-flux", "gauss-flux", "mixed-flux")
#: The matrix-free paths without the exact operator's ``3^d`` band (no snapshot-noise posterior).
FLUX_SOLVERS = ("interpolated-flux", "gauss-flux", "mixed-flux")
#: Default relative CG residual per matrix-free path (``cg_tol=None``): the exact path reproduces the
#: assembled solution to ~1e-8; the interpolated flux stops where the algebraic error in psi is far
#: below its own O(h^2) quadrature error (docs/method.md, "Interpolated flux").
CG_TOL = {"matrix-free": 1e-10, "interpolated-flux": 1e-6, "gauss-flux": 1e-6, "mixed-flux": 1e-6}


def assembled_bytes(grid: Grid, hermite: HermiteSpace) -> float:
    """Memory estimate of the assembled path: the banded moment and its contraction states
    (``~3 x 5^d`` numbers per node) and a few dense ``n_coef x n_coef`` matrices."""
    return 8.0 * (3 * 5**grid.ndim * grid.size + 4 * float(hermite.n_coef) ** 2)
