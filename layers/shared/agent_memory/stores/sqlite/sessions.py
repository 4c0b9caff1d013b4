"""Session rows and their state: create, read, list and delete a session, and the row-level steps the other
operations share (the row of a key, the whole record, state writes, the counters a write checks)."""

from __future__ import annotations

import copy
import sqlite3
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...errors import PreconditionFailed, SessionNotFound
from ...policy.quotas import Quotas
from ...policy.state import ScopedDelta
from ...wire.jsonio import dumps
from ..ports import AppCursor, SessionKey, SessionRecord, UserCursor
from .rows import IN_CHUNK, SESSION_COLUMNS, marks, read_memo, read_state, session_record

if TYPE_CHECKING:
    from .database import SqliteDatabase

_UPSERT = "ON CONFLICT DO UPDATE SET value = excluded.value"


# --- steps inside a transaction ----------------------------------------------------------------------------------


def session_row(conn: sqlite3.Connection, key: SessionKey) -> tuple[Any, ...] | None:
    """The session's row (``SESSION_COLUMNS``), None when there is none."""
    row: tuple[Any, ...] | None = conn.execute(
        f"SELECT {SESSION_COLUMNS} FROM sessions WHERE app_name = ? AND user_id = ? AND session_id = ?",
        (key.app_name, key.user_id, key.session_id),
    ).fetchone()
    return row


def session_id(conn: sqlite3.Connection, key: SessionKey) -> int | None:
    """The session row's integer id (what its events and state are keyed by), None when there is none."""
    row = conn.execute(
        "SELECT id FROM sessions WHERE app_name = ? AND user_id = ? AND session_id = ?",
        (key.app_name, key.user_id, key.session_id),
    ).fetchone()
    return None if row is None else int(row[0])


def full_record(conn: sqlite3.Connection, row: tuple[Any, ...]) -> SessionRecord:
    """The session of ``row`` with its state (session, user, app), memo and deletion count."""
    record = session_record(row)
    where = f"{record.app_name}/{record.user_id}/{record.session_id}"
    record.state = read_state(conn.execute("SELECT key, value FROM session_state WHERE session = ?", (row[0],)), where)
    record.user_state = _user_state(conn, record.app_name, record.user_id)
    record.app_state = _app_state(conn, record.app_name)
    memo = conn.execute("SELECT memo FROM session_memo WHERE session = ?", (row[0],)).fetchone()
    if memo is not None:
        record.memo = read_memo(memo[0], where)
    record.deletions = deletions_of(conn, row[0])
    return record


def _user_state(conn: sqlite3.Connection, app_name: str, user_id: str) -> dict[str, Any]:
    rows = conn.execute("SELECT key, value FROM user_state WHERE app_name = ? AND user_id = ?", (app_name, user_id))
    return read_state(rows, f"{app_name}/{user_id}")


def _app_state(conn: sqlite3.Connection, app_name: str) -> dict[str, Any]:
    return read_state(conn.execute("SELECT key, value FROM app_state WHERE app_name = ?", (app_name,)), app_name)


def put_state(conn: sqlite3.Connection, session: int, key: SessionKey, delta: ScopedDelta) -> None:
    """Write ``delta``'s keys: the session's on its row id, the user's and the app's on their names."""
    if delta.session:
        conn.executemany(
            f"INSERT INTO session_state (session, key, value) VALUES (?, ?, ?) {_UPSERT}",
            [(session, k, dumps(v)) for k, v in delta.session.items()],
        )
    if delta.user:
        conn.executemany(
            f"INSERT INTO user_state (app_name, user_id, key, value) VALUES (?, ?, ?, ?) {_UPSERT}",
            [(key.app_name, key.user_id, k, dumps(v)) for k, v in delta.user.items()],
        )
    if delta.app:
        conn.executemany(
            f"INSERT INTO app_state (app_name, key, value) VALUES (?, ?, ?) {_UPSERT}",
            [(key.app_name, k, dumps(v)) for k, v in delta.app.items()],
        )


def counters(conn: sqlite3.Connection, key: SessionKey, expected_version: int | None) -> tuple[int, int, int]:
    """The session's row id, version and last seq, inside a write transaction: SessionNotFound when it is absent,
    PreconditionFailed when ``expected_version`` (If-Match) is not its version."""
    row = conn.execute(
        "SELECT id, version, last_seq FROM sessions WHERE app_name = ? AND user_id = ? AND session_id = ?",
        (key.app_name, key.user_id, key.session_id),
    ).fetchone()
    if row is None:
        raise SessionNotFound(key.session_id)
    session, version, last_seq = row
    if expected_version is not None and expected_version != version:
        raise PreconditionFailed(
            f"If-Match version {expected_version} is not the current version {version}", field="If-Match"
        )
    return int(session), int(version), int(last_seq)


def deletions_of(conn: sqlite3.Connection, session: int) -> int:
    """How many event deletions the session committed."""
    row = conn.execute("SELECT count FROM deletions WHERE session = ?", (session,)).fetchone()
    return int(row[0]) if row else 0


