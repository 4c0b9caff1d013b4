"""Events as chat messages: the shared reading of an event's parts used by the context window and compaction.

An event becomes zero or more messages: its text (thoughts left out) as a user, assistant or system message;
its function calls as one assistant message with ``tool_calls``; each function response as a ``tool``
message. Code, code results, inline data and files are rendered as short text so that no part kind is lost
from a text-only model's view.
"""

from __future__ import annotations

import json
import math
from dataclasses import field
from typing import Any

from ..runtime.lazyclass import dataclass  # processed on first instance (lazyclass.py)

COMPACTION_META = "agent_memory:compaction"


@dataclass
class Message:
    role: str  # system | user | assistant | tool
    content: str | None
    seq: int
    event_id: str
    tool_calls: list[dict[str, Any]] | None = None  # OpenAI shape: {id, type, function: {name, arguments}}
    tool_call_id: str | None = None
    name: str | None = None
    turn_id: str | None = None
    timestamp: float | None = None
    metadata: dict[str, Any] | None = None
    adk: dict[str, Any] = field(default_factory=dict)  # ADK content {role, parts} of this message

    def chars(self) -> int:
        size = len(self.content or "")
        for call in self.tool_calls or []:
            size += len(call["function"]["name"]) + len(call["function"]["arguments"])
        return size

    def tokens(self) -> int:
        """Approximate tokens: ~4 characters a token plus a few for the message's framing."""
        return 4 + math.ceil(self.chars() / 4)


def is_compaction(event: dict[str, Any]) -> bool:
    return bool((event.get("actions") or {}).get("compaction"))


def event_role(event: dict[str, Any]) -> str:
    """user, assistant or system: ADK's ``model`` and any agent author are the assistant."""
    content_role = (event.get("content") or {}).get("role")
    author = event.get("author")
    if content_role in {"system", "developer"} or author in {"system", "developer"}:
        return "system"
    if author == "user" or (content_role == "user" and author in {None, "", "user"}):
        return "user"
    return "assistant"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _result_text(response: Any) -> str:
    if isinstance(response, dict) and set(response) == {"result"} and isinstance(response["result"], str):
        return response["result"]
    return _json(response)


def part_text(part: dict[str, Any]) -> str | None:
    """The text a non-tool part contributes to a message (None for tool parts and thoughts)."""
    if part.get("thought"):
        return None
    if part.get("text") is not None:
        return str(part["text"])
    if code := part.get("executable_code"):
        return f"```{(code.get('language') or '').lower()}\n{code.get('code') or ''}\n```"
    if result := part.get("code_execution_result"):
        return f"Code execution result ({result.get('outcome') or 'unknown'}):\n{result.get('output') or ''}"
    if blob := part.get("inline_data"):
        return f"[{blob.get('mime_type') or 'binary'} data omitted]"
    if file := part.get("file_data"):
        return f"[file: {file.get('file_uri') or ''}]"
    return None


def event_messages(event: dict[str, Any]) -> list[Message]:
    """The messages an event contributes (none for state-only, partial and compaction events)."""
    if event.get("partial") or is_compaction(event):
        return []
    parts = (event.get("content") or {}).get("parts") or []
    texts: list[str] = []
    text_parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    responses: list[dict[str, Any]] = []
    for part in parts:
        if part.get("function_call"):
            calls.append(part["function_call"])
        elif part.get("function_response"):
            responses.append(part["function_response"])
        elif (text := part_text(part)) is not None:
            texts.append(text)
            text_parts.append(part)
    common: dict[str, Any] = {
        "seq": int(event.get("seq") or 0),
        "event_id": str(event.get("id") or ""),
        "turn_id": event.get("turn_id"),
        "timestamp": event.get("timestamp"),
        "metadata": event.get("metadata"),
    }
    role = event_role(event)
    text = "\n".join(t for t in texts if t)
    messages: list[Message] = []
    if calls:
        tool_calls = [
            {
                "id": call.get("id") or f"call_{common['event_id']}_{i}",
                "type": "function",
                "function": {"name": call.get("name") or "", "arguments": _json(call.get("args") or {})},
            }
            for i, call in enumerate(calls)
        ]
        adk_parts = [*text_parts, *({"function_call": c} for c in calls)]
        messages.append(
            Message(
                role="assistant",
                content=text or None,
                tool_calls=tool_calls,
                adk={"role": "model", "parts": adk_parts},
                **common,
            )
        )
    elif text:
        adk_role = "user" if role == "user" else "model"
        messages.append(Message(role=role, content=text, adk={"role": adk_role, "parts": text_parts}, **common))
    for response in responses:
        messages.append(
            Message(
                role="tool",
                content=_result_text(response.get("response")),
                tool_call_id=response.get("id"),
                name=response.get("name"),
                adk={"role": "user", "parts": [{"function_response": response}]},
                **common,
            )
        )
    return messages


def summary_text(compaction_event: dict[str, Any]) -> str:
    """The text of a compaction event's summary."""
    compaction = (compaction_event.get("actions") or {}).get("compaction") or {}
    parts = (compaction.get("compacted_content") or {}).get("parts") or []
    return "\n".join(str(p["text"]) for p in parts if p.get("text"))


def compaction_range(compaction_event: dict[str, Any]) -> dict[str, Any]:
    """The seq range and event count a compaction covers (kept in its custom_metadata)."""
    meta = (compaction_event.get("custom_metadata") or {}).get(COMPACTION_META) or {}
    return dict(meta)
