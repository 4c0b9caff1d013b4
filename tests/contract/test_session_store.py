"""One contract, every SessionStore adapter: the in-memory store, the SQLite store and the DynamoDB store (moto)."""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_memory.errors import EventIdConflict, PreconditionFailed, SessionNotFound
from agent_memory.policy.state import ScopedDelta, split_delta
from agent_memory.runtime.aws import client
from agent_memory.stores.dynamo import appends
from agent_memory.stores.dynamo.store import DynamoSessionStore
from agent_memory.stores.inmemory import InMemorySessionStore
from agent_memory.stores.ports import EventQuery, SessionKey, SessionRecord, SessionStore
from agent_memory.stores.s3 import S3BlobStore
from agent_memory.stores.sqlite.database import SqliteDatabase
from agent_memory.stores.sqlite.store import SqliteSessionStore
from agent_memory.wire.jsonio import event_size
from bench.support.aws_counter import RequestCounter
from tests.support.aws import BUCKET, TABLE, race
from tests.support.sessions import KEY, MARKS, event, ids_of, record


def test_create_is_get_or_create_and_applies_state_by_scope(store: SessionStore) -> None:
    stored, created = store.create_session(record(), split_delta({"a": 1, "user:name": "Ann", "app:tier": "pro"}))
    assert created
    assert (stored.state, stored.user_state, stored.app_state) == ({"a": 1}, {"name": "Ann"}, {"tier": "pro"})
    again, created_again = store.create_session(record(now=2000.0), split_delta({"a": 99, "user:name": "Bob"}))
    assert not created_again
    assert again.create_time == 1000.0
    assert again.state == {"a": 1} and again.user_state == {"name": "Ann"}


def test_get_missing_session_is_none(store: SessionStore) -> None:
    assert store.get_session(KEY) is None


def test_append_assigns_increasing_seq_and_applies_deltas_atomically(store: SessionStore) -> None:
    store.create_session(record(), ScopedDelta())
    first = store.append_events(KEY, [event("e1", 1001.0, delta={"k": 1, "user:u": "x"})], None)
    second = store.append_events(
        KEY, [event("e2", 1002.0, delta={"k": 2}), event("e3", 1003.0, delta={"app:a": [1, 2.5, None]})], None
    )
    assert [e["seq"] for e in first.events + second.events] == [1, 2, 3]
    assert (first.version, second.version) == (1, 2)
    got = store.get_session(KEY)
    assert got is not None
    assert got.state == {"k": 2} and got.user_state == {"u": "x"} and got.app_state == {"a": [1, 2.5, None]}
    assert got.version == 2 and got.last_seq == 3 and got.update_time == 1003.0


def test_user_and_app_state_are_shared_across_sessions(store: SessionStore) -> None:
    other = SessionKey("app", "alice", "s2")
    store.create_session(record(), ScopedDelta())
    store.create_session(record(other), ScopedDelta())
    store.append_events(KEY, [event("e1", 1001.0, delta={"user:lang": "fr", "app:v": 2, "mine": True})], None)
    got = store.get_session(other)
    assert got is not None
    assert got.user_state == {"lang": "fr"} and got.app_state == {"v": 2} and got.state == {}
    stranger = SessionKey("app", "bob", "s9")
    store.create_session(record(stranger), ScopedDelta())
    theirs = store.get_session(stranger)
    assert theirs is not None and theirs.user_state == {} and theirs.app_state == {"v": 2}


def test_resent_event_stores_nothing_and_returns_the_stored_event(store: SessionStore) -> None:
    store.create_session(record(), ScopedDelta())
    store.append_events(KEY, [event("e1", 1001.0, text="original", delta={"k": 1})], None)
    again = store.append_events(KEY, [event("e1", 1001.0, text="original", delta={"k": 1})], None)
    assert again.created == [False]
    assert again.events[0]["content"]["parts"][0]["text"] == "original" and again.events[0]["seq"] == 1
    got = store.get_session(KEY)
    assert got is not None and got.state == {"k": 1} and got.version == 1
    assert [e["id"] for e in store.read_events(KEY, EventQuery())] == ["e1"]


def test_a_resend_whose_timestamp_the_server_filled_matches_whatever_the_time(store: SessionStore) -> None:
    store.create_session(record(), ScopedDelta())
    filled = dataclasses.replace(event("e1", 1001.0), timestamp_filled=True)
    store.append_events(KEY, [filled], None)
    later = event("e1", 1009.0)
    resent = dataclasses.replace(later, timestamp_filled=True)
    again = store.append_events(KEY, [resent], None)
    assert again.created == [False] and again.events[0]["timestamp"] == 1001.0
    # Sent with an explicit timestamp that differs, the same id is another event.
    with pytest.raises(EventIdConflict):
        store.append_events(KEY, [later], None)


