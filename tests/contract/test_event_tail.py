"""The newest-first read (``SessionStore.read_tail``), for every adapter: in memory, SQLite, DynamoDB (moto). It reads
pages of the newest events as its caller's ``need`` asks, leaves out pending deletions, is one view of the session
(never half a deletion) and reads about what it returns."""

from __future__ import annotations

from typing import Any

import pytest

from agent_memory.policy.state import ScopedDelta
from agent_memory.stores.dynamo.store import DynamoSessionStore
from agent_memory.stores.ports import Deletion, EventQuery, SessionStore, Tail, marks_of
from agent_memory.stores.s3 import S3BlobStore
from agent_memory.stores.sqlite.store import SqliteSessionStore
from bench.support.aws_counter import RequestCounter
from tests.support.aws import BUCKET, TABLE
from tests.support.sessions import KEY, MARKS, event, record


def ten(store: SessionStore, text: str = "hi") -> None:
    store.create_session(record(), ScopedDelta())
    store.append_events(KEY, [event(f"e{i}", 1000.0 + i, text=text) for i in range(1, 11)], None)


def paced(*pages: int) -> tuple[list[int], Any]:
    """A ``need`` answering ``pages`` in turn (then 0; from the first again when a read starts again, shown no
    events), and the list of how many events it was shown each time."""
    shown: list[int] = []
    turn = 0

    def need(events: list[dict[str, Any]]) -> int:
        nonlocal turn
        assert [e["seq"] for e in events] == sorted(e["seq"] for e in events)  # oldest first
        shown.append(len(events))
        turn = 0 if not events else turn + 1
        return pages[turn] if turn < len(pages) else 0

    return shown, need


def ids(tail: Tail) -> list[str]:
    return [e["id"] for e in tail.events]


def delete(store: SessionStore, lo: int, hi: int) -> None:
    got = store.get_session(KEY)
    assert got is not None
    deletion = Deletion(((lo, hi),), got.last_seq, got.deletions, got.summary_event_id, got.summary_end_seq)
    store.delete_events(KEY, deletion, None)


def test_pages_are_read_newest_first_as_need_asks_and_come_back_oldest_first(store: SessionStore) -> None:
    ten(store)
    shown, need = paced(3, 2, 0)
    tail = store.read_tail(KEY, EventQuery(), need)
    assert ids(tail) == ["e6", "e7", "e8", "e9", "e10"] and tail.older == 5
    assert shown == [0, 3, 5]
    assert [e["seq"] for e in tail.events] == [6, 7, 8, 9, 10]


def test_a_read_that_reaches_the_selections_start_stops_there(store: SessionStore) -> None:
    ten(store)
    shown, need = paced(4, 100, 100)
    tail = store.read_tail(KEY, EventQuery(), need)
    assert ids(tail) == [f"e{i}" for i in range(1, 11)] and tail.older == 0
    assert shown[:2] == [0, 4] and set(shown[2:]) <= {10}
    # The selection by seq: after_seq < seq <= up_to_seq.
    _, need = paced(2, 0)
    tail = store.read_tail(KEY, EventQuery(after_seq=2, up_to_seq=8), need)
    assert ids(tail) == ["e7", "e8"] and tail.older == 4
    _, need = paced(50)
    assert ids(store.read_tail(KEY, EventQuery(after_seq=2, up_to_seq=8), need)) == [f"e{i}" for i in range(3, 9)]
    assert store.read_tail(KEY, EventQuery(after_seq=10), paced(5)[1]) == Tail(events=[], older=0)
    assert store.read_tail(KEY, EventQuery(after_seq=6, up_to_seq=6), paced(5)[1]) == Tail(events=[], older=0)


def test_nothing_is_read_when_need_wants_nothing_and_a_missing_session_has_no_events(
    store: SessionStore,
) -> None:
    assert store.read_tail(KEY, EventQuery(), paced(5)[1]) == Tail(events=[], older=0)
    ten(store)
    assert store.read_tail(KEY, EventQuery(), paced(0)[1]) == Tail(events=[], older=0)  # nothing asked, none read


def test_only_a_selection_by_seq_is_read(store: SessionStore) -> None:
    ten(store)
    for query in (
        EventQuery(num_recent=3),
        EventQuery(limit=2),
        EventQuery(max_bytes=10),
        EventQuery(after_timestamp=1),
    ):
        with pytest.raises(ValueError):
            store.read_tail(KEY, query, paced(5)[1])


