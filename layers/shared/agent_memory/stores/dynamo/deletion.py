"""Deleting events: one conditional update hides them at once (``hide``), a purge removes their items after.

Reads leave the hidden seq ranges out until ``purge_deleted`` has removed their items and taken the ranges out of
``hide``; ``dels`` counts the deletions, so that a read that met one committing under it reads again.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from ...errors import PreconditionFailed, ServiceUnavailable, SessionNotFound
from ..ports import DeleteResult, Deletion, DeletionRaced, SeqRange, SessionKey, SessionRecord
from .items import hidden_ranges, hide_json
from .keys import N, S, Update, due_shard, events_pk, session_key, string_attr, whole_attr
from .retries import Budget, parallel_batch_write, transient
from .table import Table, by_seq

# How long one request purges deleted events before it answers 503 (the deletion is committed, the events no longer
# read; the retry, or the next deletion of the session, goes on where it stopped).
PURGE_BUDGET_S = 18.0
# Events purged per Query (keys only): each page's derived data is settled before its items go.
_PURGE_PAGE = 2_000
# What ``delete_events`` reads of the session item when it reads it.
_DELETE_PROJECTION = "version, last_seq, dels, hide, inc, deleting, dtok"


def delete_events(table: Table, key: SessionKey, deletion: Deletion, expected_version: int | None) -> DeleteResult:
    """One conditional UpdateItem of the session item, whatever the number of events: it adds the deletion's
    seq ranges to ``hide`` (reads leave them out until ``purge_deleted`` has removed their items), counts it in
    ``dels``, moves ``version`` and the watermark and marks the session due. Conditioned on the counters the
    plan was made on; the request's token ``dtok`` recognises an update whose answer was lost."""
    budget = Budget()
    token = uuid.uuid4().hex
    seen = deletion.record
    while True:
        # The plan's record (a consistent read a moment ago) stands in for the first read: the update is
        # conditioned on its counters, so a session that moved since fails it and is read below.
        item = _item_of(seen) if seen is not None else table.session_item(key, budget, _DELETE_PROJECTION)
        seen = None
        if item is None or "deleting" in item:
            raise SessionNotFound(key.session_id)
        version = whole_attr(item, "version")
        if string_attr(item, "dtok") == token:  # an attempt whose answer was lost landed
            return DeleteResult(version=version)
        if expected_version is not None and version != expected_version:
            raise PreconditionFailed(
                f"If-Match version {expected_version} is not the current version {version}", field="If-Match"
            )
        if (whole_attr(item, "last_seq"), whole_attr(item, "dels")) != (
            deletion.based_on_seq,
            deletion.based_on_deletions,
        ):
            raise DeletionRaced()
        hidden = _merged([*hidden_ranges(item), *deletion.ranges])
        params = _hiding_update(key, item, deletion, hidden, token)
        try:
            table.db.update_item(TableName=table.name, ReturnValuesOnConditionCheckFailure="ALL_OLD", **params)
        except table.db.exceptions.ConditionalCheckFailedException as exc:
            old = exc.response.get("Item") or {}
            if string_attr(old, "dtok") == token:  # botocore's retry met our own applied update
                return DeleteResult(version=version + 1)
            budget.after_race()  # the session moved under us: read it again (and tell why)
            continue
        except Exception as exc:
            if not transient(exc):
                raise
            budget.after_fault(exc)  # maybe applied: the next read tells by dtok
            continue
        return DeleteResult(version=version + 1, hidden=tuple(hidden))


def _hiding_update(
    key: SessionKey, item: dict[str, Any], deletion: Deletion, hidden: list[SeqRange], token: str
) -> dict[str, Any]:
    """The session item's update that commits ``deletion``, conditioned on the counters ``item`` holds."""
    version, deletions = whole_attr(item, "version"), whole_attr(item, "dels")
    update = Update()
    update.set("version", N(version + 1))
    update.set("dels", N(deletions + 1))
    update.set("hide", S(hide_json(hidden)))
    update.set("dtok", S(token))
    update.set("due", S(due_shard(key)), if_absent=True)
    update.set("due_since", N(Table.now()), if_absent=True)
    # The watermark falls back to the newest summary left (none: no summary to start the context from).
    if deletion.summary_event_id is not None:
        update.set("cmp_id", S(deletion.summary_event_id))
        update.set("cmp_end", N(deletion.summary_end_seq))
        expression = update.expression()
    else:
        update.set("cmp_end", N(0))
        expression = update.expression() + " REMOVE cmp_id"
    update.names["#dl"] = "deleting"
    update.values[":expected"] = N(version)
    update.values[":last_seq"] = N(deletion.based_on_seq)
    condition = "version = :expected AND last_seq = :last_seq AND attribute_not_exists(#dl)"
    if deletions:
        update.values[":dels_prev"] = N(deletions)
        condition += " AND dels = :dels_prev"
    else:
        condition += " AND attribute_not_exists(dels)"
    update.values[":inc"] = S(string_attr(item, "inc"))
    condition += " AND inc = :inc"
    return {
        "Key": session_key(key),
        "UpdateExpression": expression,
        "ConditionExpression": condition,
        "ExpressionAttributeNames": update.names,
        "ExpressionAttributeValues": update.values,
    }


