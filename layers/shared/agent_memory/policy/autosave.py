"""The auto-save memory policy: which events long-term memory keeps, and in what form.

A policy is a preset name, or an object ``{"preset": ..., <fields>}`` whose ``preset`` defaults to ``custom``
and whose fields override the preset's, one by one (a field the object does not set keeps the preset's value).

Presets:
- ``default``: user role, text parts only, no thoughts, no empty events;
- ``all``: roles user, assistant and system, every event type and part, thoughts and empty events included;
- ``custom``: the conservative defaults of ``default``, for the caller's fields to change.

Fields (lists are JSON arrays of strings; ``null`` for a list means "no filter"):
- ``include_roles`` / ``exclude_roles``: ``user``, ``assistant``, ``system`` (``model`` and ``developer`` are
  accepted as aliases of ``assistant`` and ``system``), matched against :func:`normalise_role`;
- ``include_authors`` / ``exclude_authors``: exact match on the event's ``author``;
- ``include_event_types`` / ``exclude_event_types``: the names in :data:`EVENT_TYPES` (``tool_call`` and
  ``tool_response`` are aliases of ``function_call`` and ``function_response``), matched against
  :func:`event_types`;
- ``text_only`` (bool): keep only text parts; ignored when ``include_event_types`` is set;
- ``include_thought`` (bool): keep thought parts (otherwise they are removed, the rest of the event kept);
- ``include_empty_text`` (bool): keep events that have nothing to index after filtering.

:func:`apply_policy` applies the rules in this order:

1. role and author filters: the event is dropped unless its role and author are included and not excluded;
2. event-type filters, on the event as it arrived: with ``include_event_types`` the event is dropped unless
   one of its types is listed; with ``exclude_event_types`` it is dropped if any of its types is listed;
3. part filtering, on a copy: thought parts are removed unless ``include_thought``; then, with
   ``include_event_types``, only parts (and the transcription and error fields) of the listed types are kept,
   a thought part needing both ``include_thought`` and ``thought`` listed; otherwise with ``text_only``, only
   text parts (and thoughts, if included) are kept and the transcription and error fields are removed;
   otherwise every part and field is kept. Parts of no known type (e.g. a chat client's verbatim content
   part) are kept only when neither ``include_event_types`` nor ``text_only`` applies;
4. empty-text check: the event is dropped when :func:`memory_text` of the filtered copy is blank (so a kept
   function call, media part or transcription counts as text), unless ``include_empty_text``;
5. redaction, whatever the policy: every ``inline_data`` object anywhere in the copy is replaced by
   ``{"mime_type", "data_size", "data_omitted": true}`` (``data_size`` being the decoded byte length).

Roles (:func:`normalise_role`): an author or content role ``system`` or ``developer`` makes the event
``system``; otherwise an author or content role ``user`` makes it ``user``; anything else (agent names,
``model``, ``assistant``, no author) is ``assistant``. ADK sends tool responses with content role ``user``
under the agent's name as author, so function-response events are ``user`` here (unlike
``messages.event_role``, which reads them as the assistant's).
"""

from __future__ import annotations

import copy
import json
from dataclasses import fields, replace
from typing import Any

from ..errors import UnprocessableInput
from ..runtime.lazyclass import dataclass  # processed on first instance (lazyclass.py)
from . import PRESETS  # their names; their policies below

ROLES = ("user", "assistant", "system")
ROLE_ALIASES = {"model": "assistant", "developer": "system"}
EVENT_TYPES = (
    "text",
    "thought",
    "function_call",
    "function_response",
    "media",
    "executable_code",
    "code_execution_result",
    "transcription",
    "error",
)
EVENT_TYPE_ALIASES = {"tool_call": "function_call", "tool_response": "function_response"}

_TRANSCRIPTION_FIELDS = ("input_transcription", "output_transcription", "inputTranscription", "outputTranscription")
_ERROR_FIELDS = ("error_code", "error_message", "errorCode", "errorMessage")
_INLINE_KEYS = ("inline_data", "inlineData")


