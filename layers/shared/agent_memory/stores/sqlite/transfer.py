"""Export and import: the session's memo, and a whole session written at once."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from ...errors import AlreadyExists, SessionNotFound
from ...policy.quotas import Quotas
from ...policy.state import ScopedDelta
from ...wire.jsonio import dumps
from ..ports import SessionKey, SessionRecord
from .sessions import check_session_quota, full_record, put_state, session_row

if TYPE_CHECKING:
    from .database import SqliteDatabase


def put_memo(db: SqliteDatabase, key: SessionKey, memo: dict[str, Any]) -> None:
    with db.write() as conn:
        row = session_row(conn, key)
        if row is None:
            raise SessionNotFound(key.session_id)
        conn.execute(
            "INSERT INTO session_memo (session, memo) VALUES (?, ?) ON CONFLICT DO UPDATE SET memo = excluded.memo",
            (row[0], dumps(memo)),
        )


def import_session(
    db: SqliteDatabase, quotas: Quotas, record: SessionRecord, events: list[dict[str, Any]], *, replace: bool
) -> SessionRecord:
    """One write transaction whatever the size: the replaced session (its rows cascade) and the new one's rows
    commit together or not at all. No outbox rows: auto-save never saves an import."""
    key = SessionKey(record.app_name, record.user_id, record.session_id)
    with db.write() as conn:
        row = session_row(conn, key)
        if row is not None and not replace:
            raise AlreadyExists(f"session {key.session_id!r} exists already", field="session_id")
        if row is None:
            check_session_quota(conn, quotas, key)
        quotas.check_events(0, record.last_seq)
        if row is not None:
            conn.execute("DELETE FROM sessions WHERE id = ?", (row[0],))
        cursor = conn.execute(
            "INSERT INTO sessions (app_name, user_id, session_id, incarnation, create_time, update_time, version, "
            "last_seq, summary_event_id, summary_end_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                key.app_name,
                key.user_id,
                key.session_id,
                uuid.uuid4().hex,
                record.create_time,
                record.update_time,
                record.version,
                record.last_seq,
                record.summary_event_id,
                record.summary_end_seq,
            ),
        )
        session = cursor.lastrowid
        assert session is not None
        put_state(conn, session, key, ScopedDelta(record.app_state, record.user_state, record.state))
        if record.memo:
            conn.execute("INSERT INTO session_memo (session, memo) VALUES (?, ?)", (session, dumps(record.memo)))
        conn.executemany(
            "INSERT INTO events (session, seq, ts, event_id, body) VALUES (?, ?, ?, ?, ?)",
            (
                (
                    session,
                    e["seq"],
                    float(e["timestamp"]),
                    e["id"],
                    dumps({k: v for k, v in e.items() if k != "seq"}),
                )
                for e in events
            ),
        )
        row = session_row(conn, key)
        assert row is not None
        return full_record(conn, row)
