"""Deleting events from a session: which events go together, which summaries go with them, where the compaction
watermark falls back to. Pure decisions on the events a service read; the store applies them atomically.

- Tool pairs: an event holding ``function_call`` parts and the events holding their ``function_response`` (by
  call id; a response without an id answers the oldest open call of the same tool, as compaction and the context
  window pair them) are one unit, never split by a delete.
- Summaries: every compaction event whose range (``start_seq``..``end_seq`` in its metadata) covers a deleted seq
  is deleted with it; the watermark falls back to the newest remaining summary, or to none.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..runtime.lazyclass import dataclass  # processed on first instance (lazyclass.py)
from .messages import compaction_range, is_compaction


@dataclass(frozen=True)
class DeletePlan:
    """The events to delete (ids and seqs, oldest first) and the watermark after."""

    ids: list[str]
    seqs: list[int]
    summary_event_id: str | None
    summary_end_seq: int


def _seq(event: dict[str, Any]) -> int:
    value = event.get("seq")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def tool_units(events: list[dict[str, Any]]) -> dict[str, set[str]]:
    """For each event id, the ids of the events it shares tool calls with (itself included)."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a: str, b: str) -> None:
        parent[find(a)] = find(b)

    callers: dict[str, str] = {}  # call id -> the event that made the call
    open_by_name: dict[str, list[str]] = {}  # tool name -> call ids without a response yet, oldest first
    for event in events:
        event_id = event.get("id")
        if not isinstance(event_id, str) or is_compaction(event):
            continue
        find(event_id)
        for i, part in enumerate((event.get("content") or {}).get("parts") or []):
            if not isinstance(part, dict):
                continue
            call = part.get("function_call")
            if isinstance(call, dict):
                call_id = str(call.get("id") or f"{event_id}:{i}")
                callers[call_id] = event_id
                open_by_name.setdefault(str(call.get("name") or ""), []).append(call_id)
            response = part.get("function_response")
            if isinstance(response, dict):
                name = str(response.get("name") or "")
                answered = response.get("id")
                if answered is None:
                    pending = open_by_name.get(name) or []
                    answered = pending[0] if pending else None
                if answered is None:
                    continue
                answered = str(answered)
                if answered in open_by_name.get(name, []):
                    open_by_name[name].remove(answered)
                if answered in callers:
                    union(event_id, callers[answered])
    units: dict[str, set[str]] = {}
    for event_id in parent:
        units.setdefault(find(event_id), set()).add(event_id)
    return {event_id: units[find(event_id)] for event_id in parent}


def with_partners(events: list[dict[str, Any]], ids: Iterable[str]) -> set[str]:
    """``ids`` and every event that shares a tool call with one of them."""
    units = tool_units(events)
    out: set[str] = set()
    for event_id in ids:
        out |= units.get(event_id, {event_id})
    return out


def first_of_invocation(events: list[dict[str, Any]], invocation_id: str) -> int | None:
    """The seq of the first event of the invocation (None when no event has it)."""
    seqs = [_seq(e) for e in events if e.get("invocation_id") == invocation_id]
    return min(seqs) if seqs else None


def plan_delete(
    events: list[dict[str, Any]],
    doomed: set[str],
    *,
    from_seq: int | None = None,
    watermark: tuple[str | None, int] = (None, 0),
) -> DeletePlan:
    """The plan for deleting ``doomed`` (ids) and, with ``from_seq``, every event at or after that seq; tool
    partners of each are added, then every summary covering a deleted seq. ``events`` are the session's events
    (summaries included); ``watermark`` is the session's (summary event id, end seq) before the deletion."""
    doomed = set(doomed)
    if from_seq is not None:
        doomed |= {str(e["id"]) for e in events if _seq(e) >= from_seq and isinstance(e.get("id"), str)}
    doomed = with_partners(events, doomed)
    seqs = {_seq(e) for e in events if e.get("id") in doomed}
    for event in events:
        if not is_compaction(event) or event.get("id") in doomed:
            continue
        covered = compaction_range(event)
        start, end = covered.get("start_seq"), covered.get("end_seq")
        if not isinstance(start, int) or not isinstance(end, int):
            # A summary whose range does not read: keep nothing of what it may have summarised.
            start, end = 0, _seq(event)
        if any(start <= s <= end for s in seqs) or (from_seq is not None and end >= from_seq):
            doomed.add(str(event["id"]))
    kept = [e for e in events if e.get("id") not in doomed]
    summary_id, end_seq = watermark
    if summary_id is None or summary_id in doomed:
        summaries = [e for e in kept if is_compaction(e)]
        if summaries:
            newest = max(summaries, key=_seq)
            end = compaction_range(newest).get("end_seq")
            summary_id, end_seq = str(newest["id"]), end if isinstance(end, int) else 0
        else:
            summary_id, end_seq = None, 0
    chosen = sorted((e for e in events if e.get("id") in doomed), key=_seq)
    return DeletePlan(
        ids=[str(e["id"]) for e in chosen],
        seqs=[_seq(e) for e in chosen],
        summary_event_id=summary_id,
        summary_end_seq=end_seq,
    )


def seq_ranges(seqs: Iterable[int], tail: tuple[int, int] | None = None) -> tuple[tuple[int, int], ...]:
    """Seqs as the fewest inclusive ranges of consecutive seqs, with ``tail`` (a whole range) merged in."""
    points = sorted(set(seqs))
    ranges: list[list[int]] = []
    for s in points:
        if tail is not None and tail[0] <= s <= tail[1]:
            continue
        if ranges and s == ranges[-1][1] + 1:
            ranges[-1][1] = s
        else:
            ranges.append([s, s])
    if tail is not None and tail[0] <= tail[1]:
        ranges.append([tail[0], tail[1]])
    return tuple(sorted((lo, hi) for lo, hi in ranges))
