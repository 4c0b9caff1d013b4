"""A compaction reads the overlap (the invocations just before the previous summary's end) only when it compacts,
and in small reads that grow only when an invocation may not fit: the summarizer is given what the one read of
fifty events per invocation gave it, whatever the invocations' lengths."""

from __future__ import annotations

from typing import Any

import pytest

from agent_memory.models import Event
from agent_memory.policy.compaction import CompactionSettings
from agent_memory.service.compaction import OVERLAP_EVENTS_PER_INVOCATION, CompactionService
from agent_memory.service.sessions import SessionService
from agent_memory.stores.inmemory import InMemorySessionStore
from agent_memory.stores.ports import EventQuery, SessionKey, SessionRecord, marks_of
from tests.support.compaction import NOW, FakeSummarizer, key


class RecordingStore(InMemorySessionStore):
    """Records the overlap's reads (those that end at the summary's end: ``up_to_seq``) and the items they gave."""

    def __init__(self) -> None:
        super().__init__()
        self.overlap_reads: list[tuple[int | None, int]] = []  # (num_recent, events returned)

    def read_events(self, key: SessionKey, query: EventQuery) -> list[dict[str, Any]]:
        events = super().read_events(key, query)
        if query.up_to_seq is not None:
            self.overlap_reads.append((query.num_recent, len(events)))
        return events


class WholeOverlap(CompactionService):
    """The read before: fifty events per overlapping invocation, every time."""

    def _overlap_events(self, key: SessionKey, record: SessionRecord) -> list[dict[str, Any]]:
        return self._store.read_events(
            key,
            EventQuery(
                up_to_seq=record.summary_end_seq,
                num_recent=OVERLAP_EVENTS_PER_INVOCATION * self._settings.overlap_size,
                marks=marks_of(record),
            ),
        )


def append_invocations(sessions: SessionService, sizes: list[int], start: int) -> None:
    """Invocations of ``sizes`` events each (a user message, then replies); size 0: a chat message without an
    invocation id (each user message starts an invocation then)."""
    for n, size in enumerate(sizes, start=start):
        events: list[dict[str, Any]] = []
        inv = None if size == 0 else f"inv{n}"
        for i in range(max(1, size)):
            author, role = ("user", "user") if i == 0 else ("agent", "model")
            event: dict[str, Any] = {
                "id": f"e{n}-{i}",
                "author": author,
                "timestamp": 1000.0 + n + i / 100,
                "content": {"role": role, "parts": [{"text": f"turn {n} part {i}"}]},
            }
            if inv is not None:
                event["invocation_id"] = inv
            events.append(event)
        sessions.append_events(
            app_name="app", user_id="bob", session_id="s1", events=[Event.model_validate(e) for e in events]
        )


SHAPES = {
    "chat turns of two events": [2] * 12,
    "long tool invocations": [2, 7, 1, 12, 3, 9, 2, 30, 4, 2, 60, 5],
    "messages without invocation ids": [0] * 14,
    "one invocation longer than fifty events": [2, 3, 70, 2, 2, 2, 55, 2],
}


@pytest.mark.parametrize("overlap_size", [1, 2])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_summarizer_gets_the_overlap_the_whole_read_gave(shape: str, overlap_size: int) -> None:
    settings = CompactionSettings(
        compaction_interval=3, overlap_size=overlap_size, token_threshold=10**9, event_retention_size=2
    )
    given = []
    for service_class in (WholeOverlap, CompactionService):
        store = RecordingStore()
        sessions = SessionService(store, None, clock=lambda: NOW)
        sessions.create_session(app_name="app", user_id="bob", session_id="s1")
        summarizer = FakeSummarizer()
        service = service_class(store, summarizer, settings, clock=lambda: NOW)
        sizes = SHAPES[shape]
        half = len(sizes) // 2
        append_invocations(sessions, sizes[:half], 0)
        assert service.compact_session(key(), force=True).compacted  # the first summary: no overlap yet
        append_invocations(sessions, sizes[half:], half)
        assert service.compact_session(key(), force=True).compacted  # overlaps the first summary's last ones
        given.append(summarizer.calls)
    old, new = given
    assert new == old
    # the second summary re-read invocations the first one covered (the overlap is not empty)
    first_half = {f"turn {n} part" for n in range(len(SHAPES[shape]) // 2)}
    assert any(t.text.rsplit(" ", 1)[0] in first_half for t in new[-1][0])


def test_a_chat_turns_overlap_is_one_small_read() -> None:
    store = RecordingStore()
    sessions = SessionService(store, None, clock=lambda: NOW)
    sessions.create_session(app_name="app", user_id="bob", session_id="s1")
    settings = CompactionSettings(compaction_interval=3, overlap_size=1, token_threshold=10**9, event_retention_size=2)
    service = CompactionService(store, FakeSummarizer(), settings, clock=lambda: NOW)
    append_invocations(sessions, [2] * 30, 0)
    assert service.compact_session(key(), force=True).compacted
    append_invocations(sessions, [2] * 10, 30)
    assert service.compact_session(key(), force=True).compacted
    assert store.overlap_reads == [(4, 4)]  # was (50, 50): fifty events read for a turn of two


def test_a_session_with_nothing_to_compact_reads_no_overlap() -> None:
    store = RecordingStore()
    sessions = SessionService(store, None, clock=lambda: NOW)
    sessions.create_session(app_name="app", user_id="bob", session_id="s1")
    settings = CompactionSettings(compaction_interval=3, overlap_size=1, token_threshold=10**9, event_retention_size=2)
    service = CompactionService(store, FakeSummarizer(), settings, clock=lambda: NOW)
    append_invocations(sessions, [2] * 6, 0)
    assert service.compact_session(key(), force=True).compacted
    append_invocations(sessions, [2], 6)  # one new invocation: no trigger reached
    report = service.run_sessions([key()], lambda: 300.0)
    assert (report.compacted, report.settled) == (0, 1)
    assert store.overlap_reads == []
