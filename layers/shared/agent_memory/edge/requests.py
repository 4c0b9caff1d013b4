"""Request models: every route's path, query, header and body input, as the handlers declare it.

The edge validates these before a handler runs (``params.py`` the values it is sure of, without pydantic;
Powertools' pydantic validation the rest: ``api._Edge``) and the OpenAPI schema describes them; the services
receive typed values and never see raw JSON. Bounds come from ``bounds.py``.
Errors: 400 ``invalid_input`` for path, query and header parameters, 422 ``validation_error`` for body
content, 413 ``payload_too_large`` for a bounded field that is too large (``api.py`` maps them).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

# Body is re-exported for the handlers, which import it from here (after lean.install: agent_memory/__init__.py).
from aws_lambda_powertools.event_handler.openapi.params import Body as Body
from aws_lambda_powertools.event_handler.openapi.params import Header, Path
from aws_lambda_powertools.event_handler.openapi.params import Query as Query
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Strict,
    StrictBool,
    Tag,
    model_validator,
)

from ..limits import (
    MAX_BATCH,
    MAX_CLIENT_COUNTER,
    MAX_CONTEXT_MEMORIES,
    MAX_EVENT_PAGE,
    MAX_MEMORY_TEXT,
    MAX_NEXT_TOKEN,
    MAX_PAGE,
    MAX_PARAMETER_CHARS,
    MAX_QUERY_CHARS,
    MAX_SYSTEM_CHARS,
    MAX_SYSTEM_MESSAGES,
    MAX_TOP_K,
)
from ..models import Event, reject_two_spellings
from ..policy.identifiers import IDENTIFIER_PATTERN
from . import params
from .bounds import (
    ClientCounter,
    Fraction,
    Identifier,
    Memo,
    Metadata,
    Policy,
    QueryInt,
    ScopeState,
    State,
    StrictCount,
    TimeInput,
    Timestamp,
    Utf8Str,
)

_ID = "1-128 characters of [A-Za-z0-9._:@-], starting with a letter or digit"


def _non_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value


NonBlank = Annotated[str, AfterValidator(_non_blank)]


# --- path parameters ----------------------------------------------------------------------------------------
AppName = Annotated[str, Path(pattern=IDENTIFIER_PATTERN, description=f"the agent application: {_ID}")]
UserId = Annotated[str, Path(pattern=IDENTIFIER_PATTERN, description=f"the end user: {_ID}")]
SessionId = Annotated[str, Path(pattern=IDENTIFIER_PATTERN, description=f"the session: {_ID}")]
MemoryId = Annotated[str, Path(pattern=IDENTIFIER_PATTERN, description=f"a memory id as search returns it: {_ID}")]

# --- headers ------------------------------------------------------------------------------------------------
IfMatch = Annotated[
    str | None,
    Header(
        alias="if-match",
        description='RFC 9110 strong comparison against the session\'s ETag `"<version>"`: `*` matches an '
        'existing session, `"5"` version 5, a comma-separated list if any member matches; weak tags (`W/"5"`) '
        "never match. No match, or a malformed value: 412 `precondition_failed`",
    ),
]

Prefer = Annotated[
    str | None,
    Header(
        alias="prefer",
        description="RFC 7240: `return=minimal` answers each stored event as its `id`, `seq` and `timestamp` only "
        "(the answer's bytes no longer grow with the events'; `Preference-Applied: return=minimal`); otherwise "
        "ignored",
    ),
]
IfNoneMatch = Annotated[
    str | None,
    Header(
        alias="if-none-match",
        description="`*` makes the create strict: an existing session id answers 409 `already_exists` and "
        "nothing changes (without it: get-or-create). Any other value: 400 `invalid_input`",
    ),
]

# --- query parameters ---------------------------------------------------------------------------------------
NumRecentEvents = Annotated[QueryInt | None, Query(ge=0, description="only the last n events (0: none); digits only")]
AfterTimestamp = Annotated[
    TimeInput | None, Query(description="only events at or after this time: seconds since the epoch or ISO 8601")
]
Limit = Annotated[QueryInt | None, Query(ge=1, le=MAX_PAGE, description=f"page size, 1-{MAX_PAGE} (default 20)")]
EventPageLimit = Annotated[
    QueryInt | None, Query(ge=1, le=MAX_EVENT_PAGE, description=f"events per page, 1-{MAX_EVENT_PAGE}; digits only")
]
NextToken = Annotated[
    Utf8Str | None,
    Query(max_length=MAX_NEXT_TOKEN, description="the opaque token of the previous page's `next_token`"),
]
SearchQuery = Annotated[
    Utf8Str,
    AfterValidator(_non_blank),
    Query(min_length=1, max_length=MAX_QUERY_CHARS, description="what to look for (non-blank)"),
]
TopK = Annotated[
    QueryInt | None, Query(ge=1, le=MAX_TOP_K, description=f"how many memories, 1-{MAX_TOP_K} (default 5)")
]
SCORE_CUT_DESCRIPTION = (
    "leave out memories whose score is below this, 0-1. Default 0.015 (the calibrated cut, so that a query that "
    "matches nothing finds nothing); searching without vectors (`EMBEDDER=none`), 0: a memory must share a word "
    "with the query. 0 returns the top_k whatever they score"
)
"""The defaults named here are ``search.scoring.HYBRID_CALIBRATION`` / ``LEXICAL_CALIBRATION``'s (a test checks)."""
MinScore = Annotated[Fraction | None, Query(description=SCORE_CUT_DESCRIPTION)]
ContextFormat = Annotated[
    Utf8Str, Query(max_length=MAX_PARAMETER_CHARS, description="`openai` (default), `full` or `adk`")
]
Budget = Annotated[QueryInt | None, Query(ge=1, description="a positive budget; digits only")]
SystemMessages = Annotated[
    list[Utf8Str] | None,
    Query(
        description="a base system message, first in the context; repeat the parameter for more, in order (each "
        "value whole: commas are part of it). Always kept: a budget too small for them answers 422 `system`. "
        "Long prompts: `POST …/context` takes them in a JSON body"
    ),
]
MemoryCount = Annotated[
    QueryInt | None,
    Query(
        ge=0,
        le=MAX_CONTEXT_MEMORIES,
        description=f"add up to this many of the user's memories (0-{MAX_CONTEXT_MEMORIES}), searched with the "
        "newest user message (or `memory_query`), as one system message with their dates; digits only",
    ),
]
MemoryQuery = Annotated[
    Utf8Str | None,
    Query(max_length=MAX_QUERY_CHARS, description="what to search memory for instead of the newest user message"),
]
MemoryMinScore = Annotated[
    Fraction | None, Query(description="the memory search's `min_score`: " + SCORE_CUT_DESCRIPTION)
]
WithProfile = Annotated[bool, Query(description="add what is known about the user (the profile) as a system message")]
Flag = Annotated[bool, Query()]
AfterSummary = Annotated[
    bool,
    Query(
        description="only the events after what the newest summary covers: the summary itself, the raw events it "
        "kept and every later one (what ADK needs; the whole session when there is no summary)"
    ),
]
"""A query boolean without a description of its own (``keep_first``, …)."""


