"""Auto-save's batches give each memory the retrieval context an explicit save of the whole session gives it,
wherever the change feed cuts the session (``service/autosave.py``: ``previous_turns``), and read no more than
they must to do so."""

from __future__ import annotations

from typing import Any

import pytest

from agent_memory.policy.autosave import parse_policy
from agent_memory.policy.state import ScopedDelta
from agent_memory.search import SearchIndex
from agent_memory.service.autosave import LOOKBACK_EVENTS, handle_changes, previous_turns
from agent_memory.service.memories import CONTEXT_TURNS, MemoryService
from agent_memory.stores.inmemory import InMemoryClaimStore, InMemoryMemoryStore, InMemorySessionStore
from agent_memory.stores.ports import Change, EventQuery, MemoryRecord, NewEvent, SessionKey, SessionRecord

KEY = SessionKey("app", "alice", "s1")


def turns(roles: list[str]) -> list[dict[str, Any]]:
    """One event per role: ``user`` turns by Ana, ``other`` turns by Ben (another person), ``model`` turns by an
    agent, ``tool`` a function call."""
    events = []
    for i, role in enumerate(roles):
        parts: list[dict[str, Any]] = [{"text": f"turn {i} word{i}"}]
        if role == "tool":
            parts = [{"function_call": {"name": "lookup", "args": {"i": i}}}]
        author = {"user": "Ana", "other": "Ben"}.get(role, "agent")
        content = {"role": "user" if role in ("user", "other") else "model", "parts": parts}
        events.append({"id": f"e{i}", "author": author, "timestamp": 1_700_000_000.0 + i, "content": content})
    return events


def stored(events: list[dict[str, Any]]) -> tuple[InMemorySessionStore, MemoryService, InMemoryMemoryStore]:
    sessions = InMemorySessionStore()
    memories = InMemoryMemoryStore(lambda _: SearchIndex.empty(), SearchIndex.combine)
    service = MemoryService(sessions, memories, InMemoryClaimStore(), lambda *_: [])
    sessions.create_session(SessionRecord("app", "alice", "s1", 1000.0, 1000.0), ScopedDelta())
    sessions.append_events(KEY, [NewEvent(e["id"], e["timestamp"], e, ScopedDelta()) for e in events], None)
    return sessions, service, memories


def explicit(events: list[dict[str, Any]]) -> dict[str, MemoryRecord]:
    _, service, memories = stored(events)
    service.save_session(app_name="app", user_id="alice", session_id="s1", policy="default")
    return dict(memories.view("app", "alice").records)


def auto_saved(events: list[dict[str, Any]], batch: int) -> dict[str, MemoryRecord]:
    """The session's events handed to auto-save in batches of ``batch``, as the change feed hands them."""
    sessions, service, memories = stored(events)
    read = sessions.read_events(KEY, EventQuery())
    for start in range(0, len(read), batch):
        changes = [Change(KEY, e, str(e["seq"])) for e in read[start : start + batch]]
        assert handle_changes(changes, service, sessions.read_events, "default") == {"batchItemFailures": []}
    return dict(memories.view("app", "alice").records)


CONVERSATIONS = {
    "two people": ["user"] * 23,
    "a person and an agent": ["user", "model"] * 12,
    "an agent calling tools between turns": ["user", "model", "tool", "tool", "model"] * 5,
}


@pytest.mark.parametrize("roles", CONVERSATIONS.values(), ids=CONVERSATIONS.keys())
@pytest.mark.parametrize("batch", [1, 3, 10])
def test_every_batch_boundary_keeps_the_context_of_an_explicit_save(roles: list[str], batch: int) -> None:
    events = turns(roles)
    expected = explicit(events)
    assert expected and len({r.context for r in expected.values()}) == len(expected)  # contexts worth comparing
    got = auto_saved(events, batch)
    assert {i: (r.text, r.author, r.timestamp, r.context) for i, r in got.items()} == {
        i: (r.text, r.author, r.timestamp, r.context) for i, r in expected.items()
    }


@pytest.mark.parametrize("batch", [1, 3, 10])
def test_a_reply_is_saved_with_its_turn_when_the_same_batch_holds_it(batch: int) -> None:
    """Two people taking turns: each memory's reply is the other's next turn in an explicit save of the session;
    auto-save gives every memory the same context, and its reply when the batch holds the reply too; the last
    turn of a batch has none (a stored memory is never rewritten)."""
    events = turns(["user", "other"] * 6)
    expected = {r.event_id: r for r in explicit(events).values()}
    got = {r.event_id: r for r in auto_saved(events, batch).values()}
    assert set(got) == set(expected) == {e["id"] for e in events}
    for i, event in enumerate(events):
        reply = f"{events[i + 1]['author']}: turn {i + 1} word{i + 1}" if i + 1 < len(events) else ""
        assert expected[event["id"]].reply == reply
        in_batch = (i + 1) // batch == i // batch
        assert got[event["id"]].reply == (reply if in_batch else "")
        assert got[event["id"]].context == expected[event["id"]].context


def test_the_context_read_costs_one_read_unless_dropped_events_hide_the_turns() -> None:
    calls: list[EventQuery] = []
    policy = parse_policy("default")

    def reads(events: list[dict[str, Any]]) -> tuple[list[int], list[int | None]]:
        """The seqs previous_turns returns for a batch after ``events``, and the sizes of the reads it made."""
        sessions, _, _ = stored(events)

        def read_events(key: SessionKey, query: EventQuery) -> list[dict[str, Any]]:
            calls.append(query)
            return sessions.read_events(key, query)

        calls.clear()
        previous = previous_turns(KEY, len(events) + 1, policy, read_events)
        return [int(e["seq"]) for e in previous], [q.num_recent for q in calls]

    # Two people: the last two events are the two turns of context; one read of two events, as before.
    assert reads(turns(["user"] * 6)) == ([5, 6], [CONTEXT_TURNS])
    # With an agent, the two events before the batch hold one kept turn: one more read, of the four before them.
    assert reads(turns(["user", "model"] * 4)) == ([3, 4, 5, 6, 7, 8], [2, 4])
    # The session's start: nothing more to read.
    assert reads(turns(["model", "user"])) == ([1, 2], [2])
    assert previous_turns(KEY, 1, policy, lambda *_: pytest.fail("no read before the first event")) == []
    # A long run of dropped events (an agent's tool calls): the look-back stops after LOOKBACK_EVENTS more.
    seqs, sizes = reads(turns(["user"] + ["tool"] * 100))
    assert len(seqs) == CONTEXT_TURNS + LOOKBACK_EVENTS == sum(s or 0 for s in sizes)
    assert sizes == [2, 4, 8, 16, 22]
