"""Sessions and events as a SessionStore takes them and reads them back, for the store contracts and the tests
of what other tiers store."""

from __future__ import annotations

from typing import Any

from agent_memory.policy.state import split_delta
from agent_memory.stores.ports import EventQuery, NewEvent, SessionKey, SessionRecord, SessionStore

KEY = SessionKey("app", "alice", "s1")
# Items (and Queries) a DynamoDB read of events spends on the session item's deletion marks.
MARKS = 2


def record(key: SessionKey = KEY, now: float = 1000.0) -> SessionRecord:
    return SessionRecord(key.app_name, key.user_id, key.session_id, create_time=now, update_time=now)


def event(event_id: str, ts: float, text: str = "hi", delta: dict[str, Any] | None = None) -> NewEvent:
    body = {
        "id": event_id,
        "author": "user",
        "timestamp": ts,
        "content": {"role": "user", "parts": [{"text": text}]},
        "actions": {"state_delta": delta or {}},
    }
    return NewEvent(id=event_id, timestamp=ts, body=body, delta=split_delta(delta or {}))


def ids_of(store: SessionStore, query: EventQuery) -> list[str]:
    return [e["id"] for e in store.read_events(KEY, query)]


def exported_event(event_id: str, seq: int, ts: float, text: str = "hi", **extra: Any) -> dict[str, Any]:
    """An event as a store reads it back (and an export holds it): ``seq`` last."""
    return {
        "id": event_id,
        "invocation_id": "inv",
        "author": "user",
        "timestamp": ts,
        "content": {"role": "user", "parts": [{"text": text}]},
        "actions": {"state_delta": {}},
        **extra,
        "seq": seq,
    }
