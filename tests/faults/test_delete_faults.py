"""Deleting events under faults injected below botocore's retries: after each, what the table and the bucket hold,
what reads show (never part of a deletion), and that the retry (or the next deletion) finishes the job."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_memory.policy.state import ScopedDelta
from agent_memory.stores.dynamo.keys import events_pk, session_pk
from agent_memory.stores.dynamo.store import DynamoSessionStore
from agent_memory.stores.ports import Deletion, EventQuery, SessionKey
from agent_memory.stores.s3 import S3BlobStore
from tests.support.api import Api, text_event
from tests.support.aws import BUCKET, TABLE
from tests.support.sessions import event, record

from .injector import FaultInjector, request_json, s3_error, throttle
from .memory_storage import claims, texts

S = "/apps/app/users/alice/sessions"
KEY = SessionKey("app", "alice", "s1")


@pytest.fixture(autouse=True)
def _setup(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 3 s write budget, lexical search, small offload threshold."""
    monkeypatch.setattr("agent_memory.runtime.aws.WRITE_BUDGET_S", 3.0)
    monkeypatch.setattr("agent_memory.stores.dynamo.retries.WRITE_BUDGET_S", 3.0)
    monkeypatch.setenv("EMBEDDER", "none")
    monkeypatch.setenv("AUTOSAVE_POLICY", "default")
    monkeypatch.setenv("OFFLOAD_BYTES", "5000")


@pytest.fixture
def api(aws: dict[str, Any], faults: FaultInjector) -> Api:
    return Api()


def assert_incomplete(reply: Any) -> None:
    """503 ``deletion_incomplete``: committed, not purged; the client sends the request again."""
    assert reply.status == 503, (reply.status, reply.body)
    assert reply.error["code"] == "deletion_incomplete" and int(reply.headers["retry-after"]) >= 1


def event_items(aws: dict[str, Any], sid: str = "s1") -> list[str]:
    items = aws["dynamodb"].query(
        TableName=TABLE,
        KeyConditionExpression="PK = :pk AND begins_with(SK, :v)",  # the events, not the session's state item
        ExpressionAttributeValues={":pk": {"S": events_pk(SessionKey("app", "alice", sid))}, ":v": {"S": "V#"}},
        ConsistentRead=True,
    )["Items"]
    return sorted(i["SK"]["S"][2:] for i in items)


def session_item(aws: dict[str, Any], sid: str = "s1") -> dict[str, Any]:
    item: dict[str, Any] = aws["dynamodb"].get_item(
        TableName=TABLE, Key={"PK": {"S": session_pk("app", "alice")}, "SK": {"S": f"S#{sid}"}}, ConsistentRead=True
    )["Item"]
    return item


def payload_versions(aws: dict[str, Any]) -> list[str]:
    listed = aws["s3"].list_object_versions(Bucket=BUCKET, Prefix="sessions/")
    return [v["Key"] for v in listed.get("Versions", []) + listed.get("DeleteMarkers", [])]


def seed(api: Api, n: int = 6, big: bool = False) -> None:
    api.create(session_id="s1")
    events = [text_event(f"fact {i} about zebras", id=f"u{i}") for i in range(n)]
    if big:
        events[1] = text_event("y" * 8_000 + " zebras", id="u1")
    assert api.append("s1", {"events": events}).status == 201


def ids(api: Api) -> list[str]:
    reply = api.get("s1")
    assert reply.status == 200, reply.body
    return [e["id"] for e in reply.body["events"]]


def is_deletion(request: Any) -> bool:
    return "dtok" in json.dumps(request_json(request).get("ExpressionAttributeNames", {}))


def purges_events(request: Any) -> bool:
    return '"E#app#alice#s1"' in json.dumps(request_json(request)) and "DeleteRequest" in json.dumps(
        request_json(request)
    )


