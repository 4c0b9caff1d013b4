"""The table's change feed (its DynamoDB stream): new events for auto-save, and the payloads of expired events."""

from __future__ import annotations

import logging
from typing import Any

from ..ports import BlobStore, Change, SessionKey
from .items import read_event
from .keys import IMPORTED_ATTR, TTL_IDENTITY

logger = logging.getLogger(__name__)


def changes(blobs: BlobStore, records: list[dict[str, Any]]) -> list[Change]:
    """New events among a batch of the table's stream records (others skipped), in record order: INSERTs of
    event items (``V#…``), compaction events included, each read as ``read_events`` reads it (offloaded
    bodies from S3; an S3 fault gives a Change marked ``unread``, for the caller to retry that session only)."""
    # Imported here: only the stream's reader needs it, not the API functions' cold start.
    from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBStreamEvent

    found: list[Change] = []
    for record in DynamoDBStreamEvent({"Records": records}).records:
        stream = record.dynamodb
        if record.raw_event.get("eventName") != "INSERT" or stream is None:
            continue
        image: dict[str, Any] = stream.raw_event.get("NewImage") or {}
        sk = str(stream.keys.get("SK", ""))
        pk = str(image.get("PK", {}).get("S", ""))
        if not sk.startswith("V#") or not pk.startswith("E#") or pk.count("#") < 3 or IMPORTED_ATTR in image:
            continue  # not an event; or an imported one, which auto-save never saves
        _, app_name, user_id, session_id = pk.split("#", 3)
        key = SessionKey(app_name, user_id, session_id)
        sequence = stream.sequence_number or ""
        try:
            found.append(Change(key, read_event(blobs, image), sequence))
        except Exception as exc:
            logger.warning("stream record's event not readable now", extra={"error": str(exc)[:200]})
            found.append(Change(key, {}, sequence, unread=f"{type(exc).__name__}: {str(exc)[:200]}"))
    return found


def purge_expired(blobs: BlobStore, records: list[dict[str, Any]]) -> list[str]:
    """Every S3 version of the offloaded payloads of the events DynamoDB's TTL removed (``SessionRetentionDays``):
    among a batch of the table's stream records, the REMOVEs by the TTL service (``userIdentity``) of event
    items whose old image names a ``blob``. TTL takes the items and nothing else took their payloads, which
    outlived the retention. A deletion by a request (a DELETE of the session or of events) removes its payloads
    itself, and its records carry no such identity. Returns the sequence numbers of the records whose payload
    could not be deleted now (the batch reports them failed; deleting again is harmless)."""
    failed: list[str] = []
    for record in records:
        change = record.get("dynamodb") or {}
        identity = record.get("userIdentity") or {}
        if record.get("eventName") != "REMOVE" or identity != TTL_IDENTITY:
            continue
        sk = str(change.get("Keys", {}).get("SK", {}).get("S", ""))
        blob = (change.get("OldImage") or {}).get("blob", {}).get("S")
        if not sk.startswith("V#") or not isinstance(blob, str) or not blob:
            continue
        try:
            deleted = blobs.delete_prefix(blob)  # botocore's retries; a fault: the feed delivers it again
        except Exception as exc:
            logger.warning("an expired event's payload was not deleted; retried", extra={"error": repr(exc)[:200]})
            failed.append(str(change.get("SequenceNumber", "")))
            continue
        logger.info("expired event's payload deleted", extra={"versions": deleted})
    return failed
