"""Google ADK integration: a session service and a memory service backed by the agent memory API.

```python
from google.adk.runners import Runner
from agent_memory_client.adk import RemoteMemoryService, RemoteSessionService

runner = Runner(
    app_name="my_app",
    agent=agent,
    session_service=RemoteSessionService(base_url="http://127.0.0.1:3000"),
    memory_service=RemoteMemoryService(base_url="http://127.0.0.1:3000"),
)
```

Both are drop-in replacements for ADK's in-memory services and behave as they do (ADK's own session-service
contract suite passes against them), with the state of sessions, users and apps kept by the service:

- ``create_session`` is strict, as ADK's: an existing id raises ``AlreadyExistsError`` and changes nothing;
- ``append_event`` appends only onto the version of the session the caller holds (``If-Match``): a session another
  writer appended to since it was read raises ``StaleSessionError`` (a ``ValueError``), as ADK's database service
  does. The server's own events (a scheduled compaction summary) never make a held session stale;
- ``temp:`` state lives only in the caller's session object, for the invocation, and is never sent;
- ``get_session`` without filters (every turn of the Runner) reads the newest summary, which ADK applies as its own
  ``EventCompaction``, and the events after what it covers: a turn reads as much at 10,000 events as at 30;
- a rewind event (``Runner.rewind_async``) is appended after the service's rewind deleted the events it drops, so
  no context, summary or long-term memory keeps a rewound turn.

Written for google-adk 2.x and kept compatible with 1.x (``list_sessions`` without ``user_id``,
``get_user_state``, ``add_events_to_memory``, ``add_memory`` and ``delete_memory`` are simply extra methods there).
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Mapping, Sequence
from types import FrameType
from typing import Any

import google.adk.errors as _adk_errors
from google.adk.events.event import Event
from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.sessions.base_session_service import BaseSessionService, GetSessionConfig, ListSessionsResponse
from google.adk.sessions.session import Session
from google.genai import types
from pydantic import ValidationError
from pydantic_core import to_jsonable_python

from . import AsyncClient
from . import models as wire
from .errors import AlreadyExists, EventNotFound, NotFound, PreconditionFailed

__all__ = ["RemoteMemoryService", "RemoteSessionService"]


class _StaleSession(ValueError):
    """Stands in for ADK's StaleSessionError on versions that do not have it (a ValueError, as ADK's is)."""


class _AlreadyExists(Exception):
    """Stands in for ADK's AlreadyExistsError on versions that do not have it."""


class _SessionNotFound(ValueError):
    """Stands in for ADK's SessionNotFoundError on versions that do not have it."""


def _adk_error(module: str, name: str, fallback: type[Exception]) -> type[Exception]:
    # ADK 1.x releases differ in which of these exist: use ADK's own class when there is one.
    try:
        found = getattr(importlib.import_module(f"google.adk.errors.{module}"), name)
    except (ImportError, AttributeError):
        found = getattr(_adk_errors, name, fallback)
    return found if isinstance(found, type) and issubclass(found, Exception) else fallback


StaleSessionError = _adk_error("_stale_session_error", "StaleSessionError", _StaleSession)
AlreadyExistsError = _adk_error("already_exists_error", "AlreadyExistsError", _AlreadyExists)
SessionNotFoundError = _adk_error("session_not_found_error", "SessionNotFoundError", _SessionNotFound)

APP_PREFIX = "app:"
USER_PREFIX = "user:"
TEMP_PREFIX = "temp:"
# The attribute ADK's persistent services keep a session's storage revision in (a private attribute of Session
# in ADK 2; set as a plain attribute on ADK 1's Session, which works the same way for this service).
_MARKER = "_storage_update_marker"
_STALE_MESSAGE = (
    "The session has been modified in storage since it was loaded (another writer appended to it). "
    "Reload it with get_session and retry."
)
_PAGE = 100  # sessions per listing page, events and memories per save: the service's maximum
# The top-level fields an ADK Event has, by name and alias: the service adds its own (``seq``) and keeps what
# other clients sent, which an ADK Event (extra="forbid" on ADK 1) must not be given.
_EVENT_FIELDS = frozenset(Event.model_fields) | frozenset(
    info.alias for info in Event.model_fields.values() if info.alias
)


def _client(client: AsyncClient | None, base_url: str | None, options: dict[str, Any]) -> tuple[AsyncClient, bool]:
    if client is not None:
        if base_url is not None or options:
            raise TypeError("pass either client or base_url (and client options), not both")
        return client, False
    if base_url is None:
        raise TypeError("pass client (an AsyncClient) or base_url")
    return AsyncClient(base_url, **options), True


