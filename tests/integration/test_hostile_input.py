"""Hostile input through the handlers: every class answers 4xx with the error naming the
field, and nothing is stored (each test reads back). None answers 5xx."""

from __future__ import annotations

import json
from typing import Any

import pytest

from local.apigw import LambdaContext, http_api_event
from local.server import load_handler
from tests.support.api import Api, Reply, text_event

SESSIONS = "/apps/app/users/alice/sessions"
MEMORIES = "/apps/app/users/alice/memories"


def nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def deep_text(depth: int) -> str:
    """JSON text of ``depth`` nested arrays (json.dumps itself would recurse once per level)."""
    return "[" * depth + "1" + "]" * depth


def assert_error(reply: Reply, status: int, code: str, field: str) -> None:
    assert reply.status == status, (reply.status, reply.raw[:300])
    error = reply.error
    assert (error["code"], error.get("field")) == (code, field), error


def assert_no_session(api: Api, sid: str) -> None:
    assert api.get(sid).status == 404
    listing = api.request("GET", SESSIONS)
    assert listing.status == 200 and sid not in [s["id"] for s in listing.body["sessions"]]


def assert_untouched(api: Api, sid: str = "s1", state: dict[str, Any] | None = None) -> None:
    """The session created by ``session`` still has no events, its first state, version 0."""
    got = api.get(sid)
    assert got.status == 200, got.body
    assert got.body["events"] == []
    assert got.body["state"] == (state if state is not None else {"k": 1})
    assert got.body["version"] == 0


def assert_no_memories(api: Api, query: str = "hostile") -> None:
    reply = api.request("GET", f"{MEMORIES}/search", query={"query": query})
    assert reply.status == 200 and reply.body["memories"] == [], reply.body


@pytest.fixture
def session(api: Api) -> str:
    assert api.create(session_id="s1", state={"k": 1}).status == 201
    return "s1"


def invoke(api: Api, method: str, path: str, **event_parts: Any) -> tuple[int, dict[str, Any]]:
    """Call the routed handler with an event whose parts (``queryStringParameters``, ``headers`` …) are set as
    given: a Lambda event can hold what no HTTP client can send, such as a lone surrogate."""
    for route in api._api.routes:
        params = route.match(method, path)
        if params is not None:
            break
    else:
        raise AssertionError(f"no route for {method} {path}")
    event = http_api_event(route, path, params)
    for key, value in event_parts.items():
        event[key] = {**event.get(key, {}), **value} if isinstance(value, dict) else value
    response = load_handler(route)(event, LambdaContext(function_name=route.function))
    return int(response["statusCode"]), json.loads(response["body"] or "null")


# --- JSON the parser refuses: 400 naming body ------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b'{"state": {"k": "\xff\xfe"}}', id="invalid-utf8"),
        pytest.param(b'{"state": {"k": "\xed\xa0\x80"}}', id="utf8-encoded-surrogate"),
        pytest.param(b'{"state": {"k": "\\ud800"}}', id="lone-surrogate-escape"),
        pytest.param(b'{"state": {"\\udc00": 1}}', id="lone-surrogate-key"),
        pytest.param(('{"state": {"k": ' + deep_text(255) + "}}").encode(), id="nested-255"),
        pytest.param(('{"state": {"k": ' + deep_text(5_000) + "}}").encode(), id="nested-5000"),
        pytest.param(b'{"state": {"k": ' + b"[" * 100_000 + b"}}", id="unbalanced-100000"),
        pytest.param(b'{"state": {"k": ' + b"9" * 39 + b"}}", id="int-39-digits"),
        pytest.param(b'{"state": {"k": ' + b"9" * 4_301 + b"}}", id="int-4301-digits"),
        pytest.param(b'{"state": {"k": NaN}}', id="NaN"),
        pytest.param(b'{"state": {"k": Infinity}}', id="Infinity"),
        pytest.param(b'{"state": {"k": -Infinity}}', id="-Infinity"),
        pytest.param(b'{"state": {"k": 1e400}}', id="overflow"),
        pytest.param(b'{"state": {"k": 1e200}}', id="beyond-dynamodb"),
        pytest.param(b'{"state": {"k": 1, "k": 2}}', id="duplicate-key"),
        pytest.param(b'{"state": ', id="truncated"),
    ],
)
def test_create_with_json_the_parser_refuses_is_400_and_stores_nothing(api: Api, raw: bytes) -> None:
    reply = api.request("POST", SESSIONS, raw=b'{"session_id": "h1", ' + raw[1:])
    assert_error(reply, 400, "invalid_input", "body")
    assert_no_session(api, "h1")