class _Request(BaseModel):
    """A request body: unknown fields are refused; a field sent under both its spellings is refused."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, loc_by_alias=False, defer_build=True)

    @model_validator(mode="before")
    @classmethod
    def _one_spelling(cls, data: Any) -> Any:
        reject_two_spellings(cls, data)
        return data


class CreateSessionRequest(_Request):
    """``POST …/sessions``: get-or-create. No body (or ``{}``) creates a session with a generated id."""

    session_id: Identifier | None = Field(
        default=None, alias="sessionId", description="the id to create or get; generated when absent"
    )
    state: State | None = Field(default=None, description="initial state (applied only on a true creation)")


class EventBatch(_Request):
    """``POST …/events`` with ``{events: [...]}``: 1-100 events appended atomically."""

    events: list[Event] = Field(min_length=1, max_length=MAX_BATCH, description=f"1-{MAX_BATCH} events")


def _append_shape(body: Any) -> str:
    if isinstance(body, dict) and "events" in body and not {"author", "content", "role"} & set(body):
        return "<batch>"
    return "<event>"


AppendRequest = Annotated[
    Annotated[EventBatch, Tag("<batch>")] | Annotated[Event, Tag("<event>")],
    Discriminator(_append_shape),
]
"""One event (ADK JSON or a chat message) or ``{events: [...]}``."""

UNION_TAGS = params.UNION_TAGS  # the tags of the body unions above (``Tag("<batch>")`` …)


class SaveSessionRequest(_Request):
    """``POST …/memories`` with ``{session_id, policy?}``: save that session's events by the policy."""

    session_id: Identifier = Field(alias="sessionId", description="the session whose events to save")
    policy: Policy | None = Field(default=None, description="default `default`")


