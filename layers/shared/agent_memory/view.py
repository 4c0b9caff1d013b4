"""A session as the API returns it: a plain class, so that reading a session imports no pydantic."""

from __future__ import annotations

from dataclasses import field
from typing import Any

from .runtime.lazyclass import dataclass  # processed on first instance (lazyclass.py)


@dataclass(slots=True)
class Session:
    """A session as the API returns it.

    Built from storage without validation and dumped by hand: state and events are stored JSON, which may hold
    values a validator cannot recurse through (older data, nested past any bound) and ``jsonio.RawJSON`` kept for
    verbatim output; a read must never fail on them. (``responses.Session`` documents its shape.)
    """

    id: str
    app_name: str
    user_id: str
    create_time: float
    last_update_time: float
    state: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    version: int = 0

    def dump(self, *, with_events: bool = True) -> dict[str, Any]:
        """The session's JSON form as plain dicts (the values themselves are not copied)."""
        data: dict[str, Any] = {
            "id": self.id,
            "app_name": self.app_name,
            "user_id": self.user_id,
            "state": self.state,
            "events": self.events,
            "create_time": self.create_time,
            "last_update_time": self.last_update_time,
            "version": self.version,
        }
        if not with_events:
            del data["events"]
        return data