def test_reused_id_with_another_body_conflicts_and_stores_nothing_of_the_batch(store: SessionStore) -> None:
    store.create_session(record(), ScopedDelta())
    store.append_events(KEY, [event("e1", 1001.0, text="original", delta={"k": 1})], None)
    with pytest.raises(EventIdConflict) as info:
        store.append_events(
            KEY, [event("e2", 1002.0, delta={"k": 2}), event("e1", 1005.0, text="changed", delta={"k": 3})], None
        )
    assert info.value.field == "events[1].id" and info.value.status == 409
    got = store.get_session(KEY)
    assert got is not None and got.state == {"k": 1} and got.version == 1 and got.last_seq == 1
    events = store.read_events(KEY, EventQuery())
    assert [(e["id"], e["content"]["parts"][0]["text"]) for e in events] == [("e1", "original")]


def test_an_id_repeated_in_a_batch_with_another_body_conflicts(store: SessionStore) -> None:
    store.create_session(record(), ScopedDelta())
    with pytest.raises(EventIdConflict) as info:
        store.append_events(KEY, [event("e1", 1001.0, text="a"), event("e1", 1001.0, text="b")], None)
    assert info.value.field == "events[1].id"
    assert store.read_events(KEY, EventQuery()) == []


def test_a_conflict_in_a_batch_of_several_transactions_stores_nothing(store: SessionStore) -> None:
    # 100 events do not fit one transaction (100 actions, the session update being one): the store commits
    # them in two, and must find the reused id before the first.
    store.create_session(record(), ScopedDelta())
    store.append_events(KEY, [event("old", 1000.5, text="original")], None)
    batch = [event(f"e{i:03d}", 1001.0 + i) for i in range(99)] + [event("old", 1000.5, text="changed")]
    with pytest.raises(EventIdConflict) as info:
        store.append_events(KEY, batch, None)
    assert info.value.field == "events[99].id"
    assert [e["id"] for e in store.read_events(KEY, EventQuery())] == ["old"]
    got = store.get_session(KEY)
    assert got is not None and got.last_seq == 1 and got.version == 1


def test_batch_with_a_known_id_stores_only_the_new_events(store: SessionStore) -> None:
    store.create_session(record(), ScopedDelta())
    store.append_events(KEY, [event("e1", 1001.0)], None)
    result = store.append_events(KEY, [event("e1", 1001.0), event("e2", 1002.0), event("e2", 1002.0)], None)
    assert result.created == [False, True, False]
    assert [e["seq"] for e in result.events] == [1, 2, 2]
    assert [e["id"] for e in store.read_events(KEY, EventQuery())] == ["e1", "e2"]


def test_append_to_missing_session_raises(store: SessionStore) -> None:
    with pytest.raises(SessionNotFound):
        store.append_events(KEY, [event("e1", 1.0)], None)


def test_expected_version_guards_the_append(store: SessionStore) -> None:
    store.create_session(record(), ScopedDelta())
    store.append_events(KEY, [event("e1", 1001.0)], 0)
    with pytest.raises(PreconditionFailed):
        store.append_events(KEY, [event("e2", 1002.0, delta={"k": 1})], 0)
    got = store.get_session(KEY)
    assert got is not None and got.version == 1 and got.state == {}
    assert [e["id"] for e in store.read_events(KEY, EventQuery())] == ["e1"]


def test_read_events_by_recency_and_timestamp(store: SessionStore) -> None:
    store.create_session(record(), ScopedDelta())
    # Timestamps out of seq order on purpose: after_timestamp filters by time, output stays in seq order.
    stamps = [1005.0, 1001.0, 1003.0, 1004.0, 1002.0]
    store.append_events(KEY, [event(f"e{i}", ts) for i, ts in enumerate(stamps)], None)
    ids = lambda q: [e["id"] for e in store.read_events(KEY, q)]  # noqa: E731
    assert ids(EventQuery()) == ["e0", "e1", "e2", "e3", "e4"]
    assert ids(EventQuery(num_recent=2)) == ["e3", "e4"]
    assert ids(EventQuery(num_recent=0)) == []
    assert ids(EventQuery(num_recent=50)) == ["e0", "e1", "e2", "e3", "e4"]
    assert ids(EventQuery(after_timestamp=1003.0)) == ["e0", "e2", "e3"]
    assert ids(EventQuery(after_timestamp=1003.0, num_recent=2)) == ["e2", "e3"]


def test_large_event_round_trips(store: SessionStore) -> None:
    store.create_session(record(), ScopedDelta())
    text = "x" * 10_000 + "é" * 100  # over the test store's 2 KB offload threshold
    stored = store.append_events(KEY, [event("big", 1001.0, text=text), event("small", 1002.0)], None)
    assert stored.events[0]["content"]["parts"][0]["text"] == text
    events = store.read_events(KEY, EventQuery())
    assert [e["content"]["parts"][0]["text"] for e in events] == [text, "hi"]


def test_list_pages_through_every_session_once(store: SessionStore) -> None:
    ids = [f"s{i:02d}" for i in range(7)]
    for sid in ids:
        store.create_session(record(SessionKey("app", "alice", sid)), ScopedDelta())
    store.create_session(record(SessionKey("app", "bob", "s99")), ScopedDelta())
    store.create_session(record(SessionKey("other", "alice", "s98")), ScopedDelta())
    seen: list[str] = []
    after = None
    while True:
        page, after = store.list_sessions("app", "alice", 3, after)
        seen.extend(r.session_id for r in page)
        assert len(page) <= 3
        if after is None:
            break
    assert seen == ids


