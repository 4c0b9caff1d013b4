"""The per-user quotas, one contract for every SessionStore adapter: sessions per user (counted in the create's own
write, taken out by a delete) and events per session (checked in the append's write), never overshot by
concurrent writers."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_memory.errors import QuotaExceeded
from agent_memory.policy.quotas import Quotas
from agent_memory.policy.state import ScopedDelta
from agent_memory.stores.dynamo.store import DynamoSessionStore
from agent_memory.stores.inmemory import InMemorySessionStore
from agent_memory.stores.ports import EventQuery, SessionKey, SessionStore
from agent_memory.stores.s3 import S3BlobStore
from agent_memory.stores.sqlite.database import SqliteDatabase
from agent_memory.stores.sqlite.store import SqliteSessionStore
from tests.support.aws import BUCKET, TABLE, race
from tests.support.sessions import event, record

QUOTAS = Quotas(sessions_per_user=3, events_per_session=5)
Build = Callable[[Quotas], SessionStore]


@pytest.fixture(params=["memory", "sqlite", "dynamodb"])
def build(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Build]:
    """Builds stores with the given quotas over one storage (so a second store sees what the first wrote)."""
    if request.param == "memory":
        shared: dict[str, InMemorySessionStore] = {}

        def memory(quotas: Quotas) -> SessionStore:
            return shared.setdefault("store", InMemorySessionStore(quotas))

        yield memory
    elif request.param == "sqlite":
        db = SqliteDatabase(tmp_path / "agent-memory.db")
        yield lambda quotas: SqliteSessionStore(db, quotas=quotas)
        db.close()
    else:
        aws: dict[str, Any] = request.getfixturevalue("aws")
        yield lambda quotas: DynamoSessionStore(
            aws["dynamodb"], TABLE, S3BlobStore(lambda: aws["s3"], BUCKET), quotas=quotas
        )


@pytest.fixture
def store(build: Build) -> SessionStore:
    return build(QUOTAS)


def key(sid: str, user: str = "alice") -> SessionKey:
    return SessionKey("app", user, sid)


def sessions_of(store: SessionStore, user: str = "alice") -> list[str]:
    return [r.session_id for r in store.list_sessions("app", user, 100, None)[0]]


# --- sessions per user ----------------------------------------------------------------------------------------------


def test_a_create_past_the_session_quota_is_refused_and_stores_nothing(store: SessionStore) -> None:
    for sid in ("s1", "s2", "s3"):
        assert store.create_session(record(key(sid)), ScopedDelta())[1]
    with pytest.raises(QuotaExceeded) as refused:
        store.create_session(record(key("s4")), ScopedDelta(user={"seen": True}))
    assert refused.value.field == "sessions_per_user" and refused.value.limit == 3
    assert "sessions_per_user = 3" in refused.value.message
    assert store.get_session(key("s4")) is None and sorted(sessions_of(store)) == ["s1", "s2", "s3"]
    assert store.get_user_state("app", "alice") == {}  # the refused create's user state was not applied
    # Another user has a quota of their own; an existing session is still answered at the limit.
    assert store.create_session(record(key("s1", "bob")), ScopedDelta())[1]
    again, created = store.create_session(record(key("s2")), ScopedDelta())
    assert not created and again.session_id == "s2"


def test_a_delete_frees_one_place_however_often_it_is_repeated(store: SessionStore) -> None:
    for sid in ("s1", "s2", "s3"):
        store.create_session(record(key(sid)), ScopedDelta())
    for _ in range(3):  # a retried DELETE, or a client deleting twice
        store.delete_session(key("s1"))
    store.delete_session(key("never-created"))
    assert store.create_session(record(key("s4")), ScopedDelta())[1]
    with pytest.raises(QuotaExceeded):
        store.create_session(record(key("s5")), ScopedDelta())
    # Re-created under the id of a deleted session: counted like any other.
    store.delete_session(key("s2"))
    assert store.create_session(record(key("s1")), ScopedDelta())[1]
    with pytest.raises(QuotaExceeded):
        store.create_session(record(key("s2")), ScopedDelta())
    assert sorted(sessions_of(store)) == ["s1", "s3", "s4"]


def test_concurrent_creates_never_pass_the_session_quota(store: SessionStore) -> None:
    outcomes: list[str] = []
    start = threading.Barrier(8)

    def create(sid: str) -> None:
        start.wait()
        try:
            store.create_session(record(key(sid)), ScopedDelta())
            outcomes.append("created")
        except QuotaExceeded:
            outcomes.append("refused")

    race(*(functools.partial(create, f"c{i}") for i in range(8)))
    assert sorted(outcomes) == ["created"] * 3 + ["refused"] * 5
    assert len(sessions_of(store)) == 3


def test_a_zero_quota_is_no_quota(build: Build) -> None:
    store = build(Quotas())
    for i in range(5):
        assert store.create_session(record(key(f"s{i}")), ScopedDelta())[1]
    store.append_events(key("s0"), [event(f"e{i}", 1000.0 + i) for i in range(8)], None)
    assert len(store.read_events(key("s0"), EventQuery())) == 8


# --- events per session ---------------------------------------------------------------------------------------------


def test_an_append_past_the_event_quota_is_refused_whole(store: SessionStore) -> None:
    store.create_session(record(key("s1")), ScopedDelta())
    store.append_events(key("s1"), [event(f"e{i}", 1000.0 + i) for i in range(3)], None)
    with pytest.raises(QuotaExceeded) as refused:
        store.append_events(key("s1"), [event("e3", 1003.0), event("e4", 1004.0), event("e5", 1005.0)], None)
    assert refused.value.field == "events_per_session" and "events_per_session = 5" in refused.value.message
    assert [e["id"] for e in store.read_events(key("s1"), EventQuery())] == ["e0", "e1", "e2"]
    result = store.append_events(key("s1"), [event("e3", 1003.0), event("e4", 1004.0, delta={"k": 1})], None)
    assert result.created == [True, True]
    with pytest.raises(QuotaExceeded):
        store.append_events(key("s1"), [event("e5", 1005.0)], None)
    got = store.get_session(key("s1"))
    assert got is not None and got.last_seq == 5 and got.state == {"k": 1}


def test_a_resend_at_the_event_quota_is_answered_not_refused(store: SessionStore) -> None:
    store.create_session(record(key("s1")), ScopedDelta())
    batch = [event(f"e{i}", 1000.0 + i) for i in range(5)]
    store.append_events(key("s1"), batch, None)
    again = store.append_events(key("s1"), batch[3:], None)  # a retry whose first answer was lost
    assert again.created == [False, False] and [e["seq"] for e in again.events] == [4, 5]
    with pytest.raises(QuotaExceeded):  # a resend with one new event is refused whole
        store.append_events(key("s1"), [batch[4], event("e5", 1005.0)], None)


def test_a_compaction_is_never_refused_by_the_event_quota(store: SessionStore) -> None:
    store.create_session(record(key("s1")), ScopedDelta())
    store.append_events(key("s1"), [event(f"e{i}", 1000.0 + i) for i in range(5)], None)
    summary = event("summary", 1006.0)
    assert store.append_compaction(key("s1"), summary, end_seq=4, expected_end_seq=0) is not None
    assert len(store.read_events(key("s1"), EventQuery())) == 6


def test_concurrent_appends_never_pass_the_event_quota(store: SessionStore) -> None:
    store.create_session(record(key("s1")), ScopedDelta())
    refused: list[int] = []
    start = threading.Barrier(4)

    def append(writer: int) -> None:
        start.wait()
        for i in range(3):
            try:
                store.append_events(key("s1"), [event(f"w{writer}-{i}", 1000.0 + i)], None)
            except QuotaExceeded:
                refused.append(writer)

    race(*(functools.partial(append, w) for w in range(4)))  # any other error in a writer fails the test
    assert len(store.read_events(key("s1"), EventQuery())) == 5 and len(refused) == 12 - 5
