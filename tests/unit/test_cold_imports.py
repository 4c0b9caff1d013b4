"""Cold start: a session or context function imports only what its routes use (issue 14's first response).

Each handler is imported in a fresh interpreter, as Lambda's init does, and what it loaded is compared with what
none of its routes needs: Powertools' other resolvers and trigger events, PyYAML, the response models, the memory
and compaction services. ``lean.py``'s packages keep behaving as the real ones when a name is asked of them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYER = ROOT / "layers" / "shared"

# None of these serves a session or context route.
NOT_ON_THE_COLD_PATH = (
    "asyncio",  # AppSync's resolver
    "aws_lambda_powertools.event_handler.appsync",
    "aws_lambda_powertools.event_handler.bedrock_agent",
    "aws_lambda_powertools.utilities.data_classes.kafka_event",
    "aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event",  # the change feed's reader only
    "yaml",  # the export and import as YAML only
    "agent_memory.responses",  # the OpenAPI document only
    "agent_memory.service.memories",
    "agent_memory.service.compaction",
    "agent_memory.policy.facts",
)

SESSION_FUNCTIONS = (
    "create_session",
    "get_session",
    "append_event",
    "list_sessions",
    "get_context",
    "delete_session",
    "delete_events",
)


def _modules_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code`` with the layer first on its path."""
    script = f"import sys; sys.path[:0] = [{str(LAYER)!r}]\n{code}\nimport json; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-I", "-c", script], capture_output=True, text=True, check=True, cwd=ROOT, timeout=120
    )
    return set(json.loads(out.stdout.splitlines()[-1]))


@pytest.mark.parametrize("function", SESSION_FUNCTIONS)
def test_a_session_function_imports_nothing_its_routes_do_not_use(function: str) -> None:
    path = ROOT / "functions" / function / "app.py"
    loaded = _modules_after(
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('app', {str(path)!r})\n"
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
        "assert callable(module.lambda_handler)"
    )
    assert "aws_lambda_powertools.event_handler.api_gateway" in loaded  # the check would notice an import
    assert sorted(set(NOT_ON_THE_COLD_PATH) & loaded) == []


def test_lean_packages_answer_every_name_the_real_ones_do() -> None:
    code = """
import agent_memory  # installs the lean finder
import aws_lambda_powertools.event_handler as handler
import aws_lambda_powertools.utilities.data_classes as events
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
assert APIGatewayHttpResolver.__module__ == "aws_lambda_powertools.event_handler.api_gateway"
assert content_types.APPLICATION_JSON == "application/json"
assert "aws_lambda_powertools.event_handler.appsync" not in sys.modules  # lean so far
from aws_lambda_powertools.event_handler import AppSyncResolver  # a name from another submodule: that one only
from aws_lambda_powertools.utilities.data_classes import SQSEvent, event_source
assert AppSyncResolver.__name__ == "AppSyncResolver" and SQSEvent.__name__ == "SQSEvent" and callable(event_source)
assert "aws_lambda_powertools.utilities.data_classes.kafka_event" not in sys.modules
names = sorted(handler.__all__)  # what only the real __init__ defines: it runs, once
assert "VPCLatticeV2Resolver" in names and all(hasattr(handler, name) for name in names)
assert all(hasattr(events, name) for name in events.__all__)
try:
    handler.no_such_name
except AttributeError:
    pass
else:
    raise AssertionError("an unknown name must raise AttributeError")
"""
    loaded = _modules_after(code)
    assert "aws_lambda_powertools.utilities.data_classes.kafka_event" in loaded  # __all__ ran the real __init__
