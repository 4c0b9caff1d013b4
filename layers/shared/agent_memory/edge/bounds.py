"""The bounds of what a client may send, written once and used by every request model.

Each bound is an annotated type: the request models (``models.py``, ``requests.py``) declare fields with them,
so Powertools validates them at the edge and the OpenAPI schema documents them. Errors are pydantic errors;
``api.py`` maps them to the one error shape (a ``payload_too_large`` error answers 413, others 400/422).
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, Strict
from pydantic_core import PydanticCustomError

from ..limits import (
    MAX_CLIENT_COUNTER,
    MAX_MEMO_BYTES,
    MAX_METADATA_BYTES,
    MAX_STATE_BYTES,
    MAX_STATE_KEYS,
    MAX_TIMESTAMP,
    MAX_TOOL_JSON_BYTES,
    MAX_VALUE_DEPTH,
    MIN_TIMESTAMP,
)
from ..policy.identifiers import IDENTIFIER_PATTERN
from ..wire.jsonvalues import JsonRejected, check_json_value

# Sizes are bytes of compact UTF-8 JSON; the numbers themselves are in limits.py.


def _payload_too_large(size: int, limit: int) -> PydanticCustomError:
    return PydanticCustomError(
        "payload_too_large", "{size} bytes of JSON; at most {limit}", {"size": size, "limit": limit}
    )


def _bounded_json(max_bytes: int) -> AfterValidator:
    def check(value: Any) -> Any:
        try:
            size = check_json_value(value, max_depth=MAX_VALUE_DEPTH)
        except JsonRejected as exc:
            raise PydanticCustomError("json_value", "{reason}", {"reason": str(exc)}) from exc
        if size > max_bytes:
            raise _payload_too_large(size, max_bytes)
        return value

    return AfterValidator(check)


def _not_bool(value: Any) -> Any:
    # pydantic's lax numbers take true/false as 1/0; a boolean is never a number here.
    if isinstance(value, bool):
        raise PydanticCustomError("bool_not_number", "a boolean is not a number")
    return value


def _json_number(value: Any) -> Any:
    # pydantic's lax floats take "1700000000" too: a time in a JSON body is a number (query times are TimeInput).
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PydanticCustomError("not_a_number", "a JSON number is expected (seconds since the epoch)")
    return value


def _query_digits(value: Any) -> Any:
    # Query parameters arrive as text: only plain digits are an integer (not "1.0", "1e3", " 1", "+1").
    if isinstance(value, str):
        if not re.fullmatch(r"[0-9]{1,9}", value):
            raise PydanticCustomError("int_digits", "must be a whole number written in digits (at most 9)")
        return int(value)
    return value


def _utf8(value: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise PydanticCustomError("string_unicode", "must be valid Unicode (no lone surrogates)") from exc
    return value


def parse_time(value: Any) -> Any:
    """Seconds since the epoch from an ISO 8601 string (a time without a zone is UTC) or a numeric string;
    other values pass through for the number validation."""
    if not isinstance(value, str):
        return value
    try:
        return float(value)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise PydanticCustomError("time_format", "must be seconds since the epoch or an ISO 8601 time") from exc
    if parsed.tzinfo is None:  # a time without a zone is UTC, not the server's local time
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise PydanticCustomError("finite_number", "must be a finite number")
    return value


Utf8Str = Annotated[str, AfterValidator(_utf8)]
"""Text that encodes to UTF-8 (JSON bodies are checked by the parser; this guards parameters and Python callers)."""

Identifier = Annotated[
    str,
    Field(
        pattern=IDENTIFIER_PATTERN,
        description="1-128 characters of [A-Za-z0-9._:@-], starting with a letter or digit",
    ),
]

Timestamp = Annotated[
    float,
    BeforeValidator(_json_number),
    AfterValidator(_finite),
    Field(
        ge=MIN_TIMESTAMP,
        le=MAX_TIMESTAMP,
        description=f"seconds since the epoch, {MIN_TIMESTAMP:.0f} to {MAX_TIMESTAMP:.0f} (9999-12-31T23:59:59Z)",
    ),
]
"""An event time: a JSON number (not a boolean, not NaN or Infinity) both DynamoDB and a datetime hold."""

TimeInput = Annotated[
    float,
    BeforeValidator(_not_bool),
    BeforeValidator(parse_time),
    AfterValidator(_finite),
    Field(
        ge=MIN_TIMESTAMP,
        le=MAX_TIMESTAMP,
        description="seconds since the epoch or an ISO 8601 time (UTC when it names no zone), up to year 9999",
    ),
]
"""A time a client may also write as ISO 8601 (memory timestamps, ``after_timestamp``)."""

Fraction = Annotated[
    float,
    BeforeValidator(_not_bool),
    AfterValidator(_finite),
    Field(ge=0.0, le=1.0, description="a number from 0 to 1"),
]
"""A share or a score: a number (not a boolean, not NaN) from 0 to 1."""

StrictCount = Annotated[int, Strict()]
"""A JSON integer: not a boolean, not ``2.0``."""

ClientCounter = Annotated[int, Strict(), Field(ge=0, le=MAX_CLIENT_COUNTER)]
"""A counter a client sets (an imported version, last seq, watermark): a JSON integer from 0 to 2^50
(``limits.MAX_CLIENT_COUNTER``: what counts on from it stays within what every store and JSON client holds
exactly)."""

QueryInt = Annotated[int, BeforeValidator(_query_digits)]
"""A query-string integer: plain digits only (``limit=1.0`` and ``limit=true`` are refused)."""

State = Annotated[
    dict[str, Any],
    _bounded_json(MAX_STATE_BYTES),
    Field(
        max_length=MAX_STATE_KEYS,
        description=f"a JSON object: at most {MAX_STATE_KEYS} keys and {MAX_STATE_BYTES} bytes as JSON, nesting at "
        f"most {MAX_VALUE_DEPTH} levels, numbers DynamoDB holds; `app:` / `user:` keys go to those scopes, `temp:` "
        "keys are never stored",
    ),
]

ScopeState = Annotated[
    dict[str, Any],
    _bounded_json(MAX_STATE_BYTES),
    Field(
        description=f"a JSON object: at most {MAX_STATE_BYTES} bytes as JSON (any number of keys: a session's state "
        f"gathers them over many deltas of at most {MAX_STATE_KEYS})"
    ),
]
"""A scope's state in an import document: ``State`` without the bound on keys of one delta."""

