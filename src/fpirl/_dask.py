"""Dask clients for :mod:`fpirl.distributed`: checked addresses, a private local cluster, bounded waits.

* :func:`check_scheduler`: ``'local'``, ``tcp://HOST:PORT`` or ``tls://HOST:PORT``; other
  transports and malformed addresses are one-line errors.
* :func:`probe_scheduler`: a ``tcp://`` address must answer like a Dask scheduler within the
  connect timeout (a plain HTTP server does not).
* :func:`dask_client`: the local cluster listens on 127.0.0.1 only; ``tls://`` uses Dask's own
  TLS configuration; Dask's log lines are held back.
* :func:`wait_for` / :func:`gather`: every wait is bounded; a lost cluster is one line
  (:class:`~fpirl.core._errors.FpirlRuntimeError`).

docs/cluster.md states the trust model (pickled tasks: whoever controls the scheduler can run
code in this process; the data set is shipped to the workers).
"""

from __future__ import annotations

import contextlib
import logging
import os

from .core._errors import FpirlInputError, FpirlRuntimeError, reason
import re
import socket
import time
from tqdm.auto import tqdm
import asyncio
import concurrent.futures


def _import_distributed():
    try:
        import distributed
    except ImportError:
        raise FpirlInputError("a Dask scheduler needs dask.distributed: pip install 'fpirl[dask]'") from None
    return distributed


#: Seconds to connect to a scheduler (and for it to say it is one).
CONNECT_TIMEOUT = 20.0
#: Seconds a cluster may have no worker at all while tasks wait before the run gives up.
NO_WORKER_TIMEOUT = 60.0
#: Seconds between checks of a running computation (workers alive, scheduler reachable).
POLL_SECONDS = 1.0
#: Seconds to fetch the finished results from the workers.
GATHER_TIMEOUT = 600.0

_SUPPORTED_SCHEMES = ("tcp", "tls")


def check_scheduler(scheduler):
    """``None``, ``'local'``, ``'tcp://HOST:PORT'``, ``'tls://HOST:PORT'`` or a Client; anything
    else (another scheme such as ``ucx://``, an ``inproc://`` address not served in this process,
    no host, no port, a port that is not a number) is a one-line :class:`FpirlInputError`."""

    if scheduler is None or not isinstance(scheduler, str):
        return scheduler
    if scheduler == "local":
        return scheduler
    m = re.fullmatch(r"([A-Za-z][A-Za-z0-9+.-]*)://(.*)", scheduler.strip())
    if m and m.group(1).lower() == "inproc" and _inproc_listener(scheduler.strip()):
        return scheduler.strip()  # a cluster of threads in this very process (tests, notebooks)
    if m and m.group(1).lower() not in _SUPPORTED_SCHEMES:
        raise FpirlInputError(f"scheduler address {scheduler!r}: the {m.group(1)}:// transport is not supported; "
                              "use 'local', tcp://HOST:PORT or tls://HOST:PORT")
    host_port = m.group(2) if m else None
    hm = re.fullmatch(r"(\[[0-9A-Fa-f:.]+\]|[^\s:/\[\]]+):(\d{1,5})", host_port or "")
    if hm is None or not 0 < int(hm.group(2)) < 65536:
        raise FpirlInputError(f"scheduler must be 'local' or an address like tcp://HOST:PORT (port 1-65535), "
                              f"got {scheduler!r}")
    return scheduler.strip()


def _inproc_listener(address: str) -> bool:
    """Whether ``inproc://...`` names a scheduler listening in this process (only then can it work)."""
    try:
        from distributed.comm.inproc import global_manager

        return global_manager.get_listener_for(address.split("://", 1)[1]) is not None
    except Exception:  # no dask, or a malformed inproc address
        return False


def _tls_security(distributed, address: str):
    """Dask's own TLS settings (``distributed.comm.tls.*`` in the Dask config) for a tls:// address,
    or a one-line error when none are configured."""
    security = distributed.Security()
    if not (security.tls_ca_file and security.tls_client_cert):
        raise FpirlInputError(
            f"{address}: a tls:// scheduler needs Dask's TLS configuration (distributed.comm.tls.ca-file, "
            "distributed.comm.tls.client.cert and .key in the Dask config, e.g. DASK_DISTRIBUTED__COMM__TLS__CA_FILE); "
            "none is set")
    return security


