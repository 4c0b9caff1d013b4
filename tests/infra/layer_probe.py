"""Run by the layer-only interpreter (tests/infra/test_layer.py), never by pytest: standard library only.

Imports what a deployed function can reach, with nothing on ``sys.path`` but what Lambda gives it: the layer
(``/opt/python``: here its third-party packages as the layer's Makefile installs them, and ``layers/shared`` for
agent_memory), the function's own folder and the interpreter's site-packages (boto3, as the runtime has it).
Prints one JSON object: ``failures`` (what did not import, with the error), counts, the distributions the imports
used and those the layer ships.

Usage: ``python -I layer_probe.py <layer packages dir> <layer source dir> <functions dir>``
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import importlib.util
import json
import pkgutil
import re
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

PACKAGE = "agent_memory"


def lazy_imports(package_dir: Path) -> set[tuple[str, str | None]]:
    """``(module, name)`` for every absolute import inside a function body (``name`` None for ``import x``).

    Importing a module file does not run these: they are imported on first use (numpy, onnxruntime, httpx …)
    and would fail only when a request reaches them.
    """
    found: set[tuple[str, str | None]] = set()
    for path in package_dir.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import):
                    found.update((alias.name, None) for alias in inner.names)
                elif isinstance(inner, ast.ImportFrom) and inner.level == 0 and inner.module:
                    found.update((inner.module, alias.name) for alias in inner.names)
    return found


def check_lazy(module: str, name: str | None) -> None:
    imported = importlib.import_module(module)
    if name is not None and not hasattr(imported, name):
        importlib.import_module(f"{module}.{name}")  # ``from pkg import submodule``


def load_handler(app_file: Path) -> None:
    # Each function's file is ``app.py``, as Lambda sees it in /var/task; a name of its own lets all twelve load
    # in one interpreter.
    spec = importlib.util.spec_from_file_location(f"_functions.{app_file.parent.name}.app", app_file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    if not callable(getattr(module, "lambda_handler", None)):
        raise AttributeError(f"{app_file} has no callable lambda_handler")


def normalized(distribution: str) -> str:
    """A distribution's name as PEP 503 compares it (``aws_lambda_powertools`` is ``aws-lambda-powertools``)."""
    return re.sub(r"[-_.]+", "-", distribution).lower()


def main(packages_dir: Path, layer_dir: Path, functions_dir: Path) -> dict[str, object]:
    failures: list[str] = []

    def attempt(what: str, action: Callable[..., object], *args: object) -> None:
        try:
            action(*args)
        except BaseException:  # an import may raise anything, SystemExit included
            failures.append(f"{what}: {traceback.format_exc(limit=3).strip().splitlines()[-1]}")

    sys.path[0:0] = [str(packages_dir), str(layer_dir)]
    package = importlib.import_module(PACKAGE)
    modules = [PACKAGE] + [
        info.name
        for info in pkgutil.walk_packages(package.__path__, f"{PACKAGE}.", onerror=lambda name: failures.append(name))
    ]
    for name in modules:
        attempt(name, importlib.import_module, name)
    lazy = sorted(lazy_imports(layer_dir / PACKAGE), key=lambda item: (item[0], item[1] or ""))
    for module, name in lazy:
        attempt(f"lazy import {module}{'.' + name if name else ''}", check_lazy, module, name)
    handlers = sorted(functions_dir.glob("*/app.py"))
    for app_file in handlers:
        attempt(f"handler {app_file.parent.name}", load_handler, app_file)

    def embed() -> None:
        # The default embedder needs its native pieces (onnxruntime, tokenizers) and the model file to load.
        from agent_memory.providers.embedders import MiniLMEmbedder

        rows = MiniLMEmbedder().embed(["the layer loads its model"])
        if tuple(rows.shape) != (1, 384):
            raise AssertionError(f"embedding shape {rows.shape}")

    attempt("minilm embedding", embed)

    def http_post() -> None:
        # httpx imports its transport (httpcore, h11, anyio …) only when a client sends: a refused local port
        # runs that path without the network.
        from agent_memory.providers.embedders import EmbedderError
        from agent_memory.providers.http import JsonEndpoint
        from agent_memory.runtime.budget import ModelBudget

        endpoint = JsonEndpoint(
            "http://127.0.0.1:9/", what="probe", error=EmbedderError, budget=ModelBudget("probe", 3.0, 1)
        )
        try:
            endpoint.post({}, endpoint.headers())
        except EmbedderError as exc:
            if "ConnectError" not in str(exc):
                raise
        else:
            raise AssertionError("a POST to a closed port succeeded")

    attempt("openai-compatible http post", http_post)

    by_top_level = importlib.metadata.packages_distributions()
    tops = {m.split(".")[0] for m in sys.modules}
    used = sorted({normalized(dist) for top in tops for dist in by_top_level.get(top, [])})
    installed = sorted({normalized(dist.metadata["Name"]) for dist in importlib.metadata.distributions()})
    shipped = sorted(
        {normalized(dist.metadata["Name"]) for dist in importlib.metadata.distributions(path=[str(packages_dir)])}
    )
    return {
        "failures": failures,
        "modules": len(modules),
        "lazy": len(lazy),
        "handlers": len(handlers),
        "used": used,
        "installed": installed,
        "shipped": shipped,
    }


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))))
