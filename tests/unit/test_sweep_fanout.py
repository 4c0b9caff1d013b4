"""The compaction schedule's fan-out over the in-memory store: shares, every due session in one, a run that cannot
take them all leaving the rest for the next, a worker that cannot start, and a share delivered twice."""

from __future__ import annotations

import threading
from dataclasses import asdict
from typing import Any

import pytest

from agent_memory.policy.compaction import sweep_shares
from agent_memory.providers.ports import Turn
from agent_memory.service.compaction import CompactionService
from agent_memory.service.sessions import SessionService
from agent_memory.stores.inmemory import InlineSweepInvoker, InMemorySessionStore
from agent_memory.stores.ports import SessionKey
from tests.support.compaction import NOW, SETTINGS, FakeSummarizer, add_invocations, compaction_events, key


@pytest.fixture
def store() -> InMemorySessionStore:
    return InMemorySessionStore()


@pytest.fixture
def sessions(store: InMemorySessionStore) -> SessionService:
    return SessionService(store, None, clock=lambda: NOW)


@pytest.fixture
def service(store: InMemorySessionStore) -> CompactionService:
    return CompactionService(store, FakeSummarizer(), SETTINGS, clock=lambda: NOW)


class RecordingInvoker:
    """Starts nothing: keeps the shares (as the worker function's queue would)."""

    def __init__(self) -> None:
        self.shares: list[list[SessionKey]] = []

    def start(self, keys: list[SessionKey]) -> dict[str, Any] | None:
        self.shares.append(list(keys))
        return None


def inline(service: CompactionService) -> InlineSweepInvoker:
    return InlineSweepInvoker(lambda keys, remaining: asdict(service.run_sessions(keys, remaining)), budget_s=300.0)


# --- the shares ---------------------------------------------------------------------------------------------------


def test_few_due_sessions_go_to_one_worker() -> None:
    assert sweep_shares(list(range(7)), workers=20, min_share=50) == [list(range(7))]
    assert sweep_shares([], workers=20, min_share=50) == []


def test_many_due_sessions_are_dealt_to_every_worker_once_each() -> None:
    due = list(range(3500))
    shares = sweep_shares(due, workers=20, min_share=50)
    assert len(shares) == 20
    assert sorted(k for share in shares for k in share) == due
    assert {len(share) for share in shares} == {175}
    # Dealt in turn: each share starts with one of the oldest, so no share holds only the newest.
    assert sorted(share[0] for share in shares) == list(range(20))


def test_workers_are_fewer_when_each_would_get_less_than_its_minimum() -> None:
    assert len(sweep_shares(list(range(120)), workers=20, min_share=50)) == 3


@pytest.mark.parametrize(("workers", "min_share"), [(0, 50), (5, 0)])
def test_shares_need_a_worker_and_a_minimum(workers: int, min_share: int) -> None:
    with pytest.raises(ValueError):
        sweep_shares([1], workers=workers, min_share=min_share)


# --- the dispatcher -----------------------------------------------------------------------------------------------


def test_every_due_session_is_in_exactly_one_share(
    service: CompactionService, sessions: SessionService, store: InMemorySessionStore
) -> None:
    for i in range(120):
        add_invocations(sessions, f"s{i}", 1)
    invoker = RecordingInvoker()
    report = service.dispatch_due(invoker, workers=3, per_worker=50, min_share=10)
    assert report.due == 120 and report.workers == 3 and report.shares_failed == 0
    listed = [k for share in invoker.shares for k in share]
    assert sorted(listed, key=str) == sorted(store.list_due(1000), key=str) and len(set(listed)) == 120
    # Nothing is settled by handing it out: until a worker compacts them, they stay due.
    assert len(store.list_due(1000)) == 120


def test_more_due_than_one_run_takes_are_finished_by_the_next_run(
    service: CompactionService, sessions: SessionService, store: InMemorySessionStore
) -> None:
    for i in range(13):
        add_invocations(sessions, f"s{i}", 4)  # past the interval: each needs a summary
    first = service.dispatch_due(inline(service), workers=2, per_worker=5, min_share=1)
    assert first.due == 10 and first.workers == 2 and first.compacted == 10 and first.failed == 0
    assert len(store.list_due(100)) == 3
    second = service.dispatch_due(inline(service), workers=2, per_worker=5, min_share=1)
    assert second.due == 3 and second.compacted == 3
    assert store.list_due(100) == []
    assert all(len(compaction_events(store, f"s{i}")) == 1 for i in range(13))


def test_the_oldest_due_go_first_so_a_backlog_cannot_starve_them(
    service: CompactionService, sessions: SessionService, store: InMemorySessionStore
) -> None:
    for i in range(4):
        add_invocations(sessions, f"old{i}", 4)
    for run in range(3):
        # New sessions keep arriving faster than one run takes them; the old ones still go in the first run.
        for i in range(6):
            add_invocations(sessions, f"new{run}-{i}", 4)
        service.dispatch_due(inline(service), workers=1, per_worker=5, min_share=1)
        if run == 0:
            assert all(len(compaction_events(store, f"old{i}")) == 1 for i in range(4))
    # Backlogged, yet every session waited at most a few runs: the first batch of new ones is done too.
    assert all(len(compaction_events(store, f"new0-{i}")) == 1 for i in range(6))


