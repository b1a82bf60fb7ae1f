"""Never hang, never accept nonsense silently, keep the cluster private (issue: audit of bad inputs).

Budget: about 15 s (one process cluster of one worker, a few subprocesses for signals).
"""

import http.server
import socket
import threading
import time

import numpy as np
import pytest

from fpirl.core._errors import FpirlInputError, FpirlRuntimeError


# --------------------------------------------------------------------------------------------
# Dask: addresses, non-Dask endpoints, a private local cluster, a lost cluster
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("address, match", [
    ("tcp://", "tcp://HOST:PORT"), (":notaport", "tcp://HOST:PORT"), ("tcp://host:99999", "port 1-65535"),
    ("ucx://host:1234", "ucx:// transport is not supported"),
    ("inproc://192.0.2.2/1/1", "inproc:// transport is not supported"),  # not served in this process
])
def test_malformed_or_unsupported_scheduler_is_refused(address, match):
    from fpirl.distributed import check_scheduler

    with pytest.raises(FpirlInputError, match=match):
        check_scheduler(address)


def test_tls_without_dask_tls_config_is_refused_clearly(monkeypatch):
    pytest.importorskip("distributed")
    from fpirl.distributed import dask_client

    for key in ("CA_FILE", "CLIENT__CERT", "CLIENT__KEY"):
        monkeypatch.delenv(f"DASK_DISTRIBUTED__COMM__TLS__{key}", raising=False)
    with pytest.raises(FpirlInputError, match="needs Dask's TLS configuration"):
        with dask_client("tls://127.0.0.1:1"):
            pass


def _silent_http_server():
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server


def test_plain_http_server_is_not_a_dask_scheduler_within_the_timeout():
    from fpirl.distributed import probe_scheduler

    server = _silent_http_server()  # waits for a request: Dask's client would wait forever
    try:
        t0 = time.monotonic()
        with pytest.raises(FpirlInputError, match="is not a Dask scheduler"):
            probe_scheduler(f"tcp://127.0.0.1:{server.server_port}", timeout=0.5)
        assert time.monotonic() - t0 < 5
    finally:
        server.shutdown()
        server.server_close()


def test_service_answering_http_is_not_a_dask_scheduler_no_memory_error():
    from fpirl.distributed import probe_scheduler

    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(5)

    def answer():
        with listener.accept()[0] as conn:  # speaks first, like some services: 'HTTP/1.1 ...' read as a length
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
            time.sleep(0.2)

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        with pytest.raises(FpirlInputError, match=r"not a Dask scheduler \(it answers HTTP\)"):
            probe_scheduler(f"tcp://127.0.0.1:{listener.getsockname()[1]}", timeout=5)
    finally:
        thread.join(5)
        listener.close()


