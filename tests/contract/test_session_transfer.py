"""Export / import and the memo, one contract for every SessionStore adapter: a session imported reads back exactly
as given (counters, times, watermark, memo, state, events with their seqs), all or nothing, within the quotas; the
memo is kept with the session and goes with it."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_memory.errors import AlreadyExists, QuotaExceeded, SessionNotFound
from agent_memory.policy.quotas import Quotas
from agent_memory.policy.state import ScopedDelta
from agent_memory.stores.dynamo.store import DynamoSessionStore
from agent_memory.stores.inmemory import InMemorySessionStore
from agent_memory.stores.ports import EventQuery, SessionKey, SessionRecord, SessionStore
from agent_memory.stores.s3 import S3BlobStore
from agent_memory.stores.sqlite.database import SqliteDatabase
from agent_memory.stores.sqlite.store import SqliteSessionStore
from tests.support.aws import BUCKET, TABLE
from tests.support.sessions import event, exported_event, record

KEY = SessionKey("app", "alice", "s1")
Build = Callable[[Quotas], SessionStore]


@pytest.fixture(params=["memory", "sqlite", "dynamodb"])
def build(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Build]:
    """Stores over one storage, with the quotas given (offloading events past 2,000 bytes in DynamoDB)."""
    if request.param == "memory":
        shared: dict[str, InMemorySessionStore] = {}
        yield lambda quotas: shared.setdefault("store", InMemorySessionStore(quotas))
    elif request.param == "sqlite":
        db = SqliteDatabase(tmp_path / "agent-memory.db")
        yield lambda quotas: SqliteSessionStore(db, quotas=quotas)
        db.close()
    else:
        aws: dict[str, Any] = request.getfixturevalue("aws")
        yield lambda quotas: DynamoSessionStore(
            aws["dynamodb"], TABLE, S3BlobStore(lambda: aws["s3"], BUCKET), offload_bytes=2_000, quotas=quotas
        )


@pytest.fixture
def store(build: Build) -> SessionStore:
    return build(Quotas())


def summary_event(event_id: str, seq: int, ts: float, end_ts: float) -> dict[str, Any]:
    return exported_event(
        event_id,
        seq,
        ts,
        author_note="summary",
        actions={
            "state_delta": {},
            "compaction": {
                "start_timestamp": 1.0,
                "end_timestamp": end_ts,
                "compacted_content": {"role": "model", "parts": [{"text": "they said hi"}]},
            },
        },
    )


def imported(key: SessionKey = KEY, **changes: Any) -> tuple[SessionRecord, list[dict[str, Any]]]:
    events = [
        exported_event("e1", 1, 10.5, "héllo ✓"),
        exported_event("e2", 3, 11.25, "x" * 5_000),  # offloaded to S3 in the DynamoDB store (over 2,000 bytes)
        summary_event("c1", 4, 12.0, 11.25),
        exported_event("e3", 7, 13.0, metadata={"deep": [[{"a": [1, 2.5, None, True]}]]}),
    ]
    record = SessionRecord(
        key.app_name,
        key.user_id,
        key.session_id,
        create_time=5.25,
        update_time=13.0,
        version=6,
        last_seq=7,
        state={"topic": "ünicode", "n": 1},
        user_state={"name": "Ann"},
        app_state={"tier": "pro"},
        summary_event_id="c1",
        summary_end_seq=3,
        memo={"resized": True, "notes": ["a", {"b": 1.5}]},
    )
    return dataclasses.replace(record, **changes), events


def everything(store: SessionStore, key: SessionKey = KEY) -> tuple[SessionRecord | None, list[dict[str, Any]]]:
    return store.get_session(key), store.read_events(key, EventQuery(verbatim=True))


def test_an_imported_session_reads_back_exactly_as_given(store: SessionStore) -> None:
    record, events = imported()
    stored = store.import_session(record, copy.deepcopy(events), replace=False)
    got, read = everything(store)
    assert got is not None and got == stored
    for name in ("create_time", "update_time", "version", "last_seq", "state", "user_state", "app_state"):
        assert getattr(got, name) == getattr(record, name), name
    assert (got.summary_event_id, got.summary_end_seq, got.memo) == ("c1", 3, record.memo)
    assert read == events
    assert [list(e) for e in read] == [list(e) for e in events]  # key order too (export bytes)
    assert store.read_events(KEY, EventQuery(after_seq=3, up_to_seq=4)) == [events[2]]


def test_an_imported_session_takes_appends_after_its_counters(store: SessionStore) -> None:
    record, events = imported()
    store.import_session(record, events, replace=False)
    result = store.append_events(KEY, [event("e9", 20.0, delta={"n": 2})], expected_version=6)
    assert result.version == 7 and result.events[0]["seq"] == 8
    got = store.get_session(KEY)
    assert got is not None and got.state == {"topic": "ünicode", "n": 2} and got.memo == record.memo


def test_import_refuses_an_existing_session_unless_replace(store: SessionStore) -> None:
    store.create_session(record(), ScopedDelta(session={"old": True}))
    store.append_events(KEY, [event("e1", 1.0, text="old text"), event("old-only", 2.0)], None)
    new, events = imported()
    with pytest.raises(AlreadyExists):
        store.import_session(new, events, replace=False)
    got, read = everything(store)
    assert got is not None and got.state == {"old": True} and [e["id"] for e in read] == ["e1", "old-only"]

    store.import_session(new, events, replace=True)
    got, read = everything(store)
    assert got is not None and got.state == new.state and got.version == 6
    assert read == events  # nothing of the replaced session (e1's old body, old-only) is left


def test_import_sets_user_and_app_state_as_an_append_would(store: SessionStore) -> None:
    other = SessionKey("app", "alice", "other")
    store.create_session(record(other), ScopedDelta(user={"name": "Bob", "kept": 1}, app={"x": 1}))
    store.import_session(*imported(), replace=False)
    assert store.get_user_state("app", "alice") == {"name": "Ann", "kept": 1}
    assert store.get_app_state("app") == {"x": 1, "tier": "pro"}


def test_import_obeys_the_quotas_and_stores_nothing_refused(build: Build) -> None:
    store = build(Quotas(sessions_per_user=1, events_per_session=7))
    too_long, events = imported(SessionKey("app", "alice", "long"), last_seq=8)
    with pytest.raises(QuotaExceeded) as refused:
        store.import_session(too_long, events, replace=False)
    assert refused.value.limit_name == "events_per_session"
    assert store.get_session(too_long_key := SessionKey("app", "alice", "long")) is None
    assert store.read_events(too_long_key, EventQuery()) == []

    store.import_session(*imported(), replace=False)  # the one session alice may hold
    second, events = imported(SessionKey("app", "alice", "s2"))
    with pytest.raises(QuotaExceeded) as full:
        store.import_session(second, events, replace=False)
    assert full.value.limit_name == "sessions_per_user"
    assert store.get_session(SessionKey("app", "alice", "s2")) is None
    assert store.read_events(SessionKey("app", "alice", "s2"), EventQuery()) == []
    # Replacing the session she holds is no new session.
    store.import_session(*imported(), replace=True)


def test_a_large_import_is_whole(build: Build) -> None:
    store = build(Quotas())
    events = [exported_event(f"e{i}", i + 1, 100.0 + i, f"message {i}") for i in range(1_200)]
    record_, _ = imported(last_seq=1_200, summary_event_id=None, summary_end_seq=0)
    store.import_session(record_, events, replace=False)
    read = store.read_events(KEY, EventQuery())
    assert read == events
    assert store.read_events(KEY, EventQuery(num_recent=2)) == events[-2:]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_imported_events_are_not_in_the_change_feed(kind: str, tmp_path: Path) -> None:
    # (The DynamoDB store's feed is the table's stream: test_dynamo_skips_imported_stream_records.)
    db = SqliteDatabase(tmp_path / "feed.db") if kind == "sqlite" else None
    store = SqliteSessionStore(db) if db is not None else InMemorySessionStore()
    store.import_session(*imported(), replace=False)
    store.create_session(record(SessionKey("app", "alice", "s2")), ScopedDelta())
    store.append_events(SessionKey("app", "alice", "s2"), [event("new", 20.0)], None)
    assert [r["dynamodb"]["NewImage"]["event_id"]["S"] for r in store.read_changes(0, 100)] == ["new"]
    if db is not None:
        db.close()


def test_memo_is_kept_with_the_session_and_goes_with_it(store: SessionStore) -> None:
    with pytest.raises(SessionNotFound):
        store.put_memo(KEY, {"a": 1})
    store.create_session(record(), ScopedDelta())
    got = store.get_session(KEY)
    assert got is not None and got.memo == {}
    store.put_memo(KEY, {"a": 1, "nested": {"list": [1, "ü", None]}})
    store.put_memo(KEY, {"b": 2})  # last writer wins: a replacement, not a merge
    store.append_events(KEY, [event("e1", 1.0)], None)
    got = store.get_session(KEY)
    assert got is not None and got.memo == {"b": 2}
    assert got.version == 1  # the memo writes moved no version
    store.delete_session(KEY)
    store.create_session(record(), ScopedDelta())
    again = store.get_session(KEY)
    assert again is not None and again.memo == {}


def test_dynamo_skips_imported_stream_records(aws: dict[str, Any]) -> None:
    store = DynamoSessionStore(aws["dynamodb"], TABLE, S3BlobStore(lambda: aws["s3"], BUCKET))
    store.import_session(*imported(), replace=False)
    store.append_events(KEY, [event("new", 20.0)], None)
    items = aws["dynamodb"].query(
        TableName=TABLE,
        KeyConditionExpression="PK = :pk",
        ExpressionAttributeValues={":pk": {"S": "E#app#alice#s1"}},
    )["Items"]
    records = [
        {
            "eventName": "INSERT",
            "eventID": str(i),
            "dynamodb": {"Keys": {"PK": item["PK"], "SK": item["SK"]}, "NewImage": item, "SequenceNumber": str(i)},
        }
        for i, item in enumerate(items)
    ]
    assert len(records) == 6  # the 5 events and the session's state item, which is no change either
    assert [c.event["id"] for c in store.changes(records)] == ["new"]
