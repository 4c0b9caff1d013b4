"""Deleting events: the rows go in one transaction with their pending changes, their ids kept until
``purge_deleted`` has settled what was derived from them (memories, claims)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..ports import DeleteResult, Deletion, DeletionRaced, SeqRange, SessionKey
from .rows import IN_CHUNK, bounded
from .sessions import counters, deletions_of

if TYPE_CHECKING:
    from .database import SqliteDatabase


def delete_events(
    db: SqliteDatabase, clock: Callable[[], float], key: SessionKey, deletion: Deletion, expected_version: int | None
) -> DeleteResult:
    """One transaction: the rows go (their pending changes with them: auto-save never sees them), their ids are
    kept in ``deleted_events`` for ``purge_deleted``, the counters and the watermark move."""
    with db.write() as conn:
        session, version, last_seq = counters(conn, key, expected_version)
        count = deletions_of(conn, session)
        if (last_seq, count) != (deletion.based_on_seq, deletion.based_on_deletions):
            raise DeletionRaced()
        deleted = 0
        for lo, hi in deletion.ranges:
            conn.execute(
                "INSERT OR IGNORE INTO deleted_events (session, event_id) "
                "SELECT session, event_id FROM events WHERE session = ? AND seq BETWEEN ? AND ?",
                (session, bounded(lo), bounded(hi)),
            )
            deleted += conn.execute(
                "DELETE FROM events WHERE session = ? AND seq BETWEEN ? AND ?",
                (session, bounded(lo), bounded(hi)),
            ).rowcount
        conn.execute(
            "INSERT INTO deletions (session, count) VALUES (?, 1) ON CONFLICT DO UPDATE SET count = count + 1",
            (session,),
        )
        conn.execute(
            "UPDATE sessions SET version = version + 1, summary_event_id = ?, summary_end_seq = ?, "
            "due_since = coalesce(due_since, ?) WHERE id = ?",
            (deletion.summary_event_id, deletion.summary_end_seq, clock(), session),
        )
        return DeleteResult(version=version + 1, deleted=deleted)


def purge_deleted(
    db: SqliteDatabase,
    key: SessionKey,
    before: Callable[[list[str]], None],
    hidden: tuple[SeqRange, ...] | None = None,
) -> int:
    """The rows went with the deletion's transaction: settle what was derived from them, then forget the ids
    (kept in ``deleted_events``, not in hidden ranges: ``hidden`` says nothing here)."""
    with db.read() as conn:
        rows = conn.execute(
            "SELECT d.session, d.event_id FROM deleted_events d JOIN sessions s ON s.id = d.session "
            "WHERE s.app_name = ? AND s.user_id = ? AND s.session_id = ?",
            (key.app_name, key.user_id, key.session_id),
        ).fetchall()
    if not rows:
        return 0
    for start in range(0, len(rows), IN_CHUNK):
        before([event_id for _, event_id in rows[start : start + IN_CHUNK]])
    # The deleted rows' text out of the log too (secure_delete zeroed their pages), before the ids go: a
    # checkpoint a reader kept from finishing leaves them, and the retry (DeletionIncomplete) comes back here.
    db.checkpoint()
    for start in range(0, len(rows), IN_CHUNK):
        with db.write() as conn:
            conn.executemany(
                "DELETE FROM deleted_events WHERE session = ? AND event_id = ?", rows[start : start + IN_CHUNK]
            )
    return len(rows)
