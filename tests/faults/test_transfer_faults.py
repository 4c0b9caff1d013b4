"""Faults below botocore on the import and the memo writes (DynamoDB and S3 on moto): what is stored afterwards.

An import writes a placeholder, the events (BatchWriteItem, S3 for large bodies), then the session in one
transaction: a fault anywhere leaves nothing a reader sees, and the retry redoes the import; a lost answer is
recognised. A memo write is one idempotent conditional update.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from agent_memory.stores.dynamo.keys import session_pk
from agent_memory.stores.s3 import STAGED_TAG
from tests.support.api import Api, text_event
from tests.support.aws import TABLE

from .injector import FaultInjector, request_json, s3_error, throttle
from .session_storage import event_items, object_versions, retry_after, session_item, tags

BIG = "x" * 400_000  # over the 350 KB offload threshold: the body goes to S3
SESSIONS = "/apps/app/users/alice/sessions"


@pytest.fixture
def api(aws: dict[str, Any], faults: FaultInjector) -> Api:
    return Api()


@pytest.fixture
def short_budget(monkeypatch: pytest.MonkeyPatch) -> Iterator[float]:
    monkeypatch.setattr("agent_memory.stores.dynamo.retries.WRITE_BUDGET_S", 1.5)
    yield 1.5


def document(sid: str = "s1", count: int = 60) -> dict[str, Any]:
    events = [
        {
            "id": f"e{i}",
            "author": "user",
            "timestamp": 100.0 + i,
            "content": {"parts": [{"text": f"t{i}"}]},
            "seq": i + 1,
        }
        for i in range(count)
    ]
    events.append({"id": "big", "author": "agent", "timestamp": 200.0, "content": {"parts": [{"text": BIG}]}})
    events[-1]["seq"] = count + 1
    return {
        "format": "agent-memory/session@1",
        "app_name": "app",
        "user_id": "alice",
        "session_id": sid,
        "create_time": 50.0,
        "last_update_time": 200.0,
        "version": 3,
        "last_seq": count + 1,
        "state": {"session": {"k": 1}, "user": {"name": "Ann"}, "app": {}},
        "memo": {"m": 1},
        "compaction": {"summary_event_id": None, "end_seq": 0},
        "events": events,
    }


def import_(api: Api, body: dict[str, Any], **query: Any) -> Any:
    return api.request("POST", f"{SESSIONS}/import", raw=json.dumps(body), query=query or None)


def user_item(aws: dict[str, Any]) -> dict[str, Any]:
    item: dict[str, Any] = (
        aws["dynamodb"]
        .get_item(
            TableName=TABLE, Key={"PK": {"S": session_pk("app", "alice")}, "SK": {"S": "#STATE"}}, ConsistentRead=True
        )
        .get("Item", {})
    )
    return item


def assert_invisible(api: Api, sid: str = "s1") -> None:
    assert api.get(sid).status == 404
    assert api.request("GET", SESSIONS).body["sessions"] == []
    assert api.append(sid, text_event("late")).status == 404
    assert api.request("GET", f"{SESSIONS}/{sid}/export").status == 404


def assert_imported_whole(api: Api, aws: dict[str, Any], body: dict[str, Any], sid: str = "s1") -> None:
    exported = api.request("GET", f"{SESSIONS}/{sid}/export").body
    assert [(e["id"], e["seq"]) for e in exported["events"]] == [(e["id"], e["seq"]) for e in body["events"]]
    assert exported["events"][-1]["content"]["parts"][0]["text"] == BIG
    item = session_item(aws, sid)
    assert item is not None and "importing" not in item and item["version"]["N"] == "3"
    live = item["inc"]["S"]
    stored = event_items(aws, sid)
    assert len(stored) == len(body["events"]) and {i["inc"]["S"] for i in stored} == {live}
    # One payload, the committed import's, untagged (kept); the failed attempts' are gone (a lost PutObject
    # answer may have written its key twice: versions of one object).
    keys = {v["Key"] for v in object_versions(aws)}
    assert len(keys) == 1 and f"/{live}/" in next(iter(keys))
    assert STAGED_TAG not in tags(aws, next(iter(keys)))
    assert user_item(aws)["sessions"]["N"] == "1"  # counted once


@pytest.mark.parametrize(
    ("operation", "fault"),
    [("BatchWriteItem", throttle()), ("TransactWriteItems", throttle()), ("PutObject", s3_error("SlowDown", 503))],
    ids=["events", "commit", "payload"],
)
def test_an_import_that_keeps_failing_is_503_leaves_nothing_visible_and_its_retry_imports(
    api: Api, aws: dict[str, Any], faults: FaultInjector, short_budget: float, operation: str, fault: Any
) -> None:
    body = document()
    faults.fail(operation, fault, times=-1)
    reply = import_(api, body)
    assert reply.status == 503 and retry_after(reply) >= 1
    faults.clear()
    item = session_item(aws)
    assert item is None  # the placeholder was given back
    assert_invisible(api)
    assert "sessions" not in user_item(aws) or user_item(aws)["sessions"]["N"] == "0"
    retried = import_(api, body)
    assert retried.status == 201, retried.body
    assert_imported_whole(api, aws, body)


def test_an_import_whose_placeholder_could_not_be_given_back_is_taken_over_once_stale(
    api: Api, aws: dict[str, Any], faults: FaultInjector, short_budget: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = document()
    faults.fail("TransactWriteItems", throttle(), times=-1)
    faults.fail("DeleteItem", throttle(), times=-1)
    assert import_(api, body).status == 503
    faults.clear()
    placeholder = session_item(aws)
    assert placeholder is not None and "importing" in placeholder  # left behind, and invisible:
    assert_invisible(api)
    assert len(event_items(aws)) == len(body["events"])
    busy = import_(api, body)
    assert busy.status == 503 and retry_after(busy) >= 1  # it may be an import still writing
    assert api.create(session_id="s1").status == 503
    monkeypatch.setattr("agent_memory.stores.dynamo.sessions.IMPORT_STALE_S", 0.0)
    assert import_(api, body).status == 201
    assert_imported_whole(api, aws, body)


@pytest.mark.parametrize("operation", ["PutItem", "BatchWriteItem", "TransactWriteItems", "PutObject"])
def test_lost_answers_during_an_import_are_recognised(
    api: Api, aws: dict[str, Any], faults: FaultInjector, operation: str
) -> None:
    body = document()
    faults.lose_answer(operation, times=2)
    reply = import_(api, body)
    assert reply.status == 201, reply.body
    faults.clear()
    assert_imported_whole(api, aws, body)


def test_a_replace_that_fails_shows_no_mix_and_its_retry_replaces(
    api: Api, aws: dict[str, Any], faults: FaultInjector, short_budget: float
) -> None:
    api.create(session_id="s1")
    api.append("s1", {"events": [text_event("old", id="e1"), text_event("old only", id="old")]})
    body = document()

    def commit(request: Any) -> bool:
        return "importing = :inc" in json.dumps(request_json(request))

    faults.fail("TransactWriteItems", throttle(), times=-1, when=commit)
    assert import_(api, body, replace="true").status == 503
    faults.clear()
    # The old session went first (its events share the new one's keys): none, never half of each.
    assert_invisible(api)
    assert import_(api, body, replace="true").status == 201
    assert_imported_whole(api, aws, body)
    assert "V#old" not in {i["SK"]["S"] for i in event_items(aws)}


def test_a_replace_whose_delete_cannot_start_leaves_the_old_session_whole(
    api: Api, aws: dict[str, Any], faults: FaultInjector, short_budget: float
) -> None:
    api.create(session_id="s1", state={"k": "old"})
    api.append("s1", {"events": [text_event("old", id="e1"), text_event("old only", id="old")]})
    before = api.request("GET", f"{SESSIONS}/s1/export").body

    def tombstone(request: Any) -> bool:
        return "deleting" in json.dumps(request_json(request))

    faults.fail("TransactWriteItems", throttle(), times=-1, when=tombstone)
    assert import_(api, document(), replace="true").status == 503
    faults.clear()
    assert api.request("GET", f"{SESSIONS}/s1/export").body == before
    item = session_item(aws)
    assert item is not None and "importing" not in item and "deleting" not in item


def test_a_replace_whose_delete_stops_part_way_shows_neither_and_its_retry_replaces(
    api: Api, aws: dict[str, Any], faults: FaultInjector, short_budget: float
) -> None:
    api.create(session_id="s1", state={"k": "old"})
    api.append("s1", {"events": [text_event("old", id="e1"), text_event("old only", id="old")]})
    faults.fail("Query", throttle(), times=-1)  # the delete's read of the event partition, after its tombstone
    assert import_(api, document(), replace="true").status == 503
    faults.clear()
    assert_invisible(api)  # the tombstone hides the old session; the new one is not there yet
    assert import_(api, document(), replace="true").status == 201
    assert_imported_whole(api, aws, document())
    assert "V#old" not in {i["SK"]["S"] for i in event_items(aws)}


def test_a_throttled_memo_write_is_retried_and_one_that_keeps_failing_changes_nothing(
    api: Api, aws: dict[str, Any], faults: FaultInjector, short_budget: float
) -> None:
    api.create(session_id="s1")
    faults.fail("UpdateItem", throttle(), times=4)
    assert api.request("PUT", f"{SESSIONS}/s1/memo", json_body={"memo": {"v": 1}}).status == 200
    item = session_item(aws)
    assert item is not None and json.loads(item["memo"]["S"]) == {"v": 1} and item["version"]["N"] == "0"
    faults.fail("UpdateItem", throttle(), times=-1)
    failed = api.request("PUT", f"{SESSIONS}/s1/memo", json_body={"memo": {"v": 2}})
    assert failed.status == 503 and retry_after(failed) >= 1
    faults.clear()
    item = session_item(aws)
    assert item is not None and json.loads(item["memo"]["S"]) == {"v": 1}


def test_a_lost_memo_answer_is_harmless(api: Api, aws: dict[str, Any], faults: FaultInjector) -> None:
    api.create(session_id="s1")
    faults.lose_answer("UpdateItem", times=2)
    assert api.request("PUT", f"{SESSIONS}/s1/memo", json_body={"memo": {"v": "ü"}}).status == 200
    faults.clear()
    item = session_item(aws)
    assert item is not None and json.loads(item["memo"]["S"]) == {"v": "ü"} and item["version"]["N"] == "0"
    assert api.request("GET", f"{SESSIONS}/s1/memo").body == {"memo": {"v": "ü"}}


def test_a_memo_write_on_a_session_being_deleted_or_imported_is_404(
    api: Api, aws: dict[str, Any], faults: FaultInjector, short_budget: float
) -> None:
    api.create(session_id="s1")
    faults.fail("BatchWriteItem", throttle(), times=-1)
    api.append("s1", text_event("x"))
    assert api.request("DELETE", f"{SESSIONS}/s1").status in (204, 503)
    faults.clear()
    assert api.request("PUT", f"{SESSIONS}/s1/memo", json_body={"memo": {"v": 1}}).status == 404
    item = session_item(aws)
    assert item is None or "memo" not in item
