"""Opaque page tokens: for listing sessions, and for reading a session's events.

A listing token names where the page ended (a user's listing: the last session's update time and id; an app's:
its user id and session id) and is bound to the listing it was issued for (the app and user, or the app): a
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
from typing import Any, TypeGuard

from ..errors import InvalidInput
from ..runtime.lazyclass import dataclass  # processed on first instance (lazyclass.py)
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


@dataclass(frozen=True, order=True)
class UserCursor:
    """Where a page of one user's sessions ends: the last session's update time, then its id (the list's order)."""

    update_time: float
    session_id: str

    @classmethod
    def of(cls, record: Any) -> UserCursor:
        """The cursor after a ``SessionRecord``."""
        return cls(float(record.update_time), str(record.session_id))


@dataclass(frozen=True, order=True)
class AppCursor:
    """Where a page of an app's sessions ends: the last session's user id, then its id (the list's order)."""

    user_id: str
    session_id: str

    @classmethod
    def of(cls, record: Any) -> AppCursor:
        """The cursor after a ``SessionRecord``."""
        return cls(str(record.user_id), str(record.session_id))


# The scope of an app-wide listing: "*" is no user id, so it never equals a user listing's scope.
_APP_WIDE = "*"


def encode_page_token(app_name: str, user_id: str | None, cursor: UserCursor | AppCursor) -> str:
    """A listing token: a user's listing (``user_id``, a UserCursor) or the app's (None, an AppCursor)."""
    data: dict[str, Any] = {"v": 1, "after": cursor.session_id}
    if isinstance(cursor, UserCursor):
        data["t"] = cursor.update_time
    else:
        data["u"] = cursor.user_id
    data["scope"] = _scope_tag(app_name, _APP_WIDE if user_id is None else user_id)
    return _encode(data)


def decode_page_token(app_name: str, user_id: str | None, token: str) -> UserCursor | AppCursor:
    """The cursor to resume after (a UserCursor for a user's listing, an AppCursor for the app's, ``user_id``
    None); InvalidInput naming ``next_token`` for anything not issued for this listing."""
    bad = InvalidInput("next_token is malformed or was not issued for this listing", field="next_token")
    data = _decode(token, bad)
    if data.get("scope") != _scope_tag(app_name, _APP_WIDE if user_id is None else user_id):
        raise bad
    try:
        after = validate_identifier(data.get("after"), "next_token")
        if user_id is None:
            return AppCursor(validate_identifier(data.get("u"), "next_token"), after)
    except InvalidInput as exc:
        raise bad from exc
    update_time = data.get("t")
    if not isinstance(update_time, int | float) or isinstance(update_time, bool) or not math.isfinite(update_time):
        raise bad
    return UserCursor(float(update_time), after)


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
    """The cursor a token holds; InvalidInput naming ``next_token`` for anything not issued for the session."""
    bad = InvalidInput("next_token is malformed or was not issued for the session", field="next_token")
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
