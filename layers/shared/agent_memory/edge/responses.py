"""Response models: what every route answers, as the OpenAPI document (``openapi.py``) describes it.

The handlers build their answers as plain JSON (``api.json_response``): stored events and state are returned
as stored, never re-validated on the way out (``models.Session`` says why). These models are the answers'
documented shape, snake_case throughout; they accept unknown fields (``extra="allow"``), as a client should
(a newer server may add fields). ``tests/integration/test_openapi.py`` validates real answers against them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..models import Event


class _Response(BaseModel):
    model_config = ConfigDict(extra="allow", defer_build=True)


class ErrorDetail(_Response):
    code: str = Field(description="machine-readable: `invalid_input`, `session_not_found`, `already_exists`, …")
    message: str = Field(description="for people; never parse it")
    field: str | None = Field(default=None, description="the parameter or body field at fault (`events[3].id`)")


class ErrorResponse(_Response):
    """Every 4xx and 5xx answer, whatever the route."""

    error: ErrorDetail


class Session(_Response):
    """A session: its events (one page, oldest first) and its state merged from the session, `user:` and `app:`
    scopes."""

    id: str
    app_name: str
    user_id: str
    state: dict[str, Any] = Field(description="session state merged with the `user:` and `app:` scopes")
    events: list[Event] = Field(default_factory=list, description="absent from listings")
    create_time: float = Field(description="seconds since the epoch")
    last_update_time: float = Field(description="seconds since the epoch")
    version: int = Field(description='counts client appends; the ETag is `"<version>"`')
    next_token: str | None = Field(default=None, description="the next page of events; null on the last page")
    created: bool | None = Field(default=None, description="create only: true when this request created it")


class EventsById(_Response):
    """Events read by id: the named ones in the order named, or one page of a prefix's in id order."""

    app_name: str
    user_id: str
    session_id: str
    events: list[Event]
    next_after_id: str | None = Field(
        default=None, description="prefix reads: the `after_id` of the next page; null on the last page"
    )
    unread: list[str] | None = Field(
        default=None, description="named reads: ids held but left out to keep the answer under the response cap"
    )


class SessionSummary(_Response):
    """A session in a listing: no events."""

    id: str
    app_name: str
    user_id: str
    state: dict[str, Any]
    create_time: float
    last_update_time: float
    version: int


class SessionPage(_Response):
    sessions: list[SessionSummary]
    next_token: str | None = Field(default=None, description="the next page; null on the last page")


class UserState(_Response):
    app_name: str
    user_id: str
    state: dict[str, Any] = Field(description="the user's state, keys with their `user:` prefix")


class AppState(_Response):
    app_name: str
    state: dict[str, Any] = Field(description="the app's state, keys with their `app:` prefix")


class EventList(_Response):
    """A batch append's answer: the stored events, in order."""

    events: list[Event]


AppendAnswer = Event | EventList
"""The append's answer: the event (one sent) or the list (a batch sent)."""


class RecalledMemoryScore(_Response):
    """A memory hit the context holds: its id (to forget it) and its search score."""

    id: str
    score: float


class ContextResponse(_Response):
    messages: list[dict[str, Any]] = Field(description="in the requested `format` (`openai`, `full`, `adk`)")
    summary: str | None = Field(default=None, description="the rolling summary of compacted history, if any")
    token_estimate: int
    compacted_events: int
    dropped_events: int
    memories: list[RecalledMemoryScore] = Field(
        default_factory=list, description="the memory hits in the memories message (`memories=k`), best first"
    )
    profile: bool = Field(default=False, description="whether the profile message is in (`profile=true`)")


class CompactResponse(_Response):
    compacted: bool
    event: Event | None = Field(default=None, description="the compaction event, when one was written")
    reason: str | None = Field(default=None, description="why nothing was compacted")


class SaveResult(_Response):
    saved: int = Field(description="memories stored by this request")
    skipped: int = Field(description="items not stored: filtered out, empty, or stored before")


class MemoryPart(_Response):
    text: str


class MemoryContent(_Response):
    role: str = Field(description="`user`, or `model` for anything another author said")
    parts: list[MemoryPart]


class MemoryEntry(_Response):
    """ADK's MemoryEntry, plus its id (to forget it) and its score."""

    id: str = Field(description="the memory's id, for `DELETE …/memories/{memory_id}`")
    content: MemoryContent
    author: str
    timestamp: str = Field(description="ISO 8601, UTC")
    custom_metadata: dict[str, Any]
    score: float = Field(
        ge=0.0,
        le=1.0,
        description="the estimated probability that this memory is relevant to the query (the same meaning for "
        "every query; see docs/api.md)",
    )


class SearchResponse(_Response):
    memories: list[MemoryEntry] = Field(description="best first; none scoring below `min_score`")


class ProfileFact(_Response):
    category: Literal["name", "preference", "dislike", "allergy", "diet", "place", "person", "work", "other"]
    text: str = Field(description='the fact, without a subject ("Allergic to peanuts", "Lives in Porto")')
    memory_ids: list[str] = Field(description="the memories that state it (forget them and the fact goes)")
    updated_at: str = Field(description="ISO 8601, UTC: the newest of those memories")


class Profile(_Response):
    """What is known about the user, from their long-term memories."""

    app_name: str
    user_id: str
    facts: list[ProfileFact] = Field(
        description="name, allergies, diet, dislikes, preferences, people, places, work, other; newest first in each"
    )
    memory_count: int = Field(description="how many memories the profile was built from")


# --- export / import and the memo -----------------------------------------------------------------------------


class ExportedState(_Response):
    session: dict[str, Any] = Field(description="the session's own keys")
    user: dict[str, Any] = Field(description="the user's keys, without `user:`")
    app: dict[str, Any] = Field(description="the app's keys, without `app:`")


class ExportedCompaction(_Response):
    summary_event_id: str | None = Field(description="the newest compaction event, or null")
    end_seq: int = Field(description="the last seq it covers (the compaction watermark)")


class SessionExport(_Response):
    """A whole session as one document (`GET …/export`; YAML is the same tree), what the import takes back."""

    format: str = Field(description="`agent-memory/session@1`")
    app_name: str
    user_id: str
    session_id: str
    create_time: float
    last_update_time: float
    version: int
    last_seq: int
    state: ExportedState
    memo: dict[str, Any]
    compaction: ExportedCompaction
    events: list[Event] = Field(
        description="every event up to `last_seq`, summaries included, with `seq` (paged: this page's)"
    )
    next_token: str | None = Field(
        default=None, description="paged (`limit` or `next_token` sent): the next page; null on the last page"
    )


class MemoResponse(_Response):
    memo: dict[str, Any] = Field(description="the session's memo; `{}` when never written")


class DeletedEvents(_Response):
    """The answer of `DELETE …/events/{event_id}`: the events deleted (the one named, its tool partners, the
    summaries that covered one of them), oldest first, and the session's version after."""

    deleted: list[str] = Field(description="ids of the events deleted, oldest first")
    version: int = Field(description='the session\'s version after the delete; the ETag is `"<version>"`')


class ClearedEvents(_Response):
    """The answer of `DELETE …/events` (a clear, or a rewind with `before_seq` / `before_invocation_id`)."""

    deleted: int = Field(description="how many events were deleted (summaries included)")
    version: int = Field(description="the session's version after; unchanged when nothing was deleted")
