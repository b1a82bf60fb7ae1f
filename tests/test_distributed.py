"""Map-reduce assembly (fpirl.distributed): chunked, streamed, on Dask, with a worker lost mid-fit.

Budget: about 10 s (thread clusters of two workers, one small process cluster).
"""

import os
import sys

import numpy as np
import pytest

from fpirl import PotentialEstimator
from fpirl.core._errors import FpirlInputError
from fpirl.weakform.assembly import assemble_normal_equations
from fpirl.distributed import (_chunk_task, accumulate_increments, accumulate_normal_equations, add_normal_equations,
                               check_scheduler, dask_client, run_tasks, snapshot_chunks, stream_normal_equations)
from fpirl.weakform.increment_system import assemble_increments
from fpirl.core.hermite import HermiteSpace
from fpirl.io import write_density
from fpirl.problems.synthetic import Problem

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def snapshots():
    return Problem(2, "periodic", steps=24).snapshots(16)


def _rel(a, b):
    return np.abs(a - b).max() / np.abs(b).max()


def _same(ne, ref, tol=1e-12):
    assert ne.n_rows == ref.n_rows
    for key in ("xtx", "xtg", "xtc"):
        assert _rel(getattr(ne, key), getattr(ref, key)) <= tol, key
    for key in ("gg", "gc", "cc"):
        assert getattr(ne, key) == pytest.approx(getattr(ref, key), rel=tol)


def test_snapshot_chunks_count_every_pair_once():
    spans = snapshot_chunks(10, 4)
    assert spans == [(0, 4), (3, 7), (6, 10)]
    pairs = [k for a, b in snapshot_chunks(101, 7) for k in range(a, b - 1)]
    assert pairs == list(range(100))
    with pytest.raises(FpirlInputError):
        snapshot_chunks(10, 1)
    rows = [k for a, b in snapshot_chunks(101, 7, overlap=2) for k in range(a, b - 2)]  # Simpson: windows of 3
    assert rows == list(range(99))
    with pytest.raises(FpirlInputError):
        snapshot_chunks(10, 2, overlap=2)


def test_chunked_assembly_equals_one_piece(snapshots):
    s = snapshots.normalized()
    h = HermiteSpace.on_grid(s.grid, 3)
    _same(accumulate_normal_equations(s, h, chunk=5), assemble_normal_equations(s, h))
    _same(accumulate_normal_equations(s, h, chunk=5, time_scheme="simpson"),
          assemble_normal_equations(s, h, time_scheme="simpson"))


def test_streamed_netcdf_equals_in_memory(snapshots, tmp_path):
    path = tmp_path / "d.nc"
    write_density(path, snapshots)
    ne, head = stream_normal_equations(path, 3, chunk=6)
    h = HermiteSpace.on_grid(snapshots.grid, 3)
    _same(ne, assemble_normal_equations(snapshots.normalized(), h))
    assert head.n_times == 2 and head.grid == snapshots.grid
    # the noise correction is estimated from the snapshots passed with the sums (head: too few), so both without it
    est = PotentialEstimator(hermite_elements=3, beta=4.0, correct_noise=False).fit(head, normal_equations=ne)
    ref = PotentialEstimator(hermite_elements=3, beta=4.0, correct_noise=False).fit(snapshots)
    assert _rel(est.potential_on_grid(), ref.potential_on_grid()) < 1e-10


def test_transition_chunks_equal_one_piece(rng):
    space = HermiteSpace([-1, -1], [1, 1], 3, True)
    pts = rng.uniform(-1, 1, (3000, 2))
    vel = rng.normal(size=(3000, 2))
    ref = assemble_increments(space, pts, vel, [0, 1])[0]
    got = accumulate_increments(space, pts, vel, [0, 1], chunk=700)
    assert _rel(got.A, ref.A) < 1e-12 and _rel(got.b, ref.b) < 1e-12
    assert got.n_rows == ref.n_rows and got.c == pytest.approx(ref.c, rel=1e-12)


