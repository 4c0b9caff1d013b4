"""``If-Match`` by RFC 9110: the session's ETag is the strong tag ``"<version>"``, compared strongly.

``*`` matches any existing session; a list matches if any member matches; a weak tag (``W/"5"``) never
matches under strong comparison; ``"05"`` is not ``"5"`` (tags compare character by character). A header that
is not ``*`` nor a list of entity-tags is malformed: it can match nothing, so it answers 412 like any failed
precondition (RFC 9110 §13.1.1 lets a server ignore or refuse it; refusing is the safe side for a write).
"""

from __future__ import annotations

import re

from ..errors import InvalidInput, PreconditionFailed
from ..runtime.lazyclass import dataclass  # processed on first instance (lazyclass.py)

# entity-tag = [ W/ ] DQUOTE *etagc DQUOTE, etagc = %x21 / %x23-7E / obs-text (RFC 9110 §8.8.3)
_ENTITY_TAG = re.compile(r'[ \t]*(W/)?"([\x21\x23-\x7e\x80-\xff]*)"[ \t]*')
_SEPARATORS = re.compile(r"[ \t]*(?:,[ \t]*)+")  # list elements may be empty (RFC 9110 §5.6.1.2)
_VERSION = re.compile(r"0|[1-9][0-9]{0,18}")


@dataclass(frozen=True)
class IfMatch:
    """A parsed ``If-Match``: ``any_version`` for ``*``, else the versions its strong tags name."""

    any_version: bool = False
    versions: frozenset[int] = frozenset()

    def matches(self, version: int) -> bool:
        """Whether a session at ``version`` satisfies the condition (the session exists)."""
        return self.any_version or version in self.versions


def parse_if_match(header: str | None) -> IfMatch | None:
    """The condition an ``If-Match`` header states; None when absent. Malformed: PreconditionFailed (412)."""
    if header is None:
        return None
    malformed = PreconditionFailed(
        'If-Match must be * or a list of entity-tags such as "5"; nothing matches it', field="If-Match"
    )
    value = header.strip(" \t")
    if value == "*":
        return IfMatch(any_version=True)
    versions: set[int] = set()
    position = 0
    separator = _SEPARATORS.match(value, position)
    position = separator.end() if separator else position
    while True:
        tag = _ENTITY_TAG.match(value, position)
        if tag is None:
            raise malformed
        weak, opaque = tag.groups()
        # Strong comparison: a weak tag never matches; only the canonical decimal of a version equals an ETag.
        if weak is None and _VERSION.fullmatch(opaque):
            versions.add(int(opaque))
        position = tag.end()
        if position == len(value):
            return IfMatch(versions=frozenset(versions))
        separator = _SEPARATORS.match(value, position)
        if separator is None:
            raise malformed
        position = separator.end()
        if position == len(value):
            return IfMatch(versions=frozenset(versions))


def parse_if_none_match(header: str | None) -> bool:
    """Whether a create is strict: ``If-None-Match: *`` (create only if no session has the id). Absent: False.

    Only ``*`` has a meaning on a create (the new session has no entity-tag to compare with): any other value is
    the client's error, 400 naming the header."""
    if header is None:
        return False
    if header.strip(" \t") != "*":
        raise InvalidInput("If-None-Match on a create must be * (create only if the id is free)", field="If-None-Match")
    return True
