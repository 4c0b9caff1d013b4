"""``Client`` (sync) and ``AsyncClient``: the same methods, run by one shared core (``_core.Core``).

Each method hands the core's flow for that operation to its driver (``_run``), which performs the flow's steps
with httpx (sync or async) and its sleeps (``time.sleep`` or ``asyncio.sleep``). Nothing else differs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

from ._core import Core, Flow, Reply, Send
from .auth import AuthMode, resolve_auth
from .models import (
    AppendResult,
    ClearResult,
    CompactResult,
    Context,
    DeleteResult,
    Event,
    EventsPage,
    MemoryEntry,
    Profile,
    SaveResult,
    Session,
    SessionPage,
)

__all__ = ["AsyncClient", "Client"]

T = TypeVar("T")
EventLike = BaseModel | Mapping[str, Any]
IfMatch = int | str | Session | None


def _recall_params(
    system: str | Sequence[str] | None,
    memories: int | None,
    memory_query: str | None,
    memory_min_score: float | None,
    profile: bool | None,
) -> dict[str, Any]:
    """The context's base prompt and memory parameters that were given (None: left to the service's default)."""
    given = {
        "system": system,
        "memories": memories,
        "memory_query": memory_query,
        "memory_min_score": memory_min_score,
        "profile": profile,
    }
    return {k: v for k, v in given.items() if v is not None}


class _Base:
    def __init__(
        self,
        base_url: str,
        *,
        auth: AuthMode | httpx.Auth | None = None,
        region: str | None = None,
        credentials: Any = None,
        bearer_token: str | None = None,
        timeout: float | httpx.Timeout = 10.0,
        max_retries: int = 4,
        backoff: float = 0.2,
    ) -> None:
        self._core = Core(base_url, timeout=timeout, max_retries=max_retries, backoff=backoff)
        self._auth = resolve_auth(base_url, auth, region=region, credentials=credentials, bearer_token=bearer_token)

    @property
    def base_url(self) -> str:
        return self._core.base_url


class Client(_Base):
    """A synchronous client of the agent memory API.

    ``base_url``: the API's URL (``make run``: ``http://127.0.0.1:3000``; deployed: the stack's ``ApiUrl``).
    ``auth``: None picks SigV4 for ``*.amazonaws.com`` hosts and nothing otherwise; ``"sigv4"`` (a custom domain
    in front of an IAM-authorised API), ``"none"``, or any ``httpx.Auth``. SigV4 uses ``credentials`` (botocore
    credentials) or the standard AWS chain, and ``region`` or the one the URL or the AWS configuration names.
    ``bearer_token``: sent as ``Authorization: Bearer``. ``timeout``: seconds (or an ``httpx.Timeout``) for each
    attempt. ``max_retries``, ``backoff``: retries of throttling, unavailability and connection errors (see
    ``agent_memory_client._core``). ``transport``: an httpx transport (tests, proxies).

    Every method raises an ``agent_memory_client.errors.AgentMemoryError`` subclass on failure.
    """

    def __init__(
        self,
        base_url: str,
        *,
        auth: AuthMode | httpx.Auth | None = None,
        region: str | None = None,
        credentials: Any = None,
        bearer_token: str | None = None,
        timeout: float | httpx.Timeout = 10.0,
        max_retries: int = 4,
        backoff: float = 0.2,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(
            base_url,
            auth=auth,
            region=region,
            credentials=credentials,
            bearer_token=bearer_token,
            timeout=timeout,
            max_retries=max_retries,
            backoff=backoff,
        )
        self._http = httpx.Client(auth=self._auth, transport=transport, timeout=self._core.timeout)
        self._sleep: Callable[[float], None] = time.sleep

    def _run(self, flow: Flow[T]) -> T:
        reply: Reply = None
        try:
            while True:
                step = flow.send(reply)
                if isinstance(step, Send):
                    try:
                        reply = self._http.send(step.request)
                    except httpx.TransportError as exc:
                        reply = exc
                else:
                    self._sleep(step.seconds)
                    reply = None
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # --- sessions -------------------------------------------------------------------------------------------

    def create_session(
        self,
        app_name: str,
        user_id: str,
        *,
        session_id: str | None = None,
        state: Mapping[str, Any] | None = None,
        strict: bool = False,
    ) -> Session:
        """Get-or-create a session (``created`` says which). ``session_id`` None: a new UUID (chosen by the
        client, so that a retry cannot create two). ``state`` applies only on a true creation (``app:`` and
        ``user:`` keys go to those scopes). ``strict``: raise ``AlreadyExists`` if the id is taken."""
        return self._run(
            self._core.create_session(app_name, user_id, session_id=session_id, state=state, strict=strict)
        )

    def get_session(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        *,
        num_recent_events: int | None = None,
        after_timestamp: float | str | datetime | None = None,
        limit: int | None = None,
        next_token: str | None = None,
        all_pages: bool = True,
        after_summary: bool = False,
    ) -> Session:
        """A session with its events (oldest first) and merged state; raises ``NotFound``. ``all_pages``: follow
        ``next_token`` until every event of the window is read (else one page, with its ``next_token``).
        ``after_summary``: only the newest summary, the raw events it kept and every later event (a read that does
        not grow with the session's history)."""
        return self._run(
            self._core.get_session(
                app_name,
                user_id,
                session_id,
                num_recent_events=num_recent_events,
                after_timestamp=after_timestamp,
                limit=limit,
                next_token=next_token,
                all_pages=all_pages,
                after_summary=after_summary,
            )
        )

    def get_events(self, app_name: str, user_id: str, session_id: str, ids: Iterable[str]) -> list[Event]:
        """The session's events with these ids, in the order given (an id it does not hold is left out): a read
        of about those events, whatever the session holds. Raises ``NotFound`` when there is no session."""
        return self._run(self._core.get_events(app_name, user_id, session_id, ids))

    def events_page(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        *,
        id_prefix: str = "",
        after_id: str | None = None,
        descending: bool = False,
        limit: int | None = None,
    ) -> EventsPage:
        """One page of the session's events whose id starts with ``id_prefix``, in id order (``descending``:
        greatest first), after ``after_id``; ``limit`` 1-1000 (default 100). Pass the page's ``next_after_id`` as
        ``after_id`` for the next page."""
        return self._run(
            self._core.events_page(
                app_name,
                user_id,
                session_id,
                id_prefix=id_prefix,
                after_id=after_id,
                descending=descending,
                limit=limit,
            )
        )

    def list_sessions(
        self, app_name: str, user_id: str | None = None, *, limit: int | None = None, next_token: str | None = None
    ) -> SessionPage:
        """One page of sessions (without events): the user's, or with ``user_id`` None every user's of the app."""
        return self._run(self._core.list_sessions(app_name, user_id, limit=limit, next_token=next_token))

    def iter_sessions(
        self, app_name: str, user_id: str | None = None, *, limit: int | None = None
    ) -> Iterator[Session]:
        """Every session of the listing, page after page."""
        token: str | None = None
        while True:
            page = self.list_sessions(app_name, user_id, limit=limit, next_token=token)
            yield from page.sessions
            if page.next_token is None:
                return
            token = page.next_token

    def delete_session(self, app_name: str, user_id: str, session_id: str) -> None:
        """Delete a session and everything it stored (idempotent)."""
        self._run(self._core.delete_session(app_name, user_id, session_id))

    def append_event(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        event: EventLike,
        *,
        if_match: IfMatch = None,
        minimal: bool = False,
    ) -> AppendResult:
        """Append one event (an ``Event``, ADK's ``Event``, or a dict: ADK JSON or a chat message). An event
        without ``id`` gets one before it is sent. ``if_match``: the version (or ``Session``) the append expects,
        else ``PreconditionFailed``. ``minimal``: the answer's event is its id, seq and timestamp only."""
        return self._run(
            self._core.append_events(
                app_name, user_id, session_id, [event], if_match=if_match, single=True, minimal=minimal
            )
        )

    def append_events(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        events: Iterable[EventLike],
        *,
        if_match: IfMatch = None,
        minimal: bool = False,
    ) -> AppendResult:
        """Append 1-100 events atomically (see ``append_event``). ``minimal``: the answer's events are their ids,
        seqs and timestamps only (``Prefer: return=minimal``), not the bodies just sent."""
        return self._run(
            self._core.append_events(app_name, user_id, session_id, events, if_match=if_match, minimal=minimal)
        )

    def get_user_state(self, app_name: str, user_id: str) -> dict[str, Any]:
        """The user's state, keys as stored (``user:...``)."""
        return self._run(self._core.get_user_state(app_name, user_id))

    def get_app_state(self, app_name: str) -> dict[str, Any]:
        """The app's state, keys as stored (``app:...``)."""
        return self._run(self._core.get_app_state(app_name))

    def get_context(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        *,
        system: str | Sequence[str] | None = None,
        memories: int | None = None,
        memory_query: str | None = None,
        memory_min_score: float | None = None,
        profile: bool | None = None,
        **params: Any,
    ) -> Context:
        """The messages to send a model next; ``params`` are the route's other parameters (``format``,
        ``max_tokens``, ``max_messages``, ``max_chars``, ``keep_first``, ``start_with_user``, ``include_summary``).

        ``system``: one or more base system messages, first, always kept (sent in a JSON body, ``POST …/context``,
        so a prompt of any length fits). ``memories``: add up to k (0-50) of the user's memories, searched with the
        newest user message or ``memory_query`` (cut at ``memory_min_score``), as one system message with their
        dates; ``profile``: add what is known about the user. Memories and profile give way first when over budget;
        ``Context.memories`` and ``Context.profile`` say what went in."""
        recall = _recall_params(system, memories, memory_query, memory_min_score, profile)
        return self._run(self._core.get_context(app_name, user_id, session_id, {**params, **recall}))

    def compact(self, app_name: str, user_id: str, session_id: str) -> CompactResult:
        """Compact the session now."""
        return self._run(self._core.compact(app_name, user_id, session_id))

    # --- export / import and the memo -----------------------------------------------------------------------

    def export_session(
        self, app_name: str, user_id: str, session_id: str, *, format: str = "json"
    ) -> dict[str, Any] | str:
        """The whole session as one document: its state by scope, memo, compaction watermark and every event
        with its ``seq``. ``format="json"``: the document as a dict, read in pages and put together (a session of
        any length); ``"yaml"``: its YAML text, in one response (413 past the response cap)."""
        return self._run(self._core.export_session(app_name, user_id, session_id, format))

    def import_session(
        self,
        app_name: str,
        user_id: str,
        document: Mapping[str, Any] | str | bytes,
        *,
        session_id: str | None = None,
        replace: bool = False,
        format: str | None = None,
    ) -> Session:
        """Store an exported session (a dict, or the text ``export_session`` gave: YAML unless ``format="json"``)
        under ``session_id`` (default: the document's), all or nothing. ``replace``: replace an existing session
        (else ``AlreadyExists``). Returns the session as a create answers it (no events)."""
        return self._run(
            self._core.import_session(app_name, user_id, document, session_id=session_id, replace=replace, fmt=format)
        )

    def get_memo(self, app_name: str, user_id: str, session_id: str) -> dict[str, Any]:
        """The session's memo (``{}`` when never written)."""
        return self._run(self._core.get_memo(app_name, user_id, session_id))

    def put_memo(self, app_name: str, user_id: str, session_id: str, memo: Mapping[str, Any]) -> dict[str, Any]:
        """Replace the session's memo (a JSON object, at most 64 KB); the session's version does not move."""
        return self._run(self._core.put_memo(app_name, user_id, session_id, memo))

    def delete_event(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        event_id: str,
        *,
        pairs: str | None = None,
        if_match: IfMatch = None,
    ) -> DeleteResult:
        """Delete one event (LangChain's ``RemoveMessage``): its tool-call partners go with it (``pairs="reject"``:
        ``ToolPairConflict`` naming them, nothing deleted), and so do the summaries that covered one of them; its
        payloads and the memories saved from it are gone before the answer. ``EventNotFound`` when the session
        holds no such event. The session's state is not rewound."""
        return self._run(
            self._core.delete_event(app_name, user_id, session_id, event_id, pairs=pairs, if_match=if_match)
        )

    def clear_events(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        *,
        before_seq: int | None = None,
        before_invocation_id: str | None = None,
        if_match: IfMatch = None,
    ) -> ClearResult:
        """Delete every event of the session (``REMOVE_ALL_MESSAGES``), or rewind it: the events with ``seq >=
        before_seq``, or from the first event of ``before_invocation_id`` (ADK's rewind), with their tool-call
        partners and the summaries that covered them. The session and its state stay; seqs are never reused."""
        return self._run(
            self._core.clear_events(
                app_name,
                user_id,
                session_id,
                before_seq=before_seq,
                before_invocation_id=before_invocation_id,
                if_match=if_match,
            )
        )

    def rewind(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        *,
        before_seq: int | None = None,
        before_invocation_id: str | None = None,
        if_match: IfMatch = None,
    ) -> ClearResult:
        """``clear_events`` with a cut: one of ``before_seq`` / ``before_invocation_id`` is required."""
        if before_seq is None and before_invocation_id is None:
            raise ValueError("rewind needs before_seq or before_invocation_id (clear_events deletes everything)")
        return self.clear_events(
            app_name,
            user_id,
            session_id,
            before_seq=before_seq,
            before_invocation_id=before_invocation_id,
            if_match=if_match,
        )

    # --- long-term memory -----------------------------------------------------------------------------------

    def save_memories(
        self,
        app_name: str,
        user_id: str,
        *,
        session_id: str | None = None,
        policy: str | Mapping[str, Any] | None = None,
        memories: Iterable[str | Mapping[str, Any]] | None = None,
        events: Iterable[EventLike] | None = None,
    ) -> SaveResult:
        """Save to long-term memory: a session's events by ``policy`` (``session_id``), explicit ``events`` (each
        with text becomes a memory, once per event id), or ``memories``: texts (or ``{text, metadata?,
        timestamp?}``)."""
        return self._run(
            self._core.save_memories(
                app_name, user_id, session_id=session_id, policy=policy, memories=memories, events=events
            )
        )

    def search_memories(
        self, app_name: str, user_id: str, query: str, *, top_k: int | None = None, min_score: float | None = None
    ) -> list[MemoryEntry]:
        """The user's memories that best match ``query``, best first."""
        return self._run(self._core.search_memories(app_name, user_id, query, top_k=top_k, min_score=min_score))

    def forget_memory(self, app_name: str, user_id: str, memory_id: str) -> None:
        """Forget one memory (idempotent)."""
        self._run(self._core.forget_memory(app_name, user_id, memory_id))

    def forget_memories(self, app_name: str, user_id: str) -> None:
        """Forget every memory of this user in this app."""
        self._run(self._core.forget_memories(app_name, user_id))

    def get_profile(self, app_name: str, user_id: str) -> Profile:
        """What is known about the user (name, preferences, allergies, places, people …), from their memories,
        each fact with the ids of the memories it came from; a forgotten memory's facts are gone."""
        return self._run(self._core.get_profile(app_name, user_id))


class AsyncClient(_Base):
    """The asynchronous client: ``Client``'s constructor (``transport`` an async one) and methods, as coroutines
    (``iter_sessions`` an async iterator)."""

    def __init__(
        self,
        base_url: str,
        *,
        auth: AuthMode | httpx.Auth | None = None,
        region: str | None = None,
        credentials: Any = None,
        bearer_token: str | None = None,
        timeout: float | httpx.Timeout = 10.0,
        max_retries: int = 4,
        backoff: float = 0.2,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(
            base_url,
            auth=auth,
            region=region,
            credentials=credentials,
            bearer_token=bearer_token,
            timeout=timeout,
            max_retries=max_retries,
            backoff=backoff,
        )
        self._transport = transport
        # One connection pool per event loop: an httpx pool belongs to the loop that opened its connections, and
        # callers run one loop after another over one client (ADK's synchronous Runner.run: asyncio.run in a new
        # thread per turn). A closed loop's pool is let go when the next loop's is made.
        self._pools: dict[asyncio.AbstractEventLoop, httpx.AsyncClient] = {}
        self._sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    @property
    def _http(self) -> httpx.AsyncClient:
        """The running loop's connection pool, made on its first request."""
        loop = asyncio.get_running_loop()
        pool = self._pools.get(loop)
        if pool is None:
            for closed in [other for other in self._pools if other.is_closed()]:
                del self._pools[closed]  # its connections went with their loop
            pool = httpx.AsyncClient(auth=self._auth, transport=self._transport, timeout=self._core.timeout)
            self._pools[loop] = pool
        return pool

    async def _run(self, flow: Flow[T]) -> T:
        reply: Reply = None
        try:
            while True:
                step = flow.send(reply)
                if isinstance(step, Send):
                    try:
                        reply = await self._http.send(step.request)
                    except httpx.TransportError as exc:
                        reply = exc
                else:
                    await self._sleep(step.seconds)
                    reply = None
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    async def close(self) -> None:
        """Close the connection pools: the running loop's, and let go of the others' (their loops closed them or
        will; a pool cannot be closed from another loop). The client opens a new pool if used again."""
        pool = self._pools.pop(asyncio.get_running_loop(), None)
        self._pools.clear()
        if pool is not None:
            await pool.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # --- sessions (see Client for each method's documentation) ----------------------------------------------

    async def create_session(
        self,
        app_name: str,
        user_id: str,
        *,
        session_id: str | None = None,
        state: Mapping[str, Any] | None = None,
        strict: bool = False,
    ) -> Session:
        """See ``Client.create_session``."""
        return await self._run(
            self._core.create_session(app_name, user_id, session_id=session_id, state=state, strict=strict)
        )

    async def get_session(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        *,
        num_recent_events: int | None = None,
        after_timestamp: float | str | datetime | None = None,
        limit: int | None = None,
        next_token: str | None = None,
        all_pages: bool = True,
        after_summary: bool = False,
    ) -> Session:
        """See ``Client.get_session``."""
        return await self._run(
            self._core.get_session(
                app_name,
                user_id,
                session_id,
                num_recent_events=num_recent_events,
                after_timestamp=after_timestamp,
                limit=limit,
                next_token=next_token,
                all_pages=all_pages,
                after_summary=after_summary,
            )
        )

    async def get_events(self, app_name: str, user_id: str, session_id: str, ids: Iterable[str]) -> list[Event]:
        """See ``Client.get_events``."""
        return await self._run(self._core.get_events(app_name, user_id, session_id, ids))

    async def events_page(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        *,
        id_prefix: str = "",
        after_id: str | None = None,
        descending: bool = False,
        limit: int | None = None,
    ) -> EventsPage:
        """See ``Client.events_page``."""
        return await self._run(
            self._core.events_page(
                app_name,
                user_id,
                session_id,
                id_prefix=id_prefix,
                after_id=after_id,
                descending=descending,
                limit=limit,
            )
        )

    async def list_sessions(
        self, app_name: str, user_id: str | None = None, *, limit: int | None = None, next_token: str | None = None
    ) -> SessionPage:
        """See ``Client.list_sessions``."""
        return await self._run(self._core.list_sessions(app_name, user_id, limit=limit, next_token=next_token))

    async def iter_sessions(
        self, app_name: str, user_id: str | None = None, *, limit: int | None = None
    ) -> AsyncIterator[Session]:
        """See ``Client.iter_sessions``."""
        token: str | None = None
        while True:
            page = await self.list_sessions(app_name, user_id, limit=limit, next_token=token)
            for session in page.sessions:
                yield session
            if page.next_token is None:
                return
            token = page.next_token

    async def delete_session(self, app_name: str, user_id: str, session_id: str) -> None:
        """See ``Client.delete_session``."""
        await self._run(self._core.delete_session(app_name, user_id, session_id))

    async def append_event(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        event: EventLike,
        *,
        if_match: IfMatch = None,
        minimal: bool = False,
    ) -> AppendResult:
        """See ``Client.append_event``."""
        return await self._run(
            self._core.append_events(
                app_name, user_id, session_id, [event], if_match=if_match, single=True, minimal=minimal
            )
        )

    async def append_events(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        events: Iterable[EventLike],
        *,
        if_match: IfMatch = None,
        minimal: bool = False,
    ) -> AppendResult:
        """See ``Client.append_events``."""
        return await self._run(
            self._core.append_events(app_name, user_id, session_id, events, if_match=if_match, minimal=minimal)
        )

    async def get_user_state(self, app_name: str, user_id: str) -> dict[str, Any]:
        """See ``Client.get_user_state``."""
        return await self._run(self._core.get_user_state(app_name, user_id))

    async def get_app_state(self, app_name: str) -> dict[str, Any]:
        """See ``Client.get_app_state``."""
        return await self._run(self._core.get_app_state(app_name))

    async def get_context(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        *,
        system: str | Sequence[str] | None = None,
        memories: int | None = None,
        memory_query: str | None = None,
        memory_min_score: float | None = None,
        profile: bool | None = None,
        **params: Any,
    ) -> Context:
        """See ``Client.get_context``."""
        recall = _recall_params(system, memories, memory_query, memory_min_score, profile)
        return await self._run(self._core.get_context(app_name, user_id, session_id, {**params, **recall}))

    async def compact(self, app_name: str, user_id: str, session_id: str) -> CompactResult:
        """See ``Client.compact``."""
        return await self._run(self._core.compact(app_name, user_id, session_id))

    # --- export / import and the memo -----------------------------------------------------------------------

    async def export_session(
        self, app_name: str, user_id: str, session_id: str, *, format: str = "json"
    ) -> dict[str, Any] | str:
        """See ``Client.export_session``."""
        return await self._run(self._core.export_session(app_name, user_id, session_id, format))

    async def import_session(
        self,
        app_name: str,
        user_id: str,
        document: Mapping[str, Any] | str | bytes,
        *,
        session_id: str | None = None,
        replace: bool = False,
        format: str | None = None,
    ) -> Session:
        """See ``Client.import_session``."""
        return await self._run(
            self._core.import_session(app_name, user_id, document, session_id=session_id, replace=replace, fmt=format)
        )

    async def get_memo(self, app_name: str, user_id: str, session_id: str) -> dict[str, Any]:
        """See ``Client.get_memo``."""
        return await self._run(self._core.get_memo(app_name, user_id, session_id))

    async def put_memo(self, app_name: str, user_id: str, session_id: str, memo: Mapping[str, Any]) -> dict[str, Any]:
        """See ``Client.put_memo``."""
        return await self._run(self._core.put_memo(app_name, user_id, session_id, memo))

    async def delete_event(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        event_id: str,
        *,
        pairs: str | None = None,
        if_match: IfMatch = None,
    ) -> DeleteResult:
        """See ``Client.delete_event``."""
        return await self._run(
            self._core.delete_event(app_name, user_id, session_id, event_id, pairs=pairs, if_match=if_match)
        )

    async def clear_events(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        *,
        before_seq: int | None = None,
        before_invocation_id: str | None = None,
        if_match: IfMatch = None,
    ) -> ClearResult:
        """See ``Client.clear_events``."""
        return await self._run(
            self._core.clear_events(
                app_name,
                user_id,
                session_id,
                before_seq=before_seq,
                before_invocation_id=before_invocation_id,
                if_match=if_match,
            )
        )

    async def rewind(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        *,
        before_seq: int | None = None,
        before_invocation_id: str | None = None,
        if_match: IfMatch = None,
    ) -> ClearResult:
        """See ``Client.rewind``."""
        if before_seq is None and before_invocation_id is None:
            raise ValueError("rewind needs before_seq or before_invocation_id (clear_events deletes everything)")
        return await self.clear_events(
            app_name,
            user_id,
            session_id,
            before_seq=before_seq,
            before_invocation_id=before_invocation_id,
            if_match=if_match,
        )

    # --- long-term memory -----------------------------------------------------------------------------------

    async def save_memories(
        self,
        app_name: str,
        user_id: str,
        *,
        session_id: str | None = None,
        policy: str | Mapping[str, Any] | None = None,
        memories: Iterable[str | Mapping[str, Any]] | None = None,
        events: Iterable[EventLike] | None = None,
    ) -> SaveResult:
        """See ``Client.save_memories``."""
        return await self._run(
            self._core.save_memories(
                app_name, user_id, session_id=session_id, policy=policy, memories=memories, events=events
            )
        )

    async def search_memories(
        self, app_name: str, user_id: str, query: str, *, top_k: int | None = None, min_score: float | None = None
    ) -> list[MemoryEntry]:
        """See ``Client.search_memories``."""
        return await self._run(self._core.search_memories(app_name, user_id, query, top_k=top_k, min_score=min_score))

    async def forget_memory(self, app_name: str, user_id: str, memory_id: str) -> None:
        """See ``Client.forget_memory``."""
        await self._run(self._core.forget_memory(app_name, user_id, memory_id))

    async def forget_memories(self, app_name: str, user_id: str) -> None:
        """See ``Client.forget_memories``."""
        await self._run(self._core.forget_memories(app_name, user_id))

    async def get_profile(self, app_name: str, user_id: str) -> Profile:
        """See ``Client.get_profile``."""
        return await self._run(self._core.get_profile(app_name, user_id))
