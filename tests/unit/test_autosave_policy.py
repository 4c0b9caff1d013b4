"""The auto-save memory policy: presets, fields, roles, event types, part filtering, redaction, memory text."""

from __future__ import annotations

import base64
import copy
from dataclasses import fields, replace
from typing import Any

import pytest

from agent_memory.errors import UnprocessableInput
from agent_memory.policy.autosave import (
    EVENT_TYPES,
    MemoryPolicy,
    apply_policy,
    event_types,
    memory_text,
    normalise_role,
    parse_policy,
)

# --------------------------------------------------------------------------------------------------------------
# Builders: events in the stored JSON shape
# --------------------------------------------------------------------------------------------------------------

PNG = bytes(range(256)) * 4 + b"tail"  # 1028 bytes
PNG_B64 = base64.b64encode(PNG).decode()


def event(
    author: str = "user", parts: list[dict[str, Any]] | None = None, *, role: str | None = None, **extra: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "e1",
        "seq": 1,
        "author": author,
        "invocation_id": "inv1",
        "timestamp": 1000.0,
        "actions": {"state_delta": {}},
        **extra,
    }
    if parts is not None:
        body["content"] = {"role": role or ("user" if author == "user" else "model"), "parts": parts}
    return body


def text(value: str) -> dict[str, Any]:
    return {"text": value}


def thought(value: str = "let me think") -> dict[str, Any]:
    return {"text": value, "thought": True}


def fcall(name: str = "weather", args: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"function_call": {"id": "c1", "name": name, "args": {"city": "Lisbon"} if args is None else args}}


def fresponse(name: str = "weather", response: Any = None) -> dict[str, Any]:
    return {"function_response": {"id": "c1", "name": name, "response": response or {"result": "sunny"}}}


def image(data: str = PNG_B64, mime: str = "image/png") -> dict[str, Any]:
    return {"inline_data": {"mime_type": mime, "data": data}}


def file(uri: str = "gs://bucket/doc.pdf", mime: str = "application/pdf") -> dict[str, Any]:
    return {"file_data": {"file_uri": uri, "mime_type": mime}}


def code(source: str = "print(1)") -> dict[str, Any]:
    return {"executable_code": {"language": "PYTHON", "code": source}}


def result(output: str = "1") -> dict[str, Any]:
    return {"code_execution_result": {"outcome": "OUTCOME_OK", "output": output}}


def user(value: str = "hello") -> dict[str, Any]:
    return event("user", [text(value)])


def agent(value: str = "hi there", author: str = "agent") -> dict[str, Any]:
    return event(author, [text(value)])


def system(value: str = "be brief") -> dict[str, Any]:
    return event("system", [text(value)], role="system")


def tool_response() -> dict[str, Any]:
    """As ADK stores it: the agent's name as author, content role user."""
    return event("agent", [fresponse()], role="user")


def parts_of(kept: dict[str, Any] | None) -> list[dict[str, Any]]:
    assert kept is not None
    return list(kept["content"]["parts"])


ALL_FIELDS = {f.name for f in fields(MemoryPolicy)}

# --------------------------------------------------------------------------------------------------------------
# Presets and parsing
# --------------------------------------------------------------------------------------------------------------

DEFAULT = MemoryPolicy(
    preset="default",
    include_roles=frozenset({"user"}),
    exclude_roles=frozenset(),
    include_authors=None,
    exclude_authors=frozenset(),
    include_event_types=None,
    exclude_event_types=frozenset(),
    text_only=True,
    include_thought=False,
    include_empty_text=False,
)
ALL = replace(
    DEFAULT,
    preset="all",
    include_roles=frozenset({"user", "assistant", "system"}),
    text_only=False,
    include_thought=True,
    include_empty_text=True,
)
CUSTOM = replace(DEFAULT, preset="custom")
PRESETS = {"default": DEFAULT, "all": ALL, "custom": CUSTOM}


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_names_resolve_to_their_fields(name: str) -> None:
    assert parse_policy(name) == PRESETS[name]
    assert parse_policy({"preset": name}) == PRESETS[name]


def test_constructor_defaults_are_the_default_preset() -> None:
    assert MemoryPolicy() == DEFAULT


def test_object_preset_defaults_to_custom() -> None:
    assert parse_policy({}) == CUSTOM
    assert parse_policy({"include_thought": True}) == replace(CUSTOM, include_thought=True)


@pytest.mark.parametrize(
    ("default", "expected"),
    [
        ("default", DEFAULT),
        ("all", ALL),
        ({"preset": "all", "include_thought": False}, replace(ALL, include_thought=False)),
        ({"text_only": False}, replace(CUSTOM, text_only=False)),
    ],
)
def test_none_resolves_the_default(default: Any, expected: MemoryPolicy) -> None:
    assert parse_policy(None, default) == expected


def test_none_without_a_default_is_the_default_preset() -> None:
    assert parse_policy(None) == DEFAULT


def test_a_given_policy_wins_over_the_default() -> None:
    assert parse_policy("all", "default") == ALL
    assert parse_policy({"include_empty_text": True}, "all") == replace(CUSTOM, include_empty_text=True)


