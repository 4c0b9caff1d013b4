"""Event models (ADK JSON in camelCase or snake_case) and chat-message conversion."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from pydantic import ValidationError

from agent_memory.models import Event, Session, chat_message_to_event, is_chat_message

CAMEL: dict[str, Any] = {
    "id": "e1",
    "invocationId": "inv-1",
    "author": "agent",
    "timestamp": 1001.5,
    "content": {
        "role": "model",
        "parts": [
            {"text": "hello"},
            {"functionCall": {"id": "c1", "name": "lookup", "args": {"q": "x"}}},
            {"functionResponse": {"id": "c1", "name": "lookup", "response": {"result": 42}}},
            {"inlineData": {"mimeType": "image/png", "data": "aGk=", "displayName": "pic"}},
        ],
    },
    "actions": {"stateDelta": {"k": 1, "temp:t": 2}, "artifactDelta": {"f": 1}, "skipSummarization": True},
    "longRunningToolIds": ["c1", "c0"],
    "turnComplete": True,
    "customMetadata": {"trace": "abc"},
}

SNAKE: dict[str, Any] = {
    "id": "e1",
    "invocation_id": "inv-1",
    "author": "agent",
    "timestamp": 1001.5,
    "content": {
        "role": "model",
        "parts": [
            {"text": "hello"},
            {"function_call": {"id": "c1", "name": "lookup", "args": {"q": "x"}}},
            {"function_response": {"id": "c1", "name": "lookup", "response": {"result": 42}}},
            {"inline_data": {"mime_type": "image/png", "data": "aGk=", "display_name": "pic"}},
        ],
    },
    "actions": {"state_delta": {"k": 1, "temp:t": 2}, "artifact_delta": {"f": 1}, "skip_summarization": True},
    "long_running_tool_ids": ["c1", "c0"],
    "turn_complete": True,
    "custom_metadata": {"trace": "abc"},
}


# --- Event ---------------------------------------------------------------------------------------------------


def test_camel_and_snake_case_parse_to_the_same_event() -> None:
    camel = Event.model_validate(CAMEL)
    snake = Event.model_validate(SNAKE)
    assert camel == snake
    assert camel.invocation_id == "inv-1"
    assert camel.actions.state_delta == {"k": 1, "temp:t": 2}
    assert camel.actions.skip_summarization is True
    assert camel.long_running_tool_ids == ["c1", "c0"]
    assert camel.custom_metadata == {"trace": "abc"}
    assert camel.turn_complete is True
    assert camel.content is not None
    parts = camel.content.parts
    assert parts[1].function_call is not None and parts[1].function_call.args == {"q": "x"}
    assert parts[2].function_response is not None and parts[2].function_response.response == {"result": 42}
    assert parts[3].inline_data is not None and parts[3].inline_data.mime_type == "image/png"


def test_dump_is_snake_case() -> None:
    dumped = Event.model_validate(CAMEL).dump()
    assert dumped["invocation_id"] == "inv-1"
    assert dumped["long_running_tool_ids"] == ["c1", "c0"]
    assert dumped["custom_metadata"] == {"trace": "abc"}
    assert dumped["turn_complete"] is True
    assert dumped["actions"]["state_delta"] == {"k": 1, "temp:t": 2}
    assert dumped["actions"]["artifact_delta"] == {"f": 1}
    assert dumped["actions"]["skip_summarization"] is True
    parts = dumped["content"]["parts"]
    assert parts[1] == {"function_call": {"id": "c1", "name": "lookup", "args": {"q": "x"}}}
    assert parts[2] == {"function_response": {"id": "c1", "name": "lookup", "response": {"result": 42}}}
    assert parts[3] == {"inline_data": {"mime_type": "image/png", "data": "aGk=", "display_name": "pic"}}
    flat = repr(dumped)
    for camel in ("invocationId", "stateDelta", "functionCall", "inlineData", "mimeType", "customMetadata"):
        assert camel not in flat


def test_dump_round_trips() -> None:
    dumped = Event.model_validate(CAMEL).dump()
    assert Event.model_validate(dumped).dump() == dumped


def test_dump_omits_none() -> None:
    dumped = Event.model_validate({"author": "user", "content": {"parts": [{"text": "hi"}]}}).dump()
    for absent in ("id", "branch", "timestamp", "partial", "turn_complete", "error_code", "seq", "turn_id"):
        assert absent not in dumped
    assert dumped["content"] == {"parts": [{"text": "hi"}]}
    assert "transfer_to_agent" not in dumped["actions"]
    assert "compaction" not in dumped["actions"]


def test_defaults() -> None:
    event = Event.model_validate({})
    assert event.author == "user"
    assert event.invocation_id == ""
    assert event.actions.state_delta == {}
    assert event.dump()["author"] == "user"


def test_none_values_inside_state_delta_are_kept() -> None:
    # A None value in a delta is data (ADK uses it to clear a key), not an unset field.
    dumped = Event.model_validate({"actions": {"stateDelta": {"k": None}}}).dump()
    assert dumped["actions"]["state_delta"] == {"k": None}


def test_unknown_fields_are_preserved_at_every_level() -> None:
    data = {
        "author": "user",
        "voice": {"lang": "fr"},
        "content": {"role": "user", "extraContent": 1, "parts": [{"text": "hi", "cacheControl": {"type": "x"}}]},
        "actions": {"customAction": [1, 2]},
    }
    dumped = Event.model_validate(data).dump()
    assert dumped["voice"] == {"lang": "fr"}
    assert dumped["content"]["extra_content"] == 1
    assert dumped["content"]["parts"][0]["cache_control"] == {"type": "x"}
    assert dumped["actions"]["custom_action"] == [1, 2]


def test_unmodelled_fields_come_out_snake_case_and_free_form_maps_as_sent() -> None:
    data = {
        "author": "model",
        "usageMetadata": {"promptTokenCount": 3, "promptTokensDetails": [{"tokenCount": 3, "modality": "TEXT"}]},
        "inputTranscription": {"text": "hi", "finished": True},
        "modelVersion": "gemini-x",
        "content": {"role": "model", "parts": [{"text": "a", "videoMetadata": {"startOffset": "1s"}}]},
        "actions": {"endOfAgent": True, "agentState": {"myKey": {"innerKey": 1}}, "stateDelta": {"camelKey": 1}},
        "customMetadata": {"traceId": "t"},
        "extension": {"metadata": {"keepMe": 1}, "args": {"fooBar": 2}, "stateDelta": {"xY": 3}},
        "HTTPStatus": 200,
        "x-trace": {"innerKey": 1},
    }
    dumped = Event.model_validate(data).dump()
    assert dumped["usage_metadata"] == {
        "prompt_token_count": 3,
        "prompt_tokens_details": [{"token_count": 3, "modality": "TEXT"}],
    }
    assert dumped["input_transcription"] == {"text": "hi", "finished": True}
    assert dumped["model_version"] == "gemini-x"
    assert dumped["content"]["parts"][0]["video_metadata"] == {"start_offset": "1s"}
    actions = dumped["actions"]
    assert actions["end_of_agent"] is True
    assert actions["agent_state"] == {"myKey": {"innerKey": 1}}  # free-form: as sent
    assert actions["state_delta"] == {"camelKey": 1}
    assert dumped["custom_metadata"] == {"traceId": "t"}
    assert dumped["extension"] == {"metadata": {"keepMe": 1}, "args": {"fooBar": 2}, "state_delta": {"xY": 3}}
    # Not camelCase: kept as sent (names and their values).
    assert dumped["HTTPStatus"] == 200
    assert dumped["x-trace"] == {"inner_key": 1}
    assert not [k for k in dumped if any(c.isupper() for c in k) and k != "HTTPStatus"]


def test_an_agents_structured_output_and_widget_payloads_keep_their_keys() -> None:
    # ADK 2's Event.output and actions.set_model_response are the application's data (a flight's
    # "flightNumber" must not come back as "flight_number"), as is a UI widget's payload.
    data = {
        "author": "planner",
        "output": {"flightNumber": "TP1234", "legs": [{"departAt": "9:00"}]},
        "actions": {
            "setModelResponse": {"bookingRef": "X1"},
            "renderUiWidgets": [{"widgetType": "card", "payload": {"seatMap": {"rowA": 1}}}],
        },
    }
    dumped = Event.model_validate(data).dump()
    assert dumped["output"] == {"flightNumber": "TP1234", "legs": [{"departAt": "9:00"}]}
    assert dumped["actions"]["set_model_response"] == {"bookingRef": "X1"}
    assert dumped["actions"]["render_ui_widgets"] == [{"widget_type": "card", "payload": {"seatMap": {"rowA": 1}}}]


@pytest.mark.parametrize("tool_calls", [5, 2.5, True, {"id": "c1"}])
def test_chat_tool_calls_that_are_not_a_list_are_refused(tool_calls: Any) -> None:
    # Found by the fuzz tier: an integer was iterated and raised TypeError (a 500).
    with pytest.raises(ValueError, match="tool_calls must be a list"):
        chat_message_to_event({"role": "assistant", "content": "x", "tool_calls": tool_calls})


def test_an_unmodelled_field_sent_in_both_spellings_is_refused() -> None:
    with pytest.raises(ValidationError) as info:
        Event.model_validate({"usageMetadata": {}, "usage_metadata": {}})
    assert info.value.errors()[0]["loc"] == ("usage_metadata",)


def test_a_resend_in_the_other_spelling_is_the_same_event() -> None:
    camel = Event.model_validate({"id": "e1", "author": "model", "usageMetadata": {"promptTokenCount": 3}})
    snake = Event.model_validate({"id": "e1", "author": "model", "usage_metadata": {"prompt_token_count": 3}})
    assert camel.dump() == snake.dump()


def test_chat_message_tool_arguments_keep_their_keys() -> None:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": {"userName": "Ann"}}}],
        "messageId": "m1",
    }
    dumped = Event.model_validate(message).dump()
    assert dumped["content"]["parts"][0]["function_call"]["args"] == {"userName": "Ann"}
    assert dumped["message_id"] == "m1"


@pytest.mark.parametrize("raw", [b"\x00\x01binary\xff", bytearray(b"hi there")])
def test_inline_data_bytes_become_base64_text(raw: bytes | bytearray) -> None:
    event = Event.model_validate({"content": {"parts": [{"inline_data": {"mime_type": "audio/wav", "data": raw}}]}})
    dumped = event.dump()
    data = dumped["content"]["parts"][0]["inline_data"]["data"]
    assert isinstance(data, str)
    assert base64.b64decode(data) == bytes(raw)


def test_inline_data_string_is_kept_as_given() -> None:
    event = Event.model_validate({"content": {"parts": [{"inlineData": {"data": "AAEC"}}]}})
    assert event.dump()["content"]["parts"][0]["inline_data"]["data"] == "AAEC"


@pytest.mark.parametrize("value", [{"b", "a"}, frozenset({"b", "a"}), ("b", "a")])
def test_long_running_tool_ids_from_set_or_tuple_become_sorted_list(value: Any) -> None:
    assert Event.model_validate({"longRunningToolIds": value}).long_running_tool_ids == ["a", "b"]


def test_long_running_tool_ids_list_keeps_order() -> None:
    assert Event.model_validate({"long_running_tool_ids": ["z", "a"]}).dump()["long_running_tool_ids"] == ["z", "a"]


@pytest.mark.parametrize(
    "data",
    [
        {"timestamp": "not a number"},
        {"content": {"parts": [{"text": 5}]}},
        {"content": {"parts": "hi"}},
        {"actions": {"stateDelta": ["not", "a", "dict"]}},
        {"invocationId": 5},
        {"long_running_tool_ids": "c1"},
    ],
)
def test_wrong_types_are_rejected(data: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        Event.model_validate(data)


def test_session_dump_without_events() -> None:
    session = Session(id="s1", app_name="a", user_id="u", create_time=1.0, last_update_time=2.0, events=[{"id": "e"}])
    assert session.dump()["events"] == [{"id": "e"}]
    without = session.dump(with_events=False)
    assert "events" not in without
    assert without == {
        "id": "s1",
        "app_name": "a",
        "user_id": "u",
        "state": {},
        "create_time": 1.0,
        "last_update_time": 2.0,
        "version": 0,
    }


def test_session_forbids_unknown_fields() -> None:
    with pytest.raises(TypeError):
        Session(id="s1", app_name="a", user_id="u", create_time=1.0, last_update_time=1.0, bogus=1)  # type: ignore[call-arg]


# --- chat messages -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"role": "user", "content": "hi"}, True),
        ({"role": "user"}, True),
        ({"role": "user", "content": [{"type": "text", "text": "hi"}]}, True),
        ({"role": "user", "author": "user", "content": "hi"}, False),
        ({"role": "user", "content": {"parts": []}}, False),
        ({"author": "user", "content": {"parts": []}}, False),
        ({"content": "hi"}, False),
    ],
)
def test_is_chat_message(data: dict[str, Any], expected: bool) -> None:
    assert is_chat_message(data) is expected


def test_string_content_becomes_one_text_part() -> None:
    event = chat_message_to_event({"role": "user", "content": "hello"})
    assert event == {"author": "user", "content": {"role": "user", "parts": [{"text": "hello"}]}}


def test_list_of_text_parts() -> None:
    event = chat_message_to_event(
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    )
    assert event["content"]["parts"] == [{"text": "a"}, {"text": "b"}]


def test_non_text_content_parts_are_kept_verbatim() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://example.com/x.png"}}
    audio = {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}
    text_with_extra = {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}
    event = chat_message_to_event(
        {"role": "user", "content": [{"type": "text", "text": "a"}, image, audio, text_with_extra]}
    )
    assert event["content"]["parts"] == [{"text": "a"}, image, audio, text_with_extra]
    # and they survive Event validation as extra fields
    dumped = Event.model_validate(event).dump()
    assert dumped["content"]["parts"][1] == image
    assert dumped["content"]["parts"][2] == audio


def test_input_message_is_not_mutated() -> None:
    message = {"role": "assistant", "content": "x", "tool_calls": [], "tool_call_id": None}
    snapshot = dict(message)
    chat_message_to_event(message)
    assert message == snapshot


def test_tool_calls_with_json_string_arguments() -> None:
    event = chat_message_to_event(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                },
                {"id": "call_2", "type": "function", "function": {"name": "noop", "arguments": ""}},
                {"id": "call_3", "type": "function", "function": {"name": "d", "arguments": {"already": "dict"}}},
                {"id": "call_4", "type": "function", "function": {"name": "none"}},
            ],
        }
    )
    assert event["author"] == "assistant"
    assert event["content"]["role"] == "model"
    assert event["content"]["parts"] == [
        {"function_call": {"id": "call_1", "name": "get_weather", "args": {"city": "Paris"}}},
        {"function_call": {"id": "call_2", "name": "noop", "args": {}}},
        {"function_call": {"id": "call_3", "name": "d", "args": {"already": "dict"}}},
        {"function_call": {"id": "call_4", "name": "none", "args": {}}},
    ]
    assert "tool_calls" not in event


def test_text_and_tool_calls_together_keep_text_first() -> None:
    event = chat_message_to_event(
        {"role": "assistant", "content": "let me check", "tool_calls": [{"id": "c", "function": {"name": "f"}}]}
    )
    assert event["content"]["parts"] == [
        {"text": "let me check"},
        {"function_call": {"id": "c", "name": "f", "args": {}}},
    ]


@pytest.mark.parametrize("arguments", ["{not json", "[1, 2]", '"a string"', "42"])
def test_invalid_or_non_object_json_arguments_are_kept_raw(arguments: str) -> None:
    event = chat_message_to_event(
        {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": arguments}}]}
    )
    assert event["content"]["parts"][0]["function_call"]["args"] == {"_raw": arguments}


def test_non_string_non_dict_arguments_are_kept_raw() -> None:
    event = chat_message_to_event(
        {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": [1]}}]}
    )
    assert event["content"]["parts"][0]["function_call"]["args"] == {"_raw": [1]}


def test_tool_message_becomes_function_response() -> None:
    event = chat_message_to_event({"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "sunny"})
    assert event["author"] == "tool"
    assert event["content"]["role"] == "user"
    assert event["content"]["parts"] == [
        {"function_response": {"id": "call_1", "name": "get_weather", "response": {"result": "sunny"}}}
    ]
    assert "tool_call_id" not in event
    assert event["name"] == "get_weather"


def test_tool_message_with_single_text_part_uses_the_text() -> None:
    event = chat_message_to_event({"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "ok"}]})
    assert event["content"]["parts"][0]["function_response"]["response"] == {"result": "ok"}


def test_tool_message_with_structured_content_keeps_it() -> None:
    content = [{"type": "image_url", "image_url": {"url": "u"}}]
    event = chat_message_to_event({"role": "tool", "tool_call_id": "c", "content": content})
    assert event["content"]["parts"][0]["function_response"]["response"] == {"result": content}


def test_function_role_maps_like_tool() -> None:
    event = chat_message_to_event({"role": "function", "name": "f", "content": "r"})
    assert event["content"]["role"] == "user"
    assert event["content"]["parts"][0]["function_response"]["response"] == {"result": "r"}


def test_tool_call_id_on_non_tool_message_is_kept_as_a_field() -> None:
    event = chat_message_to_event({"role": "user", "content": "x", "tool_call_id": "c9"})
    assert event["tool_call_id"] == "c9"


@pytest.mark.parametrize(
    ("role", "content_role"),
    [
        ("user", "user"),
        ("assistant", "model"),
        ("model", "model"),
        ("system", "system"),
        ("developer", "developer"),
        ("tool", "user"),
        ("function", "user"),
    ],
)
def test_roles_map_to_content_roles_and_author_keeps_the_role(role: str, content_role: str) -> None:
    event = chat_message_to_event({"role": role, "content": "x"})
    assert event["author"] == role
    assert event["content"]["role"] == content_role


@pytest.mark.parametrize("role", ["bot", "User", "", None, 5, ["user"]])
def test_unknown_role_raises_value_error(role: Any) -> None:
    with pytest.raises(ValueError, match="role"):
        chat_message_to_event({"role": role, "content": "x"})


@pytest.mark.parametrize("content", [5, 1.5, True, {"text": "x"}])
def test_content_of_wrong_type_raises_value_error(content: Any) -> None:
    with pytest.raises(ValueError, match="content"):
        chat_message_to_event({"role": "user", "content": content})


@pytest.mark.parametrize("item", ["plain string", 5, None, ["nested"]])
def test_content_items_that_are_not_objects_raise(item: Any) -> None:
    with pytest.raises(ValueError, match="content items"):
        chat_message_to_event({"role": "user", "content": [item]})


@pytest.mark.parametrize("call", ["call", 5, None, ["x"]])
def test_tool_calls_items_that_are_not_objects_raise(call: Any) -> None:
    with pytest.raises(ValueError, match="tool_calls"):
        chat_message_to_event({"role": "assistant", "tool_calls": [call]})


def test_null_content_gives_no_parts() -> None:
    assert chat_message_to_event({"role": "user", "content": None})["content"]["parts"] == []
    assert chat_message_to_event({"role": "user"})["content"]["parts"] == []


def test_extra_fields_are_preserved() -> None:
    message = {
        "role": "assistant",
        "content": "hi",
        "turn_id": "t-7",
        "timestamp": 1234.5,
        "metadata": {"latency_ms": 120},
        "name": "helper",
        "audio": {"id": "a1"},
    }
    event = chat_message_to_event(message)
    assert event["turn_id"] == "t-7"
    assert event["timestamp"] == 1234.5
    assert event["metadata"] == {"latency_ms": 120}
    assert event["name"] == "helper"
    assert event["audio"] == {"id": "a1"}
    dumped = Event.model_validate(event).dump()
    assert dumped["turn_id"] == "t-7"
    assert dumped["metadata"] == {"latency_ms": 120}
    assert dumped["name"] == "helper"
    assert dumped["audio"] == {"id": "a1"}
    assert dumped["timestamp"] == 1234.5
    assert dumped["author"] == "assistant"
    assert dumped["content"] == {"role": "model", "parts": [{"text": "hi"}]}


def test_chat_message_cannot_override_author_or_content_via_extra_fields() -> None:
    # "author" makes it an ADK event instead; "content" is consumed. The converted event's author is the role.
    event = chat_message_to_event({"role": "user", "content": "x", "id": "m1"})
    assert event["author"] == "user"
    assert event["id"] == "m1"
