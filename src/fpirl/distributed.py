r"""Scale-out: the normal equations as a map-reduce over chunks, on Dask or a local process pool.

The VSI normal equations (eq. vsi_regression; :class:`fpirl.weakform.assembly.NormalEquations`) are sums
over the time steps ``k`` (snapshot pairs ``(p_k, p_{k+1})``), and those of the increments
regression (:class:`fpirl.weakform.increment_system.IncrementSystem`) are sums over transitions:

.. math::
    A = \sum_{\text{chunks } c} A_c,\qquad b = \sum_c b_c,\qquad \dots

so the assembly splits into pure tasks, one per chunk of snapshots (consecutive chunks share
their boundary snapshot, so every pair is counted exactly once) or of transitions, whose
results are added. Because every task is a pure function of its chunk, a task lost with its
worker is simply recomputed (Dask ``retries``) and the sum is the same. Chunks of a netCDF or
Zarr density file are read by the task itself (:func:`stream_normal_equations`), so only one
chunk per worker is ever in memory.

``scheduler`` everywhere accepts ``None`` (run in this process), ``'local'`` (a
``distributed.LocalCluster`` on this machine, closed afterwards), ``'tcp://HOST:PORT'`` (an
existing scheduler) or a ``dask.distributed.Client``. Dask is the optional ``dask`` extra; it is
imported only when a scheduler is used.
"""

from __future__ import annotations

import multiprocessing
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import xarray as xr
from tqdm.auto import tqdm

from ._dask import (CONNECT_TIMEOUT, GATHER_TIMEOUT, NO_WORKER_TIMEOUT, POLL_SECONDS,  # noqa: F401 - public here
                    _import_distributed, check_scheduler, dask_client, gather, probe_scheduler, replicate,
                    wait_for)
from .core._errors import FpirlInputError
from .core.density import DensitySnapshots, check_uniform_times
from .core.hermite import HermiteSpace
from .core.validation import numeric_times
from .io._files import check_readable, load_or_error
from .io._zarr import is_zarr, open_zarr
from .io.netcdf import density_from_dataset
from .weakform.assembly import NormalEquations, assemble_normal_equations, time_overlap
from .weakform.increment_system import assemble_increments, candidate_space

#: Snapshots per chunk of the density map-reduce (the chunks overlap by one snapshot).
DEFAULT_SNAPSHOT_CHUNK = 64
#: Transitions per chunk of the increments map-reduce.
DEFAULT_TRANSITION_CHUNK = 1 << 18
#: Retries of a task whose worker died.
TASK_RETRIES = 3


def _identity(x):
    return x


def run_tasks(fn, items, *, scheduler=None, n_jobs: int | None = None, progress: bool = False,
              desc: str = "tasks", shared=None, reduce=None):
    """``[fn(item, *shared) for item in items]`` as pure parallel tasks, optionally folded by ``reduce``.

    On Dask (``scheduler`` given) with ``retries``: the ``shared`` arguments are sent once as
    tasks of their own and replicated to every worker (so tasks run where they are, and a copy
    lost with its worker is recomputed, never missing); else on a process pool of ``n_jobs``
    workers (``n_jobs > 1``), else in this process. Without ``reduce`` the results come back as a
    list in the order of ``items``; with ``reduce(a, b)`` they are folded left to right in that
    order (on the workers for Dask; as they arrive in this process otherwise), so only the running
    total is kept and the rounding is the same on every path.
    """
    items = list(items)
    shared = tuple(shared or ())
    if scheduler is not None:
        with dask_client(scheduler) as client:
            with warnings.catch_warnings():  # the data travel once, inside the graph, by design
                warnings.filterwarnings("ignore", message="Sending large graph")
                handles = [client.submit(_identity, s, pure=False, retries=TASK_RETRIES) for s in shared]
            if handles and len(client.scheduler_info()["workers"]) > 1:
                wait_for(client, handles)
                replicate(client, handles)
            futures = client.map(fn, items, *[[h] * len(items) for h in handles], pure=True, retries=TASK_RETRIES)
            if reduce is not None:
                total = futures[0]
                for f in futures[1:]:
                    total = client.submit(reduce, total, f, pure=True, retries=TASK_RETRIES)
                futures = [total]
            out = gather(client, futures, progress=progress, desc=desc)
            return out[0] if reduce is not None else out
    if n_jobs is not None and n_jobs > 1 and len(items) > 1:
        # forkserver: no fork of a process that may run threads (BLAS, tqdm, an in-process Dask cluster)
        with ProcessPoolExecutor(max_workers=int(n_jobs), mp_context=multiprocessing.get_context("forkserver")) as pool:
            results = (f.result() for f in [pool.submit(fn, item, *shared) for item in items])
            return _collect(tqdm(results, total=len(items), desc=desc, disable=not progress, leave=False), reduce)
    results = (fn(item, *shared) for item in items)
    return _collect(tqdm(results, total=len(items), desc=desc, disable=not progress, leave=False), reduce)


