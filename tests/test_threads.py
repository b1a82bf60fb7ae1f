"""fpirl.core._threads.threaded: every item once, errors raised after all parts ended, nested and concurrent
calls neither deadlock nor lose work."""

import threading

import numpy as np
import pytest

from fpirl.core import _threads
from fpirl.core._threads import threaded


def test_every_item_is_worked_on_once_and_the_helper_is_kept():
    out = np.zeros(101)

    def work(part):
        for i in part:
            out[i] += i

    threaded(work, list(range(101)))
    np.testing.assert_array_equal(out, np.arange(101))
    if _threads.THREADS > 1:
        first = _threads._helpers()
        threaded(work, [0, 1])
        assert _threads._helpers() is first  # one executor for the process


def test_an_error_in_either_part_is_raised_after_both_parts_ended():
    if _threads.THREADS < 2:
        pytest.skip("one core: no helper thread")
    done = []

    def work(part):
        if 1 in part:  # the helper's part (items[1::2])
            raise ValueError("helper failed")
        threading.Event().wait(0.05)
        done.append(tuple(part))

    with pytest.raises(ValueError, match="helper failed"):
        threaded(work, [0, 1, 2, 3])
    assert done == [(0, 2)]  # the caller's part had finished


def test_nested_and_concurrent_calls_finish():
    results = []
    lock = threading.Lock()

    def inner(part):
        with lock:
            results.extend(part)

    def outer(part):
        for k in part:  # a call from the helper thread runs serially there
            threaded(inner, [10 * k + j for j in range(4)])

    callers = [threading.Thread(target=threaded, args=(outer, list(range(5 * c, 5 * c + 5)))) for c in range(3)]
    for t in callers:
        t.start()
    for t in callers:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in callers)
    assert sorted(results) == sorted(10 * k + j for k in range(15) for j in range(4))


@pytest.mark.parametrize("m", [0, 1, 7, 10])
def test_halves_covers_the_stack_in_order(m):
    """``halves``: the two halves of ``range(m)`` (the first ``m // 2`` items, then the rest), each once, their
    outputs in that order; from a helper thread (serial) the same."""
    seen = []

    def part(sl):
        seen.append(sl)
        return np.arange(m)[sl] ** 2

    out = _threads.halves(part, m)
    assert sorted((s.start, s.stop) for s in seen) == [(0, m // 2), (m // 2, m)]
    np.testing.assert_array_equal(np.concatenate(out), np.arange(m) ** 2)
    assert len(out[0]) == m // 2
    nested = []
    threaded(lambda items: nested.extend(_threads.halves(part, m) for _ in items), [0, 1])
    for o in nested:
        np.testing.assert_array_equal(np.concatenate(o), np.arange(m) ** 2)
