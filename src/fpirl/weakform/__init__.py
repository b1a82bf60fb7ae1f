"""The weak form of the Fokker-Planck equation (eq. weak_form) and its least-squares system.

* :mod:`~fpirl.weakform.assembly`: the assembled normal equations (exact band operator);
* :mod:`~fpirl.weakform.matfree`: the exact matrix-free operator and conjugate gradients;
* :mod:`~fpirl.weakform.matfree_flux`: the matrix-free operator with the flux interpolated on
  the grid;
* :mod:`~fpirl.weakform.matfree_gauss`: the flux integrated at Gauss points (exact integrand);
* :mod:`~fpirl.weakform.matfree_mixed`: Gauss points along each derivative axis only and a corrected
  nodal rule across it (the 6-D default);
* private helpers: reference-element tables, Krylov solver, separable preconditioner.
"""
