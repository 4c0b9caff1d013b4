"""Prompt building for model summarizers: render turns as text and fill the prompt template."""

from __future__ import annotations

import json
import string
from typing import Any

from agent_memory.providers.ports import Turn

PLACEHOLDER = "conversation_history"
_KNOWN_FIELDS = frozenset({"conversation_history", "previous_summary"})
NO_PREVIOUS_SUMMARY = "(none)"


def _compact_json(value: Any) -> str:
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    except (TypeError, ValueError):  # circular structures, exotic keys
        return repr(value)


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, with a marker saying how much was cut."""
    if limit < 0 or len(text) <= limit:
        return text
    return f"{text[:limit]}… [clipped {len(text) - limit} chars]"


def render_conversation(turns: list[Turn], max_tool_payload_chars: int = 500) -> str:
    """One line per text, tool call and tool result, in order, each tagged with its author.

    Tool arguments and results are compact JSON clipped to ``max_tool_payload_chars`` so a large tool output
    cannot crowd the conversation out of the model's context.
    """
    lines: list[str] = []
    for turn in turns:
        author = turn.author or turn.role or "unknown"
        text = turn.text.strip()
        if text:
            lines.append(f"[{author}] {text}")
        for call in turn.tool_calls:
            args = clip(_compact_json(call.args), max_tool_payload_chars)
            lines.append(f"[{author}] called {call.name}({args})")
        for result in turn.tool_results:
            payload = clip(_compact_json(result.result), max_tool_payload_chars)
            lines.append(f"[{author}] {result.name} returned: {payload}")
    return "\n".join(lines)


def validate_prompt_template(template: str) -> str:
    """Return ``template`` if it can be filled; raise ValueError naming the problem otherwise.

    The template must contain ``{conversation_history}`` and may contain ``{previous_summary}``; literal braces
    must be doubled (``{{`` and ``}}``).
    """
    if not isinstance(template, str) or not template.strip():
        raise ValueError("prompt template is empty; it must contain the {conversation_history} placeholder")
    try:
        fields = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as exc:
        raise ValueError(
            f"prompt template is malformed ({exc}); write literal braces as '{{{{' and '}}}}', and use only "
            "the {conversation_history} and {previous_summary} placeholders"
        ) from exc
    if PLACEHOLDER not in fields:
        raise ValueError("prompt template must contain the {conversation_history} placeholder")
    unknown = sorted(f for f in fields if f not in _KNOWN_FIELDS)
    if unknown:
        names = ", ".join("{" + f + "}" for f in unknown)
        raise ValueError(
            f"prompt template has unknown placeholder(s) {names}; only {{conversation_history}} and "
            "{previous_summary} are filled in (write literal braces as '{{' and '}}')"
        )
    try:
        template.format(conversation_history="", previous_summary="")
    except (KeyError, IndexError, ValueError, AttributeError, TypeError) as exc:
        raise ValueError(
            f"prompt template cannot be filled ({type(exc).__name__}: {exc}); use only the "
            "{conversation_history} and {previous_summary} placeholders and write literal braces as '{{' and '}}'"
        ) from exc
    return template


def build_prompt(template: str, turns: list[Turn], previous_summary: str | None) -> str:
    """The prompt for ``turns``: the rendered conversation and the previous summary filled into ``template``."""
    previous = (previous_summary or "").strip() or NO_PREVIOUS_SUMMARY
    return template.format(conversation_history=render_conversation(turns), previous_summary=previous)