def _json_safe(value: Any) -> Any:
    # ADK lets state hold datetimes, pydantic models and the like; the service stores JSON.
    return to_jsonable_python(value, fallback=repr)


def event_to_json(event: Event) -> dict[str, Any]:
    """An ADK event as the service's append route takes it (snake_case; bytes as base64, as ADK writes them)."""
    data: dict[str, Any] = json.loads(event.model_dump_json(exclude_none=True, by_alias=False, fallback=repr))
    return data


def event_from_json(data: Mapping[str, Any]) -> Event:
    """An ADK event from the service's JSON. Fields ADK's Event does not have (``seq``, a chat client's
    ``turn_id``) are left out; a nested field this ADK version does not know is dropped rather than failing the
    read of the whole session."""
    kept = {key: value for key, value in data.items() if key in _EVENT_FIELDS}
    for _ in range(20):  # each round drops the unknown fields pydantic reported
        try:
            # JSON validation: bytes come back from their base64 text (val_json_bytes), as ADK's own stores do.
            return Event.model_validate_json(json.dumps(kept))
        except ValidationError as exc:
            unknown = [error["loc"] for error in exc.errors() if error["type"] == "extra_forbidden"]
            if not unknown:
                raise
            for loc in unknown:
                _drop(kept, loc)
    return Event.model_validate_json(json.dumps(kept))


def _drop(data: Any, loc: tuple[int | str, ...]) -> None:
    for step in loc[:-1]:
        try:
            data = data[step]
        except (KeyError, IndexError, TypeError):
            return
    if isinstance(data, dict):
        data.pop(loc[-1], None)


def _adk_session(remote: wire.Session) -> Session:
    session = Session(
        id=remote.id,
        app_name=remote.app_name,
        user_id=remote.user_id,
        state=dict(remote.state),
        events=[event_from_json(event.model_dump(mode="json", exclude_none=True)) for event in remote.events],
        last_update_time=remote.last_update_time,
    )
    setattr(session, _MARKER, str(remote.version))
    return session


def _in_rewind() -> bool:
    """Whether ADK's ``Runner.rewind_async`` asks (it reads the session as every turn does, and then replays state
    deltas from the start of the history, so it needs every event, not the window)."""
    frame: FrameType | None = sys._getframe(2)
    for _ in range(8):
        if frame is None:
            return False
        if frame.f_code.co_name == "rewind_async":
            return True
        frame = frame.f_back
    return False


