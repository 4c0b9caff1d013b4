"""The deletion contract (``SessionStore.delete_events`` / ``purge_deleted``), for every adapter: in memory, SQLite,
DynamoDB (moto)."""

from __future__ import annotations

from typing import Any

import pytest

from agent_memory.errors import PreconditionFailed, SessionNotFound
from agent_memory.policy.state import ScopedDelta
from agent_memory.stores.dynamo.store import DynamoSessionStore
from agent_memory.stores.ports import Deletion, DeletionRaced, EventQuery, SessionKey, SessionStore, marks_of
from agent_memory.stores.s3 import S3BlobStore
from bench.support.aws_counter import RequestCounter
from tests.support.aws import BUCKET, TABLE
from tests.support.sessions import KEY, event, ids_of, record


def ten(store: SessionStore) -> None:
    store.create_session(record(), ScopedDelta())
    for i in range(1, 11):
        store.append_events(KEY, [event(f"e{i}", 1000.0 + i)], None)


def deletion(store: SessionStore, *ranges: tuple[int, int], summary: tuple[str | None, int] = (None, 0)) -> Deletion:
    got = store.get_session(KEY)
    assert got is not None
    return Deletion(tuple(ranges), got.last_seq, got.deletions, summary[0], summary[1])


def test_a_deletion_hides_its_events_from_every_read_at_once_and_moves_only_the_version(
    store: SessionStore,
) -> None:
    ten(store)
    before = store.get_session(KEY)
    assert before is not None
    result = store.delete_events(KEY, deletion(store, (3, 4), (8, 10)), None)
    assert result.version == before.version + 1
    assert result.deleted in (5, None)  # None: the store counts at the purge (DynamoDB)
    after = store.get_session(KEY)
    assert after is not None
    assert (after.version, after.last_seq, after.deletions) == (before.version + 1, 10, before.deletions + 1)
    # Not purged yet: no read shows them, whatever it asks.
    assert ids_of(store, EventQuery()) == ["e1", "e2", "e5", "e6", "e7"]
    assert ids_of(store, EventQuery(num_recent=2)) == ["e6", "e7"]
    assert ids_of(store, EventQuery(num_recent=4, limit=2)) == ["e2", "e5"]
    assert ids_of(store, EventQuery(after_timestamp=1003.0)) == ["e5", "e6", "e7"]
    assert ids_of(store, EventQuery(after_timestamp=1001.0, num_recent=3)) == ["e5", "e6", "e7"]
    assert ids_of(store, EventQuery(after_seq=2, limit=2)) == ["e5", "e6"]
    assert ids_of(store, EventQuery(up_to_seq=9)) == ["e1", "e2", "e5", "e6", "e7"]
    # A seq is never reused: the next event comes after the deleted ones.
    appended = store.append_events(KEY, [event("e11", 1011.0)], None)
    assert appended.events[0]["seq"] == 11
    assert store.purge_deleted(KEY, lambda ids: None) == 5
    assert ids_of(store, EventQuery()) == ["e1", "e2", "e5", "e6", "e7", "e11"]


def test_purge_hands_over_the_ids_before_they_go_and_is_idempotent(store: SessionStore) -> None:
    ten(store)
    store.delete_events(KEY, deletion(store, (2, 3)), None)
    handed: list[list[str]] = []
    assert store.purge_deleted(KEY, handed.append) == 2
    assert sorted(i for batch in handed for i in batch) == ["e2", "e3"]
    assert store.purge_deleted(KEY, handed.append) == 0
    assert len(handed) == 1
    assert ids_of(store, EventQuery()) == ["e1", *(f"e{i}" for i in range(4, 11))]
    # The ids are free again (the events are gone), and a new event takes the next seq.
    again = store.append_events(KEY, [event("e2", 2000.0, "new")], None)
    assert again.created == [True] and again.events[0]["seq"] == 11


def test_a_purge_that_fails_in_its_hook_leaves_the_events_hidden_and_the_next_one_finishes(
    store: SessionStore,
) -> None:
    ten(store)
    store.delete_events(KEY, deletion(store, (1, 10)), None)

    def broken(ids: list[str]) -> None:
        raise RuntimeError("memory store down")

    with pytest.raises(RuntimeError):
        store.purge_deleted(KEY, broken)
    assert ids_of(store, EventQuery()) == []
    handed: list[str] = []
    store.purge_deleted(KEY, handed.extend)
    assert sorted(handed) == sorted(f"e{i}" for i in range(1, 11))
    assert ids_of(store, EventQuery()) == []


