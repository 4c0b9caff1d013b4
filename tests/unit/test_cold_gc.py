"""The search function's cold path pauses Python's garbage collector until its first search (composition.py)."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator

import pytest

from agent_memory import composition
from agent_memory.composition import Services, preload_embedder
from agent_memory.config import Settings
from agent_memory.edge.requests import MemoryText
from agent_memory.runtime import coldgc


@pytest.fixture
def fresh_pause(monkeypatch: pytest.MonkeyPatch) -> Iterator[composition._ColdGCPause]:
    """A process's pause not yet used; the collector enabled and nothing frozen again afterwards."""
    pause = composition._ColdGCPause()
    monkeypatch.setattr(composition, "_cold_gc", pause)
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    try:
        yield pause
    finally:
        pause.resume()
        gc.enable()
        if gc.get_freeze_count() != frozen:
            gc.unfreeze()


def _searching_services() -> Services:
    wired = Services(Settings(embedder="none"), "memory")
    wired.memories.add_texts(app_name="app", user_id="u", memories=[MemoryText(text="I walk my dog at dawn")])
    return wired


def test_the_handlers_init_pauses_the_collector_and_the_first_search_resumes_and_freezes(
    fresh_pause: composition._ColdGCPause, monkeypatch: pytest.MonkeyPatch
) -> None:
    wired = _searching_services()
    monkeypatch.setattr(composition, "services", lambda: wired)
    monkeypatch.delenv("AWS_LAMBDA_INITIALIZATION_TYPE", raising=False)
    preload_embedder()  # the search function's init, on demand
    assert not gc.isenabled()
    kept = [[i] for i in range(1000)]  # made while paused: alive at the first answer
    found = wired.memories.search(app_name="app", user_id="u", query="dog")
    assert [m["content"]["parts"][0]["text"] for m in found["memories"]] == ["I walk my dog at dawn"]
    assert gc.isenabled()
    assert gc.get_freeze_count() >= len(kept)  # frozen, not traversed, by the resume
    preload_embedder()  # once per process: a second init asks again, the collector stays on
    assert gc.isenabled()


def test_the_pause_ends_by_itself_when_no_search_comes(
    fresh_pause: composition._ColdGCPause, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(coldgc, "COLD_GC_PAUSE_S", 0.05)
    composition.pause_gc_for_first_search()
    assert not gc.isenabled()
    deadline = time.monotonic() + 5
    while not gc.isenabled() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert gc.isenabled() and not fresh_pause.paused


def test_a_collector_disabled_by_someone_else_stays_disabled(fresh_pause: composition._ColdGCPause) -> None:
    wired = _searching_services()
    gc.disable()
    composition.pause_gc_for_first_search()
    assert not fresh_pause.paused
    wired.memories.search(app_name="app", user_id="u", query="dog")
    assert not gc.isenabled()  # the search resumed nothing it had not paused


def test_an_init_ahead_of_requests_does_not_pause(
    fresh_pause: composition._ColdGCPause, monkeypatch: pytest.MonkeyPatch
) -> None:
    wired = Services(Settings(embedder="none"), "memory")
    monkeypatch.setattr(composition, "services", lambda: wired)
    monkeypatch.setenv("AWS_LAMBDA_INITIALIZATION_TYPE", "provisioned-concurrency")
    preload_embedder()  # its init runs before any request: nothing to gain, and the pause would outlive it
    assert gc.isenabled() and not fresh_pause.paused
