"""Context and compaction routes, and the scheduled sweep, through API Gateway events against moto."""

from __future__ import annotations

from typing import Any

import pytest

from bench.support.aws_counter import RequestCounter
from local.template import load_template
from tests.support.api import Api
from tests.support.context_api import compact, context, sweep

pytestmark = pytest.mark.usefixtures("small_compaction_settings")


def chat(api: Api, sid: str, turns: int, start: int = 0) -> None:
    events: list[dict[str, Any]] = []
    for i in range(start, start + turns):
        events.append({"role": "user", "content": f"question {i}"})
        events.append({"role": "assistant", "content": f"answer {i}"})
    api.append(sid, {"events": events})


def test_context_of_a_fresh_conversation_is_its_messages(api: Api) -> None:
    api.create(session_id="s1")
    chat(api, "s1", 2)
    body = context(api, "s1")
    assert body["messages"] == [
        {"role": "user", "content": "question 0"},
        {"role": "assistant", "content": "answer 0"},
        {"role": "user", "content": "question 1"},
        {"role": "assistant", "content": "answer 1"},
    ]
    assert body["summary"] is None and body["compacted_events"] == 0 and body["dropped_events"] == 0
    assert body["token_estimate"] > 0


def test_tool_calls_become_openai_tool_messages_and_stay_paired(api: Api) -> None:
    api.create(session_id="s1")
    api.append("s1", {"role": "user", "content": "weather in Paris?"})
    api.append(
        "s1",
        {
            "author": "agent",
            "content": {"role": "model", "parts": [{"function_call": {"id": "c1", "name": "wx", "args": {"q": 1}}}]},
        },
    )
    api.append(
        "s1",
        {
            "author": "agent",
            "content": {
                "role": "user",
                "parts": [{"function_response": {"id": "c1", "name": "wx", "response": {"t": 21}}}],
            },
        },
    )
    api.append("s1", {"role": "assistant", "content": "It is 21 degrees."})
    messages = context(api, "s1")["messages"]
    assert messages[1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "wx", "arguments": '{"q":1}'}}],
    }
    assert messages[2] == {"role": "tool", "content": '{"t":21}', "tool_call_id": "c1"}
    # A budget of two messages cannot hold the pair with the final answer: the pair goes out whole.
    assert context(api, "s1", max_messages=2)["messages"] == [{"role": "assistant", "content": "It is 21 degrees."}]
    assert [m["role"] for m in context(api, "s1", max_messages=3)["messages"]] == ["assistant", "tool", "assistant"]


def test_full_format_carries_voice_metadata(api: Api) -> None:
    api.create(session_id="s1")
    meta = {"interrupted": True, "interrupt_timestamp": 1700000101.0, "original": "The weather in Paris is sunny."}
    api.append("s1", {"role": "assistant", "content": "The weather in Par", "turn_id": "t7", "metadata": meta})
    (message,) = context(api, "s1", format="full")["messages"]
    assert message["turn_id"] == "t7" and message["metadata"] == meta and message["timestamp"] > 0
    (adk,) = context(api, "s1", format="adk")["messages"]
    assert adk == {"role": "model", "parts": [{"text": "The weather in Par"}]}


def test_budgets_and_options(api: Api) -> None:
    api.create(session_id="s1")
    chat(api, "s1", 10)
    assert len(context(api, "s1", max_messages=3)["messages"]) == 3
    body = context(api, "s1", max_tokens=30)
    assert body["token_estimate"] <= 30 and body["dropped_events"] > 0
    assert sum(len(m["content"]) for m in context(api, "s1", max_chars=40)["messages"]) <= 40
    first = context(api, "s1", max_messages=3, keep_first="true")["messages"]
    assert first[0]["content"] == "question 0" and first[-1]["content"] == "answer 9"
    started = context(api, "s1", max_messages=3, start_with_user="true")["messages"]
    assert started[0]["role"] == "user"
    tail = context(api, "s1", max_chars=4)["messages"]
    assert tail == [{"role": "assistant", "content": "er 9"}]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"format": "xml"}, "format"),
        ({"max_tokens": "0"}, "max_tokens"),
        ({"max_messages": "lots"}, "max_messages"),
        ({"keep_first": "maybe"}, "keep_first"),
    ],
)
def test_bad_context_parameters_are_400(api: Api, query: dict[str, str], field: str) -> None:
    api.create(session_id="s1")
    reply = api.request("GET", "/apps/app/users/alice/sessions/s1/context", query=query)
    assert reply.status == 400 and reply.error["field"] == field


