"""The embedded store's tables, created when a file is opened (schema version in ``PRAGMA user_version``).

- ``sessions``       one row per session: counters, times, the incarnation, the compaction watermark and
  ``due_since`` (set by an append, cleared by the schedule: a partial index is the due index)
- ``session_state``  one row per session state key (JSON text), deleted with its session
- ``session_memo``   the session's memo (JSON text), when one was written; deleted with its session
- ``user_state`` / ``app_state``  one row per user / app state key (JSON text)
- ``events``         one row per event: ``seq``, ``ts``, the id and the body as JSON text, of any size, inline (no
  blob store: SQLite keeps large values in overflow pages); unique by (session, id) and by (session, seq)
- ``outbox``         the change feed: one row per stored event, written in the transaction that stores the event
- ``claims``         forgotten events of long-term memory (``ClaimStore``: one committed row per key)
- ``deletions``      per session, how many event deletions it committed (``SessionRecord.deletions``)
- ``deleted_events`` ids of events a deletion removed whose derived data (memories, claims) ``purge_deleted`` has
  not settled yet; the rows themselves go in the deletion's transaction (their outbox rows with them)

A session row's integer id keys its events and state, so deleting the row deletes everything of that session (foreign
keys, ``ON DELETE CASCADE``) in one transaction: a session re-created under the same id is a new row and a new
incarnation, and never sees the deleted one's events. No tombstone is needed, as nothing is left half-deleted.

Long-term memory's tables (``memory_*``) are ``memory_statements``'s.
"""

from __future__ import annotations

import sqlite3

SCHEMA_VERSION = 1

SCHEMA = """
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


def create_schema(conn: sqlite3.Connection, path: str) -> None:
    """Create what is missing of the tables in one transaction and stamp the version. A file written by code that
    knows a newer schema is refused rather than written under rules it does not follow."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        if version > SCHEMA_VERSION:
            raise RuntimeError(f"{path} holds schema version {version}; this code knows up to {SCHEMA_VERSION}")
        for statement in SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
