"""Compaction use cases: on demand for one session, and the schedule's sweep over the sessions that are due."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import field
from typing import Any

from ..errors import InvalidInput, SessionNotFound
from ..policy.compaction import (
    CompactionPlan,
    CompactionSettings,
    due_after,
    invocations,
    plan_compaction,
    settled_events,
    sweep_shares,
)
from ..policy.messages import COMPACTION_META, event_role, is_compaction
from ..policy.state import ScopedDelta
from ..providers.ports import Summarizer, ToolCall, ToolResult, Turn
from ..runtime.lazyclass import dataclass  # processed on first instance (lazyclass.py)
from ..stores.ports import (
    EventQuery,
    NewEvent,
    SessionKey,
    SessionRecord,
    SessionStore,
    SweepInvoker,
    marks_of,
    validated_key,
)

logger = logging.getLogger(__name__)

# As ADK's own summarizer writes its compaction events: ADK's agent router passes over events by "user" (any other
# author that is none of the app's agents is logged as an unknown agent on every turn).
COMPACTION_AUTHOR = "user"
# Earlier events read for the overlap, per overlapping invocation (an invocation is rarely longer).
OVERLAP_EVENTS_PER_INVOCATION = 50
# The first read for the overlap, per overlapping invocation: a chat turn (two events) and the next one's start.
OVERLAP_FIRST_EVENTS = 4


@dataclass
class CompactionOutcome:
    compacted: bool
    event: dict[str, Any] | None = None
    reason: str | None = None
    version: int = 0  # the session's, as planned on (a summary does not move it)
    due_after: bool = True  # whether, once the summary landed, the session still reaches a trigger

    def body(self) -> dict[str, Any]:
        if self.compacted:
            return {"compacted": True, "event": self.event}
        return {"compacted": False, "reason": self.reason}


@dataclass
class SweepReport:
    due: int = 0
    compacted: int = 0
    settled: int = 0
    failed: int = 0
    left_for_next_run: int = 0
    failures: list[str] = field(default_factory=list)


@dataclass
class DispatchReport:
    """One run of the schedule's dispatcher: the sessions listed due, the workers started on them (and those that
    could not be), and, for workers that ran in this process, their counts summed."""

    due: int = 0
    workers: int = 0
    shares_failed: int = 0
    compacted: int = 0
    settled: int = 0
    failed: int = 0
    left_for_next_run: int = 0
    failures: list[str] = field(default_factory=list)


def event_turn(event: dict[str, Any]) -> Turn:
    """An event as a summarizer reads it: author, role, text (no thoughts), tool calls and results."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    results: list[ToolResult] = []
    for part in (event.get("content") or {}).get("parts") or []:
        if part.get("thought"):
            continue
        if call := part.get("function_call"):
            calls.append(ToolCall(name=str(call.get("name") or ""), args=dict(call.get("args") or {})))
        elif response := part.get("function_response"):
            results.append(ToolResult(name=str(response.get("name") or ""), result=response.get("response")))
        elif part.get("text"):
            texts.append(str(part["text"]))
    role = "tool" if results and not texts and not calls else event_role(event)
    return Turn(
        author=str(event.get("author") or role),
        role=role,
        text="\n".join(texts),
        tool_calls=tuple(calls),
        tool_results=tuple(results),
        timestamp=event.get("timestamp"),
    )


def share_keys(entries: Any) -> list[SessionKey]:
    """The sessions of a sweep worker's event (``{"sessions": [[app_name, user_id, session_id], …]}``); an entry
    that is not a valid key is logged and skipped (the dispatcher only sends keys it listed from the due index)."""
    keys: list[SessionKey] = []
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, list) and len(entry) == 3 and all(isinstance(part, str) for part in entry):
            try:
                keys.append(validated_key(*entry))
                continue
            except InvalidInput:
                pass
        logger.warning("not a session key; skipped", extra={"entry": repr(entry)[:200]})
    return keys


