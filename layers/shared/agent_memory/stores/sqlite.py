"""The embedded adapters: sessions, events, state, the compaction schedule's due index, the change feed and memory
claims in one SQLite file (stdlib ``sqlite3``), for ``make run`` and single-machine deployments.

Tables (schema version in ``PRAGMA user_version``):

- ``sessions``       one row per session: counters, times, the incarnation, the compaction watermark and
  ``due_since`` (set by an append, cleared by the schedule: a partial index is the due index)
- ``session_state``  one row per session state key (JSON text), deleted with its session
- ``session_memo``   the session's memo (JSON text), when one was written; deleted with its session (a table added
  to schema version 1 by ``CREATE TABLE IF NOT EXISTS``: older files gain it when opened, older code ignores it)
- ``user_state`` / ``app_state``  one row per user / app state key (JSON text)
- ``events``         one row per event: ``seq``, ``ts``, the id and the body as JSON text, of any size, inline (no
  blob store: SQLite keeps large values in overflow pages); unique by (session, id) and by (session, seq)
- ``outbox``         the change feed: one row per stored event, written in the transaction that stores the event
- ``claims``         forgotten events of long-term memory (``ClaimStore``: committed rows; older versions' claims)
- ``deletions``      per session, how many event deletions it committed (``SessionRecord.deletions``)
- ``deleted_events`` ids of events a deletion removed whose derived data (memories, claims) ``purge_deleted`` has
  not settled yet; the rows themselves go in the deletion's transaction (their outbox rows with them)

A session row's integer id keys its events and state, so deleting the row deletes everything of that session (foreign
keys, ``ON DELETE CASCADE``) in one transaction: a session re-created under the same id is a new row and a new
incarnation, and never sees the deleted one's events. No tombstone is needed, as nothing is left half-deleted.

Every write is one ``BEGIN IMMEDIATE`` transaction: nothing partial is ever visible. Writers of this process queue on
a lock; another process holding the file waits ``busy_timeout``. A database still busy then, or failing with an I/O
error or a full disk, answers ServiceUnavailable (503) with the transaction rolled back. Reads run in a read
transaction (one snapshot) on a connection of their own: in WAL mode readers never wait for the writer.

Stored JSON is written with ``jsonio.dumps`` and read with ``jsonio.load_stored``, as the DynamoDB store does: floats
and integers keep their types, timestamps their full precision, values nested past ``jsonio.MAX_DEPTH`` come back as
text; an event whose body does not read comes back as ``jsonio.unreadable_event``'s marker, a state value that does
not read is left out with a warning.

The change feed: ``read_changes`` hands out the outbox as DynamoDB stream records (``Keys`` as the table's stream
has them, so the template's filter admits them; ``NewImage`` holding the session's ids and the event), ``changes``
turns such records into ``Change``s, and ``ack_changes`` deletes the delivered rows. A session deleted before its
changes were delivered takes them with it (auto-save never saves what was deleted).
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import queue
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBStreamEvent

from ..errors import (
    AlreadyExists,
    EventIdConflict,
    PayloadTooLarge,
    PreconditionFailed,
    ServiceUnavailable,
    SessionNotFound,
)
from ..policy.quotas import NO_QUOTAS, Quotas
from ..policy.state import ScopedDelta
from ..runtime.aws import WRITE_BUDGET_S
from ..wire.jsonio import Unreadable, dumps, event_size, load_stored, readable_timestamp, unreadable_event
from .ports import (
    EVENT_PREFIX,
    TEXT_PREFIX,
    AppCursor,
    AppendResult,
    Change,
    DeleteResult,
    Deletion,
    DeletionRaced,
    EventQuery,
    NewEvent,
    SeqRange,
    SessionKey,
    SessionRecord,
    Tail,
    TailNeed,
    UserCursor,
    same_event,
    tail_query,
)

logger = logging.getLogger(__name__)

_C = TypeVar("_C", UserCursor, AppCursor)

SCHEMA_VERSION = 1
SOURCE = "agent-memory:sqlite"
# Bound for seq arguments (SQLite integers are 64-bit; a client's after_seq may be anything).
_MAX_SEQ = 2**62
# Host parameters per statement for IN lists (SQLite allows 32,766; stay well inside).
_IN_CHUNK = 500
# Idle connections kept for reuse; more are opened under load and closed when given back.
_POOL_SIZE = 8

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id INTEGER PRIMARY KEY,
    app_name TEXT NOT NULL,
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    incarnation TEXT NOT NULL,
    create_time REAL NOT NULL,
    update_time REAL NOT NULL,
    version INTEGER NOT NULL DEFAULT 0,
    last_seq INTEGER NOT NULL DEFAULT 0,
    summary_event_id TEXT,
    summary_end_seq INTEGER NOT NULL DEFAULT 0,
    due_since REAL,
    UNIQUE (app_name, user_id, session_id)
);
CREATE INDEX IF NOT EXISTS sessions_due ON sessions (due_since) WHERE due_since IS NOT NULL;
CREATE TABLE IF NOT EXISTS session_state (
    session INTEGER NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (session, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS user_state (
    app_name TEXT NOT NULL,
    user_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (app_name, user_id, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS app_state (
    app_name TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (app_name, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY,
    session INTEGER NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    ts REAL NOT NULL,
    event_id TEXT NOT NULL,
    body TEXT NOT NULL,
    UNIQUE (session, seq),
    UNIQUE (session, event_id)
);
CREATE INDEX IF NOT EXISTS events_by_ts ON events (session, ts);
CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    event INTEGER NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS outbox_event ON outbox (event);
CREATE TABLE IF NOT EXISTS session_memo (
    session INTEGER PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    memo TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS deletions (
    session INTEGER PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    count INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS deleted_events (
    session INTEGER NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    event_id TEXT NOT NULL,
    PRIMARY KEY (session, event_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS claims (
    app_name TEXT NOT NULL,
    user_id TEXT NOT NULL,
    key TEXT NOT NULL,
    committed INTEGER NOT NULL,
    claimed_at REAL NOT NULL,
    PRIMARY KEY (app_name, user_id, key)
) WITHOUT ROWID;
"""
# (AUTOINCREMENT on the outbox: its ids are the feed's sequence numbers, never reused once acknowledged rows are
# deleted, so a reader resuming after an id misses nothing.)

