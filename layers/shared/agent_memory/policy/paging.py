"""Opaque page tokens: for listing sessions, and for reading a session's events.

A listing token names the last session id of the page and is bound to the (app, user) it was issued for: a
malformed token, or one issued for another listing, is rejected with 400. The key that starts the next page is
always built from the request's own app and user, so even a hand-made token can never reach another user's
sessions.

An events token names the last seq of the page and the window being paged (its last seq, and the filters of the
first request), bound to the session *and its incarnation*: a token of a deleted session is
rejected by the session re-created under the same id. Events are always read from the session of the request's
path, so a hand-made token can only move within the caller's own session.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any, TypeGuard

from ..errors import InvalidInput
from .identifiers import validate_identifier


def _scope_tag(app_name: str, user_id: str) -> str:
    return hashlib.sha256(f"{app_name}\x00{user_id}".encode()).hexdigest()[:16]


def _encode(data: dict[str, Any]) -> str:
    raw = json.dumps(data, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode(token: str, bad: InvalidInput) -> dict[str, Any]:
    """A token's JSON object (version 1); ``bad`` for anything else."""
    if not token or len(token) > 1024:
        raise bad
    try:
        raw = base64.b64decode(token + "=" * (-len(token) % 4), altchars=b"-_", validate=True)
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise bad from exc
    if not isinstance(data, dict) or type(data.get("v")) is not int or data["v"] != 1:
        raise bad
    return data


def encode_page_token(app_name: str, user_id: str, last_session_id: str) -> str:
    return _encode({"v": 1, "after": last_session_id, "scope": _scope_tag(app_name, user_id)})


def decode_page_token(app_name: str, user_id: str, token: str) -> str:
    """The session id to resume after; InvalidInput naming ``next_token`` for anything not issued for this scope."""
    bad = InvalidInput("next_token is malformed or was not issued for this listing", field="next_token")
    data = _decode(token, bad)
    if data.get("scope") != _scope_tag(app_name, user_id):
        raise bad
    try:
        return validate_identifier(data.get("after"), "next_token")
    except InvalidInput as exc:
        raise bad from exc


@dataclass(frozen=True)
class EventCursor:
    """Where the next page of a session's events starts, and the window it pages through."""

    after_seq: int  # the last seq already returned
    until_seq: int  # the window's last seq (the session's last seq when the first page was read)
    after_timestamp: float | None  # the first request's filters, kept for the pages after it
    num_recent: int | None


def _event_scope_tag(app_name: str, user_id: str, session_id: str, incarnation: str) -> str:
    raw = f"{app_name}\x00{user_id}\x00{session_id}\x00{incarnation}"
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def encode_event_token(app_name: str, user_id: str, session_id: str, incarnation: str, cursor: EventCursor) -> str:
    """A token for the page after ``cursor.after_seq``; ``incarnation`` names this life of the session id (anything
    that changes when the session is deleted and created again, e.g. its create time)."""
    data = {
        "v": 1,
        "k": "events",
        "after": cursor.after_seq,
        "until": cursor.until_seq,
        "ts": cursor.after_timestamp,
        "n": cursor.num_recent,
        "scope": _event_scope_tag(app_name, user_id, session_id, incarnation),
    }
    return _encode(data)


def _whole(value: Any) -> TypeGuard[int]:
    return type(value) is int and 0 <= value < 2**62


def decode_event_token(app_name: str, user_id: str, session_id: str, incarnation: str, token: str) -> EventCursor:
    """The cursor a token holds; InvalidInput naming ``next_token`` for anything not issued for this session."""
    bad = InvalidInput("next_token is malformed or was not issued for this session", field="next_token")
    data = _decode(token, bad)
    if data.get("k") != "events":
        raise bad
    if data.get("scope") != _event_scope_tag(app_name, user_id, session_id, incarnation):
        raise bad
    after, until, ts, n = data.get("after"), data.get("until"), data.get("ts"), data.get("n")
    if not (_whole(after) and _whole(until)) or after > until:
        raise bad
    if ts is not None and (type(ts) not in (int, float) or not math.isfinite(ts)):
        raise bad
    if n is not None and not _whole(n):
        raise bad
    return EventCursor(
        after_seq=int(after), until_seq=int(until), after_timestamp=None if ts is None else float(ts), num_recent=n
    )
