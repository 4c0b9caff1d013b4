"""Per-user quotas: how many sessions a user, events a session, memory records a user may hold.

The limits are deployment parameters (``MaxSessionsPerUser``, ``MaxEventsPerSession``, ``MaxMemoriesPerUser``);
0 disables one. The decisions are pure: the stores call them with counts read inside the write that would pass
the limit (the same transaction, or a condition on what was read), so that concurrent writers never overshoot.
"""

from __future__ import annotations

from ..errors import QuotaExceeded
from ..runtime.lazyclass import dataclass  # processed on first instance (lazyclass.py)

SESSIONS_PER_USER = "sessions_per_user"
EVENTS_PER_SESSION = "events_per_session"
MEMORIES_PER_USER = "memories_per_user"


@dataclass(frozen=True)
class Quotas:
    """The limits (0: none)."""

    sessions_per_user: int = 0
    events_per_session: int = 0
    memories_per_user: int = 0

    def check_sessions(self, held: int) -> None:
        """QuotaExceeded when a user holding ``held`` sessions may not create one more."""
        _check(SESSIONS_PER_USER, self.sessions_per_user, held, 1, "the user holds as many sessions as allowed")

    def check_events(self, held: int, adding: int) -> None:
        """QuotaExceeded when a session holding ``held`` events may not take ``adding`` more (the whole batch is
        refused: nothing of it is stored)."""
        _check(
            EVENTS_PER_SESSION,
            self.events_per_session,
            held,
            adding,
            f"the session holds {held} events; {adding} more would pass its limit",
        )

    def check_memories(self, held: int, adding: int) -> None:
        """QuotaExceeded when a user holding ``held`` memory records may not store ``adding`` more."""
        _check(
            MEMORIES_PER_USER,
            self.memories_per_user,
            held,
            adding,
            f"the user holds {held} memories; {adding} more would pass their limit",
        )


def _check(name: str, limit: int, held: int, adding: int, what: str) -> None:
    if limit > 0 and adding > 0 and held + adding > limit:
        raise QuotaExceeded(what, limit_name=name, limit=limit)


NO_QUOTAS = Quotas()