class RemoteSessionService(BaseSessionService):  # type: ignore[misc]
    """ADK's ``BaseSessionService`` over the agent memory API.

    ``client``: an :class:`~agent_memory_client.AsyncClient` (closed by its owner); or ``base_url`` and the
    client's options (``auth``, ``timeout``, ``max_retries``, ...), and this service owns the client it builds
    (``await service.close()``, or ``async with``). ``window``: ``get_session`` without filters reads the newest
    summary and what follows it (ADK applies the summary as its own compaction event), not the whole history.
    """

    def __init__(
        self,
        client: AsyncClient | None = None,
        *,
        base_url: str | None = None,
        window: bool = True,
        **options: Any,
    ) -> None:
        self._client, self._owns_client = _client(client, base_url, options)
        self.window = window

    async def close(self) -> None:
        """Close the HTTP client if this service built it."""
        if self._owns_client:
            await self._client.close()

    async def __aenter__(self) -> RemoteSessionService:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        """Create a session (strictly: an existing ``session_id`` raises ``AlreadyExistsError``).

        ``app:`` and ``user:`` keys of ``state`` go to those scopes, ``temp:`` keys are dropped; the answer's
        state is merged (the session's own keys, the user's and the app's)."""
        session_id = session_id.strip() if session_id else None
        try:
            remote = await self._client.create_session(
                app_name,
                user_id,
                session_id=session_id or None,
                state=_json_safe(state) if state else None,
                strict=True,
            )
        except AlreadyExists as exc:
            raise AlreadyExistsError(f"Session with id {session_id} already exists.") from exc
        return _adk_session(remote)

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        """The session with its events, or None. Without ``config`` filters (what ADK's Runner asks every turn):
        the newest summary, as ADK's own compaction event, and the events after what it covers, so a turn reads as
        much at 10,000 events as at 30 (``window=False``, or for ``Runner.rewind_async``, which replays state from
        the start: every event); with them, as ``config`` filters."""
        num_recent = config.num_recent_events if config else None
        after = config.after_timestamp if config else None
        try:
            remote = await self._client.get_session(
                app_name,
                user_id,
                session_id.strip(),
                num_recent_events=num_recent,
                after_timestamp=after,
                after_summary=self.window and num_recent is None and after is None and not _in_rewind(),
            )
        except NotFound:
            return None
        return _adk_session(remote)

    async def list_sessions(self, *, app_name: str, user_id: str | None = None) -> ListSessionsResponse:
        """Every session of the user (``user_id`` None: of every user of the app), without events, with merged
        state, the least recently updated first."""
        sessions: list[Session] = []
        next_token: str | None = None
        while True:
            page = await self._client.list_sessions(app_name, user_id, limit=_PAGE, next_token=next_token)
            sessions.extend(_adk_session(remote) for remote in page.sessions)
            next_token = page.next_token
            if not next_token:
                break
        # ADK's order, whatever the listing's: the least recently updated first (an app-wide listing pages by user).
        sessions.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
        return ListSessionsResponse(sessions=sessions)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Delete the session and its events (nothing happens when it does not exist)."""
        await self._client.delete_session(app_name, user_id, session_id.strip())

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """The user's state, keys without their ``user:`` prefix (``{}`` when there is none)."""
        state = await self._client.get_user_state(app_name, user_id)
        return {key.removeprefix(USER_PREFIX): value for key, value in state.items() if key.startswith(USER_PREFIX)}

    async def get_app_state(self, *, app_name: str) -> dict[str, Any]:
        """The app's state, keys without their ``app:`` prefix (not part of ADK's interface)."""
        state = await self._client.get_app_state(app_name)
        return {key.removeprefix(APP_PREFIX): value for key, value in state.items() if key.startswith(APP_PREFIX)}

    async def append_event(self, session: Session, event: Event) -> Event:
        """Store ``event`` in ``session`` and apply its state delta to the session object.

        A partial (streaming) event is returned as it is, not stored. ``temp:`` keys apply to ``session.state``
        only and are removed from the event's delta. The append is conditional on the version ``session`` was
        read at: a session appended to by another writer since raises ``StaleSessionError`` and stores nothing.
        """
        if event.partial:
            return event
        delta = event.actions.state_delta if event.actions else None
        if delta:
            # Temp state is visible to the rest of this invocation through the session object, never stored.
            for key, value in delta.items():
                if key.startswith(TEMP_PREFIX):
                    session.state[key] = value
            event.actions.state_delta = {k: v for k, v in delta.items() if not k.startswith(TEMP_PREFIX)}
        marker = getattr(session, _MARKER, None)
        rewind = event.actions.rewind_before_invocation_id if event.actions else None
        if rewind:
            marker = await self._rewind(session, str(rewind), marker)
        try:
            result = await self._client.append_event(
                session.app_name,
                session.user_id,
                session.id,
                event_to_json(event),
                if_match=int(marker) if marker is not None else None,
                minimal=True,  # the event's id and seq: ADK holds its body already
            )
        except PreconditionFailed as exc:
            raise StaleSessionError(_STALE_MESSAGE) from exc
        except NotFound as exc:
            raise SessionNotFoundError(f"Session {session.id} not found.") from exc
        stored = result.events[0] if result.events else None
        if not event.id and stored is not None and stored.id:
            event.id = stored.id
        setattr(session, _MARKER, str(result.version))
        # The service keeps the latest event time as the session's update time, as ADK's services do.
        session.last_update_time = max(session.last_update_time, event.timestamp)
        if event.actions and event.actions.state_delta:
            session.state.update(event.actions.state_delta)
        session.events.append(event)
        return event

    async def _rewind(self, session: Session, invocation_id: str, marker: str | None) -> str | None:
        """Delete the events a rewind event drops (from the first event of ``invocation_id`` on), as the service's
        rewind does: so neither the context route, a compaction summary nor long-term memory keeps a rewound turn,
        and a summary that covered one is rebuilt from what is left. ADK reads the same live events as from its
        in-memory service (it drops a rewind event whose invocation is gone). Answers the version to append at."""
        try:
            cleared = await self._client.rewind(
                session.app_name,
                session.user_id,
                session.id,
                before_invocation_id=invocation_id,
                if_match=int(marker) if marker is not None else None,
            )
        except PreconditionFailed as exc:
            raise StaleSessionError(_STALE_MESSAGE) from exc
        except EventNotFound:
            return marker  # no event of the invocation is stored (a retry, or a rewind of nothing): nothing to drop
        except NotFound as exc:
            raise SessionNotFoundError(f"Session {session.id} not found.") from exc
        return marker if cleared.version is None else str(cleared.version)


