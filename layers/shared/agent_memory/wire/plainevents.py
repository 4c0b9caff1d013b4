"""The append's body read without pydantic: an ADK event (or a batch of them) as ADK's ``Runner`` sends it.

``models.Event`` is a pydantic model, and importing pydantic with the event models costs a fresh append function
more than its whole first request. So ``params.py`` first hands an append's body to ``append_body`` here, which
reads the common shapes to exactly what the pydantic models would make of them: text, thought and tool-call parts,
``author``, ``invocation_id``, ``branch``, ``timestamp``, ``actions`` with state, artifact and auth deltas, the
flags, metadata, undeclared fields (kept, their names snake_case as ``models`` renames them). It only *accepts*:
a value of another type than the JSON type pydantic would take unconverted (a numeric string for a time, ``1`` for
a boolean), a bound passed, a chat message, inline data, a compaction, a name sent under both spellings, … are
``UNSURE``, and Powertools' pydantic validation reads the whole body as before (its errors, its 4xx).

What the service stores of an event read here, ``PlainEvent.stored``, is what ``Event.dump()`` gives for the model
(``model_dump(mode="json", exclude_none=True)``): declared fields in the model's order, then undeclared ones in the
order sent, ``None`` values left out at every model level (not inside free-form values), defaults filled
(``tests/unit/test_event_parity.py`` holds both to generated bodies, byte for byte).

The JSON helpers ``models.py`` shares (``snake_case``, ``FREE_FORM_FIELDS``) live here, so that this module needs no
pydantic.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from ..limits import (
    MAX_BATCH,
    MAX_METADATA_BYTES,
    MAX_STATE_BYTES,
    MAX_STATE_KEYS,
    MAX_TIMESTAMP,
    MAX_TOOL_JSON_BYTES,
    MAX_VALUE_DEPTH,
    MIN_TIMESTAMP,
)
from ..policy.identifiers import IDENTIFIER_PATTERN
from .jsonvalues import JsonRejected, check_json_value

UNSURE = object()
"""What a reading answers for a body it does not take: pydantic decides (and words the error). ``params.UNSURE``."""

# The bounds bounds.py declares (it imports them from here / params.py).

_CAMEL = re.compile(r"[a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)+")
_HUMP = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
# Free-form maps: their keys are the client's data (state keys, tool arguments, metadata), never field names, so
# they are kept exactly as sent wherever they appear (ADK's ``agent_state`` and GenAI's ``part_metadata`` are not
# modelled here but are such maps too).
FREE_FORM_FIELDS = frozenset(
    {
        "state",
        "state_delta",
        "artifact_delta",
        "custom_metadata",
        "metadata",
        "args",
        "response",
        "agent_state",
        "part_metadata",
        "requested_auth_configs",
        "requested_tool_confirmations",
        # ADK 2's structured output of an agent (``Event.output``, ``actions.set_model_response``) and a UI
        # widget's ``payload``: the application's own data, whatever its spelling.
        "output",
        "set_model_response",
        "payload",
    }
)


def snake_case(name: str) -> str:
    """``usageMetadata`` -> ``usage_metadata``; a name that is not camelCase is returned unchanged."""
    return _HUMP.sub("_", name).lower() if _CAMEL.fullmatch(name) else name


def snake_case_keys(value: Any) -> Any:
    """A value of a field the service does not model, with camelCase keys turned snake_case at every level but
    inside free-form maps (``FREE_FORM_FIELDS``), as ADK's own JSON has them (GenAI types dumped by name)."""
    if isinstance(value, list):
        return [snake_case_keys(item) for item in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        name = snake_case(key) if isinstance(key, str) else key
        if name in out and name != key:  # both spellings in one object: the snake_case one wins
            continue
        out[name] = item if name in FREE_FORM_FIELDS else snake_case_keys(item)
    return out


def to_camel(name: str) -> str:
    """pydantic's ``alias_generators.to_camel`` for the snake_case field names below (``invocation_id`` ->
    ``invocationId``); a test compares it with pydantic's on every declared field."""
    head, *rest = name.split("_")
    return head + "".join(word.capitalize() for word in rest)


# --- field readers: a JSON value -> the value pydantic's field type makes of it, or UNSURE ------------------------
Reader = Callable[[Any], Any]
_IDENTIFIER = re.compile(IDENTIFIER_PATTERN)


def _text(value: Any) -> Any:
    return value if type(value) is str else UNSURE


def _optional(read: Reader) -> Reader:
    def optional(value: Any) -> Any:
        return None if value is None else read(value)

    return optional


def _flag(value: Any) -> Any:
    return value if type(value) is bool else UNSURE  # pydantic's lax bool takes 1, "yes", …: it answers those


def _identifier(value: Any) -> Any:
    return value if type(value) is str and _IDENTIFIER.fullmatch(value) else UNSURE


def _timestamp(value: Any) -> Any:
    """``bounds.Timestamp``: a JSON number (not a boolean; a numeric string is pydantic's), finite, in range."""
    if type(value) is int:  # compared as an int: a huge one is out of range, never an OverflowError
        return float(value) if MIN_TIMESTAMP <= value <= MAX_TIMESTAMP else UNSURE
    if type(value) is not float or not math.isfinite(value) or not MIN_TIMESTAMP <= value <= MAX_TIMESTAMP:
        return UNSURE
    return value


def _json_object(max_bytes: int, max_keys: int | None = None) -> Reader:
    """``bounds.State`` / ``Metadata`` / ``ToolJson``: a JSON object within the depth, the size (and the keys)."""

    def read(value: Any) -> Any:
        if type(value) is not dict or (max_keys is not None and len(value) > max_keys):
            return UNSURE
        try:
            size = check_json_value(value, max_depth=MAX_VALUE_DEPTH)
        except JsonRejected:
            return UNSURE
        return dict(value) if size <= max_bytes else UNSURE

    return read


def _texts(value: Any) -> Any:
    """``list[str]``."""
    return list(value) if type(value) is list and all(type(item) is str for item in value) else UNSURE


def _turn_id(value: Any) -> Any:
    """``StrictStr | StrictInt``, kept as sent."""
    if type(value) is str or (type(value) is int and -(2**63) <= value < 2**63):
        return value
    return UNSURE


def _none(value: Any) -> Any:
    """A field whose model is left to pydantic (inline data, a compaction): only its absence is read here."""
    return None if value is None else UNSURE


class Model:
    """One of ``models.py``'s ``_AdkModel`` classes as read here: its fields in declaration order, each with its
    camelCase alias, the reader of its type and its default, used when the field is absent (a callable: called,
    as ``default_factory``)."""

    def __init__(self, name: str, fields: list[tuple[str, Reader, Any]]) -> None:
        self.name = name
        self.fields = [(field, to_camel(field), read, default) for field, read, default in fields]
        self.declared = frozenset(f for field, alias, _, _ in self.fields for f in (field, alias))

    def read(self, data: Any) -> Any:
        """``data`` as the model's dump: a dict of its fields (declared then undeclared), or UNSURE."""
        if type(data) is not dict:
            return UNSURE
        values: dict[str, Any] = {}
        for field, alias, read, default in self.fields:
            if field in data:
                if alias != field and alias in data:
                    return UNSURE  # both spellings: models.reject_two_spellings' 422
                raw = data[field]
            elif alias in data:
                raw = data[alias]
            else:
                values[field] = default() if callable(default) else default
                continue
            value = read(raw)
            if value is UNSURE:
                return UNSURE
            values[field] = value
        extras = _extras(data, self.declared)
        if extras is UNSURE:
            return UNSURE
        values.update(extras)
        return values


def _extras(data: dict[str, Any], declared: frozenset[str]) -> Any:
    """The fields ``data`` holds that the model does not declare, as ``models.snake_case_extras`` renames them and
    ``_AdkModel._bounded_extras`` bounds them; UNSURE for what pydantic refuses or reads in ways not mirrored here
    (two names that become one, a name that becomes a declared one)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key in declared:
            continue
        if type(key) is not str:
            return UNSURE
        name = snake_case(key)
        if name != key and (name in data or name in declared):
            return UNSURE
        if name in out:
            return UNSURE
        value = value if name in FREE_FORM_FIELDS else snake_case_keys(value)
        try:
            check_json_value(value, max_depth=MAX_VALUE_DEPTH)
        except JsonRejected:
            return UNSURE
        out[name] = value
    return out


def _model(model: Model) -> Reader:
    """A nested model's field: its values as dumped (``None`` fields left out)."""

    def read(value: Any) -> Any:
        values = model.read(value)
        return UNSURE if values is UNSURE else _without_none(values)

    return read


def _list_of(model: Model) -> Reader:
    def read(value: Any) -> Any:
        if type(value) is not list:
            return UNSURE
        items = []
        for item in value:
            found = model.read(item)
            if found is UNSURE:
                return UNSURE
            items.append(_without_none(found))
        return items

    return read


_STR = _optional(_text)
FUNCTION_CALL = Model(
    "FunctionCall",
    [("id", _STR, None), ("name", _STR, None), ("args", _optional(_json_object(MAX_TOOL_JSON_BYTES)), None)],
)
FUNCTION_RESPONSE = Model(
    "FunctionResponse",
    [("id", _STR, None), ("name", _STR, None), ("response", _optional(_json_object(MAX_TOOL_JSON_BYTES)), None)],
)
PART = Model(
    "Part",
    [
        ("text", _STR, None),
        ("thought", _optional(_flag), None),
        ("thought_signature", _STR, None),
        ("function_call", _optional(_model(FUNCTION_CALL)), None),
        ("function_response", _optional(_model(FUNCTION_RESPONSE)), None),
        ("inline_data", _none, None),
        ("file_data", _none, None),
        ("executable_code", _none, None),
        ("code_execution_result", _none, None),
    ],
)
CONTENT = Model("Content", [("role", _STR, None), ("parts", _list_of(PART), list)])
_METADATA = _json_object(MAX_METADATA_BYTES)
ACTIONS = Model(
    "EventActions",
    [
        ("skip_summarization", _optional(_flag), None),
        ("state_delta", _json_object(MAX_STATE_BYTES, MAX_STATE_KEYS), dict),
        ("artifact_delta", _METADATA, dict),
        ("transfer_to_agent", _STR, None),
        ("escalate", _optional(_flag), None),
        ("requested_auth_configs", _METADATA, dict),
        ("requested_tool_confirmations", _METADATA, dict),
        ("compaction", _none, None),
    ],
)
EVENT = Model(
    "Event",
    [
        ("id", _optional(_identifier), None),
        ("invocation_id", _text, ""),
        ("author", _text, "user"),
        ("branch", _STR, None),
        ("timestamp", _optional(_timestamp), None),
        ("content", _optional(_model(CONTENT)), None),
        ("actions", _model(ACTIONS), lambda: _without_none(ACTIONS.read({}))),
        ("long_running_tool_ids", _optional(_texts), None),
        ("partial", _optional(_flag), None),
        ("turn_complete", _optional(_flag), None),
        ("interrupted", _optional(_flag), None),
        ("error_code", _STR, None),
        ("error_message", _STR, None),
        ("custom_metadata", _optional(_METADATA), None),
        ("turn_id", _optional(_turn_id), None),
        ("metadata", _optional(_METADATA), None),
        ("seq", _none, None),  # models.Event._prepare drops a client's seq before this is read
    ],
)
MODELS = (FUNCTION_CALL, FUNCTION_RESPONSE, PART, CONTENT, ACTIONS, EVENT)


class Actions:
    """``models.EventActions`` as read here: ``state_delta`` for the service and ``access.app_state_key``."""

    __slots__ = ("state_delta", "values")

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values
        self.state_delta: dict[str, Any] = values["state_delta"]


class PlainEvent:
    """``models.Event`` as read here: what the service needs of it (``id``, ``timestamp``, ``actions.state_delta``)
    and ``stored``, the event's stored JSON (``Event.dump()`` of the service's filled-in copy)."""

    __slots__ = ("actions", "id", "timestamp", "values")

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values
        self.id: str | None = values["id"]
        self.timestamp: float | None = values["timestamp"]
        self.actions = Actions(values["actions"])

    def stored(self, event_id: str, timestamp: float, state_delta: dict[str, Any]) -> dict[str, Any]:
        """The event's JSON with ``id`` and ``timestamp`` set and ``state_delta`` replaced (``temp:`` keys out)."""
        values = dict(self.values)
        values["id"], values["timestamp"] = event_id, timestamp
        values["actions"] = {**self.actions.values, "state_delta": state_delta}
        return _without_none(values)

    def dump(self) -> dict[str, Any]:
        """``Event.dump()``: the JSON form as sent (no id or time filled in)."""
        return _without_none(self.values)


def _without_none(values: dict[str, Any]) -> dict[str, Any]:
    """A model's values as ``model_dump(exclude_none=True)`` gives them: its ``None`` fields left out (its nested
    models were read without theirs: ``_model``); a value an event does not declare keeps the nulls inside it, as
    pydantic dumps ``Any``."""
    return {key: value for key, value in values.items() if value is not None}


class PlainBatch:
    """``requests.EventBatch`` as read here."""

    __slots__ = ("events",)

    def __init__(self, events: list[PlainEvent]) -> None:
        self.events = events


def event(body: Any) -> Any:
    """One event as ``models.Event`` reads it, or UNSURE."""
    if type(body) is not dict:
        return UNSURE
    if "role" in body and "author" not in body and not isinstance(body.get("content"), dict):
        return UNSURE  # a chat message: models.chat_message_to_event converts it
    if "seq" in body:
        body = {k: v for k, v in body.items() if k != "seq"}  # assigned by the server
    values = EVENT.read(body)
    return UNSURE if values is UNSURE else PlainEvent(values)


def append_body(body: Any) -> Any:
    """The append's body (``Annotated[AppendRequest, Body()]``): one event, or ``{events: [...]}`` of 1 to
    MAX_BATCH events (``requests._append_shape`` tells them apart), each as ``event`` reads it; else UNSURE."""
    if type(body) is dict and "events" in body and not {"author", "content", "role"} & set(body):
        events = body["events"]
        if len(body) != 1 or type(events) is not list or not 1 <= len(events) <= MAX_BATCH:
            return UNSURE
        read = []
        for item in events:
            found = event(item)
            if found is UNSURE:
                return UNSURE
            read.append(found)
        return PlainBatch(read)
    return event(body)
