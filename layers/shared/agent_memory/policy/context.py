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
- Long-term memory (``Recall``): the output is the base ``system`` messages (in the order given), the user's
  profile, the recalled memories (with their dates), then the summary and the conversation. The base messages are
  always kept (a budget too small for them alone is refused, ``system``). Memories and profile give way first:
  while the whole lot is over budget, memory hits are dropped (lowest score first), then profile facts (last
  first), and only when neither is left is the conversation trimmed as above.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from ..errors import InvalidInput, UnprocessableInput
from ..limits import MAX_CONTEXT_MEMORIES, MAX_SYSTEM_CHARS, MAX_SYSTEM_MESSAGES
from ..runtime.lazyclass import dataclass  # processed on first instance (lazyclass.py)
from .messages import Message, compaction_range, event_messages, is_compaction, summary_text

FORMATS = ("openai", "full", "adk")
SUMMARY_PREFIX = "Summary of the earlier conversation:\n"
MEMORIES_PREFIX = "Relevant memories of earlier conversations:\n"


@dataclass(frozen=True)
class ContextOptions:
    format: str = "openai"
    max_tokens: int | None = None
    max_messages: int | None = None
    max_chars: int | None = None
    keep_first: bool = False
    start_with_user: bool = False
    include_summary: bool = True
    system: tuple[str, ...] = ()  # base system messages, first, in this order
    memories: int = 0  # how many memory hits to recall (0: none)
    memory_query: str | None = None  # what to search memory for (default: the latest user message)
    memory_min_score: float | None = None  # None: the search's calibrated cut
    profile: bool = False  # add the user's profile

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise InvalidInput(f"format must be one of {', '.join(FORMATS)}", field="format")
        for name in ("max_tokens", "max_messages", "max_chars"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise InvalidInput(f"{name} must be 1 or more", field=name)
        if len(self.system) > MAX_SYSTEM_MESSAGES:
            raise InvalidInput(f"at most {MAX_SYSTEM_MESSAGES} system messages", field="system")
        if any(not isinstance(text, str) or not text.strip() for text in self.system):
            raise InvalidInput("each system message must be non-blank text", field="system")
        if sum(len(text) for text in self.system) > MAX_SYSTEM_CHARS:
            raise InvalidInput(f"the system messages hold at most {MAX_SYSTEM_CHARS} characters", field="system")
        if isinstance(self.memories, bool) or not 0 <= self.memories <= MAX_CONTEXT_MEMORIES:
            raise InvalidInput(f"memories must be an integer from 0 to {MAX_CONTEXT_MEMORIES}", field="memories")
        # A query or a cut without a count asks for something that would silently not happen.
        if self.memory_query is not None and (not self.memories or not self.memory_query.strip()):
            raise InvalidInput("memory_query must be non-blank and needs memories=k (1 or more)", field="memory_query")
        if self.memory_min_score is not None and (
            not self.memories or not 0 <= self.memory_min_score <= 1 or isinstance(self.memory_min_score, bool)
        ):
            raise InvalidInput(
                "memory_min_score must be a number from 0 to 1 and needs memories=k", field="memory_min_score"
            )

    @property
    def wants_memory(self) -> bool:
        """Whether this context reads long-term memory at all (a plain context never loads the embedder)."""
        return self.memories > 0 or self.profile


@dataclass(frozen=True)
class RecalledMemory:
    """One memory search hit to put in the context."""

    id: str
    text: str
    score: float
    date: str = ""  # YYYY-MM-DD of when it was said ("" when unknown)


@dataclass(frozen=True)
class ProfileFacts:
    """The user's profile as the context needs it: how many facts it has, the text of the first ``n`` of them
    (``render(n)``, the whole message with its heading) and the memory ids each fact came from."""

    count: int
    render: Callable[[int], str]
    memory_ids: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True)
class Recall:
    """What long-term memory adds to a context: search hits (any order; best kept first) and the profile."""

    memories: tuple[RecalledMemory, ...] = ()
    profile: ProfileFacts | None = None


def iso_date(timestamp: Any) -> str:
    """``YYYY-MM-DD`` (UTC) of seconds since the epoch or an ISO-8601 time; "" when it is neither."""
    if isinstance(timestamp, str):
        try:
            return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).astimezone(UTC).date().isoformat()
        except ValueError:
            return ""
    if isinstance(timestamp, int | float) and not isinstance(timestamp, bool):
        try:
            return datetime.fromtimestamp(timestamp, tz=UTC).date().isoformat()
        except (ValueError, OverflowError, OSError):
            return ""
    return ""


def memories_text(hits: list[RecalledMemory]) -> str:
    """The memories message: a heading, then one line per hit with its date (continuation lines indented)."""
    lines = []
    for hit in hits:
        text = hit.text.strip().replace("\n", "\n  ")
        lines.append(f"- [{hit.date}] {text}" if hit.date else f"- {text}")
    return MEMORIES_PREFIX + "\n".join(lines)


