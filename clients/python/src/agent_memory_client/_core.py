"""The client's one core, shared by ``Client`` and ``AsyncClient``: requests built, answers parsed, retries decided.

Every operation is a generator (a *flow*) that yields steps (``Send`` a request, ``Sleep``) and receives each
``Send``'s reply (an ``httpx.Response``, or the ``httpx.TransportError`` that replaced it); its return value is the
operation's result. The sync client runs flows with ``httpx.Client`` and ``time.sleep``, the async one with
``httpx.AsyncClient`` and ``asyncio.sleep``: the two differ only in how they perform a step, never in what a call
sends, retries or returns.

Retries (``exchange``): 429, 502, 503, 504 and connection errors or timeouts, at most ``max_retries`` times, after
``random() * min(max_backoff, backoff * 2**attempt)`` seconds (full jitter), or at least ``Retry-After``. A request
is retried only when a second delivery cannot do harm (``Replay``):

- reads and deletes are idempotent;
- an append carries event ids the client assigns before the first attempt, and the service stores an id once;
  an append with ``If-Match`` whose earlier attempt may have landed, answered 412 on its retry, is resolved by
  reading the session's tail: the caller gets its events if they are there and nobody wrote after them, the 412
  otherwise (``_landed``);
- get-or-create is idempotent by session id, and the client picks the id when the caller gives none; a *strict*
  create with a generated id that answers ``already_exists`` on a retry found its own first attempt; a strict
  create with the caller's id is retried only when the request cannot have reached the service (a refused
  connection, 429, a 503 from the service itself);
- memory saves are idempotent by event id (session and event saves; the service names an event sent without id
  by its content) and by text (direct texts), so a retry stores nothing twice, though its ``saved``/``skipped``
  counts describe the retry; ``compact`` on a compacted session answers ``compacted: false``.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Generator, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from ._version import __version__
from .errors import (
    AlreadyExists,
    EventNotFound,
    PreconditionFailed,
    RequestTimeout,
    ServerError,
    TransportError,
    error_from_response,
)
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

T = TypeVar("T")

RETRY_STATUSES = frozenset({429, 502, 503, 504})
MAX_IDS = 100  # events named in one read by id: the service's maximum
EXPORT_PAGE = 1000  # events per page of an export: the service's maximum
MAX_BACKOFF_S = 20.0
# A Retry-After longer than this is not waited for: the error (with its retry_after) goes to the caller.
MAX_RETRY_AFTER_S = 60.0
# Codes with which the service says that nothing of the request was done (see the README's error table).
_NOTHING_DONE = frozenset({"service_unavailable", "model_error", "model_timeout"})
# Recovery read of an append's tail: the appended events plus room for compaction summaries written after them.
_TAIL_SLACK = 8


@dataclass(frozen=True)
class Send:
    request: httpx.Request


@dataclass(frozen=True)
class Sleep:
    seconds: float


Reply = httpx.Response | httpx.TransportError | None
Step = Send | Sleep
Flow = Generator[Step, Reply, T]


class Replay(Enum):
    """When a request may be sent again after a failed attempt."""

    SAFE = "safe"  # idempotent: whenever the failure is worth a retry
    UNSENT = "unsent"  # only when the service cannot have acted on the earlier attempt


@dataclass
class Call:
    """One request, the same bytes on every attempt (a retry of an append resends the same event ids)."""

    method: str
    path: str
    query: str = ""
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    replay: Replay = Replay.SAFE
    # Set once an attempt may have reached the service (a read timeout, a 502/504 from the gateway, ...).
    maybe_delivered: bool = False


def path(*segments: str) -> str:
    """A URL path with each segment percent-encoded (``/`` or ``?`` in an id cannot change the route). ``:`` and
    ``@`` (valid in ids) are left as they are: a path may hold them, and API Gateway does not decode path
    parameters."""
    return "/" + "/".join(quote(s, safe=":@") for s in segments)


def query(params: Mapping[str, Any]) -> str:
    """A query string in SigV4's canonical form (sorted, every reserved character encoded); None values left out,
    booleans as ``true``/``false``, datetimes as seconds since the epoch, a list as the parameter repeated."""
    pairs = []
    for key in sorted(params):
        value = params[key]
        if value is None:
            continue
        # A list is the parameter repeated, its values sorted as the canonical form sorts them.
        for item in sorted(map(_query_text, value)) if isinstance(value, (list, tuple)) else [_query_text(value)]:
            pairs.append(f"{quote(key, safe='-_.~')}={quote(item, safe='-_.~')}")
    return "&".join(pairs)


def _query_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):  # a naive datetime is taken as local time, as datetime.timestamp() does
        return repr(value.timestamp())
    return str(value)


def dump_json(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


def if_match_header(value: int | str | Session) -> str:
    """``If-Match`` for a version (``5`` -> ``"5"``), a session (its version) or a raw header value."""
    if isinstance(value, Session):
        value = value.version
    if isinstance(value, bool):
        raise TypeError("if_match takes a version (int), a Session or a header value (str)")
    return f'"{value}"' if isinstance(value, int) else value


def etag_version(response: httpx.Response) -> int | None:
    """The session version an ``ETag: "<version>"`` names (None when absent or not a version)."""
    tag = response.headers.get("etag", "").strip()
    if tag.startswith("W/"):
        tag = tag[2:]
    tag = tag.strip('"')
    return int(tag) if tag.isdigit() else None


def event_json(event: BaseModel | Mapping[str, Any], *, assign_id: bool = True) -> dict[str, Any]:
    """An event (our ``Event``, another pydantic model such as ADK's, or a dict) as JSON; with ``assign_id``, one
    without ``id`` gets a fresh one."""
    if isinstance(event, BaseModel):
        data = event.model_dump(mode="json", exclude_none=True, by_alias=False)
    elif isinstance(event, Mapping):
        data = dict(event)
    else:
        raise TypeError(f"an event is an Event, a pydantic model or a dict, not {type(event).__name__}")
    if assign_id and data.get("id") is None:
        data["id"] = str(uuid.uuid4())  # before the first attempt: a retry resends this id, stored once
    return data


def _reached(exc: httpx.TransportError) -> bool:
    """Whether the request may have reached the service before this error (then its effect is unknown)."""
    return not isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout)


def _retriable(exc: httpx.TransportError) -> bool:
    return isinstance(exc, httpx.TimeoutException | httpx.NetworkError | httpx.RemoteProtocolError)


def _service_code(response: httpx.Response) -> str | None:
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        return None
    return error.get("code") if isinstance(error, dict) else None


class Core:
    """Builds each call's request, runs its retries and parses its answer, as flows (see the module's doc)."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float | httpx.Timeout = 10.0,
        max_retries: int = 4,
        backoff: float = 0.2,
        max_backoff: float = MAX_BACKOFF_S,
        user_agent: str | None = None,
    ) -> None:
        if max_retries < 0 or backoff < 0:
            raise ValueError("max_retries and backoff must not be negative")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.random = random.random
        self._timeout_extension = self.timeout.as_dict()
        self._headers = {
            "Accept": "application/json",
            "User-Agent": user_agent or f"agent-memory-client/{__version__} httpx/{httpx.__version__}",
        }

    # --- one request, with its retries ----------------------------------------------------------------------

    def request(self, call: Call) -> httpx.Request:
        """A fresh request for one attempt of ``call`` (each attempt is signed anew)."""
        headers = dict(self._headers)
        if call.body is not None:
            headers["Content-Type"] = "application/json"
        headers.update(call.headers)
        url = self.base_url + call.path + (f"?{call.query}" if call.query else "")
        return httpx.Request(
            call.method, url, headers=headers, content=call.body, extensions={"timeout": self._timeout_extension}
        )

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Full jitter: a uniform draw below ``backoff * 2**attempt`` (capped), but never before ``Retry-After``."""
        jittered = self.random() * min(self.max_backoff, self.backoff * 2.0**attempt)
        return max(jittered, retry_after or 0.0)

    def exchange(self, call: Call) -> Flow[httpx.Response]:
        """Send ``call`` until it answers below 400, retrying what is worth it; raise the mapped error otherwise."""
        attempt = 0
        while True:
            reply = yield Send(self.request(call))
            if isinstance(reply, httpx.TransportError):
                reached = _reached(reply)
                call.maybe_delivered |= reached
                if _retriable(reply) and attempt < self.max_retries and (call.replay is Replay.SAFE or not reached):
                    yield Sleep(self.delay(attempt, None))
                    attempt += 1
                    continue
                timed_out = isinstance(reply, httpx.TimeoutException)
                kind, code = (RequestTimeout, "timeout") if timed_out else (TransportError, "connection_error")
                message = f"{type(reply).__name__}: {reply}" if str(reply) else type(reply).__name__
                raise kind(message, code=code) from reply
            assert isinstance(reply, httpx.Response)
            if reply.status_code < 400:
                return reply
            error = error_from_response(reply.status_code, reply.headers, reply.content)
            # A quota the service refused on stands until something changes: no retry can succeed.
            if reply.status_code in RETRY_STATUSES and error.code != "quota_exceeded":
                # 429 never reached the function; the service's own 503/502/504 codes say nothing was done.
                nothing_done = reply.status_code == 429 or _service_code(reply) in _NOTHING_DONE
                call.maybe_delivered |= not nothing_done
                wait = error.retry_after
                if (
                    attempt < self.max_retries
                    and (call.replay is Replay.SAFE or nothing_done)
                    and (wait is None or wait <= MAX_RETRY_AFTER_S)
                ):
                    yield Sleep(self.delay(attempt, wait))
                    attempt += 1
                    continue
            raise error

    def json(self, response: httpx.Response) -> Any:
        try:
            return response.json()
        except ValueError:
            raise ServerError(
                f"expected JSON, got {response.headers.get('content-type', 'no content type')}",
                status=response.status_code,
                code="invalid_response",
            ) from None

    def session(self, response: httpx.Response) -> Session:
        session = Session.model_validate(self.json(response))
        version = etag_version(response)
        if version is not None and version != session.version:
            session.version = version
        return session

    # --- sessions -------------------------------------------------------------------------------------------

    def create_session(
        self,
        app_name: str,
        user_id: str,
        *,
        session_id: str | None = None,
        state: Mapping[str, Any] | None = None,
        strict: bool = False,
    ) -> Flow[Session]:
        chosen = session_id or str(uuid.uuid4())
        body: dict[str, Any] = {"session_id": chosen}
        if state is not None:
            body["state"] = dict(state)
        call = Call(
            "POST",
            path("apps", app_name, "users", user_id, "sessions"),
            body=dump_json(body),
            headers={"If-None-Match": "*"} if strict else {},
            # Get-or-create is idempotent by id; a strict create only with an id nobody else can have chosen.
            replay=Replay.SAFE if not strict or session_id is None else Replay.UNSENT,
        )
        try:
            response = yield from self.exchange(call)
        except AlreadyExists:
            if not (strict and session_id is None and call.maybe_delivered):
                raise
            # The id is a fresh UUID: the session that holds it is the one our own first attempt created.
            session = yield from self.get_session(app_name, user_id, chosen)
            session.created = True
            return session
        return self.session(response)

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
    ) -> Flow[Session]:
        route = path("apps", app_name, "users", user_id, "sessions", session_id)
        params = {
            "num_recent_events": num_recent_events,
            "after_timestamp": after_timestamp,
            "limit": limit,
            "next_token": next_token,
            "after_summary": True if after_summary else None,
        }
        first = self.session((yield from self.exchange(Call("GET", route, query(params)))))
        if not all_pages or first.next_token is None:
            return first
        # Later pages read the window the first one opened (the events up to its version): the first page's
        # state and version describe all of them.
        events = list(first.events)
        token: str | None = first.next_token
        while token is not None:
            page = self.session(
                (yield from self.exchange(Call("GET", route, query({"limit": limit, "next_token": token}))))
            )
            events.extend(page.events)
            token = page.next_token
        return first.model_copy(update={"events": events, "next_token": None})

    def get_events(self, app_name: str, user_id: str, session_id: str, ids: Iterable[str]) -> Flow[list[Event]]:
        route = path("apps", app_name, "users", user_id, "sessions", session_id, "events")
        wanted = list(dict.fromkeys(ids))
        found: dict[str, Event] = {}
        for start in range(0, len(wanted), MAX_IDS):
            left = wanted[start : start + MAX_IDS]
            while left:
                response = yield from self.exchange(Call("GET", route, query({"id": left})))
                page = EventsPage.model_validate(self.json(response))
                found.update((str(event.id), event) for event in page.events)
                # Ids the response cap left unread are asked again; an answer that brought none cannot loop.
                left = list(page.unread) if page.events else []
        return [found[i] for i in wanted if i in found]

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
    ) -> Flow[EventsPage]:
        route = path("apps", app_name, "users", user_id, "sessions", session_id, "events")
        params = {
            "id_prefix": id_prefix,
            "after_id": after_id,
            "order": "desc" if descending else None,
            "limit": limit,
        }
        response = yield from self.exchange(Call("GET", route, query(params)))
        return EventsPage.model_validate(self.json(response))

    def list_sessions(
        self, app_name: str, user_id: str | None = None, *, limit: int | None = None, next_token: str | None = None
    ) -> Flow[SessionPage]:
        route = (
            path("apps", app_name, "sessions")
            if user_id is None
            else path("apps", app_name, "users", user_id, "sessions")
        )
        response = yield from self.exchange(Call("GET", route, query({"limit": limit, "next_token": next_token})))
        return SessionPage.model_validate(self.json(response))

    def delete_session(self, app_name: str, user_id: str, session_id: str) -> Flow[None]:
        yield from self.exchange(Call("DELETE", path("apps", app_name, "users", user_id, "sessions", session_id)))

    def append_events(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        events: Iterable[BaseModel | Mapping[str, Any]],
        *,
        if_match: int | str | Session | None = None,
        single: bool = False,
        minimal: bool = False,
    ) -> Flow[AppendResult]:
        prepared = [event_json(e) for e in events]
        if not prepared:
            raise ValueError("append at least one event")
        headers = {} if if_match is None else {"If-Match": if_match_header(if_match)}
        if minimal:
            headers["Prefer"] = "return=minimal"
        call = Call(
            "POST",
            path("apps", app_name, "users", user_id, "sessions", session_id, "events"),
            body=dump_json(prepared[0] if single else {"events": prepared}),
            headers=headers,
        )
        try:
            response = yield from self.exchange(call)
        except PreconditionFailed:
            if if_match is None or not call.maybe_delivered:
                raise
            landed = yield from self._landed(app_name, user_id, session_id, [str(e["id"]) for e in prepared])
            if landed is None:
                raise
            return landed
        data = self.json(response)
        stored = [data] if single else data.get("events", [])
        return AppendResult.model_validate({"events": stored, "version": etag_version(response)})

    def _landed(self, app_name: str, user_id: str, session_id: str, ids: list[str]) -> Flow[AppendResult | None]:
        """After a 412 on the retry of a conditional append whose earlier attempt may have landed: the append's
        result if its events are the session's newest (compaction summaries aside), None otherwise (they are not
        stored, or someone appended after them: the caller's view is stale either way)."""
        unique = list(dict.fromkeys(ids))
        session = yield from self.get_session(
            app_name, user_id, session_id, num_recent_events=len(unique) + _TAIL_SLACK
        )
        tail = [e for e in session.events if not e.is_compaction][-len(unique) :]
        if [e.id for e in tail] != unique:
            return None
        by_id = {e.id: e for e in tail}
        return AppendResult(events=[by_id[i] for i in ids], version=session.version)

    def get_user_state(self, app_name: str, user_id: str) -> Flow[dict[str, Any]]:
        response = yield from self.exchange(Call("GET", path("apps", app_name, "users", user_id, "state")))
        return dict(self.json(response).get("state") or {})

    def get_app_state(self, app_name: str) -> Flow[dict[str, Any]]:
        response = yield from self.exchange(Call("GET", path("apps", app_name, "state")))
        return dict(self.json(response).get("state") or {})

    def get_context(self, app_name: str, user_id: str, session_id: str, params: Mapping[str, Any]) -> Flow[Context]:
        route = path("apps", app_name, "users", user_id, "sessions", session_id, "context")
        system = params.get("system")
        if system is None:
            response = yield from self.exchange(Call("GET", route, query(params)))
        else:
            # Base system prompts travel in a JSON body (``POST …/context``, which reads only, so a retry is safe):
            # API Gateway takes at most 10240 bytes of request line and headers, too few for a real prompt.
            body = {k: v for k, v in params.items() if v is not None}
            body["system"] = [system] if isinstance(system, str) else list(system)
            response = yield from self.exchange(Call("POST", route, body=dump_json(body)))
        return Context.model_validate(self.json(response))

    def compact(self, app_name: str, user_id: str, session_id: str) -> Flow[CompactResult]:
        route = path("apps", app_name, "users", user_id, "sessions", session_id, "compact")
        response = yield from self.exchange(Call("POST", route))
        return CompactResult.model_validate(self.json(response))

    def delete_event(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        event_id: str,
        *,
        pairs: str | None = None,
        if_match: int | str | Session | None = None,
    ) -> Flow[DeleteResult]:
        call = Call(
            "DELETE",
            path("apps", app_name, "users", user_id, "sessions", session_id, "events", event_id),
            query({"pairs": pairs}),
            headers={} if if_match is None else {"If-Match": if_match_header(if_match)},
        )
        try:
            response = yield from self.exchange(call)
        except EventNotFound:
            # An earlier attempt may have deleted it (its answer lost, or 503 deletion_incomplete, which the retry
            # finished): the event is gone either way. Its partners, if any, went with it.
            if not call.maybe_delivered:
                raise
            return DeleteResult(deleted=[event_id], version=None)
        data = self.json(response)
        return DeleteResult.model_validate({**data, "version": etag_version(response) or data.get("version")})

    def clear_events(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        *,
        before_seq: int | None = None,
        before_invocation_id: str | None = None,
        if_match: int | str | Session | None = None,
    ) -> Flow[ClearResult]:
        if before_seq is not None and before_invocation_id is not None:
            raise ValueError("rewind to before_seq or before_invocation_id, not both")
        call = Call(
            "DELETE",
            path("apps", app_name, "users", user_id, "sessions", session_id, "events"),
            query({"before_seq": before_seq, "before_invocation_id": before_invocation_id}),
            headers={} if if_match is None else {"If-Match": if_match_header(if_match)},
        )
        response = yield from self.exchange(call)
        data = self.json(response)
        return ClearResult.model_validate({**data, "version": etag_version(response) or data.get("version")})

    # --- long-term memory -----------------------------------------------------------------------------------

    def save_memories(
        self,
        app_name: str,
        user_id: str,
        *,
        session_id: str | None = None,
        policy: str | Mapping[str, Any] | None = None,
        memories: Iterable[str | Mapping[str, Any]] | None = None,
        events: Iterable[BaseModel | Mapping[str, Any]] | None = None,
    ) -> Flow[SaveResult]:
        body: dict[str, Any]
        if memories is not None and events is not None:
            raise ValueError("save either memories= (texts) or events=, not both")
        if memories is not None:
            if session_id is not None or policy is not None:
                raise ValueError("memories= (texts) take no session_id or policy")
            body = {"memories": [{"text": m} if isinstance(m, str) else dict(m) for m in memories]}
        elif events is not None:
            # No ids assigned: the service names an id-less event by its content, so that sending it again (a
            # retry, or the same turn in a later save) stores nothing new.
            body = {"events": [event_json(e, assign_id=False) for e in events]}
            if session_id is not None:
                body["session_id"] = session_id
        elif session_id is not None:
            body = {"session_id": session_id}
        else:
            raise ValueError("save a session (session_id=), events= or memories=")
        if policy is not None:
            body["policy"] = policy if isinstance(policy, str) else dict(policy)
        route = path("apps", app_name, "users", user_id, "memories")
        response = yield from self.exchange(Call("POST", route, body=dump_json(body)))
        return SaveResult.model_validate(self.json(response))

    def search_memories(
        self, app_name: str, user_id: str, query_text: str, *, top_k: int | None = None, min_score: float | None = None
    ) -> Flow[list[MemoryEntry]]:
        body: dict[str, Any] = {"query": query_text}
        if top_k is not None:
            body["top_k"] = top_k
        if min_score is not None:
            body["min_score"] = min_score
        route = path("apps", app_name, "users", user_id, "memories", "search")
        response = yield from self.exchange(Call("POST", route, body=dump_json(body)))
        return [MemoryEntry.model_validate(m) for m in self.json(response).get("memories", [])]

    def forget_memory(self, app_name: str, user_id: str, memory_id: str) -> Flow[None]:
        yield from self.exchange(Call("DELETE", path("apps", app_name, "users", user_id, "memories", memory_id)))

    def forget_memories(self, app_name: str, user_id: str) -> Flow[None]:
        yield from self.exchange(Call("DELETE", path("apps", app_name, "users", user_id, "memories")))

    def get_profile(self, app_name: str, user_id: str) -> Flow[Profile]:
        response = yield from self.exchange(Call("GET", path("apps", app_name, "users", user_id, "profile")))
        return Profile.model_validate(self.json(response))

    # --- export / import and the memo -----------------------------------------------------------------------

    def export_session(self, app_name: str, user_id: str, session_id: str, fmt: str) -> Flow[dict[str, Any] | str]:
        if fmt not in ("json", "yaml"):
            raise ValueError("format must be 'json' or 'yaml'")
        route = path("apps", app_name, "users", user_id, "sessions", session_id, "export")
        if fmt == "yaml":
            response = yield from self.exchange(Call("GET", route, query({"format": fmt})))
            return response.text
        # JSON in pages, put together: a session of any length exports (one page past the response cap would not).
        document: dict[str, Any] | None = None
        token: str | None = None
        while True:
            params = {"format": fmt, "limit": EXPORT_PAGE, "next_token": token}
            response = yield from self.exchange(Call("GET", route, query(params)))
            page = self.json(response)
            if not isinstance(page, dict) or not isinstance(page.get("events"), list):
                raise ServerError("expected an export document", status=response.status_code, code="invalid_response")
            token = page.pop("next_token", None)
            if document is None:
                document = page
            else:
                document["events"].extend(page["events"])
            if not token:
                return document

    def import_session(
        self,
        app_name: str,
        user_id: str,
        document: Mapping[str, Any] | str | bytes,
        *,
        session_id: str | None,
        replace: bool,
        fmt: str | None,
    ) -> Flow[Session]:
        headers: dict[str, str] = {}
        if isinstance(document, Mapping):
            body = dump_json(dict(document))
        else:
            body = document.encode("utf-8") if isinstance(document, str) else bytes(document)
            if (fmt or "yaml") == "yaml":
                headers["Content-Type"] = "application/yaml"
        route = path("apps", app_name, "users", user_id, "sessions", "import")
        params = {"session_id": session_id, "replace": True if replace else None}
        # A replace stores the same session again: safe to resend. A plain import is not (its retry after a lost
        # answer meets the session it stored: 409), so only an attempt that never reached the service is resent.
        call = Call(
            "POST", route, query(params), body=body, headers=headers, replay=Replay.SAFE if replace else Replay.UNSENT
        )
        response = yield from self.exchange(call)
        return self.session(response)

    def get_memo(self, app_name: str, user_id: str, session_id: str) -> Flow[dict[str, Any]]:
        route = path("apps", app_name, "users", user_id, "sessions", session_id, "memo")
        response = yield from self.exchange(Call("GET", route))
        return dict(self.json(response).get("memo") or {})

    def put_memo(self, app_name: str, user_id: str, session_id: str, memo: Mapping[str, Any]) -> Flow[dict[str, Any]]:
        route = path("apps", app_name, "users", user_id, "sessions", session_id, "memo")
        # The memo is replaced whole (last writer wins): a resend writes the same value.
        response = yield from self.exchange(Call("PUT", route, body=dump_json({"memo": dict(memo)})))
        return dict(self.json(response).get("memo") or {})
