"""How a stored row reads: events, state values, memos and session rows as the ports' values.

Stored JSON is written with ``jsonio.dumps`` and read with ``jsonio.load_stored``, as the DynamoDB store does: floats
and integers keep their types, timestamps their full precision, values nested past ``jsonio.MAX_DEPTH`` come back as
text; an event whose body does not read comes back as ``jsonio.unreadable_event``'s marker, a state value or memo
that does not read is left out with a warning. Anyone holding the file may have written a row: no read fails on one.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from ...limits import MAX_SEQ
from ...wire.jsonio import Unreadable, load_stored, readable_timestamp, unreadable_event
from ..ports import SessionRecord

logger = logging.getLogger(__name__)

# Bound for seq arguments (SQLite integers are 64-bit; a client's after_seq may be anything).
# Host parameters per statement for IN lists (SQLite allows 32,766; stay well inside).
IN_CHUNK = 500

SESSION_COLUMNS = (
    "id, app_name, user_id, session_id, incarnation, create_time, update_time, version, last_seq, "
    "summary_event_id, summary_end_seq"
)


def bounded(seq: int) -> int:
    """``seq`` within what a SQLite integer holds."""
    return max(-MAX_SEQ, min(MAX_SEQ, seq))


def marks(values: list[Any]) -> str:
    """The placeholders of an ``IN (…)`` list."""
    return ",".join("?" * len(values))


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


def read_state(rows: Iterable[tuple[str, str]], where: str) -> dict[str, Any]:
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


def read_memo(text: str, where: str) -> dict[str, Any]:
    """A stored memo; one that does not read is left out (logged), never fatal."""
    try:
        memo = load_stored(text, verbatim=True)
    except Unreadable as exc:
        logger.warning("stored memo does not read; left out", extra={"where": where, "error": str(exc)})
        return {}
    return memo if isinstance(memo, dict) else {}


def session_record(row: tuple[Any, ...]) -> SessionRecord:
    """A session row (``SESSION_COLUMNS``) as a record without its state; times outside what a datetime holds are
    clamped into it."""
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
