"""BLAS threads: one where a computation is many small matrix products; work threads over the usable cores."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

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



def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform tells, else ``os.cpu_count``)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # no sched_getaffinity (macOS, Windows)
        return max(1, os.cpu_count() or 1)


def on_all_cores(work, items) -> None:
    """``work(part)`` on interleaved parts of ``items`` in one thread per usable core (at most one per item).

    For loops whose items run numpy/BLAS code that releases the GIL, each with BLAS on one thread
    (:func:`one_blas_thread`): the flux operators' products over POD modes. Each part keeps its own
    accumulators, so memory grows with the thread count.
    """
    n = min(usable_cores(), len(items))
    if n <= 1:
        work(items)
        return
    with ThreadPoolExecutor(n) as pool:
        list(pool.map(work, [items[t::n] for t in range(n)]))
