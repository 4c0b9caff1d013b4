"""The shape of the house (CONTRIBUTING.md's map): rooms small enough to read, imports that run one way, every
bound in one place, and tests that share helpers through ``tests/support`` rather than through each other.

Imports are read from the source (``ast``), every ``import`` and ``from … import`` wherever it stands: an import
inside a function closes a circle as surely as one at the top, only later.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYER = ROOT / "layers" / "shared"
PACKAGE = LAYER / "agent_memory"
MAX_MODULE_LINES = 1000
MAX_ROOT_MODULES = 10


def _module_name(path: Path, base: Path) -> str:
    parts = list(path.relative_to(base).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules(base: Path, top: str) -> dict[str, Path]:
    return {_module_name(p, base): p for p in sorted((base / top).rglob("*.py"))}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The known modules ``name`` imports: ``from x import y`` counts as ``x.y`` when that is a module, else ``x``."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                found.add(f"{source}.{alias.name}" if f"{source}.{alias.name}" in known else source)
    # importing a.b.c runs a and a.b first; only the named module is an edge here (packages' __init__ are light)
    return {m for m in found if m in known and m != name}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan), each a circle of imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    known = set(modules)
    return {name: _imports(name, path, known) for name, path in modules.items()}


def test_no_module_of_the_layer_passes_a_thousand_lines() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}, f"split these into rooms named for what they do: {long}"


def test_no_import_circle_in_the_layer() -> None:
    assert _cycles(_graph(_modules(LAYER, "agent_memory"))) == []


def test_no_import_circle_in_bench() -> None:
    assert _cycles(_graph(_modules(ROOT, "bench"))) == []


def test_the_cycle_finder_finds_a_circle_through_three_modules() -> None:
    # Guards the check above: a finder that never reports would pass it.
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_package_root_holds_few_modules() -> None:
    root_modules = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(root_modules) <= MAX_ROOT_MODULES, root_modules


_BOUND = re.compile(r"^\s*_?(MAX|MIN)_[A-Z0-9_]+\s*(?::[^=\n]*)?=", re.MULTILINE)


def test_every_bound_is_defined_in_limits_only() -> None:
    elsewhere = {
        str(p.relative_to(ROOT)): [m.group(0).strip() for m in _BOUND.finditer(p.read_text())]
        for p in PACKAGE.rglob("*.py")
        if p.name != "limits.py"
    }
    assert {path: found for path, found in elsewhere.items() if found} == {}


def _test_modules() -> Iterable[Path]:
    yield from (ROOT / "tests").rglob("*.py")
    yield from (ROOT / "bench").rglob("*.py")
    yield from (ROOT / "local").rglob("*.py")


def test_no_test_or_bench_imports_a_test_module_or_a_conftest() -> None:
    offenders = []
    for path in _test_modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                last = name.split(".")[-1]
                if name.startswith("tests.") and (last.startswith("test_") or last == "conftest"):
                    offenders.append(f"{path.relative_to(ROOT)}: {name}")
    assert offenders == [], "shared helpers belong in tests/support"
