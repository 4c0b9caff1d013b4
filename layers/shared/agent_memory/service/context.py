"""The context use case: the messages to send a model next, read in proportion to the window."""

from __future__ import annotations

import logging
from typing import Any

from ..errors import SessionNotFound
from ..policy.context import ContextOptions, build_context
from ..policy.identifiers import validate_identifier
from ..policy.messages import compaction_range, event_messages, is_compaction, summary_text
from ..stores.ports import EventQuery, SessionKey, SessionStore

logger = logging.getLogger(__name__)


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
        try:
            return build_context(events, summary, options)
        except (AttributeError, TypeError, KeyError, ValueError):
            # A stored event of a shape the message reader does not expect (older data, or written outside the
            # service): leave out what does not read rather than fail the session's context.
            logger.warning("context: some stored events do not read as messages", exc_info=True)
        readable = [e for e in events if _reads_as_messages(e)]
        if summary is not None and not _reads_as_messages(summary):
            summary = None
        return build_context(readable, summary, options)


def _reads_as_messages(event: dict[str, Any]) -> bool:
    """Whether the context window can read this event (on its own)."""
    try:
        if is_compaction(event):
            summary_text(event)
            compaction_range(event)
            build_context([], event, ContextOptions())
        else:
            for message in event_messages(event):
                message.tokens()
            build_context([event], None, ContextOptions())
    except (AttributeError, TypeError, KeyError, ValueError):
        logger.warning("context: stored event left out", extra={"event_id": str(event.get("id"))[:200]})
        return False
    return True
