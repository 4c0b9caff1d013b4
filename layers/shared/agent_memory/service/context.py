"""The context use case: the messages to send a model next, read in proportion to the window, with what long-term
memory recalls (memory search hits, the user's profile) when asked."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import SessionNotFound
from ..limits import MAX_QUERY_CHARS
from ..policy.context import (
    ContextOptions,
    ProfileFacts,
    Recall,
    RecalledMemory,
    build_context,
    iso_date,
    latest_user_text,
    reads_tail,
    tail_need,
)
from ..policy.messages import compaction_range, event_messages, is_compaction, summary_text
from ..policy.profile import profile_text
from ..stores.ports import EventQuery, SessionKey, SessionRecord, SessionStore, marks_of, validated_key

if TYPE_CHECKING:
    from .memories import MemoryService

logger = logging.getLogger(__name__)

# A summary older than the window is looked for forward from the watermark, this many events a read (compaction
# keeps ``EventRetentionSize`` events, default 10, between the watermark and its summary).
SUMMARY_PAGE = 16


class ContextService:
    def __init__(
        self,
        store: SessionStore,
        memories: Callable[[], MemoryService] | None = None,
        *,
        tail_margin: int = SUMMARY_PAGE,
    ) -> None:
        """``memories`` gives the memory service when a context asks for memories or the profile: called only
        then, so that a plain context never loads the embedder or reads the memory store. A context with a budget
        reads the newest events only when more than its first page and ``tail_margin`` follow the watermark
        (fewer are read at once: one request rather than a page, a count and a summary look-up)."""
        self._store = store
        self._memories = memories
        self._tail_margin = tail_margin

    def get_context(self, app_name: str, user_id: str, session_id: str, options: ContextOptions) -> dict[str, Any]:
        """Reads the session, then the events after its newest summary's range: with a budget, only the newest of
        them, page by page until they decide the window (``tail_need``), and the summary when it is older than
        them; without one, all of them. Then, when ``options`` asks for them, the memory hits and the profile."""
        key = validated_key(app_name, user_id, session_id)
        record = self._store.get_session(key)
        if record is None:
            raise SessionNotFound(session_id)
        query = EventQuery(after_seq=record.summary_end_seq, marks=marks_of(record))
        unread = 0
        # At most this many events follow the watermark (seqs; deleted and summary events among them).
        span = record.last_seq - record.summary_end_seq
        if reads_tail(options) and span > tail_need([], options) + self._tail_margin:
            searches_user_text = options.memories > 0 and options.memory_query is None
            tail = self._store.read_tail(
                key, query, lambda read: tail_need(read, options, wants_user_text=searches_user_text)
            )
            events, unread = tail.events, tail.older
        else:
            events = self._store.read_events(key, query)
        summary = next((e for e in events if e.get("id") == record.summary_event_id), None)
        if summary is None and unread and record.summary_event_id is not None:
            summary = self._older_summary(key, record, events)
            unread -= summary is not None  # the summary is among the unread events, and is not a dropped one
        recall = self._recall(key, events, options) if options.wants_memory else None
        try:
            return build_context(events, summary, options, recall, unread=unread)
        except (AttributeError, TypeError, KeyError, ValueError):
            # A stored event of a shape the message reader does not expect (older data, or written outside the
            # service): leave out what does not read rather than fail the session's context.
            logger.warning("context: some stored events do not read as messages", exc_info=True)
        readable = [e for e in events if _reads_as_messages(e)]
        if summary is not None and not _reads_as_messages(summary):
            summary = None
        return build_context(readable, summary, options, recall, unread=unread)

    def _older_summary(
        self, key: SessionKey, record: SessionRecord, tail: list[dict[str, Any]]
    ) -> dict[str, Any] | None:
        """The session's newest summary when it is older than the ``tail`` read: forward from the watermark (it
        follows the events compaction kept), up to the tail; None when it is gone (deleted meanwhile)."""
        after = record.summary_end_seq
        before = int(tail[0].get("seq") or 0) if tail else None
        while True:
            page = self._store.read_events(
                key,
                EventQuery(
                    after_seq=after,
                    up_to_seq=None if before is None else before - 1,
                    limit=SUMMARY_PAGE,
                    marks=marks_of(record),
                ),
            )
            found = next((e for e in page if e.get("id") == record.summary_event_id), None)
            if found is not None or len(page) < SUMMARY_PAGE:
                return found
            after = int(page[-1].get("seq") or 0)

    def _recall(self, key: SessionKey, events: list[dict[str, Any]], options: ContextOptions) -> Recall:
        """The memory hits (searched with ``memory_query``, else the newest user message of the session) and the
        profile the context asked for."""
        if self._memories is None:
            raise RuntimeError("this ContextService was built without a memory service")
        memory = self._memories()
        hits: tuple[RecalledMemory, ...] = ()
        query = options.memory_query or latest_user_text(events)
        if options.memories and query is not None and query.strip():
            # The end of a long message: what the user asks last is the likeliest subject.
            found = memory.search(
                app_name=key.app_name,
                user_id=key.user_id,
                query=query.strip()[-MAX_QUERY_CHARS:],
                top_k=options.memories,
                min_score=options.memory_min_score,
            )
            hits = tuple(_recalled(entry) for entry in found["memories"])
        profile = _profile_facts(memory.profile(key.app_name, key.user_id)) if options.profile else None
        return Recall(memories=hits, profile=profile)


def _profile_facts(profile: dict[str, Any]) -> ProfileFacts | None:
    """The profile as the context trims it: its first ``n`` facts rendered by ``profile_text`` (the most important
    first), with the memory ids of each. None when nothing is known."""
    facts = [f for f in profile.get("facts") or [] if isinstance(f, dict) and f.get("text")]
    if not facts:
        return None
    shown = {**profile, "facts": facts}
    return ProfileFacts(
        count=len(facts),
        render=lambda n: profile_text(shown, max_facts=n),
        memory_ids=tuple(tuple(str(i) for i in f.get("memory_ids") or []) for f in facts),
    )


def _recalled(entry: dict[str, Any]) -> RecalledMemory:
    """A search hit (an ADK MemoryEntry with id and score) as the context puts it: its text and its date."""
    parts = (entry.get("content") or {}).get("parts") or []
    text = "\n".join(str(p.get("text") or "") for p in parts if isinstance(p, dict))
    return RecalledMemory(
        id=str(entry["id"]), text=text, score=float(entry["score"]), date=iso_date(entry.get("timestamp"))
    )


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
