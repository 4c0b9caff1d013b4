"""Faults on the write paths the session quota changed: the create's transaction (which counts the session on the
user's state item) and the delete's tombstone transaction (which takes it out). The count must move exactly once
per session created or deleted, whatever answer is lost or retried."""

from __future__ import annotations

from typing import Any

import pytest

from agent_memory.stores.dynamo.keys import SESSIONS_ATTR, STATE_SK, session_pk
from tests.support.api import Api, text_event
from tests.support.aws import TABLE

from .injector import FaultInjector, cancelled, request_json, throttle
from .session_storage import session_item


@pytest.fixture
def api(aws: dict[str, Any], faults: FaultInjector, monkeypatch: pytest.MonkeyPatch) -> Api:
    monkeypatch.setenv("MAX_SESSIONS_PER_USER", "2")
    monkeypatch.setenv("MAX_EVENTS_PER_SESSION", "3")
    return Api()


@pytest.fixture
def short_budget(monkeypatch: pytest.MonkeyPatch) -> float:
    """A write budget of 1.5 s, so that tests of what happens when it runs out stay quick."""
    monkeypatch.setattr("agent_memory.stores.dynamo.retries.WRITE_BUDGET_S", 1.5)
    return 1.5


def session_count(aws: dict[str, Any], user: str = "alice") -> int | None:
    """The user's session count as stored (None: never counted)."""
    item = (
        aws["dynamodb"]
        .get_item(
            TableName=TABLE, Key={"PK": {"S": session_pk("app", user)}, "SK": {"S": STATE_SK}}, ConsistentRead=True
        )
        .get("Item", {})
    )
    return int(item[SESSIONS_ATTR]["N"]) if SESSIONS_ATTR in item else None


def is_delete(request: Any) -> bool:
    """The delete's tombstone transaction (not a create's)."""
    return "deleting" in str(request_json(request).get("TransactItems", ""))


def is_create(request: Any) -> bool:
    return "TransactItems" in request_json(request) and not is_delete(request)


def delete(api: Api, sid: str) -> int:
    return api.request("DELETE", f"/apps/app/users/alice/sessions/{sid}").status


@pytest.mark.parametrize("lost", [1, 3], ids=["botocore-retry", "store-retry"])
def test_a_create_whose_answer_is_lost_counts_once(
    api: Api, aws: dict[str, Any], faults: FaultInjector, lost: int
) -> None:
    # Applied, answer lost; the retry (botocore's, then the store's own) fails on the session's condition as a whole
    # transaction, so the count it carries is not added again, and the store knows its own incarnation.
    faults.lose_answer("TransactWriteItems", times=lost, when=is_create)
    reply = api.create(session_id="s1")
    assert reply.status == 201 and reply.body["created"] is True
    faults.clear()
    assert session_count(aws) == 1
    assert api.create(session_id="s2").status == 201
    refused = api.create(session_id="s3")
    assert refused.status == 429 and refused.error["field"] == "sessions_per_user"
    assert session_item(aws, "s3") is None and session_count(aws) == 2


def test_a_throttled_create_past_the_budget_counts_nothing(
    api: Api, aws: dict[str, Any], faults: FaultInjector, short_budget: float
) -> None:
    faults.fail("TransactWriteItems", throttle(), times=-1, when=is_create)
    assert api.create(session_id="s1").status == 503
    faults.clear()
    assert session_item(aws) is None and not session_count(aws)
    assert api.create(session_id="s1").status == 201 and session_count(aws) == 1


def test_a_create_cancelled_by_a_conflict_is_retried_and_counted_once(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    faults.fail("TransactWriteItems", cancelled("None", "TransactionConflict"), times=2, when=is_create)
    assert api.create(session_id="s1").status == 201
    faults.clear()
    assert session_count(aws) == 1


@pytest.mark.parametrize("lost", [1, 3], ids=["botocore-retry", "store-retry"])
def test_a_delete_whose_answer_is_lost_takes_the_session_out_once(
    api: Api, aws: dict[str, Any], faults: FaultInjector, lost: int
) -> None:
    api.create(session_id="s1")
    api.create(session_id="s2")
    # The retry finds the tombstone (its condition asks for a live session) and takes nothing out again.
    faults.lose_answer("TransactWriteItems", times=lost, when=is_delete)
    assert delete(api, "s1") == 204
    faults.clear()
    assert session_count(aws) == 1 and session_item(aws, "s1") is None
    assert delete(api, "s1") == 204  # the client's own retry
    assert session_count(aws) == 1
    assert api.create(session_id="s3").status == 201
    assert api.create(session_id="s4").status == 429


def test_a_delete_that_fails_part_way_and_is_retried_takes_the_session_out_once(
    api: Api, aws: dict[str, Any], faults: FaultInjector, short_budget: float
) -> None:
    api.create(session_id="s1")
    api.append("s1", text_event("hello", id="e1"))
    faults.fail("BatchWriteItem", throttle(), times=-1)  # the purge, after the tombstone transaction committed
    assert delete(api, "s1") == 503
    faults.clear()
    assert session_count(aws) == 0  # the tombstone took it out; the session is gone for readers
    assert delete(api, "s1") == 204
    assert session_count(aws) == 0 and session_item(aws, "s1") is None


def test_a_throttled_delete_is_retried_and_takes_the_session_out_once(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    api.create(session_id="s1")
    faults.fail("TransactWriteItems", throttle(), times=4, when=is_delete)  # past botocore's: the store's backoff
    assert delete(api, "s1") == 204
    faults.clear()
    assert session_count(aws) == 0 and session_item(aws, "s1") is None


def test_sessions_removed_by_ttl_are_recounted_at_the_limit(
    api: Api, aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RETENTION_DAYS", "30")
    api.create(session_id="s1")
    api.create(session_id="s2")
    # As DynamoDB's TTL removes an expired session: the item goes, the count stays.
    aws["dynamodb"].delete_item(TableName=TABLE, Key={"PK": {"S": session_pk("app", "alice")}, "SK": {"S": "S#s1"}})
    assert session_count(aws) == 2
    assert api.create(session_id="s3").status == 201  # counted again (one left, s2), then created
    assert session_count(aws) == 2
    assert api.create(session_id="s4").status == 429  # the true count is at the limit


def test_a_lost_append_answer_at_the_event_quota_is_answered_not_refused(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    api.create(session_id="s1")
    api.append("s1", {"events": [text_event("a", id="a"), text_event("b", id="b")]})
    faults.lose_answer("TransactWriteItems", times=3)  # the third event lands; the store never hears of it
    first = api.append("s1", text_event("c", id="c"))
    faults.clear()
    # Whatever the first attempt answered, the client's retry (the session is now full) gets the stored event.
    assert first.status == 201
    retry = api.append("s1", text_event("c", id="c"))
    assert retry.status == 200 and retry.body["seq"] == 3
    assert api.append("s1", text_event("d", id="d")).status == 429
    assert [e["id"] for e in api.get("s1").body["events"]] == ["a", "b", "c"]


def test_without_a_retention_a_refused_create_reads_no_partition(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    api.create(session_id="s1")
    api.create(session_id="s2")
    before = len(faults.calls)
    assert api.create(session_id="s3").status == 429
    assert faults.calls[before:] == ["TransactWriteItems"]  # the count cannot drift: nothing to recount