def sweep(fn, cases, *, scheduler=None, n_jobs: int | None = None, progress: bool = False, desc: str = "cases"):
    """``[fn(case) for case in cases]`` with one task per case: benchmark sweeps, seeded replicates.

    Parameters
    ----------
    fn : callable
        A pure function of one case (its result must depend on the case only, e.g. on a seed it
        carries), importable or picklable by ``cloudpickle`` (a script's own functions are).
    cases : iterable
        The independent cases (seeds, sizes, parameter tuples).
    scheduler : None, 'local', 'tcp://HOST:PORT' or dask.distributed.Client
        Where the tasks run (module doc); ``None`` runs them here, one after the other (or on a
        process pool of ``n_jobs`` workers).
    n_jobs : int, optional
    progress : bool
    desc : str
        Label of the progress bar.

    Returns
    -------
    list
        The results in the order of ``cases``: the same as the serial loop for the same cases.
    """
    return run_tasks(fn, list(cases), scheduler=check_scheduler(scheduler), n_jobs=n_jobs, progress=progress,
                     desc=desc)


def _collect(results, reduce):
    if reduce is None:
        return list(results)
    total = None
    for r in results:
        total = r if total is None else reduce(total, r)
    return total


# --------------------------------------------------------------------------------------------
# density snapshots
# --------------------------------------------------------------------------------------------
def add_normal_equations(a, b):
    """Sum of two :class:`~fpirl.weakform.assembly.NormalEquations` (the reduce step)."""
    return NormalEquations(a.xtx + b.xtx, a.xtg + b.xtg, a.xtc + b.xtc, a.gg + b.gg, a.gc + b.gc, a.cc + b.cc,
                           a.n_rows + b.n_rows)


def snapshot_chunks(n_times: int, chunk: int = DEFAULT_SNAPSHOT_CHUNK, overlap: int = 1) -> list[tuple[int, int]]:
    """``(start, stop)`` snapshot ranges of at most ``chunk`` snapshots, consecutive ranges sharing ``overlap``
    boundary snapshots (:func:`fpirl.weakform.assembly.time_overlap` of the time scheme: every residual row once)."""
    if int(chunk) != chunk or chunk < overlap + 1:
        raise FpirlInputError(f"chunk must be an integer >= {overlap + 1} snapshots, got {chunk!r}")
    step = int(chunk) - overlap
    return [(s, min(s + chunk, n_times)) for s in range(0, n_times - overlap, step)]


def _assemble_values(values, times, grid, elements, time_scheme, quadrature_points, normalize):
    snaps = DensitySnapshots(grid, times, values)
    if normalize:
        snaps = snaps.normalized()
    return assemble_normal_equations(snaps, HermiteSpace.on_grid(grid, elements), time_scheme=time_scheme,
                                     quadrature_points=quadrature_points)


def _chunk_task(span, values, times, grid, opts):
    a, b = span
    return _assemble_values(values[a:b], times[a:b], grid, *opts)


def accumulate_normal_equations(snapshots, hermite, *, scheduler=None, chunk: int = DEFAULT_SNAPSHOT_CHUNK,
                                time_scheme="midpoint", quadrature_points=3, normalize=False, n_jobs=None,
                                progress=False):
    """:func:`fpirl.weakform.assembly.assemble_normal_equations` as a map-reduce over snapshot chunks.

    Equal to the one-piece assembly up to rounding (the sums are regrouped).
    """
    spans = snapshot_chunks(snapshots.n_times, chunk, time_overlap(time_scheme))
    opts = (tuple(hermite.elements), time_scheme, quadrature_points, normalize)
    return run_tasks(_chunk_task, spans, scheduler=scheduler, n_jobs=n_jobs, progress=progress,
                     desc="assemble chunks", shared=(snapshots.values, snapshots.times, snapshots.grid, opts),
                     reduce=add_normal_equations)


