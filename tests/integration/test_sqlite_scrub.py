"""The embedded backend's file holds no deleted text once a deletion answers: not in the database's pages
(``secure_delete``) nor in its write-ahead log (a checkpoint that empties it); and a reader holding an old snapshot
(a ``.backup`` in progress) makes the deletion answer that it must be retried, never that it is done."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agent_memory.errors import ServiceUnavailable
from agent_memory.policy.state import ScopedDelta
from agent_memory.search import Doc, SearchIndex
from agent_memory.stores.ports import Deletion, MemoryRecord, SessionStore
from agent_memory.stores.sqlite.database import SqliteDatabase
from agent_memory.stores.sqlite.memories import SqliteMemoryStore
from agent_memory.stores.sqlite.store import SqliteSessionStore
from tests.support.sessions import KEY, event, record

SECRET = "TOKSECRET4242"


def raw(path: Path) -> bytes:
    """The database file and its log, as bytes on disk."""
    return b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists())


def seeded(path: Path, busy_timeout_s: float = 5) -> tuple[SqliteDatabase, SessionStore]:
    db = SqliteDatabase(path, busy_timeout_s=busy_timeout_s)
    store = SqliteSessionStore(db)
    store.create_session(record(), ScopedDelta())
    store.append_events(
        KEY, [event("keep", 1000.0, text="nothing to hide"), event("secret", 1001.0, text=SECRET)], None
    )
    assert SECRET.encode() in raw(path)
    return db, store


def delete_secret(store: SessionStore) -> None:
    got = store.get_session(KEY)
    assert got is not None
    store.delete_events(KEY, Deletion(((2, 2),), got.last_seq, got.deletions, None, 0), None)
    store.purge_deleted(KEY, lambda ids: None)


def test_a_deleted_event_leaves_the_file_and_its_log(tmp_path: Path) -> None:
    path = tmp_path / "agent-memory.sqlite3"
    db, store = seeded(path)
    delete_secret(store)
    assert SECRET.encode() not in raw(path)
    assert b"nothing to hide" in raw(path)
    db.close()


def test_a_deleted_session_leaves_the_file_and_its_log(tmp_path: Path) -> None:
    path = tmp_path / "agent-memory.sqlite3"
    db, store = seeded(path)
    store.delete_session(KEY)
    assert SECRET.encode() not in raw(path) and b"nothing to hide" not in raw(path)
    db.close()


def test_a_reader_holding_a_snapshot_makes_the_deletion_ask_for_a_retry(tmp_path: Path) -> None:
    path = tmp_path / "agent-memory.sqlite3"
    db, store = seeded(path, busy_timeout_s=0.3)
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    assert reader.execute("SELECT COUNT(*) FROM events").fetchone() == (2,)  # a snapshot held, as .backup does
    got = store.get_session(KEY)
    assert got is not None
    store.delete_events(KEY, Deletion(((2, 2),), got.last_seq, got.deletions, None, 0), None)
    with pytest.raises(ServiceUnavailable):
        store.purge_deleted(KEY, lambda ids: None)
    reader.execute("COMMIT")
    reader.close()
    # The retry (DeletionIncomplete tells the client to send it again) finishes.
    assert store.purge_deleted(KEY, lambda ids: None) == 1
    assert SECRET.encode() not in raw(path)
    db.close()


def test_a_forgotten_memory_leaves_the_file_and_its_log(tmp_path: Path) -> None:
    def build(records: list[MemoryRecord]) -> SearchIndex:
        return SearchIndex.build([Doc(id=r.id, text=r.text, context=r.context) for r in records], None)

    path = tmp_path / "agent-memory.sqlite3"
    memories = SqliteMemoryStore(path, build, SearchIndex.from_bytes, SearchIndex.combine, write_budget_s=0.3)
    memories.add("app", "alice", [MemoryRecord(id="m1", text=SECRET, author="user", timestamp=1.0)])
    memories.add("app", "alice", [MemoryRecord(id="m2", text="nothing to hide", author="user", timestamp=2.0)])
    assert SECRET.encode() in raw(path)
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT COUNT(*) FROM memory_parts").fetchone()
    with pytest.raises(ServiceUnavailable):
        memories.forget("app", "alice", ["m1"])
    reader.execute("COMMIT")
    reader.close()
    memories.forget("app", "alice", ["m1"])  # the retry: the record is gone already, the log is emptied now
    assert SECRET.encode() not in raw(path)
    assert set(memories.view("app", "alice").records) == {"m2"}
    memories.close()
