"""JSON in and out of the read path: stored text decoded so that nothing stored can fail a read, and responses
encoded with what Lambda will carry measured.

Stored JSON (state values, event bodies) may have been written with looser bounds than the edge's, or by anyone
holding the table. :func:`load_stored` decodes it without ever raising anything but :class:`Unreadable`:

- values nested up to :data:`MAX_STORED_JSON_DEPTH` decode to plain Python values with the C decoder; a deeper subtree
  (any depth, past what ``json`` or pydantic can recurse through) is decoded iteratively and kept as its JSON text: a
  :class:`RawJSON` that :func:`dumps` splices into a response verbatim (``verbatim=True``), or a plain ``str`` holding
  that text (``verbatim=False``, for code that walks events: context, compaction, memory);
- ``NaN`` and ``Infinity`` (never valid JSON) read as null; numbers no float or int holds (``1e400``, 5,000
  digits) keep their text;
- text that is not JSON raises :class:`Unreadable`, for the caller to mark or skip.
"""

from __future__ import annotations

import json
import math
import re
import secrets
from typing import Any

from ..limits import MAX_DATETIME_SECONDS, MAX_STORED_JSON_DEPTH, MIN_DATETIME_SECONDS

# Deeper than any value the write path accepts (its bound is far lower), shallow enough that every consumer of
# decoded values (copy.deepcopy, the C encoder, pydantic) stays well inside the interpreter's recursion limit.
# Lambda refuses responses over 6 MB (6,291,456 bytes) *as it carries them*: the body JSON-escaped into the
# proxy result. Responses are cut (pages) or refused (413) at this many bytes of escaped body, which leaves room
# for the envelope and headers.
RESPONSE_CAP = 5_000_000


class Unreadable(ValueError):
    """Stored text that is not JSON."""