def _item_of(record: SessionRecord) -> dict[str, Any]:
    """The attributes of the session item that ``delete_events`` conditions on, as ``record`` read them."""
    item: dict[str, Any] = {"version": N(record.version), "last_seq": N(record.last_seq), "inc": S(record.incarnation)}
    if record.deletions:
        item["dels"] = N(record.deletions)
    if record.hidden:
        item["hide"] = S(hide_json(list(record.hidden)))
    return item


def _merged(ranges: list[SeqRange]) -> list[SeqRange]:
    """Overlapping or adjacent ranges joined, ascending."""
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return [(lo, hi) for lo, hi in out]


def purge_deleted(
    table: Table, key: SessionKey, before: Callable[[list[str]], None], hidden: tuple[SeqRange, ...] | None = None
) -> int:
    """Page by page (keys only) through the hidden ranges: ``before(ids)``, then every version of the page's
    offloaded payloads, then its items; once all are gone the ranges leave ``hide``. Stops with 503 after
    ``PURGE_BUDGET_S`` (reads stay right meanwhile; the next call goes on). ``hidden`` (the caller's, just
    read or just written) saves reading ``hide`` first; ranges purged meanwhile by another request are
    found empty."""
    budget = Budget()
    started = time.monotonic()
    if hidden is None:
        item = table.session_item(key, budget, "hide")
    else:
        item = {"hide": S(hide_json(list(hidden)))} if hidden else {}
    ranges = hidden_ranges(item or {})
    if not ranges:
        return 0
    removed = 0
    for lo, hi in ranges:
        removed += _purge_range(table, events_pk(key), lo, hi, before, budget, started)
    _unhide(table, key, ranges, budget, item)
    return removed


def _purge_range(
    table: Table, pk: str, lo: int, hi: int, before: Callable[[list[str]], None], budget: Budget, started: float
) -> int:
    """Remove the items of one hidden range (and their payloads), a page at a time; how many were removed."""
    removed = 0
    while True:
        params = by_seq(pk, lo, hi) | {
            "ProjectionExpression": "PK, SK, #blob",
            "ExpressionAttributeNames": {"#blob": "blob"},  # a reserved word
        }
        # From the range's start each time: the items of the page before are gone.
        response = budget.call(table.db.query, TableName=table.name, ConsistentRead=True, Limit=_PURGE_PAGE, **params)
        items = response.get("Items", [])
        if not items:
            return removed
        before([i["SK"]["S"][2:] for i in items])
        for blob in (i["blob"]["S"] for i in items if "blob" in i):
            # Every version of the payload the item names. (Uploads of failed resends, under other tokens, are
            # still tagged staged: the lifecycle rule expires them. Not the event's whole folder: a new
            # event may reuse the id once this one is gone.)
            budget.call(table.blobs.delete_prefix, blob)
        deletes = [{"DeleteRequest": {"Key": {"PK": i["PK"], "SK": i["SK"]}}} for i in items]
        parallel_batch_write(table.db, table.name, deletes)
        removed += len(items)
        if time.monotonic() - started > PURGE_BUDGET_S:
            raise ServiceUnavailable(
                "the events are deleted (no read shows them); removing them from storage takes longer: "
                "send the request again to finish",
                retry_after=1,
            )
        if "LastEvaluatedKey" not in response:
            return removed  # the page held the rest of the range: nothing is left to ask for


def _unhide(
    table: Table, key: SessionKey, ranges: list[SeqRange], budget: Budget, seen: dict[str, Any] | None = None
) -> None:
    """Take purged ranges out of ``hide`` (those a deletion added meanwhile stay). ``seen``: the session item's
    ``hide`` as the purge started from, tried first (conditional: a ``hide`` changed since is read)."""
    while True:
        item = seen if seen is not None else table.session_item(key, budget, "hide")
        seen = None
        if item is None or "hide" not in item:
            return
        rest = [r for r in hidden_ranges(item) if not any(lo <= r[0] and r[1] <= hi for lo, hi in ranges)]
        params: dict[str, Any] = {
            "TableName": table.name,
            "Key": session_key(key),
            "ConditionExpression": "hide = :old",
            "ExpressionAttributeValues": {":old": item["hide"]},
        }
        if rest:
            params["UpdateExpression"] = "SET hide = :rest"
            params["ExpressionAttributeValues"][":rest"] = S(hide_json(rest))
        else:
            params["UpdateExpression"] = "REMOVE hide"
        try:
            budget.call(table.db.update_item, **params)
            return
        except table.db.exceptions.ConditionalCheckFailedException:
            budget.after_race()  # another deletion added ranges (or a retry removed ours): read it again
