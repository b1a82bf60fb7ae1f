"""BLAS threads: one where a computation is many small matrix products."""

from __future__ import annotations

from threadpoolctl import ThreadpoolController

_BLAS: list = []  # the threadpoolctl controller


def one_blas_thread():
    """Context in which BLAS runs on one thread.

    For work made of many small or thin BLAS calls, where each call with BLAS threads pays a thread
    hand-off. Measured on two shared cores (docs/benchmarks.md, issue 20): the one-axis products of sum
    factorisation (``n x n``, ``m x 3n`` matrices against long batches) in the exact matrix-free path
    ran 3-10x and in the flux operators 4-7x slower on two BLAS threads than on one, the normal-matrix
    contraction's chunks likewise, and the L-BFGS-B fit of the per-track noise 6x.
    """
    if not _BLAS:
        _BLAS.append(ThreadpoolController())  # once: it scans the loaded libraries
    return _BLAS[0].limit(limits=1, user_api="blas")

