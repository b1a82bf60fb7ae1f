"""The command line's memory setting (fpirl.cli._memory): numpy's huge-page advice off inside, restored after."""

import numpy as np
import pytest

from fpirl.cli import _memory
from fpirl.cli._memory import HUGEPAGE_VARIABLE, small_pages


def _advice():
    """numpy's current huge-page setting, read through numpy's own switch (set back at once)."""
    switch = _memory._hugepage_switch()
    now = switch(True)
    switch(now)
    return now


@pytest.fixture
def switch():
    s = _memory._hugepage_switch()
    if s is None:
        pytest.skip("this numpy has no huge-page switch")
    before = s(True)
    yield s
    s(before)


def test_small_pages_turns_the_advice_off_and_restores_it(switch, monkeypatch):
    monkeypatch.delenv(HUGEPAGE_VARIABLE, raising=False)
    with small_pages():
        assert _advice() is False
        a = np.ones(2**20)  # large arrays are still allocated and usable
        assert a.sum() == 2**20
    assert _advice() is True


def test_small_pages_restores_after_an_error(switch, monkeypatch):
    monkeypatch.delenv(HUGEPAGE_VARIABLE, raising=False)
    with pytest.raises(RuntimeError):
        with small_pages():
            raise RuntimeError("boom")
    assert _advice() is True


def test_the_users_setting_stands(switch, monkeypatch):
    monkeypatch.setenv(HUGEPAGE_VARIABLE, "1")
    with small_pages():
        assert _advice() is True


def test_the_command_line_restores_numpys_setting(switch, monkeypatch, capsys, tmp_path):
    from fpirl.cli import main

    monkeypatch.delenv(HUGEPAGE_VARIABLE, raising=False)
    seen = []
    monkeypatch.setattr(_memory, "_hugepage_switch", lambda: (lambda on: seen.append(on) or switch(on)))
    assert main(["fit", str(tmp_path / "missing.nc"), "--beta", "5", "-o", str(tmp_path / "out.nc")]) == 2
    assert seen[0] is False and _advice() is True
    assert "missing.nc" in capsys.readouterr().err and not (tmp_path / "out.nc").exists()


_REUSE = """
import resource, sys
import numpy as np
from fpirl.cli._memory import retain_freed_memory
if sys.argv[1] == "1" and not retain_freed_memory():
    print("unsupported"); raise SystemExit
a = np.ones(2**24); del a  # 128 MiB, freed
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
b = np.ones(2**24)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(retain: bool) -> str:
    import os
    import subprocess
    import sys

    env = {**os.environ, "NUMPY_MADVISE_HUGEPAGE": "0"}  # 4 KiB pages: one fault per page
    out = subprocess.run([sys.executable, "-c", _REUSE, "1" if retain else "0"], capture_output=True, text=True,
                         env=env, check=True)
    return out.stdout.strip()


def test_retained_memory_is_reused_without_page_faults():
    retained = _faults(True)
    if retained == "unsupported":
        pytest.skip("not glibc")
    pages = 2**24 * 8 // 4096  # 32768 fresh pages for the second array without reuse
    assert int(_faults(False)) > pages // 2  # glibc maps and unmaps it: every page faults again
    assert int(retained) < pages // 20  # kept in the heap: reused


_FRESH = """
import os, sys
from fpirl.cli._memory import small_pages
with small_pages():
    import numpy as np
    from fpirl.cli._memory import _hugepage_switch
    s = _hugepage_switch()
    inside = s(False)
    print(inside, os.environ.get("NUMPY_MADVISE_HUGEPAGE"))
print(s(True), "NUMPY_MADVISE_HUGEPAGE" in os.environ)
"""


def test_numpy_imported_inside_reads_the_variable_and_gets_its_default_back():
    """The console script imports numpy inside the context: numpy reads the variable at import; on exit the
    variable is gone and numpy's advice is its default again (on, on Linux >= 4.6)."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != HUGEPAGE_VARIABLE}
    out = subprocess.run([sys.executable, "-c", _FRESH], capture_output=True, text=True, env=env, check=True)
    inside, after = out.stdout.strip().splitlines()
    assert inside == "False 0"
    assert after == f"{_memory._numpy_default()} False"
