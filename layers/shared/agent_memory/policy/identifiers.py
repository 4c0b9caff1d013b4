"""Identifier rules for ``app_name``, ``user_id``, ``session_id`` and event ids."""

from __future__ import annotations

import re

from ..errors import AgentMemoryError, InvalidInput

IDENTIFIER_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$"
_IDENTIFIER = re.compile(IDENTIFIER_PATTERN)


def validate_identifier(value: object, field: str, error: type[AgentMemoryError] = InvalidInput) -> str:
    """Return ``value`` if it is 1–128 of ``[A-Za-z0-9._:@-]`` starting with a letter or digit, else raise
    ``error`` (400 for path parameters; the service passes UnprocessableInput, 422, for body fields)."""
    if not isinstance(value, str) or not _IDENTIFIER.fullmatch(value):
        raise error(
            f"{field} must be 1-128 characters of [A-Za-z0-9._:@-] starting with a letter or digit",
            field=field,
        )
    return value


# Literal path segments beside ``…/sessions/{session_id}`` (``POST …/sessions/import``): never a session's id, so
# that a route can never be taken for a session's.
RESERVED_SESSION_IDS = frozenset({"import"})


def validate_new_session_id(value: object, field: str, error: type[AgentMemoryError] = InvalidInput) -> str:
    """``validate_identifier``, and not a reserved name (``RESERVED_SESSION_IDS``): the id of a session to create."""
    session_id = validate_identifier(value, field, error)
    if session_id in RESERVED_SESSION_IDS:
        raise error(f"{field} {session_id!r} is reserved (a route's name); choose another id", field=field)
    return session_id
