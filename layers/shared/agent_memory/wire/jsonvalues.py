"""JSON a client sends, parsed and bounded so that nothing stored can break a later read or a DynamoDB write.

One parser for every request body (``parse_json_body``, the resolver's JSON deserializer) and one check for
JSON values that the request models bound (``check_json_value``). What both refuse:

- nesting deeper than a bound, detected before parsing, so that no ``RecursionError`` is ever raised;
- ``NaN``, ``Infinity`` and ``-Infinity``, and numbers a DynamoDB number cannot hold: integers of more than
  38 digits (Python would refuse past 4,300 digits anyway), floats that overflow to infinity or whose
  magnitude is outside DynamoDB's 1e-130 .. 9.99e125;
- strings (keys included) that do not encode to UTF-8, such as a lone surrogate escape ``"\\ud800"``;
- an object that names a key twice (RFC 8259 leaves its meaning open; we do not guess).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from ..limits import MAX_BODY_BYTES, MAX_DOCUMENT_DEPTH, MAX_INT_DIGITS, MAX_NUMBER, MAX_VALUE_DEPTH, MIN_NUMBER

# A JSON string literal, removed before looking at the structure. An unterminated one runs to the end of the
# text (optionally ending in a lone backslash): the match never fails once it starts at a quote, so the scan
# stays linear (a failing match would be retried from every later quote: quadratic on '"\\"\\"\\"…').
_STRING = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+(?:"|\\?\Z)', re.DOTALL)
_LONG_NUMBER = re.compile("[0-9]{" + str(MAX_INT_DIGITS + 1) + ",}")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
# Outside strings valid JSON is ASCII; everything but brackets is deleted, opening ones become "(".
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_BRACKETS = bytes.maketrans(b"[]{}", b"()()")


class JsonRejected(ValueError):
    """The text is not JSON this service accepts; the message says why (safe to show the client)."""


class JsonTooLarge(JsonRejected):
    """The text is longer than any request body may be."""


def unnested_brackets(structure: str, limit: int) -> bytes:
    """The brackets of ``structure`` (JSON text without its strings) left after ``limit`` rounds of removing the
    innermost ``[]``/``{}`` pairs: empty exactly when they balance and nest at most ``limit`` deep.

    Linear per round, no recursion, no parsing: what is left over is either too deep (it still holds a pair)
    or unbalanced, and json.loads never sees it (it would recurse once per level).
    """
    brackets = structure.encode("ascii", "ignore").translate(_BRACKETS, _NOT_BRACKETS)
    for _ in range(limit):
        shorter = brackets.replace(b"()", b"")
        if shorter == brackets:
            break
        brackets = shorter
    return brackets


def _reject_constant(name: str) -> Any:
    raise JsonRejected(f"{name} is not a JSON number this service accepts")


def _parse_float(text: str) -> float:
    value = float(text)
    check_number(value)
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise JsonRejected(f"key {key!r} appears twice in one object")
            seen.add(key)
    return result


def check_number(value: float | int) -> None:
    """Raise JsonRejected for a number DynamoDB cannot store (or JSON cannot carry)."""
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        if abs(value) >= 10**MAX_INT_DIGITS:
            raise JsonRejected(f"integer of more than {MAX_INT_DIGITS} digits")
        return
    if not math.isfinite(value):
        raise JsonRejected("numbers must be finite (no NaN or Infinity)")
    magnitude = abs(value)
    if magnitude > MAX_NUMBER or 0 < magnitude < MIN_NUMBER:
        raise JsonRejected(f"number {value!r} is outside what DynamoDB holds (1e-130 to 9.99e125)")


def parse_json_body(text: str) -> Any:
    """Parse a request body; JsonRejected (with a message for the client) for anything the service refuses."""
    if len(text) > MAX_BODY_BYTES:
        raise JsonTooLarge(f"body is over {MAX_BODY_BYTES} bytes")
    try:
        text.encode("utf-8")  # a body handed over as text (not from HTTP) may hold raw lone surrogates
    except UnicodeEncodeError as exc:
        raise JsonRejected("body is not valid Unicode text (a lone surrogate)") from exc
    structure = _STRING.sub('""', text)
    left = unnested_brackets(structure, MAX_DOCUMENT_DEPTH)
    if b"()" in left:
        raise JsonRejected(f"JSON nests deeper than {MAX_DOCUMENT_DEPTH} levels")
    if left:
        raise JsonRejected("body is not valid JSON: its brackets do not balance")
    if _LONG_NUMBER.search(structure):
        # Before parsing: Python refuses integers past 4,300 digits with a ValueError of its own.
        raise JsonRejected(f"a number has more than {MAX_INT_DIGITS} digits; DynamoDB numbers hold {MAX_INT_DIGITS}")
    try:
        value = json.loads(
            text,
            parse_constant=_reject_constant,
            parse_float=_parse_float,
            object_pairs_hook=_unique_keys,
        )
    except JsonRejected:
        raise
    except (json.JSONDecodeError, RecursionError, ValueError) as exc:
        raise JsonRejected(f"body is not valid JSON: {exc}") from exc
    if _SURROGATE_ESCAPE.search(text):
        # Only \u escapes can produce surrogates (the text itself is valid UTF-8); a valid pair decodes to one
        # character, a lone one stays a surrogate and fails to encode.
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:
            raise JsonRejected("strings must be valid Unicode (a lone surrogate escape such as \\ud800)") from exc
    return value


def check_json_value(value: Any, *, max_depth: int = MAX_VALUE_DEPTH) -> int:
    """Check a JSON value built by the parser or by a Python caller; return its serialised size in bytes.

    Raises JsonRejected for nesting deeper than ``max_depth`` (containers count one level each), numbers
    DynamoDB cannot hold, strings that do not encode to UTF-8, or values that are not JSON at all.
    """
    # Iterative walk: depth is checked before anything recursive (json.dumps) sees the value.
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            if depth + 1 > max_depth:
                raise JsonRejected(f"nests deeper than {max_depth} levels")
            for key, child in item.items():
                if not isinstance(key, str):
                    raise JsonRejected("object keys must be strings")
                stack.append((child, depth + 1))
        elif isinstance(item, list | tuple):
            if depth + 1 > max_depth:
                raise JsonRejected(f"nests deeper than {max_depth} levels")
            stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, int | float) and not isinstance(item, bool):
            check_number(item)
        elif not (item is None or isinstance(item, str | bool)):
            raise JsonRejected(f"{type(item).__name__} is not a JSON value")
    try:
        return len(json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise JsonRejected("strings must encode to UTF-8 (no lone surrogates)") from exc