def test_a_worker_that_cannot_start_leaves_its_share_due_and_the_others_run(
    service: CompactionService, sessions: SessionService, store: InMemorySessionStore
) -> None:
    for i in range(4):
        add_invocations(sessions, f"s{i}", 4)
    runner = inline(service)
    failed: list[SessionKey] = []

    class Throttled:
        def start(self, keys: list[SessionKey]) -> dict[str, Any] | None:
            if not failed:
                failed.extend(keys)
                raise RuntimeError("TooManyRequestsException")
            return runner.start(keys)

    report = service.dispatch_due(Throttled(), workers=2, per_worker=5, min_share=1)
    assert report.shares_failed == 1 and report.workers == 1 and report.compacted == 2
    assert sorted(store.list_due(100), key=str) == sorted(failed, key=str)  # its sessions stay due
    assert service.dispatch_due(runner, workers=2, per_worker=5, min_share=1).compacted == 2
    assert store.list_due(100) == []


# --- duplicates ---------------------------------------------------------------------------------------------------


def test_a_share_delivered_twice_stores_one_summary(
    service: CompactionService, sessions: SessionService, store: InMemorySessionStore
) -> None:
    add_invocations(sessions, "s1", 4)
    first = service.run_sessions([key("s1")], lambda: 300.0)
    again = service.run_sessions([key("s1")], lambda: 300.0)
    assert first.compacted == 1 and again.compacted == 0 and again.failed == 0
    assert len(compaction_events(store, "s1")) == 1 and store.list_due(10) == []


def test_two_workers_planning_the_same_session_at_once_store_one_summary(
    sessions: SessionService, store: InMemorySessionStore
) -> None:
    add_invocations(sessions, "s1", 4)
    both_planned = threading.Barrier(2, timeout=10)

    class Waiting(FakeSummarizer):
        """Both workers have read the session and planned before either writes."""

        def summarize(self, turns: list[Turn], previous_summary: str | None) -> str:
            both_planned.wait()
            return super().summarize(turns, previous_summary)

    reports: list[Any] = []

    def worker() -> None:
        service = CompactionService(store, Waiting(), SETTINGS, clock=lambda: NOW)
        reports.append(service.run_sessions([key("s1")], lambda: 300.0))

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(r.compacted for r in reports) == [0, 1] and all(r.failed == 0 for r in reports)
    assert len(compaction_events(store, "s1")) == 1
    record = store.get_session(key("s1"))
    assert record is not None and record.summary_event_id == compaction_events(store, "s1")[0]["id"]


# --- the settle after a summary -----------------------------------------------------------------------------------


class CountingReads(InMemorySessionStore):
    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def get_session_for_compaction(self, key: SessionKey) -> Any:
        self.reads += 1
        return super().get_session_for_compaction(key)


def test_a_summary_that_leaves_nothing_due_is_settled_without_reading_again() -> None:
    store = CountingReads()
    add_invocations(SessionService(store, None, clock=lambda: NOW), "s1", 4)
    service = CompactionService(store, FakeSummarizer(), SETTINGS, clock=lambda: NOW)
    report = service.run_sessions([key("s1")], lambda: 300.0)
    assert report.compacted == 1 and report.settled == 1 and store.list_due(10) == []
    assert store.reads == 1  # one plan; before, a second read of the session and its events to settle it


def test_a_summary_whose_tail_still_reaches_the_tokens_is_planned_again() -> None:
    from agent_memory.policy.compaction import CompactionSettings

    store = CountingReads()
    add_invocations(SessionService(store, None, clock=lambda: NOW), "s1", 4)
    # The retained tail alone reaches the threshold: the session may still be due, so the sweep plans it again.
    tight = CompactionSettings(compaction_interval=3, overlap_size=1, token_threshold=5, event_retention_size=2)
    service = CompactionService(store, FakeSummarizer(), tight, clock=lambda: NOW)
    report = service.run_sessions([key("s1")], lambda: 300.0)
    assert report.compacted == 1 and store.reads == 2
    assert report.settled == 1 and store.list_due(10) == []  # nothing outside the retained tail: settled


def test_an_append_during_the_summary_keeps_the_session_due(sessions: SessionService) -> None:
    store = sessions.store
    add_invocations(sessions, "s1", 4)

    class Appending(FakeSummarizer):
        def summarize(self, turns: list[Turn], previous_summary: str | None) -> str:
            add_invocations(sessions, "s1", 1, start=4)  # a new turn while the model works
            return super().summarize(turns, previous_summary)

    service = CompactionService(store, Appending(), SETTINGS, clock=lambda: NOW)
    report = service.run_sessions([key("s1")], lambda: 300.0)
    assert report.compacted == 1 and report.settled == 0
    assert store.list_due(10) == [key("s1")]