# Primary result codes (the low byte of an extended code) that mean the storage, not the request, failed.
_UNAVAILABLE = {
    5: "the database is busy",  # SQLITE_BUSY: another writer held it past busy_timeout
    6: "the database is locked",  # SQLITE_LOCKED
    10: "a disk I/O error",  # SQLITE_IOERR
    13: "the disk is full",  # SQLITE_FULL
    15: "a locking protocol error",  # SQLITE_PROTOCOL
}
_TOOBIG = 18


def storage_error(exc: sqlite3.Error) -> Exception | None:
    """The domain error for a SQLite failure of the storage (busy, locked, I/O, full: ServiceUnavailable; a value
    past SQLite's limits: PayloadTooLarge), None for anything else (a bug: left to answer 500)."""
    code = getattr(exc, "sqlite_errorcode", None)
    text = str(exc).lower()
    if isinstance(exc, sqlite3.DataError) or (code is not None and code & 0xFF == _TOOBIG) or "too big" in text:
        return PayloadTooLarge("a value is larger than the local database stores")
    what = _UNAVAILABLE.get(code & 0xFF) if code is not None else None
    if what is None and ("locked" in text or "busy" in text or "disk i/o" in text):
        what = text
    if what is None:
        return None
    return ServiceUnavailable(f"local storage failed ({what}); nothing partial was kept, retry", retry_after=1)