# One parsed value per field: (raw JSON value, resolved value)
FIELD_VALUES: list[tuple[str, Any, Any]] = [
    ("include_roles", ["assistant"], frozenset({"assistant"})),
    ("include_roles", ["model", "developer"], frozenset({"assistant", "system"})),
    ("include_roles", None, None),
    ("include_roles", [], frozenset()),
    ("exclude_roles", ["system", "user"], frozenset({"system", "user"})),
    ("exclude_roles", None, frozenset()),
    ("include_authors", ["planner", "user"], frozenset({"planner", "user"})),
    ("include_authors", None, None),
    ("exclude_authors", ["planner"], frozenset({"planner"})),
    ("exclude_authors", None, frozenset()),
    ("include_event_types", ["tool_call", "text"], frozenset({"function_call", "text"})),
    ("include_event_types", ["tool_response"], frozenset({"function_response"})),
    ("include_event_types", list(EVENT_TYPES), frozenset(EVENT_TYPES)),
    ("include_event_types", None, None),
    ("exclude_event_types", ["media", "error", "media"], frozenset({"media", "error"})),
    ("exclude_event_types", None, frozenset()),
    ("text_only", False, False),
    ("text_only", True, True),
    ("include_thought", True, True),
    ("include_thought", False, False),
    ("include_empty_text", True, True),
    ("include_empty_text", False, False),
]


@pytest.mark.parametrize("preset", sorted(PRESETS))
@pytest.mark.parametrize(("name", "raw", "resolved"), FIELD_VALUES)
def test_an_object_changes_only_the_fields_it_sets(preset: str, name: str, raw: Any, resolved: Any) -> None:
    policy = parse_policy({"preset": preset, name: raw})
    assert getattr(policy, name) == resolved
    for other in ALL_FIELDS - {name}:
        assert getattr(policy, other) == getattr(PRESETS[preset], other), other


def test_several_fields_combine() -> None:
    policy = parse_policy(
        {"preset": "all", "exclude_roles": ["system"], "include_thought": False, "exclude_authors": ["critic"]}
    )
    assert policy == replace(
        ALL, exclude_roles=frozenset({"system"}), include_thought=False, exclude_authors=frozenset({"critic"})
    )


@pytest.mark.parametrize(
    "policy",
    [
        DEFAULT,
        ALL,
        CUSTOM,
        replace(ALL, include_roles=None, include_event_types=frozenset({"text", "media"})),
        replace(DEFAULT, include_authors=frozenset({"a", "b"}), exclude_event_types=frozenset({"error"})),
    ],
)
def test_to_dict_round_trips(policy: MemoryPolicy) -> None:
    data = policy.to_dict()
    assert set(data) == ALL_FIELDS
    assert parse_policy(data) == policy
    if policy.include_roles is not None:
        assert data["include_roles"] == sorted(policy.include_roles)


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ("everything", "policy"),
        ("", "policy"),
        ("Default", "policy"),
        (42, "policy"),
        (["default"], "policy"),
        (True, "policy"),
        ({"preset": "bogus"}, "policy.preset"),
        ({"preset": None}, "policy.preset"),
        ({"preset": 1}, "policy.preset"),
        ({"preset": ["all"]}, "policy.preset"),
        ({"bogus": 1}, "policy.bogus"),
        ({"preset": "all", "includeRoles": ["user"]}, "policy.includeRoles"),
        ({"include_roles": "user"}, "policy.include_roles"),
        ({"include_roles": {"user": True}}, "policy.include_roles"),
        ({"include_roles": ["user", "robot"]}, "policy.include_roles[1]"),
        ({"include_roles": ["User"]}, "policy.include_roles[0]"),
        ({"include_roles": [1]}, "policy.include_roles[0]"),
        ({"exclude_roles": ["tool"]}, "policy.exclude_roles[0]"),
        ({"exclude_roles": 3}, "policy.exclude_roles"),
        ({"include_authors": "user"}, "policy.include_authors"),
        ({"include_authors": ["user", None]}, "policy.include_authors[1]"),
        ({"exclude_authors": [{"name": "x"}]}, "policy.exclude_authors[0]"),
        ({"include_event_types": ["text", "audio"]}, "policy.include_event_types[1]"),
        ({"include_event_types": "text"}, "policy.include_event_types"),
        ({"exclude_event_types": ["tool"]}, "policy.exclude_event_types[0]"),
        ({"exclude_event_types": [None]}, "policy.exclude_event_types[0]"),
        ({"text_only": "false"}, "policy.text_only"),
        ({"text_only": 0}, "policy.text_only"),
        ({"text_only": None}, "policy.text_only"),
        ({"include_thought": 1}, "policy.include_thought"),
        ({"include_empty_text": "yes"}, "policy.include_empty_text"),
    ],
)
def test_invalid_policies_are_422_naming_the_field(value: Any, field: str) -> None:
    with pytest.raises(UnprocessableInput) as caught:
        parse_policy(value)
    assert caught.value.status == 422
    assert caught.value.field == field
    assert caught.value.to_body()["error"]["field"] == field  # type: ignore[index]


