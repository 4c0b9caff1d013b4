"""Memory in the context through the template's routes (moto): base system messages (repeated parameters, commas and
all, or a JSON body), memories saved in one session recalled in another with their dates, a forgotten memory never
recalled, and the budgets holding."""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import quote

import pytest

from agent_memory.policy.context import MEMORIES_PREFIX
from agent_memory.policy.profile import PROFILE_HEADER
from bench.support.aws_counter import RequestCounter
from local.apigw import http_api_event
from local.template import load_template, routes
from tests.support.api import Api

MAY_8 = 1683540000.0  # 2023-05-08T10:00:00Z
CTX = "/apps/app/users/alice/sessions/{sid}/context"


def get_context(api: Api, sid: str, raw_query: str = "", status: int = 200) -> Any:
    reply = api.request("GET", CTX.format(sid=sid) + ("?" + raw_query if raw_query else ""))
    assert reply.status == status, reply.body
    return reply.body


def post_context(api: Api, sid: str, body: Any, status: int = 200) -> Any:
    reply = api.request("POST", CTX.format(sid=sid), json_body=body)
    assert reply.status == status, reply.body
    return reply.body


def said(text: str, author: str = "user", timestamp: float | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {
        "author": author,
        "content": {"role": "user" if author == "user" else "model", "parts": [{"text": text}]},
    }
    if timestamp is not None:
        event["timestamp"] = timestamp
    return event


@pytest.fixture
def remembered(api: Api) -> dict[str, Any]:
    """Session ``earlier`` on 2023-05-08, saved to memory; session ``now`` asks about it."""
    assert api.create(session_id="earlier").status == 201
    events = [
        said("I am allergic to peanuts, even a trace makes me ill", timestamp=MAY_8),
        said("Noted: no peanuts.", author="agent", timestamp=MAY_8 + 1),
        said("My sister Rita lives in Porto", timestamp=MAY_8 + 2),
    ]
    assert api.append("earlier", {"events": events}).status == 201
    saved = api.request("POST", "/apps/app/users/alice/memories", json_body={"session_id": "earlier"})
    assert saved.status == 200 and saved.body["saved"] == 2, saved.body  # the default policy: what the user said
    assert api.create(session_id="now").status == 201
    assert api.append("now", said("Which snacks with peanuts could I eat at the party?")).status == 201
    return saved.body


def test_memories_saved_in_one_session_appear_in_another_with_their_dates(api: Api, remembered: Any) -> None:
    body = get_context(api, "now", "memories=2&format=full")
    first = body["messages"][0]
    assert first["role"] == "system" and first["metadata"]["kind"] == "memories"
    assert first["content"].startswith(MEMORIES_PREFIX + "- [2023-05-08] I am allergic to peanuts")
    assert [m["id"] for m in first["metadata"]["memories"]] == [m["id"] for m in body["memories"]]
    assert body["messages"][-1]["content"] == "Which snacks with peanuts could I eat at the party?"
    # The same through the body route, and with a query of its own.
    posted = post_context(api, "now", {"memories": 2, "format": "full"})
    assert posted["messages"] == body["messages"]
    sister = post_context(api, "now", {"memories": 1, "memory_query": "where does Rita live"})
    assert sister["messages"][0]["content"] == MEMORIES_PREFIX + "- [2023-05-08] My sister Rita lives in Porto"
    # A query holding commas, as a query parameter: one value, not split.
    by_get = get_context(api, "now", "memories=1&memory_query=" + quote("Rita, my sister, where does she live"))
    assert by_get["messages"][0] == sister["messages"][0]


def test_a_forgotten_memory_no_longer_appears(api: Api, remembered: Any) -> None:
    (peanuts,) = get_context(api, "now", "memories=1")["memories"]
    forgot = api.request("DELETE", f"/apps/app/users/alice/memories/{peanuts['id']}")
    assert forgot.status == 204
    body = get_context(api, "now", "memories=5&memory_min_score=0")
    assert peanuts["id"] not in [m["id"] for m in body["memories"]]
    assert not any("allergic" in (m["content"] or "") for m in body["messages"])


def test_another_users_memories_never_appear(api: Api, remembered: Any) -> None:
    api.request("POST", "/apps/app/users/bob/sessions", json_body={"session_id": "bob"})
    api.request("POST", "/apps/app/users/bob/sessions/bob/events", json_body=said("Are peanuts ok for me?"))
    reply = api.request("GET", "/apps/app/users/bob/sessions/bob/context?memories=5&memory_min_score=0")
    assert reply.status == 200 and reply.body["memories"] == []


def test_repeated_system_parameters_keep_their_commas_and_order(api: Api) -> None:
    api.create(session_id="s1")
    api.append("s1", said("hello"))
    first, second = "You are kind, brief, and exact.", "Answer in French; say 'oui, bien sûr' & smile"
    body = get_context(api, "s1", f"system={quote(first)}&system={quote(second)}")
    assert body["messages"] == [
        {"role": "system", "content": first},
        {"role": "system", "content": second},
        {"role": "user", "content": "hello"},
    ]
    adk = get_context(api, "s1", f"system={quote(first)}&format=adk")["messages"]
    assert adk[0] == {"role": "model", "parts": [{"text": first}]}


def test_a_long_system_prompt_goes_in_the_body(api: Api) -> None:
    api.create(session_id="s1")
    api.append("s1", said("hello"))
    prompt = "Follow these rules, always. " * 1000  # 28 KB: no URL takes it through API Gateway
    body = post_context(api, "s1", {"system": [prompt, "second"], "max_tokens": 10_000})
    assert [m["content"] for m in body["messages"]] == [prompt, "second", "hello"]


def chars(message: dict[str, Any]) -> int:
    return len(message["content"] or "")


@pytest.mark.parametrize("budget", ["max_tokens=60", "max_chars=200", "max_messages=3"])
def test_budgets_hold_and_memories_give_way_first(api: Api, remembered: Any, budget: str) -> None:
    for i in range(6):
        api.append("now", said(f"more about the party, part {i}", author="user" if i % 2 else "agent"))
    body = get_context(api, "now", f"system=Be+brief.&memories=3&profile=false&{budget}")
    messages = body["messages"]
    name, value = budget.split("=")
    limit = int(value)
    if name == "max_tokens":
        assert sum(4 + math.ceil(chars(m) / 4) for m in messages) == body["token_estimate"] <= limit
    elif name == "max_chars":
        assert sum(chars(m) for m in messages) <= limit
    else:
        assert len(messages) <= limit
    assert messages[0] == {"role": "system", "content": "Be brief."}
    # The conversation does not fit whole: no memory was added, the newest messages were kept.
    assert body["memories"] == [] and body["dropped_events"] > 0
    assert messages[-1]["content"] == "more about the party, part 5"


def test_the_system_messages_alone_over_budget_are_refused(api: Api) -> None:
    api.create(session_id="s1")
    reply = api.request("GET", CTX.format(sid="s1") + "?system=" + quote("a long rule " * 20) + "&max_tokens=10")
    assert reply.status == 422 and reply.error["field"] == "system"
    posted = api.request("POST", CTX.format(sid="s1"), json_body={"system": ["a long rule " * 20], "max_chars": 5})
    assert posted.status == 422 and posted.error["field"] == "system"


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("memories=51", "memories"),
        ("memories=-1", "memories"),
        ("memories=1.5", "memories"),
        ("memory_query=cats", "memory_query"),
        ("memories=2&memory_min_score=2", "memory_min_score"),
        ("memory_min_score=0.5", "memory_min_score"),
        ("system=", "system"),
        ("system=ok&system=+", "system"),
        ("profile=maybe", "profile"),
    ],
)
def test_bad_parameters_are_refused(api: Api, query: str, field: str) -> None:
    api.create(session_id="s1")
    reply = api.request("GET", CTX.format(sid="s1") + "?" + query)
    assert reply.status == 400 and reply.error["field"] == field, reply.body


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"memories": 51}, "memories"),
        ({"memories": "2"}, "memories"),
        ({"memory_query": "cats"}, "memory_query"),
        ({"system": [""]}, "system[0]"),
        ({"system": "one string"}, "system"),
        ({"format": "xml"}, "format"),
        ({"profile": "yes"}, "profile"),
        ({"unknown": 1}, "unknown"),
    ],
)
def test_bad_bodies_are_refused(api: Api, body: dict[str, Any], field: str) -> None:
    api.create(session_id="s1")
    reply = api.request("POST", CTX.format(sid="s1"), json_body=body)
    assert reply.status == 422 and reply.error["field"] == field, reply.body


