"""Core: the grid and its node placement, quadrature, the cubic Hermite basis, density snapshots,
tensor-product helpers and input validation.

Everything else in fpirl builds on these modules; they import nothing from the rest of the
package. The package itself imports nothing, so ``import fpirl`` stays light.
"""
