"""A sample event per function in events/ (``sam local invoke -e events/<name>.json``), each run through the real
handler against moto: the HTTP API events of every route's function, the DynamoDB stream batch of auto-save
and the EventBridge schedule of the compaction sweep.

The five session events of the first release are checked in test_template.py (their shape against the routes
and their answers); this file adds the other seven and checks that every function has one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from local.apigw import LambdaContext
from local.template import ROOT, function_events, functions, load_handler, load_template, routes
from tests.support.template import check_sample_event, invoke, load_event

TEMPLATE = load_template()
EVENTS_DIR = ROOT / "events"
LISBON = "Plan a weekend trip to Lisbon."  # the text of events/append_event.json


def sample_for(logical_id: str) -> str:
    """The sample event's name of a function: its code folder's (``functions/get_context`` -> get_context)."""
    code_uri = str(TEMPLATE["Resources"][logical_id]["Properties"]["CodeUri"]).rstrip("/")
    return code_uri.rsplit("/", 1)[-1]


def test_every_function_has_a_sample_event() -> None:
    names = {sample_for(f) for f in functions(TEMPLATE)}
    assert len(names) == 14
    missing = sorted(name for name in names if not (EVENTS_DIR / f"{name}.json").is_file())
    assert missing == []
    strays = sorted(p.stem for p in EVENTS_DIR.glob("*.json") if p.stem not in names)
    assert strays == [], "a sample event that no function takes"


@dataclass(frozen=True)
class _Code:
    code_uri: str
    handler: str


def function_ref(logical_id: str) -> _Code:
    """A function's code, for ``load_handler``, whatever its events (the sweep worker has none)."""
    props = TEMPLATE["Resources"][logical_id]["Properties"]
    return _Code(str(props["CodeUri"]), str(props.get("Handler") or TEMPLATE["Globals"]["Function"]["Handler"]))


def invoke_function(logical_id: str, event: dict[str, Any]) -> Any:
    (source,) = [
        e
        for e in function_events(TEMPLATE, "DynamoDB") + function_events(TEMPLATE, "Schedule")
        if e.function == logical_id
    ]
    return load_handler(source)(event, LambdaContext(function_name=logical_id))


def append(invocation: str, text: str, author: str = "user") -> None:
    """Append one event through the append handler: the sample event with another id, invocation and text."""
    event = load_event("append_event")
    body = json.loads(event["body"])
    body.update(id=f"evt-{invocation}-{author}", invocationId=invocation, author=author)
    body["content"] = {"role": "user" if author == "user" else "model", "parts": [{"text": text}]}
    event["body"] = json.dumps(body)
    route = next(r for r in routes(TEMPLATE) if r.function == "AppendEventFunction")
    response = load_handler(route)(event, LambdaContext(function_name="append"))
    assert response["statusCode"] == 201, response


def search(query: str = "weekend trip to Lisbon") -> list[str]:
    """Texts of the memories the search handler finds for alice (the search sample with another query)."""
    event = load_event("search_memories")
    event["body"] = json.dumps({"query": query, "top_k": 10})
    route = next(r for r in routes(TEMPLATE) if r.function == "SearchMemoriesFunction" and r.method == "POST")
    response = load_handler(route)(event, LambdaContext(function_name="search"))
    assert response["statusCode"] == 200, response
    return [hit["content"]["parts"][0]["text"] for hit in json.loads(response["body"])["memories"]]