def _text(content: types.Content | None) -> str:
    if content is None or not content.parts:
        return ""
    return "\n".join(part.text for part in content.parts if part.text)


def _memory_event(event: Event, metadata: Mapping[str, object] | None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": event.id,
        "author": event.author or "user",
        "timestamp": event.timestamp,
        "content": json.loads(event.content.model_dump_json(exclude_none=True)) if event.content else None,
    }
    if event.invocation_id:
        data["invocation_id"] = event.invocation_id
    custom = {**(event.custom_metadata or {}), **_json_safe(dict(metadata or {}))}
    if custom:
        data["custom_metadata"] = custom
    return data


def _memory_entry(hit: wire.MemoryEntry) -> MemoryEntry:
    fields: dict[str, Any] = {
        "id": hit.id,
        "content": types.Content.model_validate_json(hit.content.model_dump_json(exclude_none=True)),
        "author": hit.author,
        "timestamp": hit.timestamp,
        "custom_metadata": dict(hit.custom_metadata),
    }
    # ADK 1.x's MemoryEntry has no id nor custom_metadata.
    return MemoryEntry(**{name: value for name, value in fields.items() if name in MemoryEntry.model_fields})


class RemoteMemoryService(BaseMemoryService):  # type: ignore[misc]
    """ADK's ``BaseMemoryService`` over the agent memory API's long-term memory.

    A memory is one event with text. ``add_session_to_memory`` saves the events of the session it is given (each
    once: saving a session again adds only its new events; a memory forgotten stays forgotten); with
    ``session_policy`` (a preset name such as ``"default"``, or a policy object) it asks the service to save the
    stored session by that policy instead. ``search_memory`` returns at most ``top_k`` memories scoring at least
    ``min_score`` (None: the service's default threshold, so a query that matches nothing returns nothing).

    ``client`` / ``base_url`` and options: as :class:`RemoteSessionService`.
    """

    def __init__(
        self,
        client: AsyncClient | None = None,
        *,
        base_url: str | None = None,
        top_k: int = 10,
        min_score: float | None = None,
        session_policy: str | dict[str, Any] | None = None,
        **options: Any,
    ) -> None:
        self._client, self._owns_client = _client(client, base_url, options)
        self.top_k = top_k
        self.min_score = min_score
        self.session_policy = session_policy

    async def close(self) -> None:
        """Close the HTTP client if this service built it."""
        if self._owns_client:
            await self._client.close()

    async def __aenter__(self) -> RemoteMemoryService:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def add_session_to_memory(self, session: Session) -> None:
        """Save the session's events with text to the user's memory (each event once)."""
        if self.session_policy is not None:
            await self._client.save_memories(
                session.app_name, session.user_id, session_id=session.id, policy=self.session_policy
            )
            return
        await self.add_events_to_memory(
            app_name=session.app_name, user_id=session.user_id, events=session.events, session_id=session.id
        )

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Event],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """Save these events with text to the user's memory, each once (by event id); ``custom_metadata`` is
        added to each memory's metadata."""
        payload = [_memory_event(event, custom_metadata) for event in events if _text(event.content)]
        for start in range(0, len(payload), _PAGE):
            await self._client.save_memories(
                app_name, user_id, session_id=session_id, events=payload[start : start + _PAGE]
            )

    async def add_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        memories: Sequence[MemoryEntry],
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """Save memory texts directly (a text already stored is not stored twice)."""
        items: list[dict[str, Any]] = []
        for memory in memories:
            text = _text(memory.content)
            if not text.strip():
                continue
            item: dict[str, Any] = {"text": text}
            metadata = {**(getattr(memory, "custom_metadata", None) or {}), **_json_safe(dict(custom_metadata or {}))}
            if metadata:
                item["metadata"] = metadata
            if memory.timestamp:
                item["timestamp"] = memory.timestamp
            items.append(item)
        for start in range(0, len(items), _PAGE):
            await self._client.save_memories(app_name, user_id, memories=items[start : start + _PAGE])

    async def search_memory(self, *, app_name: str, user_id: str, query: str) -> SearchMemoryResponse:
        """The user's memories that match ``query``, best first."""
        if not query.strip():
            return SearchMemoryResponse()
        hits = await self._client.search_memories(app_name, user_id, query, top_k=self.top_k, min_score=self.min_score)
        return SearchMemoryResponse(memories=[_memory_entry(hit) for hit in hits])

    async def delete_memory(self, *, app_name: str, user_id: str, memory_id: str | None = None) -> None:
        """Forget one memory (an id from ``search_memory``); it is not saved again by a later save."""
        if memory_id:
            await self._client.forget_memory(app_name, user_id, memory_id)