@pytest.mark.parametrize(("default", "field"), [("nope", "policy"), ({"bogus": True}, "policy.bogus")])
def test_an_invalid_default_is_422_too(default: Any, field: str) -> None:
    with pytest.raises(UnprocessableInput) as caught:
        parse_policy(None, default)
    assert caught.value.field == field


# --------------------------------------------------------------------------------------------------------------
# Roles
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("author", "content_role", "expected"),
    [
        ("user", "user", "user"),
        ("user", "model", "user"),
        ("user", None, "user"),
        ("model", "model", "assistant"),
        ("model", None, "assistant"),
        ("model", "user", "user"),
        ("assistant", "model", "assistant"),
        ("assistant", "assistant", "assistant"),
        ("assistant", None, "assistant"),
        ("planner", "model", "assistant"),
        ("planner", None, "assistant"),
        ("planner", "user", "user"),  # a tool response, as ADK stores it
        ("tool", "user", "user"),  # a chat-message tool response
        ("system", "system", "system"),
        ("system", None, "system"),
        ("system", "model", "system"),
        ("system", "user", "system"),
        ("developer", "developer", "system"),
        ("developer", None, "system"),
        ("developer", "user", "system"),
        ("planner", "system", "system"),
        ("planner", "developer", "system"),
        ("user", "system", "system"),
        ("user", "developer", "system"),
        (None, None, "assistant"),
        (None, "user", "user"),
        ("", "model", "assistant"),
        ("User", "model", "assistant"),  # exact names only
    ],
)
def test_normalise_role(author: str | None, content_role: str | None, expected: str) -> None:
    body: dict[str, Any] = {"content": {"parts": [text("x")]}}
    if author is not None:
        body["author"] = author
    if content_role is not None:
        body["content"]["role"] = content_role
    assert normalise_role(body) == expected


def test_normalise_role_without_content() -> None:
    assert normalise_role({"author": "user"}) == "user"
    assert normalise_role({"author": "planner"}) == "assistant"
    assert normalise_role({"author": "system", "content": None}) == "system"


@pytest.mark.parametrize(
    ("policy", "kept_roles"),
    [
        ({"include_roles": ["user"]}, {"user"}),
        ({"include_roles": ["assistant"]}, {"assistant"}),
        ({"include_roles": ["model"]}, {"assistant"}),
        ({"include_roles": ["system"]}, {"system"}),
        ({"include_roles": ["developer"]}, {"system"}),
        ({"include_roles": ["user", "system"]}, {"user", "system"}),
        ({"include_roles": []}, set()),
        ({"include_roles": None}, {"user", "assistant", "system"}),
        ({"preset": "all", "exclude_roles": ["assistant"]}, {"user", "system"}),
        ({"preset": "all", "exclude_roles": ["user", "system"]}, {"assistant"}),
        ({"include_roles": ["user", "assistant"], "exclude_roles": ["user"]}, {"assistant"}),
        ({"preset": "all", "include_roles": ["user"]}, {"user"}),
        ("default", {"user"}),
        ("custom", {"user"}),
        ("all", {"user", "assistant", "system"}),
    ],
)
def test_role_filters(policy: Any, kept_roles: set[str]) -> None:
    resolved = parse_policy(policy)
    samples = {"user": user(), "assistant": agent(), "system": system()}
    kept = {role for role, sample in samples.items() if apply_policy(sample, resolved) is not None}
    assert kept == kept_roles


def test_developer_and_model_authors_filter_as_system_and_assistant() -> None:
    policy = parse_policy({"include_roles": ["system"]})
    assert apply_policy(event("developer", [text("rules")], role="developer"), policy) is not None
    assert apply_policy(event("model", [text("hi")]), policy) is None
    assert apply_policy(event("model", [text("hi")]), parse_policy({"include_roles": ["assistant"]})) is not None


def test_tool_responses_count_as_user() -> None:
    policy = parse_policy({"include_roles": ["user"], "text_only": False})
    kept = apply_policy(tool_response(), policy)
    assert parts_of(kept) == [fresponse()]
    assert apply_policy(tool_response(), parse_policy({"preset": "all", "include_roles": ["assistant"]})) is None


# --------------------------------------------------------------------------------------------------------------
# Authors
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "kept_authors"),
    [
        ({"preset": "all", "include_authors": ["planner"]}, {"planner"}),
        ({"preset": "all", "include_authors": ["planner", "user"]}, {"planner", "user"}),
        ({"preset": "all", "include_authors": ["Planner"]}, set()),  # exact match
        ({"preset": "all", "include_authors": ["plan"]}, set()),
        ({"preset": "all", "exclude_authors": ["critic"]}, {"user", "planner", "system"}),
        ({"preset": "all", "exclude_authors": ["user", "system"]}, {"planner", "critic"}),
        ({"preset": "all", "include_authors": ["planner", "critic"], "exclude_authors": ["critic"]}, {"planner"}),
        ({"include_authors": ["planner", "user"]}, {"user"}),  # custom keeps its user-only role filter
        ({"include_roles": None, "include_authors": ["planner", "user"]}, {"planner", "user"}),
        ({"include_roles": None, "exclude_authors": ["planner"]}, {"user", "critic", "system"}),
        ("all", {"user", "planner", "critic", "system"}),
    ],
)
def test_author_filters(policy: Any, kept_authors: set[str]) -> None:
    resolved = parse_policy(policy)
    samples = [user(), agent(author="planner"), agent(author="critic"), system()]
    kept = {s["author"] for s in samples if apply_policy(s, resolved) is not None}
    assert kept == kept_authors