def test_the_deletion_moves_the_watermark_and_marks_the_session_due(store: SessionStore) -> None:
    ten(store)
    summary = store.append_compaction(KEY, event("c1", 1100.0), 6, 0)
    assert summary is not None and summary["seq"] == 11
    got = store.get_session(KEY)
    assert got is not None and got.summary_event_id == "c1"
    for key in store.list_due(100):
        store.clear_due(key, got.version)
    store.delete_events(KEY, deletion(store, (4, 4), (11, 11)), None)
    after = store.get_session(KEY)
    assert after is not None
    assert (after.summary_event_id, after.summary_end_seq) == (None, 0)
    assert KEY in store.list_due(100)
    assert "c1" not in ids_of(store, EventQuery())


def test_a_stale_if_match_or_a_moved_session_deletes_nothing(store: SessionStore) -> None:
    ten(store)
    planned = deletion(store, (1, 2))
    with pytest.raises(PreconditionFailed):
        store.delete_events(KEY, planned, expected_version=3)
    store.append_events(KEY, [event("e11", 1011.0)], None)
    with pytest.raises(DeletionRaced):
        store.delete_events(KEY, planned, None)
    assert len(ids_of(store, EventQuery())) == 11
    with pytest.raises(SessionNotFound):
        store.delete_events(SessionKey("app", "alice", "nope"), planned, None)


def test_a_second_deletion_planned_on_the_same_read_is_refused(store: SessionStore) -> None:
    ten(store)
    first = deletion(store, (1, 1))
    second = deletion(store, (2, 2))
    store.delete_events(KEY, first, None)
    with pytest.raises(DeletionRaced):
        store.delete_events(KEY, second, None)


def test_a_compaction_planned_before_a_deletion_stores_no_summary(store: SessionStore) -> None:
    ten(store)
    planned_on = store.get_session(KEY)
    assert planned_on is not None
    store.delete_events(KEY, deletion(store, (2, 2)), None)
    assert store.append_compaction(KEY, event("c1", 1100.0), 5, 0, deletions=planned_on.deletions) is None
    fresh = store.get_session(KEY)
    assert fresh is not None
    assert store.append_compaction(KEY, event("c2", 1100.0), 5, 0, deletions=fresh.deletions) is not None


def test_deleting_the_session_after_a_deletion_leaves_nothing(store: SessionStore) -> None:
    ten(store)
    store.delete_events(KEY, deletion(store, (1, 5)), None)
    store.delete_session(KEY)
    store.create_session(record(), ScopedDelta())
    assert ids_of(store, EventQuery()) == []
    assert store.purge_deleted(KEY, lambda ids: None) == 0


def test_offloaded_payloads_go_with_the_purge_every_version(aws: dict[str, Any]) -> None:
    blobs = S3BlobStore(lambda: aws["s3"], BUCKET)
    dynamo = DynamoSessionStore(aws["dynamodb"], TABLE, blobs, offload_bytes=2_000)
    dynamo.create_session(record(), ScopedDelta())
    dynamo.append_events(KEY, [event("big", 1001.0, "x" * 5_000), event("small", 1002.0)], None)
    listed = aws["s3"].list_object_versions(Bucket=BUCKET, Prefix="sessions/")
    assert listed.get("Versions")
    dynamo.delete_events(KEY, deletion(dynamo, (1, 1)), None)
    dynamo.purge_deleted(KEY, lambda ids: None)
    listed = aws["s3"].list_object_versions(Bucket=BUCKET, Prefix="sessions/")
    assert not listed.get("Versions") and not listed.get("DeleteMarkers")
    assert ids_of(dynamo, EventQuery()) == ["small"]
    items = aws["dynamodb"].query(
        TableName=TABLE,
        KeyConditionExpression="PK = :pk",
        ExpressionAttributeValues={":pk": {"S": "E#app#alice#s1"}},
    )["Items"]
    assert [i["SK"]["S"] for i in items] == ["#STATE", "V#small"]  # the session's state item stays
    session = aws["dynamodb"].get_item(TableName=TABLE, Key={"PK": {"S": "U#app#alice"}, "SK": {"S": "S#s1"}})["Item"]
    assert "hide" not in session  # the purged range left the item


