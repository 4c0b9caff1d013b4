"""Auto-save's batches over the in-memory adapters: one save per user, failures reported per user (or per
session when its events cannot be read), each session's memories with their own session's context."""

from __future__ import annotations

from typing import Any

from agent_memory.search import Doc, SearchIndex
from agent_memory.service.autosave import handle_changes, handle_feed
from agent_memory.service.memories import MemoryService
from agent_memory.stores.inmemory import InMemoryClaimStore, InMemoryMemoryStore, InMemorySessionStore
from agent_memory.stores.ports import Change, EventQuery, MemoryRecord, SessionKey


def build(records: list[MemoryRecord]) -> SearchIndex:
    return SearchIndex.build([Doc(r.id, f"{r.author}: {r.text}", r.context) for r in records], None)


class CountingMemories(InMemoryMemoryStore):
    """The in-memory store, counting its writes per user."""

    def __init__(self) -> None:
        super().__init__(build, SearchIndex.combine)
        self.adds: list[str] = []
        self.failing: set[str] = set()

    def add(self, app_name: str, user_id: str, records: list[MemoryRecord], prepare: Any = None) -> list[str]:
        self.adds.append(user_id)
        if user_id in self.failing:
            raise RuntimeError("the store failed")
        return super().add(app_name, user_id, records, prepare)


def service(memories: CountingMemories) -> MemoryService:
    return MemoryService(
        None,  # type: ignore[arg-type]  # auto-save reads events through its own callable
        memories,
        InMemoryClaimStore(),
        lambda index, q, k, cut: index.search(q, k, min_score=cut),
        clock=lambda: 1000.0,
    )


def change(user: str, session: str, seq: int, text: str, unread: str | None = None) -> Change:
    event = {
        "id": f"{session}-{seq}",
        "seq": seq,
        "author": "user",
        "timestamp": 1000.0 + seq,
        "content": {"role": "user", "parts": [{"text": text}]},
    }
    return Change(SessionKey("app", user, session), {} if unread else event, f"{user}-{session}-{seq}", unread)


def no_history(key: SessionKey, query: EventQuery) -> list[dict[str, Any]]:
    return []


BATCH = [
    change("alice", "s1", 1, "I drink green tea"),
    change("bob", "s3", 1, "I drive a red truck"),
    change("alice", "s2", 1, "I play chess"),
    change("alice", "s1", 2, "I live in Oslo"),
    change("alice", "s2", 2, "I own a cat"),
]


def test_a_batch_saves_each_user_once() -> None:
    memories = CountingMemories()
    assert handle_changes(BATCH, service(memories), no_history, "default") == {"batchItemFailures": []}
    assert sorted(memories.adds) == ["alice", "bob"]
    alice = memories.view("app", "alice").records
    assert sorted(r.text for r in alice.values()) == [
        "I drink green tea",
        "I live in Oslo",
        "I own a cat",
        "I play chess",
    ]
    (cat,) = [r for r in alice.values() if r.text == "I own a cat"]
    assert "chess" in cat.context and "tea" not in cat.context  # its own session's turns only


def test_a_failed_user_fails_all_their_records_and_no_one_elses() -> None:
    memories = CountingMemories()
    memories.failing = {"alice"}
    result = handle_changes(BATCH, service(memories), no_history, "default")
    assert {f["itemIdentifier"] for f in result["batchItemFailures"]} == {
        c.sequence for c in BATCH if c.key.user_id == "alice"
    }
    assert len(memories.view("app", "bob").records) == 1 and memories.view("app", "alice").records == {}
    memories.failing = set()
    assert handle_changes(BATCH, service(memories), no_history, "default") == {"batchItemFailures": []}
    assert len(memories.view("app", "alice").records) == 4 and len(memories.view("app", "bob").records) == 1


def test_an_unread_event_fails_only_its_session() -> None:
    memories = CountingMemories()
    batch = [*BATCH, change("alice", "s2", 3, "", unread="S3 throttled its body")]
    result = handle_changes(batch, service(memories), no_history, "default")
    assert {f["itemIdentifier"] for f in result["batchItemFailures"]} == {
        c.sequence for c in batch if c.key.session_id == "s2"
    }
    assert sorted(r.text for r in memories.view("app", "alice").records.values()) == [
        "I drink green tea",
        "I live in Oslo",
    ]
    assert memories.adds.count("alice") == 1


# --- large batches: no save is started too close to the function's timeout ------------------------------------


def many_users(users: int, turns: int) -> list[Change]:
    """A window's batch: ``turns`` turns of each user, interleaved as the stream delivers them."""
    return [change(f"u{u}", f"s{u}", t, f"fact {t} of user {u}") for t in range(1, turns + 1) for u in range(users)]


def test_a_batch_stops_starting_saves_before_the_timeout_and_fails_exactly_the_users_not_reached() -> None:
    memories = CountingMemories()
    batch = many_users(users=6, turns=5)
    # 300 s at the start; a save takes 85 s of it, so after three the reserve (60 s) is not left for a fourth
    clock = {"left": 300.0}

    def time_left() -> float:
        return clock["left"] - 85.0 * len(memories.adds)

    result = handle_changes(batch, service(memories), no_history, "default", time_left)
    assert memories.adds == ["u0", "u1", "u2"]
    assert {f["itemIdentifier"] for f in result["batchItemFailures"]} == {
        c.sequence for c in batch if c.key.user_id in {"u3", "u4", "u5"}
    }
    # Lambda hands over again from the first failed record on: the saved users' later records are skipped (their
    # claims), the others stored, each once
    first = min(i for i, c in enumerate(batch) if c.key.user_id == "u3")
    memories.adds.clear()
    assert handle_changes(batch[first:], service(memories), no_history, "default", lambda: 300.0) == {
        "batchItemFailures": []
    }
    for u in range(6):
        assert sorted(r.text for r in memories.view("app", f"u{u}").records.values()) == [
            f"fact {t} of user {u}" for t in range(1, 6)
        ]


def test_a_short_invocation_keeps_a_share_of_its_time_not_the_whole_reserve() -> None:
    """A local emulation's context starts with 29 s: the first users are saved, not every one failed at once."""
    memories = CountingMemories()
    batch = many_users(users=3, turns=2)
    assert handle_changes(batch, service(memories), no_history, "default", lambda: 29.0) == {"batchItemFailures": []}
    assert sorted(memories.adds) == ["u0", "u1", "u2"]


class ExpiringSessions(InMemorySessionStore):
    """The in-memory store, with an expiry whose purge fails for the records named in ``failing``."""

    def __init__(self, failing: list[str]) -> None:
        super().__init__()
        self.failing = failing
        self.purged: list[list[dict[str, Any]]] = []

    def purge_expired(self, records: list[dict[str, Any]]) -> list[str]:
        self.purged.append(records)
        return self.failing


def test_a_feed_batch_purges_what_expired_and_reports_its_failures_beside_the_saves() -> None:
    records = [{"eventName": "REMOVE", "dynamodb": {"SequenceNumber": "7"}}]
    for policy in ("default", "off"):  # the expired payloads go with auto-save off too
        sessions = ExpiringSessions(failing=["7"])
        result = handle_feed(records, sessions, service(CountingMemories()), policy)
        assert result == {"batchItemFailures": [{"itemIdentifier": "7"}]}
        assert sessions.purged == [records]
    assert handle_feed(records, ExpiringSessions([]), service(CountingMemories()), "default") == {
        "batchItemFailures": []
    }
