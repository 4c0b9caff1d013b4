"""The context use case: the messages to send a model next, read in proportion to the window."""

from __future__ import annotations

import functools
from typing import Any

from ..errors import SessionNotFound
from ..policy.context import ContextOptions, build_context
from ..policy.identifiers import validate_identifier
from ..stores.ports import EventQuery, SessionKey, SessionStore


class ContextService:
    def __init__(self, store: SessionStore) -> None:
        self._store = store

    def get_context(self, app_name: str, user_id: str, session_id: str, options: ContextOptions) -> dict[str, Any]:
        """Reads the session, then only the events after its newest summary's range (the summary among them)."""
        key = SessionKey(
            validate_identifier(app_name, "app_name"),
            validate_identifier(user_id, "user_id"),
            validate_identifier(session_id, "session_id"),
        )
        record = self._store.get_session(key)
        if record is None:
            raise SessionNotFound(session_id)
        events = self._store.read_events(key, EventQuery(after_seq=record.summary_end_seq))
        summary = next((e for e in events if e.get("id") == record.summary_event_id), None)
        return build_context(events, summary, options)


@functools.cache
def default_context_service() -> ContextService:
    from .sessions import default_session_service

    return ContextService(default_session_service().store)
