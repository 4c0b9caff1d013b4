"""Path, query and header parameters (and the create's plain body) read without pydantic: the cold path.

Powertools' request validation builds a pydantic adapter per route parameter, and importing pydantic and the request
models costs a fresh function more than its whole first request. So a request is first read here, by a check that
only *accepts*: each parameter of the handler's signature, named by its annotation (``AppName``, ``Limit``, … as
``requests.py`` declares them; handlers keep their annotations unevaluated), is taken only when its value is one
that ``requests.py``'s pydantic type takes too, to the same value (an identifier that matches the pattern, plain
digits within the bounds, ``true`` / ``false``, a decimal fraction, text within its length; the create's
``{session_id?, state?}``). Anything else (a value out of bounds, an unusual spelling pydantic may still take, a
repeated parameter, any other body) is answered by
Powertools' pydantic validation as before (``api._pydantic_validation``): the errors, their status, message and
field, are pydantic's own, and a value this module takes is the value pydantic would have produced
(``tests/unit/test_edge_parity.py`` holds both to generated requests).

The bounds below are the ones ``requests.py`` and ``bounds.py`` declare (they import them from here).
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs

from ..limits import (
    MAX_BATCH,
    MAX_CONTEXT_MEMORIES,
    MAX_EVENT_PAGE,
    MAX_MEMORY_TEXT,
    MAX_NEXT_TOKEN,
    MAX_PAGE,
    MAX_PARAMETER_CHARS,
    MAX_QUERY_CHARS,
    MAX_STATE_BYTES,
    MAX_STATE_KEYS,
    MAX_TIMESTAMP,
    MAX_TOP_K,
    MAX_VALUE_DEPTH,
    MIN_TIMESTAMP,
)
from ..policy.identifiers import IDENTIFIER_PATTERN
from ..wire import plainevents
from ..wire.jsonvalues import JsonRejected, check_json_value

# --- bounds shared with requests.py / bounds.py -------------------------------------------------------------------
EXPORT_FORMAT = "agent-memory/session@1"  # the export document's ``format``

UNION_TAGS = frozenset({"<batch>", "<event>", "<session>", "<texts>", "<events>"})
"""Tags pydantic puts in an error's location for requests.py's body unions; not part of a field's path."""

_IDENTIFIER = re.compile(IDENTIFIER_PATTERN)
_DIGITS = re.compile(r"[0-9]{1,9}")
_DECIMAL = re.compile(r"[0-9]{1,20}(?:\.[0-9]{1,20})?")

UNSURE = plainevents.UNSURE
"""What a check answers for a value it does not take: pydantic decides (and words the error)."""

Check = Callable[[str], Any]


