"""Typed models of what the service answers (and of the events a client sends).

Every model keeps fields it does not declare (``extra="allow"``): a newer server adding a field must not break an
older client, and an event's unmodelled fields (``usage_metadata``, ...) survive a read-modify-append round trip.
Field names are the service's snake_case.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "AppendResult",
    "CompactResult",
    "Content",
    "Context",
    "Event",
    "EventActions",
    "FunctionCall",
    "FunctionResponse",
    "MemoryEntry",
    "Part",
    "Profile",
    "ProfileFact",
    "RecalledMemory",
    "SaveResult",
    "Session",
    "SessionPage",
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class FunctionCall(_Model):
    id: str | None = None
    name: str | None = None
    args: dict[str, Any] | None = None


class FunctionResponse(_Model):
    id: str | None = None
    name: str | None = None
    response: dict[str, Any] | None = None


class Part(_Model):
    """One part of a content: text, a function call or response, or another kind kept as sent."""

    text: str | None = None
    thought: bool | None = None
    function_call: FunctionCall | None = None
    function_response: FunctionResponse | None = None
    inline_data: dict[str, Any] | None = None
    file_data: dict[str, Any] | None = None


class Content(_Model):
    role: str | None = None
    parts: list[Part] = Field(default_factory=list)

    @property
    def text(self) -> str:
        """The text parts joined by newlines ("" when there are none)."""
        return "\n".join(p.text for p in self.parts if p.text)


class EventActions(_Model):
    state_delta: dict[str, Any] = Field(default_factory=dict)
    artifact_delta: dict[str, Any] = Field(default_factory=dict)
    skip_summarization: bool | None = None
    transfer_to_agent: str | None = None
    escalate: bool | None = None
    compaction: dict[str, Any] | None = None


class Event(_Model):
    """An event as the service stores it (ADK's Event JSON, snake_case).

    Build one to append (``Event(author="user", content=Content(role="user", parts=[Part(text="hi")]))``): the
    client assigns ``id`` when it is missing, so that a retried append is never stored twice. ``seq`` is the
    server's position of the event in its session.
    """

    id: str | None = None
    invocation_id: str | None = None
    author: str | None = None
    branch: str | None = None
    timestamp: float | None = None
    content: Content | None = None
    actions: EventActions | None = None
    long_running_tool_ids: list[str] | None = None
    partial: bool | None = None
    turn_complete: bool | None = None
    interrupted: bool | None = None
    error_code: str | None = None
    error_message: str | None = None
    custom_metadata: dict[str, Any] | None = None
    turn_id: str | int | None = None
    metadata: dict[str, Any] | None = None
    seq: int | None = None

    @property
    def is_compaction(self) -> bool:
        """Whether the server wrote this event as a compaction summary."""
        return self.actions is not None and self.actions.compaction is not None

    def to_json(self) -> dict[str, Any]:
        """The event as the append route takes it: snake_case, unset fields left out."""
        return self.model_dump(mode="json", exclude_none=True)


class Session(_Model):
    """A session. ``version`` (from the ``ETag``) is what ``if_match`` takes to append only onto this state.

    ``state`` is merged: the session's keys, ``user:`` and ``app:`` keys. ``events`` are oldest first (none in a
    listing). ``next_token`` is set when a read stopped before the last page of events."""

    id: str
    app_name: str
    user_id: str
    state: dict[str, Any] = Field(default_factory=dict)
    events: list[Event] = Field(default_factory=list)
    create_time: float
    last_update_time: float
    version: int = 0
    next_token: str | None = None
    created: bool | None = None


class EventsPage(_Model):
    """Events read by id (``Client.get_events``) or one page of an id prefix's (``Client.events_page``), in id
    order; ``next_after_id`` (None on the last page) is the ``after_id`` of the next page."""

    events: list[Event] = Field(default_factory=list)
    next_after_id: str | None = None
    unread: list[str] = Field(default_factory=list)


class SessionPage(_Model):
    """One page of a listing; ``next_token`` (None on the last page) asks for the next."""

    sessions: list[Session] = Field(default_factory=list)
    next_token: str | None = None


class AppendResult(_Model):
    """The stored events (ids, timestamps and ``seq`` filled in), in the order sent, and the session's version
    after the append (the ``ETag``)."""

    events: list[Event]
    version: int | None = None


class RecalledMemory(_Model):
    """A memory the context's memories message holds: its id (to forget it) and its search score."""

    id: str
    score: float


class Context(_Model):
    """The messages to send a model next (``format`` decides their shape), the summary they start from and what
    the budgets left out; ``memories`` and ``profile``: what long-term memory added (``memories=``,
    ``profile=True``)."""

    messages: list[dict[str, Any]] = Field(default_factory=list)
    summary: str | None = None
    token_estimate: int = 0
    compacted_events: int = 0
    dropped_events: int = 0
    memories: list[RecalledMemory] = Field(default_factory=list)
    profile: bool = False


class MemoryEntry(_Model):
    """A long-term memory as search returns it (ADK's MemoryEntry plus ``id`` and ``score``)."""

    id: str
    content: Content
    author: str | None = None
    timestamp: str | None = None
    custom_metadata: dict[str, Any] = Field(default_factory=dict)
    score: float | None = None

    @property
    def text(self) -> str:
        """The memory's text."""
        return self.content.text


class ProfileFact(_Model):
    """One fact of a user's profile: its ``category`` (``name``, ``preference``, ``dislike``, ``allergy``,
    ``diet``, ``place``, ``person``, ``work``, ``other``), its ``text``, and the memories that state it."""

    category: str
    text: str
    memory_ids: list[str] = Field(default_factory=list)
    updated_at: str | None = None


class Profile(_Model):
    """What is known about a user, from their long-term memories (most important facts first)."""

    app_name: str
    user_id: str
    facts: list[ProfileFact] = Field(default_factory=list)
    memory_count: int = 0

    def by_category(self, category: str) -> list[ProfileFact]:
        """The facts of one category, in the profile's order."""
        return [f for f in self.facts if f.category == category]


class SaveResult(_Model):
    """How many memories a save stored, and how many it skipped (filtered out, or stored already)."""

    saved: int
    skipped: int


class CompactResult(_Model):
    """``compacted`` with the summary ``event``, or not, with the ``reason``."""

    compacted: bool
    event: Event | None = None
    reason: str | None = None


class DeleteResult(_Model):
    """``delete_event``'s answer: the ids of the events deleted (the one named, its tool-call partners, the
    summaries that covered one of them), oldest first, and the session's version after (the ``ETag``)."""

    deleted: list[str] = Field(default_factory=list)
    version: int | None = None


class ClearResult(_Model):
    """``clear_events``' answer: how many events were deleted (summaries included) and the session's version
    after (unchanged when nothing was left to delete)."""

    deleted: int = 0
    version: int | None = None