def _open_lazy(path):
    path = Path(path)
    if is_zarr(path):
        return open_zarr(path)
    check_readable(path)
    try:
        return xr.open_dataset(path, cache=False)
    except Exception as exc:  # netCDF4 / zarr raise many types for unreadable files
        raise FpirlInputError(f"cannot read {str(path)!r}: {' '.join(str(exc).split())[:200]}") from None


def _stream_task(span, path, opts):
    with _open_lazy(path) as ds:
        part = density_from_dataset(load_or_error(ds.isel(time=slice(*span)), path))  # reads only this chunk
    return _assemble_values(part.values, part.times, part.grid, *opts)


def stream_header(path):
    """``(DensitySnapshots of the first two snapshots, number of snapshots)`` of a density file, read lazily."""
    with _open_lazy(path) as ds:
        if "time" not in ds.dims:
            raise FpirlInputError(f"{str(path)!r} has no 'time' dimension")
        n = int(ds.sizes["time"])
        head = density_from_dataset(load_or_error(ds.isel(time=slice(0, 2)), path))
        times = numeric_times(ds["time"].values, f"the 'time' coordinate of {str(path)!r}")
    if n < 2:
        raise FpirlInputError(f"{str(path)!r}: the 'time' coordinate must hold at least 2 snapshots")
    try:
        check_uniform_times(times)
    except FpirlInputError as exc:
        raise FpirlInputError(f"{str(path)!r}: {exc}") from None
    return head, n


def stream_normal_equations(path, hermite_elements, *, scheduler=None, chunk: int = DEFAULT_SNAPSHOT_CHUNK,
                            time_scheme="midpoint", quadrature_points=3, normalize=True, n_jobs=None, progress=False):
    """Normal equations of a density file (netCDF, or Zarr with the ``zarr`` package) read chunk by chunk.

    Each task opens the file and reads its own snapshot range, so memory holds one chunk per
    worker (plus the ``n_coef^2`` normal matrix), whatever the number of snapshots. Returns
    ``(normal_equations, head)`` with ``head`` the first two snapshots (the grid and ``dt``) to
    pass to :meth:`fpirl.estimators.identify.PotentialEstimator.fit` together with the normal equations.
    """
    head, n = stream_header(path)
    opts = (tuple(np.broadcast_to(hermite_elements, (head.grid.ndim,))), time_scheme, quadrature_points, normalize)
    total = run_tasks(_stream_task, snapshot_chunks(n, chunk, time_overlap(time_scheme)), scheduler=scheduler,
                      n_jobs=n_jobs, progress=progress, desc="stream chunks", shared=(str(path), opts),
                      reduce=add_normal_equations)
    return total, head


# --------------------------------------------------------------------------------------------
# transitions (increments regression)
# --------------------------------------------------------------------------------------------
def _increments_task(span, space, points, velocity, drift_axes, row_weights):
    a, b = span
    rw = None if row_weights is None else row_weights[a:b]
    return assemble_increments(space, points[a:b], velocity[a:b], drift_axes, row_weights=rw)[0]


def accumulate_increments(space, points, velocity, drift_axes, row_weights=None, *, scheduler=None,
                          chunk: int = DEFAULT_TRANSITION_CHUNK, n_jobs=None, progress=False):
    """:func:`fpirl.weakform.increment_system.assemble_increments` (one group) as a map-reduce over transition chunks."""
    n = points.shape[0]
    spans = [(s, min(s + int(chunk), n)) for s in range(0, n, int(chunk))] or [(0, 0)]
    return run_tasks(_increments_task, spans, scheduler=scheduler, n_jobs=n_jobs, progress=progress,
                     desc="assemble transitions", shared=(space, points, velocity, list(drift_axes), row_weights),
                     reduce=_add_systems)


def _add_systems(a, b):
    return a + b


def _fold_task(elements, lower, upper, periodic, points, velocity, drift_axes, fold_of_row, n_folds, row_weights):
    space, kept = candidate_space(lower, upper, periodic, elements)  # axes with 0 elements left out
    return assemble_increments(space, points[:, kept], velocity, [kept.index(a) for a in drift_axes], fold_of_row,
                               n_folds, row_weights)


def candidate_fold_systems(lower, upper, periodic, points, velocity, drift_axes, fold_of_row, n_folds, candidates,
                           row_weights=None, *, scheduler=None, n_jobs=None, progress=False) -> list:
    """Per candidate resolution (one tuple of elements per axis), the per-fold normal equations of the
    increments regression (the cross-validation of :mod:`fpirl.estimators.selection`), one task per
    candidate."""
    return run_tasks(_fold_task, list(candidates), scheduler=scheduler, n_jobs=n_jobs, progress=progress,
                     desc="CV candidates", shared=(lower, upper, periodic, points, velocity, list(drift_axes),
                                                   fold_of_row, n_folds, row_weights))


