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


def assembled_bytes(grid: Grid, hermite: HermiteSpace, n_times: int) -> float:
    """Memory estimate of the assembled fit: per node, the banded moments and their contraction states
    (``1.2 x 5^d`` numbers), the fields of the snapshots (``10`` per snapshot) and ``40`` more; three dense
    ``n_coef x n_coef`` matrices.

    Fitted to the peak resident memory of the fit measured above the process's own (float64, 2-D to 5-D grids of
    16,384 to 331,776 nodes, 10 to 60 snapshots: 3-D 64^3 with 10/20/60 snapshots 0.65/0.70/1.33 GB, estimated
    0.68/0.80/1.64; 4-D 24^4, 20 snapshots, 2.54 GB, estimated 2.67; 5-D 8^5 1.85 GB, estimated 2.50; 5-D 10^5
    3.84 GB, estimated 4.64; docs/benchmarks.md, issue 20 fourteenth pass). The earlier ``3 x 5^d`` per node and no
    snapshot term overestimated 4-D and 5-D by a factor of two (the 5-D 8^5 fit went matrix-free: 40 s against 7.5
    s assembled, with more memory) and underestimated 3-D grids with many snapshots.
    """
    per_node = 1.2 * 5**grid.ndim + 10.0 * n_times + 40.0
    return 8.0 * (per_node * grid.size + 3 * float(hermite.n_coef) ** 2)
