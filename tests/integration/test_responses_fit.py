"""Responses that fit: Lambda refuses responses over 6 MB, so reads that could pass it page (or answer 413)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_memory.wire.jsonio import RESPONSE_CAP
from bench.support.aws_counter import RequestCounter
from tests.support.api import Api, Reply, text_event


def on_the_wire(reply: Reply) -> int:
    """What the body takes inside a Lambda proxy result (JSON-escaped)."""
    return len(json.dumps(reply.raw.decode()))


def pages(api: Api, path: str, key: str, **query: Any) -> list[list[Any]]:
    """Every page of a paged GET, following next_token; each must fit the cap."""
    out: list[list[Any]] = []
    token = None
    while True:
        reply = api.request("GET", path, query=query | ({"next_token": token} if token else {}))
        assert reply.status == 200, reply.raw[:300]
        assert on_the_wire(reply) <= RESPONSE_CAP
        out.append(reply.body[key])
        token = reply.body["next_token"]
        if token is None:
            return out


def test_get_pages_events_with_limit_and_next_token(api: Api, counter: RequestCounter) -> None:
    api.create(session_id="s1")
    assert api.append("s1", {"events": [text_event(f"m{i}") for i in range(25)]}).status == 201
    got = pages(api, "/apps/app/users/alice/sessions/s1", "events", limit=10)
    assert [[e["seq"] for e in page] for page in got] == [list(range(1, 11)), list(range(11, 21)), list(range(21, 26))]
    first = api.get("s1", limit=5)
    assert first.headers["etag"] == '"1"' and first.body["version"] == 1
    counter.reset()
    middle = api.get("s1", limit=5, next_token=first.body["next_token"])
    assert [e["content"]["parts"][0]["text"] for e in middle.body["events"]] == [f"m{i}" for i in range(5, 10)]
    # session items (its own, its state's, the user's, the app's) + one page + the session item once more (its
    # deletion count, after the events)
    assert counter.items_read <= 4 + 6 + 1 and counter.count("dynamodb", "Scan") == 0


def test_without_paging_parameters_a_small_session_is_whole_and_has_no_token(api: Api) -> None:
    api.create(session_id="s1")
    api.append("s1", {"events": [text_event(f"m{i}") for i in range(3)]})
    body = api.get("s1").body
    assert len(body["events"]) == 3 and body["next_token"] is None
    recent = api.get("s1", num_recent_events=2, limit=1)
    assert [e["seq"] for e in recent.body["events"]] == [2] and recent.body["next_token"]


@pytest.mark.parametrize("limit", ["0", "1001", "1.0", "abc", "-1", ""])
def test_a_bad_limit_is_400(api: Api, limit: str) -> None:
    api.create(session_id="s1")
    reply = api.request("GET", "/apps/app/users/alice/sessions/s1", query={"limit": limit})
    assert reply.status == 400 and reply.error["field"] == "limit"


def test_a_forged_or_foreign_token_is_400(api: Api) -> None:
    for user, sid in (("alice", "s1"), ("bob", "s1"), ("alice", "s2")):
        api.create(session_id=sid, user=user)
        api.append(sid, {"events": [text_event("a"), text_event("b")]}, user=user)
    token = api.get("s1", limit=1).body["next_token"]
    listing_token = api.request("GET", "/apps/app/users/alice/sessions", query={"limit": 1}).body["next_token"]
    for user, sid, forged in (
        ("alice", "s1", "not-a-token"),
        ("alice", "s1", listing_token),
        ("bob", "s1", token),
        ("alice", "s2", token),
    ):
        reply = api.get(sid, user=user, next_token=forged)
        assert reply.status == 400 and reply.error["field"] == "next_token", (user, sid)
    # A deleted session's token does not read the one re-created under its id.
    assert api.request("DELETE", "/apps/app/users/alice/sessions/s1").status == 204
    api.create(session_id="s1")
    assert api.get("s1", next_token=token).status == 400


def test_a_session_over_the_cap_answers_a_first_page_that_fits_and_a_token(api: Api) -> None:
    api.create(session_id="big")
    for i in range(16):  # 6.4 MB of events: their bodies go to S3
        assert api.append("big", text_event(f"{i:02d}" + "x" * 400_000)).status == 201
    got = pages(api, "/apps/app/users/alice/sessions/big", "events")
    assert len(got) >= 2
    assert [e["content"]["parts"][0]["text"][:2] for page in got for e in page] == [f"{i:02d}" for i in range(16)]


def test_a_listing_of_sessions_with_large_state_pages_by_size(api: Api) -> None:
    for i in range(18):  # 5.2 MB of state
        assert api.create(session_id=f"s{i:02d}", state={"blob": "y" * 290_000}).status == 201
    got = pages(api, "/apps/app/users/alice/sessions", "sessions", limit=100)
    assert len(got) >= 2
    assert [s["id"] for page in got for s in page] == [f"s{i:02d}" for i in range(18)]


def test_a_context_over_the_cap_is_413_naming_max_chars(api: Api) -> None:
    api.create(session_id="big")
    for _ in range(14):
        api.append("big", text_event("z" * 400_000))
    path = "/apps/app/users/alice/sessions/big/context"
    reply = api.request("GET", path)
    assert reply.status == 413
    assert reply.error["code"] == "response_too_large" and reply.error["field"] == "max_chars"
    assert "max_tokens" in reply.error["message"]
    small = api.request("GET", path, query={"max_chars": 1000})
    assert small.status == 200 and len(small.body["messages"][0]["content"]) == 1000


def test_a_huge_num_recent_events_reads_like_all(api: Api) -> None:
    api.create(session_id="s1")
    api.append("s1", {"events": [text_event(f"m{i}") for i in range(3)]})
    # The largest number of events a query string may name (9 digits; more answers 400, see the input bounds).
    for query in ({"num_recent_events": 999_999_999}, {"num_recent_events": 999_999_999, "limit": 2}):
        reply = api.get("s1", **query)
        assert reply.status == 200 and reply.body["events"][0]["seq"] == 1