def _utf8(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def identifier(value: str) -> Any:
    return value if _IDENTIFIER.fullmatch(value) else UNSURE


def text(max_length: int, min_length: int = 0, non_blank: bool = False) -> Check:
    def check(value: str) -> Any:
        if not min_length <= len(value) <= max_length or not _utf8(value) or (non_blank and not value.strip()):
            return UNSURE
        return value

    return check


def digits(ge: int, le: int | None = None) -> Check:
    """``bounds.QueryInt`` with ``Query(ge=…, le=…)``."""

    def check(value: str) -> Any:
        if not _DIGITS.fullmatch(value):
            return UNSURE
        number = int(value)
        return number if number >= ge and (le is None or number <= le) else UNSURE

    return check


def flag(value: str) -> Any:
    """A query boolean: ``true`` / ``false`` (pydantic takes more spellings; it answers those)."""
    return {"true": True, "false": False}.get(value, UNSURE)


def fraction(value: str) -> Any:
    """``bounds.Fraction`` from a query string: a plain decimal from 0 to 1."""
    if not _DECIMAL.fullmatch(value):
        return UNSURE
    number = float(value)
    return number if 0.0 <= number <= 1.0 else UNSURE


def time_input(value: str) -> Any:
    """``bounds.TimeInput`` (``bounds.parse_time``: a number, else ISO 8601 with UTC for no zone), finite, in range."""
    try:
        number = float(value)
    except ValueError:
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return UNSURE
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        number = parsed.timestamp()
    if not math.isfinite(number) or not MIN_TIMESTAMP <= number <= MAX_TIMESTAMP:
        return UNSURE
    return number


def choice(*allowed: str) -> Check:
    def check(value: str) -> Any:
        return value if value in allowed else UNSURE

    return check


def any_text(value: str) -> Any:
    return value if _utf8(value) else UNSURE


class Spec:
    """How one annotated parameter type of ``requests.py`` arrives and which of its values are taken here."""

    def __init__(self, where: str, check: Check, alias: str | None = None, many: bool = False) -> None:
        self.where = where  # path | query | header
        self.check = check
        self.alias = alias
        self.many = many  # a list parameter (``system``): every value, in order


_PATH = Spec("path", identifier)
SPECS: dict[str, Spec] = {
    "AppName": _PATH,
    "UserId": _PATH,
    "SessionId": _PATH,
    "MemoryId": _PATH,
    "EventId": _PATH,
    "IfMatch": Spec("header", any_text, alias="if-match"),
    "IfNoneMatch": Spec("header", any_text, alias="if-none-match"),
    "Prefer": Spec("header", any_text, alias="prefer"),
    "NumRecentEvents": Spec("query", digits(0)),
    "AfterTimestamp": Spec("query", time_input),
    "Limit": Spec("query", digits(1, MAX_PAGE)),
    "EventPageLimit": Spec("query", digits(1, MAX_EVENT_PAGE)),
    "NextToken": Spec("query", text(MAX_NEXT_TOKEN)),
    "SearchQuery": Spec("query", text(MAX_QUERY_CHARS, 1, non_blank=True)),
    "TopK": Spec("query", digits(1, MAX_TOP_K)),
    "MinScore": Spec("query", fraction),
    "ContextFormat": Spec("query", text(MAX_PARAMETER_CHARS)),
    "Budget": Spec("query", digits(1)),
    "Flag": Spec("query", flag),
    "AfterSummary": Spec("query", flag),
    "EventIds": Spec("query", any_text, many=True),
    "IdPrefix": Spec("query", text(128)),
    "AfterId": Spec("query", text(128)),
    "IdOrder": Spec("query", text(MAX_PARAMETER_CHARS)),
    "SystemMessages": Spec("query", any_text, many=True),
    "MemoryCount": Spec("query", digits(0, MAX_CONTEXT_MEMORIES)),
    "MemoryQuery": Spec("query", text(MAX_QUERY_CHARS)),
    "MemoryMinScore": Spec("query", fraction),
    "WithProfile": Spec("query", flag),
    "ExportFormat": Spec("query", choice("json", "yaml")),
    "Replace": Spec("query", flag),
    "ImportSessionId": Spec("query", identifier),
    "BeforeSeq": Spec("query", digits(1)),
    "BeforeInvocationId": Spec("query", text(MAX_PARAMETER_CHARS, 1)),
    "Pairs": Spec("query", text(MAX_PARAMETER_CHARS)),
}


class NewSession:
    """``requests.CreateSessionRequest`` as this module reads it: the same fields, the same values."""

    __slots__ = ("session_id", "state")

    def __init__(self, session_id: str | None, state: dict[str, Any] | None) -> None:
        self.session_id = session_id
        self.state = state

    def model_dump(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "state": self.state}


def new_session(body: Any) -> Any:
    """The create's body (``Annotated[CreateSessionRequest | None, Body()]``): none, or ``{session_id?, state?}``
    in snake_case with an identifier and a JSON object within the state's bounds. Anything else (the camelCase
    alias, an unknown field, a bound passed) is pydantic's to answer."""
    if body is None:
        return None
    if not isinstance(body, dict) or not set(body) <= {"session_id", "state"}:
        return UNSURE
    session_id, state = body.get("session_id"), body.get("state")
    if session_id is not None and (not isinstance(session_id, str) or not _IDENTIFIER.fullmatch(session_id)):
        return UNSURE
    if state is not None:
        if not isinstance(state, dict) or len(state) > MAX_STATE_KEYS:
            return UNSURE
        try:
            size = check_json_value(state, max_depth=MAX_VALUE_DEPTH)
        except JsonRejected:
            return UNSURE
        if size > MAX_STATE_BYTES:
            return UNSURE
        state = dict(state)
    return NewSession(session_id, state)


class Search:
    """``requests.SearchRequest`` as this module reads it: the same fields, the same values."""

    __slots__ = ("min_score", "query", "top_k")

    def __init__(self, query: str, top_k: int, min_score: float | None) -> None:
        self.query = query
        self.top_k = top_k
        self.min_score = min_score

    def model_dump(self) -> dict[str, Any]:
        return {"query": self.query, "top_k": self.top_k, "min_score": self.min_score}


_SEARCH_FIELDS = frozenset({"query", "top_k", "min_score"})


def search(body: Any) -> Any:
    """The search's body (``Annotated[SearchRequest, Body()]``, required): ``{query, top_k?, min_score?}`` with a
    non-blank query of 1 to MAX_QUERY_CHARS characters, a JSON integer top_k from 1 to MAX_TOP_K (default 5) and a
    JSON number min_score from 0 to 1, or null (pydantic's strict float takes an integer as that float). Anything
    else (no body, an unknown field, a boolean, a bound passed, text that is not UTF-8) is pydantic's to answer."""
    if not isinstance(body, dict) or "query" not in body or not set(body) <= _SEARCH_FIELDS:
        return UNSURE
    query, top_k, min_score = body["query"], body.get("top_k", 5), body.get("min_score")
    if type(query) is not str or not 1 <= len(query) <= MAX_QUERY_CHARS or not query.strip() or not _utf8(query):
        return UNSURE
    if type(top_k) is not int or not 1 <= top_k <= MAX_TOP_K:
        return UNSURE
    if min_score is not None:
        if type(min_score) not in (int, float) or not 0.0 <= min_score <= 1.0:  # NaN fails the comparison too
            return UNSURE
        min_score = float(min_score)
    return Search(query, top_k, min_score)


class SaveSession:
    """``requests.SaveSessionRequest`` without a policy, as this module reads it."""

    __slots__ = ("policy", "session_id")

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.policy = None

    def model_dump(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "policy": None}


class Text:
    """``requests.MemoryText`` without metadata, as this module reads it."""

    __slots__ = ("metadata", "text", "timestamp")

    def __init__(self, text: str, timestamp: float | None) -> None:
        self.text = text
        self.metadata = None
        self.timestamp = timestamp

    def model_dump(self) -> dict[str, Any]:
        return {"text": self.text, "metadata": None, "timestamp": self.timestamp}


class SaveTexts:
    """``requests.SaveTextsRequest`` of texts without metadata, as this module reads it."""

    __slots__ = ("memories",)

    def __init__(self, memories: list[Text]) -> None:
        self.memories = memories

    def model_dump(self) -> dict[str, Any]:
        return {"memories": [m.model_dump() for m in self.memories]}


def _time(value: Any) -> Any:
    """``bounds.TimeInput`` from a JSON value: a number (not a boolean) or a string as ``time_input`` reads it."""
    if type(value) is str:
        return time_input(value)
    if type(value) in (int, float) and math.isfinite(value) and MIN_TIMESTAMP <= value <= MAX_TIMESTAMP:
        return float(value)
    return UNSURE


def _text(item: Any) -> Any:
    if not isinstance(item, dict) or "text" not in item or not set(item) <= {"text", "timestamp"}:
        return UNSURE
    value = item["text"]
    if type(value) is not str or not 1 <= len(value) <= MAX_MEMORY_TEXT or not value.strip() or not _utf8(value):
        return UNSURE
    timestamp = item.get("timestamp")
    if timestamp is None:
        return Text(value, None)
    seconds = _time(timestamp)
    return UNSURE if seconds is UNSURE else Text(value, seconds)


def save(body: Any) -> Any:
    """The save's body (``Annotated[SaveMemoriesRequest, Body()]``) in its two plain shapes: ``{session_id}`` (or
    ``{sessionId}``) with an identifier and no policy, or ``{memories: [{text, timestamp?}, …]}`` with 1 to
    MAX_BATCH non-blank texts within MAX_MEMORY_TEXT characters and times as ``bounds.TimeInput`` takes them.
    Anything else (a policy, metadata, explicit events, both spellings, a bound passed) is pydantic's."""
    if not isinstance(body, dict) or len(body) != 1:
        return UNSURE
    ((key, value),) = body.items()
    if key in ("session_id", "sessionId"):
        return SaveSession(value) if type(value) is str and _IDENTIFIER.fullmatch(value) else UNSURE
    if key != "memories" or type(value) is not list or not 1 <= len(value) <= MAX_BATCH:
        return UNSURE
    texts = []
    for item in value:
        text = _text(item)
        if text is UNSURE:
            return UNSURE
        texts.append(text)
    return SaveTexts(texts)


BODIES: dict[str, Callable[[Any], Any]] = {
    "Annotated[CreateSessionRequest | None, Body()]": new_session,
    "Annotated[SearchRequest, Body()]": search,
    "Annotated[SaveMemoriesRequest, Body()]": save,
    "Annotated[AppendRequest, Body()]": plainevents.append_body,
}
"""A body annotation (as a handler writes it) -> its check; any other body is read by pydantic."""


class Plan:
    """A handler's parameters as this module reads them; ``lean`` is False when pydantic must read every request
    (a body, or an annotation this module does not know)."""

    def __init__(self, func: Callable[..., Any]) -> None:
        self.parameters: list[tuple[str, Spec, Any]] = []  # name, spec, default (inspect.Parameter.empty: required)
        self.body: tuple[str, Callable[[Any], Any]] | None = None  # the body parameter's name and check
        self.lean = True
        for name, parameter in inspect.signature(func).parameters.items():
            annotation = parameter.annotation if isinstance(parameter.annotation, str) else None
            if annotation in BODIES and parameter.default in (None, inspect.Parameter.empty) and self.body is None:
                self.body = (name, BODIES[annotation])
                continue
            spec = SPECS.get(annotation) if annotation is not None else None
            if spec is None:
                self.lean = False
                return
            self.parameters.append((name, spec, parameter.default))


_PLANS: dict[Callable[..., Any], Plan] = {}


def plan(func: Callable[..., Any]) -> Plan:
    found = _PLANS.get(func)
    if found is None:
        found = _PLANS[func] = Plan(func)
    return found


def arguments(
    func: Callable[..., Any],
    path: Mapping[str, Any],
    query: Mapping[str, str] | None,
    raw_query: str | None,
    headers: Mapping[str, str],
    body: Callable[[], Any] = lambda: None,
) -> dict[str, Any] | None:
    """The handler's keyword arguments, or None when pydantic must decide (see the module's docstring).

    ``body()`` reads the request's body (as JSON values; it raises what a body that is not JSON answers), only
    when every parameter was taken, as pydantic's validation reads it after the parameters. ``query`` is
    ``queryStringParameters`` (API Gateway joins a repeated parameter's values with commas),
    ``raw_query`` the raw string (which tells a repeated parameter from one whose value holds a comma).
    """
    found = plan(func)
    if not found.lean:
        return None
    values: dict[str, Any] = {}
    repeated: set[str] | None = None
    for name, spec, default in found.parameters:
        if spec.where == "path":
            raw = path.get(name)
        elif spec.where == "header":
            raw = headers.get(spec.alias or name)
        else:
            raw = (query or {}).get(name)
        if raw is None:
            if default is inspect.Parameter.empty:
                return None  # pydantic's "Field required"
            values[name] = default
            continue
        if not isinstance(raw, str):
            return None
        if spec.many:
            items = raw.split(",")  # as Powertools splits it (the context handler rereads the raw string)
            for item in items:
                if spec.check(item) is UNSURE:
                    return None
            values[name] = items
            continue
        if spec.where == "query":
            if repeated is None:
                repeated = {k for k, v in parse_qs(raw_query or "", keep_blank_values=True).items() if len(v) > 1}
            if name in repeated:
                return None  # a repeated scalar: Powertools hands pydantic the list
        value = spec.check(raw)
        if value is UNSURE:
            return None
        values[name] = value
    if found.body is not None:
        name, check = found.body
        value = check(body())
        if value is UNSURE:
            return None
        values[name] = value
    return values
