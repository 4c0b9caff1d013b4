"""One transaction of the append path: the events of a chunk, their state deltas and the session's counters,
stored together or not at all.

The conditional update of the session's ``version`` and ``last_seq`` serialises appends. The state items (the
session's, the user's, the app's) are written only inside a transaction conditioned on the session item, so that
condition guards them too. A compaction event moves ``last_seq`` but not ``version`` (the ETag counts client
appends only), hence the condition on both.
"""

from __future__ import annotations

from typing import Any

from ...limits import MAX_TRANSACT_BYTES, MAX_TRANSACT_ITEMS
from ...runtime.aws import error_code
from ...runtime.lazyclass import dataclass  # processed on first instance (lazyclass.py)
from ..ports import NewEvent, SessionKey
from .items import TimeOrder, with_body, with_payload
from .keys import (
    NO_PAYLOADS_ATTR,
    STATE_EXPIRY_ATTR,
    STATE_SK,
    N,
    S,
    Update,
    app_pk,
    compact_json,
    due_shard,
    event_key,
    number_attr,
    session_key,
    session_pk,
    state_key,
    string_attr,
    whole_attr,
)
from .retries import Unsettled, collection_full, state_too_large, too_big, transient
from .table import Table


@dataclass(frozen=True)
class Counters:
    """What an append reads of the session item (consistently) and conditions its transaction on."""

    version: int
    last_seq: int
    update_time: float
    summary_end_seq: int
    incarnation: str
    time_order: TimeOrder  # TIME_MAX_ATTR, TIME_SKEW_ATTR
    deletions: int = 0
    state_expiry: float | None = None  # when the session's state item expires (with a retention)
    no_payloads: bool = False  # NO_PAYLOADS_ATTR: no payload uploaded under this incarnation yet


@dataclass
class Staged:
    body: str  # the event JSON
    offload: bool  # too large for an item: the body goes to S3
    blob_key: str = ""  # the S3 key once uploaded

    @property
    def item_bytes(self) -> int:
        return 0 if self.offload else len(self.body)


@dataclass(frozen=True)
class Existing:
    """A cancelled append: the stored items of the event ids that cancelled it (none: a lost race)."""

    items: dict[str, dict[str, Any]]


@dataclass(frozen=True)
class Watermark:
    """A compaction's write: its event id, the seq it covers through, the watermark it was planned on and the
    incarnation of the session it read (None: any)."""

    event_id: str
    end_seq: int
    expected_end_seq: int
    incarnation: str | None
    deletions: int | None = None


class WatermarkMoved(Exception):
    """Another compaction committed first."""


def read_counters(table: Table, key: SessionKey) -> Counters | None:
    """The session item's counters (a consistent GetItem); None when it is absent, deleted or being imported."""
    response = table.db.get_item(
        TableName=table.name,
        Key=session_key(key),
        ConsistentRead=True,
        ProjectionExpression=(
            "version, last_seq, update_time, cmp_end, inc, deleting, importing, dels, stx, tmax, tskew, nb"
        ),
    )
    item = response.get("Item")
    if item is None or "deleting" in item or "importing" in item:
        return None
    return Counters(
        version=int(item["version"]["N"]),
        last_seq=int(item["last_seq"]["N"]),
        update_time=float(item["update_time"]["N"]),
        summary_end_seq=int(item.get("cmp_end", {"N": "0"})["N"]),
        incarnation=string_attr(item, "inc"),
        time_order=TimeOrder.of(item) or TimeOrder(0.0, 0.0),
        deletions=whole_attr(item, "dels"),
        state_expiry=number_attr(item, STATE_EXPIRY_ATTR),
        no_payloads=NO_PAYLOADS_ATTR in item,
    )


def take_chunk(table: Table, pending: list[NewEvent], staged: dict[str, Staged]) -> list[NewEvent]:
    """The longest prefix of ``pending`` that fits one transaction (item count and total size)."""
    chunk: list[NewEvent] = []
    size = 0
    user = app = session = False
    for event in pending:
        if event.id not in staged:
            body = compact_json(event.body)
            staged[event.id] = Staged(body, len(body.encode()) > table.offload_bytes)
        item_bytes = staged[event.id].item_bytes
        user = user or bool(event.delta.user)
        app = app or bool(event.delta.app)
        session = session or bool(event.delta.session)
        actions = len(chunk) + 1 + 1 + user + app + session  # the events, the session update, the state items
        if chunk and (actions > MAX_TRANSACT_ITEMS or size + item_bytes > MAX_TRANSACT_BYTES):
            break
        chunk.append(event)
        size += item_bytes
    return chunk


