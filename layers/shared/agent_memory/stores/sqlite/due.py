"""The compaction schedule's due index: ``sessions.due_since``, set by an append or a deletion, cleared by the
schedule; a partial index holds only the due sessions."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ports import SessionKey

if TYPE_CHECKING:
    from .database import SqliteDatabase


def list_due(db: SqliteDatabase, limit: int) -> list[SessionKey]:
    """Up to ``limit`` due sessions, longest due first."""
    with db.read() as conn:
        rows = conn.execute(
            "SELECT app_name, user_id, session_id FROM sessions WHERE due_since IS NOT NULL "
            "ORDER BY due_since, id LIMIT ?",
            (max(0, limit),),
        ).fetchall()
    return [SessionKey(*row) for row in rows]


def clear_due(db: SqliteDatabase, key: SessionKey, version: int) -> bool:
    """Take the session off the index, unless it moved past ``version`` meanwhile (then False: it stays due)."""
    with db.write() as conn:
        row = conn.execute(
            "SELECT id, version FROM sessions WHERE app_name = ? AND user_id = ? AND session_id = ?",
            (key.app_name, key.user_id, key.session_id),
        ).fetchone()
        if row is not None and row[1] != version:
            return False
        if row is not None:
            conn.execute("UPDATE sessions SET due_since = NULL WHERE id = ?", (row[0],))
        return True
