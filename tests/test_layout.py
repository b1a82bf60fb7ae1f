"""The package layout: old flat import paths still work, the top level stays small, the imports
between fpirl's modules (module level and inside functions) form no cycle, and the rooms keep
their layers (io knows no MDP; the numerics never import the CLI, plotting or problems)."""

from __future__ import annotations

import ast
import functools
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
    # the module keeps its own spec (else its relative imports warn: __package__ != __spec__.parent)
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
    """Edges module -> fpirl module it imports, and -> every package above that module (importing
    ``fpirl.io.netcdf`` runs ``fpirl/io/__init__.py`` first). A child importing its own ancestor
    package is not an edge: the ancestor runs first anyway. ``top_level_only``: only the imports
    at module level, else also those inside functions and classes."""
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
                parts = t.split(".")
                for k in range(2, len(parts) + 1):  # the target and the packages above it
                    u = ".".join(parts[:k])
                    if u in modules and u != name and not name.startswith(u + "."):
                        graph.setdefault(name, set()).add(u)
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


def test_no_import_cycle_including_imports_inside_functions():
    cycle = find_cycle(import_graph(top_level_only=False))
    assert cycle is None, " -> ".join(cycle)


def _room(module: str) -> str:
    return ".".join(module.split(".")[:2])


@functools.lru_cache(maxsize=None)
def _room_edges() -> frozenset[tuple[str, str]]:
    return frozenset((_room(a), _room(b)) for a, targets in import_graph(top_level_only=False).items()
                     for b in targets)


def test_rooms_form_no_cycle():
    """The rooms (subpackages and top-level modules) are layered: no two reach each other."""
    graph: dict[str, set[str]] = {}
    for a, b in _room_edges():
        if a != b:
            graph.setdefault(a, set()).add(b)
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle)


#: rooms that hold the numerics: they never reach the command line, the figures or the problems
NUMERICS = ("core", "weakform", "estimators", "mdp", "rl", "forward", "evaluation", "uncertainty", "tracks")


def test_io_does_not_import_the_mdp():
    assert ("fpirl.io", "fpirl.mdp") not in _room_edges()


@pytest.mark.parametrize("room", NUMERICS)
def test_numerics_do_not_import_cli_plotting_or_problems(room):
    edges = _room_edges()
    bad = [b for b in ("fpirl.cli", "fpirl.plotting", "fpirl.problems") if (f"fpirl.{room}", b) in edges]
    assert not bad, f"fpirl.{room} imports {bad}"


#: third-party packages an fpirl module may import inside a function: the optional extras
OPTIONAL = ("pyarrow", "zarr", "distributed", "dask", "gymnasium", "cupy")


def test_imports_inside_functions_only_for_optional_packages():
    """Outside the command line (whose lazy imports keep ``fpirl --help`` light), an import inside
    a function is only for an optional extra; everything else is imported at module level."""
    bad = []
    for path in SRC.rglob("*.py"):
        name, _ = _module_name(path)
        if name == "fpirl" or name.startswith("fpirl.cli"):
            continue
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom):
                    mods = ["." * node.level + (node.module or "")]
                elif isinstance(node, ast.Import):
                    mods = [a.name for a in node.names]
                else:
                    continue
                bad += [f"{name}.{fn.name}: {m}" for m in mods if m.split(".")[0] not in OPTIONAL]
    assert not bad, bad


def test_alias_keeps_the_module_spec():
    """Importing through an old path leaves the module's own ``__spec__`` (relative imports inside
    it and pickling rely on ``__spec__.parent == __package__``)."""
    for old, new in sorted(MOVED.items()):
        module = importlib.import_module(old)
        assert module.__spec__.name == new and module.__spec__.parent == module.__package__