@dataclass(frozen=True)
class MemoryPolicy:
    """A resolved policy. ``None`` for an ``include_*`` field means any; the constructor's defaults are ``default``."""

    preset: str = "default"
    include_roles: frozenset[str] | None = frozenset({"user"})
    exclude_roles: frozenset[str] = frozenset()
    include_authors: frozenset[str] | None = None
    exclude_authors: frozenset[str] = frozenset()
    include_event_types: frozenset[str] | None = None
    exclude_event_types: frozenset[str] = frozenset()
    text_only: bool = True
    include_thought: bool = False
    include_empty_text: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The policy as JSON (sorted lists); ``parse_policy(policy.to_dict()) == policy``."""
        data: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            data[f.name] = sorted(value) if isinstance(value, frozenset) else value
        return data


_PRESET_POLICIES = {
    "default": MemoryPolicy(preset="default"),
    "custom": MemoryPolicy(preset="custom"),
    "all": MemoryPolicy(
        preset="all",
        include_roles=frozenset(ROLES),
        text_only=False,
        include_thought=True,
        include_empty_text=True,
    ),
}

# field name -> kind of value: names of roles, authors, event types, or a boolean
_FIELD_KINDS = {
    "include_roles": "roles",
    "exclude_roles": "roles",
    "include_authors": "authors",
    "exclude_authors": "authors",
    "include_event_types": "event_types",
    "exclude_event_types": "event_types",
    "text_only": "bool",
    "include_thought": "bool",
    "include_empty_text": "bool",
}


# ----------------------------------------------------------------------------------------------------------------
# Parsing
# ----------------------------------------------------------------------------------------------------------------


def parse_policy(value: str | dict[str, Any] | None, default: str | dict[str, Any] = "default") -> MemoryPolicy:
    """Resolve a policy (a preset name or an object); ``None`` resolves ``default``.

    Raises :class:`UnprocessableInput` with ``field`` naming the offending part (``policy``, ``policy.preset``,
    ``policy.<field>``, ``policy.<field>[i]``).
    """
    if value is None:
        value = default
    if isinstance(value, str):
        return _preset(value, "policy")
    if not isinstance(value, dict):
        raise UnprocessableInput("policy must be a preset name or an object", field="policy")
    preset = value.get("preset", "custom")
    if not isinstance(preset, str):
        raise UnprocessableInput("policy.preset must be a string", field="policy.preset")
    policy = _preset(preset, "policy.preset")
    changes: dict[str, Any] = {}
    for key, raw in value.items():
        if key == "preset":
            continue
        kind = _FIELD_KINDS.get(key)
        if kind is None:
            raise UnprocessableInput(
                f"unknown policy field {key!r}; expected one of {['preset', *_FIELD_KINDS]}", field=f"policy.{key}"
            )
        changes[key] = _parse_field(key, kind, raw)
    return replace(policy, **changes)


def _preset(name: str, field_name: str) -> MemoryPolicy:
    try:
        return _PRESET_POLICIES[name]
    except KeyError:
        raise UnprocessableInput(
            f"unknown policy preset {name!r}; expected one of {list(PRESETS)}", field=field_name
        ) from None


def _parse_field(key: str, kind: str, raw: Any) -> Any:
    path = f"policy.{key}"
    if kind == "bool":
        if not isinstance(raw, bool):
            raise UnprocessableInput(f"{path} must be true or false", field=path)
        return raw
    if raw is None:
        return None if key.startswith("include_") else frozenset()
    if not isinstance(raw, list | tuple):
        raise UnprocessableInput(f"{path} must be a list of strings or null", field=path)
    names: set[str] = set()
    for i, item in enumerate(raw):
        item_path = f"{path}[{i}]"
        if not isinstance(item, str):
            raise UnprocessableInput(f"{item_path} must be a string", field=item_path)
        if kind == "roles":
            name = ROLE_ALIASES.get(item, item)
            if name not in ROLES:
                raise UnprocessableInput(
                    f"unknown role {item!r}; expected one of {[*ROLES, *ROLE_ALIASES]}", field=item_path
                )
        elif kind == "event_types":
            name = EVENT_TYPE_ALIASES.get(item, item)
            if name not in EVENT_TYPES:
                raise UnprocessableInput(
                    f"unknown event type {item!r}; expected one of {[*EVENT_TYPES, *EVENT_TYPE_ALIASES]}",
                    field=item_path,
                )
        else:
            name = item
        names.add(name)
    return frozenset(names)


# ----------------------------------------------------------------------------------------------------------------
# Reading events
# ----------------------------------------------------------------------------------------------------------------


def _get(data: dict[str, Any], snake: str) -> Any:
    """A field by its snake_case name, or its camelCase alias (as a raw client may send it)."""
    if data.get(snake) is not None:
        return data[snake]
    head, *rest = snake.split("_")
    return data.get(head + "".join(word.capitalize() for word in rest))


def _parts(event: dict[str, Any]) -> list[Any]:
    content = event.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    return parts if isinstance(parts, list) else []


def normalise_role(event: dict[str, Any]) -> str:
    """``system``, ``user`` or ``assistant`` (see the module docstring for the precedence)."""
    content = event.get("content")
    names = {event.get("author"), content.get("role") if isinstance(content, dict) else None}
    if names & {"system", "developer"}:
        return "system"
    if "user" in names:
        return "user"
    return "assistant"


def part_type(part: Any) -> str | None:
    """The event type a part contributes (None for a part of no known type). A thought part is ``thought`` only."""
    if not isinstance(part, dict):
        return None
    if part.get("thought"):
        return "thought"
    for name in ("function_call", "function_response", "executable_code", "code_execution_result"):
        if _get(part, name) is not None:
            return name
    if _get(part, "inline_data") is not None or _get(part, "file_data") is not None:
        return "media"
    if isinstance(part.get("text"), str):
        return "text"
    return None


def _has_transcription(event: dict[str, Any]) -> bool:
    return any(event.get(name) is not None for name in _TRANSCRIPTION_FIELDS)


def _has_error(event: dict[str, Any]) -> bool:
    return any(event.get(name) not in (None, "") for name in _ERROR_FIELDS)


def event_types(event: dict[str, Any]) -> frozenset[str]:
    """The event's types, canonical names only (``function_call``, never its alias ``tool_call``).

    A text part is ``text`` even when empty; the transcription and error types come from the event's fields.
    """
    types = {t for part in _parts(event) if (t := part_type(part)) is not None}
    if _has_transcription(event):
        types.add("transcription")
    if _has_error(event):
        types.add("error")
    return frozenset(types)


# ----------------------------------------------------------------------------------------------------------------
# Applying a policy
# ----------------------------------------------------------------------------------------------------------------


def apply_policy(event: dict[str, Any], policy: MemoryPolicy) -> dict[str, Any] | None:
    """The event as memory would store it (a filtered, redacted copy), or None when the policy drops it.

    Never mutates ``event``. The steps and their order are in the module docstring.
    """
    role = normalise_role(event)
    if policy.include_roles is not None and role not in policy.include_roles:
        return None
    if role in policy.exclude_roles:
        return None
    author = event.get("author")
    author = author if isinstance(author, str) else None
    if policy.include_authors is not None and author not in policy.include_authors:
        return None
    if author in policy.exclude_authors:
        return None

    types = event_types(event)
    if policy.include_event_types is not None and not types & policy.include_event_types:
        return None
    if types & policy.exclude_event_types:
        return None

    kept = copy.deepcopy(event)
    selected: frozenset[str] | None = None  # the part and field types kept; None: all of them
    if policy.include_event_types is not None:
        selected = policy.include_event_types
    elif policy.text_only:
        selected = frozenset({"text", "thought"})
    content = kept.get("content")
    if isinstance(content, dict) and isinstance(content.get("parts"), list):
        content["parts"] = [p for p in content["parts"] if _keep_part(p, policy, selected)]
    if selected is not None:
        if "transcription" not in selected:
            for name in _TRANSCRIPTION_FIELDS:
                kept.pop(name, None)
        if "error" not in selected:
            for name in _ERROR_FIELDS:
                kept.pop(name, None)

    if not policy.include_empty_text and not memory_text(kept).strip():
        return None
    _redact(kept)
    return kept


def _keep_part(part: Any, policy: MemoryPolicy, selected: frozenset[str] | None) -> bool:
    kind = part_type(part)
    if kind == "thought":
        return policy.include_thought and (selected is None or "thought" in selected)
    if selected is None:
        return True
    return kind is not None and kind in selected


def _base64_size(data: Any) -> int:
    """The decoded length of base64 text (padding optional, whitespace ignored), or of bytes."""
    if isinstance(data, bytes | bytearray):
        return len(data)
    if not isinstance(data, str):
        return 0
    digits = len("".join(data.split()).rstrip("="))
    return digits * 3 // 4


def _redacted_blob(blob: Any) -> dict[str, Any]:
    if not isinstance(blob, dict):
        return {"data_size": 0, "data_omitted": True}
    redacted: dict[str, Any] = {}
    mime_type = _get(blob, "mime_type")
    if mime_type is not None:
        redacted["mime_type"] = mime_type
    if blob.get("data_omitted") is True and "data" not in blob:
        size = blob.get("data_size")  # already redacted: keep its size
        redacted["data_size"] = size if isinstance(size, int) else 0
    else:
        redacted["data_size"] = _base64_size(blob.get("data"))
    redacted["data_omitted"] = True
    return redacted


def _redact(value: Any) -> Any:
    """Replace, in place, every ``inline_data`` object in ``value`` by its redacted form; returns ``value``."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in _INLINE_KEYS and item is not None:
                value[key] = _redacted_blob(item)
            else:
                value[key] = _redact(item)
    elif isinstance(value, list):
        value[:] = [_redact(item) for item in value]
    return value


