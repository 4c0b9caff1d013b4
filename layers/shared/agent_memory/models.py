"""Pydantic models for sessions and events, reading and writing ADK's JSON.

Input accepts snake_case and ADK's camelCase aliases (``invocationId``, ``stateDelta``, ``functionCall`` …),
but not both spellings of one field in one object (422 naming the field: otherwise one of them would be kept
as an undeclared field, ``temp:`` state included). Output is snake_case. Every model keeps fields it does not
declare (``extra="allow"``), so nothing a client sends is lost on the way through storage, except fields whose
value is null (output omits nulls, as ADK's own JSON does); their names are stored snake_case
(``usageMetadata`` -> ``usage_metadata``, nested keys too, as ADK dumps GenAI types), their values as sent but
for that, and free-form maps (``FREE_FORM_FIELDS``: state, tool arguments, metadata) exactly as sent. Events
stored before names were converted keep their stored spelling.

These models are the request models of events: their bounds (``bounds.py``) apply to what a client sends.
"""

from __future__ import annotations

import base64
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import InitErrorDetails, PydanticCustomError

from .edge.bounds import Identifier, Metadata, State, Timestamp, ToolJson, check_extra_json
from .view import Session as Session  # a plain class (no pydantic on the session functions' cold path)
from .wire.jsonvalues import JsonRejected, parse_json_body
from .wire.plainevents import FREE_FORM_FIELDS as FREE_FORM_FIELDS
from .wire.plainevents import snake_case as snake_case
from .wire.plainevents import snake_case_keys  # pydantic-free: the append's reading without pydantic shares them


def reject_two_spellings(model: type[BaseModel], data: Any) -> None:
    """Raise a validation error naming the field when ``data`` holds both its name and its alias."""
    if not isinstance(data, dict):
        return
    for name, info in model.model_fields.items():
        alias = info.alias
        if alias and alias != name and name in data and alias in data:
            error = PydanticCustomError(
                "duplicate_field", "sent as both {name} and {alias}; send one", {"name": name, "alias": alias}
            )
            raise ValidationError.from_exception_data(
                model.__name__, [InitErrorDetails(type=error, loc=(name,), input=data)]
            )


def snake_case_extras(model: type[BaseModel], data: Any) -> Any:
    """``data`` with the fields ``model`` does not declare renamed snake_case (their nested keys too, but for
    free-form maps), so that output is snake_case everywhere; a field sent under both spellings is refused (422
    naming it), as a declared one is."""
    if not isinstance(data, dict):
        return data
    declared = set(model.model_fields) | {info.alias for info in model.model_fields.values() if info.alias}
    out: dict[Any, Any] = {}
    for key, value in data.items():
        if key in declared or not isinstance(key, str):
            out[key] = value
            continue
        name = snake_case(key)
        if name != key and name in data:
            error = PydanticCustomError(
                "duplicate_field", "sent as both {name} and {alias}; send one", {"name": name, "alias": key}
            )
            raise ValidationError.from_exception_data(
                model.__name__, [InitErrorDetails(type=error, loc=(name,), input=data)]
            )
        out[name] = value if name in FREE_FORM_FIELDS else snake_case_keys(value)
    return out


class _AdkModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        loc_by_alias=False,  # errors name fields as the API documents them (snake_case)
        ser_json_bytes="base64",
        val_json_bytes="base64",
        defer_build=True,
    )

    @model_validator(mode="before")
    @classmethod
    def _one_spelling(cls, data: Any) -> Any:
        data = cls._prepare(data)
        reject_two_spellings(cls, data)
        return snake_case_extras(cls, data)

    @classmethod
    def _prepare(cls, data: Any) -> Any:
        """The input as this model reads it (an Event converts a chat message first)."""
        return data

    @model_validator(mode="after")
    def _bounded_extras(self) -> _AdkModel:
        # Undeclared fields are stored as sent: they get the same depth and number bounds as declared JSON.
        for name, value in (self.model_extra or {}).items():
            try:
                check_extra_json(value)
            except PydanticCustomError as exc:
                raise ValidationError.from_exception_data(
                    type(self).__name__, [InitErrorDetails(type=exc, loc=(name,), input=value)]
                ) from None
        return self