def check_session_quota(conn: sqlite3.Connection, quotas: Quotas, key: SessionKey) -> None:
    """Refuse a new session past the user's quota. Counted inside the write transaction (one writer at a time):
    concurrent creates never overshoot."""
    if quotas.sessions_per_user:
        (held,) = conn.execute(
            "SELECT count(*) FROM sessions WHERE app_name = ? AND user_id = ?", (key.app_name, key.user_id)
        ).fetchone()
        quotas.check_sessions(held)


# --- operations ---------------------------------------------------------------------------------------------------


def create_session(
    db: SqliteDatabase, quotas: Quotas, record: SessionRecord, delta: ScopedDelta
) -> tuple[SessionRecord, bool]:
    """The session, created with ``delta`` unless it exists; whether it was created."""
    key = SessionKey(record.app_name, record.user_id, record.session_id)
    with db.write() as conn:
        row = session_row(conn, key)
        if row is not None:
            return full_record(conn, row), False
        check_session_quota(conn, quotas, key)
        cursor = conn.execute(
            "INSERT INTO sessions (app_name, user_id, session_id, incarnation, create_time, update_time) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (key.app_name, key.user_id, key.session_id, uuid.uuid4().hex, record.create_time, record.update_time),
        )
        assert cursor.lastrowid is not None
        put_state(conn, cursor.lastrowid, key, delta)
        row = session_row(conn, key)
        assert row is not None
        return full_record(conn, row), True


def get_session(db: SqliteDatabase, key: SessionKey) -> SessionRecord | None:
    with db.read() as conn:
        row = session_row(conn, key)
        return None if row is None else full_record(conn, row)


def get_user_state(db: SqliteDatabase, app_name: str, user_id: str) -> dict[str, Any]:
    with db.read() as conn:
        return _user_state(conn, app_name, user_id)


def get_app_state(db: SqliteDatabase, app_name: str) -> dict[str, Any]:
    with db.read() as conn:
        return _app_state(conn, app_name)


def list_sessions(
    db: SqliteDatabase, app_name: str, user_id: str, limit: int, after: UserCursor | None
) -> tuple[list[SessionRecord], UserCursor | None]:
    # No index on update_time (every append would maintain it): a user's sessions are few, sorted in SQLite.
    where = "app_name = ? AND user_id = ?"
    params: list[Any] = [app_name, user_id]
    if after is not None:
        where += " AND (update_time > ? OR (update_time = ? AND session_id > ?))"
        params += [after.update_time, after.update_time, after.session_id]
    sql = f"SELECT {SESSION_COLUMNS} FROM sessions WHERE {where} ORDER BY update_time, session_id LIMIT ?"
    return _listed(db, sql, [*params, max(0, limit) + 1], app_name, limit, UserCursor.of)


def list_app_sessions(
    db: SqliteDatabase, app_name: str, limit: int, after: AppCursor | None
) -> tuple[list[SessionRecord], AppCursor | None]:
    # The order of the (app_name, user_id, session_id) unique index: read along it, nothing sorted.
    where = "app_name = ?"
    params: list[Any] = [app_name]
    if after is not None:
        where += " AND (user_id > ? OR (user_id = ? AND session_id > ?))"
        params += [after.user_id, after.user_id, after.session_id]
    sql = f"SELECT {SESSION_COLUMNS} FROM sessions WHERE {where} ORDER BY user_id, session_id LIMIT ?"
    return _listed(db, sql, [*params, max(0, limit) + 1], app_name, limit, AppCursor.of)


def _listed[C: (UserCursor, AppCursor)](
    db: SqliteDatabase,
    sql: str,
    params: list[Any],
    app_name: str,
    limit: int,
    cursor: Callable[[SessionRecord], C],
) -> tuple[list[SessionRecord], C | None]:
    """The page ``sql`` selects (``limit`` + 1 rows: one more tells whether more remain), with every state."""
    with db.read() as conn:
        rows = conn.execute(sql, params).fetchall()
        page = rows[: max(0, limit)]
        states: dict[int, list[tuple[str, str]]] = {}
        ids = [row[0] for row in page]
        for start in range(0, len(ids), IN_CHUNK):
            chunk = ids[start : start + IN_CHUNK]
            for session, k, v in conn.execute(
                f"SELECT session, key, value FROM session_state WHERE session IN ({marks(chunk)})", chunk
            ):
                states.setdefault(session, []).append((k, v))
        users = {user_id: _user_state(conn, app_name, user_id) for user_id in dict.fromkeys(row[2] for row in page)}
        app_state = _app_state(conn, app_name)
    records = []
    for row in page:
        record = session_record(row)
        record.state = read_state(states.get(row[0], []), f"{app_name}/{record.user_id}/{record.session_id}")
        record.user_state = copy.deepcopy(users[record.user_id])
        record.app_state = copy.deepcopy(app_state)
        records.append(record)
    return records, (cursor(records[-1]) if len(rows) > len(page) and records else None)


def delete_session(db: SqliteDatabase, key: SessionKey) -> None:
    """Delete the session row; its state, events and pending changes go with it (one transaction); then the
    write-ahead log is emptied, so that their text leaves it too (a retry, the session gone, empties it again)."""
    with db.write() as conn:
        conn.execute(
            "DELETE FROM sessions WHERE app_name = ? AND user_id = ? AND session_id = ?",
            (key.app_name, key.user_id, key.session_id),
        )
    db.checkpoint()
