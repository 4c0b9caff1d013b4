"""A context with a budget reads about its window, not the session, before compaction as after it: the handlers
through API Gateway events against moto, requests and items counted by botocore hooks."""

from __future__ import annotations

from typing import Any

import pytest

from bench.support.aws_counter import RequestCounter
from tests.support.api import Api

# The context routes' tests' compaction settings (tests/integration/conftest.py), as there.
pytestmark = pytest.mark.usefixtures("small_compaction_settings")

CTX = "/apps/app/users/alice/sessions/{sid}/context"


def chat(api: Api, sid: str, turns: int, start: int = 0) -> None:
    for first in range(start, start + turns, 50):
        events: list[dict[str, Any]] = []
        for i in range(first, min(first + 50, start + turns)):
            events.append({"role": "user", "content": f"question {i}"})
            events.append({"role": "assistant", "content": f"answer {i}"})
        assert api.append(sid, {"events": events}).status == 201


def context(api: Api, sid: str, method: str = "GET", **query: Any) -> Any:
    if method == "POST":
        reply = api.request("POST", CTX.format(sid=sid), json_body=query)
    else:
        reply = api.request("GET", CTX.format(sid=sid), query=query or None)
    assert reply.status == 200, reply.body
    return reply.body


@pytest.fixture
def thousand(api: Api) -> Api:
    """A 1,000-event chat, never compacted."""
    assert api.create(session_id="long").status == 201
    chat(api, "long", 500)
    return api


def test_the_last_20_messages_of_a_1000_event_session_read_about_20_items(
    thousand: Api, counter: RequestCounter
) -> None:
    whole = context(thousand, "long")
    counter.reset()
    body = context(thousand, "long", max_messages="20")
    assert body["messages"] == whole["messages"][-20:]
    assert body["dropped_events"] == 980 and body["summary"] is None
    # The session, its state and the user items, one newest-first page (24), the oldest stored seq (1 item, for
    # dropped_events), the deletion count after the events (1 item); not the 1,000.
    assert counter.items_read <= 3 + 24 + 1 + 1, counter.calls
    assert counter.count("dynamodb") == 4 and counter.count("dynamodb", "Scan") == 0
    assert counter.count("s3") == 0
    # POST takes the same parameters: the same answer, read the same way.
    counter.reset()
    assert context(thousand, "long", "POST", max_messages=20) == body
    assert counter.items_read <= 29


def test_a_token_budget_reads_about_what_fits(thousand: Api, counter: RequestCounter) -> None:
    whole = context(thousand, "long")
    counter.reset()
    body = context(thousand, "long", max_tokens="300", format="full")
    kept = len(body["messages"])
    assert 30 <= kept <= 50 and body["token_estimate"] <= 300
    assert [m["content"] for m in body["messages"]] == [m["content"] for m in whole["messages"][-kept:]]
    assert body["dropped_events"] == 1_000 - kept
    assert counter.items_read <= 2 * kept + 10, counter.items_read


def test_a_summary_older_than_the_window_still_comes_first(thousand: Api, counter: RequestCounter) -> None:
    reply = thousand.request("POST", "/apps/app/users/alice/sessions/long/compact")
    assert reply.status == 200 and reply.body["compacted"] is True
    chat(thousand, "long", 100, start=500)  # 200 events after the summary
    whole = context(thousand, "long")
    counter.reset()
    body = context(thousand, "long", max_messages="5")
    assert body["messages"][0] == whole["messages"][0] and body["messages"][0]["role"] == "system"
    assert body["messages"][1:] == whole["messages"][-4:]
    assert body["summary"] == whole["summary"] and body["compacted_events"] == whole["compacted_events"]
    assert body["dropped_events"] == 2 + 200 - 4  # the retained 2 and the new 200, less the 4 kept
    # The session (its item, its state item, the user's), a page of the tail, the oldest stored seq, the summary
    # found forward from the watermark (a page), each read followed by the deletion count.
    assert counter.items_read <= 3 + 9 + 1 + 1 + 16 + 1, counter.calls


def test_base_system_messages_over_the_budget_are_still_refused(thousand: Api) -> None:
    reply = thousand.request(
        "GET", CTX.format(sid="long"), query={"max_chars": "5", "system": "You are a helpful travel agent."}
    )
    assert reply.status == 422 and reply.error["field"] == "system"


def test_a_session_read_after_the_summary_reads_the_window_not_the_history(
    thousand: Api, counter: RequestCounter
) -> None:
    """What ADK's Runner reads every turn (``after_summary``): the summary and the events after what it covers, in
    about as many items as it answers, at 1,000 events as at 10."""
    assert thousand.request("POST", "/apps/app/users/alice/sessions/long/compact").body["compacted"] is True
    chat(thousand, "long", 3, start=500)
    counter.reset()
    window = thousand.get("long", after_summary="true")
    assert window.status == 200
    events = window.body["events"]
    summaries = [e for e in events if (e.get("actions") or {}).get("compaction")]
    assert len(summaries) == 1 and len(events) == 2 + 1 + 6  # the 2 raw events kept, the summary, 3 turns after
    assert counter.items_read <= len(events) + 10, counter.items_read
