"""A slow, unreachable or failing OpenAI-compatible model endpoint, through the real handlers against moto.

The endpoint is an ``httpx.MockTransport`` put where httpx builds its transport, so the providers run as
deployed (their client, the budget's timeouts, the retries; the key read from SSM). Each failure answers in
the project's error shape, names the provider and never the key, and leaves nothing partial behind: no
summary, no memory, no claim that would stop a retry.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from agent_memory.composition import services
from agent_memory.runtime.aws import client
from local.apigw import LambdaContext
from local.streams import stream_mappings
from local.template import load_handler, load_template, schedules
from tests.support.api import Api, Reply, text_event
from tests.support.autosave import stream_records
from tests.support.aws import BUCKET

KEY = "sk-live-0123456789abcdef"
KEY_PARAMETER = "/agent-memory/openai-key"
Handler = Callable[[httpx.Request], httpx.Response]


class Endpoint:
    """The model endpoint: answers with ``self.answer`` and records what it was asked."""

    def __init__(self) -> None:
        self.answer: Handler = self.working
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.answer(request)

    @staticmethod
    def working(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/embeddings"):
            inputs = json.loads(request.content)["input"]
            data = [{"index": i, "embedding": [1.0, float(len(t) % 7), 0.5]} for i, t in enumerate(inputs)]
            return httpx.Response(200, json={"data": data})
        return httpx.Response(200, json={"choices": [{"message": {"content": "The user asked questions."}}]})

    @staticmethod
    def timing_out(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("the model is slow", request=request)

    @staticmethod
    def unreachable(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    @staticmethod
    def failing(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, json={"error": {"message": f"internal error for key {KEY}"}})

    @staticmethod
    def throttling(request: httpx.Request) -> httpx.Response:
        return httpx.Response(429, json={"error": {"message": "rate limited"}})


@pytest.fixture
def endpoint(aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Endpoint:
    """Both model kinds pointed at the mock endpoint, with the key in SSM (moto)."""
    model = Endpoint()
    monkeypatch.setattr(httpx._client, "HTTPTransport", lambda *a, **kw: httpx.MockTransport(model))
    client("ssm").put_parameter(Name=KEY_PARAMETER, Value=KEY, Type="SecureString")
    for prefix, name in (("SUMMARIZER", "gpt-test"), ("EMBEDDER", "embed-test")):
        monkeypatch.setenv(prefix, "openai")
        monkeypatch.setenv(f"{prefix}_MODEL", name)
        monkeypatch.setenv(f"{prefix}_ENDPOINT", "https://llm.example/v1")
        monkeypatch.setenv(f"{prefix}_API_KEY_PARAMETER", KEY_PARAMETER)
    monkeypatch.setenv("COMPACTION_INTERVAL", "3")
    monkeypatch.setenv("EVENT_RETENTION_SIZE", "2")
    monkeypatch.setenv("AUTOSAVE_POLICY", "default")
    return model


FAILURES = [
    (Endpoint.timing_out, 504, "model_timeout"),
    (Endpoint.unreachable, 502, "model_error"),
    (Endpoint.failing, 502, "model_error"),
]


def assert_model_error(reply: Reply, status: int, code: str, what: str) -> None:
    assert reply.status == status, reply.body
    assert reply.error["code"] == code
    assert f"{what} openai (llm.example)" in reply.error["message"]
    assert KEY not in reply.raw.decode()


def chat(api: Api, sid: str, turns: int) -> None:
    events: list[dict[str, Any]] = []
    for i in range(turns):
        events += [{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i}"}]
    assert api.append(sid, {"events": events}).status in (200, 201)


def summary_of(api: Api, sid: str) -> Any:
    reply = api.request("GET", f"/apps/app/users/alice/sessions/{sid}/context")
    assert reply.status == 200, reply.body
    return reply.body["summary"]


# --- compaction on demand -------------------------------------------------------------------------------


@pytest.mark.parametrize(("answer", "status", "code"), FAILURES)
def test_compact_now_with_a_failing_model_answers_in_the_error_shape_and_stores_nothing(
    api: Api, endpoint: Endpoint, answer: Handler, status: int, code: str
) -> None:
    api.create(session_id="s1")
    chat(api, "s1", 5)
    before = api.get("s1").body
    endpoint.answer = answer
    reply = api.request("POST", "/apps/app/users/alice/sessions/s1/compact")
    assert_model_error(reply, status, code, "summarizer")
    assert len(endpoint.requests) == 2  # the request budget's two attempts
    assert endpoint.requests[0].headers["authorization"] == f"Bearer {KEY}"
    after = api.get("s1").body
    assert after["events"] == before["events"] and after["version"] == before["version"]
    assert summary_of(api, "s1") is None

    endpoint.answer = Endpoint.working  # the model is back: the same request compacts
    reply = api.request("POST", "/apps/app/users/alice/sessions/s1/compact")
    assert reply.status == 200 and reply.body["compacted"] is True
    assert summary_of(api, "s1") == "The user asked questions."


def test_compact_now_with_a_throttling_model_answers_503_with_retry_after(api: Api, endpoint: Endpoint) -> None:
    api.create(session_id="s1")
    chat(api, "s1", 5)
    endpoint.answer = Endpoint.throttling
    reply = api.request("POST", "/apps/app/users/alice/sessions/s1/compact")
    assert_model_error(reply, 503, "service_unavailable", "summarizer")
    assert reply.headers["retry-after"] == "1"
    assert summary_of(api, "s1") is None


def test_a_compaction_with_no_time_left_answers_504_without_calling_the_model(api: Api, endpoint: Endpoint) -> None:
    from local.apigw import http_api_event
    from local.template import routes

    api.create(session_id="s1")
    chat(api, "s1", 5)
    (route,) = [r for r in routes(load_template()) if r.path.endswith("/compact")]
    path = "/apps/app/users/alice/sessions/s1/compact"
    event = http_api_event(route, path, {"app_name": "app", "user_id": "alice", "session_id": "s1"})
    # 5.5 s left: the 5 s kept to answer leave no attempt worth starting
    response = load_handler(route)(event, LambdaContext(deadline=time.time() + 5.5))
    assert response["statusCode"] == 504 and '"model_timeout"' in response["body"]
    assert endpoint.requests == []
    assert summary_of(api, "s1") is None


# --- scheduled compaction ---------------------------------------------------------------------------------


def sweep() -> dict[str, Any]:
    (schedule,) = schedules(load_template(), {"CompactionSchedule": "rate(5 minutes)"})
    result: dict[str, Any] = load_handler(schedule)({"detail-type": "Scheduled Event"}, LambdaContext())
    return result


@pytest.mark.parametrize(("answer", "status", "code"), FAILURES)
def test_the_sweep_leaves_the_session_due_when_the_model_fails(
    api: Api, endpoint: Endpoint, answer: Handler, status: int, code: str
) -> None:
    api.create(session_id="s1")
    chat(api, "s1", 5)
    endpoint.answer = answer
    report = sweep()
    assert report["due"] == 1 and report["failed"] == 1 and report["compacted"] == 0 and report["settled"] == 0
    assert KEY not in str(report["failures"])
    assert summary_of(api, "s1") is None
    endpoint.answer = Endpoint.working
    report = sweep()
    assert report["due"] == 1 and report["compacted"] == 1 and report["failed"] == 0  # still due, done now
    assert summary_of(api, "s1") == "The user asked questions."


# --- memory save, search and auto-save with a remote embedder ---------------------------------------------


def seed(api: Api) -> None:
    api.create(session_id="s1")
    events = [
        text_event("I am allergic to peanuts", id="u1"),
        text_event("Noted.", author="assistant", id="a1"),
        text_event("My sister Ana lives in Porto", id="u2"),
    ]
    assert api.append("s1", {"events": events}).status in (200, 201)


def stored_memories(aws: dict[str, Any]) -> list[str]:
    listed = aws["s3"].list_objects_v2(Bucket=BUCKET, Prefix="memories/")
    return [o["Key"] for o in listed.get("Contents", [])]


def save(api: Api) -> Reply:
    return api.request("POST", "/apps/app/users/alice/memories", json_body={"session_id": "s1"})


@pytest.mark.parametrize(("answer", "status", "code"), FAILURES)
def test_save_with_a_failing_embedder_stores_nothing_and_a_retry_saves(
    api: Api, aws: dict[str, Any], endpoint: Endpoint, answer: Handler, status: int, code: str
) -> None:
    seed(api)
    endpoint.answer = answer
    assert_model_error(save(api), status, code, "embedder")
    assert stored_memories(aws) == []
    endpoint.answer = Endpoint.working
    reply = save(api)
    assert reply.status == 200 and reply.body["saved"] == 2  # no claim was left to block the retry
    assert stored_memories(aws)


def test_search_with_a_failing_embedder_answers_lexically(api: Api, endpoint: Endpoint) -> None:
    seed(api)
    assert save(api).status == 200
    endpoint.answer = Endpoint.timing_out
    reply = api.request("POST", "/apps/app/users/alice/memories/search", json_body={"query": "peanuts"})
    assert reply.status == 200
    assert reply.body["memories"][0]["content"]["parts"][0]["text"] == "I am allergic to peanuts"


def autosave(records: list[dict[str, Any]]) -> dict[str, Any]:
    (mapping,) = stream_mappings(load_template(), {"AutoSaveBatchSize": "10", "AutoSaveBatchingWindowSeconds": "60"})
    result: dict[str, Any] = load_handler(mapping)({"Records": records}, LambdaContext(deadline=time.time() + 300))
    return result


@pytest.mark.parametrize(("answer", "status", "code"), FAILURES)
def test_autosave_with_a_failing_embedder_reports_the_records_for_retry(
    api: Api, aws: dict[str, Any], endpoint: Endpoint, answer: Handler, status: int, code: str
) -> None:
    seed(api)
    records = stream_records(aws)
    endpoint.answer = answer
    result = autosave(records)
    failed = {f["itemIdentifier"] for f in result["batchItemFailures"]}
    events = {c.sequence for c in services().session_store.changes(records)}  # the records holding an event
    assert len(events) == 3 and failed == events
    assert stored_memories(aws) == []
    endpoint.answer = Endpoint.working
    retried = [r for r in records if r["dynamodb"]["SequenceNumber"] in failed]
    assert autosave(retried) == {"batchItemFailures": []}
    assert save(api).body["saved"] == 0  # auto-save stored them all on the retry
    assert len(stored_memories(aws)) >= 1
