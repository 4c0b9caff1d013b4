"""A compaction plans on the session item alone, read eventually consistent (half a read unit instead of the four
of a session read with its state items), against moto. A stale record is safe: every field a plan uses is checked
again by the consistent read its write is conditioned on, so a plan made on an old record stores nothing, keeps
no deleted text, settles nothing, and the session stays due for the next sweep."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from agent_memory.service.compaction import CompactionService
from agent_memory.service.sessions import SessionService
from agent_memory.stores.dynamo.store import DynamoSessionStore
from agent_memory.stores.ports import EventQuery, SessionKey, SessionRecord
from agent_memory.stores.s3 import S3BlobStore
from bench.support.aws_counter import RequestCounter
from tests.support.aws import BUCKET, TABLE
from tests.support.compaction import NOW, SETTINGS, FakeSummarizer, add_invocations, key


class StaleStore(DynamoSessionStore):
    """The DynamoDB store whose compaction read answers with a record kept from earlier (``stale``), as an
    eventually consistent read may for a moment after a write."""

    stale: SessionRecord | None = None

    def get_session_for_compaction(self, key: SessionKey) -> SessionRecord | None:
        if self.stale is not None:
            return self.stale
        return super().get_session_for_compaction(key)


@pytest.fixture
def store(aws: dict[str, Any]) -> StaleStore:
    return StaleStore(aws["dynamodb"], TABLE, S3BlobStore(lambda: aws["s3"], BUCKET), offload_bytes=2_000)


@pytest.fixture
def sessions(store: StaleStore) -> SessionService:
    return SessionService(store, None, clock=lambda: NOW)


def summaries(store: StaleStore) -> list[dict[str, Any]]:
    events = store.read_events(key(), EventQuery())
    return [e for e in events if (e.get("actions") or {}).get("compaction")]


def summary_texts(store: StaleStore) -> list[str]:
    return [s["actions"]["compaction"]["compacted_content"]["parts"][0]["text"] for s in summaries(store)]


def test_the_compaction_read_is_the_session_item_alone_eventually_consistent(
    store: StaleStore, sessions: SessionService, aws: dict[str, Any]
) -> None:
    add_invocations(sessions, "s1", 4)
    full = store.get_session(key())
    counter = RequestCounter().attach(aws["dynamodb"])
    consistent: list[bool] = []
    aws["dynamodb"].meta.events.register(
        "before-parameter-build.dynamodb.GetItem", lambda params, **_: consistent.append(params["ConsistentRead"])
    )
    record = store.get_session_for_compaction(key())
    assert counter.calls == [("dynamodb", "GetItem")] and counter.items_read == 1 and consistent == [False]
    assert full is not None and record is not None
    # what a plan uses is the session's; the states are left out
    same = ("version", "last_seq", "summary_event_id", "summary_end_seq", "incarnation", "deletions", "hidden")
    assert {f: getattr(record, f) for f in same} == {f: getattr(full, f) for f in same}
    assert record.state == {} and record.memo == {}
    assert store.get_session_for_compaction(key("none")) is None
    store.delete_session(key())
    assert store.get_session_for_compaction(key()) is None


def test_a_compaction_reads_the_session_once_by_its_compaction_read(
    store: StaleStore, sessions: SessionService, aws: dict[str, Any]
) -> None:
    add_invocations(sessions, "s1", 4)
    service = CompactionService(store, FakeSummarizer(), SETTINGS, clock=lambda: NOW)
    counter = RequestCounter().attach(aws["dynamodb"])
    report = service.run_sessions([key()], lambda: 300.0)
    assert (report.compacted, report.settled, report.failed) == (1, 1, 0)
    assert counter.count("dynamodb", "BatchGetItem") == 0  # no session read with its state items
    # the compaction read, then the summary's consistent counter read (its transaction is conditioned on it)
    assert counter.count("dynamodb", "GetItem") == 2
    assert store.list_due(10) == []


def test_a_plan_on_a_record_older_than_a_summary_stores_nothing(store: StaleStore, sessions: SessionService) -> None:
    add_invocations(sessions, "s1", 4)
    service = CompactionService(store, FakeSummarizer(), SETTINGS, clock=lambda: NOW)
    store.stale = store.get_session_for_compaction(key())  # read before the first summary landed
    store.stale, before = None, store.stale
    assert service.compact_session(key(), force=True).compacted
    store.stale = before
    outcome = service.compact_session(key(), force=True)
    assert not outcome.compacted and outcome.reason == "another compaction committed first"
    assert len(summaries(store)) == 1
    record = store.get_session(key())
    assert record is not None and record.summary_event_id == summaries(store)[0]["id"]


def test_a_plan_on_a_record_older_than_a_deletion_keeps_no_deleted_text(
    store: StaleStore, sessions: SessionService
) -> None:
    add_invocations(sessions, "s1", 4)
    service = CompactionService(store, FakeSummarizer(), SETTINGS, clock=lambda: NOW)
    store.stale = store.get_session_for_compaction(key())  # read before the deletion
    sessions.delete_event(app_name="app", user_id="bob", session_id="s1", event_id="s1-u0")
    summarizer = FakeSummarizer()
    stale_service = CompactionService(store, summarizer, SETTINGS, clock=lambda: NOW)
    outcome = stale_service.compact_session(key(), force=True)
    assert not outcome.compacted and summaries(store) == []
    # the events it read were read after the deletion's marks moved: the deleted text never reached the model
    assert all(t.text != "s1 user 0" for turns, _ in summarizer.calls for t in turns)
    store.stale = None
    assert service.compact_session(key(), force=True).compacted
    assert len(summaries(store)) == 1


def test_a_record_older_than_an_append_settles_nothing(store: StaleStore, sessions: SessionService) -> None:
    add_invocations(sessions, "s1", 4)
    service = CompactionService(store, FakeSummarizer(), SETTINGS, clock=lambda: NOW)
    assert service.run_sessions([key()], lambda: 300.0).settled == 1
    add_invocations(sessions, "s1", 1, start=4)  # marks the session due again: not enough for a summary
    fresh = store.get_session_for_compaction(key())
    assert fresh is not None
    store.stale = dataclasses.replace(fresh, version=fresh.version - 1)  # as read before that append
    report = service.run_sessions([key()], lambda: 300.0)
    assert (report.compacted, report.settled) == (0, 0)
    assert store.list_due(10) == [key()]  # stays due: the next sweep, on a fresh record, settles it
    store.stale = None
    assert service.run_sessions([key()], lambda: 300.0).settled == 1
    assert store.list_due(10) == []
