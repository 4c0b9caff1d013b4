"""Compaction planning: when to summarise, and which events a new summary covers.

Two triggers, as ADK has them, and an on-demand mode:
- sliding window: at least ``compaction_interval`` new invocations since the last summary was made (the tail
  it retained does not count again);
- token threshold: the last summary plus the events after it are estimated at ``token_threshold`` tokens or
  more;
- on demand (``force``): whatever the triggers say.

Every compaction keeps at least ``event_retention_size`` raw events after its cut, and cuts only at an
invocation boundary where no tool call (including confirmation and auth requests) is left without its
response. Each new summary rolls the previous one up: it summarises the previous summary, ``overlap_size``
earlier invocations for continuity, and the new events, and covers from the session's first event, so the
context needs one summary, never a stack.
"""

from __future__ import annotations

import math
from dataclasses import field
from typing import Any

from ..runtime.lazyclass import dataclass  # processed on first instance (lazyclass.py)
from .messages import compaction_range, event_messages, event_role, is_compaction, summary_text


@dataclass(frozen=True)
class CompactionSettings:
    compaction_interval: int = 10
    overlap_size: int = 1
    token_threshold: int = 8000
    event_retention_size: int = 10

    def __post_init__(self) -> None:
        for name in ("compaction_interval", "token_threshold"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be 1 or more")
        for name in ("overlap_size", "event_retention_size"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be 0 or more")


@dataclass(frozen=True)
class CompactionPlan:
    trigger: str  # interval | tokens | manual
    events: list[dict[str, Any]]  # the new events the summary covers, oldest first
    overlap: list[dict[str, Any]] = field(default_factory=list)  # earlier events re-read for continuity
    previous_summary: str | None = None
    start_timestamp: float = 0.0
    end_timestamp: float = 0.0
    start_seq: int = 0
    end_seq: int = 0
    event_count: int = 0  # raw events covered in all, the previous summary's included


def invocations(events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Events grouped by invocation: a change of ``invocation_id`` starts one; events without an id (chat
    messages) start one at each user message."""
    groups: list[list[dict[str, Any]]] = []
    current: str | None = None
    for event in events:
        inv = event.get("invocation_id") or None
        starts = not groups or (inv is not None and inv != current) or (inv is None and event_role(event) == "user")
        if starts:
            groups.append([])
        groups[-1].append(event)
        current = inv
    return groups


def _open_calls(events: list[dict[str, Any]]) -> list[str]:
    """Tool calls, confirmation and auth requests in ``events`` without a response in them (a response without
    an id answers the oldest open call of the same tool, as the context window pairs them)."""
    open_calls: dict[str, str] = {}  # call id -> tool name
    requested: set[str] = set()
    answered: set[str] = set()
    for event in events:
        actions = event.get("actions") or {}
        requested.update(actions.get("requested_tool_confirmations") or {})
        requested.update(actions.get("requested_auth_configs") or {})
        for i, part in enumerate((event.get("content") or {}).get("parts") or []):
            if call := part.get("function_call"):
                open_calls[str(call.get("id") or f"{event.get('id')}:{i}")] = str(call.get("name") or "")
            if response := part.get("function_response"):
                call_id = response.get("id")
                if call_id is None:
                    name = str(response.get("name") or "")
                    call_id = next((c for c, n in open_calls.items() if n == name), None)
                if call_id is not None:
                    answered.add(str(call_id))
                    open_calls.pop(str(call_id), None)
    return sorted(set(open_calls) | (requested - answered))


def estimate_tokens(events: list[dict[str, Any]], summary: str | None = None) -> int:
    tokens = sum(m.tokens() for e in events for m in event_messages(e))
    return tokens + (4 + math.ceil(len(summary) / 4) if summary else 0)


def _safe_cut(groups: list[list[dict[str, Any]]], keep: int) -> int:
    """The number of leading invocations to compact: as many as leave ``keep`` events raw and no call open."""
    total = sum(len(g) for g in groups)
    cut = len(groups)
    while cut > 0 and total - sum(len(g) for g in groups[:cut]) < keep:
        cut -= 1
    while cut > 0 and _open_calls([e for g in groups[:cut] for e in g]):
        cut -= 1
    return cut


# How long after a session's last seq claim (DynamoDB's claim-first append: the seq is taken, then the event put)
# a seq without an event may still be written: a put lands within the function's 29 s timeout of its claim.
CLAIM_SETTLE_S = 60.0


def settled_events(
    events: list[dict[str, Any]],
    *,
    after_seq: int,
    last_seq: int,
    hidden: tuple[tuple[int, int], ...] | list[tuple[int, int]] = (),
    claimed_at: float | None,
    now: float,
) -> list[dict[str, Any]]:
    """The events (oldest first, seqs above ``after_seq``) a compaction may cut within: no event can land later
    at a seq at or below its cut, where the summary's watermark would hide it unsummarised.

    Events above the session's ``last_seq`` as read with ``claimed_at`` are left out (claimed after that read:
    their seqs may have holes still being written). Below it, while the last claim is younger than
    ``CLAIM_SETTLE_S``, a seq with no event (a hole: a claim whose put is in flight, or one that never lands) may
    still be filled, so the events stop before the lowest such seq; seqs in ``hidden`` (deletions not purged yet)
    are no holes. Once the last claim is older, every hole is for good and any cut is safe. A store whose appends
    are atomic has no ``claimed_at`` and no such seq."""
    window = [e for e in events if int(e.get("seq") or 0) <= last_seq]
    if claimed_at is None or now - claimed_at >= CLAIM_SETTLE_S:
        return window
    settled: list[dict[str, Any]] = []
    expected = after_seq + 1  # the lowest seq not accounted for yet
    for event in window:
        seq = int(event.get("seq") or 0)
        while expected < seq:
            cover = next(((lo, hi) for lo, hi in hidden if lo <= expected <= hi), None)
            if cover is None:
                return settled  # a hole at `expected`: a put may still land there
            expected = cover[1] + 1
        settled.append(event)
        expected = max(expected, seq + 1)
    return settled


def plan_compaction(
    events: list[dict[str, Any]],
    summary_event: dict[str, Any] | None,
    settings: CompactionSettings,
    *,
    earlier: list[dict[str, Any]] | None = None,
    force: bool = False,
) -> CompactionPlan | str:
    """A plan, or the reason there is nothing to do.

    ``events``: the session's events after the newest summary's range (oldest first); ``earlier``: events
    just before that range, from which ``overlap_size`` invocations are re-read for continuity.
    """
    raw = [e for e in events if not is_compaction(e)]
    previous = summary_text(summary_event) if summary_event is not None else None
    groups = invocations(raw)
    # New invocations are those appended since the last compaction, not the tail it retained.
    since = int(summary_event.get("seq") or 0) if summary_event is not None else 0
    new_groups = invocations([e for e in raw if int(e.get("seq") or 0) > since])
    if force:
        trigger = "manual"
    elif len(new_groups) >= settings.compaction_interval:
        trigger = "interval"
    elif estimate_tokens(raw, previous) >= settings.token_threshold:
        trigger = "tokens"
    else:
        return "no trigger reached"
    cut = _safe_cut(groups, settings.event_retention_size)
    covered = [e for g in groups[:cut] for e in g]
    if not covered:
        return "nothing to compact outside the retained events and open tool calls"
    prior = compaction_range(summary_event) if summary_event is not None else {}
    overlap_groups = invocations([e for e in earlier or [] if not is_compaction(e)])
    overlap_from = max(0, len(overlap_groups) - settings.overlap_size)
    overlap = [e for g in overlap_groups[overlap_from:] for e in g] if settings.overlap_size else []
    first = covered[0]
    start_timestamp = (
        float(summary_event["actions"]["compaction"]["start_timestamp"])
        if summary_event is not None
        else float(first.get("timestamp") or 0.0)
    )
    return CompactionPlan(
        trigger=trigger,
        events=covered,
        overlap=overlap,
        previous_summary=previous,
        start_timestamp=start_timestamp,
        end_timestamp=float(covered[-1].get("timestamp") or 0.0),
        start_seq=int(prior.get("start_seq", first.get("seq") or 0)),
        end_seq=int(covered[-1].get("seq") or 0),
        event_count=int(prior.get("event_count", 0)) + len(covered),
    )


def due_after(plan: CompactionPlan, events: list[dict[str, Any]], summary: str, settings: CompactionSettings) -> bool:
    """Whether the session is still due once ``plan``'s summary has landed, as the next plan would find it (if
    nothing is appended meanwhile): no invocation is newer than the summary, so the interval cannot trigger; the
    summary and the events it left raw may still reach the token threshold."""
    left = [e for e in events if not is_compaction(e) and int(e.get("seq") or 0) > plan.end_seq]
    return estimate_tokens(left, summary) >= settings.token_threshold


# --- the schedule's fan-out -------------------------------------------------------------------------------

# The most due sessions one worker is handed per run (its payload stays under Lambda's 256 KB for asynchronous
# invocations even with 128-character identifiers); what it has no time for stays due for the next run.
SESSIONS_PER_WORKER = 500
# Fewer sessions than this per worker and fewer workers start: each start costs an invocation and a cold start.


def sweep_shares[T](due: list[T], workers: int, min_share: int) -> list[list[T]]:
    """The due sessions split among at most ``workers`` workers, each given at least ``min_share`` of them (fewer
    workers when few are due: a worker's start costs more than a few compactions), dealt one at a time in turn so
    that every share gets the same mix of shards and ages and the oldest of each go first."""
    if workers < 1 or min_share < 1:
        raise ValueError("workers and min_share must be 1 or more")
    count = min(workers, -(-len(due) // min_share))
    return [due[i::count] for i in range(count)]
