"""Cold start: a session or context function imports only what its routes use (the first response).

Each handler is imported in a fresh interpreter, as Lambda's init does, and what it loaded is compared with what
none of its routes needs: Powertools' other resolvers and trigger events, PyYAML, the response models, the memory
and compaction services, and pydantic with the request models (a body loads them when it comes). ``lean.py``'s
packages keep behaving as the real ones when a name is asked of them.
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
    "agent_memory.edge.responses",  # the OpenAPI document only
    "agent_memory.service.memories",
    "agent_memory.service.compaction",
    "agent_memory.policy.facts",
    "agent_memory.policy.deletion",  # a deletion's plan: imported when one is asked for
    # pydantic and what is built with it: only a body (or a parameter params.py leaves to pydantic) loads them, on
    # the request that carries it (importing them cost a fresh function more than its first request)
    "pydantic",
    "pydantic_core",
    "aws_lambda_powertools.event_handler.openapi.params",
    "aws_lambda_powertools.event_handler.middlewares.openapi_validation",
    "agent_memory.edge.requests",
    "agent_memory.models",
    "agent_memory.edge.bounds",
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


def _fresh(function: str) -> str:
    """Script lines: ``function``'s handler imported in the fresh interpreter as Lambda's init does (the memory
    backend, no embedder), as ``module``."""
    path = ROOT / "functions" / function / "app.py"
    return (
        "import importlib.util, json, os\n"
        f"sys.path.append({str(ROOT)!r})\n"
        "os.environ.update(BACKEND='memory', EMBEDDER='none')\n"
        f"spec = importlib.util.spec_from_file_location('app', {str(path)!r})\n"
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
    )


# Script lines after ``_fresh``: ``answer(method, path, query, body)``, one request as API Gateway sends it through
# the template's route (importing ``local``, so after any check of what the import alone loaded).
ANSWER = (
    "from local.apigw import LambdaContext, http_api_event\n"
    "from local.template import load_template, routes\n"
    "def answer(method, path, query=None, body=None):\n"
    "    route = next(r for r in routes(load_template()) if r.method == method and r.match(method, path))\n"
    "    event = http_api_event(route, path, route.match(method, path), raw_query=query, body=body)\n"
    "    return module.lambda_handler(event, LambdaContext(function_name='cold'))\n"
)


# Nor these: the metrics package is imported when a handler first adds a metric (``api._Metrics``), tracing never.
NOR_THESE = ("aws_lambda_powertools.metrics", "aws_lambda_powertools.tracing", "numpy", "httpx")


@pytest.mark.parametrize("function", [*SESSION_FUNCTIONS, "compact_session"])
def test_a_session_or_context_function_imports_nothing_its_routes_do_not_use(function: str) -> None:
    """Its import (Lambda's init) only: what its first request loads is the edge's business (params.py). The
    compaction route (on demand) names its metric's unit as text: importing ``MetricUnit`` ran Powertools' whole
    top-level ``__init__``, Tracer and Metrics included."""
    path = ROOT / "functions" / function / "app.py"
    loaded = _modules_after(
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('app', {str(path)!r})\n"
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
        "assert callable(module.lambda_handler)"
    )
    assert "aws_lambda_powertools.event_handler.api_gateway" in loaded  # the check would notice an import
    assert sorted((set(NOT_ON_THE_COLD_PATH) | set(NOR_THESE)) & loaded) == []


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


def test_a_body_less_first_request_loads_no_pydantic() -> None:
    """A fresh get_session function answers its first request (a 404: the memory backend holds nothing) and has
    still not imported pydantic; a bad parameter is then answered by pydantic's validation, which loads it."""
    loaded = _modules_after(
        _fresh("get_session")
        + ANSWER
        + "first = answer('GET', '/apps/a/users/u/sessions/s', 'limit=5&num_recent_events=3')\n"
        "assert first['statusCode'] == 404, first\n"
        "assert 'pydantic' not in sys.modules, 'a body-less request loaded pydantic'\n"
        "bad = answer('GET', '/apps/a/users/u/sessions/s', 'limit=0')\n"
        "assert bad['statusCode'] == 400 and json.loads(bad['body'])['error']['field'] == 'limit', bad\n"
        "assert 'pydantic' in sys.modules"
    )
    assert "pydantic" in loaded


def test_a_search_function_imports_no_pydantic_and_its_first_searches_load_none() -> None:
    """The search function serves memory routes (the memory service is its own), but nothing built with pydantic:
    a fresh one answers a GET search and a POST search with a common body, and still holds no pydantic; a body
    params.py does not take (``top_k`` 0) is then answered by pydantic's validation, naming the field."""
    loaded = _modules_after(
        _fresh("search_memories")
        + f"cold = set(sys.modules) & set({NOT_ON_THE_COLD_PATH!r})\n"
        + "assert cold <= {'agent_memory.service.memories'}, cold\n"
        + ANSWER
        + "path = '/apps/a/users/u/memories/search'\n"
        "got = answer('GET', path, 'query=where%20do%20I%20live&top_k=3')\n"
        "assert got['statusCode'] == 200 and json.loads(got['body']) == {'memories': []}, got\n"
        "got = answer('POST', path, body=json.dumps({'query': 'where do I live', 'top_k': 3, 'min_score': 0}))\n"
        "assert got['statusCode'] == 200 and json.loads(got['body']) == {'memories': []}, got\n"
        "assert 'pydantic' not in sys.modules, 'a common search loaded pydantic'\n"
        "assert 'agent_memory.policy.facts' not in sys.modules, 'a search compiled the fact patterns'\n"
        "bad = answer('POST', path, body=json.dumps({'query': 'where', 'top_k': 0}))\n"
        "assert bad['statusCode'] == 422 and json.loads(bad['body'])['error']['field'] == 'top_k', bad\n"
        "assert 'pydantic' in sys.modules"
    )
    assert "pydantic" in loaded


def test_a_create_without_a_body_loads_no_pydantic() -> None:
    """A fresh create_session function creates a session from no body (the request model's defaults: a generated
    id, no state) and from a plain one without pydantic; a camelCase body is then read by pydantic."""
    loaded = _modules_after(
        _fresh("create_session") + ANSWER + "path = '/apps/a/users/u/sessions'\n"
        "got = answer('POST', path)\n"
        "assert got['statusCode'] == 201 and json.loads(got['body'])['state'] == {}, got\n"
        "got = answer('POST', path, body=json.dumps({'session_id': 's1', 'state': {'k': 1}}))\n"
        "assert got['statusCode'] == 201 and json.loads(got['body'])['state'] == {'k': 1}, got\n"
        "assert 'pydantic' not in sys.modules, 'a plain create loaded pydantic'\n"
        "got = answer('POST', path, body=json.dumps({'sessionId': 's2'}))\n"
        "assert got['statusCode'] == 201 and json.loads(got['body'])['id'] == 's2', got\n"
        "assert 'pydantic' in sys.modules"
    )
    assert "pydantic" in loaded


def test_a_first_save_of_texts_loads_no_pydantic() -> None:
    """A fresh save function saves plain texts (params.py reads the body) without pydantic; a text with metadata
    is then read by pydantic's validation, which loads it."""
    loaded = _modules_after(
        _fresh("save_memories") + ANSWER + "def save(body):\n"
        "    return answer('POST', '/apps/a/users/u/memories', body=json.dumps(body))\n"
        "got = save({'memories': [{'text': 'I live in Paris', 'timestamp': '2024-05-01'}, {'text': 'I like tea'}]})\n"
        "assert got['statusCode'] == 200 and json.loads(got['body']) == {'saved': 2, 'skipped': 0}, got\n"
        "assert 'pydantic' not in sys.modules, 'a save of plain texts loaded pydantic'\n"
        "got = save({'memories': [{'text': 'I like tea', 'metadata': {'k': 1}}]})\n"
        "assert got['statusCode'] == 200 and json.loads(got['body']) == {'saved': 0, 'skipped': 1}, got\n"
        "assert 'pydantic' in sys.modules"
    )
    assert "pydantic" in loaded


def _answer_in_fresh_process(function: str, method: str, path: str, body: str | None) -> tuple[int, str, list[str]]:
    """A fresh function (the memory backend) answers one request: its status, its stdout (EMF metric lines), and
    the Powertools metrics modules it loaded."""
    handler = ROOT / "functions" / function / "app.py"
    script = f"""
import importlib.util, json, os, sys
sys.path[:0] = [{str(LAYER)!r}, {str(ROOT)!r}]
os.environ.update(BACKEND="memory", POWERTOOLS_METRICS_NAMESPACE="ColdTest", POWERTOOLS_SERVICE_NAME="cold")
os.environ.pop("POWERTOOLS_METRICS_DISABLED", None)
spec = importlib.util.spec_from_file_location("app", {str(handler)!r})
module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)
from local.apigw import LambdaContext, http_api_event
from local.template import load_template, routes
route = next(r for r in routes(load_template()) if r.method == {method!r} and r.match({method!r}, {path!r}))
event = http_api_event(route, {path!r}, route.match({method!r}, {path!r}), body={body!r})
answer = module.lambda_handler(event, LambdaContext(function_name="cold"))
metrics = sorted(m for m in sys.modules if m.startswith("aws_lambda_powertools.metrics"))
print(json.dumps([answer["statusCode"], metrics]))
"""
    out = subprocess.run(
        [sys.executable, "-I", "-c", script], capture_output=True, text=True, check=True, cwd=ROOT, timeout=120
    )
    *lines, last = out.stdout.strip().splitlines()
    status, loaded = json.loads(last)
    return status, "\n".join(lines), loaded


def test_a_write_still_emits_its_metric_and_a_read_loads_no_metrics_package() -> None:
    status, emitted, loaded = _answer_in_fresh_process(
        "create_session", "POST", "/apps/a/users/u/sessions", '{"session_id": "s1"}'
    )
    assert status == 201 and loaded
    (line,) = [json.loads(text) for text in emitted.splitlines() if "_aws" in text]
    assert line["SessionsCreated"] == [1.0] and line["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "ColdTest"
    status, emitted, loaded = _answer_in_fresh_process("get_session", "GET", "/apps/a/users/u/sessions/s1", None)
    assert (status, emitted, loaded) == (404, "", [])


def test_a_first_append_of_a_runner_event_loads_no_pydantic() -> None:
    """A fresh append function stores an ADK event as the Runner sends it, and a batch of them, without pydantic
    (plainevents.py reads the body); a chat message is then read by pydantic's models, which loads them."""
    runner = {
        "content": {"parts": [{"text": "hello"}], "role": "user"},
        "invocation_id": "e-1",
        "author": "user",
        "actions": {
            "state_delta": {"k": 1},
            "artifact_delta": {},
            "requested_auth_configs": {},
            "requested_tool_confirmations": {},
        },
        "id": "ev1",
        "timestamp": 1767225600.5,
    }
    model = {**runner, "id": "ev2", "author": "agent", "usage_metadata": {"prompt_token_count": 3}}
    loaded = _modules_after(
        _fresh("append_event") + ANSWER + "from agent_memory.composition import services\n"
        "services().sessions.create_session(app_name='a', user_id='u', session_id='s')\n"
        "path = '/apps/a/users/u/sessions/s/events'\n"
        f"got = answer('POST', path, body=json.dumps({runner!r}))\n"
        "assert got['statusCode'] == 201, got\n"
        f"assert json.loads(got['body']) == {{**{runner!r}, 'seq': 1}}, got\n"
        f"got = answer('POST', path, body=json.dumps({{'events': [{model!r}]}}))\n"
        "assert got['statusCode'] == 201 and json.loads(got['body'])['events'][0]['usage_metadata'], got\n"
        "assert 'pydantic' not in sys.modules, 'a Runner event loaded pydantic'\n"
        "got = answer('POST', path, body=json.dumps({'role': 'user', 'content': 'hi'}))\n"
        "assert got['statusCode'] == 201 and json.loads(got['body'])['content']['parts'] == [{'text': 'hi'}], got\n"
        "assert 'pydantic' in sys.modules"
    )
    assert "pydantic" in loaded


@pytest.mark.parametrize(
    ("environment", "paused"),
    [
        ({"AWS_LAMBDA_FUNCTION_NAME": "cold", "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand"}, True),
        ({"AWS_LAMBDA_FUNCTION_NAME": "cold", "AWS_LAMBDA_INITIALIZATION_TYPE": "provisioned-concurrency"}, False),
        ({}, False),  # not in Lambda: tests, the local server, benchmarks
    ],
)
def test_a_cold_function_collects_no_garbage_until_its_first_response(
    environment: dict[str, str], paused: bool
) -> None:
    """In a Lambda function on demand the collector is off from the layer's import (the handler's, Lambda's init)
    to the first response, then on again with what the cold path built frozen (coldgc.py); elsewhere it is left
    alone."""
    loaded = _modules_after(
        f"import os, gc; os.environ.update({environment!r})\n"
        + _fresh("get_session")
        + f"assert gc.isenabled() is {not paused}, 'the import'\n"
        + ANSWER
        + "got = answer('GET', '/apps/a/users/u/sessions/s')\n"
        "assert got['statusCode'] == 404, got\n"
        "assert gc.isenabled(), 'after the first response'\n"
        f"assert (gc.get_freeze_count() > 10_000) is {paused}, gc.get_freeze_count()\n"
    )
    assert "agent_memory.runtime.coldgc" in loaded


def test_a_background_function_collects_again_when_its_work_starts() -> None:
    """Auto-save's import runs paused in Lambda, like any function's; its handler resumes the collector first
    (a background job's work is not a response anyone waits for)."""
    _modules_after(
        "import os, gc\n"
        "os.environ.update(AWS_LAMBDA_FUNCTION_NAME='cold', AWS_LAMBDA_INITIALIZATION_TYPE='on-demand')\n"
        + _fresh("autosave")
        + "assert not gc.isenabled(), 'the import'\n"
        "from local.apigw import LambdaContext\n"
        "out = module.lambda_handler({'Records': []}, LambdaContext(function_name='cold'))\n"
        "assert out == {'batchItemFailures': []}, out\n"
        "assert gc.isenabled(), 'after the first invocation'\n"
    )


def test_deleting_an_event_loads_no_embedder_and_no_search_index() -> None:
    """A fresh delete_events function forgets what long-term memory holds of the event it deletes, which needs
    the memory store but never an embedding: with MiniLM configured, its first DELETE loads neither numpy nor the
    tokenizer (the model's load, some 250 CPU ms of the first response, starts only when a search or a save
    begins; the search index is imported only when a stored index is read)."""
    functions = ROOT / "functions"
    loaded = _modules_after(
        _fresh("delete_events") + "os.environ['EMBEDDER'] = 'minilm'\n" + "def load(name):\n"
        f"    spec = importlib.util.spec_from_file_location(name, str({str(functions)!r}) + '/' + name + '/app.py')\n"
        "    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m\n"
        + ANSWER
        + "deleter = module\n"
        "base = '/apps/a/users/u/sessions'\n"
        "module = load('create_session')\n"
        "assert answer('POST', base, body='{\"session_id\": \"s\"}')['statusCode'] == 201\n"
        "module = load('append_event')\n"
        "event = {'id': 'e1', 'author': 'user', 'content': {'role': 'user', 'parts': [{'text': 'I live in Paris'}]}}\n"
        "assert answer('POST', base + '/s/events', body=json.dumps(event))['statusCode'] == 201\n"
        "module = deleter\n"
        "got = answer('DELETE', base + '/s/events/e1')\n"
        "assert got['statusCode'] == 200 and json.loads(got['body'])['deleted'] == ['e1'], got\n"
        "from agent_memory.composition import services\n"
        "assert services().settings.embedder == 'minilm'\n"
        "assert 'numpy' not in sys.modules and 'tokenizers' not in sys.modules, 'a deletion loaded the embedder'\n"
        "assert 'agent_memory.search.index' not in sys.modules, 'a deletion imported the search index'\n"
        "assert 'agent_memory.providers.embedders' not in sys.modules, 'a deletion built the embedder'\n"
        "for name in ('agent_memory.policy.autosave', 'agent_memory.policy.profile'):\n"
        "    assert name not in sys.modules, f'a deletion imported the saves\\' code: {name}'\n"
    )
    assert "agent_memory.service.memories" in loaded  # the deletion did reach the memory service