def test_the_deletions_write_answer_lost_is_recognised_and_counted_once(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    seed(api)
    version = int(session_item(aws)["version"]["N"])
    faults.lose_answer("UpdateItem", when=is_deletion)
    reply = api.request("DELETE", f"{S}/s1/events/u2")
    assert reply.status == 200, reply.body
    assert reply.body == {"deleted": ["u2"], "version": version + 1}
    faults.clear()
    item = session_item(aws)
    assert item["version"]["N"] == str(version + 1) and item["dels"]["N"] == "1" and "hide" not in item
    assert item["last_seq"]["N"] == "6"
    assert event_items(aws) == ["u0", "u1", "u3", "u4", "u5"]


def test_throttles_on_the_deletions_write_are_absorbed(api: Api, aws: dict[str, Any], faults: FaultInjector) -> None:
    seed(api)
    faults.fail("UpdateItem", throttle(), times=4, when=is_deletion)
    reply = api.request("DELETE", f"{S}/s1/events")
    assert reply.status == 200 and reply.body["deleted"] == 6
    faults.clear()
    assert event_items(aws) == [] and ids(api) == []


def test_a_purge_that_keeps_failing_leaves_nothing_readable_and_the_retry_finishes_it(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    seed(api, n=60)
    assert api.request("POST", "/apps/app/users/alice/memories", json_body={"session_id": "s1"}).status == 200
    assert len(texts(api, "zebras")) == 60
    # The first batch of the purge lands, every later one is throttled until the budget runs out.
    throttled = faults.fail("BatchWriteItem", throttle(), times=-1, when=lambda r: False)
    landed = {"n": 0}

    def let_one_through(apply: Any, event_name: str, request: Any) -> Any:
        if landed["n"] == 0:
            landed["n"] += 1
            return apply()
        return throttled.action(apply, event_name, request)

    faults.add("BatchWriteItem", let_one_through, times=-1, when=purges_events)
    reply = api.request("DELETE", f"{S}/s1/events")
    assert_incomplete(reply)
    faults.clear()
    # Part of the items went, the rest are still stored: no read shows any of them.
    left = event_items(aws)
    assert 0 < len(left) < 60
    assert "hide" in session_item(aws)
    assert ids(api) == []
    ctx = api.request("GET", f"{S}/s1/context")
    assert ctx.status == 200 and ctx.body["messages"] == []
    # The retry (a clear again: nothing is left to delete) finishes the purge.
    again = api.request("DELETE", f"{S}/s1/events")
    assert again.status == 200 and again.body["deleted"] == 0
    assert event_items(aws) == [] and "hide" not in session_item(aws)
    assert texts(api, "zebras") == []
    assert all(committed for key, committed in claims(aws).items() if key.startswith("E#s1#"))


def test_an_s3_error_deleting_a_payload_answers_503_and_the_retry_deletes_it(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    seed(api, big=True)
    assert payload_versions(aws)
    faults.fail("DeleteObjects", s3_error(), times=-1)
    assert_incomplete(api.request("DELETE", f"{S}/s1/events/u1"))
    faults.clear()
    assert payload_versions(aws)  # still there: the item that names it too
    assert "u1" in event_items(aws) and "u1" not in ids(api)
    # The next deletion of the session (here: of another event) finishes the first one.
    assert api.request("DELETE", f"{S}/s1/events/u4").status == 200
    assert payload_versions(aws) == []
    assert event_items(aws) == ["u0", "u2", "u3", "u5"]


def test_a_memory_store_failure_leaves_the_events_hidden_and_the_retry_forgets_them(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    seed(api)
    assert api.request("POST", "/apps/app/users/alice/memories", json_body={"session_id": "s1"}).status == 200
    faults.fail("PutObject", s3_error(), times=-1, when=lambda r: "/memories/" in r.url)
    assert_incomplete(api.request("DELETE", f"{S}/s1/events/u3"))
    faults.clear()
    assert "u3" not in ids(api)
    assert claims(aws)["E#s1#u3"] is True  # committed first: auto-save can never bring it back
    assert api.request("DELETE", f"{S}/s1/events/u3").status == 404  # deleted already; the purge is finished
    assert "fact 3 about zebras" not in texts(api, "zebras")
    assert "u3" not in event_items(aws) and "hide" not in session_item(aws)


def test_a_read_that_meets_a_purge_under_way_never_shows_part_of_it(aws: dict[str, Any], faults: FaultInjector) -> None:
    store = DynamoSessionStore(aws["dynamodb"], TABLE, S3BlobStore(lambda: aws["s3"], BUCKET))
    store.create_session(record(), ScopedDelta())
    store.append_events(KEY, [event(f"e{i}", 1000.0 + i) for i in range(1, 11)], None)

    def delete_under_the_read(apply: Any, _event: str, request: Any) -> Any:
        # The reader read the deletion marks already (none); now a clear commits and its purge removes half the
        # items, before the reader's Query of the events runs.
        got = store.get_session(KEY)
        assert got is not None
        store.delete_events(KEY, Deletion(((1, 10),), got.last_seq, got.deletions, None, 0), None)
        for i in range(1, 6):
            aws["dynamodb"].delete_item(TableName=TABLE, Key={"PK": {"S": events_pk(KEY)}, "SK": {"S": f"V#e{i}"}})
        return apply()

    faults.add(
        "Query",
        delete_under_the_read,
        times=1,
        when=lambda r: request_json(r).get("IndexName") == "by_seq",
    )
    # Without the second look at the marks this read would answer e6..e10: half of a clear.
    assert store.read_events(KEY, EventQuery()) == []
    assert store.read_events(KEY, EventQuery(num_recent=3)) == []