# ----------------------------------------------------------------------------------------------------------------
# The text to index
# ----------------------------------------------------------------------------------------------------------------


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, default=str)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _part_text(part: Any) -> str:
    if not isinstance(part, dict):
        return ""
    kind = part_type(part)
    if kind in ("text", "thought"):
        text = part.get("text")
        return text if isinstance(text, str) else ""
    if kind == "function_call":
        call = _dict(_get(part, "function_call"))
        return f"called {call.get('name') or ''}({_json(call.get('args') or {})})"
    if kind == "function_response":
        response = _dict(_get(part, "function_response"))
        return f"{response.get('name') or ''} returned: {_json(response.get('response'))}"
    if kind == "executable_code":
        code = _dict(_get(part, "executable_code"))
        return f"```{str(code.get('language') or '').lower()}\n{code.get('code') or ''}\n```"
    if kind == "code_execution_result":
        result = _dict(_get(part, "code_execution_result"))
        return f"code result ({result.get('outcome') or 'unknown'}): {result.get('output') or ''}"
    if kind == "media":
        if (blob := _get(part, "inline_data")) is not None:
            blob = _dict(blob)
            size = blob.get("data_size") if blob.get("data_omitted") is True else None
            size = size if isinstance(size, int) else _base64_size(blob.get("data"))
            return f"[{_get(blob, 'mime_type') or 'binary'}, {size} bytes]"
        file = _dict(_get(part, "file_data"))
        return f"[{_get(file, 'mime_type') or 'file'}, {_get(file, 'file_uri') or ''}]"
    return ""


def _transcription_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    text = _dict(value).get("text")
    return text if isinstance(text, str) else ""


def memory_text(kept_event: dict[str, Any]) -> str:
    """The text to index for a kept event: its parts in order, then its transcriptions, then its error.

    Text (and kept thought) parts are their text; function call ``called name({"arg":1})``; function response
    ``name returned: {"result":"sunny"}``; media ``[image/png, 1234 bytes]`` or ``[application/pdf, gs://…]``;
    code in a fenced block; code result ``code result (OUTCOME_OK): output``; transcriptions their text; an
    error ``error CODE: message``. Blank pieces are left out; the rest are joined by newlines.
    """
    pieces = [_part_text(part) for part in _parts(kept_event)]
    pieces += [_transcription_text(_get(kept_event, name)) for name in ("input_transcription", "output_transcription")]
    if _has_error(kept_event):
        code = _get(kept_event, "error_code")
        message = _get(kept_event, "error_message")
        head = f"error {code}" if code not in (None, "") else "error"
        pieces.append(f"{head}: {message}" if message not in (None, "") else head)
    return "\n".join(p for p in pieces if p.strip())