@pytest.mark.parametrize(
    "event",
    [
        pytest.param('{"author": "u", "custom_metadata": {"k": ' + deep_text(255) + "}}", id="metadata-nested-255"),
        pytest.param(
            '{"author": "u", "content": {"parts": [{"function_call": {"name": "f", "args": {"k": '
            + deep_text(5_000)
            + "}}}]}}",
            id="args-nested-5000",
        ),
        pytest.param('{"author": "u", "timestamp": NaN}', id="timestamp-NaN"),
        pytest.param('{"author": "u", "timestamp": Infinity}', id="timestamp-Infinity"),
        pytest.param('{"author": "u", "timestamp": 1e200}', id="timestamp-1e200"),
        pytest.param('{"author": "u", "turn_id": ' + "1" * 4_400 + "}", id="turn-id-4400-digits"),
        pytest.param('{"author": "\\ud800"}', id="author-lone-surrogate"),
    ],
)
def test_append_with_json_the_parser_refuses_is_400_and_stores_nothing(api: Api, session: str, event: str) -> None:
    for body in (event, '{"events": [' + ",".join([json.dumps(text_event("ok"))] * 3 + [event]) + "]}"):
        reply = api.request("POST", f"{SESSIONS}/{session}/events", raw=body)
        assert_error(reply, 400, "invalid_input", "body")
    assert_untouched(api, session)


def test_a_body_over_the_lambda_payload_limit_is_413(api: Api, session: str) -> None:
    reply = api.request("POST", f"{SESSIONS}/{session}/events", json_body=text_event("x" * 6_100_000))
    assert_error(reply, 413, "payload_too_large", "body")
    assert_untouched(api, session)


def test_the_body_is_json_whatever_the_content_type_says(api: Api) -> None:
    for content_type in ["application/x-www-form-urlencoded", "text/plain", "multipart/form-data", "nonsense"]:
        sid = f"ct-{len(content_type)}"
        reply = api.request(
            "POST", SESSIONS, raw=json.dumps({"session_id": sid}), headers={"content-type": content_type}
        )
        assert reply.status == 201 and reply.body["id"] == sid, (content_type, reply.body)


# --- JSON the models refuse: 422 (413 for size) naming the field ------------------------------------------------


@pytest.mark.parametrize(
    ("state", "status", "code"),
    [
        ({"k": nested(32)}, 422, "validation_error"),  # 33 levels with the state object itself
        ({"k": "x" * 300_001}, 413, "payload_too_large"),
        ({"k": "x" * 450_000}, 413, "payload_too_large"),  # used to be a 500 above DynamoDB's 400 KB item
        ([1, 2], 422, "validation_error"),
    ],
)
def test_create_with_state_outside_the_bounds_stores_nothing(api: Api, state: Any, status: int, code: str) -> None:
    reply = api.request("POST", SESSIONS, json_body={"session_id": "h1", "state": state})
    assert_error(reply, status, code, "state")
    assert_no_session(api, "h1")


def test_state_at_the_bound_is_stored_and_reads_back(api: Api) -> None:
    state = {"k": "x" * 299_000, "deep": nested(30)}
    assert api.create(session_id="big", state=state).status == 201
    got = api.get("big")
    assert got.status == 200 and got.body["state"] == state


