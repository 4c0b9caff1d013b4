"""The session routes of the HTTP contract, end to end through API Gateway events and moto."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from bench.support.aws_counter import RequestCounter
from tests.support.api import Api, text_event
from tests.support.aws import BUCKET, TABLE


def test_create_new_then_reuse(api: Api, aws: dict[str, Any]) -> None:
    first = api.create(session_id="s1", state={"k": "v", "user:lang": "fr", "temp:scratch": 1})
    assert first.status == 201
    assert first.body["created"] is True and first.body["id"] == "s1"
    assert first.body["state"] == {"k": "v", "user:lang": "fr"}
    again = api.create(session_id="s1", state={"k": "other"})
    assert again.status == 200
    assert again.body["created"] is False and again.body["state"] == {"k": "v", "user:lang": "fr"}


def test_create_without_body_generates_an_id(api: Api) -> None:
    reply = api.request("POST", "/apps/app/users/alice/sessions")
    assert reply.status == 201
    assert uuid.UUID(reply.body["id"])
    assert reply.body["events"] == [] and reply.body["version"] == 0


def test_true_creation_publishes_session_created_and_reuse_does_not(api: Api, aws: dict[str, Any]) -> None:
    sqs = __import__("agent_memory.runtime.aws", fromlist=["client"]).client("sqs")
    queue_url = sqs.create_queue(QueueName="created")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    aws["events"].put_rule(Name="created", EventPattern=json.dumps({"detail-type": ["SessionCreated"]}))
    aws["events"].put_targets(Rule="created", Targets=[{"Id": "q", "Arn": queue_arn}])

    assert api.create(session_id="s1").status == 201
    assert api.create(session_id="s1").status == 200
    messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", [])
    assert len(messages) == 1
    delivered = json.loads(messages[0]["Body"])
    assert delivered["detail-type"] == "SessionCreated"
    assert delivered["detail"] | {"create_time": 0} == {
        "app_name": "app",
        "user_id": "alice",
        "session_id": "s1",
        "create_time": 0,
    }


def test_a_true_creation_builds_its_store_and_publisher_clients_from_one_session(
    api: Api, aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # the first response: a second botocore session (the publisher's) read botocore's endpoint and partition
    # data again, about 90 CPU ms of a cold create
    from agent_memory.runtime.aws import reset_clients
    from tests.support.aws import count_sessions

    reset_clients()
    made = count_sessions(monkeypatch)
    assert api.create(session_id="one-session").status == 201  # DynamoDB, then EventBridge's SessionCreated
    assert len(made) == 1


def test_get_returns_events_oldest_first_with_merged_state_and_etag(api: Api) -> None:
    api.create(session_id="s1", state={"app:theme": "dark"})
    for i in range(3):
        assert api.append("s1", text_event(f"m{i}", actions={"state_delta": {"n": i, "user:last": i}})).status == 201
    reply = api.get("s1")
    assert reply.status == 200
    body = reply.body
    assert [e["content"]["parts"][0]["text"] for e in body["events"]] == ["m0", "m1", "m2"]
    assert [e["seq"] for e in body["events"]] == [1, 2, 3]
    assert body["state"] == {"n": 2, "user:last": 2, "app:theme": "dark"}
    assert body["version"] == 3 and reply.headers["etag"] == '"3"'


def test_get_num_recent_events_and_after_timestamp(api: Api) -> None:
    api.create(session_id="s1")
    api.append("s1", {"events": [text_event(f"m{i}", timestamp=100.0 + i) for i in range(5)]})
    assert [e["timestamp"] for e in api.get("s1", num_recent_events=2).body["events"]] == [103.0, 104.0]
    assert api.get("s1", num_recent_events=0).body["events"] == []
    assert [e["timestamp"] for e in api.get("s1", after_timestamp=103).body["events"]] == [103.0, 104.0]
    iso = api.get("s1", after_timestamp="1970-01-01T00:01:43Z").body["events"]
    assert [e["timestamp"] for e in iso] == [103.0, 104.0]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"num_recent_events": "-1"}, "num_recent_events"),
        ({"num_recent_events": "many"}, "num_recent_events"),
        ({"after_timestamp": "yesterday"}, "after_timestamp"),
    ],
)
def test_get_rejects_bad_query_parameters(api: Api, query: dict[str, str], field: str) -> None:
    api.create(session_id="s1")
    reply = api.get("s1", **query)
    assert reply.status == 400
    assert reply.error["field"] == field


def test_missing_session_is_404_for_get_and_append(api: Api) -> None:
    assert api.get("nope").status == 404
    reply = api.append("nope", text_event("hi"))
    assert reply.status == 404 and reply.error["code"] == "session_not_found"


def test_sessions_are_visible_only_to_their_app_and_user(api: Api) -> None:
    api.create(session_id="s1")
    api.append("s1", text_event("secret"))
    assert api.get("s1", user="mallory").status == 404
    assert api.get("s1", app="other").status == 404
    assert api.append("s1", text_event("x"), user="mallory").status == 404
    listing = api.request("GET", "/apps/app/users/mallory/sessions").body
    assert listing == {"sessions": [], "next_token": None}
    assert api.request("DELETE", "/apps/app/users/mallory/sessions/s1").status == 204
    assert api.get("s1").status == 200


def test_list_pages_through_every_session_once(api: Api) -> None:
    ids = sorted(f"s{i:02d}" for i in range(23))
    for sid in ids:
        api.create(session_id=sid)
    seen: list[str] = []
    token = None
    while True:
        query: dict[str, Any] = {"limit": 5} | ({"next_token": token} if token else {})
        reply = api.request("GET", "/apps/app/users/alice/sessions", query=query)
        assert reply.status == 200
        assert all("events" not in s for s in reply.body["sessions"])
        seen += [s["id"] for s in reply.body["sessions"]]
        token = reply.body["next_token"]
        if token is None:
            break
    assert seen == ids


def test_list_default_page_is_twenty(api: Api) -> None:
    for i in range(21):
        api.create(session_id=f"s{i:02d}")
    body = api.request("GET", "/apps/app/users/alice/sessions").body
    assert len(body["sessions"]) == 20 and body["next_token"]


@pytest.mark.parametrize("limit", ["0", "101", "-3", "ten"])
def test_list_rejects_limits_outside_1_to_100(api: Api, limit: str) -> None:
    reply = api.request("GET", "/apps/app/users/alice/sessions", query={"limit": limit})
    assert reply.status == 400 and reply.error["field"] == "limit"


def test_list_rejects_forged_and_foreign_tokens(api: Api) -> None:
    for i in range(3):
        api.create(session_id=f"s{i}")
        api.create(session_id=f"s{i}", user="bob")
    bobs_token = api.request("GET", "/apps/app/users/bob/sessions", query={"limit": 1}).body["next_token"]
    assert bobs_token
    for token in [bobs_token, "garbage", "eyJ2IjoxfQ", "%%%", "A" * 2000]:
        reply = api.request("GET", "/apps/app/users/alice/sessions", query={"next_token": token})
        assert reply.status == 400, token
        assert reply.error["field"] == "next_token"


def test_delete_removes_everything_and_is_idempotent(api: Api, aws: dict[str, Any]) -> None:
    api.create(session_id="s1")
    api.append("s1", text_event("z" * 600_000))  # offloaded to S3
    api.append("s1", text_event("small"))
    assert api.request("DELETE", "/apps/app/users/alice/sessions/s1").status == 204
    assert api.request("DELETE", "/apps/app/users/alice/sessions/s1").status == 204
    assert api.get("s1").status == 404
    assert api.append("s1", text_event("late")).status == 404
    items = aws["dynamodb"].query(
        TableName=TABLE,
        KeyConditionExpression="PK = :pk",
        ExpressionAttributeValues={":pk": {"S": "E#app#alice#s1"}},
    )["Items"]
    assert items == []
    versions = aws["s3"].list_object_versions(Bucket=BUCKET)
    assert versions.get("Versions", []) == [] and versions.get("DeleteMarkers", []) == []


def test_delete_of_a_never_created_session_is_204(api: Api) -> None:
    assert api.request("DELETE", "/apps/app/users/alice/sessions/ghost").status == 204


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/apps/-bad/users/alice/sessions", "app_name"),
        ("/apps/app/users/al%20ice/sessions", "user_id"),
        ("/apps/app/users/" + "u" * 129 + "/sessions", "user_id"),
        ("/apps/app/users/al$ice/sessions", "user_id"),
    ],
)
def test_bad_identifiers_in_the_path_are_400(api: Api, path: str, field: str) -> None:
    reply = api.request("POST", path)
    assert reply.status == 400 and reply.error["field"] == field


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ('{"session_id": "bad id"}', 422, "session_id"),
        ('{"session_id": ""}', 422, "session_id"),
        ('{"session_id": 7}', 422, "session_id"),
        ('{"state": [1, 2]}', 422, "state"),
        ('{"sesion_id": "typo"}', 422, "sesion_id"),
        ("[1, 2]", 422, "body"),
        ("{not json", 400, "body"),
    ],
)
def test_create_rejects_bad_bodies(api: Api, body: str, status: int, field: str) -> None:
    reply = api.request("POST", "/apps/app/users/alice/sessions", raw=body)
    assert reply.status == status
    assert reply.error["field"] == field


def test_unknown_route_is_a_json_404(api: Api) -> None:
    reply = api.request("GET", "/nothing/here")
    assert reply.status == 404 and reply.error["code"] == "route_not_found"


def test_list_is_one_query_and_one_state_read_per_page(api: Api, counter: RequestCounter) -> None:
    for i in range(5):
        api.create(session_id=f"s{i}")
    counter.reset()
    api.request("GET", "/apps/app/users/alice/sessions", query={"limit": 2})
    # The user's partition (sessions and user state), then the app's state.
    assert counter.calls == [("dynamodb", "Query"), ("dynamodb", "BatchGetItem")]


def test_a_users_list_is_oldest_update_first_with_merged_state(api: Api) -> None:
    for sid in ["a", "b", "c"]:
        assert api.create(session_id=sid, state={"own": sid}).status == 201
    assert api.append("a", text_event("later", actions={"state_delta": {"user:u": 1, "app:t": 2}})).status == 201
    listed: list[dict[str, Any]] = []
    token = None
    while True:
        query = {"limit": 2} | ({"next_token": token} if token else {})
        reply = api.request("GET", "/apps/app/users/alice/sessions", query=query)
        assert reply.status == 200
        listed += reply.body["sessions"]
        token = reply.body["next_token"]
        if token is None:
            break
    times = [s["last_update_time"] for s in listed]
    assert times == sorted(times) and [s["id"] for s in listed][-1] == "a"
    assert {s["id"]: s["state"] for s in listed} == {
        sid: {"own": sid, "user:u": 1, "app:t": 2} for sid in ["a", "b", "c"]
    }
    assert all("events" not in s and s["user_id"] == "alice" for s in listed)


def test_the_app_wide_list_pages_through_every_user_by_user_then_id(api: Api, counter: RequestCounter) -> None:
    for user in ["bob", "alice"]:
        for sid in ["s2", "s1"]:
            api.create(user=user, session_id=sid, state={"user:name": user})
    api.create(app="other", user="carol", session_id="x")
    listed: list[dict[str, Any]] = []
    token = None
    counter.reset()
    while True:
        query = {"limit": 3} | ({"next_token": token} if token else {})
        reply = api.request("GET", "/apps/app/sessions", query=query)
        assert reply.status == 200, reply.body
        listed += reply.body["sessions"]
        token = reply.body["next_token"]
        if token is None:
            break
    assert [(s["user_id"], s["id"]) for s in listed] == [("alice", "s1"), ("alice", "s2"), ("bob", "s1"), ("bob", "s2")]
    assert all(s["state"] == {"user:name": s["user_id"]} and "events" not in s for s in listed)
    # Per page: one query of the sparse index, one BatchGetItem (sessions, their users' and the app's state).
    assert counter.calls == [("dynamodb", "Query"), ("dynamodb", "BatchGetItem")] * 2
    assert ("dynamodb", "Scan") not in counter.calls


def test_the_app_wide_list_leaves_out_deleted_sessions_and_rejects_a_users_token(api: Api) -> None:
    for sid in ["s1", "s2", "s3"]:
        api.create(session_id=sid)
    assert api.request("DELETE", "/apps/app/users/alice/sessions/s2").status == 204
    reply = api.request("GET", "/apps/app/sessions")
    assert [s["id"] for s in reply.body["sessions"]] == ["s1", "s3"] and reply.body["next_token"] is None
    user_token = api.request("GET", "/apps/app/users/alice/sessions", query={"limit": 1}).body["next_token"]
    bad = api.request("GET", "/apps/app/sessions", query={"next_token": user_token})
    assert bad.status == 400 and bad.error["field"] == "next_token"
    assert api.request("GET", "/apps/app/sessions", query={"limit": 101}).status == 400
    assert api.request("GET", "/apps/nobody/sessions").body == {"sessions": [], "next_token": None}


def test_user_and_app_state_routes(api: Api) -> None:
    assert api.request("GET", "/apps/app/users/alice/state").body == {
        "app_name": "app",
        "user_id": "alice",
        "state": {},
    }
    assert api.request("GET", "/apps/app/state").body == {"app_name": "app", "state": {}}
    api.create(session_id="s1", state={"user:lang": "fr", "app:tier": "pro", "k": 1, "temp:x": 1})
    api.append("s1", text_event("hi", actions={"state_delta": {"user:n": {"deep": [1, 2.5]}}}))
    user = api.request("GET", "/apps/app/users/alice/state")
    assert user.status == 200
    assert user.body == {
        "app_name": "app",
        "user_id": "alice",
        "state": {"user:lang": "fr", "user:n": {"deep": [1, 2.5]}},
    }
    assert api.request("GET", "/apps/app/state").body == {"app_name": "app", "state": {"app:tier": "pro"}}
    # Another user of the app shares the app state, not the user state; neither route ever answers 404.
    assert api.request("GET", "/apps/app/users/bob/state").body["state"] == {}
    assert api.request("GET", "/apps/other/state").body["state"] == {}
    assert api.request("GET", "/apps/app/users/b%20b/state").status == 400


def test_strict_create_answers_409_already_exists_and_changes_nothing(api: Api) -> None:
    strict = {"If-None-Match": "*"}
    path = "/apps/app/users/alice/sessions"
    first = api.request("POST", path, json_body={"session_id": "s1", "state": {"k": 1}}, headers=strict)
    assert first.status == 201 and first.body["created"] is True
    again = api.request("POST", path, json_body={"session_id": "s1", "state": {"k": 2, "user:u": 1}}, headers=strict)
    assert again.status == 409
    assert again.error["code"] == "already_exists" and again.error["field"] == "session_id"
    assert api.get("s1").body["state"] == {"k": 1}  # the refused create's state went nowhere
    # Without the header: get-or-create as before.
    assert api.create(session_id="s1").status == 200
    # A generated id is always free.
    assert api.request("POST", path, headers=strict).status == 201


@pytest.mark.parametrize("value", ['"1"', "W/*", "**", ""])
def test_if_none_match_other_than_star_is_refused(api: Api, value: str) -> None:
    reply = api.request(
        "POST", "/apps/app/users/alice/sessions", json_body={"session_id": "s1"}, headers={"If-None-Match": value}
    )
    assert reply.status == 400 and reply.error["field"] == "If-None-Match"
    assert api.get("s1").status == 404
