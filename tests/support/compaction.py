"""Compaction over the in-memory session store: settings that make a session due soon, a fake summarizer,
invocations to compact and the compaction events stored."""

from __future__ import annotations

from typing import Any

from agent_memory.models import Event
from agent_memory.policy.compaction import CompactionSettings
from agent_memory.providers.ports import Turn
from agent_memory.service.sessions import SessionService
from agent_memory.stores.inmemory import InMemorySessionStore
from agent_memory.stores.ports import EventQuery, SessionKey

NOW = 9000.0
SETTINGS = CompactionSettings(compaction_interval=3, overlap_size=1, token_threshold=10**9, event_retention_size=2)


class FakeSummarizer:
    name = "fake"

    def __init__(self, fail_on: str | None = None) -> None:
        self.calls: list[tuple[list[Turn], str | None]] = []
        self.fail_on = fail_on

    def summarize(self, turns: list[Turn], previous_summary: str | None) -> str:
        self.calls.append((list(turns), previous_summary))
        if self.fail_on is not None and any(t.text.startswith(self.fail_on) for t in turns):
            raise RuntimeError("model timed out")
        return f"SUMMARY {len(self.calls)}"


def key(session_id: str = "s1") -> SessionKey:
    return SessionKey("app", "bob", session_id)


def add_invocations(sessions: SessionService, session_id: str, count: int, start: int = 0) -> None:
    """Create the session if needed and append ``count`` invocations (user message + agent reply)."""
    sessions.create_session(app_name="app", user_id="bob", session_id=session_id)
    events: list[dict[str, Any]] = []
    for i in range(start, start + count):
        inv = f"{session_id}-inv{i}"
        events.append(
            {
                "id": f"{session_id}-u{i}",
                "invocation_id": inv,
                "author": "user",
                "timestamp": 1000.0 + 2 * i,
                "content": {"role": "user", "parts": [{"text": f"{session_id} user {i}"}]},
            }
        )
        events.append(
            {
                "id": f"{session_id}-m{i}",
                "invocation_id": inv,
                "author": "agent",
                "timestamp": 1001.0 + 2 * i,
                "content": {"role": "model", "parts": [{"text": f"{session_id} agent {i}"}]},
            }
        )
    sessions.append_events(
        app_name="app", user_id="bob", session_id=session_id, events=[Event.model_validate(e) for e in events]
    )


def all_events(store: InMemorySessionStore, session_id: str = "s1") -> list[dict[str, Any]]:
    return store.read_events(key(session_id), EventQuery())


def compaction_events(store: InMemorySessionStore, session_id: str = "s1") -> list[dict[str, Any]]:
    return [e for e in all_events(store, session_id) if (e.get("actions") or {}).get("compaction")]