class MemoryText(_Request):
    """One memory added directly."""

    text: Annotated[NonBlank, Field(max_length=MAX_MEMORY_TEXT)] = Field(
        description=f"the memory, 1-{MAX_MEMORY_TEXT} characters, not blank"
    )
    metadata: Metadata | None = None
    timestamp: TimeInput | None = Field(default=None, description="when it was said; default now")


class SaveTextsRequest(_Request):
    """``POST …/memories`` with ``{memories: [...]}``: add 1-100 texts directly."""

    memories: list[MemoryText] = Field(min_length=1, max_length=MAX_BATCH)


class SaveEventsRequest(_Request):
    """``POST …/memories`` with ``{events: [...], session_id?}``: save 1-100 explicit events (ADK's
    ``add_events_to_memory``), each with text one memory, idempotent by event id within ``session_id``."""

    events: list[Event] = Field(
        min_length=1, max_length=MAX_BATCH, description=f"1-{MAX_BATCH} events, as the append route takes them"
    )
    session_id: Identifier | None = Field(
        default=None,
        alias="sessionId",
        description="the session the events belong to (it need not exist); scopes the event ids. Default: none",
    )
    policy: Policy | None = Field(
        default=None, description="which events and parts to keep; default every role's text, tool calls and results"
    )


def _save_shape(body: Any) -> str:
    if isinstance(body, dict) and "memories" in body:
        return "<texts>"
    return "<events>" if isinstance(body, dict) and "events" in body else "<session>"


SaveMemoriesRequest = Annotated[
    Annotated[SaveSessionRequest, Tag("<session>")]
    | Annotated[SaveTextsRequest, Tag("<texts>")]
    | Annotated[SaveEventsRequest, Tag("<events>")],
    Discriminator(_save_shape),
]


class SearchRequest(_Request):
    """``POST …/memories/search``: the body form of the search query parameters."""

    query: Annotated[NonBlank, Field(min_length=1, max_length=MAX_QUERY_CHARS)]
    top_k: StrictCount = Field(default=5, ge=1, le=MAX_TOP_K, description=f"1-{MAX_TOP_K}, default 5")
    min_score: Annotated[Fraction, Strict()] | None = Field(default=None, description=SCORE_CUT_DESCRIPTION)


class ContextRequest(_Request):
    """``POST …/context``: the context's query parameters as a JSON body, for base system prompts too long for a
    URL (API Gateway's HTTP API takes at most 10240 bytes of request line and headers together, signature and
    token included)."""

    format: Literal["openai", "full", "adk"] = Field(default="openai", description="the messages' shape")
    max_tokens: StrictCount | None = Field(default=None, ge=1, description="a positive budget (approximate tokens)")
    max_messages: StrictCount | None = Field(default=None, ge=1, description="a positive budget (messages)")
    max_chars: StrictCount | None = Field(default=None, ge=1, description="a positive budget (characters)")
    keep_first: StrictBool = False
    start_with_user: StrictBool = False
    include_summary: StrictBool = True
    system: list[Annotated[NonBlank, Field(max_length=MAX_SYSTEM_CHARS)]] = Field(
        default_factory=list,
        max_length=MAX_SYSTEM_MESSAGES,
        description=f"0-{MAX_SYSTEM_MESSAGES} base system messages, first in the context, in order (at most "
        f"{MAX_SYSTEM_CHARS} characters together); always kept: a budget too small for them answers 422 `system`",
    )
    memories: StrictCount = Field(
        default=0,
        ge=0,
        le=MAX_CONTEXT_MEMORIES,
        description=f"add up to this many of the user's memories (0-{MAX_CONTEXT_MEMORIES}), searched with the "
        "newest user message (or `memory_query`), as one system message with their dates",
    )
    memory_query: Annotated[NonBlank, Field(max_length=MAX_QUERY_CHARS)] | None = Field(
        default=None, description="what to search memory for instead of the newest user message (needs `memories`)"
    )
    memory_min_score: Annotated[Fraction, Strict()] | None = Field(
        default=None, description="the memory search's `min_score` (needs `memories`): " + SCORE_CUT_DESCRIPTION
    )
    profile: StrictBool = Field(default=False, description="add what is known about the user as a system message")