def test_an_event_without_author_matches_no_author_list() -> None:
    anonymous = {"content": {"role": "model", "parts": [text("hi")]}}
    assert apply_policy(anonymous, parse_policy({"preset": "all", "include_authors": ["user"]})) is None
    assert apply_policy(anonymous, parse_policy({"preset": "all", "exclude_authors": ["user"]})) is not None


# --------------------------------------------------------------------------------------------------------------
# Event types
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (event("user", [text("hi")]), {"text"}),
        (event("user", [text("")]), {"text"}),
        (event("agent", [thought()]), {"thought"}),
        (event("agent", [{"thought": True, "thought_signature": "sig"}]), {"thought"}),
        (event("agent", [{"text": "visible", "thought": False}]), {"text"}),
        (event("agent", [fcall()]), {"function_call"}),
        (event("agent", [{"functionCall": {"name": "f"}}]), {"function_call"}),
        (tool_response(), {"function_response"}),
        (event("agent", [{"functionResponse": {"name": "f"}}], role="user"), {"function_response"}),
        (event("user", [image()]), {"media"}),
        (event("user", [{"inlineData": {"mimeType": "image/png", "data": "AAAA"}}]), {"media"}),
        (event("user", [file()]), {"media"}),
        (event("user", [{"fileData": {"fileUri": "gs://x"}}]), {"media"}),
        (event("agent", [code()]), {"executable_code"}),
        (event("agent", [result()]), {"code_execution_result"}),
        (event("user", input_transcription={"text": "hello", "finished": True}), {"transcription"}),
        (event("agent", output_transcription={"text": "hi"}), {"transcription"}),
        (event("user", inputTranscription={"text": "hello"}), {"transcription"}),
        (event("agent", outputTranscription={"text": "hi"}), {"transcription"}),
        (event("agent", error_code="MAX_TOKENS"), {"error"}),
        (event("agent", error_message="boom"), {"error"}),
        (event("agent", error_code="", error_message=None), set()),
        (event("agent", [text("partial answer")], error_code="SAFETY"), {"text", "error"}),
        (event("agent", [thought(), text("answer"), fcall()]), {"thought", "text", "function_call"}),
        (event("agent", [code(), result(), text("done")]), {"executable_code", "code_execution_result", "text"}),
        (event("user", [text("look"), image(), file()]), {"text", "media"}),
        (event("user", [text("x")], input_transcription={"text": "x"}), {"text", "transcription"}),
        (event("agent", [{"type": "image_url", "image_url": {"url": "https://x"}}]), set()),
        (event("agent", []), set()),
        (event("agent"), set()),
    ],
)
def test_event_types(body: dict[str, Any], expected: set[str]) -> None:
    assert event_types(body) == frozenset(expected)


def test_event_types_use_canonical_names_only() -> None:
    types = event_types(event("agent", [fcall(), fresponse()]))
    assert types == {"function_call", "function_response"}
    assert "tool_call" not in types and "tool_response" not in types


def test_every_event_type_is_inferable() -> None:
    everything = event(
        "agent",
        [text("t"), thought(), fcall(), fresponse(), image(), code(), result()],
        input_transcription={"text": "said"},
        error_code="E",
    )
    assert event_types(everything) == frozenset(EVENT_TYPES)


SAMPLES: dict[str, dict[str, Any]] = {
    "text": event("user", [text("hi")]),
    "thought": event("user", [thought()]),
    "function_call": event("user", [fcall()]),
    "function_response": tool_response(),
    "media": event("user", [image()]),
    "file": event("user", [file()]),
    "executable_code": event("user", [code()]),
    "code_execution_result": event("user", [result()]),
    "transcription": event("user", input_transcription={"text": "spoken"}),
    "error": event("user", error_code="E", error_message="failed"),
    "text+call": event("user", [text("see"), fcall()]),
}


@pytest.mark.parametrize(
    ("included", "kept"),
    [
        (["text"], {"text", "text+call"}),
        (["thought"], {"thought"}),
        (["function_call"], {"function_call", "text+call"}),
        (["tool_call"], {"function_call", "text+call"}),
        (["function_response"], {"function_response"}),
        (["tool_response"], {"function_response"}),
        (["media"], {"media", "file"}),
        (["executable_code"], {"executable_code"}),
        (["code_execution_result"], {"code_execution_result"}),
        (["transcription"], {"transcription"}),
        (["error"], {"error"}),
        (["tool_call", "tool_response"], {"function_call", "function_response", "text+call"}),
        ([], set()),
    ],
)
def test_include_event_types(included: list[str], kept: set[str]) -> None:
    policy = parse_policy({"include_event_types": included, "include_thought": True})
    assert {name for name, s in SAMPLES.items() if apply_policy(s, policy) is not None} == kept