def transact(
    table: Table,
    key: SessionKey,
    chunk: list[NewEvent],
    staged: dict[str, Staged],
    meta: Counters,
    watermark: Watermark | None,
    token: str,
) -> list[dict[str, Any]] | Existing:
    """One transaction. Returns the stored events, or the already stored items whose ids made it fail
    (none when it failed on the session's condition: a concurrent append won, or the session changed).
    Raises Unsettled when a retry can clear the failure (the transaction may have been applied)."""
    now = table.now()
    # A client append counts in the version (the ETag); a compaction (server-authored) does not, so an
    # If-Match a client took before it still matches. Both move last_seq.
    version = meta.version + 1 if watermark is None else meta.version
    puts, stored = _event_puts(table, key, chunk, staged, meta, version, token, now)
    session_state: dict[str, Any] = {}
    user_state: dict[str, Any] = {}
    app_state: dict[str, Any] = {}
    for event in chunk:
        session_state.update(event.delta.session)
        user_state.update(event.delta.user)
        app_state.update(event.delta.app)
    update = _counters_update(table, key, chunk, meta, watermark, version, now)
    state_update = _state_item_update(table, key, session_state, meta, update, now)
    actions = [_session_action(table, key, update, meta, watermark, now), *puts]
    if state_update is not None:
        actions.append(state_update)
    if user_state:
        actions.append(table.state_update(session_pk(key.app_name, key.user_id), STATE_SK, user_state))
    if app_state:
        actions.append(table.state_update(app_pk(key.app_name), STATE_SK, app_state))
    existing = _write(table, chunk, actions)
    return stored if existing is None else existing


