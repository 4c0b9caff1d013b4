"""CompactionService over the in-memory store: on demand, roll-up, the context after it, the due sweep, races."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent_memory.errors import InvalidInput, SessionNotFound
from agent_memory.policy.context import ContextOptions
from agent_memory.policy.messages import COMPACTION_META
from agent_memory.policy.state import ScopedDelta
from agent_memory.providers.ports import ToolCall, ToolResult, Turn
from agent_memory.service.compaction import CompactionService, event_turn
from agent_memory.service.context import ContextService
from agent_memory.service.sessions import SessionService
from agent_memory.stores.inmemory import InMemorySessionStore
from agent_memory.stores.ports import NewEvent
from tests.support.compaction import NOW, SETTINGS, FakeSummarizer, add_invocations, all_events, compaction_events, key


@pytest.fixture
def store() -> InMemorySessionStore:
    return InMemorySessionStore()


@pytest.fixture
def sessions(store: InMemorySessionStore) -> SessionService:
    return SessionService(store, None, clock=lambda: NOW)


@pytest.fixture
def summarizer() -> FakeSummarizer:
    return FakeSummarizer()


@pytest.fixture
def service(store: InMemorySessionStore, summarizer: FakeSummarizer) -> CompactionService:
    return CompactionService(store, summarizer, SETTINGS, clock=lambda: NOW)


# --------------------------------------------------------------------------------------------------------------
# compact (on demand)
# --------------------------------------------------------------------------------------------------------------


def test_compact_stores_a_compaction_event(
    service: CompactionService, sessions: SessionService, store: InMemorySessionStore, summarizer: FakeSummarizer
) -> None:
    add_invocations(sessions, "s1", 4)  # seqs 1..8
    outcome = service.compact("app", "bob", "s1")
    assert outcome.compacted is True
    event = outcome.event
    assert event is not None
    assert event["seq"] == 9
    assert event["author"] == "user"  # as ADK's summarizer writes it (never an unknown agent to ADK)
    assert event["timestamp"] == NOW
    compaction = event["actions"]["compaction"]
    assert compaction["start_timestamp"] == 1000.0  # the first covered event
    assert compaction["end_timestamp"] == 1005.0  # seq 6, the last covered event
    assert compaction["compacted_content"]["parts"] == [{"text": "SUMMARY 1"}]
    assert event["custom_metadata"][COMPACTION_META] == {
        "start_seq": 1,
        "end_seq": 6,
        "event_count": 6,
        "trigger": "manual",
        "summarizer": "fake",
    }
    assert outcome.body() == {"compacted": True, "event": event}

    [(turns, previous)] = summarizer.calls
    assert previous is None
    assert [t.text for t in turns] == [f"s1 {who} {i}" for i in range(3) for who in ("user", "agent")]

    stored = all_events(store)
    assert len(stored) == 9  # raw events are kept
    assert [e["seq"] for e in stored if not e.get("actions", {}).get("compaction")] == list(range(1, 9))
    record = store.get_session(key())
    assert record is not None
    assert record.summary_event_id == event["id"]
    assert record.summary_end_seq == 6


def test_second_compact_with_nothing_new(
    service: CompactionService, sessions: SessionService, store: InMemorySessionStore, summarizer: FakeSummarizer
) -> None:
    add_invocations(sessions, "s1", 4)
    assert service.compact("app", "bob", "s1").compacted
    again = service.compact("app", "bob", "s1")
    assert again.compacted is False
    assert again.reason
    assert again.event is None
    assert again.body() == {"compacted": False, "reason": again.reason}
    assert len(all_events(store)) == 9
    assert len(compaction_events(store)) == 1
    assert len(summarizer.calls) == 1


def test_compact_below_retention_is_not_compacted(
    service: CompactionService, sessions: SessionService, store: InMemorySessionStore, summarizer: FakeSummarizer
) -> None:
    add_invocations(sessions, "s1", 1)
    outcome = service.compact("app", "bob", "s1")
    assert outcome.compacted is False and outcome.reason
    assert compaction_events(store) == []
    assert summarizer.calls == []


def test_second_compaction_rolls_up(
    service: CompactionService, sessions: SessionService, store: InMemorySessionStore, summarizer: FakeSummarizer
) -> None:
    add_invocations(sessions, "s1", 4)  # seqs 1..8
    first = service.compact("app", "bob", "s1").event
    assert first is not None
    add_invocations(sessions, "s1", 3, start=4)  # seqs 10..15
    outcome = service.compact("app", "bob", "s1")
    assert outcome.compacted and outcome.event is not None
    second = outcome.event

    turns, previous = summarizer.calls[1]
    assert previous == "SUMMARY 1"
    texts = [t.text for t in turns]
    # overlap: the last invocation the first summary covered; then the new events up to the retained tail
    assert texts[:2] == ["s1 user 2", "s1 agent 2"]
    assert texts[2:] == ["s1 user 3", "s1 agent 3", "s1 user 4", "s1 agent 4", "s1 user 5", "s1 agent 5"]
    assert not any(t.text.startswith("SUMMARY") for t in turns)

    first_meta = first["custom_metadata"][COMPACTION_META]
    meta = second["custom_metadata"][COMPACTION_META]
    assert meta["start_seq"] == first_meta["start_seq"] == 1
    assert meta["end_seq"] == 13
    assert meta["event_count"] == 6 + 6
    assert second["actions"]["compaction"]["start_timestamp"] == first["actions"]["compaction"]["start_timestamp"]
    assert second["actions"]["compaction"]["compacted_content"]["parts"] == [{"text": "SUMMARY 2"}]
    record = store.get_session(key())
    assert record is not None
    assert record.summary_event_id == second["id"] and record.summary_end_seq == 13


def test_compact_missing_session(service: CompactionService) -> None:
    with pytest.raises(SessionNotFound):
        service.compact("app", "bob", "nope")


@pytest.mark.parametrize("field", ["app_name", "user_id", "session_id"])
@pytest.mark.parametrize("bad", ["a b", "", "-x", "x" * 129])
def test_compact_bad_identifiers(service: CompactionService, field: str, bad: str) -> None:
    ids = {"app_name": "app", "user_id": "bob", "session_id": "s1"}
    ids[field] = bad
    with pytest.raises(InvalidInput) as info:
        service.compact(ids["app_name"], ids["user_id"], ids["session_id"])
    assert info.value.field == field


# --------------------------------------------------------------------------------------------------------------
# The context after compaction
# --------------------------------------------------------------------------------------------------------------


def test_context_after_compaction_is_summary_then_uncovered_events(
    service: CompactionService, sessions: SessionService, store: InMemorySessionStore
) -> None:
    add_invocations(sessions, "s1", 4)
    service.compact("app", "bob", "s1")
    context = ContextService(store).get_context("app", "bob", "s1", ContextOptions())
    messages = context["messages"]
    assert messages[0]["role"] == "system" and "SUMMARY 1" in messages[0]["content"]
    assert [m["content"] for m in messages[1:]] == ["s1 user 3", "s1 agent 3"]
    assert context["summary"] == "SUMMARY 1"
    assert context["compacted_events"] == 6


def test_context_after_two_compactions_has_one_summary(
    service: CompactionService, sessions: SessionService, store: InMemorySessionStore
) -> None:
    add_invocations(sessions, "s1", 4)
    service.compact("app", "bob", "s1")
    add_invocations(sessions, "s1", 3, start=4)
    service.compact("app", "bob", "s1")
    add_invocations(sessions, "s1", 1, start=7)
    context = ContextService(store).get_context("app", "bob", "s1", ContextOptions(format="full"))
    messages = context["messages"]
    assert [m["role"] for m in messages].count("system") == 1
    assert messages[0]["role"] == "system" and "SUMMARY 2" in messages[0]["content"]
    assert not any("SUMMARY 1" in (m["content"] or "") for m in messages)
    assert [m["content"] for m in messages[1:]] == ["s1 user 6", "s1 agent 6", "s1 user 7", "s1 agent 7"]
    covered = {f"s1 {who} {i}" for i in range(6) for who in ("user", "agent")}
    assert not covered & {m["content"] for m in messages}
    assert context["compacted_events"] == 12


# --------------------------------------------------------------------------------------------------------------
# The due sweep
# --------------------------------------------------------------------------------------------------------------


def test_appends_make_sessions_due(sessions: SessionService, store: InMemorySessionStore) -> None:
    sessions.create_session(app_name="app", user_id="bob", session_id="idle")
    add_invocations(sessions, "s1", 1)
    add_invocations(sessions, "s2", 1)
    assert store.list_due(100) == [key("s1"), key("s2")]


def test_run_due_compacts_and_settles(
    service: CompactionService, sessions: SessionService, store: InMemorySessionStore
) -> None:
    add_invocations(sessions, "big", 4)
    add_invocations(sessions, "small", 2)
    report = service.run_due(lambda: 100)
    assert report.due == 2
    assert report.compacted == 1
    assert report.settled == 2
    assert report.failed == 0 and report.failures == []
    assert report.left_for_next_run == 0
    assert store.list_due(100) == []
    [event] = compaction_events(store, "big")
    assert event["custom_metadata"][COMPACTION_META]["trigger"] == "interval"
    assert compaction_events(store, "small") == []


def test_run_due_session_appended_again_is_due_again(
    service: CompactionService, sessions: SessionService, store: InMemorySessionStore
) -> None:
    add_invocations(sessions, "s1", 1)
    service.run_due(lambda: 100)
    assert store.list_due(100) == []
    add_invocations(sessions, "s1", 1, start=1)
    assert store.list_due(100) == [key("s1")]


def test_run_due_failure_leaves_the_session_due_and_goes_on(
    sessions: SessionService, store: InMemorySessionStore
) -> None:
    summarizer = FakeSummarizer(fail_on="bad")
    service = CompactionService(store, summarizer, SETTINGS, clock=lambda: NOW)
    add_invocations(sessions, "bad", 4)  # processed first
    add_invocations(sessions, "good", 4)
    add_invocations(sessions, "quiet", 1)
    before = all_events(store, "bad")
    report = service.run_due(lambda: 100)
    assert report.due == 3
    assert report.failed == 1
    assert len(report.failures) == 1 and "bad" in report.failures[0]
    assert report.compacted == 1
    assert report.settled == 2
    assert store.list_due(100) == [key("bad")]
    assert all_events(store, "bad") == before
    record = store.get_session(key("bad"))
    assert record is not None and record.summary_end_seq == 0 and record.summary_event_id is None
    assert len(compaction_events(store, "good")) == 1


def test_run_due_stops_when_time_runs_out(
    service: CompactionService, sessions: SessionService, store: InMemorySessionStore
) -> None:
    add_invocations(sessions, "s1", 4)
    add_invocations(sessions, "s2", 4)
    report = service.run_due(lambda: 1.0, reserve_s=5.0)
    assert report.due == 2
    assert report.left_for_next_run == 2
    assert report.compacted == 0 and report.settled == 0
    assert store.list_due(100) == [key("s1"), key("s2")]
    assert compaction_events(store, "s1") == [] and compaction_events(store, "s2") == []


def test_run_due_leaves_the_rest_when_time_runs_out_midway(
    service: CompactionService, sessions: SessionService, store: InMemorySessionStore
) -> None:
    add_invocations(sessions, "s1", 4)
    add_invocations(sessions, "s2", 4)
    add_invocations(sessions, "s3", 4)
    clock: Iterator[float] = iter([100.0, 2.0, 2.0, 2.0])
    report = service.run_due(lambda: next(clock), reserve_s=5.0)
    assert report.compacted == 1
    assert report.left_for_next_run == 2
    assert store.list_due(100) == [key("s2"), key("s3")]
    assert len(compaction_events(store, "s1")) == 1
    assert compaction_events(store, "s2") == []


def test_run_due_respects_limit(
    service: CompactionService, sessions: SessionService, store: InMemorySessionStore
) -> None:
    for sid in ("s1", "s2", "s3"):
        add_invocations(sessions, sid, 1)
    report = service.run_due(lambda: 100, limit=2)
    assert report.due == 2 and report.settled == 2
    assert store.list_due(100) == [key("s3")]


# --------------------------------------------------------------------------------------------------------------
# Races
# --------------------------------------------------------------------------------------------------------------


def test_append_compaction_with_stale_watermark_returns_none(
    sessions: SessionService, store: InMemorySessionStore
) -> None:
    add_invocations(sessions, "s1", 4)

    def compaction(event_id: str, end_seq: int) -> NewEvent:
        body = {
            "id": event_id,
            "author": "system",
            "timestamp": NOW,
            "actions": {
                "compaction": {
                    "start_timestamp": 1000.0,
                    "end_timestamp": 1000.0 + end_seq,
                    "compacted_content": {"role": "model", "parts": [{"text": event_id}]},
                }
            },
        }
        return NewEvent(id=event_id, timestamp=NOW, body=body, delta=ScopedDelta())

    first = store.append_compaction(key(), compaction("c-a", 4), 4, 0)
    assert first is not None and first["seq"] == 9
    assert store.append_compaction(key(), compaction("c-b", 6), 6, 0) is None  # stale: the watermark is now 4
    record = store.get_session(key())
    assert record is not None
    assert record.summary_event_id == "c-a" and record.summary_end_seq == 4
    assert [e["id"] for e in compaction_events(store)] == ["c-a"]
    assert store.append_compaction(key(), compaction("c-c", 6), 6, 4) is not None


def test_overlapping_runs_land_only_one_compaction(sessions: SessionService, store: InMemorySessionStore) -> None:
    add_invocations(sessions, "s1", 4)

    class RacingSummarizer(FakeSummarizer):
        """While the outer run is summarising, a second run compacts the same session and commits first."""

        def summarize(self, turns: list[Turn], previous_summary: str | None) -> str:
            text = super().summarize(turns, previous_summary)
            if len(self.calls) == 1:
                inner = service.compact("app", "bob", "s1")
                assert inner.compacted
            return text

    service = CompactionService(store, RacingSummarizer(), SETTINGS, clock=lambda: NOW)
    outcome = service.compact("app", "bob", "s1")
    assert outcome.compacted is False
    assert outcome.reason
    assert len(compaction_events(store)) == 1
    record = store.get_session(key())
    assert record is not None and record.summary_end_seq == 6


# --------------------------------------------------------------------------------------------------------------
# event_turn
# --------------------------------------------------------------------------------------------------------------


def test_event_turn_leaves_thoughts_out() -> None:
    turn = event_turn(
        {
            "author": "travel_agent",
            "timestamp": 1234.5,
            "content": {
                "role": "model",
                "parts": [
                    {"text": "private reasoning", "thought": True},
                    {"text": "Booked."},
                    {"text": "Anything else?"},
                ],
            },
        }
    )
    assert turn == Turn(author="travel_agent", role="assistant", text="Booked.\nAnything else?", timestamp=1234.5)


def test_event_turn_user_message() -> None:
    turn = event_turn({"author": "user", "content": {"role": "user", "parts": [{"text": "hi"}]}})
    assert turn.role == "user" and turn.author == "user" and turn.text == "hi"


def test_event_turn_maps_tool_calls() -> None:
    turn = event_turn(
        {
            "author": "travel_agent",
            "content": {
                "role": "model",
                "parts": [
                    {"text": "Checking.", "thought": False},
                    {"function_call": {"id": "c1", "name": "weather", "args": {"city": "Lisbon"}}},
                    {"function_call": {"id": "c2", "name": "forecast"}},
                ],
            },
        }
    )
    assert turn.role == "assistant"
    assert turn.text == "Checking."
    assert turn.tool_calls == (ToolCall("weather", {"city": "Lisbon"}), ToolCall("forecast", {}))
    assert turn.tool_results == ()


def test_event_turn_pure_function_response_is_a_tool_turn() -> None:
    turn = event_turn(
        {
            "author": "travel_agent",
            "content": {
                "role": "user",
                "parts": [
                    {"function_response": {"id": "c1", "name": "weather", "response": {"result": "sunny"}}},
                    {"function_response": {"id": "c2", "name": "forecast", "response": {"rain": 0.2}}},
                ],
            },
        }
    )
    assert turn.role == "tool"
    assert turn.text == ""
    assert turn.tool_results == (ToolResult("weather", {"result": "sunny"}), ToolResult("forecast", {"rain": 0.2}))
    assert turn.tool_calls == ()


def test_event_turn_response_with_text_is_not_a_tool_turn() -> None:
    turn = event_turn(
        {
            "author": "travel_agent",
            "content": {
                "role": "model",
                "parts": [
                    {"text": "Here it is."},
                    {"function_response": {"id": "c1", "name": "weather", "response": {"result": "sunny"}}},
                ],
            },
        }
    )
    assert turn.role == "assistant"
    assert turn.tool_results == (ToolResult("weather", {"result": "sunny"}),)
