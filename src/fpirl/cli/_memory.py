"""Process-wide memory settings of the `fpirl` command (never changed by importing the library)."""

from __future__ import annotations

import contextlib
import os
import sys

#: numpy's own switch; where the user set it, their choice stands.
HUGEPAGE_VARIABLE = "NUMPY_MADVISE_HUGEPAGE"


def _hugepage_switch():
    """numpy's ``_set_madvise_hugepage`` (private; ``None`` where this numpy has none)."""
    try:
        from numpy._core import multiarray
    except ImportError:  # numpy < 2
        from numpy.core import multiarray
    return getattr(multiarray, "_set_madvise_hugepage", None)


def _numpy_default() -> bool:
    """The advice numpy sets at import without the variable: on, except on Linux kernels before 4.6."""
    if sys.platform != "linux":
        return True
    try:
        return tuple(int(v) for v in os.uname().release.split(".")[:2]) >= (4, 6)
    except ValueError:
        return False


@contextlib.contextmanager
def small_pages():
    """Context in which numpy allocates without the transparent-huge-page advice (restored on exit).

    numpy asks the kernel for huge pages (``madvise(MADV_HUGEPAGE)``) on every large array. Where the
    kernel defragments on demand for such memory (``/sys/kernel/mm/transparent_hugepage/defrag`` =
    ``madvise``, common), a first touch can wait for compaction. A fit touches about 1.5 GB of fresh
    pages and reads them in long streams (no gain from fewer TLB misses), so the advice only costs.
    Measured on the 2-core test machine (docs/benchmarks.md, issue 20): the 4-D bare fit 3.0-3.4 s ->
    2.3 s after imports, system time 1.3-1.7 s -> 0.4 s; the default fit 12.1 s -> 10.0 s. A user who sets
    ``NUMPY_MADVISE_HUGEPAGE`` keeps numpy's behaviour for that value. Before numpy is imported (the
    console script: ``--help`` and usage errors never import it) the variable is set for numpy to read
    at import, and removed again on exit.
    """
    if HUGEPAGE_VARIABLE in os.environ:
        yield
        return
    if "numpy" not in sys.modules:
        os.environ[HUGEPAGE_VARIABLE] = "0"
        try:
            yield
        finally:
            os.environ.pop(HUGEPAGE_VARIABLE, None)
            switch = _hugepage_switch() if "numpy" in sys.modules else None
            if switch is not None:
                switch(_numpy_default())
        return
    switch = _hugepage_switch()
    if switch is None:
        yield
        return
    before = switch(False)
    try:
        yield
    finally:
        switch(before)


#: glibc ``mallopt`` parameters (malloc.h) and the values :func:`retain_freed_memory` sets.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 2**30
TRIM_THRESHOLD = 2**31 - 1


def retain_freed_memory() -> bool:
    """Keep freed memory in the process for reuse (glibc only); returns whether it was set.

    glibc maps every allocation above its threshold (at most 32 MB) afresh and returns it to the system
    when freed, so each large temporary of a fit is a new set of zeroed pages. Raising the mapping
    threshold to 1 GiB and the trim threshold to 2 GiB lets the next large array reuse the pages of the
    last one. Measured on the 2-core test machine (docs/benchmarks.md, issue 20): 4-D bare fit 3.11 s ->
    2.92 s (page faults 349k -> 216k, peak +50 MB), default fit 10.0 s -> 9.2-9.8 s (peak 1.91 -> 1.94-1.97
    GB). Not reversible (the threshold stops adapting), so only the ``fpirl`` command sets it, for its own
    process, never the library.
    """
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return False
    if not (hasattr(libc, "gnu_get_libc_version") and hasattr(libc, "mallopt")):
        return False
    return bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(libc.mallopt(_M_TRIM_THRESHOLD,
                                                                                     TRIM_THRESHOLD))
