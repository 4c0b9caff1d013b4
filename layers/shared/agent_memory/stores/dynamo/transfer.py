"""Export and import: the memo and a whole session at once (see docs/design.md, "Import").

1. A placeholder session item (``importing``, with ``import_started``) claims the id: readers answer 404, appends
   and creates fail, a concurrent import answers 409. ``replace``: the existing session is deleted first (the new
   events share its keys ``V#{id}``), so readers see the old session, then none, then the new one; never a mix.
2. Whatever an earlier import or delete of the id left is purged; the events are written (BatchWriteItem, any
   number; large bodies to S3) under the import's own incarnation, marked ``imp`` (the change feed skips them).
3. One transaction replaces the placeholder with the session item (on the condition that it is still this
   import's placeholder), counts it in the user's sessions (the quota) and sets the user and app state.

A fault before 3 leaves only the placeholder and events no reader sees; a retry takes the placeholder over once it
is stale (or a DELETE removes it; a failing import removes its own when it can) and purges them. A lost answer of 3
is recognised by the incarnation.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ...errors import AlreadyExists, Conflict, PayloadTooLarge, QuotaExceeded, SessionNotFound
from ...wire.jsonio import dumps
from ..ports import SessionKey, SessionRecord
from .items import TimeOrder, with_body, with_payload
from .keys import (
    IMPORTED_ATTR,
    MEMO_ATTR,
    STATE_SK,
    N,
    S,
    app_pk,
    compact_json,
    event_key,
    incarnation_prefix,
    session_key,
    string_attr,
)
from .listing import get_session
from .retries import Budget, batch_write, too_big
from .sessions import (
    count_update,
    delete_session,
    import_under_way,
    new_session_item,
    purge,
    stale_import,
    state_put,
    try_counted_create,
)
from .table import Table

logger = logging.getLogger(__name__)

# Threads writing an import's events at once (botocore clients are thread-safe; the pool's default is 10).
IMPORT_WRITERS = 8


def put_memo(table: Table, key: SessionKey, memo: dict[str, Any]) -> None:
    """One conditional update of the session item: idempotent, so a retry after a lost answer is harmless."""
    try:
        Budget().call(
            table.db.update_item,
            TableName=table.name,
            Key=session_key(key),
            UpdateExpression="SET #memo = :memo",
            ConditionExpression="attribute_exists(PK) AND attribute_not_exists(deleting) "
            "AND attribute_not_exists(importing)",
            ExpressionAttributeNames={"#memo": MEMO_ATTR},
            ExpressionAttributeValues={":memo": S(dumps(memo))},
        )
    except table.db.exceptions.ConditionalCheckFailedException as exc:
        raise SessionNotFound(key.session_id) from exc
    except Exception as exc:
        if too_big(exc):
            raise PayloadTooLarge(
                "the memo would grow the session's item past DynamoDB's 400 KB limit (with its state)",
                field="memo",
            ) from exc
        raise


def import_session(
    table: Table, record: SessionRecord, events: list[dict[str, Any]], *, replace: bool
) -> SessionRecord:
    """A placeholder, the events, then the session in one conditional write (see the module)."""
    key = SessionKey(record.app_name, record.user_id, record.session_id)
    table.quotas.check_events(0, record.last_seq)
    budget = Budget()
    incarnation = uuid.uuid4().hex
    _claim(table, key, incarnation, replace, budget)
    try:
        purge(table, key, budget)
        blobs = _write_events(table, key, events, incarnation, record.version)
        ordered = sorted(events, key=lambda e: int(e["seq"]))
        time_order = TimeOrder(0.0, 0.0).after([float(e["timestamp"]) for e in ordered])
        committed = _commit(table, key, record, incarnation, budget, time_order)
    except QuotaExceeded:
        with contextlib.suppress(Exception):
            delete_session(table, key)  # nothing of a refused import stays (best effort: a retry purges it)
        raise
    except BaseException:
        # A fault (503): give the id back at once, so that the retry need not wait for the placeholder to go
        # stale; the events written stay invisible until the next import or create of the id purges them.
        with contextlib.suppress(Exception):
            table.db.delete_item(
                TableName=table.name,
                Key=session_key(key),
                ConditionExpression="importing = :inc",
                ExpressionAttributeValues={":inc": S(incarnation)},
            )
        raise
    if not committed:
        raise Conflict("the import was interrupted by a delete or another import of the session; retry")
    logger.info("session imported", extra={"events": len(events), "payloads": len(blobs)})
    stored = budget.call(get_session, table, key)
    if stored is None:
        raise SessionNotFound(key.session_id)  # deleted the moment it was imported
    return stored


def _claim(table: Table, key: SessionKey, incarnation: str, replace: bool, budget: Budget) -> None:
    """Put the import's placeholder in the session's place; AlreadyExists (not ``replace``), or
    ServiceUnavailable while another import's placeholder is not stale."""
    placeholder = {
        **session_key(key),
        "inc": S(incarnation),
        "importing": S(incarnation),
        "import_started": N(table.now()),
    }
    condition = "attribute_not_exists(PK)"
    values: dict[str, Any] = {}
    replaced = False
    while True:
        try:
            put: dict[str, Any] = {"TableName": table.name, "Item": placeholder, "ConditionExpression": condition}
            if values:
                put["ExpressionAttributeValues"] = values
            budget.call(table.db.put_item, **put)
            return
        except table.db.exceptions.ConditionalCheckFailedException:
            pass
        marks = table.session_marks(key, budget)
        if marks is None:
            budget.after_race()  # gone meanwhile: claim again (bounded, as a lost race is)
            continue
        if "deleting" in marks:
            # A DELETE stopped part-way: finish it, then take the tombstone's place.
            purge(table, key, budget)
            condition, values = "attribute_not_exists(PK) OR attribute_exists(deleting)", {}
        elif "importing" in marks:
            if string_attr(marks, "importing") == incarnation:
                return  # our own placeholder: the put's answer was lost
            if not stale_import(marks):
                raise import_under_way(marks)
            # An import that died: take its place (its events are purged next).
            condition = "attribute_not_exists(PK) OR attribute_exists(deleting) OR importing = :dead"
            values = {":dead": S(string_attr(marks, "importing"))}
        elif not replace:
            raise AlreadyExists(f"session {key.session_id!r} exists already", field="session_id")
        else:
            if replaced:
                budget.after_race()  # re-created between our delete and our claim: delete it again
            # Its events share the new one's keys: it goes first (readers: 404 until the import commits).
            delete_session(table, key)
            replaced = True
            condition, values = "attribute_not_exists(PK)", {}