class CompactionService:
    def __init__(
        self,
        store: SessionStore,
        summarizer: Summarizer,
        settings: CompactionSettings,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._summarizer = summarizer
        self._settings = settings
        self._clock = clock

    def compact(self, app_name: str, user_id: str, session_id: str) -> CompactionOutcome:
        """Compact now everything outside the retained tail, whatever the triggers say."""
        key = validated_key(app_name, user_id, session_id)
        return self.compact_session(key, force=True)

    def compact_session(self, key: SessionKey, *, force: bool) -> CompactionOutcome:
        # The session's counters and marks only, maybe a moment stale: the summary's write checks them again.
        record = self._store.get_session_for_compaction(key)
        if record is None:
            raise SessionNotFound(key.session_id)
        # Read without re-checking the deletion count after the events: the summary's write is conditioned on the
        # record's count (``deletions`` below), so a deletion racing this read leaves the summary unstored.
        events = self._store.read_events(
            key, EventQuery(after_seq=record.summary_end_seq, marks=marks_of(record), unchecked=True)
        )
        summary_event = next((e for e in events if e.get("id") == record.summary_event_id), None)
        # Only where no event can still land at or below the cut (a seq claimed, its event not written yet). A
        # stale record is safe here: every seq up to its last_seq was claimed no later than its claim time.
        settled = settled_events(
            events,
            after_seq=record.summary_end_seq,
            last_seq=record.last_seq,
            hidden=record.hidden,
            claimed_at=record.claimed_at,
            now=time.time(),  # the clock the store stamped the claim with, not the summaries' (self._clock)
        )
        # Planned first without the overlap: whether there is anything to compact does not depend on it, so a
        # session with no trigger reached (most sweeps of a slow chat) never reads it.
        plan = plan_compaction(settled, summary_event, self._settings, force=force)
        if isinstance(plan, str):
            return CompactionOutcome(compacted=False, reason=plan, version=record.version)
        if self._settings.overlap_size and record.summary_end_seq:
            earlier = self._overlap_events(key, record)
            plan = plan_compaction(settled, summary_event, self._settings, earlier=earlier, force=force)
            assert not isinstance(plan, str)  # the same events and triggers: a plan again, with its overlap
        summary = self._summarizer.summarize([event_turn(e) for e in plan.overlap + plan.events], plan.previous_summary)
        event = self._compaction_event(plan, summary)
        stored = self._store.append_compaction(
            key,
            NewEvent(id=event["id"], timestamp=event["timestamp"], body=event, delta=ScopedDelta()),
            plan.end_seq,
            record.summary_end_seq,
            # The session read above: if it was deleted (and maybe re-created) since, the summary is not stored.
            incarnation=record.incarnation,
            # Events deleted since they were read: the summary may hold their text; it is not stored.
            deletions=record.deletions,
        )
        if stored is None:
            return CompactionOutcome(compacted=False, reason="another compaction committed first")
        return CompactionOutcome(
            compacted=True,
            event=stored,
            version=record.version,
            due_after=due_after(plan, events, summary, self._settings),
        )

    def _overlap_events(self, key: SessionKey, record: SessionRecord) -> list[dict[str, Any]]:
        """The newest events up to the summary's end, enough for the overlap's ``overlap_size`` invocations: a
        small read first (``OVERLAP_FIRST_EVENTS`` per invocation), doubled while it holds no more invocations
        than the overlap and may have stopped inside one, up to ``OVERLAP_EVENTS_PER_INVOCATION`` per invocation
        (what was read every time before). Once the events hold one invocation more than the overlap, the last
        ``overlap_size`` are whole (each starts inside the read), so the plan's overlap is the one the largest
        read gives: a chat turn of two events costs one read of a few items instead of fifty."""
        wanted = self._settings.overlap_size
        most = OVERLAP_EVENTS_PER_INVOCATION * wanted
        count = min(most, OVERLAP_FIRST_EVENTS * wanted)
        while True:
            earlier = self._store.read_events(
                key,
                EventQuery(up_to_seq=record.summary_end_seq, num_recent=count, marks=marks_of(record), unchecked=True),
            )
            if count >= most or len(earlier) < count:
                return earlier
            if len(invocations([e for e in earlier if not is_compaction(e)])) > wanted:
                return earlier
            count = min(most, count * 2)

    def _compaction_event(self, plan: CompactionPlan, summary: str) -> dict[str, Any]:
        return {
            "id": str(uuid.uuid4()),
            "invocation_id": f"compaction-{uuid.uuid4()}",
            "author": COMPACTION_AUTHOR,
            "timestamp": self._clock(),
            "actions": {
                "state_delta": {},
                "compaction": {
                    "start_timestamp": plan.start_timestamp,
                    "end_timestamp": plan.end_timestamp,
                    "compacted_content": {"role": "model", "parts": [{"text": summary}]},
                },
            },
            "custom_metadata": {
                COMPACTION_META: {
                    "start_seq": plan.start_seq,
                    "end_seq": plan.end_seq,
                    "event_count": plan.event_count,
                    "trigger": plan.trigger,
                    "summarizer": self._summarizer.name,
                }
            },
        }

    def run_due(self, remaining_s: Callable[[], float], *, limit: int = 100, reserve_s: float = 5.0) -> SweepReport:
        """Compact the sessions that are due, while more than ``reserve_s`` seconds remain; the rest stay due
        for the next run. A failure on one session is logged and leaves it due; it does not stop the others."""
        return self.run_sessions(self._store.list_due(limit), remaining_s, reserve_s=reserve_s)

    def run_sessions(
        self, keys: list[SessionKey], remaining_s: Callable[[], float], *, reserve_s: float = 5.0
    ) -> SweepReport:
        """A sweep worker: compact ``keys`` (sessions listed due) in order while more than ``reserve_s`` seconds
        remain; the rest stay due. Safe to run twice on the same keys, at once or one after the other: a summary
        lands only on the watermark it was planned on, and a session is settled only if it did not change."""
        report = SweepReport()
        report.due = len(keys)
        for index, key in enumerate(keys):
            if remaining_s() < reserve_s:
                report.left_for_next_run = len(keys) - index
                break
            try:
                outcome = self.compact_session(key, force=False)
                if outcome.compacted:
                    report.compacted += 1
                    if not outcome.due_after:
                        # Nothing left to compact: settled at once, unless an append came since (the version).
                        report.settled += int(self._store.clear_due(key, outcome.version))
                        continue
                    outcome = self.compact_session(key, force=False)  # settled only once nothing is due
                if not outcome.compacted and outcome.reason != "another compaction committed first":
                    report.settled += int(self._store.clear_due(key, outcome.version))
            except SessionNotFound:
                continue
            except Exception as exc:  # one session's model timeout or throttle must not stop the sweep
                report.failed += 1
                report.failures.append(f"{key.app_name}/{key.user_id}/{key.session_id}: {exc}")
                logger.exception("compaction failed; the session stays due", extra={"session": key.session_id})
        return report

    def dispatch_due(self, invoker: SweepInvoker, *, workers: int, per_worker: int, min_share: int) -> DispatchReport:
        """The schedule's dispatcher: list up to ``workers`` × ``per_worker`` due sessions (every shard its share,
        oldest first) and start a worker on each share. A share that cannot be started is counted and its sessions
        stay due; the others still start. What is not listed (more due than the workers can take) waits for the
        next run, oldest first."""
        report = DispatchReport()
        keys = self._store.list_due(workers * per_worker)
        report.due = len(keys)
        for share in sweep_shares(keys, workers, min_share):
            try:
                done = invoker.start(share)
            except Exception:  # a throttled Invoke: the next run lists these sessions again
                report.shares_failed += 1
                logger.exception("a sweep worker could not be started; its sessions stay due")
                continue
            report.workers += 1
            if done is not None:  # the worker ran here (make run, the tests): its counts are this run's
                for name in ("compacted", "settled", "failed", "left_for_next_run"):
                    setattr(report, name, getattr(report, name) + int(done.get(name, 0)))
                report.failures.extend(done.get("failures") or [])
        return report