@pytest.mark.parametrize(
    ("event", "field", "status", "code"),
    [
        (
            text_event("x", actions={"state_delta": {"k": nested(32)}}),
            "actions.state_delta",
            422,
            "validation_error",
        ),
        (
            text_event("x", actions={"state_delta": {"k": "x" * 300_001}}),
            "actions.state_delta",
            413,
            "payload_too_large",
        ),
        (text_event("x", custom_metadata={"k": nested(40)}), "custom_metadata", 422, "validation_error"),
        (text_event("x", metadata={"k": nested(40)}), "metadata", 422, "validation_error"),
        (text_event("x", voice={"k": nested(40)}), "voice", 422, "validation_error"),
        (
            {"author": "a", "content": {"parts": [{"function_call": {"name": "f", "args": {"k": nested(40)}}}]}},
            "content.parts[0].function_call.args",
            422,
            "validation_error",
        ),
        (
            {"author": "a", "content": {"parts": [{"function_response": {"response": {"k": nested(40)}}}]}},
            "content.parts[0].function_response.response",
            422,
            "validation_error",
        ),
    ],
)
def test_append_with_json_outside_the_bounds_stores_nothing(
    api: Api, session: str, event: dict[str, Any], field: str, status: int, code: str
) -> None:
    reply = api.append(session, event)
    assert_error(reply, status, code, field)
    batch = api.append(session, {"events": [text_event("a"), text_event("b"), text_event("c"), event]})
    assert_error(batch, status, code, f"events[3].{field}")
    assert_untouched(api, session)


@pytest.mark.parametrize("timestamp", [-1, -1e12, 1e20, 253402300800, True, False, "soon", "Infinity", "nan"])
def test_event_timestamps_no_datetime_holds_are_422(api: Api, session: str, timestamp: Any) -> None:
    assert_error(api.append(session, text_event("x", timestamp=timestamp)), 422, "validation_error", "timestamp")
    batch = api.append(session, {"events": [text_event("a")] * 3 + [text_event("x", timestamp=timestamp)]})
    assert_error(batch, 422, "validation_error", "events[3].timestamp")
    assert_untouched(api, session)


@pytest.mark.parametrize("timestamp", [-1e12, 1e20, True, "soon", "10000-01-01T00:00:00Z"])
def test_memory_timestamps_no_datetime_holds_are_422(api: Api, timestamp: Any) -> None:
    body = {"memories": [{"text": "hostile fact one"}, {"text": "hostile fact two", "timestamp": timestamp}]}
    reply = api.request("POST", MEMORIES, json_body=body)
    assert_error(reply, 422, "validation_error", "memories[1].timestamp")
    assert_no_memories(api)


@pytest.mark.parametrize(
    "raw",
    [
        '{"memories": [{"text": "hostile", "timestamp": NaN}]}',
        '{"memories": [{"text": "hostile", "timestamp": 1e200}]}',
    ],
)
def test_memory_timestamps_the_parser_refuses_are_400(api: Api, raw: str) -> None:
    assert_error(api.request("POST", MEMORIES, raw=raw), 400, "invalid_input", "body")
    assert_no_memories(api)


def test_events_at_the_timestamp_bounds_save_to_memory_and_read_back(api: Api, session: str) -> None:
    events = [text_event("hostile first", timestamp=0), text_event("hostile last", timestamp=253402300799)]
    assert api.append(session, {"events": events}).status == 201
    saved = api.request("POST", MEMORIES, json_body={"session_id": session})
    assert saved.status == 200 and saved.body["saved"] == 2
    found = api.request("GET", f"{MEMORIES}/search", query={"query": "hostile"}).body["memories"]
    assert sorted(m["timestamp"] for m in found) == ["1970-01-01T00:00:00Z", "9999-12-31T23:59:59Z"]