def test_a_context_without_memories_reads_no_memory(api: Api, remembered: Any, counter: RequestCounter) -> None:
    counter.reset()
    get_context(api, "now", "system=Be+brief.&max_tokens=500")
    # The session with its state, its events, its deletion count after them: no memory read.
    assert counter.calls == [("dynamodb", "BatchGetItem"), ("dynamodb", "Query"), ("dynamodb", "Query")]
    counter.reset()
    get_context(api, "now", "memories=2")
    assert any(service == "s3" for service, _ in counter.calls)


def test_unknown_session_is_404_even_with_memories(api: Api) -> None:
    reply = api.request("GET", CTX.format(sid="nope") + "?memories=3")
    assert reply.status == 404 and reply.error["field"] == "session_id"


def test_the_profile_is_a_system_message_and_a_forgotten_fact_leaves_it(api: Api, remembered: Any) -> None:
    body = get_context(api, "now", "system=Be+brief.&profile=true&memories=1&format=full")
    base, profile, memories, question = body["messages"]
    assert base["content"] == "Be brief." and question["role"] == "user"
    assert profile["metadata"]["kind"] == "profile" and body["profile"] is True
    assert profile["content"].startswith(PROFILE_HEADER + "\n")
    assert "- Allergic to peanuts" in profile["content"] and "- Sister: Rita" in profile["content"]
    assert memories["metadata"]["kind"] == "memories"
    (peanuts,) = [i for i in profile["metadata"]["memory_ids"] if i == body["memories"][0]["id"]]
    assert api.request("DELETE", f"/apps/app/users/alice/memories/{peanuts}").status == 204
    after = post_context(api, "now", {"profile": True, "format": "adk"})
    text = after["messages"][0]["parts"][0]["text"]
    assert "Sister: Rita" in text and "peanut" not in text.lower()


def test_the_local_api_gives_repeated_parameters_as_api_gateway_does() -> None:
    """rawQueryString as sent; queryStringParameters decoded, a repeated name's values joined by commas."""
    (route,) = [r for r in routes(load_template()) if r.function == "GetContextFunction" and r.method == "GET"]
    path = "/apps/app/users/alice/sessions/s1/context"
    raw = "system=a%2Cb&system=c%20d&memories=2"
    event = http_api_event(route, path, route.match("GET", path) or {}, raw_query=raw)
    assert event["rawQueryString"] == raw
    assert event["queryStringParameters"] == {"system": "a,b,c d", "memories": "2"}
    assert "queryStringParameters" not in http_api_event(route, path, {}, raw_query="")
