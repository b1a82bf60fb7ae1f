"""Work threads and BLAS threads (fpirl.core._threads)."""

import threading

from threadpoolctl import threadpool_info

from fpirl.core._threads import on_all_cores, one_blas_thread, usable_cores


def test_on_all_cores_runs_every_item_once_on_at_most_one_thread_per_core(monkeypatch):
    from fpirl.core import _threads

    for cores in (1, 3, 64):
        monkeypatch.setattr(_threads, "usable_cores", lambda: cores)
        seen, threads, lock = [], set(), threading.Lock()

        def work(part):
            with lock:
                seen.extend(part)
                threads.add(threading.get_ident())

        items = list(range(10))
        on_all_cores(work, items)
        assert sorted(seen) == items
        assert 1 <= len(threads) <= min(cores, len(items))
    assert usable_cores() >= 1


def test_one_blas_thread_limits_blas_inside_only():
    blas = [i for i in threadpool_info() if i["user_api"] == "blas"]
    before = [i["num_threads"] for i in blas]
    with one_blas_thread():
        assert all(i["num_threads"] == 1 for i in threadpool_info() if i["user_api"] == "blas")
    assert [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"] == before