def test_pending_deletions_are_left_out_and_not_counted(store: SessionStore) -> None:
    ten(store)
    delete(store, 4, 6)
    tail = store.read_tail(KEY, EventQuery(), paced(3, 2, 0)[1])
    assert ids(tail) == ["e3", "e7", "e8", "e9", "e10"] and tail.older == 2
    # Marks read with an older record (before another deletion) are not trusted past the read: the read starts again.
    stale = store.get_session(KEY)
    assert stale is not None
    delete(store, 8, 9)
    tail = store.read_tail(KEY, EventQuery(marks=marks_of(stale)), paced(3, 0)[1])
    assert ids(tail) == ["e3", "e7", "e10"] and tail.older == 2
    # Purged, the events are gone; a purged prefix is not counted (a purged gap between may be: DynamoDB counts
    # seqs).
    store.purge_deleted(KEY, lambda ids: None)
    tail = store.read_tail(KEY, EventQuery(), paced(2, 0)[1])
    assert ids(tail) == ["e7", "e10"] and 3 <= tail.older <= 6
    delete(store, 1, 3)
    store.purge_deleted(KEY, lambda ids: None)
    tail = store.read_tail(KEY, EventQuery(), paced(2, 0)[1])
    assert ids(tail) == ["e7", "e10"] and tail.older == 0


def test_a_deletion_committed_during_the_read_is_never_half_seen(store: SessionStore) -> None:
    ten(store)
    deleted = False

    def need(events: list[dict[str, Any]]) -> int:
        nonlocal deleted
        if not events:
            return 3  # the first page (of every attempt)
        if not deleted:
            deleted = True
            # After the first page (8..10), before the second: some read, some not; purged (gone from storage).
            delete(store, 5, 9)
            if not isinstance(store, SqliteSessionStore):
                # (SQLite's rows go with the deletion's commit, which its read, one snapshot, does not see; its
                # purge empties the log and waits for readers: this read's own snapshot, held while need runs.)
                store.purge_deleted(KEY, lambda ids: None)
            return 3
        return 0

    tail = store.read_tail(KEY, EventQuery(), need)
    seqs = [e["seq"] for e in tail.events]
    inside = [s for s in seqs if 5 <= s <= 9]
    # All the deleted events of the seqs read, or none of them.
    assert inside in ([], list(range(max(5, seqs[0]), 10))), seqs


def test_large_events_round_trip(store: SessionStore) -> None:
    ten(store, text="z" * 3_000)  # offloaded to S3 by the DynamoDB store of this suite
    tail = store.read_tail(KEY, EventQuery(), paced(2, 0)[1])
    assert [e["content"]["parts"][0]["text"] for e in tail.events] == ["z" * 3_000] * 2


def test_a_tail_reads_about_the_items_it_returns(aws: dict[str, Any]) -> None:
    dynamo = DynamoSessionStore(aws["dynamodb"], TABLE, S3BlobStore(lambda: aws["s3"], BUCKET), offload_bytes=2_000)
    dynamo.create_session(record(), ScopedDelta())
    for first in range(0, 300, 100):
        dynamo.append_events(KEY, [event(f"e{i}", 1000.0 + i) for i in range(first, first + 100)], None)
    big = [event(f"b{i}", 2000.0 + i, text="y" * 3_000) for i in range(5)]
    dynamo.append_events(KEY, big, None)
    counter = RequestCounter().attach(aws["dynamodb"], aws["s3"])
    tail = dynamo.read_tail(KEY, EventQuery(), paced(24, 0)[1])
    assert len(tail.events) == 24 and tail.older == 281
    # The page (24 items) in one newest-first Query, the oldest stored seq (one item), the deletion marks before
    # and after.
    assert counter.items_read <= 24 + 1 + MARKS and counter.count("dynamodb", "Query") == 2 + MARKS
    assert counter.count("s3", "GetObject") == 5  # the payloads of the page only
    assert counter.count("dynamodb", "Scan") == 0
    # With the caller's marks wanting no deletion: nothing more; a page of 10,000 is paged by DynamoDB.
    counter.reset()
    record_now = dynamo.get_session(KEY)
    assert record_now is not None
    counter.reset()
    tail = dynamo.read_tail(KEY, EventQuery(after_seq=100, marks=marks_of(record_now)), paced(10_000)[1])
    assert len(tail.events) == 205 and tail.older == 0
    assert counter.items_read <= 205 + 1