@pytest.mark.parametrize(
    ("excluded", "dropped"),
    [
        (["text"], {"text", "text+call"}),
        (["thought"], {"thought"}),
        (["function_call"], {"function_call", "text+call"}),
        (["tool_call"], {"function_call", "text+call"}),
        (["tool_response"], {"function_response"}),
        (["media"], {"media", "file"}),
        (["executable_code", "code_execution_result"], {"executable_code", "code_execution_result"}),
        (["transcription"], {"transcription"}),
        (["error"], {"error"}),
        ([], set()),
    ],
)
def test_exclude_event_types_drop_whole_events(excluded: list[str], dropped: set[str]) -> None:
    policy = parse_policy({"preset": "all", "exclude_event_types": excluded})
    assert {name for name, s in SAMPLES.items() if apply_policy(s, policy) is None} == dropped


def test_exclude_wins_over_include() -> None:
    policy = parse_policy({"include_event_types": ["text", "function_call"], "exclude_event_types": ["tool_call"]})
    assert apply_policy(SAMPLES["text"], policy) is not None
    assert apply_policy(SAMPLES["text+call"], policy) is None
    assert apply_policy(SAMPLES["function_call"], policy) is None


def test_event_type_filters_read_the_event_before_thoughts_are_removed() -> None:
    mixed = event("user", [thought(), text("answer")])
    # the thought is removed from what is stored, but the event still had one
    assert apply_policy(mixed, parse_policy({"exclude_event_types": ["thought"]})) is None
    assert parts_of(apply_policy(mixed, parse_policy({"include_event_types": ["thought", "text"]}))) == [text("answer")]


# --------------------------------------------------------------------------------------------------------------
# Part filtering: thoughts, text_only, include_event_types
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "expected_parts"),
    [
        ("default", [text("answer")]),
        ("custom", [text("answer")]),
        ("all", [thought("plan"), text("answer")]),
        ({"include_thought": True}, [thought("plan"), text("answer")]),
        ({"preset": "all", "include_thought": False}, [text("answer")]),
        ({"text_only": False}, [text("answer")]),
        ({"include_event_types": ["text"], "include_thought": True}, [text("answer")]),
        ({"include_event_types": ["text", "thought"]}, [text("answer")]),
        ({"include_event_types": ["text", "thought"], "include_thought": True}, [thought("plan"), text("answer")]),
    ],
)
def test_thought_parts(policy: Any, expected_parts: list[dict[str, Any]]) -> None:
    body = event("user", [thought("plan"), text("answer")])
    assert parts_of(apply_policy(body, parse_policy(policy))) == expected_parts


@pytest.mark.parametrize(
    "policy", ["default", {"preset": "all", "include_thought": False, "include_empty_text": False}]
)
def test_a_thought_only_event_is_dropped_without_include_thought(policy: Any) -> None:
    assert apply_policy(event("user", [thought()]), parse_policy(policy)) is None


def test_a_thought_only_event_is_kept_with_include_thought() -> None:
    kept = apply_policy(event("user", [thought("hmm")]), parse_policy({"include_thought": True}))
    assert parts_of(kept) == [thought("hmm")]
    assert kept is not None and memory_text(kept) == "hmm"


def test_thought_removal_keeps_the_rest_of_the_event() -> None:
    body = event("user", [thought(), text("answer")], custom_metadata={"k": "v"}, turn_id="t1")
    kept = apply_policy(body, parse_policy("default"))
    assert kept is not None
    assert {k: v for k, v in kept.items() if k != "content"} == {k: v for k, v in body.items() if k != "content"}
    assert kept["content"]["role"] == "user"


RICH = event(
    "user",
    [text("see"), image(), file(), fcall(), fresponse(), code(), result(), {"type": "input_audio", "x": 1}],
    input_transcription={"text": "spoken"},
    error_code="E",
    error_message="failed",
)


