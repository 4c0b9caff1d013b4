"""Auto-save through `make run` stores what an explicit save stores: the same text, author, time and retrieval
context for every turn, however the change feed cuts the turns into batches (the recall figures are measured
through auto-save, `bench.quality.locomo_http`, and must not depend on where a batch starts), and the same reply
unless a batch ended at the turn."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx

from agent_memory.composition import DATABASE_FILE
from agent_memory.policy.state import ScopedDelta
from agent_memory.search import Doc, SearchIndex
from agent_memory.service.memories import MemoryService
from agent_memory.stores.inmemory import InMemoryClaimStore, InMemoryMemoryStore, InMemorySessionStore
from agent_memory.stores.ports import MemoryRecord, NewEvent, SessionKey, SessionRecord
from agent_memory.stores.sqlite.memories import SqliteMemoryStore
from local.server import spawned

APP, USER = "demo", "erin"
SPEAKERS = ("Ana", "Ben")
DAY = 1_683_500_000.0  # 7 May 2023


def conversation(session: int, ben_role: str) -> list[dict[str, Any]]:
    """Two speakers taking turns (Ben with content role ``ben_role``), each turn a memory of its own words."""
    start = DAY + session * 86_400.0
    return [
        {
            "id": f"s{session}-t{i}",
            "author": SPEAKERS[i % 2],
            "timestamp": start + i,
            "content": {"role": "user" if i % 2 == 0 else ben_role, "parts": [{"text": f"turn {i} about topic{i}"}]},
            "custom_metadata": {"dia_id": f"D{session}:{i}"},
        }
        for i in range(25)
    ]


# Two people (both content role user, as bench.quality.locomo_http sends LoCoMo) and a person with an agent (content
# role model: the default policy drops the agent's turns, and with them from every context).
SESSIONS = {"people": conversation(1, "user"), "agent": conversation(2, "model")}


def explicit_save(events_by_session: dict[str, list[dict[str, Any]]]) -> dict[str, MemoryRecord]:
    """What the save route stores for each whole session with the default policy (in-memory adapters)."""
    sessions, memories = InMemorySessionStore(), InMemoryMemoryStore(lambda _: SearchIndex.empty(), SearchIndex.combine)
    service = MemoryService(sessions, memories, InMemoryClaimStore(), lambda *_: [])
    for session_id, events in events_by_session.items():
        key = SessionKey(APP, USER, session_id)
        sessions.create_session(SessionRecord(APP, USER, session_id, DAY, DAY), ScopedDelta())
        sessions.append_events(key, [NewEvent(e["id"], e["timestamp"], e, ScopedDelta()) for e in events], None)
        service.save_session(app_name=APP, user_id=USER, session_id=session_id, policy="default")
    return dict(memories.view(APP, USER).records)


def _count(http: httpx.Client) -> int:
    return int(http.get(f"/apps/{APP}/users/{USER}/profile").json()["memory_count"])


def test_auto_save_stores_every_turn_as_an_explicit_save_would(tmp_path: Path) -> None:
    expected = explicit_save(SESSIONS)
    assert len(expected) == 25 + 13  # every turn of the people, the person's turns of the agent conversation
    with (
        # The template's batches of 10 records; no batching window, so batches start wherever the appends end.
        spawned(
            {"AUTOSAVE_WINDOW_SECONDS": "0", "AUTOSAVE_POLICY": "default", "EMBEDDER": "none"}, data_dir=tmp_path
        ) as url,
        httpx.Client(base_url=url, timeout=30) as http,
    ):
        for session_id in SESSIONS:
            assert http.post(f"/apps/{APP}/users/{USER}/sessions", json={"session_id": session_id}).status_code < 300
        # Appends of 7 events, the two sessions in turn: batches of the change feed cut each session at
        # several places, mixing both sessions, as a live deployment's would.
        for start in range(0, 25, 7):
            for session_id, events in SESSIONS.items():
                reply = http.post(
                    f"/apps/{APP}/users/{USER}/sessions/{session_id}/events", json={"events": events[start : start + 7]}
                )
                assert reply.status_code == 201, reply.text
        deadline = time.monotonic() + 60
        while _count(http) < len(expected) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _count(http) == len(expected)
    stored = SqliteMemoryStore(tmp_path / DATABASE_FILE, lambda _: None, SearchIndex.from_bytes, SearchIndex.combine)
    try:
        saved = dict(stored.view(APP, USER).records)
    finally:
        stored.close()
    assert saved.keys() == expected.keys()
    for memory_id, record in expected.items():
        got = saved[memory_id]
        # Everything search uses (text, author, time, role, context) and what it returns (metadata).
        fields = ("text", "author", "timestamp", "role", "session_id", "event_id", "custom_metadata", "context")
        assert {f: getattr(got, f) for f in fields} == {f: getattr(record, f) for f in fields}, memory_id
        # The reply (the other person's next turn) too, unless the batch ended at this turn: auto-save saved it
        # before the reply was handed over, and a stored memory is never rewritten.
        assert got.reply in (record.reply, ""), memory_id
    replied = [i for i, r in expected.items() if r.reply]
    assert len(replied) == 24  # every turn of the two people but the last; none in the agent's conversation
    assert sum(saved[i].reply == expected[i].reply for i in replied) >= len(replied) // 2


def test_the_stored_context_is_what_search_indexes() -> None:
    # The comparison above is worth making: the context is indexed (a word only in the context finds the memory).
    record = MemoryRecord("m1", "turn 3", "Ana", DAY, context="Ben: we adopted a greyhound")
    index = SearchIndex.build([Doc(record.id, f"{record.author}: {record.text}", record.context)], None)
    assert [doc_id for doc_id, _ in index.search("greyhound", 5, min_score=0)] == ["m1"]
