"""Opaque page tokens for listing sessions.

A token names the last session id of the page and is bound to the (app, user) it was issued for: a malformed
token, or one issued for another listing, is rejected with 400. The key that starts the next page is always
built from the request's own app and user, so even a hand-made token can never reach another user's sessions.
"""

from __future__ import annotations

import base64
import hashlib
import json

from ..errors import InvalidInput
from .identifiers import validate_identifier


def _scope_tag(app_name: str, user_id: str) -> str:
    return hashlib.sha256(f"{app_name}\x00{user_id}".encode()).hexdigest()[:16]


def encode_page_token(app_name: str, user_id: str, last_session_id: str) -> str:
    raw = json.dumps({"v": 1, "after": last_session_id, "scope": _scope_tag(app_name, user_id)}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_page_token(app_name: str, user_id: str, token: str) -> str:
    """The session id to resume after; InvalidInput naming ``next_token`` for anything not issued for this scope."""
    bad = InvalidInput("next_token is malformed or was not issued for this listing", field="next_token")
    if not token or len(token) > 1024:
        raise bad
    try:
        raw = base64.b64decode(token + "=" * (-len(token) % 4), altchars=b"-_", validate=True)
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise bad from exc
    if not isinstance(data, dict) or type(data.get("v")) is not int or data["v"] != 1:
        raise bad
    if data.get("scope") != _scope_tag(app_name, user_id):
        raise bad
    try:
        return validate_identifier(data.get("after"), "next_token")
    except InvalidInput as exc:
        raise bad from exc
