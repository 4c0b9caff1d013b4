"""The DynamoDB session store: one table, one item per event, atomic appends, no Scan.

Items (``PK`` / ``SK``):

- session      ``U#{app}#{user}`` / ``S#{session}``  counters, times and session state
- user state   ``U#{app}#{user}`` / ``#STATE``
- app state    ``A#{app}``        / ``#STATE``
- event        ``E#{app}#{user}#{session}`` / ``V#{event id}``  with ``seq`` and ``ts``; local secondary
  indexes ``by_seq`` and ``by_ts`` order a session's events by sequence number and by timestamp.

Keying events by id makes the id unique within the session, and the conditional update of the session's
``version`` serialises appends: one TransactWriteItems per append stores the events, their state deltas and the
counters together or not at all. State keys are stored as top-level attributes ``st:{key}`` holding JSON text, so
an update can set a key whether or not the item exists and values keep their JSON types exactly.
Events whose item would pass the offload threshold keep their body in S3 under the session's prefix.

Reads never fail on what is stored (data of older versions, or written by anyone holding the table): JSON is
decoded by ``jsonio.load_stored`` (any depth, any number); a state key whose value does not read is left out
with a warning; an event whose body does not read (or whose S3 payload is gone) reads as a marker event with
``error_code`` ``unreadable_event``; times outside what a datetime holds are clamped into it.
"""

from __future__ import annotations

import json
import logging
import random
import time
import uuid
import zlib
from dataclasses import dataclass
from typing import Any

from ..aws import error_code
from ..errors import Conflict, PayloadTooLarge, PreconditionFailed, SessionNotFound
from ..jsonio import Unreadable, event_size, load_stored, readable_timestamp
from ..policy.state import ScopedDelta
from .ports import AppendResult, BlobStore, EventQuery, NewEvent, SessionKey, SessionRecord

logger = logging.getLogger(__name__)

STATE_ATTR_PREFIX = "st:"
STATE_SK = "#STATE"
MAX_TRANSACT_ITEMS = 100
# DynamoDB caps a transaction at 4 MB; keep a margin for keys and attribute names.
MAX_TRANSACT_BYTES = 3_500_000
APPEND_TIME_BUDGET_S = 20.0
# Cancellation reasons an append resolves itself: a lost race (retry) or a stored event id (answer with it).
_RETRYABLE_CODES = {"None", "ConditionalCheckFailed", "TransactionConflict", "ThrottlingError"}


DUE_SHARDS = 8
# Above any seq a session reaches; the upper bound of an open seq range.
_MAX_SEQ = 2**62
# A paged read of the newest N events reads them newest first in one query when N is at most this (items in
# memory: at most this many); a larger N finds its window's first seq first (no bodies), then pages forward.
_BACKWARD_READ_MAX = 100
# A Query's Limit stays an int32 whatever a client asks for (one call returns at most 1 MB anyway).
_QUERY_LIMIT_MAX = 10_000


class _Duplicates(list[dict[str, Any]]):
    """Stored events whose ids cancelled an append transaction."""


@dataclass(frozen=True)
class _Counters:
    version: int
    last_seq: int
    update_time: float
    summary_end_seq: int


@dataclass(frozen=True)
class _Watermark:
    """A compaction's write: its event id, the seq it covers through, and the watermark it was planned on."""

    event_id: str
    end_seq: int
    expected_end_seq: int


class _WatermarkMoved(Exception):
    """Another compaction committed first."""


class _Page:
    """Events read for one query, oldest first, up to its ``limit`` and ``max_bytes``."""

    def __init__(self, query: EventQuery) -> None:
        self.query = query
        self.events: list[dict[str, Any]] = []
        self.size = 0

    def take(self, items: list[dict[str, Any]], read: Any) -> bool:
        """Read ``items`` in order into the page; True once it is full (later items are never read)."""
        query = self.query
        for item in items:
            event = read(item, verbatim=query.verbatim)
            self.events.append(event)
            if query.limit is not None and len(self.events) >= query.limit:
                return True
            if query.max_bytes is not None:
                self.size += event_size(event)
                if self.size >= query.max_bytes:
                    return True
        return False