# --------------------------------------------------------------------------------------------
# track tables from Parquet row groups
# --------------------------------------------------------------------------------------------
def _parquet_rows(path, group: int, columns):
    import pyarrow.parquet as pq

    table = pq.ParquetFile(path).read_row_group(group, columns=columns)
    return [table.column(c).to_numpy(zero_copy_only=False) for c in columns]


def _parquet_group_task(group, path, track, time, state, space, drift_axes, dt, tol):
    """Increments system of the transitions that end in row group ``group`` (the last row of the
    previous group is read too, so a track crossing the boundary loses nothing)."""
    cols = [track, time, *state]
    ids, t, *xs = _parquet_rows(path, group, cols)
    if group > 0:
        pid, pt, *pxs = _parquet_rows(path, group - 1, cols)
        ids = np.concatenate([pid[-1:], ids])
        t = np.concatenate([pt[-1:], np.asarray(t, dtype=float)])
        xs = [np.concatenate([p[-1:], np.asarray(x, dtype=float)]) for p, x in zip(pxs, xs)]
    t = np.asarray(t, dtype=float)
    x = np.stack([np.asarray(c, dtype=float) for c in xs], axis=1)
    same = ids[1:] == ids[:-1]
    runs = ids[np.concatenate([[True], ~same])]
    if len(np.unique(runs)) != len(runs):
        raise FpirlInputError(f"{str(path)!r}, row group {group}: rows of a track are not contiguous; streaming "
                              "needs the table sorted by track, then time")
    if np.any(same & (np.diff(t) <= 0)):
        raise FpirlInputError(f"{str(path)!r}, row group {group}: time does not increase within a track")
    lower = np.array([ax.lower for ax in space.axes])
    upper = np.array([ax.upper for ax in space.axes])
    inside = np.all((x >= lower) & (x <= upper), axis=1) & np.all(np.isfinite(x), axis=1)
    ok = same & (np.abs(np.diff(t) - dt) <= tol * dt) & inside[1:] & inside[:-1]
    i = np.flatnonzero(ok)
    dx = x[i + 1] - x[i]
    if space.periodic:
        dx -= (upper - lower) * np.round(dx / (upper - lower))
    return assemble_increments(space, x[i], dx[:, drift_axes] / dt, drift_axes)[0]


def stream_increments_parquet(path, *, track: str, time: str, state, space, dt: float, drift_axes=None,
                              time_tolerance: float = 0.01, scheduler=None, n_jobs=None, progress=False):
    r"""Normal equations of the increments regression, streamed from the row groups of a Parquet table.

    For tables larger than memory: one task per row group reads only that group's columns (and
    the last row of the previous group), forms the transitions ``x_k -> x_{k+1}`` between
    consecutive rows of one track that are ``dt`` apart (within ``time_tolerance``) and inside the
    box of ``space``, and assembles :func:`fpirl.weakform.increment_system.assemble_increments`; the
    systems are added. The table must be sorted by track, then time (checked within each group).
    This is the same set of transitions as :meth:`fpirl.tracks.TrackTable.pairs` of the table read
    with :func:`fpirl.tracks.reading.read_tracks` with the box of ``space`` and state columns only (no
    velocity actions). Solve with :func:`fpirl.estimators.selection.solve_increments`.

    Returns
    -------
    IncrementSystem
    """
    try:
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - the test extra installs pyarrow
        raise FpirlInputError("reading Parquet files needs pyarrow: pip install 'fpirl[parquet]'") from None
    state = [state] if isinstance(state, str) else list(state)
    if len(state) != space.ndim:
        raise FpirlInputError(f"{len(state)} state columns for a {space.ndim}-D Hermite space")
    drift_axes = list(range(space.ndim)) if drift_axes is None else list(drift_axes)
    if not (np.isfinite(dt) and dt > 0):
        raise FpirlInputError(f"dt must be positive, got {dt}")
    n_groups = pq.ParquetFile(path).num_row_groups
    return run_tasks(_parquet_group_task, range(n_groups), scheduler=scheduler, n_jobs=n_jobs, progress=progress,
                     desc="row groups", shared=(str(path), track, time, state, space, drift_axes, float(dt),
                                                float(time_tolerance)), reduce=_add_systems)