class SqliteDatabase:
    """One SQLite database file (or ``":memory:"``) shared by the embedded stores, safe to use from many threads.

    WAL journal, ``busy_timeout`` (seconds), foreign keys on, ``synchronous`` NORMAL by default (a committed write
    survives a crash of the process; a power loss may lose the last ones, never corrupting the file). Connections
    come from a small pool rather than one per thread: the local server starts a thread per request. A
    ``":memory:"`` database lives in one connection that every caller takes in turn.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, busy_timeout_s: float = WRITE_BUDGET_S, synchronous: str = "NORMAL"
    ) -> None:
        self.path = os.fspath(path)
        self._memory = self.path == ":memory:" or self.path.startswith("file::memory:")
        self._busy_timeout_s = busy_timeout_s
        if synchronous.upper() not in {"OFF", "NORMAL", "FULL", "EXTRA"}:
            raise ValueError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}")
        self._synchronous = synchronous.upper()
        self._write_lock = threading.Lock()
        self._idle: queue.LifoQueue[sqlite3.Connection] = queue.LifoQueue()
        self._closed = False
        first = self._open()
        try:
            if not self._memory:
                first.execute("PRAGMA journal_mode = WAL")
            self._migrate(first)
        except BaseException:
            first.close()
            raise
        self._idle.put(first)

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path,
            timeout=self._busy_timeout_s,
            isolation_level=None,  # autocommit: transactions are begun and ended explicitly
            check_same_thread=False,  # a pooled connection serves one thread at a time, any thread
            uri=self.path.startswith("file:"),
        )
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute(f"PRAGMA synchronous = {self._synchronous}")
        return conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            (version,) = conn.execute("PRAGMA user_version").fetchone()
            if version > SCHEMA_VERSION:
                raise RuntimeError(
                    f"{self.path} holds schema version {version}; this code knows up to {SCHEMA_VERSION}"
                )
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _take(self, deadline: float) -> sqlite3.Connection:
        if self._closed:
            raise RuntimeError("the database is closed")
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            if not self._memory:
                return self._open()
        try:
            return self._idle.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise ServiceUnavailable("the local database is busy; retry", retry_after=1) from None

    def _give(self, conn: sqlite3.Connection, *, broken: bool) -> None:
        # A ":memory:" database lives in its one connection: kept whatever failed on it.
        keep = not self._closed and (self._memory or (not broken and self._idle.qsize() < _POOL_SIZE))
        if keep:
            self._idle.put(conn)
            return
        with contextlib.suppress(sqlite3.Error):
            conn.close()

    @contextlib.contextmanager
    def _transaction(self, write: bool) -> Iterator[sqlite3.Connection]:
        deadline = time.monotonic() + self._busy_timeout_s
        # Writers of this process queue here (a fair, fast wait) rather than in SQLite's polling busy handler.
        if write and not self._write_lock.acquire(timeout=self._busy_timeout_s):
            raise ServiceUnavailable("the local database is busy with other writes; retry", retry_after=1)
        try:
            conn = self._take(deadline)
            broken = False
            try:
                if write:
                    # What is left of the budget for another process's lock.
                    remaining_ms = max(1, int((deadline - time.monotonic()) * 1000))
                    conn.execute(f"PRAGMA busy_timeout = {remaining_ms}")
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    yield conn
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        with contextlib.suppress(sqlite3.Error):
                            conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                broken = not isinstance(exc, sqlite3.IntegrityError)
                mapped = storage_error(exc)
                if mapped is None:
                    raise
                raise mapped from exc
            finally:
                self._give(conn, broken=broken)
        finally:
            if write:
                self._write_lock.release()

    def read(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """A connection in a read transaction (one consistent snapshot), ended when the block ends."""
        return self._transaction(write=False)

    def write(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """A connection in a ``BEGIN IMMEDIATE`` transaction, committed when the block ends, rolled back when it
        raises. Busy past the timeout, I/O errors, a full disk: ServiceUnavailable, nothing written."""
        return self._transaction(write=True)

    def close(self) -> None:
        """Close every connection (those in use close when given back)."""
        self._closed = True
        while True:
            try:
                conn = self._idle.get_nowait()
            except queue.Empty:
                break
            with contextlib.suppress(sqlite3.Error):
                conn.close()


# --- events as stored -------------------------------------------------------------------------------------------


def read_stored_event(event_id: str, seq: int, ts: float, text: str, *, verbatim: bool = False) -> dict[str, Any]:
    """A stored event body (JSON text) as event JSON with its ``seq``; never fails: a body that does not read gives
    the marker event (``error_code`` ``unreadable_event``), the time is one a datetime holds."""
    try:
        body = load_stored(text, verbatim=verbatim)
        if not isinstance(body, dict):
            raise Unreadable(f"a JSON {type(body).__name__}, not an object")
    except Unreadable as exc:
        logger.warning(
            "stored event does not read; answered as a marker event",
            extra={"event_id": event_id, "error": str(exc)[:200]},
        )
        return unreadable_event(event_id, seq, ts, f"its body is not a JSON object ({exc})"[:200])
    body["seq"] = seq
    if not isinstance(body.get("id"), str):
        body["id"] = event_id
    body["timestamp"] = readable_timestamp(body.get("timestamp"), readable_timestamp(ts))
    return body


def _state(rows: Iterable[tuple[str, str]], where: str) -> dict[str, Any]:
    """State rows as a dict; a value that does not read is left out (logged), never fatal. Values come back
    verbatim (``RawJSON`` past ``jsonio.MAX_DEPTH``): state only ever goes into responses."""
    state: dict[str, Any] = {}
    for key, value in rows:
        try:
            state[key] = load_stored(value, verbatim=True)
        except Unreadable as exc:
            logger.warning(
                "stored state value does not read; left out", extra={"where": where, "key": key, "error": str(exc)}
            )
    return state


# --- the change feed ----------------------------------------------------------------------------------------------


def feed_record(
    source: str,
    sequence: int,
    created: float,
    key: SessionKey,
    event_id: str,
    seq: int,
    ts: float,
    body: str,
) -> dict[str, Any]:
    """One change-feed record, shaped as Lambda delivers a DynamoDB stream record (INSERT, NEW_IMAGE): ``Keys`` as
    the table's stream has them (so the template's filter admits the record), ``NewImage`` the session's ids, the
    event's id, seq and time and its body as JSON text. ``sequence`` is the record's SequenceNumber."""
    image = {
        "app_name": {"S": key.app_name},
        "user_id": {"S": key.user_id},
        "session_id": {"S": key.session_id},
        "event_id": {"S": event_id},
        "seq": {"N": str(seq)},
        "ts": {"N": repr(float(ts))},
        "event": {"S": body},
    }
    return {
        "eventID": f"{sequence:020d}",
        "eventName": "INSERT",
        "eventVersion": "1.1",
        "eventSource": source,
        "awsRegion": "local",
        "dynamodb": {
            "ApproximateCreationDateTime": float(int(created)),
            "Keys": {
                "PK": {"S": f"E#{key.app_name}#{key.user_id}#{key.session_id}"},
                "SK": {"S": f"V#{event_id}"},
            },
            "NewImage": image,
            "SequenceNumber": str(sequence),
            "SizeBytes": len(body.encode("utf-8", "surrogatepass")) + 100,
            "StreamViewType": "NEW_IMAGE",
        },
    }


_IMAGE_FIELDS = frozenset({"app_name", "user_id", "session_id", "event_id", "seq", "ts", "event"})


def changes_from_feed(records: list[dict[str, Any]]) -> list[Change]:
    """The new events among change-feed records made by ``feed_record`` (others skipped), in record order, each
    as ``read_events`` reads it."""
    found: list[Change] = []
    for record in DynamoDBStreamEvent({"Records": records}).records:
        stream = record.dynamodb
        if record.raw_event.get("eventName") != "INSERT" or stream is None:
            continue
        image = stream.new_image
        if not image.keys() >= _IMAGE_FIELDS:
            continue
        key = SessionKey(str(image["app_name"]), str(image["user_id"]), str(image["session_id"]))
        event = read_stored_event(str(image["event_id"]), int(image["seq"]), float(image["ts"]), str(image["event"]))
        found.append(Change(key, event, stream.sequence_number or ""))
    return found


# --- sessions -----------------------------------------------------------------------------------------------------

_SESSION_COLUMNS = (
    "id, app_name, user_id, session_id, incarnation, create_time, update_time, version, last_seq, "
    "summary_event_id, summary_end_seq"
)


def _record(row: tuple[Any, ...]) -> SessionRecord:
    """A session row as a record; times outside what a datetime holds are clamped into it."""
    create_time = float(readable_timestamp(row[5]))
    return SessionRecord(
        app_name=row[1],
        user_id=row[2],
        session_id=row[3],
        incarnation=row[4],
        create_time=create_time,
        update_time=float(readable_timestamp(row[6], create_time)),
        version=row[7],
        last_seq=row[8],
        summary_event_id=row[9],
        summary_end_seq=row[10],
    )


def _memo(text: str, where: str) -> dict[str, Any]:
    """A stored memo; one that does not read is left out (logged), never fatal."""
    try:
        memo = load_stored(text, verbatim=True)
    except Unreadable as exc:
        logger.warning("stored memo does not read; left out", extra={"where": where, "error": str(exc)})
        return {}
    return memo if isinstance(memo, dict) else {}


def _counters(conn: sqlite3.Connection, key: SessionKey, expected_version: int | None) -> tuple[int, int, int]:
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


def _deletions(conn: sqlite3.Connection, session: int) -> int:
    row = conn.execute("SELECT count FROM deletions WHERE session = ?", (session,)).fetchone()
    return int(row[0]) if row else 0


def _bounded(seq: int) -> int:
    return max(-_MAX_SEQ, min(_MAX_SEQ, seq))


def _id_conflict(event_id: str, index: int) -> EventIdConflict:
    return EventIdConflict(
        f"event id {event_id!r} is stored already with a different body; send a new id for a new event",
        field=f"events[{index}].id",
    )


class SqliteSessionStore:
    """``SessionStore`` on a ``SqliteDatabase`` (see the module), with its change feed (``read_changes``,
    ``ack_changes``, ``changes``). Events of any size are stored inline: no blob store."""

    def __init__(
        self, db: SqliteDatabase, clock: Callable[[], float] = time.time, *, quotas: Quotas = NO_QUOTAS
    ) -> None:
        self._db = db
        self._clock = clock
        self._quotas = quotas

    # --- sessions ---------------------------------------------------------------------------------------------

    @staticmethod
    def _session_row(conn: sqlite3.Connection, key: SessionKey) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = conn.execute(
            f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE app_name = ? AND user_id = ? AND session_id = ?",
            (key.app_name, key.user_id, key.session_id),
        ).fetchone()
        return row

    @staticmethod
    def _full(conn: sqlite3.Connection, row: tuple[Any, ...]) -> SessionRecord:
        record = _record(row)
        where = f"{record.app_name}/{record.user_id}/{record.session_id}"
        record.state = _state(conn.execute("SELECT key, value FROM session_state WHERE session = ?", (row[0],)), where)
        record.user_state = _state(
            conn.execute(
                "SELECT key, value FROM user_state WHERE app_name = ? AND user_id = ?",
                (record.app_name, record.user_id),
            ),
            f"{record.app_name}/{record.user_id}",
        )
        record.app_state = _state(
            conn.execute("SELECT key, value FROM app_state WHERE app_name = ?", (record.app_name,)), record.app_name
        )
        memo = conn.execute("SELECT memo FROM session_memo WHERE session = ?", (row[0],)).fetchone()
        if memo is not None:
            record.memo = _memo(memo[0], where)
        record.deletions = _deletions(conn, row[0])
        return record

    @staticmethod
    def _put_state(conn: sqlite3.Connection, session: int, key: SessionKey, delta: ScopedDelta) -> None:
        upsert = "ON CONFLICT DO UPDATE SET value = excluded.value"
        if delta.session:
            conn.executemany(
                f"INSERT INTO session_state (session, key, value) VALUES (?, ?, ?) {upsert}",
                [(session, k, dumps(v)) for k, v in delta.session.items()],
            )
        if delta.user:
            conn.executemany(
                f"INSERT INTO user_state (app_name, user_id, key, value) VALUES (?, ?, ?, ?) {upsert}",
                [(key.app_name, key.user_id, k, dumps(v)) for k, v in delta.user.items()],
            )
        if delta.app:
            conn.executemany(
                f"INSERT INTO app_state (app_name, key, value) VALUES (?, ?, ?) {upsert}",
                [(key.app_name, k, dumps(v)) for k, v in delta.app.items()],
            )

    def create_session(self, record: SessionRecord, delta: ScopedDelta) -> tuple[SessionRecord, bool]:
        key = SessionKey(record.app_name, record.user_id, record.session_id)
        with self._db.write() as conn:
            row = self._session_row(conn, key)
            if row is not None:
                return self._full(conn, row), False
            if self._quotas.sessions_per_user:
                # Counted inside the write transaction (one writer at a time): concurrent creates never overshoot.
                (held,) = conn.execute(
                    "SELECT count(*) FROM sessions WHERE app_name = ? AND user_id = ?", (key.app_name, key.user_id)
                ).fetchone()
                self._quotas.check_sessions(held)
            cursor = conn.execute(
                "INSERT INTO sessions (app_name, user_id, session_id, incarnation, create_time, update_time) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (key.app_name, key.user_id, key.session_id, uuid.uuid4().hex, record.create_time, record.update_time),
            )
            assert cursor.lastrowid is not None
            self._put_state(conn, cursor.lastrowid, key, delta)
            row = self._session_row(conn, key)
            assert row is not None
            return self._full(conn, row), True

    def get_session(self, key: SessionKey) -> SessionRecord | None:
        with self._db.read() as conn:
            row = self._session_row(conn, key)
            return None if row is None else self._full(conn, row)

    def get_session_for_compaction(self, key: SessionKey) -> SessionRecord | None:
        return self.get_session(key)  # reads here are consistent and cheap: the whole record

    def get_user_state(self, app_name: str, user_id: str) -> dict[str, Any]:
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT key, value FROM user_state WHERE app_name = ? AND user_id = ?", (app_name, user_id)
            )
            return _state(rows, f"{app_name}/{user_id}")

    def get_app_state(self, app_name: str) -> dict[str, Any]:
        with self._db.read() as conn:
            return _state(conn.execute("SELECT key, value FROM app_state WHERE app_name = ?", (app_name,)), app_name)

    def list_sessions(
        self, app_name: str, user_id: str, limit: int, after: UserCursor | None
    ) -> tuple[list[SessionRecord], UserCursor | None]:
        # No index on update_time (every append would maintain it): a user's sessions are few, sorted in SQLite.
        where = "app_name = ? AND user_id = ?"
        params: list[Any] = [app_name, user_id]
        if after is not None:
            where += " AND (update_time > ? OR (update_time = ? AND session_id > ?))"
            params += [after.update_time, after.update_time, after.session_id]
        sql = f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE {where} ORDER BY update_time, session_id LIMIT ?"
        return self._listed(sql, [*params, max(0, limit) + 1], app_name, limit, UserCursor.of)

    def list_app_sessions(
        self, app_name: str, limit: int, after: AppCursor | None
    ) -> tuple[list[SessionRecord], AppCursor | None]:
        # The order of the (app_name, user_id, session_id) unique index: read along it, nothing sorted.
        where = "app_name = ?"
        params: list[Any] = [app_name]
        if after is not None:
            where += " AND (user_id > ? OR (user_id = ? AND session_id > ?))"
            params += [after.user_id, after.user_id, after.session_id]
        sql = f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE {where} ORDER BY user_id, session_id LIMIT ?"
        return self._listed(sql, [*params, max(0, limit) + 1], app_name, limit, AppCursor.of)

    def _listed(
        self, sql: str, params: list[Any], app_name: str, limit: int, cursor: Callable[[SessionRecord], _C]
    ) -> tuple[list[SessionRecord], _C | None]:
        """The page ``sql`` selects (``limit`` + 1 rows: one more tells whether more remain), with every state."""
        with self._db.read() as conn:
            rows = conn.execute(sql, params).fetchall()
            page = rows[: max(0, limit)]
            states: dict[int, list[tuple[str, str]]] = {}
            ids = [row[0] for row in page]
            for start in range(0, len(ids), _IN_CHUNK):
                chunk = ids[start : start + _IN_CHUNK]
                marks = ",".join("?" * len(chunk))
                for session, k, v in conn.execute(
                    f"SELECT session, key, value FROM session_state WHERE session IN ({marks})", chunk
                ):
                    states.setdefault(session, []).append((k, v))
            users: dict[str, dict[str, Any]] = {}
            for user_id in dict.fromkeys(row[2] for row in page):
                rows_of = conn.execute(
                    "SELECT key, value FROM user_state WHERE app_name = ? AND user_id = ?", (app_name, user_id)
                )
                users[user_id] = _state(rows_of, f"{app_name}/{user_id}")
            app_state = _state(
                conn.execute("SELECT key, value FROM app_state WHERE app_name = ?", (app_name,)), app_name
            )
        records = []
        for row in page:
            record = _record(row)
            record.state = _state(states.get(row[0], []), f"{app_name}/{record.user_id}/{record.session_id}")
            record.user_state = copy.deepcopy(users[record.user_id])
            record.app_state = copy.deepcopy(app_state)
            records.append(record)
        return records, (cursor(records[-1]) if len(rows) > len(page) and records else None)

    def delete_session(self, key: SessionKey) -> None:
        """Delete the session row; its state, events and pending changes go with it (one transaction)."""
        with self._db.write() as conn:
            conn.execute(
                "DELETE FROM sessions WHERE app_name = ? AND user_id = ? AND session_id = ?",
                (key.app_name, key.user_id, key.session_id),
            )

    # --- events -------------------------------------------------------------------------------------------------

    def append_events(self, key: SessionKey, events: list[NewEvent], expected_version: int | None) -> AppendResult:
        with self._db.write() as conn:
            return self._append(conn, key, events, expected_version, compaction=False)

    def append_compaction(
        self,
        key: SessionKey,
        event: NewEvent,
        end_seq: int,
        expected_end_seq: int,
        *,
        incarnation: str | None = None,
        deletions: int | None = None,
    ) -> dict[str, Any] | None:
        with self._db.write() as conn:
            row = self._session_row(conn, key)
            if row is None or (incarnation is not None and row[4] != incarnation):
                raise SessionNotFound(key.session_id)
            if row[10] != expected_end_seq:
                return None
            if deletions is not None and _deletions(conn, row[0]) != deletions:
                return None
            stored = self._append(conn, key, [event], None, compaction=True).events[0]
            conn.execute(
                "UPDATE sessions SET summary_event_id = ?, summary_end_seq = ? WHERE id = ?",
                (event.id, end_seq, row[0]),
            )
            return stored

    def _stored(self, conn: sqlite3.Connection, session: int, event_ids: list[str]) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(event_ids), _IN_CHUNK):
            chunk = event_ids[start : start + _IN_CHUNK]
            marks = ",".join("?" * len(chunk))
            for event_id, seq, ts, body in conn.execute(
                f"SELECT event_id, seq, ts, body FROM events WHERE session = ? AND event_id IN ({marks})",
                [session, *chunk],
            ):
                found[event_id] = read_stored_event(event_id, seq, ts, body)
        return found

    def _append(
        self,
        conn: sqlite3.Connection,
        key: SessionKey,
        events: list[NewEvent],
        expected_version: int | None,
        *,
        compaction: bool,
    ) -> AppendResult:
        session, version, last_seq = _counters(conn, key, expected_version)
        stored = self._stored(conn, session, list(dict.fromkeys(e.id for e in events)))
        # Reused ids first, so that a conflict stores nothing of the batch (the transaction is rolled back anyway).
        first: dict[str, NewEvent] = {}
        for i, event in enumerate(events):
            if event.id in stored:
                earlier: dict[str, Any] = stored[event.id]
            elif event.id in first:
                earlier = first[event.id].body
            else:
                first[event.id] = event
                continue
            if not same_event(earlier, event):
                raise _id_conflict(event.id, i)
        if not compaction:  # a compaction is the server's own: never refused
            self._quotas.check_events(last_seq, len(first))
        out: list[dict[str, Any]] = []
        created: list[bool] = []
        rows: list[tuple[int, int, float, str, str]] = []
        delta = ScopedDelta()
        newest = float("-inf")
        for event in events:
            if event.id in stored:
                out.append(copy.deepcopy(stored[event.id]))
                created.append(False)
                continue
            last_seq += 1
            rows.append((session, last_seq, float(event.timestamp), event.id, dumps(event.body)))
            stored[event.id] = body = dict(event.body, seq=last_seq)
            out.append(copy.deepcopy(body))
            created.append(True)
            delta.session.update(event.delta.session)
            delta.user.update(event.delta.user)
            delta.app.update(event.delta.app)
            newest = max(newest, event.timestamp)
        if not rows:
            return AppendResult(events=out, created=created, version=version)
        conn.executemany("INSERT INTO events (session, seq, ts, event_id, body) VALUES (?, ?, ?, ?, ?)", rows)
        now = self._clock()
        # The change feed: one outbox row per stored event, in seq order, in this same transaction.
        conn.execute(
            "INSERT INTO outbox (event, created) SELECT id, ? FROM events WHERE session = ? AND seq > ? ORDER BY seq",
            (now, session, rows[0][1] - 1),
        )
        self._put_state(conn, session, key, delta)
        if compaction:
            # Server-authored: neither the version (the ETag counts client appends) nor last_update_time moves,
            # and the session does not become due.
            conn.execute("UPDATE sessions SET last_seq = ? WHERE id = ?", (last_seq, session))
            return AppendResult(events=out, created=created, version=version)
        # An append makes the session due for the compaction schedule.
        conn.execute(
            "UPDATE sessions SET version = version + 1, last_seq = ?, update_time = max(update_time, ?), "
            "due_since = coalesce(due_since, ?) WHERE id = ?",
            (last_seq, newest, now, session),
        )
        return AppendResult(events=out, created=created, version=version + 1)

    def read_events(self, key: SessionKey, query: EventQuery) -> list[dict[str, Any]]:
        if query.num_recent == 0 or query.limit == 0:
            return []
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT id FROM sessions WHERE app_name = ? AND user_id = ? AND session_id = ?",
                (key.app_name, key.user_id, key.session_id),
            ).fetchone()
            if row is None:
                return []
            where = "session = ?"
            params: list[Any] = [row[0]]
            if query.after_seq is not None:
                where += " AND seq > ?"
                params.append(_bounded(query.after_seq))
            if query.up_to_seq is not None:
                where += " AND seq <= ?"
                params.append(_bounded(query.up_to_seq))
            if query.after_timestamp is not None:
                where += " AND ts >= ?"
                params.append(float(query.after_timestamp))
            if query.num_recent is not None:
                # Where the newest num_recent start: one index walk, no bodies read.
                start = conn.execute(
                    f"SELECT seq FROM events WHERE {where} ORDER BY seq DESC LIMIT 1 OFFSET ?",
                    [*params, max(0, query.num_recent - 1)],
                ).fetchone()
                if start is not None:
                    where += " AND seq >= ?"
                    params.append(start[0])
            sql = f"SELECT event_id, seq, ts, body FROM events WHERE {where} ORDER BY seq"
            if query.limit is not None:
                sql += " LIMIT ?"
                params.append(max(0, query.limit))
            page: list[dict[str, Any]] = []
            size = 0
            # The cursor reads rows as they are taken: a page stops reading at its end.
            for event_id, seq, ts, body in conn.execute(sql, params):
                event = read_stored_event(event_id, seq, ts, body, verbatim=query.verbatim)
                page.append(event)
                if query.limit is not None and len(page) >= query.limit:
                    break
                if query.max_bytes is not None:
                    size += event_size(event)
                    if size >= query.max_bytes:
                        break
            return page

    def read_tail(self, key: SessionKey, query: EventQuery, need: TailNeed) -> Tail:
        """Pages of ``ORDER BY seq DESC LIMIT n`` on the (session, seq) index, in one read transaction (a deletion
        commits whole, so the pages are one snapshot); the unread older events counted on the index, no body read."""
        tail_query(query)
        low = _bounded(query.after_seq) if query.after_seq is not None else -_MAX_SEQ
        high = _bounded(query.up_to_seq) if query.up_to_seq is not None else _MAX_SEQ
        events: list[dict[str, Any]] = []
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT id FROM sessions WHERE app_name = ? AND user_id = ? AND session_id = ?",
                (key.app_name, key.user_id, key.session_id),
            ).fetchone()
            if row is None or low >= high:
                return Tail(events=[])
            more = need([])
            if more <= 0:
                return Tail(events=[])
            below = high + 1  # seqs below this are not read yet
            while more > 0:
                rows = conn.execute(
                    "SELECT event_id, seq, ts, body FROM events WHERE session = ? AND seq > ? AND seq < ?"
                    " ORDER BY seq DESC LIMIT ?",
                    (row[0], low, below, more),
                ).fetchall()
                page = [read_stored_event(*r, verbatim=query.verbatim) for r in reversed(rows)]
                events = page + events
                if len(rows) < more:
                    return Tail(events=events)  # the selection's oldest event is read
                below = int(rows[-1][1])
                more = need(events)
            (older,) = conn.execute(
                "SELECT COUNT(*) FROM events WHERE session = ? AND seq > ? AND seq < ?", (row[0], low, below)
            ).fetchone()
        return Tail(events=events, older=int(older))

    # --- export / import: the memo and a whole session at once -----------------------------------------------

    def put_memo(self, key: SessionKey, memo: dict[str, Any]) -> None:
        with self._db.write() as conn:
            row = self._session_row(conn, key)
            if row is None:
                raise SessionNotFound(key.session_id)
            conn.execute(
                "INSERT INTO session_memo (session, memo) VALUES (?, ?) ON CONFLICT DO UPDATE SET memo = excluded.memo",
                (row[0], dumps(memo)),
            )

    def import_session(self, record: SessionRecord, events: list[dict[str, Any]], *, replace: bool) -> SessionRecord:
        """One write transaction whatever the size: the replaced session (its rows cascade) and the new one's rows
        commit together or not at all. No outbox rows: auto-save never saves an import."""
        key = SessionKey(record.app_name, record.user_id, record.session_id)
        with self._db.write() as conn:
            row = self._session_row(conn, key)
            if row is not None and not replace:
                raise AlreadyExists(f"session {key.session_id!r} exists already", field="session_id")
            if row is None and self._quotas.sessions_per_user:
                (held,) = conn.execute(
                    "SELECT count(*) FROM sessions WHERE app_name = ? AND user_id = ?", (key.app_name, key.user_id)
                ).fetchone()
                self._quotas.check_sessions(held)
            self._quotas.check_events(0, record.last_seq)
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
            self._put_state(conn, session, key, ScopedDelta(record.app_state, record.user_state, record.state))
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
            row = self._session_row(conn, key)
            assert row is not None
            return self._full(conn, row)

    # --- deleting events ------------------------------------------------------------------------------------------

    def delete_events(self, key: SessionKey, deletion: Deletion, expected_version: int | None) -> DeleteResult:
        """One transaction: the rows go (their pending changes with them: auto-save never sees them), their ids are
        kept in ``deleted_events`` for ``purge_deleted``, the counters and the watermark move."""
        with self._db.write() as conn:
            session, version, last_seq = _counters(conn, key, expected_version)
            count = _deletions(conn, session)
            if (last_seq, count) != (deletion.based_on_seq, deletion.based_on_deletions):
                raise DeletionRaced()
            deleted = 0
            for lo, hi in deletion.ranges:
                conn.execute(
                    "INSERT OR IGNORE INTO deleted_events (session, event_id) "
                    "SELECT session, event_id FROM events WHERE session = ? AND seq BETWEEN ? AND ?",
                    (session, _bounded(lo), _bounded(hi)),
                )
                deleted += conn.execute(
                    "DELETE FROM events WHERE session = ? AND seq BETWEEN ? AND ?",
                    (session, _bounded(lo), _bounded(hi)),
                ).rowcount
            conn.execute(
                "INSERT INTO deletions (session, count) VALUES (?, 1) ON CONFLICT DO UPDATE SET count = count + 1",
                (session,),
            )
            conn.execute(
                "UPDATE sessions SET version = version + 1, summary_event_id = ?, summary_end_seq = ?, "
                "due_since = coalesce(due_since, ?) WHERE id = ?",
                (deletion.summary_event_id, deletion.summary_end_seq, self._clock(), session),
            )
            return DeleteResult(version=version + 1, deleted=deleted)

    def purge_deleted(
        self, key: SessionKey, before: Callable[[list[str]], None], hidden: tuple[SeqRange, ...] | None = None
    ) -> int:
        """The rows went with the deletion's transaction: settle what was derived from them, then forget the ids
        (kept in ``deleted_events``, not in hidden ranges: ``hidden`` says nothing here)."""
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT d.session, d.event_id FROM deleted_events d JOIN sessions s ON s.id = d.session "
                "WHERE s.app_name = ? AND s.user_id = ? AND s.session_id = ?",
                (key.app_name, key.user_id, key.session_id),
            ).fetchall()
        if not rows:
            return 0
        for start in range(0, len(rows), _IN_CHUNK):
            chunk = rows[start : start + _IN_CHUNK]
            before([event_id for _, event_id in chunk])
            with self._db.write() as conn:
                conn.executemany("DELETE FROM deleted_events WHERE session = ? AND event_id = ?", chunk)
        return len(rows)

    # --- the compaction schedule's index ----------------------------------------------------------------------

    def list_due(self, limit: int) -> list[SessionKey]:
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT app_name, user_id, session_id FROM sessions WHERE due_since IS NOT NULL "
                "ORDER BY due_since, id LIMIT ?",
                (max(0, limit),),
            ).fetchall()
        return [SessionKey(*row) for row in rows]

    def clear_due(self, key: SessionKey, version: int) -> bool:
        with self._db.write() as conn:
            row = conn.execute(
                "SELECT id, version FROM sessions WHERE app_name = ? AND user_id = ? AND session_id = ?",
                (key.app_name, key.user_id, key.session_id),
            ).fetchone()
            if row is not None and row[1] != version:
                return False
            if row is not None:
                conn.execute("UPDATE sessions SET due_since = NULL WHERE id = ?", (row[0],))
            return True

    # --- the change feed ----------------------------------------------------------------------------------------

    def read_changes(self, after: int, limit: int) -> list[dict[str, Any]]:
        """Up to ``limit`` change-feed records after the sequence number ``after``, oldest first: one per stored
        event (compaction events included) as Lambda delivers a DynamoDB stream record (``feed_record``)."""
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT o.id, o.created, s.app_name, s.user_id, s.session_id, e.event_id, e.seq, e.ts, e.body "
                "FROM outbox o JOIN events e ON e.id = o.event JOIN sessions s ON s.id = e.session "
                "WHERE o.id > ? ORDER BY o.id LIMIT ?",
                (after, max(0, limit)),
            ).fetchall()
        return [
            feed_record(SOURCE, sequence, created, SessionKey(app, user, sid), event_id, seq, ts, body)
            for sequence, created, app, user, sid, event_id, seq, ts, body in rows
        ]

    def ack_changes(self, up_to: int) -> None:
        """Forget the change-feed records up to the sequence number ``up_to`` (delivered)."""
        with self._db.write() as conn:
            conn.execute("DELETE FROM outbox WHERE id <= ?", (up_to,))

    def changes(self, records: list[dict[str, Any]]) -> list[Change]:
        return changes_from_feed(records)

    def purge_expired(self, records: list[dict[str, Any]]) -> list[str]:
        return []  # no expiry here (retention is DynamoDB's TTL)


# --- forgotten events (memory claims) ---------------------------------------------------------------------------------


def _prefix_range(prefix: str) -> tuple[str, str]:
    """Bounds of the keys starting with ``prefix`` ("E#" -> ["E#", "E$")), for a range on the primary key."""
    return prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)


class SqliteClaimStore:
    """``ClaimStore`` on a ``SqliteDatabase``: one row per key (see ``stores/dynamo_claims.py`` for the semantics)."""

    def __init__(self, db: SqliteDatabase, clock: Callable[[], float] = time.time) -> None:
        self._db = db
        self._clock = clock

    def forgotten(self, app_name: str, user_id: str, keys: list[str]) -> set[str]:
        unique = list(dict.fromkeys(keys))
        marked: set[str] = set()
        with self._db.read() as conn:
            for start in range(0, len(unique), _IN_CHUNK):
                chunk = unique[start : start + _IN_CHUNK]
                marks = ",".join("?" * len(chunk))
                marked.update(
                    key
                    for (key,) in conn.execute(
                        f"SELECT key FROM claims WHERE app_name = ? AND user_id = ? AND committed = 1 "
                        f"AND key IN ({marks})",
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
        low, high = _prefix_range(EVENT_PREFIX)
        with self._db.write() as conn:
            conn.execute(
                "UPDATE claims SET committed = 1, claimed_at = ? WHERE app_name = ? AND user_id = ? "
                "AND key >= ? AND key < ? AND committed = 0",
                (self._clock(), app_name, user_id, low, high),
            )

    def release_texts(self, app_name: str, user_id: str) -> None:
        low, high = _prefix_range(TEXT_PREFIX)
        with self._db.write() as conn:
            conn.execute(
                "DELETE FROM claims WHERE app_name = ? AND user_id = ? AND key >= ? AND key < ?",
                (app_name, user_id, low, high),
            )