def _event_puts(
    table: Table,
    key: SessionKey,
    chunk: list[NewEvent],
    staged: dict[str, Staged],
    meta: Counters,
    version: int,
    token: str,
    now: float,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The chunk's Puts, numbered from ``last_seq`` as read, and the events as they will read once stored."""
    expiry = table.expiry(now)
    puts: list[dict[str, Any]] = []
    stored: list[dict[str, Any]] = []
    seq = meta.last_seq
    for event in chunk:
        seq += 1
        item: dict[str, Any] = {
            **event_key(key, event.id),
            "seq": N(seq),
            "t": N(event.timestamp),
            "w": S(token),
            "v": N(version),
            "inc": S(meta.incarnation),
        }
        body = staged[event.id]
        if body.offload:
            with_payload(item, body.blob_key, event.body)
        if expiry:
            item["expires_at"] = expiry
        if not body.offload:
            with_body(item, body.body)
        put = {
            "TableName": table.name,
            "Item": item,
            "ConditionExpression": "attribute_not_exists(PK)",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        puts.append({"Put": put})
        stored.append(dict(event.body, seq=seq))
    return puts, stored


def _counters_update(
    table: Table,
    key: SessionKey,
    chunk: list[NewEvent],
    meta: Counters,
    watermark: Watermark | None,
    version: int,
    now: float,
) -> Update:
    """The session item's update: ``last_seq``, its time order, and a client append's version, update time and
    due mark, or a compaction's watermark."""
    update = Update()
    update.set("last_seq", N(meta.last_seq + len(chunk)))
    # Under the same condition as the counters: exact, as last_seq is.
    order = meta.time_order.after([e.timestamp for e in chunk])
    if order != meta.time_order:
        for name, value in order.attributes().items():
            update.set(name, value)
    if watermark is None:
        update.set("version", N(version))
        # last_update_time is a client's too: a compaction neither moves it nor reorders the listings.
        update.set("update_time", N(max(meta.update_time, max(e.timestamp for e in chunk))))
    expiry = table.expiry(now)
    if expiry:
        update.set("expires_at", expiry)
    return update


def _state_item_update(
    table: Table, key: SessionKey, state: dict[str, Any], meta: Counters, update: Update, now: float
) -> dict[str, Any] | None:
    """The session's state item's Update, if any. It is written only when the chunk changes the state (its
    delta's keys, not the whole state), or, with a retention, when the session would now outlive it (about once a
    retention period; the session item's ``update`` records its new expiry). Inside the transaction: the session
    item's condition guards it as it guards the counters."""
    state_update = Update()
    state_update.set_state(state)
    state_expiry = table.state_expiry(now)
    if state_expiry and (
        state_update.sets or (meta.state_expiry is not None and meta.state_expiry < now + table.retention_s)
    ):
        state_update.set("expires_at", state_expiry)
        update.set(STATE_EXPIRY_ATTR, state_expiry)
    if not state_update.sets:
        return None
    state_update.set("inc", S(meta.incarnation))
    return {
        "Update": {
            "TableName": table.name,
            "Key": state_key(key),
            "UpdateExpression": state_update.expression(),
            "ExpressionAttributeNames": state_update.names,
            "ExpressionAttributeValues": state_update.values,
        }
    }


def _session_action(
    table: Table, key: SessionKey, update: Update, meta: Counters, watermark: Watermark | None, now: float
) -> dict[str, Any]:
    """The session item's conditional Update. The seqs were numbered from last_seq as read: conditioning on it (not
    only on the version, which a compaction leaves alone) means two transactions numbered from the same last_seq
    never both commit, so no two items of a session share a seq. The same incarnation, not being deleted: counters
    read from a deleted session never reach a new one."""
    update.values[":expected"] = N(meta.version)
    update.values[":last_seq"] = N(meta.last_seq)
    update.names["#inc"] = "inc"
    update.values[":inc"] = S(meta.incarnation)
    condition = "version = :expected AND last_seq = :last_seq AND attribute_not_exists(deleting) AND #inc = :inc"
    if watermark is None:
        # Mark the session for the compaction schedule (a sparse index: only due sessions carry `due`).
        update.set("due", S(due_shard(key)), if_absent=True)
        update.set("due_since", N(now), if_absent=True)
    else:
        condition += _watermark_condition(update, watermark)
    return {
        "Update": {
            "TableName": table.name,
            "Key": session_key(key),
            "UpdateExpression": update.expression(),
            "ConditionExpression": condition,
            "ExpressionAttributeNames": update.names,
            "ExpressionAttributeValues": update.values,
        }
    }


def _watermark_condition(update: Update, watermark: Watermark) -> str:
    """A compaction moves the watermark from the one it was planned on, and only if no deletion came since the
    compaction read the events (its summary may hold their text)."""
    update.set("cmp_id", S(watermark.event_id))
    update.set("cmp_end", N(watermark.end_seq))
    update.values[":cmp_prev"] = N(watermark.expected_end_seq)
    update.names["#cmp"] = "cmp_end"
    condition = " AND (attribute_not_exists(#cmp) OR #cmp = :cmp_prev)"
    if watermark.deletions is not None:
        update.names["#dels"] = "dels"
        if watermark.deletions:
            update.values[":dels"] = N(watermark.deletions)
            condition += " AND #dels = :dels"
        else:
            condition += " AND attribute_not_exists(#dels)"
    return condition


def _write(table: Table, chunk: list[NewEvent], actions: list[dict[str, Any]]) -> Existing | None:
    """Run the transaction: None when it committed, the stored items whose ids cancelled it, or Unsettled."""
    db = table.db
    try:
        db.transact_write_items(TransactItems=actions)
    except db.exceptions.TransactionCanceledException as exc:
        reasons = exc.response.get("CancellationReasons", [])
        codes = {r.get("Code", "None") for r in reasons}
        if "ValidationError" in codes:
            raise state_too_large("actions.state_delta") from exc
        if "ItemCollectionSizeLimitExceeded" in codes:
            raise collection_full() from exc
        existing = {
            event.id: reason["Item"]
            for event, reason in zip(chunk, reasons[1 : 1 + len(chunk)], strict=False)
            if reason.get("Code") == "ConditionalCheckFailed" and "Item" in reason
        }
        if existing or codes <= {"None", "ConditionalCheckFailed"}:
            return Existing(existing)
        # Throttled, a conflicting transaction, or a reason we do not know: retry within the budget.
        raise Unsettled(str(sorted(codes))) from exc
    except Exception as exc:
        code = error_code(exc)
        if too_big(exc):
            raise state_too_large("actions.state_delta") from exc
        if code == "ItemCollectionSizeLimitExceededException":
            raise collection_full() from exc
        if transient(exc):
            raise Unsettled(code or type(exc).__name__) from exc
        raise
    return None