class FunctionCall(_AdkModel):
    id: str | None = None
    name: str | None = None
    args: ToolJson | None = None


class FunctionResponse(_AdkModel):
    id: str | None = None
    name: str | None = None
    response: ToolJson | None = None


class Blob(_AdkModel):
    """Inline binary data. ``data`` travels as base64 text, as ADK serialises it."""

    mime_type: str | None = None
    data: str | None = None
    display_name: str | None = None

    @field_validator("data", mode="before")
    @classmethod
    def _bytes_to_base64(cls, value: Any) -> Any:
        if isinstance(value, bytes | bytearray):
            return base64.b64encode(value).decode("ascii")
        return value


class FileData(_AdkModel):
    file_uri: str | None = None
    mime_type: str | None = None
    display_name: str | None = None


class ExecutableCode(_AdkModel):
    code: str | None = None
    language: str | None = None


class CodeExecutionResult(_AdkModel):
    outcome: str | None = None
    output: str | None = None


class Part(_AdkModel):
    text: str | None = None
    thought: bool | None = None
    thought_signature: str | None = None
    function_call: FunctionCall | None = None
    function_response: FunctionResponse | None = None
    inline_data: Blob | None = None
    file_data: FileData | None = None
    executable_code: ExecutableCode | None = None
    code_execution_result: CodeExecutionResult | None = None


class Content(_AdkModel):
    role: str | None = None
    parts: list[Part] = Field(default_factory=list)


class EventCompaction(_AdkModel):
    start_timestamp: Timestamp
    end_timestamp: Timestamp
    compacted_content: Content


class EventActions(_AdkModel):
    skip_summarization: bool | None = None
    state_delta: State = Field(default_factory=dict)
    artifact_delta: Metadata = Field(default_factory=dict)
    transfer_to_agent: str | None = None
    escalate: bool | None = None
    requested_auth_configs: Metadata = Field(default_factory=dict)
    requested_tool_confirmations: Metadata = Field(default_factory=dict)
    compaction: EventCompaction | None = None


