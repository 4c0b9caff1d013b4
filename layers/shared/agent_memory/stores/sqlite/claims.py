"""``SqliteClaimStore``: the forgotten events of long-term memory in the ``claims`` table (see
``stores/dynamo/claims.py`` for the semantics). Every claim this store writes is committed: a row is a mark."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from .rows import IN_CHUNK, marks

if TYPE_CHECKING:
    from .database import SqliteDatabase


class SqliteClaimStore:
    """``ClaimStore`` on a ``SqliteDatabase``: one row per marked key."""

    def __init__(self, db: SqliteDatabase, clock: Callable[[], float] = time.time) -> None:
        self._db = db
        self._clock = clock

    def forgotten(self, app_name: str, user_id: str, keys: list[str]) -> set[str]:
        unique = list(dict.fromkeys(keys))
        marked: set[str] = set()
        with self._db.read() as conn:
            for start in range(0, len(unique), IN_CHUNK):
                chunk = unique[start : start + IN_CHUNK]
                marked.update(
                    key
                    for (key,) in conn.execute(
                        f"SELECT key FROM claims WHERE app_name = ? AND user_id = ? AND key IN ({marks(chunk)})",
                        [app_name, user_id, *chunk],
                    )
                )
        return marked

    def commit(self, app_name: str, user_id: str, keys: list[str]) -> None:
        with self._db.write() as conn:
            now = self._clock()
            conn.executemany(
                "INSERT INTO claims (app_name, user_id, key, committed, claimed_at) VALUES (?, ?, ?, 1, ?) "
                "ON CONFLICT DO UPDATE SET committed = 1, claimed_at = excluded.claimed_at",
                [(app_name, user_id, k, now) for k in dict.fromkeys(keys)],
            )
