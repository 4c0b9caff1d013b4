"""The claim-first append: what every chat append is (one event, no state delta, no ``If-Match``, its body
inline). Two requests and no read: claim the event's seq, then put it (3.05 WRU; the transaction path's GetItem and
TransactWriteItems cost 1 RRU and 5.05 WRU).

1. The claim: one UpdateItem of the session item moves ``last_seq``, ``version``, ``tmax``, ``update_time`` and
   the last claim's time ``ct``, conditioned so that what the transaction path would compute from a read holds
   without one: ``tmax`` < the timestamp (the time order stays exact: ``tskew`` does not move; equal, e.g. a
   resend of the newest event, goes the transaction path, which finds the stored event without moving anything),
   ``update_time`` <= it (so it is the new ``update_time``). ``ReturnValues=ALL_NEW`` gives the seq, the version
   and the incarnation.
2. The put of the event item at that seq, ``attribute_not_exists(PK)``: failing with our own token it is our own
   write whose answer was lost (201); with another, the id is stored already (a resend: 200 for the same body,
   409 otherwise) and the claimed seq stays a hole. So does a claim whose put never lands (the function stopped
   between them; its client's resend claims anew). Readers order by ``by_seq`` and never assume consecutive
   seqs; a compaction cuts above a hole only once no put can still land in it
   (``policy.compaction.settled_events``: the last claim ``ct`` 60 s old, twice the function's timeout).
"""

from __future__ import annotations

from typing import Any

from ...errors import SessionNotFound
from ...runtime.aws import error_code
from ..ports import AppendResult, NewEvent, SessionKey, same_event
from .items import with_body
from .keys import (
    CLAIM_TIME_ATTR,
    STATE_EXPIRY_ATTR,
    TIME_MAX_ATTR,
    N,
    S,
    compact_json,
    due_shard,
    event_key,
    session_key,
    string_attr,
    whole_attr,
)
from .retries import Budget, collection_full, id_conflict, transient
from .table import Table


def claim_first(table: Table, key: SessionKey, event: NewEvent, token: str, budget: Budget) -> AppendResult | None:
    """The event stored by a claim and a put; None when the claim's condition fails: the session is not one this
    path serves as it stands (absent, deleted, being imported, this timestamp out of its time order, its state item
    to move on, the events quota reached), and the transaction path, which reads the counters, answers."""
    body = compact_json(event.body)
    if len(body.encode()) > table.offload_bytes:
        return None
    now = table.now()
    claimed = _claim(table, key, event, now, budget)
    if claimed is None:
        return None
    seq = whole_attr(claimed, "last_seq")
    version = whole_attr(claimed, "version")
    item: dict[str, Any] = {
        **event_key(key, event.id),
        "seq": N(seq),
        "t": N(event.timestamp),
        "w": S(token),
        "v": N(version),
        "inc": S(string_attr(claimed, "inc")),
    }
    expiry = table.expiry(now)
    if expiry:
        item["expires_at"] = expiry
    with_body(item, body)
    resent = _put(table, key, event, item, budget)
    if resent is not None:
        return AppendResult(events=[resent], created=[False], version=version)
    return AppendResult(events=[dict(event.body, seq=seq)], created=[True], version=version)


def _claim(table: Table, key: SessionKey, event: NewEvent, now: float, budget: Budget) -> dict[str, Any] | None:
    """Take the next seq and version on the session item; its attributes after, or None when the condition fails
    (nothing of this request is stored)."""
    while True:
        try:
            claimed: dict[str, Any] = table.db.update_item(**_claim_request(table, key, event, now))["Attributes"]
            return claimed
        except table.db.exceptions.ConditionalCheckFailedException:
            # Not for this path (or botocore's retry met our own claim whose answer was lost, now above the
            # timestamp: its seq stays a hole).
            return None
        except Exception as exc:
            if not transient(exc):
                raise
            # Throttled, or a lost answer: a claim that landed leaves a hole, the next one takes a new seq.
            budget.after_fault(exc)


