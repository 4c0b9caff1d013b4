"""The typed edge: the hardened JSON parser, the bounds of client JSON, the request models and If-Match."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from agent_memory.edge.api import field_path, parse_body
from agent_memory.edge.bounds import QueryInt
from agent_memory.edge.requests import (
    AppendRequest,
    CreateSessionRequest,
    EventBatch,
    MemoryText,
    SaveMemoriesRequest,
    SearchRequest,
)
from agent_memory.errors import InvalidInput, PayloadTooLarge, PreconditionFailed
from agent_memory.limits import MAX_DOCUMENT_DEPTH, MAX_STATE_BYTES, MAX_TIMESTAMP, MAX_VALUE_DEPTH
from agent_memory.models import Event
from agent_memory.policy.preconditions import IfMatch, parse_if_match
from agent_memory.wire.jsonvalues import JsonRejected, check_json_value, parse_json_body

APPEND: TypeAdapter[Any] = TypeAdapter(AppendRequest)


def nested(depth: int, leaf: Any = 1) -> Any:
    """``depth`` levels of arrays around ``leaf`` (depth 1: ``[leaf]``)."""
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def first_error(exc: pytest.ExceptionInfo[ValidationError]) -> tuple[str, str]:
    """(field path as the API reports it, error type) of the first error."""
    error = exc.value.errors()[0]
    return field_path(error["loc"]) or "body", error["type"]


def text_event(**extra: Any) -> dict[str, Any]:
    return {"author": "user", "content": {"role": "user", "parts": [{"text": "hi"}]}, **extra}


# --- the parser ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{}", {}),
        ('{"a": [1, 2.5, "x", null, true]}', {"a": [1, 2.5, "x", None, True]}),
        ('"[[[[{{{{"', "[[[[{{{{"),  # brackets inside strings are not nesting
        ('"\\ud83d\\ude00"', "\U0001f600"),  # a valid surrogate pair is one character
        ('"\\\\ud800"', "\\ud800"),  # an escaped backslash, then plain text
        ("1" * 38, int("1" * 38)),
        ("-" + "9" * 38, -int("9" * 38)),
        ("9.99e125", 9.99e125),
        ("0.0", 0.0),
    ],
)
def test_parser_accepts_json_dynamodb_holds(text: str, expected: Any) -> None:
    assert parse_json_body(text) == expected


def test_parser_depth_bound_is_exact() -> None:
    assert parse_json_body(json.dumps(nested(MAX_DOCUMENT_DEPTH))) == nested(MAX_DOCUMENT_DEPTH)
    with pytest.raises(JsonRejected, match="deeper than 64"):
        parse_json_body(json.dumps(nested(MAX_DOCUMENT_DEPTH + 1)))


@pytest.mark.parametrize("depth", [255, 5_000, 100_000])
def test_parser_refuses_deep_nesting_without_recursion(depth: int) -> None:
    for text in ["[" * depth + "]" * depth, '{"a":' * depth + "1" + "}" * depth, "[" * depth]:
        with pytest.raises(JsonRejected, match=r"deeper|balance"):
            parse_json_body(text)


@pytest.mark.parametrize(
    "text",
    [
        "NaN",
        "[Infinity]",
        '{"a": -Infinity}',
        "1" * 39,  # more digits than a DynamoDB number holds
        "1" * 4_301,  # Python's own int() refuses this with a ValueError
        "[" + "7" * 100_000 + "]",
        "1e400",  # overflows to infinity
        "1e200",  # finite, but beyond DynamoDB's 9.99e125
        "-1e-200",  # below DynamoDB's smallest magnitude
        '"\\ud800"',  # a lone surrogate
        '{"\\udfff": 1}',  # in a key too
        '["ok", "\\ud800x"]',
        '{"a": 1, "a": 2}',  # a key twice
        "[1,",
        "{'a': 1}",
        "\ud800",  # a body handed over as text holding a raw surrogate
    ],
)
def test_parser_refuses(text: str) -> None:
    with pytest.raises(JsonRejected):
        parse_json_body(text)


@pytest.mark.parametrize(
    "text",
    [
        '"' + '\\"' * 1_000_000,  # an unterminated string of escaped quotes: a retrying regex is quadratic here
        '"' + '\\"' * 1_000_000 + "\\",
        "[" + ",".join(['"' + '\\"' * 50] * 20_000) + ", " + '"\\"' * 100_000,
    ],
)
def test_parser_scans_unterminated_strings_in_linear_time(text: str) -> None:
    with pytest.raises(JsonRejected):  # returns at once; a quadratic scan would take hours on these
        parse_json_body(text)


def test_resolver_deserializer_answers_400_or_413_naming_body() -> None:
    assert parse_body("  ") is None
    with pytest.raises(InvalidInput) as bad:
        parse_body("NaN")
    assert bad.value.status == 400 and bad.value.field == "body"
    with pytest.raises(PayloadTooLarge) as large:
        parse_body('"' + "x" * 6_000_001 + '"')
    assert large.value.status == 413 and large.value.field == "body"


def test_check_json_value_bounds_python_values() -> None:
    assert check_json_value({"a": [1, "é"]}) == len('{"a":[1,"é"]}'.encode())
    assert check_json_value(nested(MAX_VALUE_DEPTH - 1, {}))  # the object at the bottom is level 32
    for bad in [
        nested(MAX_VALUE_DEPTH, {}),
        nested(50_000),  # deep Python values are refused before anything recursive sees them
        {"x": math.nan},
        {"x": math.inf},
        {"x": 10**38},
        {"x": "\ud800"},
        {"\ud800": 1},
        {"x": {1, 2}},
        {1: "x"},
    ]:
        with pytest.raises(JsonRejected):
            check_json_value(bad)


# --- events ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ts", [0, 0.0, 1_700_000_000.5, MAX_TIMESTAMP])
def test_event_timestamps_inside_what_dynamodb_and_datetime_hold(ts: Any) -> None:
    assert Event.model_validate(text_event(timestamp=ts)).timestamp == float(ts)


@pytest.mark.parametrize(
    "ts",
    [
        -1,
        -1e12,
        1e20,
        1e200,
        MAX_TIMESTAMP + 1,
        math.nan,
        math.inf,
        -math.inf,
        True,
        False,
        "soon",
        "nan",
        "1700000000",
    ],
)
def test_event_timestamps_outside_are_refused(ts: Any) -> None:
    with pytest.raises(ValidationError) as info:
        Event.model_validate(text_event(timestamp=ts))
    assert first_error(info)[0] == "timestamp"


def test_compaction_timestamps_are_bounded_too() -> None:
    compaction = {"start_timestamp": 1, "end_timestamp": 1e20, "compacted_content": {"parts": []}}
    with pytest.raises(ValidationError) as info:
        Event.model_validate(text_event(actions={"compaction": compaction}))
    assert first_error(info)[0] == "actions.compaction.end_timestamp"


def test_voice_agent_message_keeps_integer_turn_id_and_extra_fields_exactly() -> None:
    message = {
        "role": "assistant",
        "content": "Sure, one moment.",
        "turn_id": 2,
        "interrupted": True,
        "interrupt_timestamp": 1_700_000_000.25,
        "original": {"text": "Sure, one moment, let me check", "words": [{"w": "Sure", "t": 0.1}]},
        "metadata": {"latency_ms": 412},
    }
    event = Event.model_validate(message)
    dumped = event.dump()
    assert dumped["turn_id"] == 2 and type(dumped["turn_id"]) is int
    assert dumped["interrupted"] is True
    assert dumped["interrupt_timestamp"] == 1_700_000_000.25
    assert dumped["original"] == message["original"]
    assert dumped["metadata"] == {"latency_ms": 412}
    assert Event.model_validate({**message, "turn_id": "t-2"}).dump()["turn_id"] == "t-2"


@pytest.mark.parametrize("turn_id", [True, 2.5, [2], {"n": 2}])
def test_turn_id_is_a_string_or_an_integer(turn_id: Any) -> None:
    with pytest.raises(ValidationError) as info:
        Event.model_validate({"role": "user", "content": "x", "turn_id": turn_id})
    assert first_error(info)[0].startswith("turn_id")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (text_event(actions={"stateDelta": {"temp:x": 1}, "state_delta": {"k": 1}}), "actions.state_delta"),
        (text_event(invocationId="a", invocation_id="b"), "invocation_id"),
        (text_event(customMetadata={}, custom_metadata={}), "custom_metadata"),
        ({"role": "user", "content": "x", "turn_id": 1, "turnId": 2}, "turn_id"),
        (
            text_event(content={"parts": [{"text": "a"}, {"functionCall": {}, "function_call": {}}]}),
            "content.parts[1].function_call",
        ),
        (
            text_event(
                content={"parts": [{"function_call": {"name": "f", "args": {}}}]},
                actions={"skipSummarization": True, "skip_summarization": False},
            ),
            "actions.skip_summarization",
        ),
        (
            {"events": [text_event(), text_event(), text_event(), text_event(turnComplete=True, turn_complete=True)]},
            "events[3].turn_complete",
        ),
    ],
)
def test_a_field_sent_under_both_spellings_is_refused_and_named(body: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        APPEND.validate_python(body)
    assert first_error(info) == (field, "duplicate_field")


@pytest.mark.parametrize(
    ("where", "field"),
    [
        ({"actions": {"state_delta": {"k": "BIG"}}}, "actions.state_delta"),
        ({"custom_metadata": {"k": "BIG"}}, "custom_metadata"),
        (
            {"content": {"parts": [{"function_call": {"name": "f", "args": {"k": "BIG"}}}]}},
            "content.parts[0].function_call.args",
        ),
    ],
)
def test_bounded_fields_too_large_are_payload_too_large(where: dict[str, Any], field: str) -> None:
    big = json.loads(json.dumps(where).replace('"BIG"', json.dumps("x" * 2_100_000)))
    with pytest.raises(ValidationError) as info:
        Event.model_validate(text_event(**big))
    assert first_error(info) == (field, "payload_too_large")


@pytest.mark.parametrize(
    ("event", "field"),
    [
        (text_event(actions={"state_delta": {"k": nested(MAX_VALUE_DEPTH)}}), "actions.state_delta"),
        (text_event(custom_metadata={"k": nested(MAX_VALUE_DEPTH)}), "custom_metadata"),
        (text_event(metadata={"k": nested(MAX_VALUE_DEPTH)}), "metadata"),
        (
            text_event(content={"parts": [{"function_response": {"response": {"k": nested(40)}}}]}),
            "content.parts[0].function_response.response",
        ),
        (text_event(anything={"k": nested(MAX_VALUE_DEPTH)}), "anything"),  # undeclared fields are bounded too
        ({"role": "user", "content": "x", "original": nested(40)}, "original"),
    ],
)
def test_json_nested_deeper_than_32_is_refused_where_it_is(event: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        Event.model_validate(event)
    assert first_error(info) == (field, "json_value")


def test_tool_call_arguments_text_is_parsed_by_the_hardened_parser() -> None:
    def call(arguments: str) -> dict[str, Any]:
        message = {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": arguments}}]}
        args: dict[str, Any] = Event.model_validate(message).dump()["content"]["parts"][0]["function_call"]["args"]
        return args

    assert call('{"city": "Porto"}') == {"city": "Porto"}
    deep = "[" * 5_000 + "]" * 5_000
    assert call(deep) == {"_raw": deep}  # kept as text, never a RecursionError
    assert call('{"x": NaN}') == {"_raw": '{"x": NaN}'}


def test_client_seq_is_ignored_whatever_its_type() -> None:
    assert Event.model_validate(text_event(seq="not a number")).seq is None


# --- bodies ----------------------------------------------------------------------------------------------------


def test_append_body_is_one_event_or_a_batch() -> None:
    assert isinstance(APPEND.validate_python(text_event()), Event)
    assert isinstance(APPEND.validate_python({"role": "user", "content": "x"}), Event)
    batch = APPEND.validate_python({"events": [text_event(), {"role": "user", "content": "x"}]})
    assert isinstance(batch, EventBatch) and len(batch.events) == 2
    with pytest.raises(ValidationError) as info:
        APPEND.validate_python({"events": [text_event(), text_event(timestamp=True)]})
    assert first_error(info)[0] == "events[1].timestamp"


def test_create_body() -> None:
    assert CreateSessionRequest.model_validate({"sessionId": "s1"}).session_id == "s1"
    for body, field, kind in [
        ({"session_id": "s1", "sessionId": "s2"}, "session_id", "duplicate_field"),
        ({"state": {"k": "x" * MAX_STATE_BYTES}}, "state", "payload_too_large"),
        ({"state": {"k": nested(MAX_VALUE_DEPTH)}}, "state", "json_value"),
        ({"state": {"k": math.nan}}, "state", "json_value"),
        ({"state": []}, "state", "dict_type"),
        ({"other": 1}, "other", "extra_forbidden"),
    ]:
        with pytest.raises(ValidationError) as info:
            CreateSessionRequest.model_validate(body)
        assert first_error(info) == (field, kind), body


def test_memory_texts_take_iso_or_seconds_inside_the_bounds() -> None:
    assert MemoryText.model_validate({"text": "x", "timestamp": "1970-01-01T00:00:10Z"}).timestamp == 10.0
    assert MemoryText.model_validate({"text": "x", "timestamp": "1970-01-01T00:00:10"}).timestamp == 10.0  # UTC
    assert MemoryText.model_validate({"text": "x", "timestamp": 5}).timestamp == 5.0
    for ts in [-1e12, 1e20, 1e200, math.nan, math.inf, True, "soon", "10000-01-01T00:00:00Z"]:
        with pytest.raises(ValidationError) as info:
            MemoryText.model_validate({"text": "x", "timestamp": ts})
        assert first_error(info)[0] == "timestamp", ts


def test_save_body_shapes() -> None:
    adapter: TypeAdapter[Any] = TypeAdapter(SaveMemoriesRequest)
    assert adapter.validate_python({"sessionId": "s1", "policy": "all"}).session_id == "s1"
    with pytest.raises(ValidationError) as info:
        adapter.validate_python({"memories": [{"text": "x"}, {"text": "y", "timestamp": 1e20}]})
    assert first_error(info)[0] == "memories[1].timestamp"
    with pytest.raises(ValidationError) as info:
        adapter.validate_python({"session_id": "s1", "policy": {"k": nested(MAX_VALUE_DEPTH)}})
    assert first_error(info)[0] == "policy"


@pytest.mark.parametrize("top_k", [True, False, 2.0, "2", 0, 101, None])
def test_search_body_top_k_is_a_strict_integer(top_k: Any) -> None:
    with pytest.raises(ValidationError) as info:
        SearchRequest.model_validate({"query": "x", "top_k": top_k})
    assert first_error(info)[0] == "top_k"


# --- parameters ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "value"), [("0", 0), ("5", 5), ("100", 100), ("000007", 7)])
def test_query_integers_are_plain_digits(text: str, value: int) -> None:
    assert TypeAdapter(QueryInt).validate_python(text) == value


@pytest.mark.parametrize("text", ["1.0", "2.0", "1e3", "true", "-1", "+1", " 1", "1 ", "", "١", "9" * 10, "9" * 5000])
def test_query_integers_refuse_anything_else(text: str) -> None:
    with pytest.raises(ValidationError):
        TypeAdapter(QueryInt).validate_python(text)


@pytest.mark.parametrize(
    ("header", "current", "matches"),
    [
        ("*", 7, True),
        (' "7" ', 7, True),
        ('"0"', 0, True),
        ('"5"', 7, False),
        ('W/"7"', 7, False),  # weak tags never match under strong comparison
        ('"07"', 7, False),  # "07" is not the ETag "7"
        ('"3", "7"', 7, True),  # a list matches if any member does
        ('"3",W/"7"', 7, False),
        ('"a,b", "7"', 7, True),  # a comma inside a tag is part of the tag
        ('"3", , "7",', 7, True),  # empty list elements are allowed
        ('"x"', 7, False),
        ('""', 7, False),
        ('"-7"', 7, False),
        ('"99999999999999999999999"', 7, False),
    ],
)
def test_if_match_strong_comparison(header: str, current: int, matches: bool) -> None:
    condition = parse_if_match(header)
    assert isinstance(condition, IfMatch)
    assert condition.matches(current) is matches


@pytest.mark.parametrize(
    "header", ["", " ", "7", "W/7", '"7', '"7" "8"', '"7";', ",", "**", '"\ud800"', '"\u00e9\u0100"', "\ud800"]
)
def test_malformed_if_match_is_412(header: str) -> None:
    with pytest.raises(PreconditionFailed) as info:
        parse_if_match(header)
    assert info.value.status == 412 and info.value.field == "If-Match"


def test_if_match_absent_is_no_condition() -> None:
    assert parse_if_match(None) is None


def test_field_path_leaves_union_tags_out() -> None:
    assert field_path(("<batch>", "events", 3, "timestamp")) == "events[3].timestamp"
    assert field_path(("<event>",)) == ""
    assert field_path(("state",)) == "state"


# --- randomised: whatever the bytes, the edge answers a client error or a value storage can hold ---------------

SEED_BODIES = [
    b'{"author": "u", "timestamp": 1.5, "content": {"parts": [{"text": "hi \\ud83d\\ude00"}]}}',
    b'{"events": [{"role": "assistant", "content": "x", "turn_id": 2, "metadata": {"a": [1, {"b": null}]}}]}',
    b'{"author": "a", "actions": {"stateDelta": {"temp:x": 1, "k": [true, false, -0.5e-3]}}}',
    b'{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{\\"q\\": [1]}"}}]}',
]
TOKENS = [
    b"[",
    b"]",
    b"{",
    b"}",
    b'"',
    b"\\",
    b"\\ud800",
    b"NaN",
    b"1e999",
    b"9" * 45,
    b",",
    b":",
    b"\xff",
    b"\xed\xa0\x80",
]


def _mutate(rng: Any, body: bytes) -> bytes:
    data = bytearray(body)
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(data) + 1)
        action = rng.random()
        if action < 0.4:
            data[at:at] = rng.choice(TOKENS) * rng.choice([1, 1, 2, 70, 3000])
        elif action < 0.7 and data:
            del data[at : at + rng.randint(1, 8)]
        else:
            data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 3)))
    return bytes(data)


def test_random_bodies_never_escape_as_anything_but_client_errors() -> None:
    import base64
    import random

    from agent_memory.edge.api import RequestEvent
    from agent_memory.errors import AgentMemoryError

    rng = random.Random(7)
    accepted = refused = 0
    for _ in range(3_000):
        raw = _mutate(rng, rng.choice(SEED_BODIES))
        event = RequestEvent({"body": base64.b64encode(raw).decode(), "isBase64Encoded": True}, parse_body)
        try:
            value = event.json_body
        except AgentMemoryError as exc:
            assert exc.status in (400, 413)
            refused += 1
            continue
        check_json_value(value, max_depth=MAX_DOCUMENT_DEPTH)  # storable: depth, numbers, UTF-8
        try:
            request = APPEND.validate_python(value)
        except ValidationError:
            refused += 1
            continue
        accepted += 1
        for item in request.events if isinstance(request, EventBatch) else [request]:
            check_json_value(item.dump(), max_depth=MAX_DOCUMENT_DEPTH)
            assert item.timestamp is None or 0 <= item.timestamp <= MAX_TIMESTAMP
    assert accepted > 100 and refused > 1_000  # the mutations reach both sides
