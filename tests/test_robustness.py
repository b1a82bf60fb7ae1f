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
    ("ucx://host:1234", "ucx:// transport is not supported"), ("inproc://x", "inproc:// transport is not supported"),
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
    import fpirl.distributed as fd

    monkeypatch.setattr(fd, "NO_WORKER_TIMEOUT", 0.5)
    monkeypatch.setattr(fd, "POLL_SECONDS", 0.1)
    with distributed.LocalCluster(n_workers=0, processes=False, dashboard_address="127.0.0.1:0") as cluster, \
            distributed.Client(cluster) as client:
        t0 = time.monotonic()
        with pytest.raises(FpirlRuntimeError, match="lost the Dask cluster: no worker"):
            fd.run_tasks(abs, [-1], scheduler=client)
        assert time.monotonic() - t0 < 10
    assert "Traceback" not in capfd.readouterr().err