def test_a_users_list_is_ordered_by_last_update_then_id_with_merged_state(store: SessionStore) -> None:
    for sid, now in [("a", 1003.0), ("b", 1001.0), ("c", 1002.0), ("d", 1001.0)]:
        store.create_session(record(SessionKey("app", "alice", sid), now=now), split_delta({"own": sid}))
    store.append_events(SessionKey("app", "alice", "b"), [event("e1", 1005.0, delta={"user:u": 1, "app:t": 2})], None)
    seen: list[SessionRecord] = []
    after = None
    while True:
        page, after = store.list_sessions("app", "alice", 2, after)
        seen.extend(page)
        if after is None:
            break
    assert [(r.session_id, r.update_time) for r in seen] == [("d", 1001.0), ("c", 1002.0), ("a", 1003.0), ("b", 1005.0)]
    assert all(r.state == {"own": r.session_id} for r in seen)
    assert all(r.user_state == {"u": 1} and r.app_state == {"t": 2} for r in seen)


def test_a_session_updated_between_pages_moves_forward_and_none_is_skipped(store: SessionStore) -> None:
    for i in range(4):
        store.create_session(record(SessionKey("app", "alice", f"s{i}"), now=1000.0 + i), ScopedDelta())
    first, after = store.list_sessions("app", "alice", 2, None)
    assert [r.session_id for r in first] == ["s0", "s1"] and after is not None
    store.append_events(SessionKey("app", "alice", "s0"), [event("e1", 2000.0)], None)
    rest, last = store.list_sessions("app", "alice", 10, after)
    assert [r.session_id for r in rest] == ["s2", "s3", "s0"] and last is None


def test_the_app_listing_pages_through_every_users_sessions_once(store: SessionStore) -> None:
    expected = []
    for user in ["bob", "alice", "carol"]:
        for sid in ["s2", "s1"]:
            store.create_session(record(SessionKey("app", user, sid)), split_delta({f"user:{user}": True}))
            expected.append((user, sid))
    store.create_session(record(SessionKey("other", "alice", "s9")), ScopedDelta())
    store.create_session(record(SessionKey("app", "dave", "gone")), ScopedDelta())
    store.delete_session(SessionKey("app", "dave", "gone"))
    store.append_events(SessionKey("app", "bob", "s1"), [event("e1", 1001.0, delta={"app:tier": "pro"})], None)
    seen: list[SessionRecord] = []
    after = None
    while True:
        page, after = store.list_app_sessions("app", 4, after)
        assert len(page) <= 4
        seen.extend(page)
        if after is None:
            break
    assert [(r.user_id, r.session_id) for r in seen] == sorted(expected)
    assert all(r.user_state == {r.user_id: True} and r.app_state == {"tier": "pro"} for r in seen)
    assert store.list_app_sessions("nobody", 4, None) == ([], None)


def test_user_and_app_state_read_without_a_session(store: SessionStore) -> None:
    assert store.get_user_state("app", "alice") == {} and store.get_app_state("app") == {}
    store.create_session(record(), split_delta({"user:name": "Ann", "app:tier": "pro", "k": 1}))
    store.delete_session(KEY)  # user and app state outlive the session
    assert store.get_user_state("app", "alice") == {"name": "Ann"}
    assert store.get_app_state("app") == {"tier": "pro"}
    assert store.get_user_state("app", "bob") == {} and store.get_app_state("other") == {}


def test_delete_removes_session_and_events_and_is_idempotent(store: SessionStore) -> None:
    store.create_session(record(), ScopedDelta())
    store.append_events(KEY, [event("e1", 1001.0, text="y" * 5000)], None)
    store.delete_session(KEY)
    store.delete_session(KEY)
    assert store.get_session(KEY) is None
    assert store.read_events(KEY, EventQuery()) == []
    with pytest.raises(SessionNotFound):
        store.append_events(KEY, [event("e2", 1.0)], None)
    # A new session under the same id starts empty.
    store.create_session(record(), ScopedDelta())
    assert store.read_events(KEY, EventQuery()) == []


def test_timestamps_keep_full_precision(store: SessionStore) -> None:
    store.create_session(record(), ScopedDelta())
    ts = time.time()
    store.append_events(KEY, [event("e1", ts)], None)
    assert store.read_events(KEY, EventQuery())[0]["timestamp"] == ts
    assert store.read_events(KEY, EventQuery(after_timestamp=ts))[0]["id"] == "e1"


def test_a_recreated_session_is_a_new_incarnation_and_starts_empty(store: SessionStore) -> None:
    first, _ = store.create_session(record(), ScopedDelta())
    store.append_events(KEY, [event("e1", 1001.0, delta={"k": 1})], None)
    store.delete_session(KEY)
    second, created = store.create_session(record(now=2000.0), ScopedDelta())
    assert created and second.incarnation and second.incarnation != first.incarnation
    assert second.last_seq == 0 and second.state == {}
    assert store.append_events(KEY, [event("e1", 2001.0)], None).events[0]["seq"] == 1  # the id is free again