Metadata = Annotated[
    dict[str, Any],
    _bounded_json(MAX_METADATA_BYTES),
    Field(description=f"a JSON object: at most {MAX_METADATA_BYTES} bytes, nesting at most {MAX_VALUE_DEPTH} levels"),
]

ToolJson = Annotated[
    dict[str, Any],
    _bounded_json(MAX_TOOL_JSON_BYTES),
    Field(description=f"a JSON object: at most {MAX_TOOL_JSON_BYTES} bytes, nesting at most {MAX_VALUE_DEPTH} levels"),
]

Policy = Annotated[
    str | dict[str, Any],
    _bounded_json(MAX_METADATA_BYTES),
    Field(description="a preset name (`default`, `all`, `custom`) or a policy object"),
]


def check_extra_json(value: Any) -> None:
    """Raise a pydantic error for an undeclared field whose value nests too deep or holds what DynamoDB cannot."""
    try:
        check_json_value(value, max_depth=MAX_VALUE_DEPTH)
    except JsonRejected as exc:
        raise PydanticCustomError("json_value", "{reason}", {"reason": str(exc)}) from exc


# --- a session's memo (``PUT …/memo``, exports) -------------------------------------------------------------

Memo = Annotated[
    dict[str, Any],
    _bounded_json(MAX_MEMO_BYTES),
    Field(
        description=f"the application's own JSON object kept with the session: at most {MAX_MEMO_BYTES} bytes as "
        f"JSON (413 beyond), nesting at most {MAX_VALUE_DEPTH} levels"
    ),
]
