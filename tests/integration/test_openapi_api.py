"""GET /openapi.json through the template's routing, and real answers of the API validated against the document
(the response models are the answers' shape, not a wish)."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator

from agent_memory.edge import openapi
from tests.support.api import Api, Reply, text_event

DOCUMENT = openapi.document()


@pytest.fixture(autouse=True)
def _lexical(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBEDDER", "none")


def check(reply: Reply, path: str, method: str) -> None:
    """``reply``'s body is valid against the document's schema for that operation and status."""
    answers = DOCUMENT["paths"][path][method]["responses"]
    assert str(reply.status) in answers, (reply.status, reply.body)
    content = answers[str(reply.status)].get("content")
    if content is None:
        assert not reply.raw
        return
    schema: dict[str, Any] = {**content["application/json"]["schema"], "components": DOCUMENT["components"]}
    Draft202012Validator(schema).validate(reply.body)


def test_the_api_serves_its_openapi_document(api: Api) -> None:
    reply = api.request("GET", "/openapi.json")
    headers = {name.lower(): value for name, value in reply.headers.items()}
    assert reply.status == 200 and headers["content-type"] == "application/json"
    assert reply.body == DOCUMENT
    assert reply.raw.decode() == openapi.document_json()


def test_real_answers_match_the_documented_models(api: Api) -> None:
    sessions = "/apps/{app_name}/users/{user_id}/sessions"
    check(api.create(session_id="s1", state={"user:name": "Ana"}), sessions, "post")
    events = [
        text_event("I am allergic to peanuts", id="u1", custom_metadata={"k": 1}),
        {"author": "agent", "id": "a1", "content": {"parts": [{"function_call": {"name": "f", "args": {"x": 1}}}]}},
    ]
    check(api.append("s1", {"events": events}), sessions + "/{session_id}/events", "post")
    check(api.append("s1", text_event("Noted", author="assistant")), sessions + "/{session_id}/events", "post")
    check(api.get("s1"), sessions + "/{session_id}", "get")
    check(api.request("GET", "/apps/app/users/alice/sessions"), sessions, "get")
    check(api.request("GET", "/apps/app/users/alice/sessions/s1/context"), sessions + "/{session_id}/context", "get")
    check(api.request("POST", "/apps/app/users/alice/sessions/s1/compact"), sessions + "/{session_id}/compact", "post")
    memories = "/apps/{app_name}/users/{user_id}/memories"
    saved = api.request("POST", "/apps/app/users/alice/memories", json_body={"session_id": "s1", "policy": "all"})
    check(saved, memories, "post")
    found = api.request("POST", "/apps/app/users/alice/memories/search", json_body={"query": "peanuts"})
    assert found.body["memories"], found.body
    check(found, memories + "/search", "post")
    check(api.request("GET", "/apps/app/users/alice/sessions/nope"), sessions + "/{session_id}", "get")
    check(api.append("s1", {"events": []}), sessions + "/{session_id}/events", "post")
    check(api.request("DELETE", "/apps/app/users/alice/memories"), memories, "delete")