def latest_user_text(events: list[dict[str, Any]]) -> str | None:
    """The text of the newest user message among ``events`` (None when there is none with text)."""
    for event in reversed(events):
        try:
            found = [] if is_compaction(event) else event_messages(event)
        except (AttributeError, TypeError, KeyError, ValueError):  # an event that does not read: not a query
            continue
        for message in reversed(found):
            if message.role == "user" and isinstance(message.content, str) and message.content.strip():
                return message.content
    return None


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


def _system_message(text: str, metadata: dict[str, Any]) -> Message:
    """A system message of no event (base prompt, profile, memories)."""
    return Message(
        role="system",
        content=text,
        seq=0,
        event_id="",
        metadata=metadata,
        adk={"role": "model", "parts": [{"text": text}]},
    )


def _recall_messages(recall: Recall, hits: list[RecalledMemory], facts: int) -> list[Message]:
    """The profile message (its first ``facts`` facts) and the memories message (``hits``), those not empty."""
    out: list[Message] = []
    if recall.profile is not None and facts > 0 and (text := recall.profile.render(facts)).strip():
        ids = sorted({i for fact_ids in recall.profile.memory_ids[:facts] for i in fact_ids})
        out.append(_system_message(text, {"kind": "profile", "memory_ids": ids}))
    if hits:
        scored = [{"id": h.id, "score": h.score} for h in hits]
        out.append(_system_message(memories_text(hits), {"kind": "memories", "memories": scored}))
    return out


def _fit_recall(
    recall: Recall | None, budget: _Budget, whole: list[Message]
) -> tuple[list[Message], list[RecalledMemory], int]:
    """The profile and memories messages that fit beside the ``whole`` conversation: memory hits go first (lowest
    score first), then profile facts (last first). Returns the messages, the hits and the number of facts kept."""
    if recall is None:
        return [], [], 0
    hits = sorted(recall.memories, key=lambda h: -h.score)  # stable: equal scores keep the search's order
    facts = recall.profile.count if recall.profile is not None else 0
    beside = copy.copy(budget)
    beside.take(whole)
    while hits or facts > 0:
        candidate = _recall_messages(recall, hits, facts)
        if beside.fits(candidate):
            return candidate, hits, facts
        if hits:
            hits = hits[:-1]
        else:
            facts -= 1
    return [], [], 0


def _trimmed(
    units: list[list[Message]], candidate: Message | None, budget: _Budget, options: ContextOptions
) -> tuple[Message | None, list[list[Message]]]:
    """The summary (tail-cut when it alone is over budget) and the newest contiguous units that fit after it."""
    summary_message: Message | None = None
    if candidate is not None:
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
    return summary_message, selected


# Reading the window newest first (``tail_need``): the first page is the message budget and a few more; other
# budgets are guessed at this many tokens / characters a message, then paced by what the events read so far hold.
TAIL_SLACK = 4
TAIL_MIN = 8
TAIL_FIRST_MAX = 1_000
_GUESS_TOKENS = 30
_GUESS_CHARS = 110
TAIL_ALL = 2**31 - 1  # "read the rest": a window that only the whole session decides


def reads_tail(options: ContextOptions) -> bool:
    """Whether a context with ``options`` can be read newest first, stopping once its window is full: it has a
    budget (else all of it is emitted) and does not keep the first message (which is the oldest)."""
    return not options.keep_first and any(
        v is not None for v in (options.max_tokens, options.max_messages, options.max_chars)
    )


def tail_need(events: list[dict[str, Any]], options: ContextOptions, *, wants_user_text: bool = False) -> int:
    """How many more events, older than ``events``, the window of ``options`` needs read: 0 when ``events`` (the
    newest after the summary's range, oldest first) decide the context, i.e. ``build_context`` gives the same
    messages on them as on every longer run of older events before them (``dropped_events`` aside: the events not
    read are counted by the caller). For ``SessionStore.read_tail``.

    They decide it when, without the summary (which only takes budget first, so the walk then stops sooner):
    the conversation they hold does not fit whole (so neither does a longer one, and no memory or profile goes
    in), and the newest-first walk of ``_trimmed`` stops at one of their units, at or after which no tool response
    lacks its call id (such a response pairs with the oldest open call of its tool, which may be older than the
    events read: then only the whole session decides). With ``wants_user_text`` (memories searched with the newest
    user message), they must also hold a user message. A budget the base system messages alone are over decides
    at once (422 ``system``)."""
    if not events:
        return _first_page(options)
    messages: list[Message] = []
    for event in events:
        try:
            found = [] if is_compaction(event) else event_messages(event)
            for message in found:
                message.tokens()
        except (AttributeError, TypeError, KeyError, ValueError):
            continue  # an event that does not read is left out of the context (ContextService)
        messages.extend(found)
    budget = _Budget(options)
    base = [_system_message(text, {"kind": "system"}) for text in options.system]
    if not budget.fits(base):
        return 0
    budget.take(base)
    if wants_user_text and latest_user_text(events) is None:
        return _more(events, messages, budget)
    units = _units(messages)
    whole_units = list(units)
    if options.start_with_user:
        while whole_units and whole_units[0][0].role != "user":
            whole_units.pop(0)
    if budget.fits([m for unit in whole_units for m in unit]):
        return _more(events, messages, budget)
    for unit in reversed(units):
        if not budget.fits(unit):
            head = next(i for i, m in enumerate(messages) if m is unit[0])
            if any(m.role == "tool" and m.tool_call_id is None for m in messages[head:]):
                return TAIL_ALL
            return 0
        budget.take(unit)
    return _more(events, messages, budget)  # not reached: a conversation over budget stops the walk