@pytest.mark.parametrize(
    ("policy", "kinds", "fields_kept"),
    [
        ("default", ["text"], set()),
        ({"text_only": True}, ["text"], set()),
        ({"text_only": False}, ["text", "media", "media", "fc", "fr", "code", "result", "other"], {"t", "e"}),
        ({"include_event_types": ["text"]}, ["text"], set()),
        ({"include_event_types": ["text"], "text_only": False}, ["text"], set()),
        ({"include_event_types": ["media"]}, ["media", "media"], set()),
        ({"include_event_types": ["media"], "text_only": True}, ["media", "media"], set()),
        ({"include_event_types": ["tool_call", "tool_response"]}, ["fc", "fr"], set()),
        ({"include_event_types": ["executable_code", "code_execution_result"]}, ["code", "result"], set()),
        ({"include_event_types": ["transcription"]}, [], {"t"}),
        ({"include_event_types": ["error"]}, [], {"e"}),
        ({"include_event_types": ["text", "error", "transcription"]}, ["text"], {"t", "e"}),
        (
            {"include_event_types": list(EVENT_TYPES)},
            ["text", "media", "media", "fc", "fr", "code", "result"],
            {"t", "e"},
        ),
        ("all", ["text", "media", "media", "fc", "fr", "code", "result", "other"], {"t", "e"}),
    ],
)
def test_text_only_and_include_event_types_select_parts(policy: Any, kinds: list[str], fields_kept: set[str]) -> None:
    kept = apply_policy(RICH, parse_policy(policy))
    assert kept is not None
    names = {
        "text": "text",
        "inline_data": "media",
        "file_data": "media",
        "function_call": "fc",
        "function_response": "fr",
        "executable_code": "code",
        "code_execution_result": "result",
        "type": "other",
    }
    assert [next(names[k] for k in p if k in names) for p in kept["content"]["parts"]] == kinds
    assert ("input_transcription" in kept) == ("t" in fields_kept)
    assert ("error_code" in kept and "error_message" in kept) == ("e" in fields_kept)
    assert ("error_code" in kept or "error_message" in kept) == ("e" in fields_kept)


def test_text_only_strips_camel_case_transcriptions_and_errors() -> None:
    body = event("user", [text("x")], inputTranscription={"text": "a"}, errorCode="E", errorMessage="m")
    kept = apply_policy(body, parse_policy("default"))
    assert kept is not None
    assert not {"inputTranscription", "errorCode", "errorMessage"} & set(kept)
    assert memory_text(kept) == "x"


def test_text_only_false_keeps_every_part_of_a_user_event() -> None:
    body = event("user", [text("look"), image(), fcall()])
    kept = apply_policy(body, parse_policy({"text_only": False}))
    assert [next(iter(p)) for p in parts_of(kept)] == ["text", "inline_data", "function_call"]
    assert apply_policy(agent(), parse_policy({"text_only": False})) is None  # still user role only


def test_state_only_events() -> None:
    body = event("agent", actions={"state_delta": {"k": 1}})
    assert apply_policy(body, parse_policy("default")) is None
    assert apply_policy(body, parse_policy("all")) == body
    assert apply_policy(body, parse_policy({"preset": "all", "include_empty_text": False})) is None


# --------------------------------------------------------------------------------------------------------------
# Empty text
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "parts",
    [
        [],
        [text("")],
        [text("   \n\t")],
        [text(""), text(" ")],
        [image()],  # removed by text_only: nothing left
        [fcall()],
        [thought()],
    ],
)
@pytest.mark.parametrize("include_empty_text", [False, True])
def test_include_empty_text(parts: list[dict[str, Any]], include_empty_text: bool) -> None:
    body = event("user", parts)
    kept = apply_policy(body, parse_policy({"include_empty_text": include_empty_text}))
    if include_empty_text:
        assert kept is not None
        assert all(part_kind == "text" for p in parts_of(kept) for part_kind in p if part_kind != "thought")
        assert memory_text(kept).strip() == ""
    else:
        assert kept is None


@pytest.mark.parametrize(
    ("policy", "parts"),
    [
        ({"text_only": False}, [fcall()]),
        ({"text_only": False}, [image()]),
        ({"text_only": False}, [file()]),
        ({"text_only": False}, [code()]),
        ({"text_only": False}, [result()]),
        ({"include_event_types": ["tool_call"]}, [fcall()]),
        ({"include_roles": ["user"], "text_only": False}, [fresponse()]),
    ],
)
def test_kept_non_text_parts_are_not_empty(policy: Any, parts: list[dict[str, Any]]) -> None:
    assert apply_policy(event("user", parts), parse_policy(policy)) is not None


def test_transcription_and_error_events_are_not_empty_when_kept() -> None:
    policy = parse_policy({"include_event_types": ["transcription", "error"]})
    assert apply_policy(event("user", input_transcription={"text": "hello"}), policy) is not None
    assert apply_policy(event("user", error_code="E"), policy) is not None
    assert apply_policy(event("user", input_transcription={"text": ""}), policy) is None
    assert apply_policy(event("user", input_transcription={"text": ""}), replace(policy, include_empty_text=True))


def test_empty_text_check_comes_after_part_filtering() -> None:
    body = event("user", [image(), text(" ")])
    assert apply_policy(body, parse_policy("default")) is None
    assert apply_policy(body, parse_policy({"text_only": False})) is not None


# --------------------------------------------------------------------------------------------------------------
# Inline data redaction and immutability
# --------------------------------------------------------------------------------------------------------------

POLICIES_FOR_MEDIA: list[Any] = [
    "all",
    {"text_only": False},
    {"include_event_types": ["media"]},
    {"include_event_types": ["text", "media"], "include_roles": None},
    {"preset": "default", "text_only": False},
    {"preset": "custom", "text_only": False},
    {"preset": "all", "include_empty_text": False},
]