# --- temp: state and two spellings of one field ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "field"),
    [
        (text_event("x", actions={"stateDelta": {"temp:secret": 1}, "state_delta": {"k": 2}}), "actions.state_delta"),
        (text_event("x", actions={"state_delta": {"temp:secret": 1}, "stateDelta": {"k": 2}}), "actions.state_delta"),
        (text_event("x", customMetadata={"a": 1}, custom_metadata={"b": 2}), "custom_metadata"),
        (text_event("x", invocationId="i1", invocation_id="i2"), "invocation_id"),
        ({"role": "user", "content": "x", "turn_id": 1, "turnId": 2}, "turn_id"),
    ],
)
def test_both_spellings_of_a_field_are_422_and_nothing_is_stored(
    api: Api, session: str, event: dict[str, Any], field: str
) -> None:
    assert_error(api.append(session, event), 422, "validation_error", field)
    assert_untouched(api, session)


def test_both_spellings_of_session_id_are_422(api: Api) -> None:
    reply = api.request("POST", SESSIONS, json_body={"session_id": "h1", "sessionId": "h2"})
    assert_error(reply, 422, "validation_error", "session_id")
    assert_no_session(api, "h1")
    assert_no_session(api, "h2")
    saved = api.request("POST", MEMORIES, json_body={"session_id": "s1", "sessionId": "s2"})
    assert_error(saved, 422, "validation_error", "session_id")


def test_temp_state_is_never_stored(api: Api, session: str) -> None:
    reply = api.append(session, text_event("x", actions={"stateDelta": {"temp:secret": 1, "k": 2}}))
    assert reply.status == 201
    assert reply.body["actions"]["state_delta"] == {"k": 2}
    got = api.get(session).body
    assert got["state"] == {"k": 2}
    assert got["events"][0]["actions"]["state_delta"] == {"k": 2}
    assert "temp:secret" not in json.dumps(got)
    created = api.create(session_id="t2", state={"temp:secret": 1, "k": 3})
    assert created.status == 201 and created.body["state"] == {"k": 3}
    assert "temp:secret" not in api.get("t2").raw.decode()


# --- voice agents ----------------------------------------------------------------------------------------------


def test_voice_agent_message_with_integer_turn_id_is_kept_exactly(api: Api, session: str) -> None:
    message = {
        "role": "assistant",
        "content": "Sure, one moment.",
        "turn_id": 2,
        "interrupted": True,
        "interrupt_timestamp": 1700000000.25,
        "original": {"text": "Sure, one moment, let me check", "confidence": 0.93, "words": [{"w": "Sure"}]},
        "metadata": {"latency_ms": 412, "provider": {"name": "x", "region": None}},
    }
    reply = api.append(session, message)
    assert reply.status == 201, reply.body
    (stored,) = api.get(session).body["events"]
    for key in ("turn_id", "interrupted", "interrupt_timestamp", "original", "metadata"):
        assert stored[key] == message[key] and type(stored[key]) is type(message[key]), key
    context = api.request("GET", f"{SESSIONS}/{session}/context", query={"format": "full"})
    assert context.status == 200 and context.body["messages"][-1]["turn_id"] == 2


# --- If-Match --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "status"),
    [
        ('W/"0"', 412),  # a weak tag never matches
        ('"00"', 412),  # "00" is not the ETag "0"
        ('"1", "2"', 412),
        ("0", 412),  # not an entity-tag: malformed
        ('"0', 412),
        ('"0" "1"', 412),
        ("x" * 100_000, 412),
        ('"1", "0"', 201),  # a list matches if any member does
        ('"0"', 201),
        ("*", 201),
    ],
)
def test_if_match_is_rfc_9110_strong_comparison(api: Api, session: str, header: str, status: int) -> None:
    reply = api.append(session, text_event("x"), headers={"if-match": header})
    assert reply.status == status, reply.body
    if status == 412:
        assert_error(reply, 412, "precondition_failed", "If-Match")
        assert_untouched(api, session)
    else:
        assert reply.headers["etag"] == '"1"'
        assert api.get(session).body["version"] == 1


def test_if_match_with_a_lone_surrogate_is_412(api: Api, session: str) -> None:
    status, body = invoke(
        api, "POST", f"{SESSIONS}/{session}/events", headers={"if-match": '"\ud800"'}, body=json.dumps(text_event("x"))
    )
    assert status == 412 and body["error"]["field"] == "If-Match"
    assert_untouched(api, session)