def test_local_cluster_two_workers_same_potential(snapshots):
    ref = PotentialEstimator(hermite_elements=3, estimate_beta=True).fit(snapshots)
    with dask_client("local", n_workers=2, processes=False) as client:
        assert len(client.scheduler_info()["workers"]) == 2
        ne = accumulate_normal_equations(snapshots.normalized(), ref.hermite_, chunk=4, scheduler=client)
        api = PotentialEstimator(hermite_elements=3, estimate_beta=True, scheduler=client).fit(snapshots)
    est = PotentialEstimator(hermite_elements=3, estimate_beta=True).fit(snapshots, normal_equations=ne)
    for fit in (est, api):
        assert _rel(fit.potential_on_grid(), ref.potential_on_grid()) < 1e-10
        assert fit.beta_ == pytest.approx(ref.beta_, rel=1e-10)


def test_increments_estimator_on_a_scheduler_same_fit():
    from fpirl.estimators import IncrementsEstimator
    from fpirl.forward.markov import sample_sde
    from _simtracks import table_from_paths

    rng = np.random.default_rng(4)
    paths = sample_sde(lambda x: np.pi * np.sin(np.pi * x), 2.0, rng.uniform(-1, 1, (30, 1)), 0.01, 40, rng,
                       [-1.0], [1.0], "periodic")
    tracks = table_from_paths(paths, 0.01, ["x"], ["state"], [-1.0], [1.0], "periodic")
    ref = IncrementsEstimator(hermite_elements="auto").fit(tracks)
    with dask_client("local", n_workers=2, processes=False) as client:
        fixed = IncrementsEstimator(hermite_elements=4, ridge=1e-4, scheduler=client).fit(tracks)
        auto = IncrementsEstimator(hermite_elements="auto", scheduler=client).fit(tracks)  # CV candidates as tasks
    np.testing.assert_allclose(auto.coef_, ref.coef_, rtol=1e-10, atol=1e-12)
    local = IncrementsEstimator(hermite_elements=4, ridge=1e-4).fit(tracks)
    np.testing.assert_allclose(fixed.coef_, local.coef_, rtol=1e-10, atol=1e-12)


def _die_once_then_assemble(span, values, times, grid, opts, flag_dir):
    """The first task to run kills its worker process (as if the machine died); retried elsewhere."""
    flag = os.path.join(flag_dir, "killed")
    try:
        fd = os.open(flag, os.O_CREAT | os.O_EXCL)
    except FileExistsError:
        return _chunk_task(span, values, times, grid, opts)
    os.close(fd)
    os._exit(1)


def test_worker_killed_mid_fit_is_replaced_and_result_identical(snapshots, tmp_path):
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    s = snapshots.normalized()
    h = HermiteSpace.on_grid(s.grid, 3)
    spans = snapshot_chunks(s.n_times, 4)
    opts = (tuple(h.elements), "midpoint", 3, False)
    with dask_client("local", n_workers=1, processes=True) as client:
        # reference on the same kind of worker (BLAS threads differ from this process: rounding may too)
        ref = run_tasks(_chunk_task, spans, scheduler=client, shared=(s.values, s.times, s.grid, opts))
        before = set(client.scheduler_info()["workers"])
        parts = run_tasks(_die_once_then_assemble, spans, scheduler=client,
                          shared=(s.values, s.times, s.grid, opts, str(tmp_path)))
        client.wait_for_workers(1, timeout=60)
        after = set(client.scheduler_info()["workers"])
    assert os.path.exists(tmp_path / "killed")  # a worker did die mid-fit
    assert after != before  # ... and the nanny replaced it
    for part, expected in zip(parts, ref):
        _same(part, expected, tol=0.0)  # pure tasks: bit-identical
    total = parts[0]
    for p in parts[1:]:
        total = add_normal_equations(total, p)
    _same(total, accumulate_normal_equations(s, h, chunk=4), tol=1e-12)