@pytest.mark.parametrize("policy", POLICIES_FOR_MEDIA)
@pytest.mark.parametrize(
    ("data", "size"),
    [
        (PNG_B64, len(PNG)),
        (base64.b64encode(b"ab").decode(), 2),  # one "=" of padding
        (base64.b64encode(b"a").decode(), 1),  # two
        (base64.b64encode(b"abc").decode(), 3),  # none
        (base64.b64encode(b"ab").decode().rstrip("="), 2),  # padding left off
        (base64.urlsafe_b64encode(bytes(range(250, 256)) * 3).decode(), 18),
        ("QUJD\nREVG\n", 6),  # line-wrapped
        ("", 0),
    ],
)
def test_inline_data_is_redacted(policy: Any, data: str, size: int) -> None:
    body = event("user", [text("photo"), image(data=data)])
    original = copy.deepcopy(body)
    kept = apply_policy(body, parse_policy(policy))
    assert body == original
    blob = parts_of(kept)[-1]["inline_data"]
    assert blob == {"mime_type": "image/png", "data_size": size, "data_omitted": True}
    assert body["content"]["parts"][1]["inline_data"]["data"] == data


@pytest.mark.parametrize("policy", sorted(PRESETS))
def test_no_preset_stores_inline_data(policy: str) -> None:
    body = event("user", [text("photo"), image()])
    kept = apply_policy(body, parse_policy(policy))
    assert kept is not None
    assert PNG_B64 not in repr(kept)
    assert "'data':" not in repr(kept)


def test_inline_data_is_redacted_anywhere_in_the_event() -> None:
    nested = {
        "function_response": {
            "name": "render",
            "response": {"ok": True},
            "parts": [{"inline_data": {"mime_type": "image/jpeg", "data": "QUJD"}}],
        }
    }
    camel = {"inlineData": {"mimeType": "audio/wav", "data": "QUJDRA=="}}
    body = event("user", [nested, camel], custom_metadata={"raw": {"inline_data": {"data": "QQ=="}}})
    kept = apply_policy(body, parse_policy("all"))
    assert kept is not None
    fr_blob = kept["content"]["parts"][0]["function_response"]["parts"][0]["inline_data"]
    assert fr_blob == {"mime_type": "image/jpeg", "data_size": 3, "data_omitted": True}
    assert kept["content"]["parts"][1]["inlineData"] == {"mime_type": "audio/wav", "data_size": 4, "data_omitted": True}
    assert kept["custom_metadata"]["raw"]["inline_data"] == {"data_size": 1, "data_omitted": True}
    assert body["content"]["parts"][1]["inlineData"]["data"] == "QUJDRA=="


@pytest.mark.parametrize(
    ("blob", "expected"),
    [
        ({"data": "QUJD"}, {"data_size": 3, "data_omitted": True}),  # no mime type
        ({"mime_type": "image/png"}, {"mime_type": "image/png", "data_size": 0, "data_omitted": True}),
        (
            {"mime_type": "image/png", "data_size": 99, "data_omitted": True},  # already redacted
            {"mime_type": "image/png", "data_size": 99, "data_omitted": True},
        ),
        (
            {"mime_type": "image/png", "data": "QUJD", "display_name": "x.png"},
            {"mime_type": "image/png", "data_size": 3, "data_omitted": True},
        ),
        ("QUJD", {"data_size": 0, "data_omitted": True}),  # not an object: still replaced
    ],
)
def test_redacted_blob_shape(blob: Any, expected: dict[str, Any]) -> None:
    kept = apply_policy(event("user", [{"inline_data": blob}]), parse_policy("all"))
    assert parts_of(kept)[0]["inline_data"] == expected


def test_redaction_is_idempotent() -> None:
    policy = parse_policy("all")
    once = apply_policy(event("user", [image()]), policy)
    assert once is not None
    assert apply_policy(once, policy) == once


def test_bytes_data_is_sized_by_length() -> None:
    kept = apply_policy(event("user", [{"inline_data": {"mime_type": "a/b", "data": b"12345"}}]), parse_policy("all"))
    assert parts_of(kept)[0]["inline_data"]["data_size"] == 5


@pytest.mark.parametrize("policy", [*sorted(PRESETS), *POLICIES_FOR_MEDIA, {"include_thought": True}])
@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_apply_policy_never_mutates_its_input(policy: Any, name: str) -> None:
    body = copy.deepcopy(SAMPLES[name])
    body["content"] = body.get("content") or {"role": "user", "parts": []}
    body["content"]["parts"] = [thought(), *body["content"]["parts"], image()]
    original = copy.deepcopy(body)
    kept = apply_policy(body, parse_policy(policy))
    assert body == original
    if kept is not None:
        assert kept is not body
        assert kept["content"] is not body["content"]
        assert kept["content"]["parts"] is not body["content"]["parts"]


def test_the_kept_copy_is_independent() -> None:
    body = event("user", [text("hi")], custom_metadata={"tags": ["a"]})
    kept = apply_policy(body, parse_policy("default"))
    assert kept == body
    assert kept is not None
    kept["custom_metadata"]["tags"].append("b")
    kept["content"]["parts"][0]["text"] = "changed"
    assert body["custom_metadata"]["tags"] == ["a"]
    assert body["content"]["parts"][0]["text"] == "hi"


