"""Faults of the embedded SQLite store: a database held by another process, a disk failing mid-transaction."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from agent_memory.errors import PayloadTooLarge, ServiceUnavailable
from agent_memory.policy.state import ScopedDelta, split_delta
from agent_memory.stores.ports import EventQuery, NewEvent, SessionKey, SessionRecord
from agent_memory.stores.sqlite import appends
from agent_memory.stores.sqlite.claims import SqliteClaimStore
from agent_memory.stores.sqlite.database import SqliteDatabase, storage_error
from agent_memory.stores.sqlite.store import SqliteSessionStore

KEY = SessionKey("app", "alice", "s1")


def record(key: SessionKey = KEY) -> SessionRecord:
    return SessionRecord(key.app_name, key.user_id, key.session_id, create_time=1000.0, update_time=1000.0)


def event(event_id: str, ts: float, delta: dict[str, Any] | None = None) -> NewEvent:
    body = {"id": event_id, "author": "user", "timestamp": ts, "content": {"parts": [{"text": "hi"}]}}
    return NewEvent(id=event_id, timestamp=ts, body=body, delta=split_delta(delta or {}))


def failure(message: str, code: int) -> sqlite3.OperationalError:
    exc = sqlite3.OperationalError(message)
    exc.sqlite_errorcode = code  # type: ignore[attr-defined]
    return exc


def test_a_database_held_by_another_writer_answers_503_and_stores_nothing(tmp_path: Path) -> None:
    path = tmp_path / "agent-memory.db"
    db = SqliteDatabase(path, busy_timeout_s=0.3)
    store, claims = SqliteSessionStore(db), SqliteClaimStore(db)
    store.create_session(record(), ScopedDelta())
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        started = time.monotonic()
        with pytest.raises(ServiceUnavailable) as info:
            store.append_events(KEY, [event("e1", 1001.0, delta={"k": 1, "user:u": 2})], None)
        assert info.value.status == 503 and time.monotonic() - started >= 0.25  # it waited busy_timeout
        with pytest.raises(ServiceUnavailable):
            store.create_session(record(SessionKey("app", "alice", "s2")), ScopedDelta())
        with pytest.raises(ServiceUnavailable):
            claims.commit("app", "alice", ["E#s1#e1"])
        # WAL: readers do not wait for the writer.
        got = store.get_session(KEY)
        assert got is not None and got.version == 0
    finally:
        other.execute("ROLLBACK")
        other.close()
    # Nothing of the refused writes was stored.
    got = store.get_session(KEY)
    assert got is not None and (got.version, got.last_seq, got.state, got.user_state) == (0, 0, {}, {})
    assert store.read_events(KEY, EventQuery()) == [] and store.read_changes(0, 10) == []
    assert store.get_session(SessionKey("app", "alice", "s2")) is None and store.list_due(10) == []
    # Released: the same requests succeed.
    assert store.append_events(KEY, [event("e1", 1001.0, delta={"k": 1})], None).created == [True]
    assert claims.forgotten("app", "alice", ["E#s1#e1"]) == set()  # the refused mark was not kept
    claims.commit("app", "alice", ["E#s1#e1"])
    assert claims.forgotten("app", "alice", ["E#s1#e1"]) == {"E#s1#e1"}
    assert [c.event["id"] for c in store.changes(store.read_changes(0, 10))] == ["e1"]
    db.close()


def test_a_disk_error_mid_transaction_answers_503_and_rolls_everything_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = SqliteDatabase(tmp_path / "agent-memory.db")
    store = SqliteSessionStore(db)
    store.create_session(record(), ScopedDelta())
    store.append_events(KEY, [event("e1", 1001.0, delta={"k": 1})], None)

    def failing(*args: Any) -> None:
        raise failure("disk I/O error", 10 | (4 << 8))  # SQLITE_IOERR_WRITE, after the events and outbox rows

    with monkeypatch.context() as patched, pytest.raises(ServiceUnavailable):
        patched.setattr(appends, "put_state", failing)
        store.append_events(KEY, [event("e2", 1002.0, delta={"k": 2}), event("e3", 1003.0)], None)
    got = store.get_session(KEY)
    assert got is not None and (got.version, got.last_seq, got.state) == (1, 1, {"k": 1})
    assert [e["id"] for e in store.read_events(KEY, EventQuery())] == ["e1"]
    assert [c.event["id"] for c in store.changes(store.read_changes(0, 10))] == ["e1"]
    # The retry of the same request lands once.
    assert store.append_events(KEY, [event("e2", 1002.0, delta={"k": 2}), event("e3", 1003.0)], None).version == 2
    assert [c.event["id"] for c in store.changes(store.read_changes(0, 10))] == ["e1", "e2", "e3"]
    db.close()


def test_storage_failures_map_to_domain_errors_and_bugs_do_not() -> None:
    for code in (5, 5 | (2 << 8), 6, 10, 10 | (12 << 8), 13, 15):
        assert isinstance(storage_error(failure("failed", code)), ServiceUnavailable)
    assert isinstance(storage_error(failure("string or blob too big", 18)), PayloadTooLarge)
    assert storage_error(failure("no such table: sessions", 1)) is None
    assert storage_error(sqlite3.IntegrityError("UNIQUE constraint failed")) is None
