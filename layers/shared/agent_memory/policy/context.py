"""The context window: from a session's newest summary and the events after it, the messages to send next.

Rules:
- The newest compaction summary, when there is one, comes first as one ``system`` message; the raw events it
  covers are never emitted as well, and older summaries never stack.
- Budgets (``max_tokens``, approximate; ``max_messages``; ``max_chars``) are filled newest first with a
  contiguous tail of the conversation; when even the newest message is over budget, its tail is kept.
- A tool call and its results are one unit: all in or all out. A call without its result (or a result without
  its call) is left out, since model APIs reject either.
- ``keep_first`` keeps the first message after the summary; ``start_with_user`` drops leading non-user
  messages after the summary.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidInput
from .messages import Message, compaction_range, event_messages, is_compaction, summary_text

FORMATS = ("openai", "full", "adk")
SUMMARY_PREFIX = "Summary of the earlier conversation:\n"


@dataclass(frozen=True)
class ContextOptions:
    format: str = "openai"
    max_tokens: int | None = None
    max_messages: int | None = None
    max_chars: int | None = None
    keep_first: bool = False
    start_with_user: bool = False
    include_summary: bool = True

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise InvalidInput(f"format must be one of {', '.join(FORMATS)}", field="format")
        for name in ("max_tokens", "max_messages", "max_chars"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise InvalidInput(f"{name} must be 1 or more", field=name)


class _Budget:
    def __init__(self, options: ContextOptions) -> None:
        self.options = options
        self.tokens = 0
        self.chars = 0
        self.messages = 0

    def fits(self, messages: list[Message]) -> bool:
        o = self.options
        return (
            (o.max_tokens is None or self.tokens + sum(m.tokens() for m in messages) <= o.max_tokens)
            and (o.max_chars is None or self.chars + sum(m.chars() for m in messages) <= o.max_chars)
            and (o.max_messages is None or self.messages + len(messages) <= o.max_messages)
        )

    def take(self, messages: list[Message]) -> None:
        self.tokens += sum(m.tokens() for m in messages)
        self.chars += sum(m.chars() for m in messages)
        self.messages += len(messages)

    def tail_cut(self, message: Message) -> Message | None:
        """The message with only as much of the end of its text as the remaining budget allows."""
        if message.tool_calls or message.content is None:
            return None
        o = self.options
        room = len(message.content)
        if o.max_chars is not None:
            room = min(room, o.max_chars - self.chars)
        if o.max_tokens is not None:
            room = min(room, (o.max_tokens - self.tokens - 4) * 4)
        if o.max_messages is not None and self.messages >= o.max_messages:
            room = 0
        if room <= 0:
            return None
        cut = copy.copy(message)
        cut.content = message.content[len(message.content) - room :]
        return cut


def _units(messages: list[Message]) -> list[list[Message]]:
    """Group messages into units, in conversation order: a tool call with all its results is one unit, any
    other message a unit of its own. Incomplete tool units (a call missing a result, a result without its
    call) are left out."""
    units: list[list[Message]] = []
    open_calls: dict[str, int] = {}  # call id -> unit index
    unanswered: dict[str, list[str]] = {}  # unanswered call ids by tool name, for responses without an id
    for message in messages:
        if message.tool_calls:
            units.append([message])
            for call in message.tool_calls:
                open_calls[call["id"]] = len(units) - 1
                unanswered.setdefault(call["function"]["name"], []).append(call["id"])
        elif message.role == "tool":
            call_id = message.tool_call_id
            if call_id is None and unanswered.get(message.name or ""):
                call_id = unanswered[message.name or ""][0]
                message = copy.copy(message)
                message.tool_call_id = call_id
            if call_id is None or call_id not in open_calls:
                units.append([message])  # an orphan result; removed below
                continue
            units[open_calls.pop(call_id)].append(message)
            pending = unanswered.get(message.name or "") or []
            if call_id in pending:
                pending.remove(call_id)
        else:
            units.append([message])
    return [unit for unit in units if _complete(unit)]


def _complete(unit: list[Message]) -> bool:
    head = unit[0]
    if head.tool_calls:
        answered = {m.tool_call_id for m in unit[1:]}
        return all(call["id"] in answered for call in head.tool_calls)
    return head.role != "tool"


def build_context(
    events: list[dict[str, Any]], summary_event: dict[str, Any] | None, options: ContextOptions
) -> dict[str, Any]:
    """The messages to send a model next, from the newest summary and the events after it (oldest first).

    ``events`` are the session's events after the range ``summary_event`` covers; compaction events among them
    are ignored. Returns ``{messages, summary, token_estimate, compacted_events, dropped_events}``.
    """
    raw = [e for e in events if not is_compaction(e)]
    messages = [m for e in raw for m in event_messages(e)]
    units = _units(messages)
    budget = _Budget(options)

    summary: str | None = None
    summary_message: Message | None = None
    if summary_event is not None and options.include_summary:
        summary = summary_text(summary_event)
        candidate = Message(
            role="system",
            content=SUMMARY_PREFIX + summary,
            seq=int(summary_event.get("seq") or 0),
            event_id=str(summary_event.get("id") or ""),
            timestamp=summary_event.get("timestamp"),
            adk={"role": "model", "parts": [{"text": SUMMARY_PREFIX + summary}]},
        )
        summary_message = candidate if budget.fits([candidate]) else budget.tail_cut(candidate)
        if summary_message is not None:
            budget.take([summary_message])

    first: list[Message] = []
    rest = units
    if options.keep_first and units and budget.fits(units[0]):
        first = units[0]
        budget.take(first)
        rest = units[1:]
    chosen: list[list[Message]] = []
    for unit in reversed(rest):
        if not budget.fits(unit):
            if not chosen and len(unit) == 1 and (cut := budget.tail_cut(unit[0])) is not None:
                budget.take([cut])
                chosen.append([cut])
            break
        budget.take(unit)
        chosen.append(unit)
    selected = ([first] if first else []) + list(reversed(chosen))
    if options.start_with_user:
        while selected and selected[0][0].role != "user":
            selected.pop(0)

    out = [summary_message] if summary_message else []
    out += [m for unit in selected for m in unit]
    emitted_events = {m.event_id for m in out}
    with_messages = {m.event_id for m in messages}
    covered = compaction_range(summary_event) if summary_event is not None else {}
    return {
        "messages": [_render(m, options.format) for m in out],
        "summary": summary,
        "token_estimate": sum(m.tokens() for m in out),
        "compacted_events": int(covered.get("event_count", 0)),
        "dropped_events": len(with_messages - emitted_events),
    }


def _render(message: Message, fmt: str) -> dict[str, Any]:
    if fmt == "adk":
        if message.role == "system":
            return {"role": "model", "parts": [{"text": message.content or ""}]}
        adk = copy.deepcopy(message.adk)
        if message.role != "tool" and not message.tool_calls and message.content is not None:
            # A tail-cut message keeps only its cut text.
            joined = "\n".join(p.get("text", "") for p in adk.get("parts", []) if "text" in p)
            if joined != message.content:
                adk["parts"] = [{"text": message.content}]
        return adk
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = message.tool_calls
    if message.role == "tool":
        out["tool_call_id"] = message.tool_call_id
    if fmt == "full":
        out["turn_id"] = message.turn_id
        out["timestamp"] = message.timestamp
        out["metadata"] = message.metadata or {}
    return out