def _write_events(
    table: Table, key: SessionKey, events: list[dict[str, Any]], incarnation: str, version: int
) -> list[str]:
    """Write the events' items (BatchWriteItem, any number) and offload large bodies; return the payloads'
    keys. Payloads are written staged and confirmed once all are written, before the commit: a payload of an
    import that dies before that expires by the lifecycle rule, one after is under a dead incarnation's
    prefix, which the next purge of the id removes."""
    expiry = table.expiry(table.now())
    requests: list[dict[str, Any]] = []
    blobs: list[str] = []
    for event in events:
        body = {k: v for k, v in event.items() if k != "seq"}
        text = compact_json(body)
        item: dict[str, Any] = {
            **event_key(key, event["id"]),
            "seq": N(int(event["seq"])),
            "t": N(float(event["timestamp"])),
            "inc": S(incarnation),
            "w": S(incarnation),
            "v": N(version),
            IMPORTED_ATTR: N(1),
        }
        offload = len(text.encode()) > table.offload_bytes
        if offload:
            blob_key = f"{incarnation_prefix(key, incarnation)}events/{event['id']}/{incarnation}.json"
            Budget().call(table.blobs.put, blob_key, text.encode(), staged=True)
            blobs.append(blob_key)
            with_payload(item, blob_key, body)
        if expiry:
            item["expires_at"] = expiry
        if not offload:
            with_body(item, text)
        requests.append({"PutRequest": {"Item": item}})
    # Slices of 1,000 items, each with its own budget (the whole import may take longer than one write's budget
    # without a fault), written by a few threads at once: a 6 MB body of small events is ~1,600 BatchWriteItem
    # calls, too many to make one after another inside the function's 29 s.
    slices = [requests[start : start + 1000] for start in range(0, len(requests), 1000)]
    with ThreadPoolExecutor(max_workers=min(IMPORT_WRITERS, max(1, len(slices)))) as pool:
        for done in [pool.submit(batch_write, table.db, table.name, part, Budget()) for part in slices]:
            done.result()
    for blob_key in blobs:
        Budget().call(table.blobs.confirm, blob_key)
    return blobs


def _commit(
    table: Table, key: SessionKey, record: SessionRecord, incarnation: str, budget: Budget, time_order: TimeOrder
) -> bool:
    """The session item in the placeholder's place, counted, with the user and app state: one transaction.
    False when the placeholder is no longer this import's (a DELETE, or another import, took it)."""
    item = new_session_item(
        key, record, incarnation, version=record.version, last_seq=record.last_seq, time_order=time_order
    )
    item["cmp_end"] = N(record.summary_end_seq)
    if record.summary_event_id is not None:
        item["cmp_id"] = S(record.summary_event_id)
    if record.memo:
        item[MEMO_ATTR] = S(dumps(record.memo))
    expiry = table.expiry(table.now())
    if expiry:
        item["expires_at"] = expiry
    session_state = state_put(table, key, incarnation, record.state, item)
    put = {
        "TableName": table.name,
        "Item": item,
        "ConditionExpression": "importing = :inc AND attribute_not_exists(deleting)",
        "ExpressionAttributeValues": {":inc": S(incarnation)},
    }
    actions: list[dict[str, Any]] = [
        {"Put": put},
        count_update(table, record.app_name, record.user_id, record.user_state),
    ]
    if record.app_state:
        actions.append(table.state_update(app_pk(record.app_name), STATE_SK, record.app_state))
    actions.append(session_state)
    if try_counted_create(table, actions, record, budget):
        return True
    marks = table.session_marks(key, budget)
    # Our transaction landed and its answer was lost: the session item carries our incarnation.
    return marks is not None and string_attr(marks, "inc") == incarnation and "importing" not in marks
