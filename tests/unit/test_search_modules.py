"""The search package's modules import one another without a circle, counting imports for type checking too."""

from __future__ import annotations

import ast
from pathlib import Path

import agent_memory.search

PACKAGE = "agent_memory.search"
ROOT = Path(agent_memory.search.__file__).parent


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The modules of the package that ``path`` imports (``from agent_memory.search import scoring`` names the
    submodule; relative imports resolved)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(PACKAGE.split(".")[: 2 - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    out.add(f"{base}.{alias.name}")
                elif base in modules:
                    out.add(base)
    return out


def test_no_module_of_the_package_imports_one_that_imports_it_back() -> None:
    files = {f"{PACKAGE}.{p.stem}" if p.stem != "__init__" else PACKAGE: p for p in ROOT.glob("*.py")}
    graph = {name: _imports(path, set(files)) - {name} for name, path in files.items()}
    assert PACKAGE not in set().union(*(graph[m] for m in graph if m != PACKAGE)), "a module imports the package"

    def reach(start: str) -> set[str]:
        seen: set[str] = set()
        todo = list(graph[start])
        while todo:
            module = todo.pop()
            if module not in seen:
                seen.add(module)
                todo += graph[module]
        return seen

    circles = sorted(name for name in graph if name in reach(name))
    assert not circles, f"import circles through {circles}: {graph}"
    assert f"{PACKAGE}.feedback" not in files  # the second-pass experiments are bench's (bench/tuning)
