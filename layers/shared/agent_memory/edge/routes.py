"""The route table: every HTTP route of the API, in one place, with its function and typed models.

Each route names its method, its path (as ``template.yaml`` writes it), the template's function that serves it,
the operation's signature (the same parameters, with the same annotated types from ``requests.py``, as the
handler in ``functions/<name>/app.py``: the edge validates a request from those, ``api._Edge``) and its answers
(status -> response model from ``responses.py``, or None for no content), plus the errors it can answer.

``openapi.py`` builds the OpenAPI document from this table alone, so any function (the deployed API routes
``GET /openapi.json`` to one) can serve it. Tests keep the table honest: its routes are exactly the template's,
and each route's parameters and body are exactly what its handler declares (``tests/unit/test_openapi.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field
from typing import TYPE_CHECKING, Annotated, Any

from ..runtime.lazyclass import dataclass  # processed on first instance (lazyclass.py)

if TYPE_CHECKING:  # the signatures' annotations stay text: evaluated (``hints``) only for the OpenAPI document
    from aws_lambda_powertools.event_handler.openapi.params import Body

    from .requests import (
        AfterId,
        AfterSummary,
        AfterTimestamp,
        AppendRequest,
        AppName,
        BeforeInvocationId,
        BeforeSeq,
        Budget,
        ContextFormat,
        ContextRequest,
        CreateSessionRequest,
        EventId,
        EventIds,
        EventPageLimit,
        ExportFormat,
        Flag,
        IdOrder,
        IdPrefix,
        IfMatch,
        IfNoneMatch,
        ImportSessionId,
        Limit,
        MemoRequest,
        MemoryCount,
        MemoryId,
        MemoryMinScore,
        MemoryQuery,
        MinScore,
        NextToken,
        NumRecentEvents,
        Pairs,
        Prefer,
        Replace,
        SaveMemoriesRequest,
        SearchQuery,
        SearchRequest,
        SessionDocument,
        SessionId,
        SystemMessages,
        TopK,
        UserId,
        WithProfile,
    )


# The errors every route may answer: a bad parameter or body, no identity or not this caller's data (jwt mode), a
# body too large, storage out of capacity.
COMMON_ERRORS = (400, 401, 403, 413, 422, 503)

# Who may call a route when the deployment authenticates its callers itself (AuthMode jwt; policy/access.py):
USER = "user"  # the path's user only (or an admin), within the caller's app
APP = "app"  # any caller of the path's app (what every session read already merges: the app's state)
ADMIN = "admin"  # an admin of the path's app only (app-wide listings)
ANY = "any"  # any authenticated caller (the API's own description)
ACCESS = (USER, APP, ADMIN, ANY)


@dataclass(frozen=True)
class Route:
    method: str
    path: str  # /apps/{app_name}/..., as template.yaml writes it
    function: str  # the template's logical id of the function serving it
    signature: Callable[..., Any]  # the handler's parameters (its body is never called)
    summary: str
    # status -> response model (by its name in responses.py, imported when asked: see ``responses``) or type
    # (None: no content)
    answers: dict[int, Any]
    errors: tuple[int, ...] = ()  # beyond COMMON_ERRORS
    tag: str = "sessions"
    headers: dict[int, dict[str, str]] = field(default_factory=dict)  # status -> response header -> description
    access: str = USER  # one of ACCESS
    writes: bool | None = None  # changes stored data (its caller is logged); None: every method but GET

    @property
    def responses(self) -> dict[int, Any]:
        """Status -> response model or type (None: no content). The models are imported here, not with the table:
        every function reads the table (who may call a route) on its cold start; only the OpenAPI document needs
        the response models."""
        from . import responses as out

        return {status: getattr(out, a) if isinstance(a, str) else a for status, a in self.answers.items()}

    @property
    def is_write(self) -> bool:
        return self.method != "GET" if self.writes is None else self.writes

    @property
    def key(self) -> str:
        return f"{self.method} {self.path}"

    @property
    def operation_id(self) -> str:
        return self.signature.__name__


# --- the operations' signatures (the handlers' parameters, one for one) ------------------------------------------


def create_session(
    app_name: AppName,
    user_id: UserId,
    body: Annotated[CreateSessionRequest | None, Body()] = None,
    if_none_match: IfNoneMatch = None,
) -> None: ...


def get_session(
    app_name: AppName,
    user_id: UserId,
    session_id: SessionId,
    num_recent_events: NumRecentEvents = None,
    after_timestamp: AfterTimestamp = None,
    limit: EventPageLimit = None,
    next_token: NextToken = None,
    after_summary: AfterSummary = False,
) -> None: ...


def get_events(
    app_name: AppName,
    user_id: UserId,
    session_id: SessionId,
    id: EventIds = None,
    id_prefix: IdPrefix = None,
    after_id: AfterId = None,
    order: IdOrder = None,
    limit: EventPageLimit = None,
) -> None: ...


def list_sessions(app_name: AppName, user_id: UserId, limit: Limit = None, next_token: NextToken = None) -> None: ...


def list_app_sessions(app_name: AppName, limit: Limit = None, next_token: NextToken = None) -> None: ...


def get_user_state(app_name: AppName, user_id: UserId) -> None: ...


def get_app_state(app_name: AppName) -> None: ...


def delete_session(app_name: AppName, user_id: UserId, session_id: SessionId) -> None: ...


def append_event(
    app_name: AppName,
    user_id: UserId,
    session_id: SessionId,
    body: Annotated[AppendRequest, Body()],
    if_match: IfMatch = None,
    prefer: Prefer = None,
) -> None: ...


def delete_event(
    app_name: AppName,
    user_id: UserId,
    session_id: SessionId,
    event_id: EventId,
    pairs: Pairs = None,
    if_match: IfMatch = None,
) -> None: ...


def clear_events(
    app_name: AppName,
    user_id: UserId,
    session_id: SessionId,
    before_seq: BeforeSeq = None,
    before_invocation_id: BeforeInvocationId = None,
    if_match: IfMatch = None,
) -> None: ...


def get_context(
    app_name: AppName,
    user_id: UserId,
    session_id: SessionId,
    format: ContextFormat = "openai",
    max_tokens: Budget = None,
    max_messages: Budget = None,
    max_chars: Budget = None,
    keep_first: Flag = False,
    start_with_user: Flag = False,
    include_summary: Flag = True,
    system: SystemMessages = None,
    memories: MemoryCount = None,
    memory_query: MemoryQuery = None,
    memory_min_score: MemoryMinScore = None,
    profile: WithProfile = False,
) -> None: ...


def post_context(
    app_name: AppName,
    user_id: UserId,
    session_id: SessionId,
    body: Annotated[ContextRequest | None, Body()] = None,
) -> None: ...


def compact_session(app_name: AppName, user_id: UserId, session_id: SessionId) -> None: ...


def save_memories(app_name: AppName, user_id: UserId, body: Annotated[SaveMemoriesRequest, Body()]) -> None: ...


def search_get(
    app_name: AppName, user_id: UserId, query: SearchQuery, top_k: TopK = None, min_score: MinScore = None
) -> None: ...


def search_post(app_name: AppName, user_id: UserId, body: Annotated[SearchRequest, Body()]) -> None: ...


def get_profile(app_name: AppName, user_id: UserId) -> None: ...


def forget_one(app_name: AppName, user_id: UserId, memory_id: MemoryId) -> None: ...


def forget_all(app_name: AppName, user_id: UserId) -> None: ...


def openapi() -> None: ...


def export_session(
    app_name: AppName,
    user_id: UserId,
    session_id: SessionId,
    format: ExportFormat = "json",
    limit: EventPageLimit = None,
    next_token: NextToken = None,
) -> None: ...


def import_session(
    app_name: AppName,
    user_id: UserId,
    body: Annotated[SessionDocument, Body()],
    session_id: ImportSessionId = None,
    replace: Replace = False,
) -> None: ...


def get_memo(app_name: AppName, user_id: UserId, session_id: SessionId) -> None: ...


def put_memo(
    app_name: AppName, user_id: UserId, session_id: SessionId, body: Annotated[MemoRequest, Body()]
) -> None: ...


_SESSIONS = "/apps/{app_name}/users/{user_id}/sessions"
_SESSION = _SESSIONS + "/{session_id}"
_MEMORIES = "/apps/{app_name}/users/{user_id}/memories"
_ETAG = {"ETag": 'the session\'s version, `"<version>"`, for `If-Match`'}

ROUTES: tuple[Route, ...] = (
    Route(
        "POST",
        _SESSIONS,
        "CreateSessionFunction",
        create_session,
        "Get or create a session (strict create with `If-None-Match: *`)",
        {201: "Session", 200: "Session"},
        errors=(409, 429),
        headers={201: _ETAG, 200: _ETAG},
    ),
    Route(
        "GET",
        _SESSIONS,
        "ListSessionsFunction",
        list_sessions,
        "List a user's sessions, oldest updated first, state merged, no events",
        {200: "SessionPage"},
    ),
    Route(
        "GET",
        "/apps/{app_name}/sessions",
        "ListSessionsFunction",
        list_app_sessions,
        "List the sessions of every user of an app, state merged, no events",
        {200: "SessionPage"},
        access=ADMIN,
    ),
    Route(
        "GET",
        "/apps/{app_name}/users/{user_id}/state",
        "GetSessionFunction",
        get_user_state,
        "Read a user's state (`user:` keys), without a session",
        {200: "UserState"},
    ),
    Route(
        "GET",
        "/apps/{app_name}/state",
        "GetSessionFunction",
        get_app_state,
        "Read an app's state (`app:` keys)",
        {200: "AppState"},
        access=APP,
    ),
    Route(
        "GET",
        _SESSION,
        "GetSessionFunction",
        get_session,
        "Read a session: one page of events, state merged",
        {200: "Session"},
        errors=(404,),
        headers={200: _ETAG},
    ),
    Route(
        "GET",
        _SESSION + "/events",
        "GetSessionFunction",
        get_events,
        "Read events by id: the ones named, or a page of those whose id starts with a prefix, in id order",
        {200: "EventsById"},
        errors=(404,),
    ),
    Route("DELETE", _SESSION, "DeleteSessionFunction", delete_session, "Delete a session", {204: None}),
    Route(
        "POST",
        _SESSION + "/events",
        "AppendEventFunction",
        append_event,
        "Append one event or a batch `{events: [...]}`, idempotent by event id (`Prefer: return=minimal`: the stored "
        "events answered as their ids, seqs and timestamps)",
        {201: "AppendAnswer", 200: "AppendAnswer"},
        errors=(404, 409, 412, 429),
        headers={201: _ETAG, 200: _ETAG},
    ),
    Route(
        "DELETE",
        _SESSION + "/events/{event_id}",
        "DeleteEventsFunction",
        delete_event,
        "Delete one event with its tool-call partners and the summaries that covered them",
        {200: "DeletedEvents"},
        errors=(404, 409, 412),
        headers={200: _ETAG},
    ),
    Route(
        "DELETE",
        _SESSION + "/events",
        "DeleteEventsFunction",
        clear_events,
        "Clear a session's events, or rewind it (`before_seq`, `before_invocation_id`)",
        {200: "ClearedEvents"},
        errors=(404, 409, 412),
        headers={200: _ETAG},
    ),
    Route(
        "GET",
        _SESSION + "/context",
        "GetContextFunction",
        get_context,
        "The messages to send a model next, within budgets; with base system messages, recalled memories and the "
        "user's profile when asked",
        {200: "ContextResponse"},
        errors=(404,),
    ),
    Route(
        "POST",
        _SESSION + "/context",
        "GetContextFunction",
        post_context,
        "The context, its parameters in a JSON body (for base system prompts too long for a URL); reads only",
        {200: "ContextResponse"},
        errors=(404,),
        writes=False,
    ),
    Route(
        "POST",
        _SESSION + "/compact",
        "CompactSessionFunction",
        compact_session,
        "Compact a session now",
        {200: "CompactResponse"},
        errors=(404, 502, 504),
    ),
    # --- export / import and the memo ---
    Route(
        "GET",
        _SESSION + "/export",
        "GetSessionFunction",
        export_session,
        "Export a whole session (state, memo, every event with its seq, summaries) as JSON or YAML, at once or in "
        "pages (`limit`, `next_token`)",
        {200: "SessionExport"},
        errors=(404,),
        headers={200: _ETAG},
    ),
    Route(
        "POST",
        _SESSIONS + "/import",
        "CreateSessionFunction",
        import_session,
        "Import an exported session (JSON, or YAML with `Content-Type: application/yaml`), all or nothing",
        {201: "Session"},
        errors=(409, 429),
        headers={201: _ETAG},
    ),
    Route(
        "GET",
        _SESSION + "/memo",
        "GetSessionFunction",
        get_memo,
        "Read a session's memo",
        {200: "MemoResponse"},
        errors=(404,),
    ),
    Route(
        "PUT",
        _SESSION + "/memo",
        "AppendEventFunction",
        put_memo,
        "Replace a session's memo (a JSON object, at most 64 KB; the version does not move)",
        {200: "MemoResponse"},
        errors=(404,),
    ),
    Route(
        "POST",
        _MEMORIES,
        "SaveMemoriesFunction",
        save_memories,
        "Save to long-term memory: a session's events by policy, explicit events, or texts",
        {200: "SaveResult"},
        errors=(404, 429, 502, 504),
        tag="memories",
    ),
    Route(
        "POST",
        _MEMORIES + "/search",
        "SearchMemoriesFunction",
        search_post,
        "Search a user's memories",
        {200: "SearchResponse"},
        tag="memories",
        writes=False,
    ),
    Route(
        "GET",
        _MEMORIES + "/search",
        "SearchMemoriesFunction",
        search_get,
        "Search a user's memories (query parameters)",
        {200: "SearchResponse"},
        tag="memories",
    ),
    Route(
        "GET",
        "/apps/{app_name}/users/{user_id}/profile",
        "SearchMemoriesFunction",
        get_profile,
        "What is known about a user: the facts their memories state, with the memories each came from",
        {200: "Profile"},
        tag="memories",
    ),
    Route(
        "DELETE",
        _MEMORIES + "/{memory_id}",
        "ForgetMemoriesFunction",
        forget_one,
        "Forget one memory",
        {204: None},
        tag="memories",
    ),
    Route(
        "DELETE",
        _MEMORIES,
        "ForgetMemoriesFunction",
        forget_all,
        "Forget all of a user's memories",
        {204: None},
        tag="memories",
    ),
    Route(
        "GET",
        "/openapi.json",
        "SearchMemoriesFunction",
        openapi,
        "This API's OpenAPI 3.1 document",
        {200: dict[str, Any]},
        tag="meta",
        access=ANY,
    ),
)


def hints(func: Callable[..., Any]) -> dict[str, Any]:
    """The annotations of ``func`` (a signature of this table or a handler) evaluated, the names of
    ``requests.py`` first: neither module imports them when it is loaded (pydantic stays off a function's cold
    path); only the OpenAPI document and Powertools' pydantic validation need them."""
    import typing

    from . import requests

    return typing.get_type_hints(func, globalns={**vars(requests), **func.__globals__}, include_extras=True)


PENDING: frozenset[str] = frozenset()
"""Routes (or a route's parameters) the table documents before their handlers land (from another branch): the
tests accept their absence from the template, or a handler without the new parameter, until then. Empty: the
i10-sessions branch brought the last ones."""


def route(key: str) -> Route:
    """The route ``"METHOD /path"``."""
    for candidate in ROUTES:
        if candidate.key == key:
            return candidate
    raise KeyError(key)
