"""Session writes under faults injected below botocore's retries: each test asserts what storage holds afterwards
(table items, bucket objects and versions, what GET returns) and the status the handler answered."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from agent_memory.stores.dynamo.keys import PAYLOAD_MISSING_META, STATE_SK, events_pk, session_pk
from agent_memory.stores.ports import SessionKey
from agent_memory.stores.s3 import STAGED_TAG
from tests.support.api import Api, text_event
from tests.support.aws import BUCKET, TABLE
from tests.support.context_api import sweep

from .injector import (
    FaultInjector,
    Reply,
    cancelled,
    dynamo_error,
    provisioned_exceeded,
    request_json,
    s3_error,
    throttle,
)
from .session_storage import chat, event_items, object_versions, retry_after, session_item, summaries, tags

BIG = "x" * 600_000  # over the 350 KB offload threshold: the body goes to S3


@pytest.fixture
def api(aws: dict[str, Any], faults: FaultInjector) -> Api:
    return Api()


@pytest.fixture
def short_budget(monkeypatch: pytest.MonkeyPatch) -> Iterator[float]:
    """A write budget of 1.5 s, so that tests of what happens when it runs out stay quick."""
    monkeypatch.setattr("agent_memory.stores.dynamo.retries.WRITE_BUDGET_S", 1.5)
    yield 1.5


# --- storage probes -------------------------------------------------------------------------------------------


def state_item(aws: dict[str, Any], sid: str = "s1") -> dict[str, Any] | None:
    """The session's state item (in its events partition)."""
    item: dict[str, Any] | None = (
        aws["dynamodb"]
        .get_item(
            TableName=TABLE,
            Key={"PK": {"S": events_pk(SessionKey("app", "alice", sid))}, "SK": {"S": STATE_SK}},
            ConsistentRead=True,
        )
        .get("Item")
    )
    return item


def stored_state(item: dict[str, Any] | None) -> dict[str, Any]:
    """The ``st:`` attributes of an item, decoded."""
    return {k[3:]: json.loads(v["S"]) for k, v in (item or {}).items() if k.startswith("st:")}


def texts(reply_body: dict[str, Any]) -> list[str]:
    return [e["content"]["parts"][0]["text"] for e in reply_body["events"]]


# --- 1. throttling and cancellations: retried within the budget, then 503 -------------------------------------


# The write each append path makes: the transaction (a state delta, a batch, If-Match, a compaction) and the
# claim-first path's two (one event, no delta): the claim (UpdateItem of the session item) and the event's put.
WRITES = {
    "transaction": ("TransactWriteItems", {"actions": {"state_delta": {"k": 1}}}),
    "claim": ("UpdateItem", {}),
    "put": ("PutItem", {}),
}


@pytest.mark.parametrize("path", list(WRITES))
@pytest.mark.parametrize("fault", [throttle, provisioned_exceeded], ids=["throttle", "provisioned"])
def test_five_consecutive_throttles_on_an_append_are_absorbed(
    api: Api, aws: dict[str, Any], faults: FaultInjector, real_backoff: None, fault: Any, path: str
) -> None:
    operation, extra = WRITES[path]
    api.create(session_id="s1")
    faults.fail(operation, fault(), times=5)
    created = len(faults.calls)  # the create's own calls (a transaction too: the user's session count) before
    started = time.monotonic()
    reply = api.append("s1", text_event("hello", id="e1", **extra))
    elapsed = time.monotonic() - started
    print(f"five consecutive {fault.__name__} faults on {operation}: append answered in {elapsed:.2f} s")
    assert reply.status == 201 and reply.body["seq"] == 1 and reply.headers["etag"] == '"1"'
    assert faults.calls[created:].count(operation) == 6
    assert elapsed < 12.0  # was 20-26 s: now botocore's two retries, then the store's jittered backoff
    faults.clear()
    assert [(i["SK"]["S"], i["seq"]["N"]) for i in event_items(aws)] == [("V#e1", "1")]


def test_a_throttle_that_never_ends_answers_503_within_the_budget(
    api: Api, aws: dict[str, Any], faults: FaultInjector, real_backoff: None
) -> None:
    api.create(session_id="s1")
    faults.fail("TransactWriteItems", throttle(), times=-1)
    started = time.monotonic()
    reply = api.append("s1", text_event("hello", actions={"state_delta": {"k": 1}}))
    elapsed = time.monotonic() - started
    print(f"TransactWriteItems throttled without end: 503 after {elapsed:.2f} s")
    assert reply.status == 503 and reply.error["code"] == "service_unavailable" and retry_after(reply) >= 1
    assert elapsed < 20.0  # the function stops at 29 s
    faults.clear()
    assert event_items(aws) == []
    item = session_item(aws)
    assert item is not None and item["version"]["N"] == "0" and "st:k" not in item
    assert stored_state(state_item(aws)) == {}  # the create's empty state item, untouched


@pytest.mark.parametrize(
    "reason", ["ThrottlingError", "ProvisionedThroughputExceeded", "TransactionConflict", "SomeNewReason"]
)
def test_transient_cancellations_are_retried(api: Api, aws: dict[str, Any], faults: FaultInjector, reason: str) -> None:
    api.create(session_id="s1")
    faults.fail("TransactWriteItems", cancelled("None", reason), times=3)
    reply = api.append("s1", text_event("hello", id="e1"))
    assert reply.status == 201 and reply.body["seq"] == 1
    faults.clear()
    assert len(event_items(aws)) == 1
    assert api.get("s1").body["version"] == 1


@pytest.mark.parametrize(
    "reason", ["ThrottlingError", "ProvisionedThroughputExceeded", "TransactionConflict", "SomeNewReason"]
)
def test_transient_cancellations_past_the_budget_answer_503_and_store_nothing(
    api: Api, aws: dict[str, Any], faults: FaultInjector, short_budget: float, reason: str
) -> None:
    api.create(session_id="s1")
    faults.fail("TransactWriteItems", cancelled(reason, "None"), times=-1)
    reply = api.append("s1", text_event("hello", actions={"state_delta": {"k": 1}}))  # the transaction path
    assert reply.status == 503 and "retry-after" in reply.headers
    faults.clear()
    assert event_items(aws) == [] and api.get("s1").body["version"] == 0


