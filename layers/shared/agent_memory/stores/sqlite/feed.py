"""The change feed: the outbox handed out as DynamoDB stream records.

``read_changes`` hands out the outbox as DynamoDB stream records (``Keys`` as the table's stream has them, so the
template's filter admits them; ``NewImage`` holding the session's ids and the event), ``changes_from_feed`` turns
such records into ``Change``s, and ``ack_changes`` deletes the delivered rows. A session deleted before its changes
were delivered takes them with it (auto-save never saves what was deleted). The in-memory store hands out its feed
in the same shape (``feed_record``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBStreamEvent

from ..ports import Change, SessionKey
from .rows import read_stored_event

if TYPE_CHECKING:
    from .database import SqliteDatabase

SOURCE = "agent-memory:sqlite"

_IMAGE_FIELDS = frozenset({"app_name", "user_id", "session_id", "event_id", "seq", "ts", "event"})


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


def read_changes(db: SqliteDatabase, after: int, limit: int) -> list[dict[str, Any]]:
    """Up to ``limit`` change-feed records after the sequence number ``after``, oldest first: one per stored
    event (compaction events included) as Lambda delivers a DynamoDB stream record (``feed_record``)."""
    with db.read() as conn:
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


def ack_changes(db: SqliteDatabase, up_to: int) -> None:
    """Forget the change-feed records up to the sequence number ``up_to`` (delivered)."""
    with db.write() as conn:
        conn.execute("DELETE FROM outbox WHERE id <= ?", (up_to,))