def due_shard(key: SessionKey) -> str:
    """The partition of the due index a session goes to (spread so that no partition is hot)."""
    return f"DUE#{zlib.crc32(f'{key.app_name}#{key.user_id}#{key.session_id}'.encode()) % DUE_SHARDS}"


def session_pk(app_name: str, user_id: str) -> str:
    return f"U#{app_name}#{user_id}"


def events_pk(key: SessionKey) -> str:
    return f"E#{key.app_name}#{key.user_id}#{key.session_id}"


def blob_prefix(key: SessionKey) -> str:
    """Where a session's offloaded payloads live in the context bucket."""
    return f"sessions/{key.app_name}/{key.user_id}/{key.session_id}/"


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: float | int) -> dict[str, str]:
    return {"N": repr(value) if isinstance(value, float) else str(value)}


def _state_from_item(item: dict[str, Any]) -> dict[str, Any]:
    """The ``st:`` attributes of an item as state; a value that does not read is left out (logged), never fatal.

    Values come back verbatim (``RawJSON`` past ``jsonio.MAX_DEPTH``): state only ever goes into responses.
    """
    state: dict[str, Any] = {}
    for name, value in item.items():
        if not name.startswith(STATE_ATTR_PREFIX):
            continue
        try:
            text = value["S"]
            state[name[len(STATE_ATTR_PREFIX) :]] = load_stored(text, verbatim=True)
        except (KeyError, TypeError, Unreadable) as exc:
            logger.warning(
                "stored state value does not read; left out",
                extra={"pk": item.get("PK", {}).get("S"), "attribute": name, "error": str(exc)[:200]},
            )
    return state


class _Update:
    """Builds an UpdateExpression's SET clause with placeholder names and values."""

    def __init__(self) -> None:
        self.sets: list[str] = []
        self.names: dict[str, str] = {}
        self.values: dict[str, Any] = {}

    def set(self, attr: str, value: dict[str, Any], *, if_absent: bool = False) -> None:
        i = len(self.names)
        self.names[f"#a{i}"] = attr
        self.values[f":v{i}"] = value
        self.sets.append(f"#a{i} = if_not_exists(#a{i}, :v{i})" if if_absent else f"#a{i} = :v{i}")

    def set_state(self, state: dict[str, Any]) -> None:
        for k, v in state.items():
            self.set(STATE_ATTR_PREFIX + k, _s(json.dumps(v, separators=(",", ":"))))

    def expression(self) -> str:
        return "SET " + ", ".join(self.sets)


