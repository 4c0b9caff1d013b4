"""Creating and deleting sessions: the session item, the user's session count (the quota), tombstones, purges.

A create writes a fresh incarnation (``inc``): nothing of an earlier life of the id (events, seq, a
compaction in flight, payloads) can be taken for the new one's, and a create whose answer was lost knows its own
item again. A delete tombstones the session item (``deleting``: reads answer 404, writes fail their condition),
purges its events and payloads, then removes the item; a retry, or a create under the same id, finishes a delete
that stopped part-way.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from typing import Any

from ...errors import QuotaExceeded, ServiceUnavailable
from ...policy.quotas import SESSIONS_PER_USER
from ...policy.state import ScopedDelta
from ..ports import SessionKey, SessionRecord
from .items import TimeOrder
from .keys import (
    COUNTED_ATTR,
    NO_PAYLOADS_ATTR,
    SESSIONS_ATTR,
    STATE_ATTR_PREFIX,
    STATE_EXPIRY_ATTR,
    STATE_ITEM_ATTR,
    STATE_SK,
    N,
    S,
    app_pk,
    blob_prefix,
    events_pk,
    incarnation_prefix,
    number_attr,
    session_key,
    session_pk,
    state_json,
    state_key,
    string_attr,
)
from .listing import get_session
from .retries import Budget, batch_write, reason_codes, state_too_large, too_big, transient
from .table import Table

logger = logging.getLogger(__name__)

# An import's placeholder older than this was left by an import that died (the API's functions stop at 29 s, so no
# import still writes): a create or another import of the id may take its place. Younger, it may be one still
# writing, whose events share the id's keys: they answer 503 with Retry-After until then.
IMPORT_STALE_S = 45.0


# --- new items -----------------------------------------------------------------------------------------------------


def new_session_item(
    key: SessionKey,
    record: SessionRecord,
    incarnation: str,
    *,
    version: int,
    last_seq: int,
    time_order: TimeOrder | None = None,
) -> dict[str, Any]:
    """A new session item (a create's, an import's): identity, times, counters, incarnation, its keys in the
    app-wide index, and the mark that it is counted in its user's sessions."""
    return {
        **session_key(key),
        "app_name": S(record.app_name),
        "user_id": S(record.user_id),
        "session_id": S(record.session_id),
        "create_time": N(record.create_time),
        "update_time": N(record.update_time),
        "version": N(version),
        "last_seq": N(last_seq),
        "inc": S(incarnation),
        # The sparse by_app index (the app-wide listing): written here and removed by a delete, never by an
        # append, so appends cost the index nothing.
        "app_pk": S(record.app_name),
        "app_sk": S(f"{record.user_id}#{record.session_id}"),
        # Counted in the user's session count: its delete takes it out again.
        COUNTED_ATTR: N(1),
        STATE_ITEM_ATTR: N(1),
        **(time_order or TimeOrder(0.0, 0.0)).attributes(),
    }


def state_put(
    table: Table, key: SessionKey, incarnation: str, state: dict[str, Any], session: dict[str, Any]
) -> dict[str, Any]:
    """A transaction's Put of a new session state item (a create's, an import's): always written, also empty,
    so that no state item of an earlier incarnation (not purged yet) is ever updated in its place. Records the
    state item's expiry on the new ``session`` item."""
    item: dict[str, Any] = {**state_key(key), "inc": S(incarnation)}
    for k, v in state.items():
        item[STATE_ATTR_PREFIX + k] = state_json(v)
    expiry = table.state_expiry(table.now())
    if expiry:
        item["expires_at"] = session[STATE_EXPIRY_ATTR] = expiry
    return {"Put": {"TableName": table.name, "Item": item}}


def count_update(table: Table, app_name: str, user_id: str, user_state: dict[str, Any]) -> dict[str, Any]:
    """A create's update of the user's state item: its state delta, one more session, and the quota."""
    action = table.state_update(session_pk(app_name, user_id), STATE_SK, user_state)["Update"]
    action["UpdateExpression"] = (action["UpdateExpression"] + " " if user_state else "") + "ADD #sessions :one"
    action["ExpressionAttributeNames"]["#sessions"] = SESSIONS_ATTR
    action["ExpressionAttributeValues"][":one"] = N(1)
    if table.quotas.sessions_per_user:
        action["ConditionExpression"] = "attribute_not_exists(#sessions) OR #sessions < :max_sessions"
        action["ExpressionAttributeValues"][":max_sessions"] = N(table.quotas.sessions_per_user)
    return {"Update": action}


# --- create --------------------------------------------------------------------------------------------------------


