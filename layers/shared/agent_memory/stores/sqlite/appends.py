"""Storing events: a client's append and the server's compaction event, each with its outbox rows (the change
feed) and state in the one write transaction. A resent event (same id, same body) is answered as stored; the same id
with another body is refused and nothing of the batch is stored."""

from __future__ import annotations

import copy
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...errors import EventIdConflict, SessionNotFound
from ...policy.quotas import Quotas
from ...policy.state import ScopedDelta
from ...wire.jsonio import dumps
from ..ports import AppendResult, NewEvent, SessionKey, same_event
from .rows import IN_CHUNK, marks, read_stored_event
from .sessions import counters, deletions_of, put_state, session_row

if TYPE_CHECKING:
    from .database import SqliteDatabase


def append_events(
    db: SqliteDatabase,
    clock: Callable[[], float],
    quotas: Quotas,
    key: SessionKey,
    events: list[NewEvent],
    expected_version: int | None,
) -> AppendResult:
    with db.write() as conn:
        return _append(conn, clock, quotas, key, events, expected_version, compaction=False)


def append_compaction(
    db: SqliteDatabase,
    clock: Callable[[], float],
    key: SessionKey,
    event: NewEvent,
    end_seq: int,
    expected_end_seq: int,
    *,
    incarnation: str | None = None,
    deletions: int | None = None,
) -> dict[str, Any] | None:
    """Store the compaction event and move the watermark to ``end_seq``, if the watermark (and the deletion count,
    when given) are still those the compaction was planned on; None when they moved."""
    with db.write() as conn:
        row = session_row(conn, key)
        if row is None or (incarnation is not None and row[4] != incarnation):
            raise SessionNotFound(key.session_id)
        if row[10] != expected_end_seq:
            return None
        if deletions is not None and deletions_of(conn, row[0]) != deletions:
            return None
        # A compaction is the server's own: no quota refuses it.
        stored = _append(conn, clock, None, key, [event], None, compaction=True).events[0]
        conn.execute(
            "UPDATE sessions SET summary_event_id = ?, summary_end_seq = ? WHERE id = ?",
            (event.id, end_seq, row[0]),
        )
        return stored


def _stored(conn: sqlite3.Connection, session: int, event_ids: list[str]) -> dict[str, dict[str, Any]]:
    """The session's events of these ids that are stored already, by id."""
    found: dict[str, dict[str, Any]] = {}
    for start in range(0, len(event_ids), IN_CHUNK):
        chunk = event_ids[start : start + IN_CHUNK]
        for event_id, seq, ts, body in conn.execute(
            f"SELECT event_id, seq, ts, body FROM events WHERE session = ? AND event_id IN ({marks(chunk)})",
            [session, *chunk],
        ):
            found[event_id] = read_stored_event(event_id, seq, ts, body)
    return found


def _id_conflict(event_id: str, index: int) -> EventIdConflict:
    return EventIdConflict(
        f"event id {event_id!r} is stored already with a different body; send a new id for a new event",
        field=f"events[{index}].id",
    )


def _append(
    conn: sqlite3.Connection,
    clock: Callable[[], float],
    quotas: Quotas | None,
    key: SessionKey,
    events: list[NewEvent],
    expected_version: int | None,
    *,
    compaction: bool,
) -> AppendResult:
    session, version, last_seq = counters(conn, key, expected_version)
    stored = _stored(conn, session, list(dict.fromkeys(e.id for e in events)))
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
    if quotas is not None:
        quotas.check_events(last_seq, len(first))
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
    now = clock()
    # The change feed: one outbox row per stored event, in seq order, in this same transaction.
    conn.execute(
        "INSERT INTO outbox (event, created) SELECT id, ? FROM events WHERE session = ? AND seq > ? ORDER BY seq",
        (now, session, rows[0][1] - 1),
    )
    put_state(conn, session, key, delta)
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