@pytest.fixture
def conversation(aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The sample session with the sample event and two more invocations (a user turn and the agent's answer),
    under a compaction policy that makes it due: every 2 invocations, keeping the last raw event."""
    from agent_memory.composition import services
    from agent_memory.config import settings

    monkeypatch.setenv("COMPACTION_INTERVAL", "2")
    monkeypatch.setenv("EVENT_RETENTION_SIZE", "1")
    settings.cache_clear()
    services.cache_clear()
    assert invoke("create_session")[0] == 201
    assert invoke("append_event")[0] == 201
    append("inv-2", "Which museums open on Monday?")
    append("inv-2", "The Gulbenkian and the tile museum open on Monday.", author="planner")
    append("inv-3", "Book the tile museum.")


@pytest.mark.parametrize(
    "name", ["get_context", "compact_session", "save_memories", "search_memories", "forget_memories", "delete_events"]
)
def test_new_http_samples_are_api_gateway_events_of_their_route(name: str) -> None:
    check_sample_event(name)


def test_get_context_event(conversation: None) -> None:
    status, body = invoke("get_context")
    assert status == 200
    assert body["summary"] is None and body["compacted_events"] == 0 and body["token_estimate"] > 0
    messages = body["messages"]
    assert [m["role"] for m in messages] == ["user", "user", "assistant", "user"]
    assert messages[0]["content"] == LISBON


def test_compact_session_event(conversation: None) -> None:
    status, body = invoke("compact_session")
    assert status == 200
    assert body["compacted"] is True
    assert body["event"]["author"] and body["event"]["actions"]["compaction"]
    status, context = invoke("get_context")
    assert status == 200 and context["compacted_events"] > 0


def test_save_search_and_forget_memories_events(conversation: None) -> None:
    status, body = invoke("save_memories")
    assert status == 200
    assert body["saved"] == 3  # the user's three texts under the default policy; not the agent's answer
    status, body = invoke("search_memories")
    assert status == 200
    texts = [hit["content"]["parts"][0]["text"] for hit in body["memories"]]
    assert texts[0] == LISBON and len(texts) <= 5
    status, body = invoke("forget_memories")
    assert status == 204 and body is None
    assert search() == []


def test_autosave_event_saves_its_record(aws: dict[str, Any]) -> None:
    event = load_event("autosave")
    (record,) = event["Records"]
    assert record["eventSource"] == "aws:dynamodb" and record["eventName"] == "INSERT"
    assert invoke_function("AutoSaveFunction", event) == {"batchItemFailures": []}
    assert search() == [LISBON]
    # A redelivered batch (Lambda retries whole batches) stores nothing twice.
    assert invoke_function("AutoSaveFunction", event) == {"batchItemFailures": []}
    assert search() == [LISBON]


def test_compact_scheduled_event_compacts_a_due_session(conversation: None, monkeypatch: pytest.MonkeyPatch) -> None:
    event = load_event("compact_scheduled")
    assert event["detail-type"] == "Scheduled Event" and event["source"] == "aws.events"
    report = invoke_function("CompactScheduledFunction", event)
    assert report["due"] == 1 and report["compacted"] == 1 and report["failed"] == 0, report
    assert invoke_function("CompactScheduledFunction", event)["due"] == 0  # settled: nothing left due


def test_compact_worker_event_compacts_its_share(conversation: None) -> None:
    # What the dispatcher sends the worker function (one share of the due sessions), run through its handler.
    (function,) = [f for f in functions(TEMPLATE) if sample_for(f) == "compact_worker"]
    handler = load_handler(function_ref(function))
    event = load_event("compact_worker")
    report = handler(event, LambdaContext(function_name=function))
    assert report["due"] == 1 and report["compacted"] == 1 and report["settled"] == 1, report
    status, context = invoke("get_context")
    assert status == 200 and context["summary"] and context["compacted_events"] > 0  # stored, read back
    # Delivered again (a duplicate): nothing more is stored.
    again = handler(event, LambdaContext(function_name=function))
    assert again["compacted"] == 0 and again["failed"] == 0, again


def test_delete_events_event_deletes_the_sample_event_and_its_memory(conversation: None) -> None:
    assert invoke("save_memories")[0] == 200
    assert LISBON in search()
    status, body = invoke("delete_events")
    assert status == 200
    assert body["deleted"] == ["evt-1"] and body["version"] == 5
    assert LISBON not in search()  # the memory saved from it is forgotten
    status, context = invoke("get_context")
    assert status == 200 and LISBON not in json.dumps(context)
    assert invoke("delete_events")[0] == 404  # gone
