"""``SqliteClaimStore``: the forgotten events of long-term memory in the ``claims`` table (see
``stores/dynamo_claims.py`` for the semantics). Every claim this store writes is committed: a row is a mark."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..ports import TEXT_PREFIX
from .rows import IN_CHUNK, marks

if TYPE_CHECKING:
    from .database import SqliteDatabase


def _prefix_range(prefix: str) -> tuple[str, str]:
    """Bounds of the keys starting with ``prefix`` ("T#" -> ["T#", "T$")), for a range on the primary key."""
    return prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)


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

    def release(self, app_name: str, user_id: str, keys: list[str]) -> None:
        with self._db.write() as conn:
            conn.executemany(
                "DELETE FROM claims WHERE app_name = ? AND user_id = ? AND key = ?",
                [(app_name, user_id, k) for k in dict.fromkeys(keys)],
            )

    def commit_events(self, app_name: str, user_id: str) -> None:
        """Nothing to mark: this store writes no uncommitted claim (``commit`` is its only writer)."""

    def release_texts(self, app_name: str, user_id: str) -> None:
        low, high = _prefix_range(TEXT_PREFIX)
        with self._db.write() as conn:
            conn.execute(
                "DELETE FROM claims WHERE app_name = ? AND user_id = ? AND key >= ? AND key < ?",
                (app_name, user_id, low, high),
            )