def create_session(table: Table, record: SessionRecord, delta: ScopedDelta) -> tuple[SessionRecord, bool]:
    key = SessionKey(record.app_name, record.user_id, record.session_id)
    budget = Budget()
    incarnation = uuid.uuid4().hex
    actions, put = _create_actions(table, key, record, delta, incarnation)
    while True:
        if try_counted_create(table, actions, record, budget):
            # Events an earlier life of the id left behind (an import that died after writing them) must not
            # show in this one (one Query when there are none).
            purge(table, key, budget, created=True)
            stored = budget.call(get_session, table, key)
            if stored is None:  # deleted between our write and read: create again
                continue
            return stored, True
        stored = budget.call(get_session, table, key)
        if stored is not None:
            if stored.last_seq == 0:
                # A creation whose answer was lost, or whose purge failed, may have left events of an
                # earlier life of the id: they must not show in the new one (one Query when none).
                purge(table, key, budget, created=True)
            # Our own incarnation: an earlier attempt of this request created it and its answer was lost.
            return stored, stored.incarnation == incarnation
        existing = table.session_marks(key, budget)
        if existing is not None and "importing" in existing and "deleting" not in existing:
            # An import is writing the session: it is not there yet, and it is not ours to take.
            if not stale_import(existing):
                raise import_under_way(existing)
            delete_session(table, key)  # an import that died: its placeholder and events go
            continue
        if existing is not None and "deleting" in existing:
            # A DELETE stopped part-way: finish it, then take the tombstone's place.
            purge(table, key, budget)
            put["ConditionExpression"] = "attribute_not_exists(PK) OR attribute_exists(deleting)"
        # Else deleted between our write and read: create again.


