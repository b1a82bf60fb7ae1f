"""The package layout: old flat import paths still work, the top level stays small, and the
module-level imports between fpirl's modules form no cycle."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import fpirl
from fpirl._compat import MOVED

SRC = Path(fpirl.__file__).parent


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_import_path_is_the_moved_module(old):
    assert importlib.import_module(old) is importlib.import_module(MOVED[old])
    # the alias keeps the module's own spec (else its relative imports raise ImportWarning)
    assert importlib.import_module(old).__spec__.name == MOVED[old]


def test_old_from_import_in_a_fresh_interpreter():
    code = ("from fpirl.identify import PotentialEstimator; from fpirl.tracks_io import read_tracks; "
            "import fpirl.hermite, fpirl.estimators.identify as new; "
            "assert PotentialEstimator is new.PotentialEstimator; print(fpirl.hermite.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "fpirl.core.hermite"


def test_public_api_resolves():
    for name in fpirl.__all__:
        assert getattr(fpirl, name) is not None


def test_top_level_is_small():
    modules = [p.name for p in SRC.glob("*.py")]
    assert len(modules) <= 12, modules


def _module_name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def import_graph(top_level_only: bool) -> dict[str, set[str]]:
    """Edges module -> fpirl module it imports (a child importing its own ancestor package is not
    an edge: the ancestor runs first anyway)."""
    modules = {_module_name(p)[0]: p for p in SRC.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_pkg = path.name == "__init__.py"
        tree = ast.parse(path.read_text())
        nodes = tree.body if top_level_only else list(ast.walk(tree))
        for node in nodes:
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if is_pkg else name.split(".")[:-1]
                    base = base[: len(base) - node.level + 1] + ([node.module] if node.module else [])
                    base = ".".join(base)
                else:
                    base = node.module or ""
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for t in targets:
                while t not in modules and "." in t:
                    t = t.rsplit(".", 1)[0]
                if t in modules and t != name and not name.startswith(t + "."):
                    graph.setdefault(name, set()).add(t)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (depth-first search), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(v):
        state[v] = 1
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if state.get(w) == 1:
                return stack[stack.index(w):] + [w]
            if w not in state and (found := visit(w)):
                return found
        state[v] = 2
        stack.pop()
        return None

    for v in sorted(graph):
        if v not in state and (found := visit(v)):
            return found
    return None


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}}) is None


def test_no_import_cycle_between_modules():
    cycle = find_cycle(import_graph(top_level_only=True))
    assert cycle is None, " -> ".join(cycle)