def test_a_compaction_planned_on_a_deleted_session_stores_nothing_in_its_successor(store: SessionStore) -> None:
    old, _ = store.create_session(record(), ScopedDelta())
    store.append_events(KEY, [event("e1", 1001.0)], None)
    store.delete_session(KEY)
    store.create_session(record(now=2000.0), ScopedDelta())
    summary = event("c1", 1002.0, text="summary of the deleted conversation")
    with pytest.raises(SessionNotFound):
        store.append_compaction(KEY, summary, 1, 0, incarnation=old.incarnation)
    got = store.get_session(KEY)
    assert got is not None and got.summary_event_id is None and got.summary_end_seq == 0
    assert store.read_events(KEY, EventQuery()) == []


def test_a_compaction_of_the_live_incarnation_lands(store: SessionStore) -> None:
    live, _ = store.create_session(record(), ScopedDelta())
    store.append_events(KEY, [event("e1", 1001.0)], None)
    stored = store.append_compaction(KEY, event("c1", 1002.0), 1, 0, incarnation=live.incarnation)
    assert stored is not None and stored["seq"] == 2
    got = store.get_session(KEY)
    assert got is not None and got.summary_event_id == "c1" and got.summary_end_seq == 1


def test_a_compaction_keeps_the_version_and_last_update_time(store: SessionStore) -> None:
    """Server-authored events never invalidate a client's If-Match: the version counts client appends only."""
    live, _ = store.create_session(record(), ScopedDelta())
    store.append_events(KEY, [event("e1", 1001.0)], None)
    store.append_compaction(KEY, event("c1", 5000.0), 1, 0, incarnation=live.incarnation)
    got = store.get_session(KEY)
    assert got is not None and got.version == 1 and got.update_time == 1001.0 and got.last_seq == 2
    # The version the client held before the compaction still guards its next append, which takes the next seq.
    after = store.append_events(KEY, [event("e2", 1002.0)], 1)
    assert after.version == 2 and after.events[0]["seq"] == 3
    assert [e["seq"] for e in store.read_events(KEY, EventQuery())] == [1, 2, 3]