def _claim_request(table: Table, key: SessionKey, event: NewEvent, now: float) -> dict[str, Any]:
    """The claim's UpdateItem: conditioned on what the transaction path would otherwise read and check."""
    names = {
        "#ls": "last_seq",
        "#ver": "version",
        "#tmax": TIME_MAX_ATTR,
        "#ut": "update_time",
        "#ct": CLAIM_TIME_ATTR,
        "#due": "due",
        "#dues": "due_since",
        "#del": "deleting",
        "#imp": "importing",
    }
    values: dict[str, Any] = {":one": N(1), ":ts": N(event.timestamp), ":now": N(now), ":due": S(due_shard(key))}
    sets = [
        "#ls = #ls + :one",
        "#ver = #ver + :one",
        "#tmax = :ts",
        "#ut = :ts",
        "#ct = :now",
        "#due = if_not_exists(#due, :due)",
        "#dues = if_not_exists(#dues, :now)",
    ]
    expiry = table.expiry(now)
    if expiry:
        names["#exp"] = "expires_at"
        values[":exp"] = expiry
        sets.append("#exp = :exp")
    # What read_counters and the transaction's condition would refuse or treat otherwise, as a condition.
    condition = (
        "attribute_exists(PK) AND attribute_not_exists(#del) AND attribute_not_exists(#imp) "
        "AND #tmax < :ts AND #ut <= :ts"
    )
    if table.quotas.events_per_session:
        # last_seq counts every seq taken (holes too): the count the transaction path checks.
        values[":max"] = N(table.quotas.events_per_session)
        condition += " AND #ls < :max"
    if table.retention_s:
        # The transaction path moves the state item's expiry on when the session would outlive it.
        names["#stx"] = STATE_EXPIRY_ATTR
        values[":stx"] = N(now + table.retention_s)
        condition += " AND (attribute_not_exists(#stx) OR #stx >= :stx)"
    return {
        "TableName": table.name,
        "Key": session_key(key),
        "UpdateExpression": "SET " + ", ".join(sets),
        "ConditionExpression": condition,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
        "ReturnValues": "ALL_NEW",
    }


def _put(table: Table, key: SessionKey, event: NewEvent, item: dict[str, Any], budget: Budget) -> dict[str, Any] | None:
    """Put the event item at its claimed seq: None once it is stored by this request, the stored event when the
    id was stored already with the same body (a resend); EventIdConflict for another body."""
    incarnation = string_attr(item, "inc")
    while True:
        try:
            table.db.put_item(
                TableName=table.name,
                Item=item,
                ConditionExpression="attribute_not_exists(PK)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            return None
        except table.db.exceptions.ConditionalCheckFailedException as exc:
            stored_item = exc.response.get("Item") or table.stored_items(key, [event.id], budget).get(event.id)
            if stored_item is None:  # purged since it failed the condition: put it again
                budget.after_race()
                continue
            if string_attr(stored_item, "w") == string_attr(item, "w"):
                return None  # our own put, applied, its answer lost (botocore's or our retry met it)
            stored = table.read_event(stored_item)
            if not same_event(stored, event):
                raise id_conflict(event.id, 0) from exc
            if "blob" in stored_item:
                budget.call(table.blobs.confirm, stored_item["blob"]["S"])
            return stored
        except Exception as exc:
            if error_code(exc) == "ItemCollectionSizeLimitExceededException":
                raise collection_full() from exc
            if not transient(exc):
                raise
            budget.after_fault(exc)  # the same item, the same token: a put that landed is known again
            # Not into a session deleted (and maybe created again) meanwhile: the put is conditioned on its
            # own item only, and its partition would be the new session's.
            marks = table.session_marks(key, budget)
            if marks is None or "deleting" in marks or "importing" in marks or string_attr(marks, "inc") != incarnation:
                raise SessionNotFound(key.session_id) from exc
