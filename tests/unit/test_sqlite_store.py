"""The SQLite adapters beyond the shared contracts: what a file keeps across a restart, many threads at once."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

from agent_memory.limits import MAX_DATETIME_SECONDS
from agent_memory.policy.state import ScopedDelta, split_delta
from agent_memory.stores.ports import EventQuery, SessionKey
from agent_memory.stores.sqlite.claims import SqliteClaimStore
from agent_memory.stores.sqlite.database import SqliteDatabase
from agent_memory.stores.sqlite.schema import SCHEMA_VERSION
from agent_memory.stores.sqlite.store import SqliteSessionStore
from agent_memory.wire.jsonio import RawJSON, dumps
from tests.support.sessions import KEY, event, record


def test_everything_is_still_there_after_closing_and_reopening_the_file(tmp_path: Path) -> None:
    path = tmp_path / "data" / "agent-memory.db"
    path.parent.mkdir()
    db = SqliteDatabase(path)
    store, claims = SqliteSessionStore(db), SqliteClaimStore(db)
    live, _ = store.create_session(record(), split_delta({"a": 1, "user:name": "Ann", "app:tier": "pro"}))
    big = "x" * 2_000_000  # any size, inline
    store.append_events(KEY, [event("e1", 1001.25, delta={"k": 2.0}), event("e2", 1002.0, text=big)], None)
    store.append_compaction(KEY, event("c1", 1003.0, text="summary"), 2, 0, incarnation=live.incarnation)
    claims.commit("app", "alice", ["E#s1#e1"])
    before = store.read_events(KEY, EventQuery())
    feed = store.read_changes(0, 100)
    db.close()

    db = SqliteDatabase(path)
    store, claims = SqliteSessionStore(db), SqliteClaimStore(db)
    got = store.get_session(KEY)
    assert got is not None and got.incarnation == live.incarnation
    assert (got.state, got.user_state, got.app_state) == ({"a": 1, "k": 2.0}, {"name": "Ann"}, {"tier": "pro"})
    assert isinstance(got.state["k"], float)
    # One client append (version 1); the compaction moved last_seq only.
    assert (got.version, got.last_seq, got.summary_event_id, got.summary_end_seq) == (1, 3, "c1", 2)
    assert store.read_events(KEY, EventQuery()) == before
    assert before[1]["content"]["parts"][0]["text"] == big
    assert store.read_changes(0, 100) == feed and len(feed) == 3
    assert store.list_due(10) == [KEY]
    assert claims.forgotten("app", "alice", ["E#s1#e1", "E#s1#e2", "E#s2#e1"]) == {"E#s1#e1"}
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    db.close()


def test_an_in_memory_database_works_from_many_threads() -> None:
    db = SqliteDatabase(":memory:")
    store = SqliteSessionStore(db)
    store.create_session(record(), ScopedDelta())
    threads = [
        threading.Thread(
            target=lambda w=w: [store.append_events(KEY, [event(f"w{w}-{i}", 1.0)], None) for i in range(5)]
        )
        for w in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [e["seq"] for e in store.read_events(KEY, EventQuery())] == list(range(1, 21))
    db.close()


def test_threads_appending_to_their_own_and_to_a_shared_session_all_land_once_in_order(tmp_path: Path) -> None:
    """Several threads (as the local server's request threads), each appending to its own session and to one
    shared session, with readers of the feed and of the events running meanwhile: every event lands once, each
    session's seqs have no gap, and the feed hands out every event once in each session's seq order."""
    db = SqliteDatabase(tmp_path / "agent-memory.db")
    store = SqliteSessionStore(db)
    writers, each = 6, 15
    own = [SessionKey("app", f"u{w}", "own") for w in range(writers)]
    for key in [KEY, *own]:
        store.create_session(record(key), ScopedDelta())
    errors: list[BaseException] = []
    done = threading.Event()

    def writer(w: int) -> None:
        try:
            for i in range(each):
                store.append_events(own[w], [event(f"o{i}", 1000.0 + i), event(f"o{i}b", 1000.0 + i)], None)
                store.append_events(KEY, [event(f"w{w}-{i}", 1000.0 + i, delta={f"last{w}": i})], None)
        except BaseException as exc:  # reported below: a thread's failure must fail the test
            errors.append(exc)

    def reader() -> None:
        try:
            while not done.is_set():
                store.read_events(KEY, EventQuery(num_recent=5))
                store.read_changes(0, 50)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    watcher = threading.Thread(target=reader)
    watcher.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    done.set()
    watcher.join()
    assert errors == []
    shared = store.read_events(KEY, EventQuery())
    assert [e["seq"] for e in shared] == list(range(1, writers * each + 1))
    for w in range(writers):
        assert [e["id"] for e in shared if e["id"].startswith(f"w{w}-")] == [f"w{w}-{i}" for i in range(each)]
        mine = store.read_events(own[w], EventQuery())
        assert [e["seq"] for e in mine] == list(range(1, 2 * each + 1))
    got = store.get_session(KEY)
    assert got is not None and got.state == {f"last{w}": each - 1 for w in range(writers)}
    changes = store.changes(store.read_changes(0, 10_000))
    assert len(changes) == writers * each * 3
    assert len({(c.key, c.event["id"]) for c in changes}) == len(changes)
    for key in [KEY, *own]:
        assert [c.event["seq"] for c in changes if c.key == key] == sorted(
            c.event["seq"] for c in changes if c.key == key
        )
    sequences = [int(c.sequence) for c in changes]
    assert sequences == sorted(sequences)
    db.close()


DEEP = "[" * 900 + '{"x":1}' + "]" * 900


def innermost(value: Any) -> Any:
    while isinstance(value, list) and len(value) == 1:
        value = value[0]
    return value


def test_no_stored_value_poisons_a_read(tmp_path: Path) -> None:
    """Rows written straight into the file (by anyone holding it) read as the DynamoDB store reads its
    items: a body that is not a JSON object as the marker event, deep values as their text, times clamped, a state
    value that does not read left out; the change feed reads them the same way."""
    path = tmp_path / "agent-memory.db"
    db = SqliteDatabase(path)
    store = SqliteSessionStore(db)
    store.create_session(record(), split_delta({"ok": 1}))
    ids = ["deep", "notjson", "array", "future", "fine"]
    store.append_events(KEY, [event(i, 1000.0 + n) for n, i in enumerate(ids)], None)
    with sqlite3.connect(path) as raw:
        deep_body = '{"author":"user","custom_metadata":{"k":' + DEEP + "}}"
        for event_id, body in [("deep", deep_body), ("notjson", "{not json"), ("array", "[1, 2]")]:
            raw.execute("UPDATE events SET body = ? WHERE event_id = ?", (body, event_id))
        raw.execute("UPDATE events SET body = ?, ts = 1e20 WHERE event_id = 'future'", ('{"timestamp":1e20}',))
        raw.execute("UPDATE session_state SET value = '{oops' WHERE key = 'ok'")
        raw.execute("INSERT INTO session_state (session, key, value) SELECT id, 'deep', ? FROM sessions", (DEEP,))
        raw.execute("UPDATE sessions SET update_time = 1e20")
    events = store.read_events(KEY, EventQuery(verbatim=True))
    assert [e["id"] for e in events] == ids and [e["seq"] for e in events] == [1, 2, 3, 4, 5]
    assert [e.get("error_code") for e in events] == [None, "unreadable_event", "unreadable_event", None, None]
    assert isinstance(innermost(events[0]["custom_metadata"]["k"]), RawJSON)  # past MAX_DEPTH: kept as text
    assert isinstance(innermost(store.read_events(KEY, EventQuery(num_recent=5))[0]["custom_metadata"]["k"]), str)
    assert (
        dumps(events[0])
        == '{"author":"user","custom_metadata":{"k":' + DEEP + '},"seq":1,"id":"deep","timestamp":1000.0}'
    )
    assert events[3]["timestamp"] == MAX_DATETIME_SECONDS and events[1]["timestamp"] == 1001.0
    assert dumps(events)  # every event encodes for a response
    changes = store.changes(store.read_changes(0, 100))
    assert [c.event.get("error_code") for c in changes] == [None, "unreadable_event", "unreadable_event", None, None]
    got = store.get_session(KEY)
    assert got is not None and set(got.state) == {"deep"} and isinstance(innermost(got.state["deep"]), RawJSON)
    assert got.update_time == MAX_DATETIME_SECONDS
    db.close()