@pytest.mark.parametrize("purged", [False, True])
def test_marks_read_with_the_record_before_a_deletion_never_show_part_of_it(
    store: SessionStore,
    purged: bool,
) -> None:
    """A caller hands ``read_events`` the marks of the record it read (``EventQuery.marks``); a deletion that commits
    (and maybe purges) after that read is still honoured whole: the store checks the count after the events."""
    ten(store)
    stale = store.get_session(KEY)
    assert stale is not None
    store.delete_events(KEY, deletion(store, (3, 6)), None)
    if purged:
        store.purge_deleted(KEY, lambda ids: None)
    marks = marks_of(stale)
    assert ids_of(store, EventQuery(marks=marks)) == ["e1", "e2", "e7", "e8", "e9", "e10"]
    assert ids_of(store, EventQuery(num_recent=6, marks=marks)) == ["e1", "e2", "e7", "e8", "e9", "e10"]
    # Fresh marks (a record read after the deletion) hide the same range without any read of them before the events.
    fresh = store.get_session(KEY)
    assert fresh is not None and fresh.deletions == stale.deletions + 1
    assert ids_of(store, EventQuery(after_seq=1, limit=3, marks=marks_of(fresh))) == ["e2", "e7", "e8"]


def test_marks_from_the_record_save_the_read_before_the_events(aws: dict[str, Any]) -> None:
    dynamo = DynamoSessionStore(aws["dynamodb"], TABLE, S3BlobStore(aws["s3"], BUCKET))
    ten(dynamo)
    dynamo.delete_events(KEY, deletion(dynamo, (2, 2)), None)
    got = dynamo.get_session(KEY)
    assert got is not None and got.hidden == ((2, 2),)
    counter = RequestCounter().attach(aws["dynamodb"], aws["s3"])
    assert [e["id"] for e in dynamo.read_events(KEY, EventQuery(num_recent=3, marks=marks_of(got)))] == [
        "e8",
        "e9",
        "e10",
    ]
    # The events' Query and the one-item Query of the deletion count after it; no read of the marks before.
    assert counter.count("dynamodb", "Query") == 2
    counter.reset()
    dynamo.read_events(KEY, EventQuery(num_recent=3))
    assert counter.count("dynamodb", "Query") == 3


def planned_on(store: SessionStore, *ranges: tuple[int, int]) -> Deletion:
    """A deletion that hands the store the record it was planned on (as the service does)."""
    got = store.get_session(KEY)
    assert got is not None
    return Deletion(tuple(ranges), got.last_seq, got.deletions, None, 0, record=got)


def test_a_deletion_whose_record_moved_is_refused_or_decided_on_the_session_as_it_is(
    store: SessionStore,
) -> None:
    """The record stands in for the store's own read only as a condition: a session that moved since fails it and
    is read again (an append: refused, to be planned again); a record whose hidden ranges a purge has emptied
    since still commits, and the purge it hands its ranges to leaves nothing hidden."""
    ten(store)
    stale = planned_on(store, (1, 1))
    store.append_events(KEY, [event("e11", 1011.0)], None)
    with pytest.raises(DeletionRaced):
        store.delete_events(KEY, stale, None)
    store.delete_events(KEY, planned_on(store, (2, 2)), None)
    purged_since = planned_on(store, (5, 5))  # its record still shows (2, 2) hidden
    assert store.purge_deleted(KEY, lambda ids: None) == 1
    result = store.delete_events(KEY, purged_since, None)
    handed: list[str] = []
    store.purge_deleted(KEY, handed.extend, hidden=result.hidden)
    assert handed == ["e5"]
    after = store.get_session(KEY)
    assert after is not None and after.hidden == () and after.version == result.version
    assert ids_of(store, EventQuery()) == [f"e{i}" for i in (1, 3, 4, 6, 7, 8, 9, 10, 11)]
    assert store.purge_deleted(KEY, lambda ids: None) == 0  # nothing left to finish
