"""The append's body read without pydantic (``plainevents.py``) stores exactly what the pydantic models store.

Generated bodies, mostly ADK events as ADK's ``Runner`` sends them (``event.model_dump(mode="json",
exclude_none=True)``: text, thought and tool-call parts, ``invocation_id``, ``actions`` with its four empty maps,
a model turn's ``usage_metadata`` and ``finish_reason``…), at the edges of what ``plainevents`` takes: camelCase
aliases, both spellings, nulls, values of the wrong JSON type, bounds passed, undeclared fields with camelCase keys
inside, chat messages, batches. For each: when ``plainevents`` takes it, pydantic takes it too and the stored JSON
is the same bytes, the filled-in id and time and the state delta the same; when pydantic refuses it, so does
``plainevents`` (it hands it on). Through the HTTP edge, every answer (the 4xx of what neither takes included) is
the one Powertools' pydantic validation gives (``parity.answered_alike``).
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError
from pydantic.alias_generators import to_camel

from agent_memory import models
from agent_memory.edge import api, params
from agent_memory.edge.requests import AppendRequest, EventBatch
from agent_memory.errors import AgentMemoryError
from agent_memory.policy.state import strip_temp
from agent_memory.wire import jsonio, plainevents
from tests.support.strategies import EVENT_IDS, Request, encode
from tests.unit.parity import answered_alike

APPEND = TypeAdapter(AppendRequest)
COUNTS = {"taken": 0, "left": 0, "refused": 0, "batches": 0, "extras": 0, "tools": 0, "http_taken": 0}


def _mostly(common: st.SearchStrategy[Any], *edges: st.SearchStrategy[Any], one_in: int = 8) -> st.SearchStrategy[Any]:
    """``common``, else (one draw in ``one_in``) one of ``edges``."""
    return st.integers(1, one_in).flatmap(lambda i: st.one_of(*edges) if i == 1 else common)


ABSENT = object()


def _fields(
    required: dict[str, Any], optional: dict[str, Any], rare: dict[str, Any] | None = None
) -> st.SearchStrategy[dict[str, Any]]:
    """An object with the ``required`` fields, each ``optional`` one half the time and each ``rare`` one (a second
    spelling, say) one time in ten."""
    sometimes = {k: _mostly(st.just(ABSENT), v, one_in=10) for k, v in (rare or {}).items()}
    return st.fixed_dictionaries({**required, **sometimes}, optional=optional).map(
        lambda d: {k: v for k, v in d.items() if v is not ABSENT}
    )


_KEYS = st.sampled_from(("k", "aB", "a_b", "camelCaseKey", "URL", "x1Y", "temp:t", "app:a", "user:u", "é", ""))
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(-1e9, 1e9),
    st.text(max_size=8),
    st.sampled_from((10**38, 10**39, 1e-131, 1e126, float("nan"))),  # DynamoDB's numbers and past them
)
JSON = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_KEYS, inner, max_size=3)),
    max_leaves=6,
)
OBJECTS = st.dictionaries(_KEYS, JSON, max_size=4)
TEXT = _mostly(st.text(max_size=20), st.sampled_from(("", "é" * 3, "a\nb")), st.integers(), st.none(), st.booleans())
FLAG = _mostly(st.booleans(), st.none(), st.sampled_from((0, 1, "true", "yes", 1.0)))
OPTIONAL_TEXT = _mostly(st.text(max_size=12), st.none(), st.integers(), st.lists(st.text(max_size=2), max_size=1))
IDS = _mostly(
    st.one_of(st.uuids().map(str), st.sampled_from(EVENT_IDS)),
    st.sampled_from(("", "-x", "a" * 128, "a" * 129, "e1\n", "é", "a b")),
    st.none(),
    st.integers(0, 9),
)
TIMES = _mostly(
    st.floats(1.6e9, 1.9e9),
    st.sampled_from((0, 0.0, -0.0, 1, 253_402_300_799, 253_402_300_799.0, 253_402_300_800, -1, 1e300, 10**400)),
    st.sampled_from((True, False, "1700000000", "2024-01-01T00:00:00Z", float("inf"), float("nan"), [1.0])),
    st.none(),
    st.integers(0, 2 * 10**9),
)


def _call() -> st.SearchStrategy[dict[str, Any]]:
    args = _mostly(OBJECTS, st.none(), st.lists(st.integers(), max_size=2), st.just({"big": "x" * 2_000_001}))
    return _fields({}, {"id": OPTIONAL_TEXT, "name": OPTIONAL_TEXT, "args": args, "willContinue": FLAG})


def _response() -> st.SearchStrategy[dict[str, Any]]:
    response = _mostly(OBJECTS, st.none(), st.text(max_size=3))
    return _fields({}, {"id": OPTIONAL_TEXT, "name": OPTIONAL_TEXT, "response": response, "parts": st.just([])})


def _part() -> st.SearchStrategy[Any]:
    text = _fields({"text": TEXT}, {"thought": FLAG, "thought_signature": OPTIONAL_TEXT, "partMetadata": OBJECTS})
    call = st.one_of(
        _fields({"function_call": _call()}, {}),
        _fields({"functionCall": _call()}, {}, {"function_call": _call()}),  # both spellings now and then
    )
    response = _fields({"function_response": _response()}, {}, {"functionResponse": st.none()})
    odd = st.one_of(
        _fields({"inline_data": st.just({"mime_type": "image/png", "data": "aGk="})}, {}),
        _fields({"inlineData": st.none(), "text": st.just("t")}, {"videoMetadata": OBJECTS}),
        _fields({"code_execution_result": st.none(), "executable_code": st.none()}, {}),
        JSON,
    )
    return _mostly(st.one_of(text, call, response), odd)


def _content() -> st.SearchStrategy[Any]:
    parts = _mostly(st.lists(_part(), max_size=3), st.none(), st.just({}), st.just([None]))
    content = _fields({"parts": parts}, {"role": _mostly(st.sampled_from(("user", "model")), st.none(), st.just(1))})
    return _mostly(content, st.none(), st.just([]), st.text(max_size=3))


def _actions() -> st.SearchStrategy[Any]:
    empty = st.just(
        {"state_delta": {}, "artifact_delta": {}, "requested_auth_configs": {}, "requested_tool_confirmations": {}}
    )
    delta = _mostly(OBJECTS, st.none(), st.just([]), st.just({"big": "x" * 300_001}))
    fields = _fields(
        {},
        {
            "state_delta": delta,
            "artifact_delta": _mostly(st.dictionaries(_KEYS, st.integers(0, 3), max_size=2), st.none()),
            "transfer_to_agent": OPTIONAL_TEXT,
            "escalate": FLAG,
            "skip_summarization": FLAG,
            "requested_auth_configs": _mostly(st.just({}), OBJECTS),
            "compaction": _mostly(
                st.none(), st.just({"start_timestamp": 1, "end_timestamp": 2, "compacted_content": {}})
            ),
            "endOfAgent": FLAG,
            "agent_state": _mostly(st.none(), OBJECTS),
        },
        {"stateDelta": delta},
    )
    return _mostly(st.one_of(empty, fields), st.none(), st.just([]))


def runner_events() -> st.SearchStrategy[Any]:
    """An ADK event as the Runner dumps it, and its near misses."""
    usage = st.fixed_dictionaries(
        {"prompt_token_count": st.integers(0, 9999), "candidates_token_count": st.integers(0, 999)},
        optional={
            "total_token_count": st.integers(0, 9999),
            "promptTokensDetails": st.just([{"modality": "TEXT", "tokenCount": 3}]),
            "cached_content_token_count": st.none(),
        },
    )
    event = _fields(
        {"author": _mostly(st.sampled_from(("user", "root_agent", "model")), st.none(), st.integers())},
        {
            "content": _content(),
            "invocation_id": _mostly(st.uuids().map(lambda u: f"e-{u}"), st.none(), st.integers()),
            "actions": _actions(),
            "id": IDS,
            "timestamp": TIMES,
            "branch": OPTIONAL_TEXT,
            "partial": FLAG,
            "turn_complete": FLAG,
            "interrupted": FLAG,
            "error_code": OPTIONAL_TEXT,
            "errorMessage": OPTIONAL_TEXT,
            "long_running_tool_ids": _mostly(st.lists(st.text(max_size=3), max_size=2), st.none(), st.just([1])),
            "custom_metadata": _mostly(OBJECTS, st.none(), st.just({"big": "x" * 100_001})),
            "metadata": _mostly(OBJECTS, st.none()),
            "turn_id": _mostly(st.text(max_size=3), st.integers(-(2**64), 2**64), st.booleans(), st.floats(0, 9)),
            "seq": st.integers(0, 9),
            "usage_metadata": _mostly(usage, st.none()),
            "finish_reason": st.sampled_from(("STOP", "MAX_TOKENS")),
            "model_version": st.text(max_size=6),
            "grounding_metadata": st.none(),
            "avg_logprobs": st.floats(-5, 0),
            "output": OBJECTS,
            "fooBar": JSON,
        },
        {
            "invocationId": st.text(max_size=4),
            "usageMetadata": usage,
            "role": st.sampled_from(("user", "model")),
            "invocationID": st.text(max_size=3),  # becomes a declared name: pydantic's to read
            "foo_bar": JSON,
        },
    )
    # a model turn calling a tool, or the tool's answer, as the Runner sends them
    calls = st.lists(
        st.one_of(_fields({"function_call": _call()}, {}), _fields({"function_response": _response()}, {})),
        min_size=1,
        max_size=2,
    )
    tool_turn = _fields(
        {
            "author": st.just("root_agent"),
            "content": st.fixed_dictionaries({"parts": calls, "role": st.sampled_from(("model", "user"))}),
            "invocation_id": st.just("e-1"),
            "actions": st.just(
                {
                    "state_delta": {},
                    "artifact_delta": {},
                    "requested_auth_configs": {},
                    "requested_tool_confirmations": {},
                }
            ),
        },
        {"id": IDS, "timestamp": TIMES, "long_running_tool_ids": st.just([])},
    )
    chat = st.fixed_dictionaries({"role": st.sampled_from(("user", "assistant")), "content": st.text(max_size=8)})
    return _mostly(st.one_of(event, event, tool_turn), chat, JSON)


def append_bodies() -> st.SearchStrategy[Any]:
    one = runner_events()
    batch = st.fixed_dictionaries(
        {
            "events": _mostly(
                st.lists(one, min_size=1, max_size=3),
                st.just([]),
                st.lists(st.just({"author": "a"}), min_size=100, max_size=101),
            )
        },
        optional={"x": st.just(1)},
    )
    return _mostly(one, batch, one_in=5)


def _stored(event: Any) -> tuple[str, str, float, dict[str, Any]]:
    delta = strip_temp(event.actions.state_delta)
    event_id, timestamp = event.id or "filled", event.timestamp if event.timestamp is not None else 7.0
    return jsonio.dumps(event.stored(event_id, timestamp, delta)), event_id, timestamp, dict(event.actions.state_delta)


def _events(body: Any) -> tuple[bool, list[Any]]:
    if isinstance(body, (EventBatch, plainevents.PlainBatch)):
        return True, list(body.events)
    return False, [body]


@settings(max_examples=1500, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(append_bodies())
def test_a_body_plainevents_takes_is_stored_as_the_pydantic_models_store_it(body: Any) -> None:
    plain = plainevents.append_body(body)
    try:
        model = APPEND.validate_python(body)
    except ValidationError:
        assert plain is plainevents.UNSURE, body  # refused by pydantic: never taken here
        COUNTS["refused"] += 1
        return
    if plain is plainevents.UNSURE:
        COUNTS["left"] += 1
        return
    COUNTS["taken"] += 1
    batch, events = _events(plain)
    expected_batch, expected = _events(model)
    assert batch == expected_batch and len(events) == len(expected)
    COUNTS["batches"] += batch
    for got, want in zip(events, expected, strict=True):
        assert _stored(got) == _stored(want), body
        assert json.dumps(got.dump()) == json.dumps(want.dump()), body
        assert (got.id, got.timestamp) == (want.id, want.timestamp)
        assert type(got.timestamp) is type(want.timestamp)
        COUNTS["extras"] += bool(set(got.dump()) - {f for f, *_ in plainevents.EVENT.fields})
        COUNTS["tools"] += "function_call" in json.dumps(got.dump())


def test_the_parity_above_is_not_vacuous() -> None:
    """Many bodies were taken (and compared), batches, undeclared fields and tool calls among them; many were left
    to pydantic or refused by it."""
    assert COUNTS["taken"] > 300 and COUNTS["left"] > 50 and COUNTS["refused"] > 200, COUNTS
    assert COUNTS["batches"] > 20 and COUNTS["extras"] > 50 and COUNTS["tools"] > 50, COUNTS


APPEND_ROUTE = "POST /apps/{app_name}/users/{user_id}/sessions/{session_id}/events"


@settings(max_examples=300, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(append_bodies(), st.sampled_from((None, '"1"', "*")))
def test_the_append_body_is_answered_as_powertools_pydantic_validation_answers_it(body: Any, if_match: Any) -> None:
    headers = (("content-type", "application/json"),) + ((("if-match", if_match),) if if_match else ())
    path = "/apps/fz/users/u1/sessions/s1/events"
    data = encode(body)
    answered_alike(Request(APPEND_ROUTE, "POST", path, "", headers, data))
    try:
        parsed = api.parse_body(data.decode())
    except AgentMemoryError:
        return
    COUNTS["http_taken"] += plainevents.append_body(parsed) is not plainevents.UNSURE


def test_the_http_parity_is_not_vacuous() -> None:
    assert COUNTS["http_taken"] > 60, COUNTS


def test_a_runner_event_is_read_without_pydantic() -> None:
    """The event ADK's Runner sends for a user turn and for a model turn with a tool call: taken here, and stored as
    the model stores it."""
    user = {
        "content": {"parts": [{"text": "hello"}], "role": "user"},
        "invocation_id": "e-1",
        "author": "user",
        "actions": {
            "state_delta": {},
            "artifact_delta": {},
            "requested_auth_configs": {},
            "requested_tool_confirmations": {},
        },
        "id": "a1b2",
        "timestamp": 1767225600.25,
    }
    model = {
        **user,
        "author": "root_agent",
        "content": {
            "parts": [{"function_call": {"id": "c1", "args": {"city": "Lisbon"}, "name": "weather"}}],
            "role": "model",
        },
        "usage_metadata": {"candidates_token_count": 5, "prompt_token_count": 20, "total_token_count": 25},
        "finish_reason": "STOP",
        "long_running_tool_ids": [],
    }
    for body in (user, model, {"events": [user, model]}):
        plain = plainevents.append_body(body)
        assert plain is not plainevents.UNSURE
        for got, want in zip(_events(plain)[1], _events(APPEND.validate_python(body))[1], strict=True):
            assert _stored(got) == _stored(want)
    handler_plan = params.BODIES["Annotated[AppendRequest, Body()]"]
    assert handler_plan is plainevents.append_body


def test_the_models_fields_are_the_ones_read_here() -> None:
    """Each model read here declares the fields of its pydantic model, in order, with pydantic's camelCase alias."""
    pairs = {
        "FunctionCall": models.FunctionCall,
        "FunctionResponse": models.FunctionResponse,
        "Part": models.Part,
        "Content": models.Content,
        "EventActions": models.EventActions,
        "Event": models.Event,
    }
    for model in plainevents.MODELS:
        declared = pairs[model.name].model_fields
        assert [f for f, *_ in model.fields] == list(declared), model.name
        assert [a for _, a, *_ in model.fields] == [to_camel(f) for f in declared], model.name
        assert all(info.alias == to_camel(f) or info.alias is None for f, info in declared.items())