def probe_scheduler(address: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """One-line error unless ``tcp://HOST:PORT`` answers like a Dask scheduler within ``timeout`` s.

    A Dask server speaks first: right after the connection it sends its handshake, a message whose
    first 8 bytes are its length (little-endian). A server that stays silent (an HTTP server waits
    for a request) or whose first bytes are not a plausible length (text such as ``HTTP/1.1``) is
    not a Dask scheduler; Dask's own client would wait forever or try to allocate exabytes there.
    """

    host, port = address.split("://", 1)[1].rsplit(":", 1)
    host = host.strip("[]")
    deadline = time.monotonic() + timeout
    try:
        sock = socket.create_connection((host, int(port)), timeout=timeout)
    except OSError as exc:
        raise FpirlInputError(f"cannot reach the Dask scheduler at {address}: "
                              f"{exc.strerror or type(exc).__name__}") from None
    head = b""
    with sock:
        try:
            while len(head) < 8:
                sock.settimeout(max(0.01, deadline - time.monotonic()))
                part = sock.recv(8 - len(head))
                if not part:
                    break
                head += part
        except OSError:  # timeout or reset
            pass
    if len(head) < 8:
        raise FpirlInputError(f"{address} is not a Dask scheduler (no Dask handshake within {timeout:g} s)")
    size = int.from_bytes(head, "little")
    if not 0 < size < (1 << 26):
        text = head.decode("ascii", "replace")
        kind = " (it answers HTTP)" if text.startswith("HTTP") else ""
        raise FpirlInputError(f"{address} is not a Dask scheduler{kind}")


@contextlib.contextmanager
def _quiet_dask_logs():
    """Dask's own log lines (multi-line, with tracebacks when a scheduler dies) are held back; fpirl
    reports a failure as one line."""
    names = ["distributed", "tornado"] + [n for n in list(logging.root.manager.loggerDict)
                                          if n.startswith(("distributed.", "tornado."))]
    old = {n: logging.getLogger(n).level for n in names}
    for n in names:
        logging.getLogger(n).setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for n, level in old.items():
            logging.getLogger(n).setLevel(level)


@contextlib.contextmanager
def dask_client(scheduler, n_workers: int | None = None, processes: bool = True):
    """A ``distributed.Client`` for ``scheduler`` (module doc); a cluster it started is closed on exit.

    ``'local'`` starts ``n_workers`` single-threaded workers (default: the CPU count, at most 4),
    processes or (``processes=False``) threads; the scheduler, the workers and the dashboard listen
    on 127.0.0.1 only. ``tcp://HOST:PORT`` is first checked to be a Dask scheduler
    (:func:`probe_scheduler`); ``tls://HOST:PORT`` uses Dask's TLS configuration.
    """
    scheduler = check_scheduler(scheduler)
    distributed = _import_distributed()
    if isinstance(scheduler, distributed.Client):
        yield scheduler
        return
    with _quiet_dask_logs():
        if scheduler == "local":
            n = n_workers or min(4, os.cpu_count() or 1)
            loopback = {"host": "127.0.0.1"} if processes else {}  # threads talk in-process
            with distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=processes,
                                          dashboard_address="127.0.0.1:0", silence_logs=logging.CRITICAL,
                                          **loopback) as cluster, \
                    distributed.Client(cluster) as client:
                yield client
            return
        security = None
        if scheduler.startswith("tls://"):
            security = _tls_security(distributed, scheduler)
        elif scheduler.startswith("tcp://"):
            probe_scheduler(scheduler)
        try:
            client = distributed.Client(scheduler, timeout=f"{CONNECT_TIMEOUT:g}s", security=security)
        except (OSError, TimeoutError) as exc:
            raise FpirlInputError(f"cannot reach the Dask scheduler at {scheduler}: {reason(exc)}") from None
        except Exception as exc:  # a TLS or protocol failure during the handshake
            raise FpirlInputError(f"cannot connect to the Dask scheduler at {scheduler}: "
                                  f"{type(exc).__name__}: {reason(exc)}") from None
        with client:
            yield client


def wait_for(client, futures, *, progress: bool = False, desc: str = "tasks"):
    """Wait until ``futures`` are done, checking the cluster every :data:`POLL_SECONDS`.

    Raises :class:`FpirlRuntimeError` (one line) when the scheduler connection is lost or the
    cluster has had no worker for :data:`NO_WORKER_TIMEOUT` seconds; a task that failed raises
    when its result is gathered.
    """


    distributed = _import_distributed()
    futures = list(futures)
    no_workers_since = None
    with tqdm(total=len(futures), desc=desc, disable=not progress, leave=False) as bar:
        while True:
            try:
                distributed.wait(futures, timeout=POLL_SECONDS)
                bar.update(len(futures) - bar.n)
                return
            except TimeoutError:
                pass
            except _cancelled_errors() as exc:
                raise _lost(exc) from None
            bar.update(sum(f.done() for f in futures) - bar.n)
            if client.status not in ("running", "connecting", "newly-created"):
                raise FpirlRuntimeError(f"lost the Dask cluster: the scheduler connection is {client.status}")
            if client.status == "connecting" or not client.scheduler_info().get("workers"):
                no_workers_since = no_workers_since or time.monotonic()
                if time.monotonic() - no_workers_since > NO_WORKER_TIMEOUT:
                    raise FpirlRuntimeError(
                        f"lost the Dask cluster: no worker (or no scheduler) for {NO_WORKER_TIMEOUT:g} s while "
                        f"{sum(not f.done() for f in futures)} tasks wait")
            else:
                no_workers_since = None


def gather(client, futures, *, progress: bool = False, desc: str = "tasks"):
    """``client.gather(futures)`` after :func:`wait_for`, with a timeout on the transfer."""
    wait_for(client, futures, progress=progress, desc=desc)
    try:
        return client.sync(client._gather, futures, callback_timeout=GATHER_TIMEOUT)
    except TimeoutError:
        raise FpirlRuntimeError(f"lost the Dask cluster: results not received within {GATHER_TIMEOUT:g} s") from None
    except _cancelled_errors() as exc:
        raise _lost(exc) from None


def _cancelled_errors() -> tuple:

    out = [asyncio.CancelledError, concurrent.futures.CancelledError]
    try:
        from distributed.client import FuturesCancelledError
        out.append(FuturesCancelledError)
    except ImportError:  # pragma: no cover - older distributed
        pass
    return tuple(out)


def _lost(exc) -> FpirlRuntimeError:

    why = re.search(r"reason: ([\w-]+)", str(exc))
    return FpirlRuntimeError("lost the Dask cluster: its tasks were cancelled"
                             + (f" ({why.group(1)})" if why else "") + "; check the scheduler and re-run")


def replicate(client, futures) -> None:
    """``client.replicate(futures)`` (a copy of the shared data on every worker), bounded like :func:`gather`."""
    try:
        client.sync(client._replicate, list(futures), callback_timeout=GATHER_TIMEOUT)
    except TimeoutError:
        raise FpirlRuntimeError(f"lost the Dask cluster: data not replicated within {GATHER_TIMEOUT:g} s") from None
    except _cancelled_errors() as exc:
        raise _lost(exc) from None
