"""Reads by time (``after_timestamp``) whatever order the timestamps came in, and what the DynamoDB store pays for
them: a session's events are in no ``by_ts`` index entry (one index write less per append; the session item
tracks their time order, ``tmax`` and ``tskew``, instead), and a read by time reads about its answer."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_memory.policy.state import ScopedDelta
from agent_memory.stores.dynamo.keys import session_key
from agent_memory.stores.dynamo.store import DynamoSessionStore
from agent_memory.stores.ports import EventQuery, SessionKey, SessionRecord, SessionStore
from agent_memory.stores.s3 import S3BlobStore
from bench.support.aws_counter import RequestCounter
from tests.support.aws import BUCKET, TABLE
from tests.support.sessions import event, exported_event, record

_sessions = itertools.count()


def dynamo(aws: dict[str, Any]) -> DynamoSessionStore:
    return DynamoSessionStore(aws["dynamodb"], TABLE, S3BlobStore(lambda: aws["s3"], BUCKET))


def by_ts_entries(aws: dict[str, Any], key: SessionKey) -> int:
    response = aws["dynamodb"].query(
        TableName=TABLE,
        IndexName="by_ts",
        KeyConditionExpression="PK = :pk",
        ExpressionAttributeValues={":pk": {"S": f"E#{key.app_name}#{key.user_id}#{key.session_id}"}},
        Select="COUNT",
    )
    return int(response["Count"])


# Batches of timestamps (whole seconds, so that equal ones and exact boundaries come up), in any order.
batches = st.lists(st.lists(st.integers(0, 40), min_size=1, max_size=4), min_size=1, max_size=8)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stamps=batches, since=st.integers(-1, 42), recent=st.one_of(st.none(), st.integers(1, 5)))
def test_a_read_by_time_answers_every_event_at_or_after_it_in_seq_order(
    store: SessionStore, stamps: list[list[int]], since: int, recent: int | None
) -> None:
    key = SessionKey("app", "alice", f"s{next(_sessions)}")
    store.create_session(record(key), ScopedDelta())
    stored: list[tuple[str, float]] = []
    for batch in stamps:
        events = [event(f"e{len(stored) + i}", 1000.0 + ts) for i, ts in enumerate(batch)]
        store.append_events(key, events, None)
        stored += [(e.id, e.timestamp) for e in events]
    expected = [i for i, ts in stored if ts >= 1000.0 + since]
    if recent is not None:
        expected = expected[-recent:]
    got = store.read_events(key, EventQuery(after_timestamp=1000.0 + since, num_recent=recent))
    assert [e["id"] for e in got] == expected
    # Paged: the same events, a page at a time.
    paged: list[str] = []
    after: int | None = None
    while True:
        page = store.read_events(key, EventQuery(after_timestamp=1000.0 + since, after_seq=after, limit=2))
        paged += [e["id"] for e in page]
        if len(page) < 2:
            break
        after = page[-1]["seq"]
    assert paged == [i for i, ts in stored if ts >= 1000.0 + since]


def test_a_new_sessions_events_take_no_by_ts_entry(aws: dict[str, Any]) -> None:
    store = dynamo(aws)
    key = SessionKey("app", "alice", "s1")
    store.create_session(record(key), ScopedDelta())
    store.append_events(key, [event(f"e{i}", 1000.0 + i) for i in range(5)], None)
    assert by_ts_entries(aws, key) == 0
    item = aws["dynamodb"].get_item(TableName=TABLE, Key=session_key(key), ConsistentRead=True)["Item"]
    assert (item["tmax"]["N"], item["tskew"]["N"]) == ("1004.0", "0.0")
    assert [e["timestamp"] for e in store.read_events(key, EventQuery(after_timestamp=1003.0))] == [1003.0, 1004.0]


def test_a_read_by_time_reads_about_its_answer(aws: dict[str, Any]) -> None:
    store = dynamo(aws)
    key = SessionKey("app", "alice", "long")
    store.create_session(record(key), ScopedDelta())
    for start in range(0, 400, 100):
        store.append_events(key, [event(f"e{i}", 1000.0 + i) for i in range(start, start + 100)], None)
    counter = RequestCounter().attach(aws["dynamodb"])
    assert len(store.read_events(key, EventQuery(after_timestamp=1390.0))) == 10
    # The session item three times (its time order, its deletion marks before and after), the 10 events forward
    # (their bodies) and the newest-first pages that found their seqs: pages of 8, 16, ... stop at the first
    # event below the time, so they read at most twice the answer and the first page.
    assert counter.items_read <= 3 + 10 + (2 * 10 + 8)
    assert counter.count("dynamodb", "Scan") == 0
    # Timestamps that fell back by 30 s once: the read goes back 30 s further, still not the whole session.
    store.append_events(key, [event("late", 1370.0)], None)
    counter.reset()
    got = [e["id"] for e in store.read_events(key, EventQuery(after_timestamp=1375.0))]
    assert got == [f"e{i}" for i in range(375, 400)]
    counter.reset()
    assert [e["id"] for e in store.read_events(key, EventQuery(after_timestamp=1365.0))][-1] == "late"
    # 36 events answer; the pages go down to 1365 - 29 s of skew (29 events more), then stop: not the 401.
    assert counter.items_read <= 3 + 36 + (2 * (36 + 29) + 8)


def test_an_imported_session_tracks_its_events_time_order(aws: dict[str, Any]) -> None:
    store = dynamo(aws)
    key = SessionKey("app", "alice", "imported")
    record_ = SessionRecord("app", "alice", "imported", create_time=1.0, update_time=30.0, version=3, last_seq=5)
    events = [exported_event("a", 1, 20.0), exported_event("b", 2, 12.0), exported_event("c", 5, 30.0)]
    store.import_session(record_, events, replace=False)
    assert by_ts_entries(aws, key) == 0
    assert [e["id"] for e in store.read_events(key, EventQuery(after_timestamp=15.0))] == ["a", "c"]
    # Appends after it keep the order it started with: an event 18 s below the greatest (30.0).
    store.append_events(key, [event("d", 12.0), event("e", 31.0)], None)
    assert [e["id"] for e in store.read_events(key, EventQuery(after_timestamp=12.0))] == ["a", "b", "c", "d", "e"]
    assert [e["id"] for e in store.read_events(key, EventQuery(after_timestamp=30.5))] == ["e"]
    assert [e["id"] for e in store.read_events(key, EventQuery(after_timestamp=13.0))] == ["a", "c", "e"]
