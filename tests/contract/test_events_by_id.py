"""Reads by id (``SessionStore.read_events_by_id``), for every adapter: in memory, SQLite, DynamoDB (moto). Named
events come back in the order named; a prefix's in id order, either way, paged by ``after_id``; pending deletions
are never read, and a read by prefix reads about the items it returns, whatever the session holds."""

from __future__ import annotations

from typing import Any

from agent_memory.policy.state import ScopedDelta
from agent_memory.stores.dynamo.store import DynamoSessionStore
from agent_memory.stores.ports import Deletion, IdQuery, SessionStore
from agent_memory.stores.s3 import S3BlobStore
from agent_memory.wire.jsonio import event_size
from bench.support.aws_counter import RequestCounter
from tests.support.aws import BUCKET, TABLE
from tests.support.sessions import KEY, MARKS, event, record

# Ids of two families and one other, appended out of id order.
IDS = ["cp-b-03", "w-x", "cp-a-02", "cp-b-01", "cp-a-01", "cp-b-02", "cp-a-03", "z"]


def filled(store: SessionStore, text: str = "hi") -> None:
    store.create_session(record(), ScopedDelta())
    store.append_events(KEY, [event(i, 1000.0 + n, text=text) for n, i in enumerate(IDS)], None)


def ids(events: list[dict[str, Any]]) -> list[str]:
    return [e["id"] for e in events]


def test_named_events_come_back_in_the_order_named_and_unknown_ids_are_left_out(store: SessionStore) -> None:
    filled(store)
    got = store.read_events_by_id(KEY, IdQuery(ids=("z", "cp-a-01", "nope", "w-x", "z")))
    assert ids(got) == ["z", "cp-a-01", "w-x"]
    assert [e["seq"] for e in got] == [8, 5, 2]
    assert store.read_events_by_id(KEY, IdQuery(ids=("nope",))) == []


def test_a_prefix_reads_in_id_order_either_way_and_pages_by_after_id(store: SessionStore) -> None:
    filled(store)
    assert ids(store.read_events_by_id(KEY, IdQuery(prefix="cp-b-"))) == ["cp-b-01", "cp-b-02", "cp-b-03"]
    assert ids(store.read_events_by_id(KEY, IdQuery(prefix="cp-b-", descending=True))) == [
        "cp-b-03",
        "cp-b-02",
        "cp-b-01",
    ]
    # The newest of a family: the greatest id, one item.
    assert ids(store.read_events_by_id(KEY, IdQuery(prefix="cp-a-", descending=True, limit=1))) == ["cp-a-03"]
    # Pages: after_id is exclusive, in the query's direction, and need not be an id the session holds.
    first = store.read_events_by_id(KEY, IdQuery(prefix="cp-", limit=2))
    assert ids(first) == ["cp-a-01", "cp-a-02"]
    assert ids(store.read_events_by_id(KEY, IdQuery(prefix="cp-", limit=2, after_id="cp-a-02"))) == [
        "cp-a-03",
        "cp-b-01",
    ]
    assert ids(store.read_events_by_id(KEY, IdQuery(prefix="cp-", descending=True, after_id="cp-b-01", limit=2))) == [
        "cp-a-03",
        "cp-a-02",
    ]
    assert ids(store.read_events_by_id(KEY, IdQuery(prefix="cp-b-", descending=True, after_id="cp-b-015"))) == [
        "cp-b-01"
    ]
    assert ids(store.read_events_by_id(KEY, IdQuery(prefix="cp-b-", after_id="cp-b-015"))) == ["cp-b-02", "cp-b-03"]
    # A prefix that is a whole id includes it; "" is every event.
    assert ids(store.read_events_by_id(KEY, IdQuery(prefix="z"))) == ["z"]
    assert ids(store.read_events_by_id(KEY, IdQuery())) == sorted(IDS)
    assert store.read_events_by_id(KEY, IdQuery(prefix="q")) == []


def test_a_read_stops_on_size_after_the_event_that_reaches_it(store: SessionStore) -> None:
    filled(store, text="z" * 3_000)  # offloaded to S3 by the DynamoDB store of this suite
    one = event_size(store.read_events_by_id(KEY, IdQuery(ids=("z",)))[0])
    got = store.read_events_by_id(KEY, IdQuery(prefix="cp-", max_bytes=one + 10))
    assert ids(got) == ["cp-a-01", "cp-a-02"]
    assert got[0]["content"]["parts"][0]["text"] == "z" * 3_000


def test_pending_deletions_are_never_read_and_a_missing_session_has_none(store: SessionStore) -> None:
    assert store.read_events_by_id(KEY, IdQuery(ids=("z",))) == []
    assert store.read_events_by_id(KEY, IdQuery(prefix="cp-")) == []
    filled(store)
    got = store.get_session(KEY)
    assert got is not None
    # Seqs 3..5: cp-a-02, cp-b-01, cp-a-01.
    store.delete_events(
        KEY, Deletion(((3, 5),), got.last_seq, got.deletions, got.summary_event_id, got.summary_end_seq), None
    )
    assert ids(store.read_events_by_id(KEY, IdQuery(prefix="cp-"))) == ["cp-a-03", "cp-b-02", "cp-b-03"]
    assert ids(store.read_events_by_id(KEY, IdQuery(ids=("cp-a-01", "z", "cp-b-01")))) == ["z"]
    store.purge_deleted(KEY, lambda ids: None)
    assert ids(store.read_events_by_id(KEY, IdQuery(prefix="cp-a"))) == ["cp-a-03"]


def test_a_prefix_read_reads_about_the_items_it_returns(aws: dict[str, Any]) -> None:
    dynamo = DynamoSessionStore(aws["dynamodb"], TABLE, S3BlobStore(lambda: aws["s3"], BUCKET))
    dynamo.create_session(record(), ScopedDelta())
    for first in range(0, 300, 100):
        dynamo.append_events(KEY, [event(f"m{i:04}", 1000.0 + i) for i in range(first, first + 100)], None)
    dynamo.append_events(KEY, [event(f"cp-{i:04}", 2000.0 + i) for i in range(50)], None)
    counter = RequestCounter().attach(aws["dynamodb"], aws["s3"])
    got = dynamo.read_events_by_id(KEY, IdQuery(prefix="cp-", descending=True, limit=3))
    assert ids(got) == ["cp-0049", "cp-0048", "cp-0047"]
    # One Query of at most the page and one more, between the deletion marks' two reads.
    assert counter.count("dynamodb", "Query") == 1 + MARKS and counter.items_read <= 4 + MARKS
    counter = RequestCounter().attach(aws["dynamodb"], aws["s3"])
    got = dynamo.read_events_by_id(KEY, IdQuery(ids=("m0007", "cp-0003")))
    assert ids(got) == ["m0007", "cp-0003"]
    assert counter.count("dynamodb", "BatchGetItem") == 1 and counter.items_read <= 2 + MARKS
