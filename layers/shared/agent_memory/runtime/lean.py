"""Lean package imports: a cold start pays only for the parts of Powertools a handler uses.

``aws_lambda_powertools.event_handler``'s ``__init__`` imports every resolver (AppSync's pulls in asyncio,
Bedrock's, VPC Lattice's …) and ``aws_lambda_powertools.utilities.data_classes``' imports every event class of
every Lambda trigger, although the functions here use the HTTP API resolver and its event (and the stream
function one more event class). Importing any submodule of a package runs its ``__init__`` first, so without help
every function's first response pays for all of them: about a sixth of the API functions' import time.

``install()`` puts a finder in front of the import system for those packages (``LEAN_PACKAGES``): their module is
created without running its ``__init__``, and a name asked of it is imported from the submodule the ``__init__``
would have taken it from (read from the ``__init__``'s own ``from .x import Name`` lines, so a Powertools upgrade
needs no edit here), or, a submodule's name, as that submodule. Any other name (``__all__``, something the
``__init__`` defines itself) runs the real ``__init__`` once, in the same module: the package then is what it
always was. Nothing is renamed or patched; a package already imported is left alone.
"""

from __future__ import annotations

import ast
import importlib
import importlib.abc
import importlib.machinery
import os
import sys
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any

LEAN_PACKAGES = frozenset(
    {"aws_lambda_powertools", "aws_lambda_powertools.event_handler", "aws_lambda_powertools.utilities.data_classes"}
)


def _powertools_set_up() -> None:
    """What Powertools' top-level ``__init__`` does besides importing its names (Logger, Metrics, Tracer): its
    package logger's handler and its user agent on botocore sessions. The names come when asked (a read that
    emits no metric never imports the metrics package)."""
    from aws_lambda_powertools.package_logger import set_package_logger_handler
    from aws_lambda_powertools.shared.user_agent import inject_user_agent

    set_package_logger_handler()  # type: ignore[no-untyped-call]
    inject_user_agent()  # type: ignore[no-untyped-call]


# A lean package's set-up besides its names: run when the lean module is made, as its ``__init__`` would.
_SET_UP = {"aws_lambda_powertools": _powertools_set_up}


def _exports(source: str, package: str) -> dict[str, tuple[str, str]]:
    """Each name a package ``__init__`` imports from one of its submodules: name -> (submodule, its name there)."""
    names: dict[str, tuple[str, str]] = {}
    for node in ast.parse(source).body:
        if not isinstance(node, ast.ImportFrom) or node.module is None:
            continue
        if node.level == 1:
            module = f"{package}.{node.module}"
        elif node.level == 0 and node.module.startswith(package + "."):
            module = node.module
        else:
            continue
        for alias in node.names:
            if alias.name != "*":
                names[alias.asname or alias.name] = (module, alias.name)
    return names


def _assigned(source: str) -> frozenset[str]:
    """The names a package ``__init__`` assigns itself (``__all__``, ``__version__`` …): asking for one runs it."""
    names = {"__all__"}
    for node in ast.parse(source).body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    return frozenset(names)


class _LeanLoader(importlib.abc.Loader):
    """Creates the package's module as its own loader would, then gives it a ``__getattr__`` instead of running
    its ``__init__``."""

    def __init__(self, real: importlib.machinery.ModuleSpec) -> None:
        self.real = real

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None  # the default module

    def exec_module(self, module: ModuleType) -> None:
        real, name = self.real, module.__name__
        source = real.loader.get_source(name) if isinstance(real.loader, importlib.abc.InspectLoader) else None
        if source is None:  # no source to read the exports from: the package as it is
            assert real.loader is not None
            real.loader.exec_module(module)
            return
        exports = _exports(source, name)
        assigned = _assigned(source)
        locations = list(real.submodule_search_locations or ())
        lock = threading.RLock()
        state = {"whole": False}

        def whole() -> None:
            with lock:
                if not state["whole"]:
                    state["whole"] = True
                    assert real.loader is not None
                    real.loader.exec_module(module)  # the real __init__, in this module

        def getattr_(attribute: str) -> Any:
            if attribute in exports and not state["whole"]:
                submodule, original = exports[attribute]
                value = getattr(importlib.import_module(submodule), original)
            elif not attribute.startswith("__") and any(
                os.path.exists(os.path.join(folder, attribute + ".py"))
                or os.path.isfile(os.path.join(folder, attribute, "__init__.py"))
                for folder in locations
            ):
                value = importlib.import_module(f"{name}.{attribute}")
            elif attribute.startswith("__") and attribute not in assigned:
                raise AttributeError(f"module {name!r} has no attribute {attribute!r}")
            else:
                whole()
                if attribute not in module.__dict__:
                    raise AttributeError(f"module {name!r} has no attribute {attribute!r}")
                return module.__dict__[attribute]
            setattr(module, attribute, value)
            return value

        module.__getattr__ = getattr_  # type: ignore[method-assign]
        set_up = _SET_UP.get(name)
        if set_up is not None:
            set_up()


class _LeanFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in LEAN_PACKAGES:
            return None
        real = importlib.machinery.PathFinder.find_spec(fullname, path)
        if real is None or real.loader is None or real.submodule_search_locations is None:
            return None
        spec = importlib.machinery.ModuleSpec(fullname, _LeanLoader(real), origin=real.origin, is_package=True)
        spec.submodule_search_locations = real.submodule_search_locations
        spec.has_location = real.has_location
        spec.cached = real.cached
        return spec


_FINDER = _LeanFinder()


def install() -> None:
    """Import ``LEAN_PACKAGES`` lean from now on (idempotent; packages already imported stay as they are)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
