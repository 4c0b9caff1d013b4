"""No read can be poisoned: items written straight into the table (as anyone holding the table could) never make a
read answer 5xx, and never reach other users' sessions."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_memory.limits import MAX_DATETIME_SECONDS
from agent_memory.stores.dynamo.store import DynamoSessionStore
from agent_memory.stores.ports import EventQuery, SessionKey
from agent_memory.stores.s3 import S3BlobStore
from agent_memory.wire.jsonio import dumps, load_stored
from tests.support.api import Api, Reply, text_event
from tests.support.aws import BUCKET, TABLE

DEEP = "[" * 900 + '{"x":1}' + "]" * 900
DEEP_OBJECT = (
    '{"author":"user","content":{"role":"user","parts":[{"text":"deep"}]},"custom_metadata":{"k":' + DEEP + "}}"
)


def body(reply: Reply) -> Any:
    """The reply decoded like the service decodes stored JSON: the test never recurses 900 levels itself."""
    assert reply.status == 200, reply.raw[:300]
    return load_stored(reply.raw, verbatim=True)


def put_state(aws: dict[str, Any], pk: str, sk: str, **values: str) -> None:
    names = {f"#a{i}": f"st:{k}" for i, k in enumerate(values)}
    aws["dynamodb"].update_item(
        TableName=TABLE,
        Key={"PK": {"S": pk}, "SK": {"S": sk}},
        UpdateExpression="SET " + ", ".join(f"#a{i} = :v{i}" for i in range(len(values))),
        ExpressionAttributeNames=names,
        ExpressionAttributeValues={f":v{i}": {"S": v} for i, v in enumerate(values.values())},
    )


def set_event(aws: dict[str, Any], sid: str, event_id: str, user: str = "alice", **attrs: dict[str, str]) -> None:
    names = {f"#a{i}": name for i, name in enumerate(attrs)}
    aws["dynamodb"].update_item(
        TableName=TABLE,
        Key={"PK": {"S": f"E#app#{user}#{sid}"}, "SK": {"S": f"V#{event_id}"}},
        UpdateExpression="SET "
        + ", ".join(f"#a{i} = :v{i}" for i in range(len(attrs)))
        + (" REMOVE body" if "blob" in attrs else ""),
        ExpressionAttributeNames=names,
        ExpressionAttributeValues={f":v{i}": v for i, v in enumerate(attrs.values())},
    )


@pytest.fixture
def poisoned(api: Api, aws: dict[str, Any]) -> Api:
    """alice/s1 with every kind of poison; bob/b1 and alice/s2 share its app (and alice's user) state."""
    api.create(session_id="s1", state={"ok": 1})
    api.create(session_id="s2")
    api.create(session_id="b1", user="bob")
    ids = ["deep", "notjson", "array", "future", "gone", "fine"]
    events = [text_event(f"text {i}", id=i, timestamp=1000.0 + n) for n, i in enumerate(ids)]
    assert api.append("s1", {"events": events}).status == 201
    api.append("b1", text_event("bob's", id="b"), user="bob")
    set_event(aws, "s1", "deep", body={"S": DEEP_OBJECT})
    set_event(aws, "s1", "notjson", body={"S": "{not json"})
    set_event(aws, "s1", "array", body={"S": "[1, 2]"})
    set_event(aws, "s1", "future", body={"S": json.dumps({"author": "user", "timestamp": 1e20})}, t={"N": "1e20"})
    set_event(aws, "s1", "gone", blob={"S": "sessions/app/alice/s1/events/gone/missing.json"})
    put_state(aws, "E#app#alice#s1", "#STATE", k=DEEP, broken="{oops")  # the session's state item
    aws["dynamodb"].update_item(
        TableName=TABLE,
        Key={"PK": {"S": "U#app#alice"}, "SK": {"S": "S#s1"}},
        UpdateExpression="SET update_time = :t",
        ExpressionAttributeValues={":t": {"N": "1e20"}},
    )
    put_state(aws, "U#app#alice", "#STATE", deep=DEEP)
    put_state(aws, "A#app", "#STATE", poison=DEEP, bad="nan nan")
    return api


def test_get_session_reads_poisoned_state_and_events_as_documented(poisoned: Api) -> None:
    got = body(poisoned.get("s1"))
    state = got["state"]
    # Deep values come back verbatim; a value that is not JSON is left out; the rest is untouched.
    assert dumps(state["k"]) == DEEP and dumps(state["user:deep"]) == DEEP and dumps(state["app:poison"]) == DEEP
    assert "broken" not in state and "app:bad" not in state and state["ok"] == 1
    events = {e["id"]: e for e in got["events"]}
    assert [e["seq"] for e in got["events"]] == [1, 2, 3, 4, 5, 6]
    assert dumps(events["deep"]["custom_metadata"]["k"]) == DEEP
    assert events["deep"]["content"]["parts"][0]["text"] == "deep"
    for marked in ("notjson", "array", "gone"):
        assert events[marked]["error_code"] == "unreadable_event" and "content" not in events[marked]
        assert events[marked]["timestamp"] == 1000.0 + list(events).index(marked)
    assert "missing" in events["gone"]["error_message"]
    assert events["future"]["timestamp"] == MAX_DATETIME_SECONDS  # clamped into what a datetime holds
    assert got["last_update_time"] == MAX_DATETIME_SECONDS
    assert events["fine"]["content"]["parts"][0]["text"] == "text fine"
    assert got["next_token"] is None


def test_other_users_and_sessions_of_the_app_stay_readable(poisoned: Api) -> None:
    bob = body(poisoned.get("b1", user="bob"))
    assert dumps(bob["state"]["app:poison"]) == DEEP and "app:bad" not in bob["state"]
    assert [e["content"]["parts"][0]["text"] for e in bob["events"]] == ["bob's"]
    assert dumps(body(poisoned.get("s2"))["state"]["user:deep"]) == DEEP
    for user in ("alice", "bob"):
        listing = body(poisoned.request("GET", f"/apps/app/users/{user}/sessions"))
        assert len(listing["sessions"]) == (2 if user == "alice" else 1)
    s1 = next(s for s in body(poisoned.request("GET", "/apps/app/users/alice/sessions"))["sessions"] if s["id"] == "s1")
    assert dumps(s1["state"]["k"]) == DEEP and "broken" not in s1["state"]


@pytest.mark.parametrize("fmt", ["openai", "full", "adk"])
def test_context_of_poisoned_and_victim_sessions_answers(poisoned: Api, fmt: str) -> None:
    own = body(poisoned.request("GET", "/apps/app/users/alice/sessions/s1/context", query={"format": fmt}))
    # "deep" and "fine" have text; the markers and the body without content have none.
    assert len(own["messages"]) == 2
    assert ("deep" in json.dumps(own["messages"][0])) and ("text fine" in json.dumps(own["messages"][1]))
    bob = body(poisoned.request("GET", "/apps/app/users/bob/sessions/b1/context", query={"format": fmt}))
    assert len(bob["messages"]) == 1


def test_user_state_poison_survives_delete_and_stays_readable(poisoned: Api) -> None:
    assert poisoned.request("DELETE", "/apps/app/users/alice/sessions/s1").status == 204
    assert poisoned.create(session_id="s3").status == 201
    assert dumps(body(poisoned.get("s3"))["state"]["user:deep"]) == DEEP


def test_reads_for_compaction_and_memory_walk_deep_values_as_text(poisoned: Api, aws: dict[str, Any]) -> None:
    store = DynamoSessionStore(aws["dynamodb"], TABLE, S3BlobStore(lambda: aws["s3"], BUCKET))
    events = store.read_events(SessionKey("app", "alice", "s1"), EventQuery())
    json.dumps(events)  # plain values only: what walks events (compaction, memory) can
    deep = next(e for e in events if e["id"] == "deep")
    inner: Any = deep["custom_metadata"]["k"]
    while isinstance(inner, list):
        inner = inner[0]
    assert isinstance(inner, str) and json.loads(inner) is not None
    assert all(isinstance(e["timestamp"], float | int) for e in events)


def test_compact_and_save_of_a_poisoned_session_do_not_answer_5xx(poisoned: Api) -> None:
    compact = poisoned.request("POST", "/apps/app/users/alice/sessions/s1/compact")
    assert compact.status < 500, compact.raw[:300]
    save = poisoned.request("POST", "/apps/app/users/alice/memories", json_body={"session_id": "s1"})
    assert save.status < 500, save.raw[:300]
    assert poisoned.get("s1").status == 200
