"""Per-user quotas through the template's routes (handlers in-process, DynamoDB and S3 in moto): 429
``quota_exceeded`` naming the limit, 413 ``payload_too_large`` naming ``MaxRequestBytes``, and what each costs."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from bench.support.aws_counter import RequestCounter
from tests.support.api import Api, text_event
from tests.support.autosave import autosave, seed_session, stream_records
from tests.support.memories_api import save, search

SESSIONS = "/apps/app/users/alice/sessions"


@pytest.fixture
def quotas(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAX_SESSIONS_PER_USER", "2")
    monkeypatch.setenv("MAX_EVENTS_PER_SESSION", "4")
    monkeypatch.setenv("MAX_MEMORIES_PER_USER", "3")
    monkeypatch.setenv("MAX_REQUEST_BYTES", "2000")
    monkeypatch.setenv("EMBEDDER", "none")


def assert_quota_error(reply: Any, name: str, limit: int) -> None:
    assert reply.status == 429, reply.body
    error = reply.error
    assert error["code"] == "quota_exceeded" and error["field"] == name
    assert f"limit {name} = {limit}" in error["message"]


def test_sessions_past_the_quota_answer_429_and_a_delete_frees_a_place(api: Api, quotas: None) -> None:
    assert api.create(session_id="s1").status == 201
    assert api.create(session_id="s2").status == 201
    assert_quota_error(api.create(session_id="s3", state={"user:x": 1}), "sessions_per_user", 2)
    assert api.get("s3").status == 404
    assert api.create(session_id="s2").status == 200  # an existing session is still answered
    strict = api.request("POST", SESSIONS, json_body={"session_id": "s3"}, headers={"If-None-Match": "*"})
    assert_quota_error(strict, "sessions_per_user", 2)
    assert api.create(user="bob", session_id="s1").status == 201  # every user has their own quota
    assert api.request("DELETE", f"{SESSIONS}/s1").status == 204
    assert api.request("DELETE", f"{SESSIONS}/s1").status == 204
    assert api.create(session_id="s3").status == 201
    assert_quota_error(api.create(session_id="s4"), "sessions_per_user", 2)
    listed = api.request("GET", SESSIONS).body["sessions"]
    assert sorted(s["id"] for s in listed) == ["s2", "s3"]


def test_events_past_the_quota_answer_429_and_store_nothing_of_the_batch(api: Api, quotas: None) -> None:
    api.create(session_id="s1")
    assert api.append("s1", {"events": [text_event(f"m{i}", id=f"m{i}") for i in range(3)]}).status == 201
    reply = api.append("s1", {"events": [text_event("m3", id="m3"), text_event("m4", id="m4")]})
    assert_quota_error(reply, "events_per_session", 4)
    assert [e["id"] for e in api.get("s1").body["events"]] == ["m0", "m1", "m2"]
    assert api.append("s1", text_event("m3", id="m3")).status == 201
    assert api.append("s1", text_event("m3", id="m3")).status == 200  # a resend at the limit is answered
    assert_quota_error(api.append("s1", text_event("m4", id="m4")), "events_per_session", 4)


def test_memories_past_the_quota_answer_429_and_store_nothing(api: Api, quotas: None) -> None:
    assert save(api, {"memories": [{"text": "likes tea"}, {"text": "lives in Lyon"}]}).body["saved"] == 2
    reply = save(api, {"memories": [{"text": "has a cat"}, {"text": "plays chess"}]})
    assert_quota_error(reply, "memories_per_user", 3)
    assert len(search(api, "tea Lyon cat chess", top_k=10)) == 2
    assert save(api, {"memories": [{"text": "likes tea"}, {"text": "has a cat"}]}).body == {"saved": 1, "skipped": 1}
    assert_quota_error(save(api, {"memories": [{"text": "plays chess"}]}), "memories_per_user", 3)


def test_autosave_at_the_memory_quota_skips_without_failing_the_batch(
    api: Api, aws: dict[str, Any], quotas: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAX_MEMORIES_PER_USER", "1")
    monkeypatch.setenv("MAX_EVENTS_PER_SESSION", "0")
    monkeypatch.setenv("MAX_REQUEST_BYTES", "0")
    monkeypatch.setenv("AUTOSAVE_POLICY", "default")
    seed_session(api)  # two texts the default policy keeps: one more than the quota
    # Retrying would fail the same way and hold the stream back: the batch is settled, nothing is stored.
    assert autosave(stream_records(aws)) == {"batchItemFailures": []}
    assert search(api, "peanuts Porto sister", top_k=10) == []


def test_a_body_over_max_request_bytes_is_413_before_it_is_parsed(api: Api, quotas: None) -> None:
    api.create(session_id="s1")
    big = json.dumps({"events": [text_event("x" * 2100, id="big")]})
    for raw, headers in (
        (big, {}),
        ("{" * 2001, {}),  # not even JSON: refused on size, before the parser sees it
        ("é" * 1001, {}),  # 1001 characters, 2002 bytes of UTF-8
    ):
        reply = api.request("POST", f"{SESSIONS}/s1/events", raw=raw, headers=headers)
        assert reply.status == 413, raw[:20]
        assert reply.error["code"] == "payload_too_large" and reply.error["field"] == "body"
        assert "MaxRequestBytes = 2000" in reply.error["message"]
    assert api.get("s1").body["events"] == []
    fits = api.append("s1", text_event("x" * 1500, id="fits"))
    assert fits.status == 201


def test_a_base64_body_is_measured_decoded(api: Api, quotas: None) -> None:
    from agent_memory.edge.api import RequestEvent, parse_body
    from agent_memory.errors import PayloadTooLarge

    def event(raw: bytes) -> RequestEvent:
        return RequestEvent({"body": base64.b64encode(raw).decode(), "isBase64Encoded": True}, parse_body)

    fits = json.dumps({"text": "x" * 1600}).encode()
    assert len(base64.b64encode(fits)) > 2000 >= len(fits)
    assert event(fits).json_body == {"text": "x" * 1600}
    with pytest.raises(PayloadTooLarge, match="MaxRequestBytes = 2000"):
        _ = event(b"x" * 2001).json_body
    # Through the route: bytes that are not UTF-8 travel base64-encoded, and are refused on size before decoding.
    api.create(session_id="s1")
    reply = api.request("POST", f"{SESSIONS}/s1/events", raw=b"\xff" * 2001)
    assert reply.status == 413 and reply.error["field"] == "body"
    assert api.request("POST", f"{SESSIONS}/s1/events", raw=b"\xff" * 20).status == 400


def test_the_default_request_limit_is_one_mebibyte(api: Api) -> None:
    api.create(session_id="s1")
    reply = api.append("s1", text_event("x" * 1_100_000, id="big"))
    assert reply.status == 413 and "MaxRequestBytes = 1048576" in reply.error["message"]
    assert api.append("s1", text_event("x" * 1_000_000, id="fits")).status == 201


# --- what a quota costs in DynamoDB requests ------------------------------------------------------------------------


def test_a_create_costs_one_write_with_its_count(api: Api, counter: RequestCounter) -> None:
    counter.reset()
    assert api.create(session_id="s1").status == 201
    # The count rides in the create's own write (a transaction where a PutItem was): no request more.
    assert counter.calls == [
        ("dynamodb", "TransactWriteItems"),
        ("dynamodb", "Query"),
        ("dynamodb", "BatchGetItem"),
        ("events", "PutEvents"),
    ]


def test_an_append_with_the_event_quota_costs_two_requests(api: Api, counter: RequestCounter, quotas: None) -> None:
    api.create(session_id="s1")
    counter.reset()
    # Claim-first: the quota is the claim's condition (last_seq < the limit).
    assert api.append("s1", text_event("hi", id="e1")).status == 201
    assert counter.calls == [("dynamodb", "UpdateItem"), ("dynamodb", "PutItem")]
    counter.reset()
    # The transaction path: checked on the counters it read, which its transaction is conditioned on.
    assert api.append("s1", text_event("ho", id="e2", actions={"state_delta": {"k": 1}})).status == 201
    assert counter.calls == [("dynamodb", "GetItem"), ("dynamodb", "TransactWriteItems")]


def test_a_claim_at_the_event_quota_fails_its_condition_and_is_refused(
    api: Api, counter: RequestCounter, quotas: None
) -> None:
    api.create(session_id="s1")
    for i in range(4):
        assert api.append("s1", text_event(f"m{i}", id=f"m{i}")).status == 201
    counter.reset()
    assert_quota_error(api.append("s1", text_event("m4", id="m4")), "events_per_session", 4)
    # The claim refused (nothing moved), then the transaction path's read of the counters and its id lookup.
    assert counter.calls[:2] == [("dynamodb", "UpdateItem"), ("dynamodb", "GetItem")]
    got = api.get("s1").body
    assert got["version"] == 4 and [e["id"] for e in got["events"]] == [f"m{i}" for i in range(4)]


def test_a_delete_costs_the_dynamodb_requests_it_did(api: Api, counter: RequestCounter) -> None:
    api.create(session_id="s1")
    api.append("s1", text_event("hi", id="e1"))

    def dynamodb_calls() -> list[str]:
        return [op for service, op in counter.calls if service == "dynamodb"]

    counter.reset()
    assert api.request("DELETE", f"{SESSIONS}/s1").status == 204
    # The tombstone and the count in one transaction (an UpdateItem before), the tombstoned item's no-payload mark,
    # the purge (no S3 listing, so no read of the live incarnation for it), the item's removal.
    assert dynamodb_calls() == ["TransactWriteItems", "GetItem", "Query", "GetItem", "BatchWriteItem", "DeleteItem"]
    assert [op for service, op in counter.calls if service == "s3"] == []
    counter.reset()
    assert api.request("DELETE", f"{SESSIONS}/s1").status == 204  # gone: the failed condition says so
    # No item, so no mark: the bucket is listed as before (and the live incarnation read for it).
    assert dynamodb_calls() == ["TransactWriteItems", "GetItem", "Query", "GetItem", "DeleteItem"]
