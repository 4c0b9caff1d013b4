"""State scopes, as in ADK: ``app:`` shared by the app, ``user:`` by the user's sessions, ``temp:`` never stored."""

from __future__ import annotations

from dataclasses import field
from typing import Any

from ..runtime.lazyclass import dataclass  # processed on first instance (lazyclass.py)

APP_PREFIX = "app:"
USER_PREFIX = "user:"
TEMP_PREFIX = "temp:"


@dataclass(frozen=True)
class ScopedDelta:
    """A state delta split by scope; keys of ``app`` and ``user`` have their prefix removed."""

    app: dict[str, Any] = field(default_factory=dict)
    user: dict[str, Any] = field(default_factory=dict)
    session: dict[str, Any] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.app or self.user or self.session)


def strip_temp(delta: dict[str, Any]) -> dict[str, Any]:
    """The delta without ``temp:`` keys: they live for one invocation and are never stored."""
    return {k: v for k, v in delta.items() if not k.startswith(TEMP_PREFIX)}


def split_delta(delta: dict[str, Any]) -> ScopedDelta:
    """Split a state delta into app, user and session parts (``temp:`` keys dropped)."""
    app: dict[str, Any] = {}
    user: dict[str, Any] = {}
    session: dict[str, Any] = {}
    for key, value in delta.items():
        if key.startswith(TEMP_PREFIX):
            continue
        if key.startswith(APP_PREFIX):
            app[key[len(APP_PREFIX) :]] = value
        elif key.startswith(USER_PREFIX):
            user[key[len(USER_PREFIX) :]] = value
        else:
            session[key] = value
    return ScopedDelta(app=app, user=user, session=session)


def merge_deltas(deltas: list[ScopedDelta]) -> ScopedDelta:
    """Later deltas win, key by key: the net effect of applying them in order."""
    merged = ScopedDelta()
    for delta in deltas:
        merged.app.update(delta.app)
        merged.user.update(delta.user)
        merged.session.update(delta.session)
    return merged


def merged_state(session: dict[str, Any], user: dict[str, Any], app: dict[str, Any]) -> dict[str, Any]:
    """The state a client sees: session keys, then ``user:`` and ``app:`` keys with their prefixes."""
    state = dict(session)
    state.update({USER_PREFIX + k: v for k, v in user.items()})
    state.update({APP_PREFIX + k: v for k, v in app.items()})
    return state