def test_missing_session_is_404(api: Api) -> None:
    assert api.request("GET", "/apps/app/users/alice/sessions/nope/context").status == 404
    assert api.request("POST", "/apps/app/users/alice/sessions/nope/compact").status == 404


def test_compact_now_then_context_starts_with_one_summary(api: Api) -> None:
    api.create(session_id="s1")
    chat(api, "s1", 5)
    first = compact(api, "s1")
    assert first["compacted"] is True
    compaction = first["event"]["actions"]["compaction"]
    assert "question 0" in compaction["compacted_content"]["parts"][0]["text"]
    again = compact(api, "s1")
    assert again["compacted"] is False and "nothing to compact" in again["reason"]
    body = context(api, "s1")
    assert body["messages"][0]["role"] == "system" and body["summary"]
    raw = [m["content"] for m in body["messages"][1:]]
    assert raw == ["question 4", "answer 4"]  # the retained tail; nothing the summary covers
    assert body["compacted_events"] == 8

    chat(api, "s1", 3, start=5)
    second = compact(api, "s1")
    assert second["compacted"] is True
    meta = second["event"]["custom_metadata"]["agent_memory:compaction"]
    assert meta["start_seq"] == 1 and meta["event_count"] == 14  # rolled up from the first event
    body = context(api, "s1")
    assert [m["role"] for m in body["messages"]].count("system") == 1
    assert [m["content"] for m in body["messages"][1:]] == ["question 7", "answer 7"]
    # Raw events stay in the session.
    assert len([e for e in api.get("s1").body["events"] if "compaction" not in e["actions"]]) == 16


def test_context_reads_the_summary_and_what_follows_not_the_session(api: Api, counter: RequestCounter) -> None:
    api.create(session_id="s1")
    for block in range(5):
        chat(api, "s1", 40, start=block * 40)
    assert compact(api, "s1")["compacted"] is True
    chat(api, "s1", 1, start=500)
    counter.reset()
    body = context(api, "s1")
    # The events' Query, then a one-item Query of the session's deletion count (the marks before the read came with
    # the session item).
    assert counter.calls == [("dynamodb", "BatchGetItem"), ("dynamodb", "Query"), ("dynamodb", "Query")]
    # session item + its state item + the user's state item (it holds their session count) + the retained 2 + the
    # compaction event + the 2 new ones + the session item once more (the deletion count); not the 402 events.
    assert counter.items_read == 9
    assert [m["content"] for m in body["messages"][1:]] == ["question 199", "answer 199", "question 500", "answer 500"]


def test_scheduled_sweep_compacts_due_sessions_and_settles_them(api: Api) -> None:
    api.create(session_id="busy")
    api.create(session_id="quiet")
    chat(api, "busy", 5)
    chat(api, "quiet", 1)
    report = sweep()
    assert report["due"] == 2 and report["compacted"] == 1 and report["settled"] == 2 and report["failed"] == 0
    assert context(api, "busy")["summary"]
    assert context(api, "quiet")["summary"] is None
    assert sweep()["due"] == 0  # nothing new: nothing due
    chat(api, "quiet", 4, start=1)
    assert sweep()["compacted"] == 1


def test_prompt_template_without_placeholder_is_rejected_at_start_up(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from agent_memory.config import settings

    settings.cache_clear()
    monkeypatch.setenv("SUMMARIZER_PROMPT_TEMPLATE", "Summarise please.")
    path = load_template()["Resources"]["CompactSessionFunction"]["Properties"]["CodeUri"] + "app.py"
    spec = importlib.util.spec_from_file_location("_startup_check", path)
    assert spec is not None and spec.loader is not None
    with pytest.raises(ValueError, match="conversation_history"):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    settings.cache_clear()


def test_an_if_match_taken_before_a_scheduled_compaction_still_matches_after_it(api: Api) -> None:
    """An agent holding the session across the schedule's compaction appends without a stale-session error."""
    api.create(session_id="s1")
    chat(api, "s1", 5)
    held = api.get("s1")
    etag, update_time = held.headers["etag"], held.body["last_update_time"]
    assert sweep()["compacted"] == 1
    after = api.get("s1")
    assert any("compaction" in e.get("actions", {}) for e in after.body["events"])  # the summary is there
    assert after.headers["etag"] == etag and after.body["last_update_time"] == update_time
    reply = api.append("s1", {"role": "user", "content": "next"}, headers={"If-Match": etag})
    assert reply.status == 201, reply.body
    seqs = [e["seq"] for e in api.get("s1").body["events"]]
    assert seqs == sorted(set(seqs))  # no seq shared by the summary and the append