def _create_actions(
    table: Table, key: SessionKey, record: SessionRecord, delta: ScopedDelta, incarnation: str
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A create's transaction, and its Put of the session item (whose condition a retry may widen)."""
    item = new_session_item(key, record, incarnation, version=0, last_seq=0)
    if not table.retention_s:
        # (With a retention, DynamoDB's TTL may have removed an earlier incarnation's items without its
        # payloads: the DELETE lists the bucket to take those too.)
        item[NO_PAYLOADS_ATTR] = {"BOOL": True}
    expiry = table.expiry(record.update_time)
    if expiry:
        item["expires_at"] = expiry
    session_state = state_put(table, key, incarnation, delta.session, item)
    put: dict[str, Any] = {"TableName": table.name, "Item": item, "ConditionExpression": "attribute_not_exists(PK)"}
    # User and app state ride in the same transaction: applied once, with the creation, or not at all. So does
    # the user's session count (on the user's state item): the transaction's condition on it is the quota,
    # and DynamoDB serialises transactions on an item, so concurrent creates never overshoot. A retry of a
    # create that landed fails on the session's own condition, as a whole: the count moves once.
    actions: list[dict[str, Any]] = [{"Put": put}, count_update(table, record.app_name, record.user_id, delta.user)]
    if delta.app:
        actions.append(table.state_update(app_pk(record.app_name), STATE_SK, delta.app))
    # The session's state in its own item, in the same transaction (last: the reasons' order stays the same).
    actions.append(session_state)
    return actions, put


def try_counted_create(table: Table, actions: list[dict[str, Any]], record: SessionRecord, budget: Budget) -> bool:
    """``_try_create`` of a transaction that counts the session in its user's quota. With a retention the count
    may be high (sessions removed by TTL are never taken out): on a refusal, count the user's sessions once,
    correct it, and try again; a true count at the limit refuses. Without one the count cannot drift, and a
    refused create costs no read of the user's partition."""
    try:
        return _try_create(table, actions, budget)
    except QuotaExceeded:
        if not table.retention_s or not _recount_sessions(table, record.app_name, record.user_id, budget):
            raise
    return _try_create(table, actions, budget)


def _try_create(table: Table, actions: list[dict[str, Any]], budget: Budget) -> bool:
    """Write the new session (and its user/app state and count); False when a session item is in the way,
    QuotaExceeded when the user's count is at the limit."""
    db = table.db
    while True:
        try:
            db.transact_write_items(TransactItems=actions)
            return True
        except db.exceptions.TransactionCanceledException as exc:
            codes = reason_codes(exc)
            if codes and codes[0] == "ConditionalCheckFailed":
                return False
            if len(codes) > 1 and codes[1] == "ConditionalCheckFailed":
                raise QuotaExceeded(
                    "the user holds as many sessions as allowed",
                    limit_name=SESSIONS_PER_USER,
                    limit=table.quotas.sessions_per_user,
                ) from exc
            if "ValidationError" in codes:
                raise state_too_large("state") from exc
            budget.after_fault(exc)  # throttled, conflicting, unknown: retry (a lost answer shows as ours)
        except Exception as exc:
            if too_big(exc):
                raise state_too_large("state") from exc
            if not transient(exc):
                raise
            budget.after_fault(exc)


def _recount_sessions(table: Table, app_name: str, user_id: str, budget: Budget) -> bool:
    """Set the user's session count to the sessions they hold if it is higher (sessions removed by TTL, or by
    hand, were never taken out of it); True when it was lowered.

    The count is set only if it still reads as it did before the sessions were counted: a create or delete
    that lands meanwhile moves it, and the correction is dropped (the caller tries once more anyway)."""
    user_key = {"PK": S(session_pk(app_name, user_id)), "SK": S(STATE_SK)}
    item = budget.call(
        table.db.get_item,
        TableName=table.name,
        Key=user_key,
        ConsistentRead=True,
        ProjectionExpression="#sessions",
        ExpressionAttributeNames={"#sessions": SESSIONS_ATTR},
    ).get("Item", {})
    if SESSIONS_ATTR not in item:
        return False
    counted = int(item[SESSIONS_ATTR]["N"])
    held = _sessions_held(table, app_name, user_id, budget)
    if held >= counted:
        return False
    logger.info("session count corrected", extra={"counted": counted, "held": held})
    with contextlib.suppress(table.db.exceptions.ConditionalCheckFailedException):
        budget.call(
            table.db.update_item,
            TableName=table.name,
            Key=user_key,
            UpdateExpression="SET #sessions = :held",
            ConditionExpression="#sessions = :counted",
            ExpressionAttributeNames={"#sessions": SESSIONS_ATTR},
            ExpressionAttributeValues={":held": N(held), ":counted": N(counted)},
        )
    return True


def _sessions_held(table: Table, app_name: str, user_id: str, budget: Budget) -> int:
    """How many sessions the user's partition holds that count in their quota."""
    now = table.now()
    held = 0
    params: dict[str, Any] = {
        "TableName": table.name,
        "KeyConditionExpression": "PK = :pk AND begins_with(SK, :s)",
        "ExpressionAttributeValues": {":pk": S(session_pk(app_name, user_id)), ":s": S("S#")},
        "ProjectionExpression": "deleting, expires_at, importing",
        "ConsistentRead": True,
    }
    while True:
        response = budget.call(table.db.query, **params)
        for session in response.get("Items", []):
            expires = number_attr(session, "expires_at")
            # Tombstones were taken out when they were laid; expired sessions are about to go; an import's
            # placeholder is counted when the import commits.
            if "deleting" not in session and "importing" not in session and (expires is None or expires > now):
                held += 1
        if "LastEvaluatedKey" not in response:
            return held
        params["ExclusiveStartKey"] = response["LastEvaluatedKey"]


# --- delete --------------------------------------------------------------------------------------------------------


def delete_session(table: Table, key: SessionKey) -> None:
    """Tombstone, purge, then remove the session item. Any step may fail (503): the session stays deleted
    for readers and writers, and a retry — of the DELETE, or a create under the same id — finishes the job."""
    budget = Budget()
    _tombstone(table, key, budget)
    # The tombstoned incarnation's mark (no append can upload under it any more): without a payload ever
    # uploaded, the bucket holds nothing of it to delete (an earlier incarnation's were purged before this one
    # was created). A staged upload of an append that cannot commit expires by the lifecycle rule.
    marks = table.session_marks(key, budget)
    purge(table, key, budget, payloads=marks is None or NO_PAYLOADS_ATTR not in marks)
    with contextlib.suppress(table.db.exceptions.ConditionalCheckFailedException):
        budget.call(
            table.db.delete_item,
            TableName=table.name,
            Key=session_key(key),
            ConditionExpression="attribute_exists(deleting)",  # not a session re-created meanwhile
        )


def _tombstone(table: Table, key: SessionKey, budget: Budget) -> None:
    """Mark the session deleted: from here on get and list answer without it, appends and compactions fail
    their condition. A counted session is taken out of its user's count in the same transaction."""
    db = table.db
    tombstone: dict[str, Any] = {
        "TableName": table.name,
        "Key": session_key(key),
        "UpdateExpression": "SET deleting = :now REMOVE due, due_since, app_pk, app_sk",
        # Only a live session: a retried DELETE (or botocore's retry of a lost answer) finds the tombstone,
        # fails the condition and takes nothing out of the user's session count a second time.
        "ConditionExpression": "attribute_exists(PK) AND attribute_not_exists(deleting) AND attribute_exists(#c)",
        "ExpressionAttributeNames": {"#c": COUNTED_ATTR},
        "ExpressionAttributeValues": {":now": N(table.now())},
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    uncount = {
        "TableName": table.name,
        "Key": {"PK": S(session_pk(key.app_name, key.user_id)), "SK": S(STATE_SK)},
        "UpdateExpression": "ADD #sessions :minus_one",
        "ExpressionAttributeNames": {"#sessions": SESSIONS_ATTR},
        "ExpressionAttributeValues": {":minus_one": N(-1)},
    }
    while True:
        try:
            # The tombstone and the count move together (one request).
            budget.call(db.transact_write_items, TransactItems=[{"Update": tombstone}, {"Update": uncount}])
            return
        except db.exceptions.TransactionCanceledException as exc:
            reasons = exc.response.get("CancellationReasons", [])
            if reasons and reasons[0].get("Code") == "ConditionalCheckFailed":
                old_item = reasons[0].get("Item")
                # No counted session to take out: gone, or being deleted already (still purge what an interrupted
                # delete left), or an import's placeholder, which was never counted.
                uncounted = bool(old_item) and "deleting" not in old_item
                break
            budget.after_fault(exc)  # throttled or conflicting: retry (a lost answer shows as a tombstone)
    if uncounted:
        # Tombstone it alone: it was never counted.
        tombstone["ConditionExpression"] = "attribute_exists(PK) AND attribute_not_exists(deleting)"
        del tombstone["ExpressionAttributeNames"], tombstone["ReturnValuesOnConditionCheckFailure"]
        with contextlib.suppress(db.exceptions.ConditionalCheckFailedException):
            budget.call(db.update_item, **tombstone)


def live_incarnation(table: Table, key: SessionKey, budget: Budget) -> str | None:
    """The incarnation of the session under ``key`` unless it is absent or being deleted."""
    item = table.session_marks(key, budget)
    if item is None or "deleting" in item:
        return None
    return string_attr(item, "inc")


def purge(table: Table, key: SessionKey, budget: Budget, *, created: bool = False, payloads: bool = True) -> None:
    """Delete the events and payloads of every incarnation of ``key`` but the live one (if any).

    ``created``: a create has just stored the live incarnation; with no event in the partition there is
    nothing of an earlier life of the id to purge (one Query, the usual case). ``payloads`` False: the bucket holds
    none to delete (a deleted session that never uploaded one, ``NO_PAYLOADS_ATTR``): its events only."""
    started = table.now()
    found = _purge_items(table, key, budget, created=created)
    if (not found and created) or not payloads:
        return

    def keep() -> str | None:
        # Read again for every page deleted: a session re-created meanwhile keeps its payloads.
        live = live_incarnation(table, key, budget)
        return incarnation_prefix(key, live) if live else None

    # Objects written after the purge began belong to a session created since (or to an append of the
    # deleted one that cannot commit: it stays tagged staged and the lifecycle rule expires it).
    budget.call(table.blobs.delete_prefix, blob_prefix(key), keep_prefix=keep, modified_before=started)


def _purge_items(table: Table, key: SessionKey, budget: Budget, *, created: bool) -> bool:
    """Delete the items of the session's events partition that are not the live incarnation's; True when there
    were any to look at."""
    params: dict[str, Any] = {
        "TableName": table.name,
        "KeyConditionExpression": "PK = :pk",
        "ExpressionAttributeValues": {":pk": S(events_pk(key))},
        "ProjectionExpression": "PK, SK, inc",
        "ConsistentRead": True,
    }
    found = False
    while True:
        response = budget.call(table.db.query, **params)
        items = response.get("Items", [])
        if created:
            # The state item a create has just put is the live incarnation's: alone, nothing to purge.
            items = [i for i in items if i["SK"]["S"] != STATE_SK]
        if items:
            found = True
            # Read per page: a session re-created meanwhile keeps its events.
            live = live_incarnation(table, key, budget)
            doomed = [{"PK": i["PK"], "SK": i["SK"]} for i in items if live is None or string_attr(i, "inc") != live]
            batch_write(table.db, table.name, [{"DeleteRequest": {"Key": k}} for k in doomed], budget)
        if "LastEvaluatedKey" not in response:
            return found
        params["ExclusiveStartKey"] = response["LastEvaluatedKey"]


# --- imports under way -----------------------------------------------------------------------------------------------


def stale_import(marks: dict[str, Any]) -> bool:
    """Whether an import placeholder was left by an import that died (older than ``IMPORT_STALE_S``)."""
    started = number_attr(marks, "import_started")
    return started is None or started < Table.now() - IMPORT_STALE_S


def import_under_way(marks: dict[str, Any]) -> ServiceUnavailable:
    """503 until an import's placeholder is stale: the import may still be writing (or died a moment ago)."""
    started = number_attr(marks, "import_started") or 0.0
    wait = max(1, int(started + IMPORT_STALE_S - Table.now()) + 1)
    return ServiceUnavailable(
        "an import of the session is under way (or failed moments ago); retry after it ends", retry_after=wait
    )