def _first_page(options: ContextOptions) -> int:
    """The first page of a tail read: enough for the budget with events of ordinary size, and a few more."""
    room = len(options.system)
    guesses = []
    if options.max_messages is not None:
        guesses.append(options.max_messages - room)
    if options.max_tokens is not None:
        guesses.append(options.max_tokens // _GUESS_TOKENS)
    if options.max_chars is not None:
        guesses.append(options.max_chars // _GUESS_CHARS)
    return max(TAIL_MIN, min(TAIL_FIRST_MAX, min(guesses, default=TAIL_MIN) + TAIL_SLACK))


def _more(events: list[dict[str, Any]], messages: list[Message], budget: _Budget) -> int:
    """The next page when the events read do not decide the window: as many as the room left takes at the rate
    they fill it (per event, every budget), a few more; at least half what was read (so a misjudged rate costs
    few pages) and at least ``TAIL_MIN``."""
    o = budget.options
    whole = _Budget(o)
    whole.take(messages)
    estimates = []
    for limit, used, spent in (
        (o.max_messages, budget.messages, whole.messages),
        (o.max_tokens, budget.tokens, whole.tokens),
        (o.max_chars, budget.chars, whole.chars),
    ):
        if limit is not None and spent > 0:
            room = max(0, limit - used - spent)
            estimates.append(math.ceil(room * len(events) / spent) + 1)
    estimate = min(estimates, default=len(events))
    return min(TAIL_ALL, max(estimate + TAIL_SLACK, len(events) // 2, TAIL_MIN))


def build_context(
    events: list[dict[str, Any]],
    summary_event: dict[str, Any] | None,
    options: ContextOptions,
    recall: Recall | None = None,
    *,
    unread: int = 0,
) -> dict[str, Any]:
    """The messages to send a model next, from the newest summary and the events after it (oldest first).

    ``events`` are the session's events after the range ``summary_event`` covers; compaction events among them
    are ignored. ``recall`` is what long-term memory adds (profile, memory hits), placed after the base
    ``options.system`` messages. ``unread``: events after the summary's range older than ``events``, which a
    windowed read (``tail_need``) did not read; they count as dropped. Returns ``{messages, summary,
    token_estimate, compacted_events, dropped_events, memories, profile}``: ``memories`` the hits kept (``{id,
    score}``), ``profile`` whether the profile is in.
    """
    raw = [e for e in events if not is_compaction(e)]
    messages = [m for e in raw for m in event_messages(e)]
    units = _units(messages)
    budget = _Budget(options)

    base = [_system_message(text, {"kind": "system"}) for text in options.system]
    if not budget.fits(base):
        raise UnprocessableInput(
            "the system messages alone are over the budget (max_tokens, max_messages or max_chars)", field="system"
        )
    budget.take(base)

    summary: str | None = None
    candidate: Message | None = None
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

    # Memories and profile give way before the conversation does: they get what the whole conversation (as it
    # would be emitted with no budget) leaves; when it does not fit on its own, they are left out entirely.
    whole_units = list(units)
    if options.start_with_user:
        while whole_units and whole_units[0][0].role != "user":
            whole_units.pop(0)
    whole = ([candidate] if candidate else []) + [m for unit in whole_units for m in unit]
    extras, hits, _facts = _fit_recall(recall, budget, whole)
    budget.take(extras)

    if budget.fits(whole):
        # All of it fits (beside the memories and profile it left room for): emitted as without a budget.
        budget.take(whole)
        summary_message, selected = candidate, whole_units
    else:
        summary_message, selected = _trimmed(units, candidate, budget, options)

    conversation = [summary_message] if summary_message else []
    conversation += [m for unit in selected for m in unit]
    out = base + extras + conversation
    emitted_events = {m.event_id for m in conversation}
    with_messages = {m.event_id for m in messages}
    covered = compaction_range(summary_event) if summary_event is not None else {}
    return {
        "messages": [_render(m, options.format) for m in out],
        "summary": summary,
        "token_estimate": sum(m.tokens() for m in out),
        "compacted_events": int(covered.get("event_count", 0)),
        "dropped_events": len(with_messages - emitted_events) + unread,
        "memories": [{"id": h.id, "score": h.score} for h in hits],
        "profile": any((m.metadata or {}).get("kind") == "profile" for m in extras),
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
