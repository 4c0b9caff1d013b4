"""Reading a session's events: a page of a selection (``read_events``) and the newest events a budget admits
(``read_tail``), each in one read transaction (one snapshot)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...limits import MAX_SEQ
from ...wire.jsonio import event_size
from ..ports import EventQuery, IdQuery, SessionKey, Tail, TailNeed, id_order, tail_query
from .rows import bounded, read_stored_event
from .sessions import session_id

if TYPE_CHECKING:
    from .database import SqliteDatabase


def read_events(db: SqliteDatabase, key: SessionKey, query: EventQuery) -> list[dict[str, Any]]:
    if query.num_recent == 0 or query.limit == 0:
        return []
    with db.read() as conn:
        session = session_id(conn, key)
        if session is None:
            return []
        where = "session = ?"
        params: list[Any] = [session]
        if query.after_seq is not None:
            where += " AND seq > ?"
            params.append(bounded(query.after_seq))
        if query.up_to_seq is not None:
            where += " AND seq <= ?"
            params.append(bounded(query.up_to_seq))
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


# Greater than every character an event id may hold ([A-Za-z0-9._:@-]): the end of a prefix's range of ids.
_PAST_ID_CHARS = "~"


def read_events_by_id(db: SqliteDatabase, key: SessionKey, query: IdQuery) -> list[dict[str, Any]]:
    """Named events (one ``IN`` on the (session, event_id) index), or a range of that index for a prefix, read in
    the query's order and stopping at its end."""
    if query.limit == 0:
        return []
    with db.read() as conn:
        session = session_id(conn, key)
        if session is None:
            return []
        if query.ids:
            wanted = list(dict.fromkeys(query.ids))
            rows = conn.execute(
                f"SELECT event_id, seq, ts, body FROM events WHERE session = ? AND event_id IN "
                f"({', '.join('?' * len(wanted))})",
                [session, *wanted],
            ).fetchall()
            events = [read_stored_event(*row, verbatim=query.verbatim) for row in rows]
            return id_order(events, query)
        where = "session = ? AND event_id >= ? AND event_id < ?"
        params: list[Any] = [session, query.prefix, query.prefix + _PAST_ID_CHARS]
        if query.after_id is not None:
            where += " AND event_id < ?" if query.descending else " AND event_id > ?"
            params.append(query.after_id)
        sql = f"SELECT event_id, seq, ts, body FROM events WHERE {where} ORDER BY event_id"
        sql += " DESC" if query.descending else ""
        if query.limit is not None:
            sql += " LIMIT ?"
            params.append(query.limit)
        page: list[dict[str, Any]] = []
        size = 0
        for row in conn.execute(sql, params):
            event = read_stored_event(*row, verbatim=query.verbatim)
            page.append(event)
            if query.max_bytes is not None:
                size += event_size(event)
                if size >= query.max_bytes:
                    break
        return page


def read_tail(db: SqliteDatabase, key: SessionKey, query: EventQuery, need: TailNeed) -> Tail:
    """Pages of ``ORDER BY seq DESC LIMIT n`` on the (session, seq) index, in one read transaction (a deletion
    commits whole, so the pages are one snapshot); the unread older events counted on the index, no body read."""
    tail_query(query)
    low = bounded(query.after_seq) if query.after_seq is not None else -MAX_SEQ
    high = bounded(query.up_to_seq) if query.up_to_seq is not None else MAX_SEQ
    events: list[dict[str, Any]] = []
    with db.read() as conn:
        session = session_id(conn, key)
        if session is None or low >= high:
            return Tail(events=[])
        more = need([])
        if more <= 0:
            return Tail(events=[])
        below = high + 1  # seqs below this are not read yet
        while more > 0:
            rows = conn.execute(
                "SELECT event_id, seq, ts, body FROM events WHERE session = ? AND seq > ? AND seq < ?"
                " ORDER BY seq DESC LIMIT ?",
                (session, low, below, more),
            ).fetchall()
            page = [read_stored_event(*r, verbatim=query.verbatim) for r in reversed(rows)]
            events = page + events
            if len(rows) < more:
                return Tail(events=events)  # the selection's oldest event is read
            below = int(rows[-1][1])
            more = need(events)
        (older,) = conn.execute(
            "SELECT COUNT(*) FROM events WHERE session = ? AND seq > ? AND seq < ?", (session, low, below)
        ).fetchone()
    return Tail(events=events, older=int(older))