def test_a_session_too_large_for_its_partition_is_413(api: Api, aws: dict[str, Any], faults: FaultInjector) -> None:
    api.create(session_id="s1")
    faults.fail("TransactWriteItems", cancelled("None", "ItemCollectionSizeLimitExceeded"), times=-1)
    created = len(faults.calls)
    reply = api.append("s1", text_event("hello", actions={"state_delta": {"k": 1}}))
    assert reply.status == 413 and reply.error["code"] == "payload_too_large"
    assert "10 GB" in reply.error["message"] and "new session" in reply.error["message"]
    assert faults.calls[created:].count("TransactWriteItems") == 1  # not transient: not retried
    faults.clear()
    assert event_items(aws) == []


def test_a_session_too_large_for_its_partition_is_413_on_the_claim_first_path(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    api.create(session_id="s1")
    faults.fail("PutItem", dynamo_error("ItemCollectionSizeLimitExceededException", "Item collection too large"))
    created = len(faults.calls)
    reply = api.append("s1", text_event("hello", id="e1"))
    assert reply.status == 413 and "10 GB" in reply.error["message"]
    assert faults.calls[created:] == ["UpdateItem", "PutItem"]  # not transient: not retried
    faults.clear()
    assert event_items(aws) == []
    # The claim stays (its seq a hole, the version moved on): the next append takes the seq after it.
    reply = api.append("s1", text_event("next", id="e2"))
    assert reply.status == 201 and reply.body["seq"] == 2 and reply.headers["etag"] == '"2"'
    assert texts(api.get("s1").body) == ["next"]


def test_a_validation_cancellation_is_413(api: Api, aws: dict[str, Any], faults: FaultInjector) -> None:
    api.create(session_id="s1")
    faults.fail("TransactWriteItems", cancelled("ValidationError", "None"), times=-1)
    reply = api.append("s1", text_event("hello", actions={"state_delta": {"k": 1}}))
    assert reply.status == 413 and reply.error["field"] == "actions.state_delta"
    faults.clear()
    assert event_items(aws) == []


def test_a_throttled_session_read_before_the_append_is_retried(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    api.create(session_id="s1")
    faults.fail("GetItem", throttle(), times=4)
    assert api.append("s1", text_event("hello")).status == 201
    faults.clear()
    assert len(event_items(aws)) == 1


# --- 2. an applied write whose answer was lost -------------------------------------------------------------------


def test_a_lost_append_answer_is_recognised_on_botocores_retry(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    api.create(session_id="s1")
    faults.lose_answer("TransactWriteItems")
    reply = api.append("s1", text_event("hello", id="e1", actions={"state_delta": {"k": 1}}))
    assert reply.status == 201 and reply.body["seq"] == 1 and reply.headers["etag"] == '"1"'
    faults.clear()
    assert [i["seq"]["N"] for i in event_items(aws)] == ["1"]
    session = api.get("s1").body
    assert session["version"] == 1 and session["state"] == {"k": 1}
    resend = api.append("s1", text_event("hello", id="e1", actions={"state_delta": {"k": 1}}))
    assert resend.status == 200 and resend.body["seq"] == 1


def test_lost_answers_past_botocores_retries_are_recognised_by_the_store(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    api.create(session_id="s1")
    api.append("s1", text_event("first", id="e0"))
    faults.lose_answer("TransactWriteItems", times=3)  # every botocore attempt: the store sees a read timeout
    reply = api.append("s1", {"events": [text_event("a", id="e1"), text_event("b", id="e2")]})
    assert reply.status == 201, reply.body
    assert [e["seq"] for e in reply.body["events"]] == [2, 3] and reply.headers["etag"] == '"2"'
    faults.clear()
    assert sorted(i["seq"]["N"] for i in event_items(aws)) == ["1", "2", "3"]
    assert texts(api.get("s1").body) == ["first", "a", "b"]


def test_timeouts_before_the_request_reaches_the_table_are_retried(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    api.create(session_id="s1")
    faults.timeout_before("TransactWriteItems", times=3)  # nothing applied, botocore gives up, the store retries
    reply = api.append("s1", text_event("hello", id="e1"))
    assert reply.status == 201 and reply.body["seq"] == 1
    faults.clear()
    assert [i["seq"]["N"] for i in event_items(aws)] == ["1"]


def test_a_lost_answer_on_a_large_append_keeps_its_payload(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    """Before: the retry met the stored event, took it for someone else's and deleted the payload it points to."""
    api.create(session_id="s1")
    faults.lose_answer("TransactWriteItems")
    reply = api.append("s1", text_event(BIG, id="big"))
    assert reply.status == 201 and reply.body["seq"] == 1
    faults.clear()
    (item,) = event_items(aws)
    blob = item["blob"]["S"]
    stored = json.loads(aws["s3"].get_object(Bucket=BUCKET, Key=blob)["Body"].read())
    assert stored["content"]["parts"][0]["text"] == BIG
    assert STAGED_TAG not in tags(aws, blob)  # confirmed: the lifecycle rule keeps it
    assert [v["Key"] for v in object_versions(aws)] == [blob]
    assert texts(api.get("s1").body) == [BIG]
    # The client resends it: 200 with the stored event, still one payload.
    resend = api.append("s1", text_event(BIG, id="big"))
    assert resend.status == 200 and resend.body["seq"] == 1
    assert [v["Key"] for v in object_versions(aws)] == [blob]


def test_a_failed_large_append_leaves_only_a_staged_orphan(
    api: Api, aws: dict[str, Any], faults: FaultInjector, short_budget: float
) -> None:
    api.create(session_id="s1")
    faults.fail("TransactWriteItems", throttle(), times=-1)
    assert api.append("s1", text_event(BIG, id="big")).status == 503
    faults.clear()
    assert event_items(aws) == []
    (orphan,) = object_versions(aws)
    assert tags(aws, orphan["Key"]) == {STAGED_TAG: "true"}  # the lifecycle rule expires it after a day
    assert "nb" not in session_item(aws)  # type: ignore[operator]  # the no-payload mark went before the upload
    # The retry stores the event with a payload of its own; the orphan stays staged.
    assert api.append("s1", text_event(BIG, id="big")).status == 201
    (item,) = event_items(aws)
    assert item["blob"]["S"] != orphan["Key"] and STAGED_TAG not in tags(aws, item["blob"]["S"])
    assert tags(aws, orphan["Key"]) == {STAGED_TAG: "true"}
    assert texts(api.get("s1").body) == [BIG]
    # The DELETE lists the bucket (the mark is off): the payload and the orphan go with the session.
    assert api.request("DELETE", "/apps/app/users/alice/sessions/s1").status == 204
    assert object_versions(aws) == []


def removes_the_no_payload_mark(request: Any) -> bool:
    return request_json(request).get("UpdateExpression") == "REMOVE #nb"


def test_a_session_that_never_uploaded_a_payload_is_deleted_without_the_bucket(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    """A created session carries the no-payload mark until its first upload: its DELETE lists no bucket (
    the S3 client and LIST were most of a cold delete's first response). Any S3 request would fail here."""
    api.create(session_id="s1")
    assert api.append("s1", {"events": [text_event("a", id="a"), text_event("b", id="b")]}).status == 201
    assert session_item(aws)["nb"] == {"BOOL": True}  # type: ignore[index]
    for operation in ("ListObjectVersions", "ListObjectsV2", "DeleteObjects", "DeleteObject"):
        faults.fail(operation, s3_error("InternalError", 500), times=-1)
    assert api.request("DELETE", "/apps/app/users/alice/sessions/s1").status == 204
    faults.clear()
    assert session_item(aws) is None and event_items(aws) == []


def test_with_a_retention_a_session_is_created_without_the_mark_and_its_delete_lists_the_bucket(
    aws: dict[str, Any], faults: FaultInjector, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TTL removes an expired session's items but never its payloads; a session made under the same id later
    must still take them when deleted, so with a retention no session carries the mark."""
    monkeypatch.setenv("RETENTION_DAYS", "30")
    api = Api()
    api.create(session_id="s1")
    assert "nb" not in session_item(aws)  # type: ignore[operator]
    # a payload an expired earlier incarnation left (its items gone by TTL)
    aws["s3"].put_object(Bucket=BUCKET, Key="sessions/app/alice/s1/old-incarnation/events/e/t.json", Body=b"{}")
    assert api.request("DELETE", "/apps/app/users/alice/sessions/s1").status == 204
    assert object_versions(aws) == []


def test_a_lost_answer_taking_the_mark_off_still_uploads_and_the_delete_lists_the_bucket(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    api.create(session_id="s1")
    faults.lose_answer("UpdateItem", when=removes_the_no_payload_mark)
    assert api.append("s1", {"events": [text_event("a", id="a"), text_event(BIG, id="big")]}).status == 201
    faults.clear()
    assert "nb" not in session_item(aws) and len(object_versions(aws)) == 1  # type: ignore[operator]
    assert texts(api.get("s1").body) == ["a", BIG]
    assert api.request("DELETE", "/apps/app/users/alice/sessions/s1").status == 204
    assert object_versions(aws) == [] and event_items(aws) == []


def test_a_mark_taken_off_after_the_session_was_recreated_uploads_under_the_new_incarnation(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    """The removal is conditioned on the incarnation the append read: the session deleted and created again in
    between, the append reads it again and marks (and uploads under) the new one."""
    api.create(session_id="s1")
    raced = {"done": False}

    def recreate_first(apply: Any, event_name: str, request: Any) -> Any:
        if not raced["done"]:
            raced["done"] = True
            assert api.request("DELETE", "/apps/app/users/alice/sessions/s1").status == 204
            api.create(session_id="s1")
        return apply()

    faults.add("UpdateItem", recreate_first, times=1, when=removes_the_no_payload_mark)
    assert api.append("s1", text_event(BIG, id="big")).status == 201
    faults.clear()
    item = session_item(aws)
    assert item is not None and "nb" not in item
    (blob,) = object_versions(aws)
    assert f"/{item['inc']['S']}/" in blob["Key"]  # under the live incarnation's prefix
    assert api.request("DELETE", "/apps/app/users/alice/sessions/s1").status == 204
    assert object_versions(aws) == []


def test_a_throttled_payload_upload_is_retried(api: Api, aws: dict[str, Any], faults: FaultInjector) -> None:
    api.create(session_id="s1")
    faults.fail("PutObject", s3_error("SlowDown", 503), times=4)  # past botocore's retries: the store retries
    assert api.append("s1", text_event(BIG, id="a")).status == 201
    faults.clear()
    assert [i["SK"]["S"] for i in event_items(aws)] == ["V#a"] and len(object_versions(aws)) == 1


def test_a_payload_upload_that_keeps_failing_is_503_and_stores_no_event(
    api: Api, aws: dict[str, Any], faults: FaultInjector, short_budget: float
) -> None:
    api.create(session_id="s1")
    faults.fail("PutObject", s3_error("InternalError", 500), times=-1)
    reply = api.append("s1", {"events": [text_event("small", id="s"), text_event(BIG, id="b")]})
    assert reply.status == 503
    faults.clear()
    assert event_items(aws) == [] and api.get("s1").body["version"] == 0


def test_an_event_whose_payload_is_gone_reads_as_a_placeholder(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    api.create(session_id="s1")
    api.append("s1", text_event(BIG, id="big", author="user"))
    api.append("s1", text_event("after", id="small"))
    (blob,) = [i["blob"]["S"] for i in event_items(aws) if "blob" in i]
    for version in object_versions(aws):
        aws["s3"].delete_object(Bucket=BUCKET, Key=version["Key"], VersionId=version["VersionId"])
    reply = api.get("s1")
    assert reply.status == 200
    placeholder, after = reply.body["events"]
    assert placeholder["id"] == "big" and placeholder["seq"] == 1 and placeholder["author"] == "user"
    assert placeholder["custom_metadata"] == {PAYLOAD_MISSING_META: True}
    assert placeholder["error_code"] == "unreadable_event" and "content" not in placeholder
    assert after["content"]["parts"][0]["text"] == "after"
    assert blob  # the item still points at the key; nothing was rewritten by the read


# --- 3. event ids reused --------------------------------------------------------------------------------------------


def test_a_reused_id_with_another_body_is_409_and_stores_nothing(api: Api, aws: dict[str, Any]) -> None:
    api.create(session_id="s1")
    api.append("s1", text_event("original", id="e1"))
    reply = api.append("s1", {"events": [text_event("new", id="e2"), text_event("changed", id="e1")]})
    assert reply.status == 409 and reply.error == {
        "code": "event_id_conflict",
        "message": reply.error["message"],
        "field": "events[1].id",
    }
    assert [i["SK"]["S"] for i in event_items(aws)] == ["V#e1"]
    same = api.append("s1", text_event("original", id="e1"))
    assert same.status == 200 and same.body["seq"] == 1


# --- 4. incarnations: nothing of a deleted session in a re-created one --------------------------------------------


def test_a_delete_that_fails_part_way_hides_the_session_and_a_retry_finishes_it(
    api: Api, aws: dict[str, Any], faults: FaultInjector, short_budget: float
) -> None:
    api.create(session_id="s1")
    api.append("s1", {"events": [text_event("old a", id="a"), text_event(BIG, id="b")]})
    faults.fail("BatchWriteItem", throttle(), times=-1)
    reply = api.request("DELETE", "/apps/app/users/alice/sessions/s1")
    assert reply.status == 503 and "retry-after" in reply.headers
    faults.clear()
    assert api.get("s1").status == 404
    assert api.request("GET", "/apps/app/users/alice/sessions").body["sessions"] == []
    assert api.append("s1", text_event("late")).status == 404
    assert len(event_items(aws)) == 2  # left behind by the failed delete, invisible
    assert api.request("DELETE", "/apps/app/users/alice/sessions/s1").status == 204
    assert event_items(aws) == [] and session_item(aws) is None and object_versions(aws) == []


def test_a_recreate_after_a_failed_delete_shows_nothing_old(
    api: Api, aws: dict[str, Any], faults: FaultInjector, short_budget: float
) -> None:
    api.create(session_id="s1", state={"user:name": "Ann", "old": 1})
    api.append("s1", {"events": [text_event("old a", id="a"), text_event(BIG, id="b"), text_event("old c", id="c")]})
    faults.fail("Query", throttle(), times=-1)  # the delete's read of the event partition
    assert api.request("DELETE", "/apps/app/users/alice/sessions/s1").status == 503
    faults.clear()
    assert len(event_items(aws)) == 3
    created = api.create(session_id="s1")
    assert created.status == 201 and created.body["version"] == 0
    assert api.get("s1").body["events"] == []
    assert api.append("s1", text_event("new", id="a")).body["seq"] == 1  # the old id is free, seq starts at 1
    got = api.get("s1").body
    assert texts(got) == ["new"] and got["state"] == {"user:name": "Ann"}  # user state is the user's, not the session's
    assert [i["SK"]["S"] for i in event_items(aws)] == ["V#a"]
    assert object_versions(aws) == []  # the old payload went with the old incarnation


def test_a_delete_whose_s3_step_fails_is_finished_by_its_retry(
    api: Api, aws: dict[str, Any], faults: FaultInjector, short_budget: float
) -> None:
    api.create(session_id="s1")
    api.append("s1", text_event(BIG, id="big"))
    faults.fail("DeleteObjects", s3_error("InternalError", 500), times=-1)
    assert api.request("DELETE", "/apps/app/users/alice/sessions/s1").status == 503
    faults.clear()
    assert api.get("s1").status == 404 and event_items(aws) == [] and len(object_versions(aws)) == 1
    assert api.request("DELETE", "/apps/app/users/alice/sessions/s1").status == 204
    assert session_item(aws) is None and object_versions(aws) == []
    assert api.request("DELETE", "/apps/app/users/alice/sessions/s1").status == 204  # idempotent


def test_a_lost_answer_on_each_delete_step_still_deletes(api: Api, aws: dict[str, Any], faults: FaultInjector) -> None:
    api.create(session_id="s1")
    api.append("s1", {"events": [text_event("a", id="a"), text_event(BIG, id="b")]})
    for op in ("UpdateItem", "BatchWriteItem", "DeleteItem"):
        faults.lose_answer(op)
    assert api.request("DELETE", "/apps/app/users/alice/sessions/s1").status == 204
    faults.clear()
    assert session_item(aws) is None and event_items(aws) == [] and object_versions(aws) == []


def test_batch_write_that_keeps_returning_unprocessed_items_answers_503(
    api: Api, aws: dict[str, Any], faults: FaultInjector, real_backoff: None
) -> None:
    api.create(session_id="s1")
    api.append("s1", {"events": [text_event(f"t{i}", id=f"e{i}") for i in range(30)]})

    def echo(request: Any) -> Reply:
        return Reply(200, json.dumps({"UnprocessedItems": request_json(request)["RequestItems"]}).encode())

    faults.respond("BatchWriteItem", echo, times=-1)
    started = time.monotonic()
    reply = api.request("DELETE", "/apps/app/users/alice/sessions/s1")
    elapsed = time.monotonic() - started
    print(f"BatchWriteItem returning every item unprocessed: DELETE answered {reply.status} after {elapsed:.2f} s")
    assert reply.status == 503 and elapsed < 20.0
    faults.clear()
    assert api.get("s1").status == 404
    assert api.request("DELETE", "/apps/app/users/alice/sessions/s1").status == 204
    assert event_items(aws) == []


def put_ghost(aws: dict[str, Any], seq: int = 1) -> None:
    """An event of an earlier incarnation of s1 left behind: an import that died after writing its events gives its
    placeholder back, and its events stay until the next create or import of the id purges them."""
    body = {"id": "ghost", "author": "user", "timestamp": 1.0, "content": {"role": "user", "parts": [{"text": "boo"}]}}
    aws["dynamodb"].put_item(
        TableName=TABLE,
        Item={
            "PK": {"S": events_pk(SessionKey("app", "alice", "s1"))},
            "SK": {"S": "V#ghost"},
            "seq": {"N": str(seq)},
            "t": {"N": "1.0"},
            "inc": {"S": "a-dead-import"},
            "imp": {"N": "1"},
            "body": {"S": json.dumps(body)},
        },
    )


def test_events_a_dead_import_left_behind_do_not_show_in_a_new_session(api: Api, aws: dict[str, Any]) -> None:
    put_ghost(aws, seq=7)
    assert api.create(session_id="s1").status == 201
    assert api.get("s1").body["events"] == [] and event_items(aws) == []
    assert api.append("s1", text_event("new", id="ghost")).body["seq"] == 1


def test_leftovers_do_not_show_when_the_create_answer_was_lost(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    put_ghost(aws)
    # botocore's retry meets the applied create (a transaction: the user's session count rides in it): the store
    # finds its own session
    faults.lose_answer("TransactWriteItems")
    assert api.create(session_id="s1").status == 201
    faults.clear()
    assert api.append("s1", text_event("new", id="new")).status == 201
    assert [e["id"] for e in api.get("s1").body["events"]] == ["new"]


def test_leftovers_do_not_show_when_the_purge_after_a_create_failed(
    api: Api, aws: dict[str, Any], faults: FaultInjector, short_budget: float
) -> None:
    put_ghost(aws)
    faults.fail("BatchWriteItem", throttle(), times=-1)  # the purge right after the creation
    assert api.create(session_id="s1").status == 503
    faults.clear()
    assert api.create(session_id="s1").status == 200  # the client's retry finds the session: it purges
    assert api.append("s1", text_event("new", id="new")).body["seq"] == 1
    assert [e["id"] for e in api.get("s1").body["events"]] == ["new"]


def test_a_batch_whose_later_transaction_fails_keeps_the_payloads_of_the_committed_one(
    api: Api, aws: dict[str, Any], faults: FaultInjector, short_budget: float
) -> None:
    api.create(session_id="s1")
    # 100 events need two transactions (99 + the session update, then 1); the first holds a 600 KB payload.
    batch = {"events": [text_event(BIG, id="big")] + [text_event(f"m{i}", id=f"m{i}") for i in range(99)]}
    calls = {"n": 0}

    def second_transaction(_request: Any) -> bool:
        calls["n"] += 1
        return calls["n"] > 1

    faults.fail("TransactWriteItems", throttle(), times=-1, when=second_transaction)
    assert api.append("s1", batch).status == 503
    faults.clear()
    stored = [i for i in event_items(aws) if "blob" in i]
    assert len(stored) == 1
    assert "agent-memory-staged" not in tags(aws, stored[0]["blob"]["S"])  # the lifecycle rule will keep it
    assert api.append("s1", batch).status == 201  # the retry stores the rest
    assert len(event_items(aws)) == 100


# --- 6. create under faults -----------------------------------------------------------------------------------------


def test_a_lost_create_answer_converges_and_applies_state_once(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    faults.lose_answer("TransactWriteItems")  # user and app state make the create a transaction
    reply = api.create(session_id="s1", state={"a": 1, "user:visits": 1, "app:tier": "pro"})
    assert reply.status == 201 and reply.body["created"] is True
    faults.clear()
    assert reply.body["state"] == {"a": 1, "user:visits": 1, "app:tier": "pro"}
    # The client's own retry, with other initial state: the session exists, nothing is applied again.
    again = api.create(session_id="s1", state={"a": 2, "user:visits": 2})
    assert again.status == 200 and again.body["created"] is False
    assert again.body["state"] == {"a": 1, "user:visits": 1, "app:tier": "pro"}
    assert again.body["create_time"] == reply.body["create_time"]


def test_a_lost_put_answer_on_create_is_still_a_creation(api: Api, aws: dict[str, Any], faults: FaultInjector) -> None:
    faults.lose_answer("TransactWriteItems", times=3)  # past botocore's retries: the store's retry recognises it
    reply = api.create(session_id="s1", state={"a": 1})
    assert reply.status == 201 and reply.body["created"] is True and reply.body["state"] == {"a": 1}
    faults.clear()
    item = session_item(aws)
    assert item is not None and item["version"]["N"] == "0"


def test_a_throttled_create_answers_503_then_its_retry_creates(
    api: Api, aws: dict[str, Any], faults: FaultInjector, short_budget: float
) -> None:
    faults.fail("TransactWriteItems", throttle(), times=-1)
    reply = api.create(session_id="s1")
    assert reply.status == 503 and "retry-after" in reply.headers
    faults.clear()
    assert session_item(aws) is None
    assert api.create(session_id="s1").status == 201


def test_a_create_with_state_past_the_item_limit_is_413(api: Api, aws: dict[str, Any]) -> None:
    reply = api.create(session_id="s1", state={"big": "y" * 420_000})
    assert reply.status == 413 and reply.error["field"] == "state"
    assert session_item(aws) is None


# --- 7. compaction under faults --------------------------------------------------------------------------------------


@pytest.fixture
def small_compaction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMPACTION_INTERVAL", "3")
    monkeypatch.setenv("EVENT_RETENTION_SIZE", "2")
    monkeypatch.setenv("TOKEN_THRESHOLD", "100000")


@pytest.mark.parametrize("lost", [1, 3], ids=["botocore-retry", "store-retry"])
def test_a_lost_compaction_answer_leaves_one_summary(
    api: Api, aws: dict[str, Any], faults: FaultInjector, small_compaction: None, lost: int
) -> None:
    api.create(session_id="s1")
    chat(api, "s1", 4)
    faults.lose_answer("TransactWriteItems", times=lost)
    reply = api.request("POST", "/apps/app/users/alice/sessions/s1/compact")
    assert reply.status == 200 and reply.body["compacted"] is True, reply.body
    faults.clear()
    (summary,) = summaries(api)
    assert summary["id"] == reply.body["event"]["id"]
    item = session_item(aws)
    assert item is not None and item["cmp_id"]["S"] == summary["id"]
    again = api.request("POST", "/apps/app/users/alice/sessions/s1/compact")
    assert again.body["compacted"] is False and len(summaries(api)) == 1


def test_a_throttled_sweep_leaves_the_session_due(
    api: Api, aws: dict[str, Any], faults: FaultInjector, small_compaction: None, short_budget: float
) -> None:
    api.create(session_id="s1")
    chat(api, "s1", 4)
    faults.fail("TransactWriteItems", throttle(), times=-1)
    report = sweep()
    assert report["failed"] == 1 and report["compacted"] == 0
    faults.clear()
    assert summaries(api) == []
    item = session_item(aws)
    assert item is not None and "due" in item
    assert sweep()["compacted"] == 1 and len(summaries(api)) == 1


def test_a_compaction_racing_delete_and_recreate_writes_nothing_into_the_new_session(
    api: Api, aws: dict[str, Any], small_compaction: None
) -> None:
    from agent_memory.composition import compaction_settings, services
    from agent_memory.config import settings
    from agent_memory.service.compaction import CompactionService

    api.create(session_id="s1")
    chat(api, "s1", 4)

    class RacingSummarizer:
        """Summarizes the old conversation while the session is deleted and created again."""

        name = "racing"

        def summarize(self, turns: Any, previous: Any) -> str:
            assert api.request("DELETE", "/apps/app/users/alice/sessions/s1").status == 204
            assert api.create(session_id="s1").status == 201
            return "summary of the deleted conversation"

    service = CompactionService(services().session_store, RacingSummarizer(), compaction_settings(settings()))
    from agent_memory.errors import SessionNotFound

    with pytest.raises(SessionNotFound):
        service.compact("app", "alice", "s1")
    got = api.get("s1").body
    assert got["events"] == [] and got["version"] == 0
    item = session_item(aws)
    assert item is not None and "cmp_id" not in item and "cmp_end" not in item
    assert event_items(aws) == []


# --- 8. the session's state item under faults ---------------------------------------------------------------------


@pytest.mark.parametrize("lost", [1, 3], ids=["botocore-retry", "store-retry"])
def test_a_lost_answer_on_an_append_with_a_state_delta_applies_it_once(
    api: Api, aws: dict[str, Any], faults: FaultInjector, lost: int
) -> None:
    api.create(session_id="s1", state={"a": 1})
    faults.lose_answer("TransactWriteItems", times=lost)  # applied, then the answer is lost
    reply = api.append("s1", text_event("hello", id="e1", actions={"state_delta": {"k": 1, "a": 2}}))
    assert reply.status == 201 and reply.body["seq"] == 1 and reply.headers["etag"] == '"1"'
    faults.clear()
    assert [i["SK"]["S"] for i in event_items(aws)] == ["V#e1"]
    # The state is in its own item, written once; the session item holds counters, no state.
    assert stored_state(state_item(aws)) == {"a": 2, "k": 1}
    session = session_item(aws)
    assert session is not None and session["version"]["N"] == "1" and stored_state(session) == {}
    assert api.get("s1").body["state"] == {"a": 2, "k": 1}


def test_a_throttled_append_with_a_state_delta_lands_once_with_its_state(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    api.create(session_id="s1")
    faults.fail("TransactWriteItems", throttle(), times=5)
    reply = api.append("s1", text_event("hello", id="e1", actions={"state_delta": {"k": "v"}}))
    assert reply.status == 201 and reply.body["seq"] == 1
    faults.clear()
    assert [i["SK"]["S"] for i in event_items(aws)] == ["V#e1"]
    assert stored_state(state_item(aws)) == {"k": "v"}


def test_an_append_whose_state_changed_under_it_reads_again_and_applies_in_order(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    """A concurrent append changes the state between this append's read of the counters and its transaction: the
    transaction fails the session item's condition (nothing of it is stored), the append reads again and lands
    after the other, so the state is both deltas applied in seq order."""
    api.create(session_id="s1", state={"k": "created"})

    def concurrent_then_apply(apply: Any, _event: str, _request: Any) -> Any:
        # The other writer commits first (the rule has been used up: its transaction goes through).
        other = api.append("s1", text_event("theirs", id="theirs", actions={"state_delta": {"k": "theirs", "t": 1}}))
        assert other.status == 201 and other.body["seq"] == 1
        return apply()  # ours, on the counters it read before: cancelled by the session item's condition

    faults.add(
        "TransactWriteItems",
        concurrent_then_apply,
        when=lambda request: '"V#mine"' in json.dumps(request_json(request)),
    )
    before = len(faults.calls)
    reply = api.append("s1", text_event("mine", id="mine", actions={"state_delta": {"k": "mine"}}))
    assert reply.status == 201 and reply.body["seq"] == 2 and reply.headers["etag"] == '"2"'
    # ours (cancelled), theirs, ours again
    assert faults.calls[before:].count("TransactWriteItems") == 3
    faults.clear()
    assert sorted((i["seq"]["N"], i["SK"]["S"]) for i in event_items(aws)) == [("1", "V#theirs"), ("2", "V#mine")]
    assert stored_state(state_item(aws)) == {"k": "mine", "t": 1}
    assert api.get("s1").body["state"] == {"k": "mine", "t": 1}


def test_appends_without_a_state_delta_never_write_the_state_item(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    api.create(session_id="s1", state={"big": "x" * 30_000})
    before = state_item(aws)
    transactions: list[list[tuple[str, str]]] = []  # the keys each write writes

    def record(apply: Any, _event: str, request: Any) -> Any:
        body = request_json(request)
        actions = [next(iter(a.values())) for a in body["TransactItems"]] if "TransactItems" in body else [body]
        keys = [a.get("Key") or {k: a["Item"][k] for k in ("PK", "SK")} for a in actions]
        transactions.append([(k["PK"]["S"], k["SK"]["S"]) for k in keys])
        return apply()

    for operation in ("TransactWriteItems", "UpdateItem", "PutItem"):
        faults.add(operation, record, times=-1)
    for i in range(3):
        assert api.append("s1", text_event(f"m{i}")).status == 201
    assert api.append("s1", text_event("with user state", actions={"state_delta": {"user:u": 1}})).status == 201
    faults.clear()
    assert len(transactions) == 3 * 2 + 1  # the claim and the put of each plain append, one transaction
    assert not any(pk.startswith("E#") and sk == STATE_SK for keys in transactions for pk, sk in keys)
    assert ("U#app#alice", STATE_SK) in transactions[-1]  # the user's state item, which the delta changes
    assert state_item(aws) == before  # not rewritten (its size would be paid by every append)
    session = session_item(aws)
    assert session is not None and session["version"]["N"] == "4" and stored_state(session) == {}
    assert api.get("s1").body["state"] == {"big": "x" * 30_000, "user:u": 1}


def test_a_state_item_of_another_incarnation_is_not_the_sessions(api: Api, aws: dict[str, Any]) -> None:
    """A state item left by an earlier session of the id (its purge not done yet) never shows in the new one."""
    api.create(session_id="s1", state={"a": 1})
    aws["dynamodb"].update_item(
        TableName=TABLE,
        Key={"PK": {"S": events_pk(SessionKey("app", "alice", "s1"))}, "SK": {"S": STATE_SK}},
        UpdateExpression="SET inc = :other",
        ExpressionAttributeValues={":other": {"S": "an-earlier-incarnation"}},
    )
    assert api.get("s1").body["state"] == {}
    listed = api.request("GET", "/apps/app/users/alice/sessions").body["sessions"]
    assert [s["state"] for s in listed] == [{}]


# --- 9. the claim-first append: a seq claimed (UpdateItem of the session item), then the event put ---------------


def held(text: str, sid: str = "s1", **extra: Any) -> dict[str, Any]:
    return text_event(text, id=text, **extra)


def stored_seqs(aws: dict[str, Any], sid: str = "s1") -> list[tuple[int, str]]:
    return sorted((int(i["seq"]["N"]), i["SK"]["S"][2:]) for i in event_items(aws, sid))


@pytest.mark.parametrize("lost", [1, 3], ids=["botocore-retry", "store-retry"])
def test_a_lost_claim_answer_leaves_a_hole_and_the_event_lands_once(
    api: Api, aws: dict[str, Any], faults: FaultInjector, lost: int
) -> None:
    """The claim landed, its answer was lost: the retried claim meets its own (the timestamp is no longer above
    the session's newest), so the transaction path stores the event after it. Seq 1 stays a hole."""
    api.create(session_id="s1")
    faults.lose_answer("UpdateItem", times=lost)
    before = len(faults.calls)
    reply = api.append("s1", held("a"))
    assert reply.status == 201 and reply.body["seq"] == 2 and reply.headers["etag"] == '"2"'
    assert faults.calls[before:][-3:] == ["UpdateItem", "GetItem", "TransactWriteItems"]
    faults.clear()
    assert stored_seqs(aws) == [(2, "a")]
    reply = api.append("s1", held("b"))
    assert reply.status == 201 and reply.body["seq"] == 3 and reply.headers["etag"] == '"3"'
    got = api.get("s1").body
    assert texts(got) == ["a", "b"] and got["version"] == 3


def test_a_claim_that_never_reached_the_table_is_retried(api: Api, aws: dict[str, Any], faults: FaultInjector) -> None:
    api.create(session_id="s1")
    faults.timeout_before("UpdateItem", times=3)  # botocore gives up, nothing applied: the store claims again
    reply = api.append("s1", held("a"))
    assert reply.status == 201 and reply.body["seq"] == 1 and reply.headers["etag"] == '"1"'
    faults.clear()
    assert stored_seqs(aws) == [(1, "a")]


@pytest.mark.parametrize("lost", [1, 3], ids=["botocore-retry", "store-retry"])
def test_a_lost_put_answer_is_our_own_event(api: Api, aws: dict[str, Any], faults: FaultInjector, lost: int) -> None:
    """The put landed, its answer was lost: the retried put fails its condition on an item with our token."""
    api.create(session_id="s1")
    faults.lose_answer("PutItem", times=lost)
    before = len(faults.calls)
    reply = api.append("s1", held("a"))
    assert reply.status == 201 and reply.body["seq"] == 1 and reply.headers["etag"] == '"1"'
    assert "TransactWriteItems" not in faults.calls[before:] and faults.calls[before:].count("UpdateItem") == 1
    faults.clear()
    assert stored_seqs(aws) == [(1, "a")]
    resend = api.append("s1", held("a"))  # the client resends all the same: 200, the stored event
    assert resend.status == 200 and resend.body["seq"] == 1
    assert stored_seqs(aws) == [(1, "a")]


@pytest.mark.parametrize("stamped", [True, False], ids=["client-timestamp", "server-timestamp"])
def test_a_put_that_never_lands_is_503_and_the_resend_lands_once(
    api: Api, aws: dict[str, Any], faults: FaultInjector, short_budget: float, stamped: bool
) -> None:
    """Claimed, then the put throttled past the budget (as a function that stopped between the two): 503, the
    claimed seq a hole; the client's resend stores the event once, after it."""
    api.create(session_id="s1")
    assert api.append("s1", held("first")).status == 201
    event = held("a", **({"timestamp": time.time()} if stamped else {}))
    faults.fail("PutItem", throttle(), times=-1)
    reply = api.append("s1", event)
    assert reply.status == 503 and retry_after(reply) >= 1
    faults.clear()
    assert stored_seqs(aws) == [(1, "first")]
    resend = api.append("s1", event)
    assert resend.status == 201 and resend.body["seq"] == 3
    assert stored_seqs(aws) == [(1, "first"), (3, "a")]
    again = api.append("s1", event)
    assert again.status == 200 and again.body["seq"] == 3
    assert texts(api.get("s1").body) == ["first", "a"]


def test_a_resend_on_the_claim_first_path_answers_the_stored_event(api: Api, aws: dict[str, Any]) -> None:
    """A resend with a server-filled timestamp is above the newest: it claims, its put meets the stored event
    (another token, the same body): 200 with it, nothing stored, the claimed seq a hole; another body is 409."""
    api.create(session_id="s1")
    assert api.append("s1", held("a")).body["seq"] == 1
    resend = api.append("s1", held("a"))
    assert resend.status == 200 and resend.body["seq"] == 1 and resend.body["id"] == "a"
    conflict = api.append("s1", text_event("other text", id="a"))
    assert conflict.status == 409 and conflict.error["code"] == "event_id_conflict"
    assert stored_seqs(aws) == [(1, "a")]
    nxt = api.append("s1", held("b"))
    assert nxt.status == 201 and nxt.body["seq"] == 4  # after the two holes
    assert texts(api.get("s1").body) == ["a", "b"]


def test_the_claim_first_path_writes_what_the_transaction_wrote(api: Api, aws: dict[str, Any]) -> None:
    """The event item and the session item after a claim-first append hold what the transaction path's would:
    the same attributes (the claim's time ``ct`` added to the session item), the counters and time order exact."""
    api.create(session_id="s1")
    api.create(session_id="s2")
    ts = time.time()
    assert api.append("s1", held("a", timestamp=ts)).status == 201  # claim-first
    # If-Match: the transaction path.
    assert api.append("s2", held("a", timestamp=ts), headers={"If-Match": '"0"'}).status == 201
    fast, slow = event_items(aws, "s1")[0], event_items(aws, "s2")[0]
    assert set(fast) == set(slow) == {"PK", "SK", "seq", "t", "w", "v", "inc", "body"}
    assert (fast["seq"], fast["t"], fast["v"]) == (slow["seq"], slow["t"], slow["v"])
    one, two = session_item(aws, "s1"), session_item(aws, "s2")
    assert one is not None and two is not None
    for name in ("version", "last_seq", "update_time", "tmax", "tskew"):
        assert one.get(name) == two.get(name), name
    assert "due" in one and "due_since" in one
    assert set(one) - set(two) == {"ct"} and abs(float(one["ct"]["N"]) - time.time()) < 60


def test_an_out_of_order_timestamp_goes_the_transaction_path(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    api.create(session_id="s1")
    now = time.time()
    assert api.append("s1", held("late", timestamp=now + 10)).status == 201
    before = len(faults.calls)
    reply = api.append("s1", held("early", timestamp=now))
    assert reply.status == 201 and reply.body["seq"] == 2
    assert faults.calls[before:] == ["UpdateItem", "GetItem", "TransactWriteItems"]
    item = session_item(aws)
    assert item is not None and float(item["tskew"]["N"]) == pytest.approx(10.0)
    assert float(item["tmax"]["N"]) == pytest.approx(now + 10)


@pytest.mark.parametrize("other", ["state delta", "batch", "If-Match"])
def test_a_claim_first_append_racing_the_transaction_path_lands_in_order(
    api: Api, aws: dict[str, Any], faults: FaultInjector, other: str
) -> None:
    """Between our claim and our put, an append of the transaction path commits: it read the counters after
    our claim, so it takes the next seq; ours lands at its own. Both once, in seq order, versions increasing."""
    api.create(session_id="s1")
    assert api.append("s1", held("first")).status == 201
    answers: list[Any] = []

    def race_then_put(apply: Any, _event: str, _request: Any) -> Any:
        if other == "state delta":
            answers.append(api.append("s1", held("theirs", actions={"state_delta": {"k": 1}})))
        elif other == "batch":
            answers.append(api.append("s1", {"events": [held("theirs"), held("theirs2")]}))
        else:
            version = api.get("s1").headers["etag"]
            answers.append(api.append("s1", held("theirs"), headers={"If-Match": version}))
        return apply()

    faults.add("PutItem", race_then_put, when=lambda r: '"V#mine"' in json.dumps(request_json(r)))
    mine = api.append("s1", held("mine"))
    faults.clear()
    (theirs,) = answers
    assert mine.status == 201 and mine.body["seq"] == 2 and mine.headers["etag"] == '"2"'
    assert theirs.status == 201 and int(theirs.headers["etag"].strip('"')) == 3
    expected = ["first", "mine", "theirs"] + (["theirs2"] if other == "batch" else [])
    assert texts(api.get("s1").body) == expected
    assert [s for s, _ in stored_seqs(aws)] == list(range(1, len(expected) + 1))


def compact(api: Api, sid: str = "s1") -> dict[str, Any]:
    reply = api.request("POST", f"/apps/app/users/alice/sessions/{sid}/compact")
    assert reply.status == 200, reply.body
    body: dict[str, Any] = reply.body
    return body


def watermark(aws: dict[str, Any], sid: str = "s1") -> int:
    item = session_item(aws, sid)
    assert item is not None
    return int(item.get("cmp_end", {"N": "0"})["N"])


def turns(api: Api, first: int, last: int, sid: str = "s1") -> None:
    for i in range(first, last):
        assert api.append(sid, held(f"q{i}")).status == 201
        assert api.append(sid, held(f"r{i}", author="model")).status == 201


def test_a_compaction_never_cuts_above_an_event_in_flight(
    api: Api, aws: dict[str, Any], faults: FaultInjector, small_compaction: None
) -> None:
    """Our claim took seq 9; before its put lands, later appends land (10-13) and a compaction runs. It must not
    cut at 9 or above (the event would land below the watermark, in no summary and in no context): it cuts below
    the hole, and the event, landed, is in the context."""
    api.create(session_id="s1")
    turns(api, 0, 4)  # seqs 1-8
    outcomes: list[dict[str, Any]] = []

    def others_then_put(apply: Any, _event: str, _request: Any) -> Any:
        turns(api, 5, 7)  # seqs 10-13
        outcomes.append(compact(api))
        return apply()

    faults.add("PutItem", others_then_put, when=lambda r: '"V#q4"' in json.dumps(request_json(r)))
    assert api.append("s1", held("q4")).body["seq"] == 9
    faults.clear()
    assert outcomes[0]["compacted"] is True and watermark(aws) < 9
    context = api.request("GET", "/apps/app/users/alice/sessions/s1/context").body
    assert "q4" in [m["content"] for m in context["messages"]]


def test_a_compaction_cuts_above_a_hole_once_the_last_claim_is_a_minute_old(
    api: Api, aws: dict[str, Any], small_compaction: None
) -> None:
    """A hole for good (a resend's claim): while claims are recent the compaction cuts below it; once the last
    claim is 60 s old no put can land in it any more, and the compaction cuts above it."""
    api.create(session_id="s1")
    turns(api, 0, 4)  # seqs 1-8
    assert api.append("s1", held("r3", author="model")).status == 200  # a resend: seq 9 a hole
    turns(api, 5, 8)  # seqs 10-15
    assert compact(api)["compacted"] is True
    first = watermark(aws)
    assert 0 < first < 9
    aws["dynamodb"].update_item(
        TableName=TABLE,
        Key={"PK": {"S": session_pk("app", "alice")}, "SK": {"S": "S#s1"}},
        UpdateExpression="SET ct = :old",
        ExpressionAttributeValues={":old": {"N": str(time.time() - 61)}},
    )
    assert compact(api)["compacted"] is True
    assert watermark(aws) > 9


def test_a_put_retried_after_the_session_was_deleted_and_created_again_writes_nothing_into_it(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    """Claimed; the put is throttled past botocore's retries while the session is deleted and created again:
    the store's retry reads the session first, finds another incarnation and answers 404 without putting."""
    api.create(session_id="s1")
    recreated: list[int] = []

    def recreate_then_throttle(_apply: Any, _event: str, request: Any) -> Any:
        from .injector import _response

        if not recreated:
            recreated.append(api.request("DELETE", "/apps/app/users/alice/sessions/s1").status)
            recreated.append(api.create(session_id="s1").status)
        return _response(request, throttle())

    faults.add("PutItem", recreate_then_throttle, times=10, when=lambda r: '"V#a"' in json.dumps(request_json(r)))
    reply = api.append("s1", held("a"))
    faults.clear()
    assert recreated == [204, 201]
    assert reply.status == 404
    assert event_items(aws) == []
    got = api.get("s1").body
    assert got["events"] == [] and got["version"] == 0