class RawJSON:
    """A valid JSON text kept undecoded (a subtree too deep to decode safely); :func:`dumps` emits it as is."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RawJSON) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return f"RawJSON({self.text[:40]!r}{'…' if len(self.text) > 40 else ''})"


# --- decoding -----------------------------------------------------------------------------------------------

# Bytes that are neither brackets nor quotes: deleted (at C speed) before measuring depth.
_NOT_STRUCTURE = bytes(c for c in range(256) if chr(c) not in '[]{}"')
_STRINGS = re.compile(rb'"[^"]*"')
_INNERMOST = re.compile(rb"\[\]|\{\}")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _within_depth(text: str, limit: int) -> bool:
    """Whether ``text``'s brackets close within ``limit`` levels, at C speed. Exact for JSON; for text that is
    not, False or a wrong answer that the decoders then reject."""
    if text.count("[") + text.count("{") <= limit:
        return True
    # Escapes pair a backslash with the next character, left to right: drop "\\" pairs, then escaped quotes;
    # then everything but brackets and quotes, then strings (a bracket inside a string is no nesting).
    data = text.encode("utf-8", "surrogatepass").replace(b"\\\\", b"").replace(b'\\"', b"")
    brackets = _STRINGS.sub(b"", data.translate(None, _NOT_STRUCTURE))
    for _ in range(limit):
        if not brackets:
            return True
        reduced = _INNERMOST.sub(b"", brackets)
        if reduced == brackets:  # unbalanced: let the iterative decoder judge it
            return False
        brackets = reduced
    return not brackets


def _verbatim_number(verbatim: bool) -> Any:
    def number(text: str) -> Any:
        return RawJSON(text) if verbatim else text

    return number


def _float(verbatim: bool) -> Any:
    keep = _verbatim_number(verbatim)

    def parse(text: str) -> Any:
        value = float(text)
        return value if math.isfinite(value) else keep(text)

    return parse


def _int(verbatim: bool) -> Any:
    keep = _verbatim_number(verbatim)

    def parse(text: str) -> Any:
        try:
            return int(text)
        except ValueError:  # past the interpreter's limit on digits
            return keep(text)

    return parse


def _constant(_: str) -> None:
    return None


def load_stored(data: str | bytes, *, verbatim: bool = False) -> Any:
    """Decode stored JSON text; values nested past :data:`MAX_STORED_JSON_DEPTH` come back as their text (see the
    module).

    Raises :class:`Unreadable` (only) for text that is not JSON.
    """
    if isinstance(data, bytes | bytearray):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise Unreadable(f"not UTF-8: {exc}") from exc
    else:
        text = data
    if _within_depth(text, MAX_STORED_JSON_DEPTH):
        hooks: dict[str, Any] = {"parse_constant": _constant, "parse_float": _float(verbatim)}
        try:
            try:
                return json.loads(text, **hooks)
            except json.JSONDecodeError:
                raise
            except ValueError:  # an integer past the interpreter's digit limit: parse integers one by one
                return json.loads(text, parse_int=_int(verbatim), **hooks)
        except RecursionError:  # cannot happen within MAX_STORED_JSON_DEPTH; the iterative decoder has no such limit
            pass
        except ValueError as exc:
            raise Unreadable(str(exc)) from exc
    return _IterativeDecoder(text, verbatim).decode()


_TOKEN = re.compile(
    r"[ \t\n\r]*(?:"
    r"([\[\]{}:,])"
    r'|("[^"\\\x00-\x1f]*(?:\\.[^"\\\x00-\x1f]*)*")'
    r"|(-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)"
    r"|(true|false|null|NaN|-?Infinity)"
    r")"
)
_LITERALS: dict[str, Any] = {"true": True, "false": False, "null": None}


class _Frame:
    __slots__ = ("key", "kind", "value")

    def __init__(self, kind: str, value: Any) -> None:
        self.kind = kind  # "[" or "{"
        self.value = value  # the list or dict being built; None inside a subtree kept as text
        self.key: str | None = None


class _IterativeDecoder:
    """A JSON decoder with an explicit stack: any depth, no recursion. Builds values down to MAX_STORED_JSON_DEPTH and
    keeps each deeper subtree as its text (validated all the same)."""

    def __init__(self, text: str, verbatim: bool) -> None:
        self.text = text
        self.verbatim = verbatim
        self.number = _float(verbatim)
        self.integer = _int(verbatim)

    def decode(self) -> Any:
        text = self.text
        stack: list[_Frame] = []
        raw_start = -1  # where the subtree being kept as text begins
        result: Any = None
        done = False
        # What may come next: "value", "value]" (after "["), "key}" (after "{"), "key", ":", ",", "end".
        expect = "value"
        pos = 0

        def emit(value: Any) -> str:
            nonlocal result, done
            if not stack:
                result, done = value, True
                return "end"
            top = stack[-1]
            if top.value is not None:
                if top.kind == "[":
                    top.value.append(value)
                else:
                    top.value[top.key] = value
            return ","

        while True:
            match = _TOKEN.match(text, pos)
            if match is None:
                if done and not text[pos:].strip(" \t\n\r"):
                    return result
                raise Unreadable(f"not JSON at character {pos}")
            pos = match.end()
            punct, string, number, literal = match.groups()
            if expect == "end":
                raise Unreadable(f"extra data at character {match.start()}")
            skipping = raw_start >= 0
            if punct in ("[", "{"):
                if expect not in ("value", "value]"):
                    raise Unreadable(f"unexpected {punct!r} at character {match.start(1)}")
                if not skipping and len(stack) >= MAX_STORED_JSON_DEPTH:
                    raw_start, skipping = match.start(1), True
                stack.append(_Frame(punct, None if skipping else ([] if punct == "[" else {})))
                expect = "value]" if punct == "[" else "key}"
            elif punct in ("]", "}"):
                opener = "[" if punct == "]" else "{"
                allowed = "value]" if punct == "]" else "key}"
                if not stack or stack[-1].kind != opener or expect not in (allowed, ","):
                    raise Unreadable(f"unexpected {punct!r} at character {match.start(1)}")
                frame = stack.pop()
                if frame.value is not None:
                    expect = emit(frame.value)
                elif len(stack) == MAX_STORED_JSON_DEPTH:  # the kept subtree closes
                    raw = text[raw_start : match.end(1)]
                    raw_start = -1
                    expect = emit(RawJSON(raw) if self.verbatim else raw)
                else:
                    expect = ","
            elif punct == ":":
                if expect != ":":
                    raise Unreadable(f"unexpected ':' at character {match.start(1)}")
                expect = "value"
            elif punct == ",":
                if expect != "," or not stack:
                    raise Unreadable(f"unexpected ',' at character {match.start(1)}")
                expect = "value" if stack[-1].kind == "[" else "key"
            elif string is not None:
                try:
                    value = json.loads(string) if "\\" in string else string[1:-1]
                except ValueError as exc:
                    raise Unreadable(f"bad string at character {match.start(2)}") from exc
                if expect in ("key}", "key"):
                    stack[-1].key = value
                    expect = ":"
                elif expect in ("value", "value]"):
                    expect = emit(value)
                else:
                    raise Unreadable(f"unexpected string at character {match.start(2)}")
            else:
                if expect not in ("value", "value]"):
                    raise Unreadable(f"unexpected value at character {match.start()}")
                if number is not None:
                    is_float = any(c in number for c in ".eE")
                    expect = emit(None if skipping else (self.number if is_float else self.integer)(number))
                else:
                    if skipping and literal not in _LITERALS:
                        raise Unreadable(f"{literal} is not JSON")  # cannot be spliced into a response
                    expect = emit(_LITERALS.get(literal))


# --- encoding -----------------------------------------------------------------------------------------------


def dumps(value: Any) -> str:
    """Compact JSON (UTF-8 text, not ASCII-escaped) with every :class:`RawJSON` spliced in verbatim."""
    raws: list[str] = []
    nonce = secrets.token_hex(8)

    def default(obj: Any) -> Any:
        if isinstance(obj, RawJSON):
            raws.append(obj.text)
            return f"\x00raw:{nonce}:{len(raws) - 1}"
        raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")

    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=default)
    if raws:
        # Placeholders are strings no stored value can spell: they hold a fresh random nonce.
        placeholder = re.compile(r'"\\u0000raw:' + nonce + r':([0-9]+)"')
        text = placeholder.sub(lambda m: raws[int(m.group(1))], text)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            # A lone surrogate decoded from a stored escape: escape it again rather than fail on the wire. Only
            # decoded strings can hold one (stored text is UTF-8), so the escape lands inside a JSON string.
            text = _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text


def wire_size(text: str) -> int:
    """Bytes ``text`` takes in a Lambda proxy result: JSON-escaped (ASCII, the worst case) inside the envelope."""
    if text.isascii() and '"' not in text and "\\" not in text:
        return len(text) + 2
    return len(json.dumps(text))


def event_size(event: Any) -> int:
    """What one event adds to a response on the wire (its JSON, escaped, plus a separator)."""
    return wire_size(dumps(event)) - 1


# --- times ----------------------------------------------------------------------------------------------------

# What a datetime holds: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z.


def readable_timestamp(value: Any, fallback: float = 0.0) -> float | int:
    """A stored time as seconds a datetime holds: a number is clamped into range (left as is when inside it),
    anything else (NaN, a bool, a string) gives ``fallback``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return fallback
    if isinstance(value, float) and not math.isfinite(value):
        return fallback
    if value < MIN_DATETIME_SECONDS:
        return MIN_DATETIME_SECONDS
    if value > MAX_DATETIME_SECONDS:
        return MAX_DATETIME_SECONDS
    return value


# --- stored events ----------------------------------------------------------------------------------------------


def unreadable_event(
    event_id: str, seq: int, timestamp: Any, reason: str, *, stub: dict[str, Any] | None = None
) -> dict[str, Any]:
    """What a stored event that does not read reads as, in every store: its id, seq and time, the author and
    invocation when the store kept a stub of them, and an ADK error (no content)."""
    stub = stub or {}
    return {
        "id": event_id,
        "invocation_id": str(stub.get("invocation_id") or ""),
        "author": str(stub.get("author") or "agent_memory"),
        "timestamp": readable_timestamp(timestamp),
        "error_code": "unreadable_event",
        "error_message": f"the stored event could not be read: {reason}",
        "seq": seq,
    }
