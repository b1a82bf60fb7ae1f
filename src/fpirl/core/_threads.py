"""Threads: one BLAS thread where a computation is many small matrix products, and a kept helper thread
for work split in two (numpy's loops and BLAS calls release the GIL)."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor, wait

from threadpoolctl import ThreadpoolController

_BLAS: list = []  # the threadpoolctl controller
#: Parts that :func:`threaded` runs at once (this thread and the kept helper threads).
THREADS = min(2, os.cpu_count() or 1)
_POOL: list = []  # the kept executor, made on first use
_POOL_LOCK = threading.Lock()
_LOCAL = threading.local()  # .helper: this thread is one of the kept helpers


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


def _helpers() -> ThreadPoolExecutor:
    """The kept executor of ``THREADS - 1`` helper threads (made once per process)."""
    with _POOL_LOCK:
        if not _POOL:
            _POOL.append(ThreadPoolExecutor(THREADS - 1, thread_name_prefix="fpirl", initializer=_mark_helper))
        return _POOL[0]


def _mark_helper() -> None:
    _LOCAL.helper = True


def _forget_helpers() -> None:
    """In a forked child the helper threads do not exist: make a new executor on first use there."""
    _POOL.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_helpers)


def threaded(work, items) -> None:
    """``work(part)`` on interleaved parts of ``items``: one part in this thread, the others at once on the
    kept helper threads (up to :data:`THREADS` parts).

    The helpers are made once per process: a new thread pool per call cost about 1 ms, which dominated
    small problems that call this thousands of times (Monte Carlo loops, cross-validation refits, the
    matrix-free operators inside CG). Calls from a helper thread run serially (no helper ever waits on
    another, so nested calls cannot deadlock); calls from several threads at once queue their parts on
    the helpers. Returns after every part has finished; the first exception is raised then.
    """
    n = min(THREADS, len(items))
    if n <= 1 or getattr(_LOCAL, "helper", False):
        work(items)
        return
    futures = [_helpers().submit(work, items[t::n]) for t in range(1, n)]
    try:
        work(items[0::n])
    finally:  # the parts write into shared arrays: never return (or raise) while one still runs
        wait(futures)
    for f in futures:
        f.result()


def halves(part, m: int) -> list:
    """``[part(slice(0, m // 2)), part(slice(m // 2, m))]``, the two calls on two threads (:func:`threaded`).

    For work over a stack of ``m`` items whose halves are independent (numpy's stacked loops and BLAS
    calls release the GIL); the caller joins the two outputs (concatenates or sums them).
    """
    h = m // 2
    out = [None, None]

    def work(items):
        for i, sl in items:
            out[i] = part(sl)

    threaded(work, [(0, slice(0, h)), (1, slice(h, m))])
    return out