# --------------------------------------------------------------------------------------------------------------
# Presets on a corpus of events
# --------------------------------------------------------------------------------------------------------------

CORPUS: dict[str, dict[str, Any]] = {
    "user text": user(),
    "agent text": agent(),
    "system text": system(),
    "user thought": event("user", [thought()]),
    "user empty": event("user", [text("")]),
    "agent call": event("agent", [fcall()]),
    "tool response": tool_response(),
    "user image": event("user", [image()]),
    "user text+image": event("user", [text("look"), image()]),
    "state only": event("agent", actions={"state_delta": {"k": 1}}),
    "agent error": event("agent", error_code="E", error_message="m"),
    "user transcription": event("user", input_transcription={"text": "spoken"}),
}


@pytest.mark.parametrize(
    ("preset", "kept"),
    [
        ("default", {"user text", "user text+image"}),
        ("custom", {"user text", "user text+image"}),
        ("all", set(CORPUS)),
    ],
)
def test_presets_on_a_corpus(preset: str, kept: set[str]) -> None:
    policy = parse_policy(preset)
    assert {name for name, body in CORPUS.items() if apply_policy(body, policy) is not None} == kept


def test_default_stores_only_the_text_of_a_mixed_user_event() -> None:
    assert parts_of(apply_policy(CORPUS["user text+image"], parse_policy("default"))) == [text("look")]


def test_all_keeps_events_whole_but_redacted() -> None:
    policy = parse_policy("all")
    for name, body in CORPUS.items():
        kept = apply_policy(body, policy)
        if "image" in name:
            assert kept != body
            assert parts_of(kept)[-1]["inline_data"]["data_omitted"] is True
        else:
            assert kept == body, name


# --------------------------------------------------------------------------------------------------------------
# memory_text
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (event("user", [text("hello")]), "hello"),
        (event("user", [text("one"), text("two")]), "one\ntwo"),
        (event("user", [text("one"), text(""), text("  "), text("two")]), "one\ntwo"),
        (event("agent", [thought("plan"), text("answer")]), "plan\nanswer"),
        (event("agent", [fcall("weather", {"city": "Lisbon", "a": 1})]), 'called weather({"a":1,"city":"Lisbon"})'),
        (event("agent", [{"function_call": {"name": "ping"}}]), "called ping({})"),
        (
            event("agent", [fresponse("weather", {"result": "sunny"})], role="user"),
            'weather returned: {"result":"sunny"}',
        ),
        (event("agent", [fresponse("lookup", {"items": ["é"]})], role="user"), 'lookup returned: {"items":["é"]}'),
        (event("user", [image()]), f"[image/png, {len(PNG)} bytes]"),
        (
            event("user", [{"inline_data": {"mime_type": "image/png", "data_size": 1234, "data_omitted": True}}]),
            "[image/png, 1234 bytes]",
        ),
        (event("user", [{"inline_data": {"data": "QUJD"}}]), "[binary, 3 bytes]"),
        (event("user", [file()]), "[application/pdf, gs://bucket/doc.pdf]"),
        (event("user", [{"file_data": {"file_uri": "gs://x"}}]), "[file, gs://x]"),
        (event("agent", [code("print(1)")]), "```python\nprint(1)\n```"),
        (event("agent", [result("1")]), "code result (OUTCOME_OK): 1"),
        (event("user", input_transcription={"text": "hello there", "finished": True}), "hello there"),
        (event("agent", output_transcription={"text": "hi"}), "hi"),
        (event("agent", outputTranscription={"text": "camel"}), "camel"),
        (event("user", input_transcription={"text": "q"}, output_transcription={"text": "a"}), "q\na"),
        (event("agent", error_code="MAX_TOKENS", error_message="too long"), "error MAX_TOKENS: too long"),
        (event("agent", error_code="SAFETY"), "error SAFETY"),
        (event("agent", error_message="boom"), "error: boom"),
        (event("agent", errorCode="E", errorMessage="m"), "error E: m"),
        (
            event("agent", [text("ok"), fcall("f", {})], error_code="E", output_transcription={"text": "said"}),
            "ok\ncalled f({})\nsaid\nerror E",
        ),
        (event("agent", [{"type": "image_url", "image_url": {"url": "https://x"}}]), ""),
        (event("agent", []), ""),
        (event("agent"), ""),
        (event("agent", [text("")]), ""),
    ],
)
def test_memory_text(body: dict[str, Any], expected: str) -> None:
    assert memory_text(body) == expected


def test_memory_text_of_kept_events_follows_the_policy() -> None:
    body = event("user", [thought("plan"), text("look"), image(), fcall("f", {"x": 1})], error_code="E")
    default_kept = apply_policy(body, parse_policy("default"))
    all_kept = apply_policy(body, parse_policy("all"))
    assert default_kept is not None and all_kept is not None
    assert memory_text(default_kept) == "look"
    assert memory_text(all_kept) == f'plan\nlook\n[image/png, {len(PNG)} bytes]\ncalled f({{"x":1}})\nerror E'
