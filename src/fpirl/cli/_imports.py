"""Process-wide import settings of the `fpirl` command (never changed by importing the library)."""

from __future__ import annotations

import sys

#: Modules kept out of the command's process unless a Dask scheduler is asked for.
DASK_MODULES = ("dask", "distributed")


def keep_dask_out(argv) -> bool:
    """Make ``dask`` unimportable in this process unless ``argv`` asks for a Dask scheduler; returns
    whether it did.

    Where dask is installed, xarray imports it on first use even when no array is a dask array: to
    check each new variable's type (``dask.array``), when a file is opened (``dask``) and, to choose
    the write's locking, its scheduler (``dask.distributed``). On the 2-core test machine that is
    about 0.7 s of a 4-D bare fit's 4 s (docs/benchmarks.md, issue 20, fourteenth pass). The command's
    arrays are never dask arrays; only ``--scheduler`` uses Dask, and then nothing is changed. An
    entry ``None`` in :data:`sys.modules` is the import system's own switch: ``import dask`` raises
    :class:`ImportError` and :func:`importlib.util.find_spec` finds nothing, exactly as without dask,
    which xarray supports. Any option that may abbreviate ``--scheduler`` (``--sc...``) counts as
    asking. Only the console script calls this, for its own process, before xarray is imported
    (xarray reads dask's presence at import); a process that has imported xarray or dask already is
    left as it is.
    """
    if any(name in sys.modules for name in (*DASK_MODULES, "xarray")):  # dask's presence already read
        return False
    if any(str(token).startswith("--sc") for token in argv):
        return False
    for name in DASK_MODULES:
        sys.modules[name] = None
    return True