class Event(_AdkModel):
    """An ADK event (or an OpenAI-style / voice-agent chat message, converted), plus the chat-message fields
    ``turn_id`` (a string or an integer, kept as sent) and ``metadata``. A ``seq`` sent by a client is ignored:
    the server assigns it."""

    id: Identifier | None = None
    invocation_id: str = ""
    author: str = "user"
    branch: str | None = None
    timestamp: Timestamp | None = None
    content: Content | None = None
    actions: EventActions = Field(default_factory=EventActions)
    long_running_tool_ids: list[str] | None = None
    partial: bool | None = None
    turn_complete: bool | None = None
    interrupted: bool | None = None
    error_code: str | None = None
    error_message: str | None = None
    custom_metadata: Metadata | None = None
    turn_id: StrictStr | StrictInt | None = None
    metadata: Metadata | None = None
    seq: int | None = None

    @classmethod
    def _prepare(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        if is_chat_message(data):
            try:
                data = chat_message_to_event(data)
            except ValueError as exc:
                raise PydanticCustomError("chat_message", "{reason}", {"reason": str(exc)}) from exc
        else:
            data = dict(data)
        data.pop("seq", None)  # assigned by the server
        return data

    @field_validator("long_running_tool_ids", mode="before")
    @classmethod
    def _set_to_list(cls, value: Any) -> Any:
        # ADK models this as a set; JSON clients send a list.
        if isinstance(value, set | frozenset | tuple):
            return sorted(value)
        return value

    def dump(self) -> dict[str, Any]:
        """The event's JSON form: snake_case, without unset optional fields."""
        return self.model_dump(mode="json", exclude_none=True, by_alias=False)

    def stored(self, event_id: str, timestamp: float, state_delta: dict[str, Any]) -> dict[str, Any]:
        """The JSON the service stores: this event with ``id`` and ``timestamp`` set, no ``seq`` (the store assigns
        it) and ``actions.state_delta`` replaced (``temp:`` keys out). ``plainevents.PlainEvent.stored`` is the same
        without pydantic."""
        actions = self.actions.model_copy(update={"state_delta": state_delta})
        copy = self.model_copy(update={"id": event_id, "timestamp": timestamp, "seq": None, "actions": actions})
        return copy.dump()


# Chat messages: an OpenAI-style or voice-agent message becomes an Event that keeps every field.
_CHAT_ROLES = {"user", "assistant", "system", "developer", "tool", "function", "model"}
# ADK's content roles: the model speaks as "model"; function responses travel as "user".
_CONTENT_ROLE = {"assistant": "model", "tool": "user", "function": "user"}


def is_chat_message(data: dict[str, Any]) -> bool:
    """A chat message has a top-level ``role``; an ADK event has ``author`` and/or ``content.parts``."""
    return "role" in data and "author" not in data and not isinstance(data.get("content"), dict)


def chat_message_to_event(data: dict[str, Any]) -> dict[str, Any]:
    """Turn ``{role, content, turn_id?, timestamp?, metadata?, tool_calls?, tool_call_id?, name?}`` into event JSON.

    Text becomes text parts, ``tool_calls`` function_call parts, a ``tool`` message a function_response part.
    Everything else (``name``, audio, unknown keys) stays on the event as extra fields, so nothing is lost.
    """
    message = dict(data)
    role = message.pop("role")
    if not isinstance(role, str) or role not in _CHAT_ROLES:
        raise ValueError(f"role must be one of {sorted(_CHAT_ROLES)}")
    content = message.pop("content", None)
    parts: list[dict[str, Any]] = []
    if isinstance(content, str):
        parts.append({"text": content})
    elif isinstance(content, list):
        for item in content:
            if isinstance(item, dict) and item.get("type") == "text" and set(item) <= {"type", "text"}:
                parts.append({"text": item.get("text", "")})
            elif isinstance(item, dict):
                # Non-text content parts (images, audio) are kept verbatim as a part with extra fields.
                parts.append(dict(item))
            else:
                raise ValueError("content items must be objects")
    elif content is not None:
        raise ValueError("content must be a string, a list of content parts, or null")

    tool_call_id = message.pop("tool_call_id", None)
    if role in {"tool", "function"}:
        text = parts[0].get("text") if len(parts) == 1 else None
        parts = [
            {
                "function_response": {
                    "id": tool_call_id,
                    "name": message.get("name"),
                    "response": {"result": text if text is not None else content},
                }
            }
        ]
    elif tool_call_id is not None:
        message["tool_call_id"] = tool_call_id

    tool_calls = message.pop("tool_calls", None) or []
    if not isinstance(tool_calls, list):
        raise ValueError("tool_calls must be a list")
    for call in tool_calls:
        if not isinstance(call, dict):
            raise ValueError("tool_calls items must be objects")
        function = call.get("function") or {}
        if not isinstance(function, dict):
            raise ValueError("tool_calls[].function must be an object")
        args: Any = function.get("arguments")
        parts.append(
            {
                "function_call": {
                    "id": call.get("id"),
                    "name": function.get("name"),
                    "args": _parse_arguments(args),
                }
            }
        )

    event: dict[str, Any] = {
        "author": role,  # keeps "assistant" / "tool" as the client said it
        "content": {"role": _CONTENT_ROLE.get(role, role), "parts": parts},
    }
    event.update(message)
    return event


def _parse_arguments(args: Any) -> dict[str, Any]:
    if isinstance(args, dict):
        return args
    if isinstance(args, str):
        # The hardened parser: arguments a model wrote may nest without bound or hold NaN.
        try:
            parsed = parse_json_body(args) if args.strip() else {}
        except JsonRejected:
            return {"_raw": args}
        return parsed if isinstance(parsed, dict) else {"_raw": args}
    return {} if args is None else {"_raw": args}