def test_local_cluster_listens_on_loopback_only():
    pytest.importorskip("distributed")
    psutil = pytest.importorskip("psutil")
    from fpirl.distributed import dask_client, probe_scheduler, run_tasks

    with dask_client("local", n_workers=1, processes=True) as client:
        me = psutil.Process()
        listening = [(p.pid, c.laddr.ip) for p in (me, *me.children(recursive=True))
                     for c in p.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
        probe_scheduler(client.scheduler.address, timeout=10)  # a real scheduler passes the probe
        assert run_tasks(abs, [-1, -2], scheduler=client) == [1, 2]
    worker_pids = {pid for pid, _ in listening if pid != me.pid}
    assert worker_pids, "the worker process listens too"
    assert listening and all(ip in ("127.0.0.1", "::1") for _, ip in listening), listening


def test_cluster_without_workers_is_one_line_not_a_hang(monkeypatch, capfd):
    distributed = pytest.importorskip("distributed")
    import fpirl._dask
    import fpirl.distributed as fd

    monkeypatch.setattr(fpirl._dask, "NO_WORKER_TIMEOUT", 0.5)
    monkeypatch.setattr(fpirl._dask, "POLL_SECONDS", 0.1)
    with distributed.LocalCluster(n_workers=0, processes=False, dashboard_address="127.0.0.1:0") as cluster, \
            distributed.Client(cluster) as client:
        t0 = time.monotonic()
        with pytest.raises(FpirlRuntimeError, match="lost the Dask cluster: no worker"):
            fd.run_tasks(abs, [-1], scheduler=client)
        assert time.monotonic() - t0 < 10
    assert "Traceback" not in capfd.readouterr().err


def test_scheduler_address_on_the_command_line_is_exit_2(tmp_path, capsys, small_density):
    from fpirl.cli import main

    for address in ("tcp://", ":notaport", "ucx://h:1"):
        assert main(["fit", str(small_density), "-o", str(tmp_path / "r.nc"), "--beta", "4", "--no-progress",
                     "--scheduler", address]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("fpirl: error:"), err


# --------------------------------------------------------------------------------------------
# time axes, unbounded loops
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def snapshots():
    from fpirl.problems.synthetic import Problem

    return Problem(1, "periodic", steps=8).snapshots(16)


@pytest.fixture(scope="module")
def small_density(snapshots, tmp_path_factory):
    from fpirl.io import write_density

    return write_density(tmp_path_factory.mktemp("dens") / "d.nc", snapshots)


def test_datetime_time_axis_is_refused_with_how_to_convert(snapshots, tmp_path):
    from fpirl.distributed import stream_header
    from fpirl.io import density_dataset, read_density
    from fpirl.weakform.matfree import StreamingSnapshots

    ds = density_dataset(snapshots)
    ds = ds.assign_coords(time=np.datetime64("2024-01-01") + np.arange(ds.sizes["time"]) * np.timedelta64(1, "D"))
    path = tmp_path / "dates.nc"
    ds.to_netcdf(path)  # CF-encoded 'days since ...': read back as datetime64
    for read in (read_density, StreamingSnapshots.open, stream_header):
        with pytest.raises(FpirlInputError, match=r"holds dates .*numeric model time.*hours since the first"):
            read(path)


def test_spectral_solver_refuses_a_huge_potential_instead_of_running_for_ever():
    from fpirl.forward import SpectralSolver

    solver = SpectralSolver([-1.0], [1.0], 32, lambda x: 1e200 * np.sin(np.pi * x), 4.0)
    t0 = time.monotonic()
    with pytest.raises(FpirlInputError, match="too steep for the spectral solver"):
        list(solver.run(lambda x: 1.0 + 0 * x[..., 0], [0.0, 0.1]))
    assert time.monotonic() - t0 < 5


def test_transition_kernel_of_huge_dt_is_uniform_and_quick():
    from fpirl.core.grid import Grid
    from fpirl.mdp._kernel_1d import _kernel_1d

    for boundary in ("periodic", "reflecting"):
        axis = Grid([-1.0], [1.0], [16], boundary=boundary).axes[0]
        t0 = time.monotonic()
        K = _kernel_1d(axis, np.array([-0.3, 0.5]), 1e5, "moment")  # sigma of dt = 1e9 (nanoseconds as time)
        assert time.monotonic() - t0 < 2
        np.testing.assert_allclose(K, 0.5, rtol=1e-9)  # the uniform density on a box of length 2


# --------------------------------------------------------------------------------------------
# tables
# --------------------------------------------------------------------------------------------
def _read(path, **kw):
    from fpirl.tracks.reading import read_tracks

    return read_tracks(path, track="id", time="t", state="x", **kw)


@pytest.mark.parametrize("engine", ["auto", "pandas"])
def test_empty_track_id_in_csv_is_an_error(tmp_path, engine):
    path = tmp_path / "e.csv"
    path.write_text("id,t,x\n1,0,0.1\n1,1,0.2\n,2,0.3\n2,0,0.1\n2,1,0.2\n")
    with pytest.raises(FpirlInputError, match="'id' \\(track\\) has an? (empty|missing) value at row 3"):
        _read(path, engine=engine)


def test_dates_and_booleans_in_tables_are_errors(tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    (tmp_path / "d.csv").write_text("id,t,x\n1,2020-01-01 00:00:00,0.1\n1,2020-01-01 00:00:01,0.2\n")
    with pytest.raises(FpirlInputError, match="non-numeric value '2020-01-01 00:00:00'.*numeric model time"):
        _read(tmp_path / "d.csv")
    (tmp_path / "b.csv").write_text("id,t,x\n1,0,True\n1,1,False\n2,0,True\n2,1,True\n")
    with pytest.raises(FpirlInputError, match="'x' holds true/false values"):
        _read(tmp_path / "b.csv", engine="pandas")
    t = pd.to_datetime(["2020-01-01", "2020-01-02"] * 2)
    pd.DataFrame({"id": [1, 1, 2, 2], "t": t, "x": [0.1, 0.2, 0.3, 0.4]}).to_parquet(tmp_path / "d.parquet")
    with pytest.raises(FpirlInputError, match="'t' holds dates.*numeric model time"):
        _read(tmp_path / "d.parquet")
    pd.DataFrame({"id": [1, 1, 2, 2], "t": [0.0, 1, 0, 1], "x": [True, False, True, True]}).to_parquet(
        tmp_path / "b.parquet")
    with pytest.raises(FpirlInputError, match="'x' holds true/false values"):
        _read(tmp_path / "b.parquet")


def test_corrupt_parquet_page_is_a_one_line_input_error(tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    path = tmp_path / "c.parquet"
    n = 2000
    pd.DataFrame({"id": np.repeat(np.arange(20), n // 20), "t": np.tile(np.arange(n // 20.0), 20),
                  "x": np.random.default_rng(0).random(n)}).to_parquet(path, compression="zstd")
    raw = bytearray(path.read_bytes())
    raw[200:1200] = bytes(1000)  # zero the data pages, keep the footer
    path.write_bytes(bytes(raw))
    with pytest.raises(FpirlInputError, match="cannot read .* as Parquet") as err:
        _read(path)
    assert "\n" not in str(err.value)


def test_huge_values_without_bounds_say_to_give_bounds(tmp_path):
    path = tmp_path / "h.csv"
    path.write_text("id,t,x\n1,0,-1e308\n1,1,1e308\n2,0,0\n2,1,1\n")
    with pytest.raises(FpirlInputError, match="too wide for a box.*give bounds explicitly"):
        _read(path)


def test_column_name_too_long_for_netcdf_fails_before_the_fit(tmp_path):
    from fpirl.tracks.reading import read_tracks

    name = "x" * 100_000
    path = tmp_path / "long.csv"
    path.write_text(f"id,t,{name}\n1,0,0.1\n1,1,0.2\n")
    with pytest.raises(FpirlInputError, match="column name too long for netCDF"):
        read_tracks(path, track="id", time="t", state=name)


# --------------------------------------------------------------------------------------------
# files: corrupt chunks, odd attrs, full disks, messages
# --------------------------------------------------------------------------------------------
def test_corrupt_zarr_chunk_is_a_one_line_input_error(snapshots, tmp_path):
    pytest.importorskip("zarr")
    from fpirl.distributed import stream_normal_equations
    from fpirl.io import density_dataset, read_density
    from fpirl.weakform.matfree import StreamingSnapshots

    path = tmp_path / "c.zarr"
    density_dataset(snapshots).chunk({"time": 4}).to_zarr(path, consolidated=False)
    chunk = sorted(p for p in (path / "density").rglob("*") if p.is_file() and not p.name.startswith((".", "zarr")))[0]
    raw = chunk.read_bytes()
    chunk.write_bytes(raw[: len(raw) // 2])  # a truncated, undecodable chunk
    for read in (read_density, lambda p: StreamingSnapshots.open(p).read(0, 9), lambda p: stream_normal_equations(p, 3)):
        with pytest.raises(FpirlInputError, match="corrupt or unreadable data") as err:
            read(path)
        assert "\n" not in str(err.value)


@pytest.fixture(scope="module")
def result_file(tmp_path_factory, small_density):
    from fpirl.cli import main

    out = tmp_path_factory.mktemp("res") / "r.nc"
    assert main(["fit", str(small_density), "-o", str(out), "--beta", "4", "--hermite-elements", "3",
                 "--no-progress"]) == 0
    return out


@pytest.mark.parametrize("change, match", [
    ({"beta": "four"}, "attr 'beta' must be a number"),
    ({"hermite_elements": "three"}, "'hermite_elements' is missing or inconsistent"),
    ({"nan": True}, "no finite value"),
])
def test_result_with_text_attrs_or_all_nan_is_exit_2(result_file, tmp_path, capsys, change, match):
    import xarray as xr

    from fpirl.cli import main

    with xr.open_dataset(result_file) as ds:
        ds = ds.load()
    if change.pop("nan", False):
        ds["potential"][:] = np.nan
    ds.attrs.update(change)
    bad = tmp_path / "bad.nc"
    ds.to_netcdf(bad)
    for argv in (["plot", str(bad), "-o", str(tmp_path / "p.png")],
                 ["simulate", str(bad), "--steps", "2", "-o", str(tmp_path / "s.nc"), "--no-progress"]):
        code = main(argv)
        err = capsys.readouterr().err.strip().splitlines()
        if "hermite" in match and argv[0] == "plot":
            continue  # plotting does not need the Hermite elements
        assert code == 2 and len(err) == 1 and match in err[0], (argv[0], err)


def test_disk_full_is_said_in_those_words_and_leaves_no_file(snapshots, tmp_path, monkeypatch):
    import xarray as xr

    from fpirl.io import _files, write_density

    monkeypatch.setattr(_files, "_free_bytes", lambda d: 1000.0)  # refused before writing
    with pytest.raises(FpirlRuntimeError, match="disk full"):
        write_density(tmp_path / "a.nc", snapshots)

    def hdf_error(self, *a, **k):  # what netCDF4 says when the disk fills up during the write
        raise RuntimeError("NetCDF: HDF error")

    monkeypatch.setattr(_files, "_check_free_space", lambda p, n: None)
    monkeypatch.setattr(xr.Dataset, "to_netcdf", hdf_error)
    with pytest.raises(FpirlRuntimeError, match="disk full"):
        write_density(tmp_path / "a.nc", snapshots)
    monkeypatch.setattr(_files, "_free_bytes", lambda d: 1e12)  # plenty of room: a real HDF error stays one
    with pytest.raises(RuntimeError, match="HDF error"):
        write_density(tmp_path / "a.nc", snapshots)
    assert list(tmp_path.iterdir()) == []


def test_memory_error_message_keeps_its_unit(small_density, tmp_path, monkeypatch, capsys):
    import xarray as xr

    from fpirl.cli import main
    from fpirl.core._errors import reason

    msg = "Unable to allocate 298. MiB for an array with shape (39062500,) and data type float64"
    assert reason(MemoryError(msg)) == msg
    assert reason(ValueError("First sentence. Second one.")) == "First sentence"

    def oom(*a, **k):
        raise MemoryError(msg)

    monkeypatch.setattr(xr, "open_dataset", oom)
    assert main(["fit", str(small_density), "-o", str(tmp_path / "r.nc"), "--beta", "4", "--no-progress"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "out of memory" in err[0] and "298. MiB" in err[0], err


def test_netcdf_open_error_says_why_not_just_the_type(tmp_path):
    from fpirl.weakform.matfree import StreamingSnapshots

    path = tmp_path / "junk.nc"
    path.write_bytes(b"this is not a netCDF file at all" * 10)
    with pytest.raises(FpirlInputError) as err:
        StreamingSnapshots.open(path)
    assert "not a netCDF file" in str(err.value) or "ValueError" not in str(err.value), str(err.value)


def test_dollar_signs_in_file_names_do_not_break_compare(snapshots, tmp_path, capsys):
    from fpirl.cli import main
    from fpirl.io import write_density

    data = write_density(tmp_path / "run_$x^$.nc", snapshots)  # not valid mathtext: '^' needs an exponent
    sim = write_density(tmp_path / "sim $a_$.nc", snapshots)
    assert main(["compare", str(data), str(sim), "-o", str(tmp_path / "kl $y$.png")]) == 0, capsys.readouterr().err
    assert (tmp_path / "kl $y$.png").stat().st_size > 0


def test_adequacy_summary_of_pure_diffusion_has_no_nan():
    from fpirl.evaluation.adequacy import HelmholtzCheck

    check = HelmholtzCheck()
    check.fraction_, check.interval_, check.n_tracks_, check.drift_names_ = np.nan, (np.nan, np.nan), 5, ("x",)
    text = check.summary()
    assert "nan" not in text.lower() and "no drift" in text


# --------------------------------------------------------------------------------------------
# signals, open files
# --------------------------------------------------------------------------------------------
def test_sigterm_during_the_write_removes_the_temporary_file(small_density, tmp_path, monkeypatch, capsys):
    import os
    import signal

    import xarray as xr

    from fpirl.cli import main

    real = xr.Dataset.to_netcdf

    def killed_while_writing(self, path, *a, **k):
        real(self, path, *a, **k)  # the temporary file exists now
        os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(xr.Dataset, "to_netcdf", killed_while_writing)
    before = signal.getsignal(signal.SIGTERM)
    code = main(["fit", str(small_density), "-o", str(tmp_path / "r.nc"), "--beta", "4", "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and err == ["fpirl: error: terminated (SIGTERM)"], err
    assert list(tmp_path.iterdir()) == []  # neither the result nor .r.nc.*.tmp
    assert signal.getsignal(signal.SIGTERM) is before  # handlers restored after main(argv)


def test_interrupt_before_the_command_runs_is_one_line(monkeypatch, capsys):
    import fpirl.cli as cli

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)  # Ctrl-C while the options are set up
    assert cli.main(["fit", "x.nc", "-o", "y.nc"]) == 1
    assert capsys.readouterr().err.strip().splitlines() == ["fpirl: error: interrupted"]


def test_signal_swallowed_by_a_destructor_still_fails_the_run(monkeypatch, capsys):
    import os
    import signal

    import fpirl.cli as cli

    class Closes:
        def __del__(self):  # a KeyboardInterrupt raised here is printed and ignored by Python
            os.kill(os.getpid(), signal.SIGINT)

    def command(args):
        Closes()
        return 0

    monkeypatch.setattr(cli, "SUBCOMMANDS", [(n, h, a, command if n == "plot" else r) for n, h, a, r in cli.SUBCOMMANDS])
    assert cli.main(["plot", "r.nc", "-o", "p.png"]) == 1
    assert capsys.readouterr().err.strip().splitlines() == ["fpirl: error: interrupted"]  # no 'Exception ignored'



def test_sigterm_to_a_real_process_is_one_line_and_exit_1(tmp_path):
    import os
    import signal
    import subprocess
    import sys

    code = ("import sys, time, fpirl.cli as c\n"
            "def slow(args):\n    print('ready', flush=True); time.sleep(30); return 0\n"
            "c.SUBCOMMANDS = [(n, h, a, slow if n == 'demo' else r) for n, h, a, r in c.SUBCOMMANDS]\n"
            "sys.exit(c.main())\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-c", code, "demo"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 1 and err.strip().splitlines() == ["fpirl: error: terminated (SIGTERM)"], err


def test_streaming_snapshots_close_their_file(small_density):
    from fpirl.weakform.matfree import StreamingSnapshots

    with StreamingSnapshots.open(small_density) as lazy:
        normed = lazy.normalize()
        assert lazy._close.alive
    assert not lazy._close.alive
    normed.close()  # closing twice is harmless


# --------------------------------------------------------------------------------------------
# streaming compression
# --------------------------------------------------------------------------------------------
def test_incremental_pod_gives_the_streamed_operator_and_gives_up_past_its_budget(monkeypatch):
    from fpirl.core.density import DensitySnapshots
    from fpirl.core.grid import Grid
    from fpirl.core.hermite import HermiteSpace
    from fpirl.weakform import matfree

    rng = np.random.default_rng(3)
    grid = Grid([-1.0, -1.0], [1.0, 1.0], [6, 5], boundary="periodic")
    values = 1.0 + 0.3 * rng.random((40, *grid.shape))  # noisy: the time pairs have full rank (30 nodes)
    s = DensitySnapshots(grid, 0.1 * np.arange(40), values)
    H = HermiteSpace.on_grid(grid, 2)
    c = rng.standard_normal(H.n_coef)
    streamed = matfree.NormalOperator(s, H, chunk_bytes=1, compress=None)  # no compression: the oracle
    pod = matfree.NormalOperator(s, H, chunk_bytes=8 * 6 * 30 * 3, compress=1e-13)  # 3 pairs per chunk
    assert pod.n_modes == grid.size  # rank 30 < 39 pairs, built over 13 chunks
    ref = streamed.matvec(c)
    np.testing.assert_allclose(pod.matvec(c), ref, rtol=1e-10, atol=1e-12 * np.abs(ref).max())
    monkeypatch.setattr(matfree, "_MODE_BYTES", 8 * grid.size * 10)  # room for 10 modes only
    capped = matfree.NormalOperator(s, H, chunk_bytes=8 * 6 * 30 * 3, compress=1e-13)
    assert capped.n_modes is None  # streams every product instead
    np.testing.assert_allclose(capped.matvec(c), ref, rtol=1e-12, atol=1e-12 * np.abs(ref).max())