def test_an_append_racing_a_compaction_never_shares_its_seq(
    aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The append reads the counters, a compaction commits (last_seq moves, the version does not), then the append
    writes: its transaction must not commit with the seqs it numbered from the stale last_seq."""
    store = DynamoSessionStore(aws["dynamodb"], TABLE, S3BlobStore(lambda: aws["s3"], BUCKET))
    live, _ = store.create_session(record(), ScopedDelta())
    store.append_events(KEY, [event("e1", 1001.0)], None)
    read_counters = appends.read_counters
    raced: list[str] = []

    def read_then_compact(table: Any, key: SessionKey) -> Any:
        counters = read_counters(table, key)
        if not raced:  # once, between the append's read and its write
            raced.append("compacted")
            assert store.append_compaction(key, event("c1", 1001.5), 1, 0, incarnation=live.incarnation) is not None
        return counters

    monkeypatch.setattr(appends, "read_counters", read_then_compact)
    result = store.append_events(KEY, [event("e2", 1002.0)], 1)  # If-Match taken before the compaction
    assert raced and result.version == 2 and result.events[0]["seq"] == 3
    seqs = [int(i["seq"]["N"]) for i in aws["dynamodb"].scan(TableName=TABLE)["Items"] if "seq" in i]
    assert sorted(seqs) == [1, 2, 3]
    assert [(e["id"], e["seq"]) for e in store.read_events(KEY, EventQuery())] == [("e1", 1), ("c1", 2), ("e2", 3)]


# --- paged reads ------------------------------------------------------------------------------------------------


def ten_events(store: SessionStore, stamps: list[float] | None = None, text: str = "hi") -> None:
    store.create_session(record(), ScopedDelta())
    stamps = stamps or [1001.0 + i for i in range(10)]
    store.append_events(KEY, [event(f"e{i}", ts, text=text) for i, ts in enumerate(stamps)], None)


def test_limit_reads_forward_from_after_seq(store: SessionStore) -> None:
    ten_events(store)
    assert ids_of(store, EventQuery(limit=3)) == ["e0", "e1", "e2"]
    assert ids_of(store, EventQuery(after_seq=3, limit=3)) == ["e3", "e4", "e5"]
    assert ids_of(store, EventQuery(after_seq=8, limit=3)) == ["e8", "e9"]
    assert ids_of(store, EventQuery(after_seq=10, limit=3)) == []
    assert ids_of(store, EventQuery(after_seq=2, up_to_seq=4, limit=5)) == ["e2", "e3"]
    assert ids_of(store, EventQuery(limit=0)) == []


def test_limit_pages_through_the_newest_num_recent_oldest_first(store: SessionStore) -> None:
    ten_events(store)
    assert ids_of(store, EventQuery(num_recent=5, limit=2)) == ["e5", "e6"]
    assert ids_of(store, EventQuery(num_recent=5, up_to_seq=8, limit=2)) == ["e3", "e4"]
    # The pages after the first resume from their seq within the same window.
    assert ids_of(store, EventQuery(after_seq=7, up_to_seq=10, limit=2)) == ["e7", "e8"]
    assert ids_of(store, EventQuery(num_recent=3, limit=50)) == ["e7", "e8", "e9"]


def test_limit_pages_through_events_at_or_after_a_time_in_seq_order(store: SessionStore) -> None:
    # Out of order on purpose: e1, e3, e5, e6, e8 are at or after 1005.
    ten_events(store, [1001.0, 1009.0, 1002.0, 1005.0, 1003.0, 1006.0, 1007.0, 1000.0, 1008.0, 1004.0])
    assert ids_of(store, EventQuery(after_timestamp=1005.0, limit=2)) == ["e1", "e3"]
    assert ids_of(store, EventQuery(after_timestamp=1005.0, after_seq=4, limit=2)) == ["e5", "e6"]
    assert ids_of(store, EventQuery(after_timestamp=1005.0, after_seq=7, limit=2)) == ["e8"]
    assert ids_of(store, EventQuery(after_timestamp=1005.0, num_recent=3, limit=2)) == ["e5", "e6"]
    assert ids_of(store, EventQuery(after_timestamp=1005.0, num_recent=3, max_bytes=10**6)) == ["e5", "e6", "e8"]


def test_max_bytes_stops_after_the_event_that_reaches_it(store: SessionStore) -> None:
    ten_events(store, text="x" * 3_000)  # offloaded by the DynamoDB store of this suite
    sizes = [event_size(e) for e in store.read_events(KEY, EventQuery())]
    assert ids_of(store, EventQuery(max_bytes=sizes[0] + sizes[1])) == ["e0", "e1"]
    assert ids_of(store, EventQuery(max_bytes=sizes[0] + sizes[1] + 1)) == ["e0", "e1", "e2"]
    assert ids_of(store, EventQuery(max_bytes=1)) == ["e0"]
    assert ids_of(store, EventQuery(after_seq=8, max_bytes=10**9)) == ["e8", "e9"]
    assert ids_of(store, EventQuery(num_recent=4, max_bytes=sizes[0] * 2)) == ["e6", "e7"]


def test_a_page_reads_about_the_items_it_returns(aws: dict[str, Any]) -> None:
    store = DynamoSessionStore(aws["dynamodb"], TABLE, S3BlobStore(lambda: aws["s3"], BUCKET), offload_bytes=2_000)
    store.create_session(record(), ScopedDelta())
    store.append_events(KEY, [event(f"e{i}", 1000.0 + i, text="y" * 3_000) for i in range(60)], None)
    counter = RequestCounter().attach(aws["dynamodb"], aws["s3"])
    # Every read also reads the session item twice, before and after the events (its deletion marks: MARKS).
    assert len(store.read_events(KEY, EventQuery(after_seq=20, limit=5))) == 5
    assert counter.items_read <= 6 + MARKS and counter.count("s3", "GetObject") == 5
    assert counter.count("dynamodb", "Scan") == 0
    counter.reset()
    size = event_size(store.read_events(KEY, EventQuery(limit=1))[0])
    counter.reset()
    assert len(store.read_events(KEY, EventQuery(max_bytes=size * 3))) == 3
    assert counter.count("s3", "GetObject") == 3  # no payload past the page's end
    counter.reset()
    # A small window is one newest-first query; only the page's payloads are fetched.
    assert [e["seq"] for e in store.read_events(KEY, EventQuery(num_recent=10, limit=2))] == [51, 52]
    assert counter.count("dynamodb", "Query") == 1 + MARKS
    assert counter.items_read <= 10 + MARKS and counter.count("s3", "GetObject") == 2
    # A large one finds its first seq without bodies, then reads the page forward.
    store.append_events(KEY, [event(f"f{i}", 2000.0 + i) for i in range(90)], None)
    counter.reset()
    assert [e["seq"] for e in store.read_events(KEY, EventQuery(num_recent=140, limit=2))] == [11, 12]
    assert counter.items_read <= 140 + 3 + MARKS and counter.count("s3", "GetObject") == 2


# --- racing writers -------------------------------------------------------------------------------------------


def test_racing_appends_to_one_session_all_land_once_and_in_order(store: SessionStore) -> None:
    """Writers racing on one session's version (as Lambda containers do, with no lock between them): every
    append lands once, seqs have no gap, each writer's events keep its order, and the version counts them. Every
    event changes the session's state (a key of its writer's and one they all set): the state is the deltas
    applied in seq order."""
    store.create_session(record(), split_delta({"initial": True, "shared": "none"}))
    writers, each = 8, 10

    def writer(w: int) -> None:
        for i in range(each):
            delta = {f"last{w}": i, "shared": f"w{w}-{i}"}
            store.append_events(KEY, [event(f"w{w}-{i}", 1000.0 + i, delta=delta)], None)

    race(*(functools.partial(writer, w) for w in range(writers)))
    stored = store.read_events(KEY, EventQuery())
    assert [e["seq"] for e in stored] == list(range(1, writers * each + 1))
    for w in range(writers):
        assert [e["id"] for e in stored if e["id"].startswith(f"w{w}-")] == [f"w{w}-{i}" for i in range(each)]
    got = store.get_session(KEY)
    assert got is not None and got.version == writers * each and got.last_seq == writers * each
    # Applied in seq order: the shared key holds the delta of the event stored last.
    expected = {f"last{w}": each - 1 for w in range(writers)} | {"initial": True, "shared": stored[-1]["id"]}
    assert got.state == expected


def test_appends_racing_compactions_never_share_a_seq_and_only_appends_count(store: SessionStore) -> None:
    """Writers and a compactor on one session with no lock between them (as Lambda containers and the schedule
    are): every item has its own seq, seqs have no gap, and the version counts the client appends only."""
    live, _ = store.create_session(record(), ScopedDelta())
    writers, each, compactions = 4, 6, 6
    landed: list[str] = []

    def writer(w: int) -> None:
        for i in range(each):
            store.append_events(KEY, [event(f"w{w}-{i}", 1000.0 + i)], None)

    def compactor() -> None:
        for i in range(compactions):
            got = store.get_session(KEY)
            assert got is not None
            summary = event(f"c{i}", 2000.0 + i, text="summary")
            if store.append_compaction(KEY, summary, got.last_seq, got.summary_end_seq, incarnation=live.incarnation):
                landed.append(summary.id)

    race(*(functools.partial(writer, w) for w in range(writers)), compactor)
    stored = store.read_events(KEY, EventQuery())
    assert [e["seq"] for e in stored] == list(range(1, writers * each + len(landed) + 1))
    assert landed and {e["id"] for e in stored} >= set(landed)
    got = store.get_session(KEY)
    assert got is not None and got.version == writers * each and got.last_seq == len(stored)


def test_single_appends_move_the_version_seq_and_last_update_time_as_the_events_say(store: SessionStore) -> None:
    """One event at a time, no delta (DynamoDB's claim-first path while the timestamps grow; its transaction
    when one does not): each append moves the version by one and takes the next seq; the last update time is the
    newest event's, never lower, and orders the user's listing."""
    store.create_session(record(KEY, now=1000.0), ScopedDelta())
    other = SessionKey("app", "alice", "s2")
    store.create_session(record(other, now=1000.0), ScopedDelta())
    stamps = [1001.0, 1002.5, 1002.5, 1001.5, 1010.0, 1009.0, 1011.0]  # equal, below, above again
    versions = []
    for i, ts in enumerate(stamps):
        result = store.append_events(KEY, [event(f"e{i}", ts)], None)
        versions.append(result.version)
        assert result.created == [True] and result.events[0]["seq"] == i + 1
        got = store.get_session(KEY)
        assert got is not None and got.version == i + 1 and got.last_seq == i + 1
        assert got.update_time == max(stamps[: i + 1])
    assert versions == list(range(1, len(stamps) + 1))
    assert [e["id"] for e in store.read_events(KEY, EventQuery())] == [f"e{i}" for i in range(len(stamps))]
    assert store.append_events(other, [event("x", 1010.5)], None).version == 1
    page, _ = store.list_sessions("app", "alice", 10, None)
    assert [(r.session_id, r.update_time) for r in page] == [("s2", 1010.5), ("s1", 1011.0)]
    # By time (after_timestamp): the skew the out-of-order events made is kept, so none is missed.
    since = store.read_events(KEY, EventQuery(after_timestamp=1002.0))
    assert [e["id"] for e in since] == ["e1", "e2", "e4", "e5", "e6"]


def test_single_appends_racing_batches_state_deltas_and_compactions_all_land_once_in_order(
    store: SessionStore,
) -> None:
    """Plain single events (DynamoDB: claim-first), events with a state delta and batches (transactions) and a
    compactor race on one session: every event lands once, each writer's in its order, no two share a seq, and
    the version counts the client appends."""
    live, _ = store.create_session(record(), ScopedDelta())
    each = 6
    landed: list[str] = []

    def plain(w: int) -> None:
        for i in range(each):
            store.append_events(KEY, [event(f"p{w}-{i}", time.time())], None)

    def with_delta(w: int) -> None:
        for i in range(each):
            store.append_events(KEY, [event(f"d{w}-{i}", time.time(), delta={"last": f"d{w}-{i}"})], None)

    def batches(w: int) -> None:
        for i in range(each // 2):
            now = time.time()
            store.append_events(KEY, [event(f"b{w}-{2 * i}", now), event(f"b{w}-{2 * i + 1}", now)], None)

    def compactor(_: int) -> None:
        for i in range(4):
            got = store.get_session(KEY)
            assert got is not None
            summary = event(f"c{i}", time.time(), text="summary")
            if store.append_compaction(KEY, summary, got.last_seq, got.summary_end_seq, incarnation=live.incarnation):
                landed.append(summary.id)

    roles = [(plain, 0), (plain, 1), (plain, 2), (with_delta, 0), (batches, 0), (compactor, 0)]
    race(*(functools.partial(fn, w) for fn, w in roles))
    stored = store.read_events(KEY, EventQuery())
    seqs = [e["seq"] for e in stored]
    assert seqs == sorted(set(seqs))  # no two share a seq (no fault here, so no hole either)
    assert seqs == list(range(1, 5 * each + len(landed) + 1))
    for prefix in ("p0-", "p1-", "p2-", "d0-", "b0-"):
        assert [e["id"] for e in stored if e["id"].startswith(prefix)] == [f"{prefix}{i}" for i in range(each)]
    got = store.get_session(KEY)
    assert got is not None and got.version == 4 * each + each // 2 and got.last_seq == len(stored)
    assert got.state == {"last": f"d0-{each - 1}"}


# --- the change feed ------------------------------------------------------------------------------------------


@pytest.fixture
def feed(store: SessionStore, request: pytest.FixtureRequest) -> Callable[[], list[dict[str, Any]]]:
    """Every change-feed record the store has produced so far, as Lambda would deliver them: the table's stream
    (moto) for DynamoDB, the outbox for the embedded and in-memory stores."""
    if isinstance(store, DynamoSessionStore):
        aws: dict[str, Any] = request.getfixturevalue("aws")
        from local.streams import _json_record

        def stream() -> list[dict[str, Any]]:
            streams = client("dynamodbstreams")
            arn = aws["dynamodb"].describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
            records: list[dict[str, Any]] = []
            for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
                iterator = streams.get_shard_iterator(
                    StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
                )["ShardIterator"]
                records += [_json_record(r) for r in streams.get_records(ShardIterator=iterator)["Records"]]
            return records

        return stream
    outbox: Any = store
    return lambda: list(outbox.read_changes(0, 100_000))


def test_an_appends_events_come_out_of_the_feed_once_each_in_seq_order(
    store: SessionStore, feed: Callable[[], list[dict[str, Any]]]
) -> None:
    other = SessionKey("app", "bob", "s2")
    store.create_session(record(), split_delta({"user:x": 1}))
    store.create_session(record(other), ScopedDelta())
    big = "z" * 5_000  # offloaded to S3 by the DynamoDB store of this suite
    store.append_events(KEY, [event("e1", 1001.0, delta={"k": 1}), event("e2", 1002.5, text=big)], None)
    store.append_events(other, [event("o1", 1003.0, delta={"user:y": 2})], None)
    store.append_events(KEY, [event("e2", 1002.5, text=big), event("e3", 1004.0)], None)  # e2 resent
    changes = store.changes(feed())
    assert [(c.key, c.event["id"], c.event["seq"]) for c in changes] == [
        (KEY, "e1", 1),
        (KEY, "e2", 2),
        (other, "o1", 1),
        (KEY, "e3", 3),
    ]
    # Each event as read_events reads it (the body of an offloaded one included), one sequence number each.
    assert [c.event for c in changes if c.key == KEY] == store.read_events(KEY, EventQuery())
    sequences = [c.sequence for c in changes]
    assert all(sequences) and len(set(sequences)) == 4


def test_a_conflicting_or_refused_append_writes_nothing_to_the_feed(
    store: SessionStore, feed: Callable[[], list[dict[str, Any]]]
) -> None:
    store.create_session(record(), ScopedDelta())
    store.append_events(KEY, [event("e1", 1001.0, text="original")], None)
    with pytest.raises(EventIdConflict):
        store.append_events(KEY, [event("e2", 1002.0), event("e1", 1001.0, text="changed")], None)
    with pytest.raises(PreconditionFailed):
        store.append_events(KEY, [event("e3", 1003.0)], 0)
    with pytest.raises(SessionNotFound):
        store.append_events(SessionKey("app", "alice", "nope"), [event("e4", 1004.0)], None)
    assert [(c.event["id"], c.event["content"]["parts"][0]["text"]) for c in store.changes(feed())] == [
        ("e1", "original")
    ]


def test_compaction_events_come_out_of_the_feed_as_the_stream_has_them(
    store: SessionStore, feed: Callable[[], list[dict[str, Any]]]
) -> None:
    live, _ = store.create_session(record(), ScopedDelta())
    store.append_events(KEY, [event("e1", 1001.0), event("e2", 1002.0)], None)
    summary = event("c1", 1003.0, text="summary")
    summary.body["actions"]["compaction"] = {"start_timestamp": 1001.0, "end_timestamp": 1002.0}
    assert store.append_compaction(KEY, summary, 2, 0, incarnation=live.incarnation) is not None
    assert store.append_compaction(KEY, event("c2", 1004.0), 2, 0) is None  # the watermark moved: nothing stored
    changes = store.changes(feed())
    assert [c.event["id"] for c in changes] == ["e1", "e2", "c1"]
    assert changes[-1].event["actions"]["compaction"] == {"start_timestamp": 1001.0, "end_timestamp": 1002.0}
    assert changes[-1].event["seq"] == 3


def test_the_feed_keeps_what_the_events_hold_exactly(
    store: SessionStore, feed: Callable[[], list[dict[str, Any]]]
) -> None:
    store.create_session(record(), ScopedDelta())
    ts = time.time()
    values = {"int": 1, "float": 1.0, "big": 2**70, "text": "é\u2028", "none": None, "list": [1, 2.5]}
    new = event("e1", ts)
    new.body["custom_metadata"] = values
    store.append_events(KEY, [new], None)
    (change,) = store.changes(feed())
    assert change.event["timestamp"] == ts and change.event["custom_metadata"] == values
    assert isinstance(change.event["custom_metadata"]["float"], float)
    assert isinstance(change.event["custom_metadata"]["int"], int)


def test_feed_records_pass_the_templates_filter_and_others_are_skipped(
    store: SessionStore, feed: Callable[[], list[dict[str, Any]]]
) -> None:
    from local.streams import admits, stream_mappings
    from local.template import load_template

    (mapping,) = stream_mappings(load_template(), {"AutoSaveBatchSize": "10", "AutoSaveBatchingWindowSeconds": "60"})
    store.create_session(record(), ScopedDelta())
    store.append_events(KEY, [event("e1", 1001.0)], None)
    records = [r for r in feed() if admits(mapping.patterns, r)]
    assert [c.event["id"] for c in store.changes(records)] == ["e1"]
    removed = [dict(r, eventName="REMOVE") for r in records]
    assert store.changes(removed) == []
    assert store.purge_expired(records + removed) == []  # no expiry among them: nothing to purge, nothing failed


# The outbox of the embedded and in-memory stores (DynamoDB's stream is AWS's).


@pytest.fixture(params=["memory", "sqlite"])
def outbox_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory":
        yield InMemorySessionStore()
    else:
        db = SqliteDatabase(tmp_path / "agent-memory.db")
        yield SqliteSessionStore(db)
        db.close()


def test_the_outbox_pages_acknowledges_and_never_reuses_a_sequence_number(outbox_store: Any) -> None:
    store = outbox_store
    store.create_session(record(), ScopedDelta())
    store.append_events(KEY, [event(f"e{i}", 1001.0 + i) for i in range(5)], None)
    first = store.read_changes(0, 2)
    assert [store.changes([r])[0].event["id"] for r in first] == ["e0", "e1"]
    after = int(first[-1]["dynamodb"]["SequenceNumber"])
    rest = store.read_changes(after, 100)
    assert [c.event["id"] for c in store.changes(rest)] == ["e2", "e3", "e4"]
    assert all(r["eventSource"].startswith("agent-memory:") for r in first + rest)
    assert all(r["eventName"] == "INSERT" and r["dynamodb"]["StreamViewType"] == "NEW_IMAGE" for r in first + rest)
    last = int(rest[-1]["dynamodb"]["SequenceNumber"])
    store.ack_changes(after)
    assert [c.event["id"] for c in store.changes(store.read_changes(0, 100))] == ["e2", "e3", "e4"]
    store.ack_changes(last)
    assert store.read_changes(0, 100) == []
    store.append_events(KEY, [event("e5", 1010.0)], None)
    (again,) = store.read_changes(0, 100)
    assert int(again["dynamodb"]["SequenceNumber"]) > last  # a reader resuming after `last` misses nothing


def test_a_deleted_session_takes_its_undelivered_changes_with_it(outbox_store: Any) -> None:
    store = outbox_store
    other = SessionKey("app", "alice", "s2")
    store.create_session(record(), ScopedDelta())
    store.create_session(record(other), ScopedDelta())
    store.append_events(KEY, [event("e1", 1001.0)], None)
    store.append_events(other, [event("o1", 1002.0)], None)
    store.delete_session(KEY)
    store.create_session(record(), ScopedDelta())
    store.append_events(KEY, [event("e1", 2001.0)], None)
    assert [(c.key, c.event["timestamp"]) for c in store.changes(store.read_changes(0, 100))] == [
        (other, 1002.0),
        (KEY, 2001.0),
    ]


# --- DynamoDB: the session's state item --------------------------------------------------------------------------


def test_dynamo_state_item_outlives_the_session_with_a_retention_and_is_rewritten_about_once_a_period(
    aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a retention every append moves the session item's expiry on; the state item (written only when the
    state changes) is written with twice the retention and moved on by the first append that would outlive it."""
    import types

    from agent_memory.stores.dynamo.keys import STATE_SK, events_pk

    now = [1_000_000.0]
    clock = types.SimpleNamespace(time=lambda: now[0], monotonic=time.monotonic, sleep=time.sleep)
    monkeypatch.setattr("agent_memory.stores.dynamo.table.time", clock)
    store = DynamoSessionStore(aws["dynamodb"], TABLE, S3BlobStore(lambda: aws["s3"], BUCKET), retention_days=1)
    day = 86400

    def expiries() -> tuple[int, int]:
        def get(pk: str, sk: str) -> dict[str, Any]:
            key = {"PK": {"S": pk}, "SK": {"S": sk}}
            item: dict[str, Any] = aws["dynamodb"].get_item(TableName=TABLE, Key=key, ConsistentRead=True)["Item"]
            return item

        return int(get("U#app#alice", "S#s1")["expires_at"]["N"]), int(get(events_pk(KEY), STATE_SK)["expires_at"]["N"])

    store.create_session(record(now=now[0]), split_delta({"a": 1}))
    assert expiries() == (now[0] + day, now[0] + 2 * day)
    now[0] += day / 2
    store.append_events(KEY, [event("e1", now[0])], None)
    assert expiries() == (now[0] + day, now[0] - day / 2 + 2 * day)  # the state item is not written
    now[0] += day  # the session would now outlive its state item: the append moves it on
    store.append_events(KEY, [event("e2", now[0])], None)
    assert expiries() == (now[0] + day, now[0] + 2 * day)
    now[0] += 10
    store.append_events(KEY, [event("e3", now[0], delta={"a": 2})], None)  # a state change writes it anyway
    assert expiries() == (now[0] + day, now[0] + 2 * day)
    got = store.get_session(KEY)
    assert got is not None and got.state == {"a": 2}