# --- query parameters ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "query", "field"),
    [
        (SESSIONS, {"limit": "1.0"}, "limit"),
        (SESSIONS, {"limit": "true"}, "limit"),
        (SESSIONS, {"limit": "1e1"}, "limit"),
        (SESSIONS, {"limit": "9" * 5_000}, "limit"),
        (SESSIONS, {"next_token": "x" * 100_000}, "next_token"),
        (f"{SESSIONS}/s1", {"num_recent_events": "1.0"}, "num_recent_events"),
        (f"{SESSIONS}/s1", {"num_recent_events": "true"}, "num_recent_events"),
        (f"{SESSIONS}/s1", {"after_timestamp": "1e20"}, "after_timestamp"),
        (f"{SESSIONS}/s1", {"after_timestamp": "nan"}, "after_timestamp"),
        (f"{SESSIONS}/s1/context", {"max_tokens": "2.0"}, "max_tokens"),
        (f"{SESSIONS}/s1/context", {"format": "x" * 100_000}, "format"),
        (f"{MEMORIES}/search", {"query": "x", "top_k": "2.0"}, "top_k"),
        (f"{MEMORIES}/search", {"query": "x", "top_k": "true"}, "top_k"),
        (f"{MEMORIES}/search", {"query": "x" * 100_000}, "query"),
        (f"{MEMORIES}/search", {"query": "   "}, "query"),
    ],
)
def test_bad_query_parameters_are_400(api: Api, session: str, path: str, query: dict[str, str], field: str) -> None:
    assert_error(api.request("GET", path, query=query), 400, "invalid_input", field)


@pytest.mark.parametrize(
    ("path", "name"),
    [
        (f"{MEMORIES}/search", "query"),
        (SESSIONS, "next_token"),
        (f"{SESSIONS}/s1/context", "format"),
        (f"{SESSIONS}/s1", "after_timestamp"),
    ],
)
def test_a_lone_surrogate_in_a_query_parameter_is_400(api: Api, session: str, path: str, name: str) -> None:
    query = {name: "\ud800"} if name != "query" else {"query": "a\ud800b"}
    status, body = invoke(api, "GET", path, queryStringParameters=query)
    assert status == 400, body
    assert body["error"]["code"] == "invalid_input" and body["error"]["field"] == name


def test_booleans_are_never_numbers_in_bodies(api: Api, session: str) -> None:
    reply = api.request("POST", f"{MEMORIES}/search", json_body={"query": "x", "top_k": True})
    assert_error(reply, 422, "validation_error", "top_k")
    reply = api.request("POST", f"{MEMORIES}/search", json_body={"query": "x", "top_k": 2.0})
    assert_error(reply, 422, "validation_error", "top_k")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("DELETE", f"{SESSIONS}/\ud800"),
        ("GET", "/apps/app/users/\ud800/sessions"),
        ("POST", f"{SESSIONS}/a\udfff/events"),
        ("GET", f"{SESSIONS}/a%ED%A0%80"),
        ("GET", f"{SESSIONS}/" + "s" * 100_000),
    ],
)
def test_hostile_paths_answer_4xx_with_a_body_that_encodes(api: Api, method: str, path: str) -> None:
    status, body = invoke(api, method, path)
    assert status in (400, 404), body
    json.dumps(body, ensure_ascii=False).encode("utf-8")  # the error quotes the path, but as valid text


def test_deep_app_and_user_state_cannot_reach_other_sessions(api: Api, session: str) -> None:
    assert api.create(user="bob", session_id="b1").status == 201
    for delta in ({"app:shared": nested(40)}, {"user:mine": nested(40)}):
        reply = api.append(session, text_event("x", actions={"state_delta": delta}))
        assert_error(reply, 422, "validation_error", "actions.state_delta")
        created = api.create(session_id="h2", state=delta)
        assert_error(created, 422, "validation_error", "state")
    assert_untouched(api, session)
    assert_no_session(api, "h2")
    bob = api.get("b1", user="bob")
    assert bob.status == 200 and bob.body["state"] == {}