# --- export / import and the memo -----------------------------------------------------------------------------

EXPORT_FORMAT = params.EXPORT_FORMAT

ExportFormat = Annotated[
    Literal["json", "yaml"], Query(description="`json` (default, `application/json`) or `yaml` (`application/yaml`)")
]
Replace = Annotated[
    bool, Query(description="replace a session that exists under the id (default false: 409 `already_exists`)")
]
ImportSessionId = Annotated[
    Identifier | None,
    Query(description=f"the id to import the session under (default: the document's `session_id`): {_ID}"),
]


class ImportedEvent(Event):
    """An event of an export, as ``GET`` returned it: its ``id``, ``seq`` and ``timestamp`` are kept as given (the
    Event model's other fields and bounds apply; chat-message forms are not converted)."""

    id: Identifier = Field(description="the event's id, kept")
    timestamp: Timestamp = Field(description="kept as given")
    seq: Annotated[
        int, Strict(), Field(ge=1, le=MAX_CLIENT_COUNTER, description="kept as given; increasing along the list")
    ]

    @classmethod
    def _prepare(cls, data: Any) -> Any:
        return dict(data) if isinstance(data, dict) else data


class ImportedState(_Request):
    """A session's state by scope, keys without their prefixes."""

    session: ScopeState = Field(default_factory=dict, description="the session's own keys (no `app:`/`user:`/`temp:`)")
    user: ScopeState = Field(default_factory=dict, description="`user:` keys, without the prefix: set for the user")
    app: ScopeState = Field(default_factory=dict, description="`app:` keys, without the prefix: set for the app")


class ImportedCompaction(_Request):
    """The compaction watermark: the newest summary event and the last seq it covers."""

    summary_event_id: Identifier | None = Field(default=None, description="a compaction event of `events`, or null")
    end_seq: ClientCounter = 0


class SessionDocument(_Request):
    """``POST …/sessions/import``: a session as ``GET …/export`` gives it (JSON, or YAML with
    ``Content-Type: application/yaml``)."""

    format: Literal["agent-memory/session@1"] = Field(description=f"`{EXPORT_FORMAT}`")
    app_name: Identifier = Field(description="where it was exported from (the path names where it goes)")
    user_id: Identifier
    session_id: Identifier = Field(description="the id it is imported under unless `?session_id=` names one")
    create_time: Timestamp
    last_update_time: Timestamp
    version: ClientCounter
    last_seq: ClientCounter
    state: ImportedState = Field(default_factory=ImportedState)
    memo: Memo = Field(default_factory=dict)
    compaction: ImportedCompaction = Field(default_factory=ImportedCompaction)
    events: list[ImportedEvent] = Field(default_factory=list, description="every event, oldest first")


class MemoRequest(_Request):
    """``PUT …/memo``: the memo to keep (replaces the one stored)."""

    memo: Memo


# --- deleting events (DELETE …/events/{event_id}, DELETE …/events) -------------------------------------------
EventId = Annotated[str, Path(pattern=IDENTIFIER_PATTERN, description=f"an event of the session: {_ID}")]
EventIds = Annotated[
    list[Utf8Str] | None,
    Query(description=f"an event to read, by id; repeat the parameter for more (at most {MAX_BATCH})"),
]
IdPrefix = Annotated[
    Utf8Str | None,
    Query(max_length=128, description="read the events whose id starts with this, in id order (empty: every event)"),
]
AfterId = Annotated[
    Utf8Str | None, Query(max_length=128, description="a prefix read's page starts after this id, in its order")
]
IdOrder = Annotated[
    Utf8Str | None, Query(max_length=MAX_PARAMETER_CHARS, description="`asc` (default) or `desc`: by id")
]
BeforeSeq = Annotated[
    QueryInt | None,
    Query(ge=1, description="rewind: delete the events with `seq` >= this (and their tool partners); digits only"),
]
BeforeInvocationId = Annotated[
    Utf8Str | None,
    Query(
        min_length=1,
        max_length=MAX_PARAMETER_CHARS,
        description="rewind: delete from the first event of this invocation onwards (404 when no event has it)",
    ),
]
Pairs = Annotated[
    Utf8Str | None,
    Query(
        max_length=MAX_PARAMETER_CHARS,
        description="`delete` (default): a tool call's partner events are deleted with it; `reject`: 409 "
        "`tool_pair` naming them, nothing deleted",
    ),
]