class DynamoSessionStore:
    def __init__(
        self,
        client: Any,
        table_name: str,
        blobs: BlobStore,
        *,
        offload_bytes: int = 350_000,
        retention_days: int = 0,
    ) -> None:
        self._db = client
        self._table = table_name
        self._blobs = blobs
        self._offload_bytes = offload_bytes
        self._retention_s = retention_days * 86400

    # --- sessions -------------------------------------------------------------------------------------------

    def _expiry(self, now: float) -> dict[str, str] | None:
        return _n(int(now + self._retention_s)) if self._retention_s else None

    def _state_update(self, pk: str, sk: str, state: dict[str, Any]) -> dict[str, Any]:
        update = _Update()
        update.set_state(state)
        return {
            "Update": {
                "TableName": self._table,
                "Key": {"PK": _s(pk), "SK": _s(sk)},
                "UpdateExpression": update.expression(),
                "ExpressionAttributeNames": update.names,
                "ExpressionAttributeValues": update.values,
            }
        }

    def create_session(self, record: SessionRecord, delta: ScopedDelta) -> tuple[SessionRecord, bool]:
        item: dict[str, Any] = {
            "PK": _s(session_pk(record.app_name, record.user_id)),
            "SK": _s(f"S#{record.session_id}"),
            "app_name": _s(record.app_name),
            "user_id": _s(record.user_id),
            "session_id": _s(record.session_id),
            "create_time": _n(record.create_time),
            "update_time": _n(record.update_time),
            "version": _n(0),
            "last_seq": _n(0),
        }
        expiry = self._expiry(record.update_time)
        if expiry:
            item["expires_at"] = expiry
        for k, v in delta.session.items():
            item[STATE_ATTR_PREFIX + k] = _s(json.dumps(v, separators=(",", ":")))
        actions: list[dict[str, Any]] = [
            {"Put": {"TableName": self._table, "Item": item, "ConditionExpression": "attribute_not_exists(PK)"}}
        ]
        if delta.user:
            actions.append(self._state_update(session_pk(record.app_name, record.user_id), STATE_SK, delta.user))
        if delta.app:
            actions.append(self._state_update(f"A#{record.app_name}", STATE_SK, delta.app))
        try:
            if len(actions) == 1:
                self._db.put_item(**actions[0]["Put"])
            else:
                self._db.transact_write_items(TransactItems=actions)
        except self._db.exceptions.ConditionalCheckFailedException:
            pass
        except self._db.exceptions.TransactionCanceledException as exc:
            if _reason_codes(exc)[0] != "ConditionalCheckFailed":
                raise
        else:
            stored = self.get_session(SessionKey(record.app_name, record.user_id, record.session_id))
            assert stored is not None
            return stored, True
        existing = self.get_session(SessionKey(record.app_name, record.user_id, record.session_id))
        if existing is None:  # deleted between our write and read: create again
            return self.create_session(record, delta)
        return existing, False

    def get_session(self, key: SessionKey) -> SessionRecord | None:
        pk = session_pk(key.app_name, key.user_id)
        keys = [
            {"PK": _s(pk), "SK": _s(f"S#{key.session_id}")},
            {"PK": _s(pk), "SK": _s(STATE_SK)},
            {"PK": _s(f"A#{key.app_name}"), "SK": _s(STATE_SK)},
        ]
        found: dict[tuple[str, str], dict[str, Any]] = {}
        request: dict[str, Any] = {self._table: {"Keys": keys, "ConsistentRead": True}}
        while request:
            response = self._db.batch_get_item(RequestItems=request)
            for item in response.get("Responses", {}).get(self._table, []):
                found[(item["PK"]["S"], item["SK"]["S"])] = item
            request = response.get("UnprocessedKeys") or {}
        session = found.get((pk, f"S#{key.session_id}"))
        if session is None:
            return None
        record = _record_from_item(session)
        record.user_state = _state_from_item(found.get((pk, STATE_SK), {}))
        record.app_state = _state_from_item(found.get((f"A#{key.app_name}", STATE_SK), {}))
        return record

    def list_sessions(
        self, app_name: str, user_id: str, limit: int, start_after: str | None
    ) -> tuple[list[SessionRecord], str | None]:
        pk = session_pk(app_name, user_id)
        params: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "PK = :pk AND begins_with(SK, :prefix)",
            "ExpressionAttributeValues": {":pk": _s(pk), ":prefix": _s("S#")},
            "Limit": limit,
        }
        if start_after is not None:
            params["ExclusiveStartKey"] = {"PK": _s(pk), "SK": _s(f"S#{start_after}")}
        response = self._db.query(**params)
        records = [_record_from_item(item) for item in response.get("Items", [])]
        last = response.get("LastEvaluatedKey")
        return records, (last["SK"]["S"][2:] if last else None)

    def delete_session(self, key: SessionKey) -> None:
        pk = session_pk(key.app_name, key.user_id)
        # The session item first: from here on get and append answer 404, and a racing append fails its condition.
        self._db.delete_item(TableName=self._table, Key={"PK": _s(pk), "SK": _s(f"S#{key.session_id}")})
        params: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "PK = :pk",
            "ExpressionAttributeValues": {":pk": _s(events_pk(key))},
            "ProjectionExpression": "PK, SK",
        }
        while True:
            response = self._db.query(**params)
            self._batch_delete([{"PK": i["PK"], "SK": i["SK"]} for i in response.get("Items", [])])
            if "LastEvaluatedKey" not in response:
                break
            params["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        self._blobs.delete_prefix(blob_prefix(key))

    def _batch_delete(self, keys: list[dict[str, Any]]) -> None:
        batch_write(self._db, self._table, [{"DeleteRequest": {"Key": k}} for k in keys])

    # --- events ---------------------------------------------------------------------------------------------

    def append_events(self, key: SessionKey, events: list[NewEvent], expected_version: int | None) -> AppendResult:
        staged: dict[str, tuple[str, str]] = {}  # event id -> (body json, or "" and the S3 key of the body)
        try:
            return self._append(key, events, expected_version, staged, None)
        finally:
            # Payloads offloaded for events that did not land (an error, a duplicate id) are not kept.
            for event_id in list(staged):
                self._discard_staged(staged, event_id)

    def append_compaction(
        self, key: SessionKey, event: NewEvent, end_seq: int, expected_end_seq: int
    ) -> dict[str, Any] | None:
        staged: dict[str, tuple[str, str]] = {}
        try:
            result = self._append(key, [event], None, staged, _Watermark(event.id, end_seq, expected_end_seq))
        except _WatermarkMoved:
            return None
        finally:
            # Payloads offloaded for events that did not land (an error, a duplicate id) are not kept.
            for event_id in list(staged):
                self._discard_staged(staged, event_id)
        return result.events[0]

    def _append(
        self,
        key: SessionKey,
        events: list[NewEvent],
        expected_version: int | None,
        staged: dict[str, tuple[str, str]],
        watermark: _Watermark | None,
    ) -> AppendResult:
        results: dict[str, dict[str, Any]] = {}  # event id -> stored event
        created_ids: set[str] = set()
        pending = _unique_by_id(events)
        deadline = time.monotonic() + APPEND_TIME_BUDGET_S
        attempt = 0
        version = 0
        while pending:
            meta = self._read_counters(key)
            if meta is None:
                raise SessionNotFound(key.session_id)
            version = meta.version
            if watermark is not None and meta.summary_end_seq != watermark.expected_end_seq:
                raise _WatermarkMoved()
            if expected_version is not None and version != expected_version:
                raise PreconditionFailed(
                    f"If-Match version {expected_version} is not the current version {version}", field="If-Match"
                )
            chunk = self._take_chunk(key, pending, staged)
            outcome = self._transact_append(key, chunk, staged, meta, watermark)
            if not isinstance(outcome, _Duplicates):
                for stored in outcome:
                    results[stored["id"]] = stored
                    created_ids.add(stored["id"])
                    staged.pop(stored["id"], None)  # landed: its payload stays
                done = {e.id for e in chunk}
                pending = [e for e in pending if e.id not in done]
                version += 1
                # The precondition held for the batch's first transaction; later chunks (a batch too big for one
                # transaction) only need their own conditional write.
                expected_version = None
                attempt = 0
                continue
            for stored in outcome:
                results[stored["id"]] = stored
                self._discard_staged(staged, stored["id"])
            dup_ids = {d["id"] for d in outcome}
            pending = [e for e in pending if e.id not in dup_ids]
            if not outcome:  # lost a race on the session's version: read again and retry
                attempt += 1
                if time.monotonic() > deadline:
                    raise Conflict("too many concurrent writers on this session; retry the request")
                time.sleep(random.uniform(0, min(0.2, 0.005 * 2**attempt)))
        created: list[bool] = []
        seen: set[str] = set()
        for event in events:
            created.append(event.id in created_ids and event.id not in seen)
            seen.add(event.id)
        return AppendResult(events=[results[e.id] for e in events], created=created, version=version)

    def _read_counters(self, key: SessionKey) -> _Counters | None:
        response = self._db.get_item(
            TableName=self._table,
            Key={"PK": _s(session_pk(key.app_name, key.user_id)), "SK": _s(f"S#{key.session_id}")},
            ConsistentRead=True,
            ProjectionExpression="version, last_seq, update_time, cmp_end",
        )
        item = response.get("Item")
        if item is None:
            return None
        return _Counters(
            version=int(item["version"]["N"]),
            last_seq=int(item["last_seq"]["N"]),
            update_time=float(item["update_time"]["N"]),
            summary_end_seq=int(item.get("cmp_end", {"N": "0"})["N"]),
        )

    def _take_chunk(
        self, key: SessionKey, pending: list[NewEvent], staged: dict[str, tuple[str, str]]
    ) -> list[NewEvent]:
        """The longest prefix of ``pending`` that fits one transaction (item count and total size)."""
        chunk: list[NewEvent] = []
        size = 0
        user = app = False
        for event in pending:
            if event.id not in staged:
                staged[event.id] = self._stage(key, event)
            body, _ = staged[event.id]
            user = user or bool(event.delta.user)
            app = app or bool(event.delta.app)
            actions = len(chunk) + 1 + 1 + user + app  # the events, the session update, the state items
            if chunk and (actions > MAX_TRANSACT_ITEMS or size + len(body) > MAX_TRANSACT_BYTES):
                break
            chunk.append(event)
            size += len(body)
        return chunk

    def _stage(self, key: SessionKey, event: NewEvent) -> tuple[str, str]:
        """Serialise an event; offload its body to S3 when the item would be too large for one item."""
        body = json.dumps(event.body, separators=(",", ":"), ensure_ascii=False)
        if len(body.encode()) <= self._offload_bytes:
            return body, ""
        # A fresh object per attempt: a duplicate id must never overwrite the payload of the stored event.
        blob_key = f"{blob_prefix(key)}events/{event.id}/{uuid.uuid4().hex}.json"
        self._blobs.put(blob_key, body.encode())
        return "", blob_key

    def _discard_staged(self, staged: dict[str, tuple[str, str]], event_id: str) -> None:
        _, blob_key = staged.pop(event_id, ("", ""))
        if blob_key:
            self._blobs.delete(blob_key)

    def _transact_append(
        self,
        key: SessionKey,
        chunk: list[NewEvent],
        staged: dict[str, tuple[str, str]],
        meta: _Counters,
        watermark: _Watermark | None,
    ) -> list[dict[str, Any]] | _Duplicates:
        """One transaction. Returns the stored events, or the already stored events whose ids made it fail
        (empty when it failed on the session's version: a concurrent append won)."""
        now = time.time()
        expiry = self._expiry(now)
        stored: list[dict[str, Any]] = []
        actions: list[dict[str, Any]] = []
        session_state: dict[str, Any] = {}
        user_state: dict[str, Any] = {}
        app_state: dict[str, Any] = {}
        seq = meta.last_seq
        for event in chunk:
            seq += 1
            body, blob_key = staged[event.id]
            item: dict[str, Any] = {
                "PK": _s(events_pk(key)),
                "SK": _s(f"V#{event.id}"),
                "seq": _n(seq),
                "ts": _n(event.timestamp),
            }
            if blob_key:
                item["blob"] = _s(blob_key)
            else:
                item["body"] = _s(body)
            if expiry:
                item["expires_at"] = expiry
            actions.append(
                {
                    "Put": {
                        "TableName": self._table,
                        "Item": item,
                        "ConditionExpression": "attribute_not_exists(PK)",
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                }
            )
            stored.append(dict(event.body, seq=seq))
            session_state.update(event.delta.session)
            user_state.update(event.delta.user)
            app_state.update(event.delta.app)

        update = _Update()
        update.set("version", _n(meta.version + 1))
        update.set("last_seq", _n(seq))
        update.set("update_time", _n(max(meta.update_time, max(e.timestamp for e in chunk))))
        if expiry:
            update.set("expires_at", expiry)
        update.set_state(session_state)
        update.values[":expected"] = _n(meta.version)
        condition = "version = :expected"
        if watermark is None:
            # Mark the session for the compaction schedule (a sparse index: only due sessions carry `due`).
            update.set("due", _s(due_shard(key)), if_absent=True)
            update.set("due_since", _n(now), if_absent=True)
        else:
            update.set("cmp_id", _s(watermark.event_id))
            update.set("cmp_end", _n(watermark.end_seq))
            update.values[":cmp_prev"] = _n(watermark.expected_end_seq)
            update.names["#cmp"] = "cmp_end"
            condition += " AND (attribute_not_exists(#cmp) OR #cmp = :cmp_prev)"
        session_action = {
            "Update": {
                "TableName": self._table,
                "Key": {"PK": _s(session_pk(key.app_name, key.user_id)), "SK": _s(f"S#{key.session_id}")},
                "UpdateExpression": update.expression(),
                "ConditionExpression": condition,
                "ExpressionAttributeNames": update.names,
                "ExpressionAttributeValues": update.values,
            }
        }
        actions.insert(0, session_action)
        if user_state:
            actions.append(self._state_update(session_pk(key.app_name, key.user_id), STATE_SK, user_state))
        if app_state:
            actions.append(self._state_update(f"A#{key.app_name}", STATE_SK, app_state))
        try:
            self._db.transact_write_items(TransactItems=actions)
        except self._db.exceptions.TransactionCanceledException as exc:
            reasons = exc.response.get("CancellationReasons", [])
            codes = {r.get("Code", "None") for r in reasons}
            if "ValidationError" in codes:
                raise _too_large() from exc
            if codes - _RETRYABLE_CODES:
                raise
            return _Duplicates(
                self.event_from_item(reason["Item"])
                for reason in reasons[1 : 1 + len(chunk)]
                if reason.get("Code") == "ConditionalCheckFailed" and "Item" in reason
            )
        except self._db.exceptions.ClientError as exc:
            if exc.response["Error"]["Code"] == "ValidationException" and "size" in str(exc):
                raise _too_large() from exc
            raise
        return stored

    def event_from_item(self, item: dict[str, Any], *, verbatim: bool = False) -> dict[str, Any]:
        """An event item (as a Query or a stream record holds it) as event JSON, its body read from S3 if offloaded.

        Never fails on what is stored (see the module): an unreadable body or a missing payload gives a marker
        event; the time is one a datetime holds. S3 faults (throttling, 5xx) still raise.
        """
        try:
            if "blob" in item:
                data: str | bytes = self._blobs.get(item["blob"]["S"])
            else:
                data = item["body"]["S"]
            body = load_stored(data, verbatim=verbatim)
            if not isinstance(body, dict):
                raise Unreadable(f"a JSON {type(body).__name__}, not an object")
        except Unreadable as exc:
            return self._unreadable(item, f"its body is not a JSON object ({exc})", exc)
        except (KeyError, TypeError) as exc:  # no body attribute, or (in-memory blobs) no payload
            reason = "its payload is missing from storage" if "blob" in item else "its item holds no body"
            return self._unreadable(item, reason, exc)
        except Exception as exc:
            if error_code(exc) not in ("NoSuchKey", "404"):
                raise
            return self._unreadable(item, "its payload is missing from storage", exc)
        body["seq"] = _whole(item, "seq")
        if not isinstance(body.get("id"), str):
            body["id"] = _unreadable_event(item, "")["id"]
        body["timestamp"] = readable_timestamp(body.get("timestamp"), readable_timestamp(_number(item, "ts")))
        return body

    @staticmethod
    def _unreadable(item: dict[str, Any], reason: str, exc: BaseException) -> dict[str, Any]:
        marker = _unreadable_event(item, reason[:200])
        logger.warning(
            "stored event does not read; answered as a marker event",
            extra={"pk": item.get("PK", {}).get("S"), "event_id": marker["id"], "error": str(exc)[:200]},
        )
        return marker

    def read_events(self, key: SessionKey, query: EventQuery) -> list[dict[str, Any]]:
        if query.num_recent == 0 or query.limit == 0:
            return []
        pk = events_pk(key)
        low = (query.after_seq or 0) + 1
        high = query.up_to_seq if query.up_to_seq is not None else _MAX_SEQ
        if low > high:
            return []
        paged = query.limit is not None or query.max_bytes is not None
        if query.after_timestamp is not None:
            ts = float(query.after_timestamp)
            if query.after_seq is None or query.num_recent is not None:
                # Where the selection starts (and ends): the seqs of the events at or after the time, read from
                # the by_ts index without bodies; pages after the first resume from their seq instead.
                seqs = sorted(self._seqs_since(pk, ts, low, high))
                if query.num_recent is not None:
                    seqs = seqs[-query.num_recent :]
                if not seqs:
                    return []
                low, high = seqs[0], seqs[-1]
            return self._read_forward(pk, low, high, query, ts)
        if query.num_recent is not None:
            if not paged or query.num_recent <= _BACKWARD_READ_MAX:
                # Newest first, stop after num_recent: one query reads the items, then the page is taken from
                # the oldest of them (payloads in S3 fetched only as far as the page goes).
                items = self._query_all(self._by_seq(pk, low, high) | {"ScanIndexForward": False}, query.num_recent)
                items.reverse()
                page = _Page(query)
                page.take(items, self.event_from_item)
                return page.events
            # A page of the newest num_recent starts at the oldest of them: find its seq without reading bodies.
            newest = self._query_all(
                self._by_seq(pk, low, high) | {"ScanIndexForward": False, "ProjectionExpression": "seq"},
                query.num_recent,
            )
            if not newest:
                return []
            low = int(newest[-1]["seq"]["N"])
        return self._read_forward(pk, low, high, query, None)

    @staticmethod
    def _by_seq(pk: str, low: int, high: int) -> dict[str, Any]:
        return {
            "IndexName": "by_seq",
            "KeyConditionExpression": "PK = :pk AND seq BETWEEN :low AND :high",
            "ExpressionAttributeValues": {":pk": _s(pk), ":low": _n(low), ":high": _n(high)},
        }

    def _seqs_since(self, pk: str, ts: float, low: int, high: int) -> list[int]:
        params: dict[str, Any] = {
            "IndexName": "by_ts",
            "KeyConditionExpression": "PK = :pk AND ts >= :ts",
            "FilterExpression": "seq BETWEEN :low AND :high",
            "ExpressionAttributeValues": {":pk": _s(pk), ":ts": _n(ts), ":low": _n(low), ":high": _n(high)},
            "ProjectionExpression": "seq",
        }
        return [_whole(item, "seq") for item in self._query_all(params, None)]

    def _read_forward(
        self, pk: str, low: int, high: int, query: EventQuery, after_timestamp: float | None
    ) -> list[dict[str, Any]]:
        """Events with low <= seq <= high (and ts >= after_timestamp) oldest first, stopping at the query's
        ``limit`` and ``max_bytes``: a page reads about the items it returns, and no payload past its end."""
        params = self._by_seq(pk, low, high)
        if after_timestamp is not None:
            params["FilterExpression"] = "ts >= :ts"
            params["ExpressionAttributeValues"][":ts"] = _n(after_timestamp)
        page = _Page(query)
        while True:
            if query.limit is not None:
                params["Limit"] = min(query.limit - len(page.events), _QUERY_LIMIT_MAX)
            response = self._db.query(TableName=self._table, ConsistentRead=True, **params)
            if page.take(response.get("Items", []), self.event_from_item) or "LastEvaluatedKey" not in response:
                return page.events
            params["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    # --- the compaction schedule's index ------------------------------------------------------------------

    def list_due(self, limit: int) -> list[SessionKey]:
        keys: list[SessionKey] = []
        for shard in range(DUE_SHARDS):
            if len(keys) >= limit:
                break
            response = self._db.query(
                TableName=self._table,
                IndexName="by_due",
                KeyConditionExpression="due = :d",
                ExpressionAttributeValues={":d": _s(f"DUE#{shard}")},
                Limit=limit - len(keys),
            )
            for item in response.get("Items", []):
                _, app_name, user_id = item["PK"]["S"].split("#", 2)
                keys.append(SessionKey(app_name, user_id, item["SK"]["S"][2:]))
        return keys

    def clear_due(self, key: SessionKey, version: int) -> bool:
        try:
            self._db.update_item(
                TableName=self._table,
                Key={"PK": _s(session_pk(key.app_name, key.user_id)), "SK": _s(f"S#{key.session_id}")},
                UpdateExpression="REMOVE due, due_since",
                ConditionExpression="version = :v",
                ExpressionAttributeValues={":v": _n(version)},
            )
        except self._db.exceptions.ConditionalCheckFailedException:
            return False
        return True

    def _query_all(self, params: dict[str, Any], limit: int | None) -> list[dict[str, Any]]:
        params = {"TableName": self._table, "ConsistentRead": True} | params
        if limit is not None:
            params["Limit"] = min(limit, _QUERY_LIMIT_MAX)
        items: list[dict[str, Any]] = []
        while True:
            response = self._db.query(**params)
            items.extend(response.get("Items", []))
            if "LastEvaluatedKey" not in response or (limit is not None and len(items) >= limit):
                break
            params["ExclusiveStartKey"] = response["LastEvaluatedKey"]
            if limit is not None:
                params["Limit"] = min(limit - len(items), _QUERY_LIMIT_MAX)
        return items[:limit] if limit is not None else items


def batch_write(db: Any, table: str, requests: list[dict[str, Any]]) -> None:
    """BatchWriteItem in chunks of 25, retrying unprocessed items with backoff."""
    for start in range(0, len(requests), 25):
        pending: dict[str, Any] = {table: requests[start : start + 25]}
        delay = 0.05
        while pending:
            response = db.batch_write_item(RequestItems=pending)
            pending = response.get("UnprocessedItems") or {}
            if pending:
                time.sleep(delay)
                delay = min(delay * 2, 1.0)


def _number(item: dict[str, Any], name: str) -> float | None:
    try:
        return float(item[name]["N"])
    except (KeyError, TypeError, ValueError):
        return None


def _whole(item: dict[str, Any], name: str) -> int:
    value = _number(item, name)
    return int(value) if value is not None and value.is_integer() else 0


def _record_from_item(item: dict[str, Any]) -> SessionRecord:
    """A session item as a record; identifiers come from the keys, so a damaged item still reads."""
    _, app_name, user_id = item["PK"]["S"].split("#", 2)
    create_time = readable_timestamp(_number(item, "create_time"))
    return SessionRecord(
        app_name=app_name,
        user_id=user_id,
        session_id=item["SK"]["S"][2:],
        create_time=float(create_time),
        update_time=float(readable_timestamp(_number(item, "update_time"), create_time)),
        version=_whole(item, "version"),
        last_seq=_whole(item, "last_seq"),
        state=_state_from_item(item),
        summary_event_id=item["cmp_id"].get("S") if "cmp_id" in item else None,
        summary_end_seq=_whole(item, "cmp_end"),
    )


def _unreadable_event(item: dict[str, Any], reason: str) -> dict[str, Any]:
    """What an event that does not read reads as: its id, seq and time, and an ADK error (no content)."""
    sk = item.get("SK", {}).get("S", "")
    return {
        "id": sk[2:] if sk.startswith("V#") else sk,
        "invocation_id": "",
        "author": "agent_memory",
        "timestamp": readable_timestamp(_number(item, "ts")),
        "error_code": "unreadable_event",
        "error_message": f"the stored event could not be read: {reason}",
        "seq": _whole(item, "seq"),
    }


def _too_large() -> PayloadTooLarge:
    return PayloadTooLarge(
        "the append would grow the session's state past DynamoDB's 400 KB item limit; keep large values in "
        "events or artifacts, not in state",
        field="actions.state_delta",
    )


def _reason_codes(exc: Any) -> list[str]:
    return [r.get("Code", "None") for r in exc.response.get("CancellationReasons", [])]


def _unique_by_id(events: list[NewEvent]) -> list[NewEvent]:
    """The events without repeats of an id (the first occurrence stands)."""
    unique: dict[str, NewEvent] = {}
    for event in events:
        unique.setdefault(event.id, event)
    return list(unique.values())