def test_bad_scheduler_is_one_line_error(monkeypatch):
    with pytest.raises(FpirlInputError, match="tcp://HOST:PORT"):
        check_scheduler("cluster-please")
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if dask were not installed
    with pytest.raises(FpirlInputError, match="pip install 'fpirl\\[dask\\]'"):
        with dask_client("local"):
            pass


def test_cv_candidates_as_tasks_equal_direct_assembly(rng):
    from fpirl.distributed import candidate_fold_systems

    pts = rng.uniform(-1, 1, (2000, 1))
    vel = rng.normal(size=(2000, 1))
    folds = rng.integers(0, 3, 2000)
    with dask_client("local", n_workers=2, processes=False) as client:
        got = candidate_fold_systems([-1.0], [1.0], True, pts, vel, [0], folds, 3, [(2,), (4,), (6,)],
                                     scheduler=client)
    for e, systems in zip([2, 4, 6], got):
        ref = assemble_increments(HermiteSpace([-1.0], [1.0], e, True), pts, vel, [0], folds, 3)
        assert len(systems) == 3
        for s, r in zip(systems, ref):
            np.testing.assert_array_equal(s.A, r.A)


def test_parquet_row_groups_stream_the_same_transitions(tmp_path, rng):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    from fpirl.distributed import stream_increments_parquet
    from fpirl.tracks.reading import read_tracks

    n_tracks, steps, dt = 7, 30, 0.1
    ids = np.repeat(np.arange(n_tracks), steps)
    t = np.tile(dt * np.arange(steps), n_tracks)
    x = np.cumsum(rng.normal(0, 0.1, (n_tracks * steps, 2)), axis=0) % 2 - 1  # sorted by track, then time
    keep = np.ones(ids.size, bool)
    keep[[40, 41, 100]] = False  # missing frames split tracks
    table = pa.table({"id": ids[keep], "t": t[keep], "x": x[keep, 0], "y": x[keep, 1]})
    path = tmp_path / "tracks.parquet"
    pq.write_table(table, path, row_group_size=23)  # groups cut through tracks
    assert pq.ParquetFile(path).num_row_groups > 5
    tracks = read_tracks(path, track="id", time="t", state="x,y", boundary="periodic", bounds=[(-1, 1), (-1, 1)])
    space = HermiteSpace([-1, -1], [1, 1], 3, True)
    i0, i1 = tracks.pairs()
    dx = tracks.values[i1] - tracks.values[i0]
    dx -= 2 * np.round(dx / 2)
    ref = assemble_increments(space, tracks.values[i0], dx / tracks.dt, [0, 1])[0]
    got = stream_increments_parquet(path, track="id", time="t", state=["x", "y"], space=space, dt=tracks.dt)
    assert got.n_transitions == ref.n_transitions == len(i0)
    assert _rel(got.A, ref.A) < 1e-12 and _rel(got.b, ref.b) < 1e-12


# --------------------------------------------------------------------------------------------
# Zarr stores stream like netCDF files; benchmark sweeps as tasks
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def zarr_store(snapshots, tmp_path_factory):
    pytest.importorskip("zarr")
    from fpirl.io import density_dataset

    path = tmp_path_factory.mktemp("zarr") / "d.zarr"
    density_dataset(snapshots).chunk({"time": 5}).to_zarr(path, zarr_format=2)  # time chunks of 5 snapshots
    return path


def test_zarr_streams_like_in_memory_locally_and_on_two_workers(snapshots, zarr_store, tmp_path, capsys):
    from fpirl.cli import main
    from fpirl.io import read_density, read_result
    from fpirl.weakform.matfree import StreamingSnapshots

    h = HermiteSpace.on_grid(snapshots.grid, 3)
    ref_ne = assemble_normal_equations(snapshots.normalized(), h)
    ref = PotentialEstimator(hermite_elements=3, beta=4.0, correct_noise=False).fit(snapshots)  # as above
    local, head = stream_normal_equations(zarr_store, 3, chunk=6)
    with dask_client("local", n_workers=2, processes=False) as client:
        assert len(client.scheduler_info()["workers"]) == 2
        remote, _ = stream_normal_equations(zarr_store, 3, chunk=6, scheduler=client)
    for ne in (local, remote):
        _same(ne, ref_ne, tol=1e-10)
        est = PotentialEstimator(hermite_elements=3, beta=4.0, correct_noise=False).fit(head, normal_equations=ne)
        assert _rel(est.potential_on_grid(), ref.potential_on_grid()) < 1e-10
    stream = StreamingSnapshots.open(zarr_store)
    assert not isinstance(stream.values, np.ndarray) and stream.grid == snapshots.grid
    np.testing.assert_array_equal(stream.read(3, 7), snapshots.values[3:7])
    np.testing.assert_array_equal(read_density(zarr_store).values, snapshots.values)
    out = tmp_path / "r.nc"
    assert main(["fit", str(zarr_store), "-o", str(out), "--beta", "4", "--hermite-elements", "3",
                 "--uncertainty", "none", "--no-progress"]) == 0, capsys.readouterr().err
    res = read_result(out)  # the command corrects for the snapshot noise, streamed like in memory
    cli_ref = PotentialEstimator(hermite_elements=3, beta=4.0).fit(snapshots)
    assert _rel(res["potential"].values, cli_ref.potential_on_grid()) < 1e-10
    assert res.attrs["source_kind"] == "density"


def test_bad_zarr_is_one_line_error(snapshots, tmp_path, capsys):
    pytest.importorskip("zarr")
    from fpirl.cli import main
    from fpirl.io import density_dataset, read_density
    from fpirl.weakform.matfree import StreamingSnapshots

    ds = density_dataset(snapshots)
    cases = {"novar.zarr": ds.rename({"density": "rho"}),
             "nocoord.zarr": ds.drop_vars("time"),
             "notime.zarr": ds.isel(time=0)}
    for name, bad in cases.items():
        bad.to_zarr(tmp_path / name, zarr_format=2)
    (tmp_path / "empty.zarr").mkdir()
    for name in (*cases, "empty.zarr", "missing.zarr"):
        path = tmp_path / name
        for read in (read_density, StreamingSnapshots.open, lambda p: stream_normal_equations(p, 3)):
            with pytest.raises(FpirlInputError) as err:
                read(path)
            assert "\n" not in str(err.value), (name, str(err.value))
        assert main(["fit", str(path), "-o", str(tmp_path / "r.nc"), "--beta", "4", "--no-progress"]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("fpirl"), (name, lines)
    assert not (tmp_path / "r.nc").exists()
    # time stored between the axes (a layout, not an error): read as (time, x0, x1), also lazily
    ds.transpose("x0", "time", "x1").to_zarr(tmp_path / "dims.zarr", zarr_format=2)
    np.testing.assert_array_equal(read_density(tmp_path / "dims.zarr").values, snapshots.values)
    with StreamingSnapshots.open(tmp_path / "dims.zarr") as lazy:
        np.testing.assert_array_equal(lazy.read(1, 3), snapshots.values[1:3])


def _seeded_case(case):
    seed, n = case
    return float(np.random.default_rng(seed).standard_normal(n).sum())


def test_sweep_runs_cases_as_tasks_with_the_serial_results():
    from fpirl.distributed import sweep

    cases = [(seed, n) for seed in range(3) for n in (5, 50)]
    serial = sweep(_seeded_case, cases)
    assert serial == [_seeded_case(c) for c in cases]
    with dask_client("local", n_workers=2, processes=False) as client:
        assert sweep(_seeded_case, cases, scheduler=client) == serial  # same values, same order
    with pytest.raises(FpirlInputError, match="tcp://HOST:PORT"):
        sweep(_seeded_case, cases, scheduler="my-cluster")
