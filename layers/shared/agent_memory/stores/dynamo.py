"""The DynamoDB session store: one table, one item per event, atomic appends, no Scan.

Items (``PK`` / ``SK``):

- session      ``U#{app}#{user}`` / ``S#{session}``  counters, times, the incarnation ``inc``, the
  ``memo`` (JSON text; ``PUT …/memo``), ``stx`` (the session state item's expiry, with a retention);
  session state (``st:`` attributes) only when written by a version before the state item (read, never written);
  ``deleting`` while a DELETE is under way (a tombstone: reads answer 404, writes fail their condition);
  ``importing`` (the import's incarnation) and ``import_started`` while an import writes the session's events (a
  placeholder: reads answer 404 and writes fail their condition until the import's last write replaces it);
  ``app_pk`` / ``app_sk`` (``{user}#{session}``), the keys of the sparse global index ``by_app`` that lists an
  app's sessions, set at create and removed by a delete (never written by an append); ``ct``, when the
  claim-first append last claimed a seq
- user state   ``U#{app}#{user}`` / ``#STATE``
- app state    ``A#{app}``        / ``#STATE``
- session state ``E#{app}#{user}#{session}`` / ``#STATE``  the session's state (``st:`` attributes) and the
  incarnation ``inc`` it belongs to; written by a create, an import and an append whose events carry a session
  state delta, never by any other append, so an append pays for the session item's counters, not for the state
  (a read takes it in the BatchGetItem that reads the session item; a state item of another incarnation is
  ignored, and the purge of the events partition removes it with the events)
- event        ``E#{app}#{user}#{session}`` / ``V#{event id}``  with ``seq``, its timestamp ``t``, the incarnation
  ``inc``, the writing request's token ``w`` and the version ``v`` its transaction made (``imp`` on an imported
  event: the change feed skips it); the local secondary index ``by_seq`` orders a session's events by sequence
  number. The ``by_ts`` index (keyed on ``ts``) takes only the events of sessions created before the session item
  tracked its events' time order (``tmax``, ``tskew``): those keep writing ``ts``, the others ``t``, which no index
  takes, so an append pays for one index entry, not two (``after_timestamp`` reads use ``by_seq`` and the skew).

Keying events by id makes the id unique within the session. The usual append (one event, no state delta, no
``If-Match``, inline) is claim-first (``_claim_first``): an UpdateItem of the session item takes the next seq and
version (``ct``: when), then a conditional PutItem writes the event at it; a seq whose put never lands stays a hole
(readers order by seq and never assume consecutive ones; a compaction does not cut above a hole while a put may
still land in it). Every other append goes the transaction path, where the conditional update of the session's
``version`` and ``last_seq`` serialises appends: one TransactWriteItems per append stores the events, their state
deltas (the session state item, the user's and the app's) and the counters together or not at all; the state
items are written only inside a transaction conditioned on the session item, so that condition guards them too.
A compaction event moves ``last_seq`` but not ``version`` (the ETag counts client appends only), hence the
condition on both. State keys are stored as top-level attributes
``st:{key}`` holding JSON text, so an update can set a key whether or not the item exists and values keep their
JSON types exactly.
Events whose item would pass the offload threshold keep their body in S3 under the session's prefix. An inline
body is stored zlib-compressed, as the binary ``bz`` instead of the text ``body``, when that makes the item fewer
1 KB write units (``_with_body``; a chat turn, one unit already, stays text); ``event_from_item`` reads both.

Reads never fail on what is stored (data of older versions, or written by anyone holding the table): JSON is
decoded by ``jsonio.load_stored`` (any depth, any number); a state key whose value does not read is left out
with a warning; an event whose body does not read (or whose S3 payload is gone) reads as a marker event with
``error_code`` ``unreadable_event``; times outside what a datetime holds are clamped into it.

Faults (see docs/design.md, "Fault model: session writes"): every write retries throttling, cancelled
transactions and transport errors with jittered backoff for ``aws.WRITE_BUDGET_S``, then answers 503. A write
whose outcome is unknown is recognised on the next attempt by the request token ``w`` stored with it (or, for a
create, by the incarnation it chose). An offloaded payload is written tagged as staged and untagged once an event
that refers to it is stored; nothing deletes it after a failed or unknown transaction (the bucket's lifecycle
rule expires payloads still tagged staged after a day).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import copy
import json
import logging
import random
import time
import uuid
import zlib
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from ..errors import (
    AlreadyExists,
    Conflict,
    EventIdConflict,
    PayloadTooLarge,
    PreconditionFailed,
    QuotaExceeded,
    ServiceUnavailable,
    SessionNotFound,
)
from ..policy.quotas import NO_QUOTAS, SESSIONS_PER_USER, Quotas
from ..policy.state import ScopedDelta
from ..runtime.aws import WRITE_BUDGET_S, capacity_error, error_code
from ..runtime.lazyclass import dataclass  # processed on first instance (lazyclass.py)
from ..wire.jsonio import Unreadable, dumps, event_size, load_stored, readable_timestamp, unreadable_event
from .ddbsize import item_size
from .ports import (
    AppCursor,
    AppendResult,
    BlobStore,
    Change,
    DeleteResult,
    Deletion,
    DeletionRaced,
    EventQuery,
    NewEvent,
    SeqRange,
    SessionKey,
    SessionRecord,
    Tail,
    TailNeed,
    UserCursor,
    in_ranges,
    same_event,
    tail_query,
)

logger = logging.getLogger(__name__)

STATE_ATTR_PREFIX = "st:"
# The sort key of the user's and app's state items (in their partitions) and of a session's state item (in the
# session's events partition, where no index takes it: it has no seq or ts).
STATE_SK = "#STATE"
# On a session item: when its state item expires (with a retention). The state item is written with twice the
# retention and moved on by the first append that would outlive it, so it outlives the session without every
# append rewriting it.
STATE_EXPIRY_ATTR = "stx"
# On a session item: its state is in the state item (every session item written since; one without it was written
# before, and its first append moves the state keys it holds to the state item).
STATE_ITEM_ATTR = "sti"
# At most this many state keys are moved that way (an UpdateExpression holds 4 KB); a session item with more keeps
# them, and reads still overlay them by the state item's.
LEGACY_MOVE_MAX_KEYS = 100
# On the user's state item: how many sessions the user holds (the MaxSessionsPerUser quota's count); on a session
# item: that it is in that count.
SESSIONS_ATTR = "sessions"
COUNTED_ATTR = "counted"
# On a session item made by a create: no payload (an event body offloaded to S3) was ever uploaded under this
# incarnation, so its DELETE need not list the bucket (an S3 client and a LIST: most of a cold delete's first
# response, issue 14). Removed before the first upload (``_clear_no_payloads``); never on an imported, legacy or
# placeholder item, nor with a retention (TTL removes items, never payloads), whose deletes list the bucket as
# before.
NO_PAYLOADS_ATTR = "nb"
MAX_TRANSACT_ITEMS = 100
# DynamoDB caps a transaction at 4 MB; keep a margin for keys and attribute names.
MAX_TRANSACT_BYTES = 3_500_000
# The custom_metadata key that marks an event read back without its offloaded payload (the object is gone).
PAYLOAD_MISSING_META = "agent_memory:payload_missing"

DUE_SHARDS = 8
# Above any seq a session reaches; the upper bound of an open seq range.
_MAX_SEQ = 2**62
# A paged read of the newest N events reads them newest first in one query when N is at most this (items in
# memory: at most this many); a larger N finds its window's first seq first (no bodies), then pages forward.
_BACKWARD_READ_MAX = 100
# An import's placeholder older than this was left by an import that died (the API's functions stop at 29 s, so no
# import still writes): a create or another import of the id may take its place. Younger, it may be one still
# writing, whose events share the id's keys: they answer 503 with Retry-After until then.
IMPORT_STALE_S = 45.0
IMPORTED_ATTR = "imp"
# On a session item: the greatest timestamp of its events and the most one fell below the greatest before it
# (``_TimeOrder``). A session item without them was created before they were kept: its events keep the timestamp
# in ``ts`` (the by_ts index's key); the events of every other session keep it in ``t``, in no index.
TIME_MAX_ATTR = "tmax"
TIME_SKEW_ATTR = "tskew"
# On a session item: when the claim-first append (``_claim_first``) last claimed a seq. A put lands within the
# function's 29 s of its claim, so once this is ``policy.compaction.CLAIM_SETTLE_S`` old no hole can be filled.
CLAIM_TIME_ATTR = "ct"
# How many sessions without a tracked time order one process remembers (``DynamoSessionStore._untracked``).
_UNTRACKED_MAX = 4096
# Threads writing an import's events at once (botocore clients are thread-safe; the pool's default is 10).
IMPORT_WRITERS = 8
MEMO_ATTR = "memo"
# The first page of a newest-first read for an after_timestamp query (``_seqs_since``); each next one doubles.
_SINCE_FIRST_PAGE = 8
# A Query's Limit stays an int32 whatever a client asks for (one call returns at most 1 MB anyway).
_QUERY_LIMIT_MAX = 10_000
# Lost races on a session's version are retried this long (each attempt is two quick requests, so the last one
# ends well inside the function's 29 s); faults have their own, shorter budget, ``aws.WRITE_BUDGET_S``.
RACE_BUDGET_S = 12.0
# How long one request purges deleted events before it answers 503 (the deletion is committed, the events no longer
# read; the retry, or the next deletion of the session, goes on where it stopped).
PURGE_BUDGET_S = 18.0
# Events purged per Query (keys only): each page's derived data is settled before its items go.
_PURGE_PAGE = 2_000
# A read that met a deletion committing under it (``dels`` moved) reads again, at most this often.
_READ_ATTEMPTS = 5
# An event's body stored zlib-compressed, binary, in place of its JSON text ``body``, when that takes fewer write
# units (DynamoDB bills an item by its size rounded up to 1 KB; ``by_seq`` projects ALL, so its entry shrinks too):
# a compaction's ~2.5 KB summary, a tool result. An item that is one unit as it stands (a chat turn) is not
# compressed, and a body under ``_COMPRESS_MIN_BYTES`` is not even sized.
COMPRESSED_BODY_ATTR = "bz"
_COMPRESS_MIN_BYTES = 512
_KB = 1024
# A compressed body inflates to at most this (more reads as an unreadable event): no stored item inflates past the
# memory of a function. An inline body is under the offload threshold, 350 KB by default.
_INFLATE_MAX_BYTES = 16 * 1024 * 1024
# The preset dictionary of every ``bz`` (zlib's FDICT: its header names the dictionary by its Adler-32): the JSON
# an ADK event and a compaction event are made of, not their text, most likely strings last. It saves ~150 bytes an
# event, the skeleton's share; a summary of 2,000 characters needs it to fit one unit. NEVER edit it: stored items
# inflate with it; another dictionary is a new constant, chosen on read by the Adler-32 in the header.
_ZDICT = (
    b'"usage_metadata":{"prompt_token_count":,"candidates_token_count":,"total_token_count":},"grounding_metadata":'
    b'"partial":false,"turn_complete":true,"branch":"","long_running_tool_ids":[],"error_code":"error_message":'
    b'"artifact_delta":{},"transfer_to_agent":"escalate":"requested_auth_configs":{},"skip_summarization":'
    b'"function_call":{"id":"","name":"","args":{}}},"function_response":{"id":"","name":"","response":{}}},'
    b'"content":{"role":"user","parts":[{"text":"'
    b'"custom_metadata":{"agent_memory:compaction":{"start_seq":,"end_seq":,"event_count":,"trigger":"interval",'
    b'"summarizer":"extractive"}}}'
    b'{"id":"","invocation_id":"compaction-","author":"system","timestamp":,"actions":{"state_delta":{},'
    b'"compaction":{"start_timestamp":,"end_timestamp":,"compacted_content":{"role":"model","parts":[{"text":"user: '
)

_T = TypeVar("_T")


class _Budget:
    """How long one write may keep retrying: ``WRITE_BUDGET_S`` from its start, with jittered backoff.

    Transient faults (throttling, a transaction cancelled for capacity or a conflict, a transport error, a 5xx)
    end in ServiceUnavailable (503, ``Retry-After``); lost races on the session's version are retried for
    ``RACE_BUDGET_S`` and then end in Conflict (409).
    """

    def __init__(self, seconds: float | None = None) -> None:
        start = time.monotonic()
        self._deadline = start + (WRITE_BUDGET_S if seconds is None else seconds)
        self._race_deadline = start + RACE_BUDGET_S
        self._faults = 0
        self._races = 0

    def after_fault(self, cause: BaseException | str) -> None:
        """Sleep before the next attempt, or raise ServiceUnavailable when that would pass the budget."""
        self._faults += 1
        # Exponential from 50 ms, capped at 1 s, with jitter so that throttled writers do not retry in step.
        delay = random.uniform(0.5, 1.0) * min(1.0, 0.025 * 2**self._faults)
        if time.monotonic() + delay >= self._deadline:
            what = cause if isinstance(cause, str) else (error_code(cause) or type(cause).__name__)
            error = ServiceUnavailable(f"storage kept failing ({what}); nothing partial was kept, retry", retry_after=2)
            if isinstance(cause, BaseException):
                raise error from cause
            raise error
        time.sleep(delay)

    def after_race(self) -> None:
        """Sleep before re-reading a session whose version moved, or raise Conflict past the budget."""
        self._races += 1
        if time.monotonic() > self._race_deadline:
            raise Conflict("too many concurrent writers on this session; retry the request")
        time.sleep(random.uniform(0, min(0.2, 0.005 * 2**self._races)))

    def call(self, fn: Callable[..., _T], /, *args: Any, **kwargs: Any) -> _T:
        """``fn(*args, **kwargs)``, retried on transient faults within the budget (for idempotent calls)."""
        while True:
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                if not _transient(exc):
                    raise
                self.after_fault(exc)


def _transient(exc: BaseException) -> bool:
    """A fault a later attempt can clear (cancellations and failed conditions are read by their callers)."""
    if error_code(exc) in {"TransactionCanceledException", "ConditionalCheckFailedException"}:
        return False
    return capacity_error(exc) is not None


class _Unsettled(Exception):
    """A transaction failed in a way a retry can clear; it may have been applied (its answer lost)."""


@dataclass(frozen=True)
class _Existing:
    """A cancelled append: the stored items of the event ids that cancelled it (none: a lost race)."""

    items: dict[str, dict[str, Any]]


@dataclass
class _Staged:
    body: str  # the event JSON
    offload: bool  # too large for an item: the body goes to S3
    blob_key: str = ""  # the S3 key once uploaded

    @property
    def item_bytes(self) -> int:
        return 0 if self.offload else len(self.body)


@dataclass(frozen=True)
class _Counters:
    version: int
    last_seq: int
    update_time: float
    summary_end_seq: int
    incarnation: str
    deletions: int = 0
    state_expiry: float | None = None  # when the session's state item expires (with a retention)
    # A session item written before state items: the state attributes it holds (as stored), to move.
    legacy_state: dict[str, Any] | None = None
    # The time order of its events (``TIME_MAX_ATTR``, ``TIME_SKEW_ATTR``): None for a session created before it
    # was tracked, whose events keep the by_ts index's attribute.
    time_order: _TimeOrder | None = None
    no_payloads: bool = False  # NO_PAYLOADS_ATTR: no payload uploaded under this incarnation yet


@dataclass(frozen=True)
class _TimeOrder:
    """How far a session's event timestamps stray below their order by seq: ``top`` the greatest timestamp stored,
    ``skew`` the most any event's timestamp was below the greatest one before it (0 while they only grew). So an
    event whose timestamp is below ``T - skew`` has only events before it (by seq) that are below ``T``: a
    newest-first read of ``by_seq`` finds every event at or after ``T`` and stops there (``_seqs_since``)."""

    top: float
    skew: float

    def after(self, timestamps: list[float]) -> _TimeOrder:
        top, skew = self.top, self.skew
        for ts in timestamps:
            skew = max(skew, top - ts)
            top = max(top, ts)
        return _TimeOrder(top, skew)

    def attributes(self) -> dict[str, Any]:
        return {TIME_MAX_ATTR: _n(self.top), TIME_SKEW_ATTR: _n(self.skew)}

    @staticmethod
    def of(item: dict[str, Any]) -> _TimeOrder | None:
        top = _number(item, TIME_MAX_ATTR)
        return None if top is None else _TimeOrder(top, _number(item, TIME_SKEW_ATTR) or 0.0)


@dataclass(frozen=True)
class _Watermark:
    """A compaction's write: its event id, the seq it covers through, the watermark it was planned on and the
    incarnation of the session it read (None: any)."""

    event_id: str
    end_seq: int
    expected_end_seq: int
    incarnation: str | None
    deletions: int | None = None


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
    """Where a session's offloaded payloads live in the context bucket (every incarnation)."""
    return f"sessions/{key.app_name}/{key.user_id}/{key.session_id}/"


def incarnation_prefix(key: SessionKey, incarnation: str) -> str:
    """Where one incarnation's payloads live (a session written before incarnations: the session's prefix)."""
    return blob_prefix(key) + (f"{incarnation}/" if incarnation else "")


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: float | int) -> dict[str, str]:
    return {"N": repr(value) if isinstance(value, float) else str(value)}


def _attr(item: dict[str, Any], name: str) -> str:
    """A string attribute of an item, "" when absent (a session or event written before incarnations)."""
    return str(item.get(name, {}).get("S", ""))


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
        quotas: Quotas = NO_QUOTAS,
    ) -> None:
        self._db = client
        self._table = table_name
        self._blobs = blobs
        self._offload_bytes = offload_bytes
        self._retention_s = retention_days * 86400
        self._quotas = quotas
        # Sessions whose item has no tracked time order (created before ``tmax``): the claim-first path always
        # fails its condition on them, so this process does not try it again (each try costs a write unit).
        self._untracked: OrderedDict[SessionKey, None] = OrderedDict()

    # --- sessions -------------------------------------------------------------------------------------------

    def _expiry(self, now: float) -> dict[str, str] | None:
        return _n(int(now + self._retention_s)) if self._retention_s else None

    def _session_key(self, key: SessionKey) -> dict[str, Any]:
        return {"PK": _s(session_pk(key.app_name, key.user_id)), "SK": _s(f"S#{key.session_id}")}

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

    def _state_key(self, key: SessionKey) -> dict[str, Any]:
        """The key of the session's state item (in its events partition)."""
        return {"PK": _s(events_pk(key)), "SK": _s(STATE_SK)}

    def _state_expiry(self, now: float) -> dict[str, str] | None:
        """A state item's expiry: twice the retention, so the first append to outlive it moves it on (rarely)."""
        return _n(int(now + 2 * self._retention_s)) if self._retention_s else None

    def _state_put(
        self, key: SessionKey, incarnation: str, state: dict[str, Any], session: dict[str, Any]
    ) -> dict[str, Any]:
        """A transaction's Put of a new session state item (a create's, an import's): always written, also empty,
        so that no state item of an earlier incarnation (not purged yet) is ever updated in its place. Records the
        state item's expiry on the new ``session`` item."""
        item: dict[str, Any] = {**self._state_key(key), "inc": _s(incarnation)}
        for k, v in state.items():
            item[STATE_ATTR_PREFIX + k] = _s(json.dumps(v, separators=(",", ":")))
        expiry = self._state_expiry(time.time())
        if expiry:
            item["expires_at"] = session[STATE_EXPIRY_ATTR] = expiry
        return {"Put": {"TableName": self._table, "Item": item}}

    def _session_item(
        self,
        key: SessionKey,
        record: SessionRecord,
        incarnation: str,
        *,
        version: int,
        last_seq: int,
        time_order: _TimeOrder | None = None,
    ) -> dict[str, Any]:
        """A new session item (a create's, an import's): identity, times, counters, incarnation, its keys in the
        app-wide index, and the mark that it is counted in its user's sessions."""
        return {
            **self._session_key(key),
            "app_name": _s(record.app_name),
            "user_id": _s(record.user_id),
            "session_id": _s(record.session_id),
            "create_time": _n(record.create_time),
            "update_time": _n(record.update_time),
            "version": _n(version),
            "last_seq": _n(last_seq),
            "inc": _s(incarnation),
            # The sparse by_app index (the app-wide listing): written here and removed by a delete, never by an
            # append, so appends cost the index nothing.
            "app_pk": _s(record.app_name),
            "app_sk": _s(f"{record.user_id}#{record.session_id}"),
            # Counted in the user's session count: its delete takes it out again (a session stored before the
            # count existed has no mark and was never counted).
            COUNTED_ATTR: _n(1),
            STATE_ITEM_ATTR: _n(1),
            **(time_order or _TimeOrder(0.0, 0.0)).attributes(),
        }

    def create_session(self, record: SessionRecord, delta: ScopedDelta) -> tuple[SessionRecord, bool]:
        key = SessionKey(record.app_name, record.user_id, record.session_id)
        budget = _Budget()
        # A fresh incarnation: nothing of an earlier session under this id (events, seq, a compaction in flight,
        # payloads) can be taken for this one's, and a create whose answer was lost knows its own item again.
        incarnation = uuid.uuid4().hex
        item = self._session_item(key, record, incarnation, version=0, last_seq=0)
        if not self._retention_s:
            # (With a retention, DynamoDB's TTL may have removed an earlier incarnation's items without its
            # payloads: the DELETE lists the bucket, as before, to take those too.)
            item[NO_PAYLOADS_ATTR] = {"BOOL": True}
        expiry = self._expiry(record.update_time)
        if expiry:
            item["expires_at"] = expiry
        state_put = self._state_put(key, incarnation, delta.session, item)
        put: dict[str, Any] = {
            "TableName": self._table,
            "Item": item,
            "ConditionExpression": "attribute_not_exists(PK)",
        }
        # User and app state ride in the same transaction: applied once, with the creation, or not at all. So does
        # the user's session count (on the user's state item): the transaction's condition on it is the quota,
        # and DynamoDB serialises transactions on an item, so concurrent creates never overshoot. A retry of a
        # create that landed fails on the session's own condition, as a whole: the count moves once.
        actions: list[dict[str, Any]] = [{"Put": put}, self._count_update(record.app_name, record.user_id, delta.user)]
        if delta.app:
            actions.append(self._state_update(f"A#{record.app_name}", STATE_SK, delta.app))
        # The session's state in its own item, in the same transaction (last: the reasons' order stays the same).
        actions.append(state_put)
        while True:
            if self._try_counted_create(actions, record, budget):
                # Events a delete that predates tombstones left behind must not show in this session.
                self._purge(key, budget, created=True)
                stored = budget.call(self.get_session, key)
                if stored is None:  # deleted between our write and read: create again
                    continue
                return stored, True
            stored = budget.call(self.get_session, key)
            if stored is not None:
                if stored.last_seq == 0:
                    # A creation whose answer was lost, or whose purge failed, may have left events of an
                    # earlier session under this id: they must not show in this one (one Query when none).
                    self._purge(key, budget, created=True)
                # Our own incarnation: an earlier attempt of this request created it and its answer was lost.
                return stored, stored.incarnation == incarnation
            existing = self._session_marks(key, budget)
            if existing is not None and "importing" in existing and "deleting" not in existing:
                # An import is writing this session: it is not there yet, and it is not ours to take.
                if not _stale_import(existing):
                    raise _import_under_way(existing)
                self.delete_session(key)  # an import that died: its placeholder and events go
                continue
            if existing is not None and "deleting" in existing:
                # A DELETE stopped part-way: finish it, then take the tombstone's place.
                self._purge(key, budget)
                put["ConditionExpression"] = "attribute_not_exists(PK) OR attribute_exists(deleting)"
            # Else deleted between our write and read: create again.

    def _try_counted_create(self, actions: list[dict[str, Any]], record: SessionRecord, budget: _Budget) -> bool:
        """``_try_create`` of a transaction that counts the session in its user's quota. With a retention the count
        may be high (sessions removed by TTL are never taken out): on a refusal, count the user's sessions once,
        correct it, and try again; a true count at the limit refuses. Without one the count cannot drift, and a
        refused create costs no read of the user's partition."""
        try:
            return self._try_create(actions, budget)
        except QuotaExceeded:
            if not self._retention_s or not self._recount_sessions(record.app_name, record.user_id, budget):
                raise
        return self._try_create(actions, budget)

    def _count_update(self, app_name: str, user_id: str, user_state: dict[str, Any]) -> dict[str, Any]:
        """The create's update of the user's state item: its state delta, one more session, and the quota."""
        action = self._state_update(session_pk(app_name, user_id), STATE_SK, user_state)["Update"]
        action["UpdateExpression"] = (action["UpdateExpression"] + " " if user_state else "") + "ADD #sessions :one"
        action["ExpressionAttributeNames"]["#sessions"] = SESSIONS_ATTR
        action["ExpressionAttributeValues"][":one"] = _n(1)
        if self._quotas.sessions_per_user:
            action["ConditionExpression"] = "attribute_not_exists(#sessions) OR #sessions < :max_sessions"
            action["ExpressionAttributeValues"][":max_sessions"] = _n(self._quotas.sessions_per_user)
        return {"Update": action}

    def _recount_sessions(self, app_name: str, user_id: str, budget: _Budget) -> bool:
        """Set the user's session count to the sessions they hold if it is higher (sessions removed by TTL, or by
        hand, were never taken out of it); True when it was lowered.

        The count is set only if it still reads as it did before the sessions were counted: a create or delete
        that lands meanwhile moves it, and the correction is dropped (the caller tries once more anyway)."""
        pk = session_pk(app_name, user_id)
        item = budget.call(
            self._db.get_item,
            TableName=self._table,
            Key={"PK": _s(pk), "SK": _s(STATE_SK)},
            ConsistentRead=True,
            ProjectionExpression="#sessions",
            ExpressionAttributeNames={"#sessions": SESSIONS_ATTR},
        ).get("Item", {})
        if SESSIONS_ATTR not in item:
            return False
        counted = int(item[SESSIONS_ATTR]["N"])
        now = time.time()
        held = 0
        params: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "PK = :pk AND begins_with(SK, :s)",
            "ExpressionAttributeValues": {":pk": _s(pk), ":s": _s("S#")},
            "ProjectionExpression": "deleting, expires_at, importing",
            "ConsistentRead": True,
        }
        while True:
            response = budget.call(self._db.query, **params)
            for session in response.get("Items", []):
                expires = _number(session, "expires_at")
                # Tombstones were taken out when they were laid; expired sessions are about to go; an import's
                # placeholder is counted when the import commits.
                if "deleting" not in session and "importing" not in session and (expires is None or expires > now):
                    held += 1
            if "LastEvaluatedKey" not in response:
                break
            params["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        if held >= counted:
            return False
        logger.info("session count corrected", extra={"counted": counted, "held": held})
        with contextlib.suppress(self._db.exceptions.ConditionalCheckFailedException):
            budget.call(
                self._db.update_item,
                TableName=self._table,
                Key={"PK": _s(pk), "SK": _s(STATE_SK)},
                UpdateExpression="SET #sessions = :held",
                ConditionExpression="#sessions = :counted",
                ExpressionAttributeNames={"#sessions": SESSIONS_ATTR},
                ExpressionAttributeValues={":held": _n(held), ":counted": _n(counted)},
            )
        return True

    def _try_create(self, actions: list[dict[str, Any]], budget: _Budget) -> bool:
        """Write the new session (and its user/app state and count); False when a session item is in the way,
        QuotaExceeded when the user's count is at the limit."""
        while True:
            try:
                if len(actions) == 1:
                    self._db.put_item(**actions[0]["Put"])
                else:
                    self._db.transact_write_items(TransactItems=actions)
                return True
            except self._db.exceptions.ConditionalCheckFailedException:
                return False
            except self._db.exceptions.TransactionCanceledException as exc:
                codes = _reason_codes(exc)
                if codes and codes[0] == "ConditionalCheckFailed":
                    return False
                if len(codes) > 1 and codes[1] == "ConditionalCheckFailed":
                    raise QuotaExceeded(
                        "the user holds as many sessions as allowed",
                        limit_name=SESSIONS_PER_USER,
                        limit=self._quotas.sessions_per_user,
                    ) from exc
                if "ValidationError" in codes:
                    raise _too_large("state") from exc
                budget.after_fault(exc)  # throttled, conflicting, unknown: retry (a lost answer shows as ours)
            except Exception as exc:
                if error_code(exc) == "ValidationException" and "size" in str(exc):
                    raise _too_large("state") from exc
                if not _transient(exc):
                    raise
                budget.after_fault(exc)

    def _get_items(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], dict[str, Any]]:
        """The items under ``keys`` (PK, SK) that exist, by consistent BatchGetItem (100 keys a call)."""
        found: dict[tuple[str, str], dict[str, Any]] = {}
        budget = _Budget()
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), 100):
            chunk = [{"PK": _s(pk), "SK": _s(sk)} for pk, sk in unique[start : start + 100]]
            request: dict[str, Any] = {self._table: {"Keys": chunk, "ConsistentRead": True}}
            while request:
                response = self._db.batch_get_item(RequestItems=request)
                for item in response.get("Responses", {}).get(self._table, []):
                    found[(item["PK"]["S"], item["SK"]["S"])] = item
                request = response.get("UnprocessedKeys") or {}
                if request:  # throttled keys: back off, within the budget (then 503), never spin
                    budget.after_fault("unprocessed keys")
        return found

    def get_user_state(self, app_name: str, user_id: str) -> dict[str, Any]:
        key = (session_pk(app_name, user_id), STATE_SK)
        return _state_from_item(self._get_items([key]).get(key, {}))

    def get_app_state(self, app_name: str) -> dict[str, Any]:
        key = (f"A#{app_name}", STATE_SK)
        return _state_from_item(self._get_items([key]).get(key, {}))

    def get_session(self, key: SessionKey) -> SessionRecord | None:
        pk = session_pk(key.app_name, key.user_id)
        state_key = (events_pk(key), STATE_SK)
        found = self._get_items(
            [(pk, f"S#{key.session_id}"), state_key, (pk, STATE_SK), (f"A#{key.app_name}", STATE_SK)]
        )
        session = found.get((pk, f"S#{key.session_id}"))
        if session is None or "deleting" in session or "importing" in session:
            return None
        record = _record_from_item(session, state_item=found.get(state_key))
        record.user_state = _state_from_item(found.get((pk, STATE_SK), {}))
        record.app_state = _state_from_item(found.get((f"A#{key.app_name}", STATE_SK), {}))
        return record

    def get_session_for_compaction(self, key: SessionKey) -> SessionRecord | None:
        """The session item alone, by an eventually consistent GetItem: half a read unit (a session item is ~0.5
        KB), where ``get_session``'s consistent BatchGetItem of it, its state item and the user's and app's state
        items costs four. A compaction uses none of the states, and every field it plans on is checked again by
        the consistent read its write is conditioned on (``_append``'s watermark, ``clear_due``'s version): a
        stale record makes a plan that stores nothing, and the session stays due for the next sweep."""
        item = (
            _Budget()
            .call(self._db.get_item, TableName=self._table, Key=self._session_key(key), ConsistentRead=False)
            .get("Item")
        )
        if item is None or "deleting" in item or "importing" in item:
            return None
        return _record_from_item(item, with_state=False)

    def list_sessions(
        self, app_name: str, user_id: str, limit: int, after: UserCursor | None
    ) -> tuple[list[SessionRecord], UserCursor | None]:
        """Reads every item of the user's partition (their sessions and user state; an index ordered by update time
        would cost every append a write) and keeps the ``limit`` + 1 first after ``after``: the read grows with
        the user's session count, the memory with the page."""
        pk = session_pk(app_name, user_id)
        params: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "PK = :pk",
            "ExpressionAttributeValues": {":pk": _s(pk)},
            "ConsistentRead": True,
        }
        budget = _Budget()
        keep = max(0, limit) + 1
        candidates: list[tuple[UserCursor, dict[str, Any]]] = []
        user_item: dict[str, Any] = {}
        while True:
            response = budget.call(self._db.query, **params)
            for item in response.get("Items", []):
                sk = item["SK"]["S"]
                if sk == STATE_SK:
                    user_item = item
                elif sk.startswith("S#") and "deleting" not in item and "importing" not in item:
                    # a session being deleted is gone for readers, one being imported not there yet
                    cursor = UserCursor.of(_record_from_item(item, with_state=False))
                    if after is None or cursor > after:
                        candidates.append((cursor, item))
            if len(candidates) > 4 * keep:
                candidates = sorted(candidates, key=lambda c: c[0])[:keep]
            if "LastEvaluatedKey" not in response:
                break
            params["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        candidates = sorted(candidates, key=lambda c: c[0])[:keep]
        user_state = _state_from_item(user_item)
        # The app's state and the page's session state items: one BatchGetItem (as the app's state alone was).
        app_key = (f"A#{app_name}", STATE_SK)
        page = [
            (item, (events_pk(SessionKey(app_name, user_id, item["SK"]["S"][2:])), STATE_SK))
            for _, item in candidates[:limit]
        ]
        found = self._get_items([app_key, *(state_key for _, state_key in page)]) if candidates else {}
        app_state = _state_from_item(found.get(app_key, {}))
        records = []
        for item, state_key in page:
            record = _record_from_item(item, state_item=found.get(state_key))
            record.user_state, record.app_state = copy.deepcopy(user_state), copy.deepcopy(app_state)
            records.append(record)
        return records, (UserCursor.of(records[-1]) if len(candidates) > limit and records else None)

    def list_app_sessions(
        self, app_name: str, limit: int, after: AppCursor | None
    ) -> tuple[list[SessionRecord], AppCursor | None]:
        """The sparse ``by_app`` index (written at create and delete only, never by an append) gives the page's
        keys in (user, session) order; one BatchGetItem reads the sessions and their users' and app's state. The
        index is eventually consistent: a session created a moment ago may be missing from the page, one being
        deleted is left out when its item says so."""
        key_condition = "app_pk = :app"
        values: dict[str, Any] = {":app": _s(app_name)}
        if after is not None:
            # "#" sorts below every identifier character: "{user}#{session}" orders by user, then session.
            key_condition += " AND app_sk > :after"
            values[":after"] = _s(f"{after.user_id}#{after.session_id}")
        response = _Budget().call(
            self._db.query,
            TableName=self._table,
            IndexName="by_app",
            KeyConditionExpression=key_condition,
            ExpressionAttributeValues=values,
            Limit=max(0, limit) + 1,
        )
        listed = [(item["PK"]["S"], item["SK"]["S"]) for item in response.get("Items", [])]
        more = len(listed) > limit or ("LastEvaluatedKey" in response and bool(listed))
        page = listed[:limit]
        if not page:
            return [], None
        app_key = (f"A#{app_name}", STATE_SK)
        state_keys = {(pk, sk): (f"E#{pk[2:]}#{sk[2:]}", STATE_SK) for pk, sk in page}
        found = self._get_items([*page, *((pk, STATE_SK) for pk, _ in page), app_key, *state_keys.values()])
        app_state = _state_from_item(found.get(app_key, {}))
        records = []
        for pk, sk in page:
            item = found.get((pk, sk))
            if item is None or "deleting" in item or "importing" in item:
                continue
            record = _record_from_item(item, state_item=found.get(state_keys[(pk, sk)]))
            record.user_state = _state_from_item(found.get((pk, STATE_SK), {}))
            record.app_state = copy.deepcopy(app_state)
            records.append(record)
        # Resume after the page's last key even when its session was left out.
        _, _, last_user = page[-1][0].split("#", 2)
        return records, (AppCursor(last_user, page[-1][1][2:]) if more else None)

    def delete_session(self, key: SessionKey) -> None:
        """Tombstone, purge, then remove the session item. Any step may fail (503): the session stays deleted
        for readers and writers, and a retry — of the DELETE, or a create under the same id — finishes the job."""
        budget = _Budget()
        # From here on get and list answer without it, appends and compactions fail their condition.
        tombstone: dict[str, Any] = {
            "TableName": self._table,
            "Key": self._session_key(key),
            "UpdateExpression": "SET deleting = :now REMOVE due, due_since, app_pk, app_sk",
            # Only a live session: a retried DELETE (or botocore's retry of a lost answer) finds the tombstone,
            # fails the condition and takes nothing out of the user's session count a second time.
            "ConditionExpression": "attribute_exists(PK) AND attribute_not_exists(deleting) AND attribute_exists(#c)",
            "ExpressionAttributeNames": {"#c": COUNTED_ATTR},
            "ExpressionAttributeValues": {":now": _n(time.time())},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        uncount = {
            "TableName": self._table,
            "Key": {"PK": _s(session_pk(key.app_name, key.user_id)), "SK": _s(STATE_SK)},
            "UpdateExpression": "ADD #sessions :minus_one",
            "ExpressionAttributeNames": {"#sessions": SESSIONS_ATTR},
            "ExpressionAttributeValues": {":minus_one": _n(-1)},
        }
        legacy = False
        while True:
            try:
                # The tombstone and the count move together (one request, as the tombstone alone was).
                budget.call(self._db.transact_write_items, TransactItems=[{"Update": tombstone}, {"Update": uncount}])
                counted = True
                break
            except self._db.exceptions.TransactionCanceledException as exc:
                reasons = exc.response.get("CancellationReasons", [])
                if reasons and reasons[0].get("Code") == "ConditionalCheckFailed":
                    old_item = reasons[0].get("Item")
                    # No live session to take out: gone, or being deleted already (still purge what an
                    # interrupted delete left); a live one without the mark was stored before the count existed.
                    legacy = bool(old_item) and "deleting" not in old_item
                    counted = False
                    break
                budget.after_fault(exc)  # throttled or conflicting: retry (a lost answer shows as a tombstone)
        if not counted and legacy:
            # Tombstone it alone: it was never counted.
            tombstone["ConditionExpression"] = "attribute_exists(PK) AND attribute_not_exists(deleting)"
            del tombstone["ExpressionAttributeNames"], tombstone["ReturnValuesOnConditionCheckFailure"]
            with contextlib.suppress(self._db.exceptions.ConditionalCheckFailedException):
                budget.call(self._db.update_item, **tombstone)
        # The tombstoned incarnation's mark (no append can upload under it any more): without a payload ever
        # uploaded, the bucket holds nothing of it to delete (an earlier incarnation's were purged before this one
        # was created). A staged upload of an append that cannot commit expires by the lifecycle rule, as before.
        marks = self._session_marks(key, budget)
        self._purge(key, budget, payloads=marks is None or NO_PAYLOADS_ATTR not in marks)
        with contextlib.suppress(self._db.exceptions.ConditionalCheckFailedException):
            budget.call(
                self._db.delete_item,
                TableName=self._table,
                Key=self._session_key(key),
                ConditionExpression="attribute_exists(deleting)",  # not a session re-created meanwhile
            )

    def _session_marks(self, key: SessionKey, budget: _Budget) -> dict[str, Any] | None:
        """The session item's incarnation and tombstone (consistent read); None when there is no item."""
        item: dict[str, Any] | None = budget.call(
            self._db.get_item,
            TableName=self._table,
            Key=self._session_key(key),
            ConsistentRead=True,
            ProjectionExpression="inc, deleting, importing, import_started, nb",
        ).get("Item")
        return item

    def _live_incarnation(self, key: SessionKey, budget: _Budget) -> str | None:
        """The incarnation of the session under ``key`` unless it is absent or being deleted."""
        item = self._session_marks(key, budget)
        if item is None or "deleting" in item:
            return None
        return _attr(item, "inc")

    def _purge(self, key: SessionKey, budget: _Budget, *, created: bool = False, payloads: bool = True) -> None:
        """Delete the events and payloads of every incarnation of ``key`` but the live one (if any).

        ``created``: a create has just stored the live incarnation; with no event in the partition there is
        nothing of an earlier session to purge (one Query, the usual case). ``payloads`` False: the bucket holds
        none to delete (a deleted session that never uploaded one, ``NO_PAYLOADS_ATTR``): its events only."""
        params: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "PK = :pk",
            "ExpressionAttributeValues": {":pk": _s(events_pk(key))},
            "ProjectionExpression": "PK, SK, inc",
            "ConsistentRead": True,
        }
        found = False
        live: str | None = None
        started = time.time()
        while True:
            response = budget.call(self._db.query, **params)
            items = response.get("Items", [])
            if created:
                # The state item a create has just put is the live incarnation's: alone, nothing to purge.
                items = [i for i in items if i["SK"]["S"] != STATE_SK or _attr(i, "inc") == ""]
            if items:
                found = True
                # Read per page: a session re-created meanwhile keeps its events (a live legacy session,
                # incarnation "", cannot meet a purge: create tombstones nothing, delete tombstones first).
                live = self._live_incarnation(key, budget)
                doomed = [{"PK": i["PK"], "SK": i["SK"]} for i in items if live is None or _attr(i, "inc") != live]
                batch_write(self._db, self._table, [{"DeleteRequest": {"Key": k}} for k in doomed], budget)
            if "LastEvaluatedKey" not in response:
                break
            params["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        if (not found and created) or not payloads:
            return

        def keep() -> str | None:
            # Read again for every page deleted: a session re-created meanwhile keeps its payloads.
            live = self._live_incarnation(key, budget)
            return incarnation_prefix(key, live) if live else None

        # Objects written after the purge began belong to a session created since (or to an append of the
        # deleted one that cannot commit: it stays tagged staged and the lifecycle rule expires it).
        budget.call(self._blobs.delete_prefix, blob_prefix(key), keep_prefix=keep, modified_before=started)

    # --- export / import: the memo and a whole session at once ---------------------------------------------

    def put_memo(self, key: SessionKey, memo: dict[str, Any]) -> None:
        """One conditional update of the session item: idempotent, so a retry after a lost answer is harmless."""
        try:
            _Budget().call(
                self._db.update_item,
                TableName=self._table,
                Key=self._session_key(key),
                UpdateExpression="SET #memo = :memo",
                ConditionExpression="attribute_exists(PK) AND attribute_not_exists(deleting) "
                "AND attribute_not_exists(importing)",
                ExpressionAttributeNames={"#memo": MEMO_ATTR},
                ExpressionAttributeValues={":memo": _s(dumps(memo))},
            )
        except self._db.exceptions.ConditionalCheckFailedException as exc:
            raise SessionNotFound(key.session_id) from exc
        except Exception as exc:
            if error_code(exc) == "ValidationException" and "size" in str(exc):
                raise PayloadTooLarge(
                    "the memo would grow the session's item past DynamoDB's 400 KB limit (with its state)",
                    field="memo",
                ) from exc
            raise

    def import_session(self, record: SessionRecord, events: list[dict[str, Any]], *, replace: bool) -> SessionRecord:
        """A placeholder, the events, then the session in one conditional write (see docs/design.md, "Import").

        1. A placeholder session item (``importing``) claims the id: readers answer 404, appends and creates fail,
           a concurrent import answers 409. ``replace``: the existing session is deleted first (the new events
           share its keys ``V#{id}``), so readers see the old session, then none, then the new one; never a mix.
        2. Whatever an earlier import or delete of the id left is purged; the events are written (BatchWriteItem,
           any number; large bodies to S3) under the import's own incarnation, marked ``imp``.
        3. One transaction replaces the placeholder with the session item (on the condition that it is still this
           import's placeholder), counts it in the user's sessions (the quota) and sets the user and app state.

        A fault before 3 leaves only the placeholder and events no reader sees; a retry takes the placeholder over
        once it is stale (or a DELETE removes it; a failing import removes its own when it can) and purges them. A
        lost answer of 3 is recognised by the incarnation."""
        key = SessionKey(record.app_name, record.user_id, record.session_id)
        self._quotas.check_events(0, record.last_seq)
        budget = _Budget()
        incarnation = uuid.uuid4().hex
        self._claim_import(key, incarnation, replace, budget)
        try:
            self._purge(key, budget)
            blobs = self._write_imported_events(key, events, incarnation, record.version)
            ordered = sorted(events, key=lambda e: int(e["seq"]))
            time_order = _TimeOrder(0.0, 0.0).after([float(e["timestamp"]) for e in ordered])
            committed = self._commit_import(key, record, incarnation, budget, time_order)
        except QuotaExceeded:
            with contextlib.suppress(Exception):
                self.delete_session(key)  # nothing of a refused import stays (best effort: a retry purges it)
            raise
        except BaseException:
            # A fault (503): give the id back at once, so that the retry need not wait for the placeholder to go
            # stale; the events written stay invisible until the next import or create of the id purges them.
            with contextlib.suppress(Exception):
                self._db.delete_item(
                    TableName=self._table,
                    Key=self._session_key(key),
                    ConditionExpression="importing = :inc",
                    ExpressionAttributeValues={":inc": _s(incarnation)},
                )
            raise
        if not committed:
            raise Conflict("the import was interrupted by a delete or another import of this session; retry")
        logger.info("session imported", extra={"events": len(events), "payloads": len(blobs)})
        stored = budget.call(self.get_session, key)
        if stored is None:
            raise SessionNotFound(key.session_id)  # deleted the moment it was imported
        return stored

    def _claim_import(self, key: SessionKey, incarnation: str, replace: bool, budget: _Budget) -> None:
        """Put the import's placeholder in the session's place; AlreadyExists (not ``replace``), or
        ServiceUnavailable while another import's placeholder is not stale."""
        placeholder = {
            **self._session_key(key),
            "inc": _s(incarnation),
            "importing": _s(incarnation),
            "import_started": _n(time.time()),
        }
        condition = "attribute_not_exists(PK)"
        values: dict[str, Any] = {}
        replaced = False
        while True:
            try:
                put: dict[str, Any] = {"TableName": self._table, "Item": placeholder, "ConditionExpression": condition}
                if values:
                    put["ExpressionAttributeValues"] = values
                budget.call(self._db.put_item, **put)
                return
            except self._db.exceptions.ConditionalCheckFailedException:
                pass
            marks = self._session_marks(key, budget)
            if marks is None:
                budget.after_race()  # gone meanwhile: claim again (bounded, as a lost race is)
                continue
            if "deleting" in marks:
                # A DELETE stopped part-way: finish it, then take the tombstone's place.
                self._purge(key, budget)
                condition, values = "attribute_not_exists(PK) OR attribute_exists(deleting)", {}
            elif "importing" in marks:
                if _attr(marks, "importing") == incarnation:
                    return  # our own placeholder: the put's answer was lost
                if not _stale_import(marks):
                    raise _import_under_way(marks)
                # An import that died: take its place (its events are purged next).
                condition = "attribute_not_exists(PK) OR attribute_exists(deleting) OR importing = :dead"
                values = {":dead": _s(_attr(marks, "importing"))}
            elif not replace:
                raise AlreadyExists(f"session {key.session_id!r} exists already", field="session_id")
            else:
                if replaced:
                    budget.after_race()  # re-created between our delete and our claim: delete it again
                # Its events share the new one's keys: it goes first (readers: 404 until the import commits).
                self.delete_session(key)
                replaced = True
                condition, values = "attribute_not_exists(PK)", {}

    def _write_imported_events(
        self, key: SessionKey, events: list[dict[str, Any]], incarnation: str, version: int
    ) -> list[str]:
        """Write the events' items (BatchWriteItem, any number) and offload large bodies; return the payloads'
        keys. Payloads are written staged and confirmed once all are written, before the commit: a payload of an
        import that dies before that expires by the lifecycle rule, one after is under a dead incarnation's
        prefix, which the next purge of the id removes."""
        expiry = self._expiry(time.time())
        requests: list[dict[str, Any]] = []
        blobs: list[str] = []
        for event in events:
            body = {k: v for k, v in event.items() if k != "seq"}
            text = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
            item: dict[str, Any] = {
                "PK": _s(events_pk(key)),
                "SK": _s(f"V#{event['id']}"),
                "seq": _n(int(event["seq"])),
                "t": _n(float(event["timestamp"])),
                "inc": _s(incarnation),
                "w": _s(incarnation),
                "v": _n(version),
                IMPORTED_ATTR: _n(1),
            }
            if len(text.encode()) > self._offload_bytes:
                blob_key = f"{incarnation_prefix(key, incarnation)}events/{event['id']}/{incarnation}.json"
                _Budget().call(self._blobs.put, blob_key, text.encode(), staged=True)
                blobs.append(blob_key)
                item["blob"] = _s(blob_key)
                stub = {k: body[k] for k in ("author", "invocation_id") if k in body}
                item["stub"] = _s(json.dumps(stub, separators=(",", ":"), ensure_ascii=False))
            if expiry:
                item["expires_at"] = expiry
            if "blob" not in item:
                _with_body(item, text)
            requests.append({"PutRequest": {"Item": item}})
        # Slices of 1,000 items, each with its own budget (the whole import may take longer than one write's budget
        # without a fault), written by a few threads at once: a 6 MB body of small events is ~1,600 BatchWriteItem
        # calls, too many to make one after another inside the function's 29 s.
        slices = [requests[start : start + 1000] for start in range(0, len(requests), 1000)]
        with ThreadPoolExecutor(max_workers=min(IMPORT_WRITERS, max(1, len(slices)))) as pool:
            for done in [pool.submit(batch_write, self._db, self._table, part, _Budget()) for part in slices]:
                done.result()
        for blob_key in blobs:
            _Budget().call(self._blobs.confirm, blob_key)
        return blobs

    def _commit_import(
        self, key: SessionKey, record: SessionRecord, incarnation: str, budget: _Budget, time_order: _TimeOrder
    ) -> bool:
        """The session item in the placeholder's place, counted, with the user and app state: one transaction.
        False when the placeholder is no longer this import's (a DELETE, or another import, took it)."""
        item = self._session_item(
            key, record, incarnation, version=record.version, last_seq=record.last_seq, time_order=time_order
        )
        item["cmp_end"] = _n(record.summary_end_seq)
        if record.summary_event_id is not None:
            item["cmp_id"] = _s(record.summary_event_id)
        if record.memo:
            item[MEMO_ATTR] = _s(dumps(record.memo))
        expiry = self._expiry(time.time())
        if expiry:
            item["expires_at"] = expiry
        state_put = self._state_put(key, incarnation, record.state, item)
        put = {
            "TableName": self._table,
            "Item": item,
            "ConditionExpression": "importing = :inc AND attribute_not_exists(deleting)",
            "ExpressionAttributeValues": {":inc": _s(incarnation)},
        }
        actions: list[dict[str, Any]] = [
            {"Put": put},
            self._count_update(record.app_name, record.user_id, record.user_state),
        ]
        if record.app_state:
            actions.append(self._state_update(f"A#{record.app_name}", STATE_SK, record.app_state))
        actions.append(state_put)
        if self._try_counted_create(actions, record, budget):
            return True
        marks = self._session_marks(key, budget)
        # Our transaction landed and its answer was lost: the session item carries our incarnation.
        return marks is not None and _attr(marks, "inc") == incarnation and "importing" not in marks

    # --- events ---------------------------------------------------------------------------------------------

    def append_events(self, key: SessionKey, events: list[NewEvent], expected_version: int | None) -> AppendResult:
        return self._append(key, events, expected_version, None)

    def append_compaction(
        self,
        key: SessionKey,
        event: NewEvent,
        end_seq: int,
        expected_end_seq: int,
        *,
        incarnation: str | None = None,
        deletions: int | None = None,
    ) -> dict[str, Any] | None:
        watermark = _Watermark(event.id, end_seq, expected_end_seq, incarnation, deletions)
        try:
            result = self._append(key, [event], None, watermark)
        except _WatermarkMoved:
            return None
        return result.events[0]

    def _append(
        self,
        key: SessionKey,
        events: list[NewEvent],
        expected_version: int | None,
        watermark: _Watermark | None,
    ) -> AppendResult:
        budget = _Budget()
        # Every item this request writes carries its token: an attempt whose answer was lost is known again.
        token = uuid.uuid4().hex
        first_index: dict[str, int] = {}
        unique: list[NewEvent] = []
        for i, event in enumerate(events):
            if event.id not in first_index:
                first_index[event.id] = i
                unique.append(event)
            elif not same_event(events[first_index[event.id]].body, event):
                raise _id_conflict(event.id, i)
        if (
            watermark is None
            and expected_version is None
            and len(events) == 1
            and not events[0].delta
            and key not in self._untracked
        ):
            # What every chat append is: the claim-first path, two requests and no read (``_claim_first``).
            fast = self._claim_first(key, events[0], token, budget)
            if fast is not None:
                return fast
        results: dict[str, dict[str, Any]] = {}  # event id -> stored event
        created_ids: set[str] = set()
        confirm: list[str] = []  # payloads that stored events refer to: untag them so that lifecycle keeps them
        staged: dict[str, _Staged] = {}
        pending = unique
        version = 0
        checked = False
        resends_checked = False
        unsettled: list[NewEvent] = []  # the chunk whose last transaction may have been applied
        landed_versions: list[int] = []  # versions made by our transactions recognised after a lost answer

        def settle(event_id: str, item: dict[str, Any]) -> None:
            """An event id found stored: ours (an earlier attempt landed), a resend, or a conflict."""
            stored = self.event_from_item(item)
            event = events[first_index[event_id]]
            if _attr(item, "w") == token:
                created_ids.add(event_id)
                landed_versions.append(int(item.get("v", {"N": "0"})["N"]))
            elif not same_event(stored, event):
                raise _id_conflict(event_id, first_index[event_id])
            results[event_id] = stored
            if "blob" in item:
                confirm.append(item["blob"]["S"])

        committed = False
        try:
            while pending:
                if unsettled:
                    # Did the transaction whose answer we lost land? Its items carry our token.
                    found = self._stored_items(key, [e.id for e in unsettled], budget)
                    mine = {i: item for i, item in found.items() if _attr(item, "w") == token}
                    unsettled = []
                    landed_versions.clear()
                    if mine:
                        for event_id, item in mine.items():
                            settle(event_id, item)
                        version = max(landed_versions)
                        pending = [e for e in pending if e.id not in mine]
                        expected_version = None
                        continue
                meta = budget.call(self._read_counters, key)
                if meta is None:
                    raise SessionNotFound(key.session_id)
                if meta.time_order is not None:
                    self._untracked.pop(key, None)  # (re-created since: its time order is tracked)
                if watermark is not None:
                    if watermark.incarnation is not None and meta.incarnation != watermark.incarnation:
                        raise SessionNotFound(key.session_id)  # deleted (and maybe re-created) since it was read
                    if meta.summary_end_seq != watermark.expected_end_seq:
                        raise _WatermarkMoved()
                    if watermark.deletions is not None and meta.deletions != watermark.deletions:
                        raise _WatermarkMoved()  # events were deleted since the compaction read them
                version = meta.version
                if expected_version is not None and version != expected_version:
                    raise PreconditionFailed(
                        f"If-Match version {expected_version} is not the current version {version}", field="If-Match"
                    )
                if watermark is None and self._quotas.events_per_session:
                    # The transaction is conditioned on last_seq as read here: the count cannot move before it
                    # commits, so checking it costs no request and concurrent appends never overshoot. The whole
                    # batch is checked before its first transaction (nothing of a refused batch is stored).
                    try:
                        self._quotas.check_events(meta.last_seq, len(pending))
                    except QuotaExceeded:
                        if resends_checked:
                            raise
                        # Resent events are no new ones (a retry whose first answer was lost): look them up once.
                        resends_checked = checked = True
                        found = self._stored_items(key, [e.id for e in pending], budget)
                        for event_id, item in found.items():
                            settle(event_id, item)
                        if not found:
                            raise
                        pending = [e for e in pending if e.id not in found]
                        continue
                chunk = self._take_chunk(pending, staged)
                if not checked and (len(chunk) < len(pending) or any(staged[e.id].offload for e in chunk)):
                    # The batch takes several transactions: find reused ids before the first commits, so that a
                    # conflict stores nothing of the batch. A large event: before uploading a payload a resend
                    # does not need.
                    checked = True
                    found = self._stored_items(key, [e.id for e in pending], budget)
                    for event_id, item in found.items():
                        settle(event_id, item)
                    if found:
                        pending = [e for e in pending if e.id not in found]
                        continue
                checked = True
                uploads = any(staged[e.id].offload for e in chunk)
                if uploads and meta.no_payloads and not self._clear_no_payloads(key, meta.incarnation, budget):
                    budget.after_race()  # deleted or re-created since it was read: read it again
                    continue
                for event in chunk:
                    # (Again if the session was re-created meanwhile: a payload lives under its incarnation's prefix.)
                    here = incarnation_prefix(key, meta.incarnation)
                    if staged[event.id].offload and not staged[event.id].blob_key.startswith(here):
                        staged[event.id].blob_key = self._upload(
                            key, event, staged[event.id], meta.incarnation, token, budget
                        )
                try:
                    outcome = self._transact_append(key, chunk, staged, meta, watermark, token)
                except _Unsettled as exc:
                    unsettled = chunk
                    budget.after_fault(exc.__cause__ or exc)
                    continue
                if isinstance(outcome, _Existing):
                    if not outcome.items:  # lost a race on the session's version (or it changed): read again
                        budget.after_race()
                        continue
                    landed_versions.clear()
                    for event_id, item in outcome.items.items():
                        settle(event_id, item)
                    if landed_versions:  # botocore's retry met our own applied transaction
                        version = max(landed_versions)
                        expected_version = None
                    pending = [e for e in pending if e.id not in outcome.items]
                    continue
                for stored in outcome:
                    results[stored["id"]] = stored
                    created_ids.add(stored["id"])
                    if staged[stored["id"]].blob_key:
                        confirm.append(staged[stored["id"]].blob_key)
                done = {e.id for e in chunk}
                pending = [e for e in pending if e.id not in done]
                version = meta.version + 1 if watermark is None else meta.version
                # The precondition held for the batch's first transaction; later chunks (a batch too big for one
                # transaction) only need their own conditional write.
                expected_version = None
            committed = True
        finally:
            # Untag every payload a stored event refers to, also when a later transaction of the batch failed
            # (the events of the earlier ones stay stored): the lifecycle rule must never expire them.
            for blob_key in confirm:
                try:
                    budget.call(self._blobs.confirm, blob_key)
                except Exception:
                    if committed:
                        raise  # 503: a resend finds the stored event and untags its payload again
                    logger.warning("payload of a stored event left tagged staged", extra={"blob": blob_key})
        created: list[bool] = []
        seen: set[str] = set()
        for event in events:
            created.append(event.id in created_ids and event.id not in seen)
            seen.add(event.id)
        return AppendResult(events=[results[e.id] for e in events], created=created, version=version)

    def _claim_first(self, key: SessionKey, event: NewEvent, token: str, budget: _Budget) -> AppendResult | None:
        """One event, no state delta, no ``If-Match``, its body inline: claim its seq, then put it (3.05 WRU, no
        read; the transaction path's GetItem and TransactWriteItems cost 1 RRU and 5.05 WRU). None when the
        claim's condition fails: the session is not one this path serves as it stands (absent, deleted, being
        imported, its time order untracked or this timestamp out of it, a legacy state item to move, its state
        item to move on, the events quota reached), and the transaction path, which reads the counters, answers.

        1. The claim: one UpdateItem of the session item moves ``last_seq``, ``version``, ``tmax``,
           ``update_time`` and the last claim's time ``ct``, conditioned so that what the transaction path would
           compute from a read holds without one: ``tmax`` < the timestamp (the time order stays exact: ``tskew``
           does not move; equal, e.g. a resend of the newest event, goes the transaction path, which finds the
           stored event without moving anything), ``update_time`` <= it (so it is the new ``update_time``).
           ``ReturnValues=ALL_NEW`` gives the seq, the version and the incarnation.
        2. The put of the event item at that seq, ``attribute_not_exists(PK)``: failing with our own token it is
           our own write whose answer was lost (201); with another, the id is stored already (a resend: 200 for
           the same body, 409 otherwise) and the claimed seq stays a hole. So does a claim whose put never lands
           (the function stopped between them; its client's resend claims anew). Readers order by ``by_seq``
           and never assume consecutive seqs; a compaction cuts above a hole only once no put can still land in
           it (``policy.compaction.settled_events``: the last claim ``ct`` 60 s old, twice the function's
           timeout).
        """
        body = json.dumps(event.body, separators=(",", ":"), ensure_ascii=False)
        if len(body.encode()) > self._offload_bytes:
            return None
        now = time.time()
        expiry = self._expiry(now)
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
            "#sti": STATE_ITEM_ATTR,
        }
        values: dict[str, Any] = {
            ":one": _n(1),
            ":ts": _n(event.timestamp),
            ":now": _n(now),
            ":due": _s(due_shard(key)),
        }
        sets = [
            "#ls = #ls + :one",
            "#ver = #ver + :one",
            "#tmax = :ts",
            "#ut = :ts",
            "#ct = :now",
            "#due = if_not_exists(#due, :due)",
            "#dues = if_not_exists(#dues, :now)",
        ]
        if expiry:
            names["#exp"] = "expires_at"
            values[":exp"] = expiry
            sets.append("#exp = :exp")
        # What _read_counters and the transaction's condition would refuse or treat otherwise, as a condition.
        condition = (
            "attribute_exists(PK) AND attribute_not_exists(#del) AND attribute_not_exists(#imp) "
            "AND attribute_exists(#sti) AND #tmax < :ts AND #ut <= :ts"
        )
        if self._quotas.events_per_session:
            # last_seq counts every seq taken (holes too): the count the transaction path checks.
            values[":max"] = _n(self._quotas.events_per_session)
            condition += " AND #ls < :max"
        if self._retention_s:
            # The transaction path moves the state item's expiry on when the session would outlive it.
            names["#stx"] = STATE_EXPIRY_ATTR
            values[":stx"] = _n(now + self._retention_s)
            condition += " AND (attribute_not_exists(#stx) OR #stx >= :stx)"
        while True:
            try:
                claimed = self._db.update_item(
                    TableName=self._table,
                    Key=self._session_key(key),
                    UpdateExpression="SET " + ", ".join(sets),
                    ConditionExpression=condition,
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues=values,
                    ReturnValues="ALL_NEW",
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )["Attributes"]
                break
            except self._db.exceptions.ConditionalCheckFailedException as exc:
                # Not for this path (or botocore's retry met our own claim whose answer was lost, now above the
                # timestamp: its seq stays a hole). Nothing of this request is stored.
                old = exc.response.get("Item")
                if old and TIME_MAX_ATTR not in old and "deleting" not in old and "importing" not in old:
                    self._untracked[key] = None
                    if len(self._untracked) > _UNTRACKED_MAX:
                        self._untracked.popitem(last=False)
                return None
            except Exception as exc:
                if not _transient(exc):
                    raise
                # Throttled, or a lost answer: a claim that landed leaves a hole, the next one takes a new seq.
                budget.after_fault(exc)
        seq = _whole(claimed, "last_seq")
        version = _whole(claimed, "version")
        incarnation = _attr(claimed, "inc")
        item: dict[str, Any] = {
            "PK": _s(events_pk(key)),
            "SK": _s(f"V#{event.id}"),
            "seq": _n(seq),
            "t": _n(event.timestamp),
            "w": _s(token),
            "v": _n(version),
        }
        if incarnation:
            item["inc"] = _s(incarnation)
        if expiry:
            item["expires_at"] = expiry
        _with_body(item, body)
        while True:
            try:
                self._db.put_item(
                    TableName=self._table,
                    Item=item,
                    ConditionExpression="attribute_not_exists(PK)",
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
                break
            except self._db.exceptions.ConditionalCheckFailedException as exc:
                stored_item = exc.response.get("Item") or self._stored_items(key, [event.id], budget).get(event.id)
                if stored_item is None:  # purged since it failed the condition: put it again
                    budget.after_race()
                    continue
                if _attr(stored_item, "w") == token:
                    break  # our own put, applied, its answer lost (botocore's or our retry met it)
                stored = self.event_from_item(stored_item)
                if not same_event(stored, event):
                    raise _id_conflict(event.id, 0) from exc
                if "blob" in stored_item:
                    budget.call(self._blobs.confirm, stored_item["blob"]["S"])
                return AppendResult(events=[stored], created=[False], version=version)
            except Exception as exc:
                code = error_code(exc)
                if code == "ItemCollectionSizeLimitExceededException":
                    raise _collection_full() from exc
                if not _transient(exc):
                    raise
                budget.after_fault(exc)  # the same item, the same token: a put that landed is known again
                # Not into a session deleted (and maybe created again) meanwhile: the put is conditioned on its
                # own item only, and its partition would be the new session's.
                marks = self._session_marks(key, budget)
                if marks is None or "deleting" in marks or "importing" in marks or _attr(marks, "inc") != incarnation:
                    raise SessionNotFound(key.session_id) from exc
        return AppendResult(events=[dict(event.body, seq=seq)], created=[True], version=version)

    def _stored_items(self, key: SessionKey, event_ids: list[str], budget: _Budget) -> dict[str, dict[str, Any]]:
        """The stored items of those of ``event_ids`` that exist (consistent reads)."""
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(event_ids), 100):
            keys = [{"PK": _s(events_pk(key)), "SK": _s(f"V#{i}")} for i in event_ids[start : start + 100]]
            request: dict[str, Any] = {self._table: {"Keys": keys, "ConsistentRead": True}}
            while request:
                response = budget.call(self._db.batch_get_item, RequestItems=request)
                for item in response.get("Responses", {}).get(self._table, []):
                    found[item["SK"]["S"][2:]] = item
                request = response.get("UnprocessedKeys") or {}
                if request:
                    budget.after_fault("unprocessed keys")
        return found

    def _read_counters(self, key: SessionKey) -> _Counters | None:
        response = self._db.get_item(
            TableName=self._table,
            Key=self._session_key(key),
            ConsistentRead=True,
            ProjectionExpression=(
                "version, last_seq, update_time, cmp_end, inc, deleting, importing, dels, stx, sti, tmax, tskew, nb"
            ),
        )
        item = response.get("Item")
        if item is None or "deleting" in item or "importing" in item:
            return None
        legacy: dict[str, Any] | None = None
        if STATE_ITEM_ATTR not in item:
            # Written before state items: its state keys are read once, whole (names unknown to a projection),
            # and this append moves them to the state item. One GetItem more, once per such session.
            whole = self._db.get_item(TableName=self._table, Key=self._session_key(key), ConsistentRead=True)
            item = whole.get("Item")
            if item is None or "deleting" in item or "importing" in item:
                return None
            legacy = {k: v for k, v in item.items() if k.startswith(STATE_ATTR_PREFIX)}
            if len(legacy) > LEGACY_MOVE_MAX_KEYS:
                legacy = {}  # left in place (marked, so that it is not read whole again)
        return _Counters(
            version=int(item["version"]["N"]),
            last_seq=int(item["last_seq"]["N"]),
            update_time=float(item["update_time"]["N"]),
            summary_end_seq=int(item.get("cmp_end", {"N": "0"})["N"]),
            incarnation=_attr(item, "inc"),
            deletions=_whole(item, "dels"),
            state_expiry=_number(item, STATE_EXPIRY_ATTR),
            legacy_state=legacy,
            time_order=_TimeOrder.of(item),
            no_payloads=NO_PAYLOADS_ATTR in item,
        )

    def _clear_no_payloads(self, key: SessionKey, incarnation: str, budget: _Budget) -> bool:
        """Take the no-payload mark off the session item before a payload of this incarnation is uploaded, so that
        its DELETE lists the bucket; False when the session is gone or re-created (read it again)."""
        try:
            budget.call(
                self._db.update_item,
                TableName=self._table,
                Key=self._session_key(key),
                UpdateExpression="REMOVE #nb",
                ConditionExpression="inc = :inc",
                ExpressionAttributeNames={"#nb": NO_PAYLOADS_ATTR},
                ExpressionAttributeValues={":inc": _s(incarnation)},
            )
        except self._db.exceptions.ConditionalCheckFailedException:
            return False
        return True

    def _take_chunk(self, pending: list[NewEvent], staged: dict[str, _Staged]) -> list[NewEvent]:
        """The longest prefix of ``pending`` that fits one transaction (item count and total size)."""
        chunk: list[NewEvent] = []
        size = 0
        user = app = session = False
        for event in pending:
            if event.id not in staged:
                body = json.dumps(event.body, separators=(",", ":"), ensure_ascii=False)
                staged[event.id] = _Staged(body, len(body.encode()) > self._offload_bytes)
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

    def _upload(
        self, key: SessionKey, event: NewEvent, staged: _Staged, incarnation: str, token: str, budget: _Budget
    ) -> str:
        """Offload an event's body to S3; return its key.

        The key is this request's own (the token): a resend never overwrites the payload of the stored event,
        and the object is tagged staged until an event refers to it, so an orphan (the transaction failed, or
        its outcome is unknown and the client never comes back) expires by the bucket's lifecycle rule.
        """
        blob_key = f"{incarnation_prefix(key, incarnation)}events/{event.id}/{token}.json"
        budget.call(self._blobs.put, blob_key, staged.body.encode(), staged=True)
        return blob_key

    def _transact_append(
        self,
        key: SessionKey,
        chunk: list[NewEvent],
        staged: dict[str, _Staged],
        meta: _Counters,
        watermark: _Watermark | None,
        token: str,
    ) -> list[dict[str, Any]] | _Existing:
        """One transaction. Returns the stored events, or the already stored items whose ids made it fail
        (none when it failed on the session's condition: a concurrent append won, or the session changed).
        Raises _Unsettled when a retry can clear the failure (the transaction may have been applied)."""
        now = time.time()
        expiry = self._expiry(now)
        # A client append counts in the version (the ETag); a compaction (server-authored) does not, so an
        # If-Match a client took before it still matches. Both move last_seq.
        version = meta.version + 1 if watermark is None else meta.version
        stored: list[dict[str, Any]] = []
        actions: list[dict[str, Any]] = []
        session_state: dict[str, Any] = {}
        user_state: dict[str, Any] = {}
        app_state: dict[str, Any] = {}
        seq = meta.last_seq
        # A session created before its time order was tracked keeps the by_ts index whole: "ts" as before.
        ts_attr = "ts" if meta.time_order is None else "t"
        for event in chunk:
            seq += 1
            item: dict[str, Any] = {
                "PK": _s(events_pk(key)),
                "SK": _s(f"V#{event.id}"),
                "seq": _n(seq),
                ts_attr: _n(event.timestamp),
                "w": _s(token),
                "v": _n(version),
            }
            if meta.incarnation:
                item["inc"] = _s(meta.incarnation)
            if staged[event.id].offload:
                item["blob"] = _s(staged[event.id].blob_key)
                # Enough to answer with a placeholder should the payload ever be missing.
                stub = {k: event.body[k] for k in ("author", "invocation_id") if k in event.body}
                item["stub"] = _s(json.dumps(stub, separators=(",", ":"), ensure_ascii=False))
            if expiry:
                item["expires_at"] = expiry
            if not staged[event.id].offload:
                _with_body(item, staged[event.id].body)
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
        update.set("last_seq", _n(seq))
        if meta.time_order is not None:
            # Under the same condition as the counters: exact, as last_seq is.
            order = meta.time_order.after([e.timestamp for e in chunk])
            if order != meta.time_order:
                for name, value in order.attributes().items():
                    update.set(name, value)
        if watermark is None:
            update.set("version", _n(version))
            # last_update_time is a client's too: a compaction neither moves it nor reorders the listings.
            update.set("update_time", _n(max(meta.update_time, max(e.timestamp for e in chunk))))
        if expiry:
            update.set("expires_at", expiry)
        # The session's state item is written only when the chunk changes the state (its delta's keys, not the
        # whole state), or, with a retention, when the session would now outlive it (about once a retention
        # period). Inside this transaction: the session item's condition below guards it as it guards the counters.
        state_update = _Update()
        removed: list[str] = []
        if meta.legacy_state is not None:
            # A session item written before state items: its state keys move to the state item (as stored,
            # under this chunk's delta), out of the session item, in this transaction; its condition (version,
            # last_seq) holds them unchanged since they were read.
            for attr, value in meta.legacy_state.items():
                if attr[len(STATE_ATTR_PREFIX) :] not in session_state:
                    state_update.set(attr, value)
                removed.append(attr)
            update.set(STATE_ITEM_ATTR, _n(1))
        state_update.set_state(session_state)
        state_expiry = self._state_expiry(now)
        if state_expiry and (
            state_update.sets or (meta.state_expiry is not None and meta.state_expiry < now + self._retention_s)
        ):
            state_update.set("expires_at", state_expiry)
            update.set(STATE_EXPIRY_ATTR, state_expiry)
        if state_update.sets and meta.incarnation:
            state_update.set("inc", _s(meta.incarnation))
        update.values[":expected"] = _n(meta.version)
        update.values[":last_seq"] = _n(meta.last_seq)
        update.names["#inc"] = "inc"
        # The seqs were numbered from last_seq as read: conditioning on it (not only on the version, which a
        # compaction leaves alone) means two transactions numbered from the same last_seq never both commit, so
        # no two items of a session share a seq. The same incarnation, not being deleted: counters read from a
        # deleted session never reach a new one.
        condition = "version = :expected AND last_seq = :last_seq AND attribute_not_exists(deleting) AND "
        if meta.incarnation:
            update.values[":inc"] = _s(meta.incarnation)
            condition += "#inc = :inc"
        else:
            condition += "attribute_not_exists(#inc)"
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
            if watermark.deletions is not None:
                # No deletion since the compaction read the events: its summary may hold their text.
                update.names["#dels"] = "dels"
                if watermark.deletions:
                    update.values[":dels"] = _n(watermark.deletions)
                    condition += " AND #dels = :dels"
                else:
                    condition += " AND attribute_not_exists(#dels)"
        expression = update.expression()
        if removed:
            expression += " REMOVE " + ", ".join(f"#r{i}" for i in range(len(removed)))
            update.names.update({f"#r{i}": attr for i, attr in enumerate(removed)})
        session_action = {
            "Update": {
                "TableName": self._table,
                "Key": self._session_key(key),
                "UpdateExpression": expression,
                "ConditionExpression": condition,
                "ExpressionAttributeNames": update.names,
                "ExpressionAttributeValues": update.values,
            }
        }
        actions.insert(0, session_action)
        if state_update.sets:
            actions.append(
                {
                    "Update": {
                        "TableName": self._table,
                        "Key": self._state_key(key),
                        "UpdateExpression": state_update.expression(),
                        "ExpressionAttributeNames": state_update.names,
                        "ExpressionAttributeValues": state_update.values,
                    }
                }
            )
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
                raise _too_large("actions.state_delta") from exc
            if "ItemCollectionSizeLimitExceeded" in codes:
                raise _collection_full() from exc
            existing = {
                event.id: reason["Item"]
                for event, reason in zip(chunk, reasons[1 : 1 + len(chunk)], strict=False)
                if reason.get("Code") == "ConditionalCheckFailed" and "Item" in reason
            }
            if existing or codes <= {"None", "ConditionalCheckFailed"}:
                return _Existing(existing)
            # Throttled, a conflicting transaction, or a reason we do not know: retry within the budget.
            raise _Unsettled(str(sorted(codes))) from exc
        except Exception as exc:
            code = error_code(exc)
            if code == "ValidationException" and "size" in str(exc):
                raise _too_large("actions.state_delta") from exc
            if code == "ItemCollectionSizeLimitExceededException":
                raise _collection_full() from exc
            if _transient(exc):
                raise _Unsettled(code or type(exc).__name__) from exc
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
            elif COMPRESSED_BODY_ATTR in item:
                data = _inflate(item[COMPRESSED_BODY_ATTR]["B"])
            else:
                data = item["body"]["S"]
            body = load_stored(data, verbatim=verbatim)
            if not isinstance(body, dict):
                raise Unreadable(f"a JSON {type(body).__name__}, not an object")
        except Unreadable as exc:
            return self._unreadable(item, f"its body is not a JSON object ({exc})", exc)
        except (KeyError, TypeError) as exc:  # no body attribute, or no payload (BlobMissing is a KeyError)
            if "blob" in item:
                return self._unreadable(item, "its payload is missing from storage", exc, payload_missing=True)
            return self._unreadable(item, "its item holds no body", exc)
        except Exception as exc:
            if error_code(exc) not in ("NoSuchKey", "404"):
                raise
            return self._unreadable(item, "its payload is missing from storage", exc, payload_missing=True)
        body["seq"] = _whole(item, "seq")
        if not isinstance(body.get("id"), str):
            body["id"] = _unreadable_event(item, "")["id"]
        body["timestamp"] = readable_timestamp(body.get("timestamp"), readable_timestamp(_event_ts(item)))
        return body

    def changes(self, records: list[dict[str, Any]]) -> list[Change]:
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
                found.append(Change(key, self.event_from_item(image), sequence))
            except Exception as exc:
                logger.warning("stream record's event not readable now", extra={"error": str(exc)[:200]})
                found.append(Change(key, {}, sequence, unread=f"{type(exc).__name__}: {str(exc)[:200]}"))
        return found

    def purge_expired(self, records: list[dict[str, Any]]) -> list[str]:
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
                deleted = self._blobs.delete_prefix(blob)  # botocore's retries; a fault: the feed delivers it again
            except Exception as exc:
                logger.warning("an expired event's payload was not deleted; retried", extra={"error": repr(exc)[:200]})
                failed.append(str(change.get("SequenceNumber", "")))
                continue
            logger.info("expired event's payload deleted", extra={"versions": deleted})
        return failed

    @staticmethod
    def _unreadable(
        item: dict[str, Any], reason: str, exc: BaseException, *, payload_missing: bool = False
    ) -> dict[str, Any]:
        marker = _unreadable_event(item, reason[:200], payload_missing=payload_missing)
        logger.warning(
            "stored event does not read; answered as a marker event",
            extra={"pk": item.get("PK", {}).get("S"), "event_id": marker["id"], "error": str(exc)[:200]},
        )
        return marker

    def read_events(self, key: SessionKey, query: EventQuery) -> list[dict[str, Any]]:
        """Reads the session item's deletion marks (``dels``, ``hide``) before (unless the query brings them from the
        caller's record: ``EventQuery.marks``) and after the events: the seq ranges
        of a deletion not purged yet are left out of the Queries, and a deletion that committed while the events
        were read (its purge may have removed part of them under the read) makes the read start again. So no read
        ever shows part of a deletion, whatever its size."""
        if query.num_recent == 0 or query.limit == 0:
            return []
        known = query.marks
        for _ in range(_READ_ATTEMPTS):
            # The caller's marks, read with its record a moment ago, save the first read (once: a retry reads).
            deletions, hidden = (known[0], list(known[1])) if known is not None else self._deletion_marks(key)
            known = None
            events = self._read_visible(key, query, hidden)
            if query.unchecked or self._deletion_marks(key, counter_only=True)[0] == deletions:
                return events
        raise ServiceUnavailable("the session's events kept being deleted while they were read; retry", retry_after=1)

    def _session_attributes(self, key: SessionKey, projection: str) -> dict[str, Any]:
        """Attributes of the session item (consistent; {} when there is none). A Query of the one item rather
        than a GetItem: every function that reads events may Query the table (the read-only ones, auto-save),
        not all may GetItem."""
        response = _Budget().call(
            self._db.query,
            TableName=self._table,
            ConsistentRead=True,
            KeyConditionExpression="PK = :pk AND SK = :sk",
            ExpressionAttributeValues={
                ":pk": _s(session_pk(key.app_name, key.user_id)),
                ":sk": _s(f"S#{key.session_id}"),
            },
            ProjectionExpression=projection,
        )
        item: dict[str, Any] = (response.get("Items") or [{}])[0]
        return item

    def _deletion_marks(self, key: SessionKey, *, counter_only: bool = False) -> tuple[int, list[SeqRange]]:
        """The session's deletion count and the seq ranges of its deletions not purged yet."""
        item = self._session_attributes(key, "dels" if counter_only else "dels, hide")
        return _whole(item, "dels"), _hidden_ranges(item)

    def _read_visible(self, key: SessionKey, query: EventQuery, hidden: list[SeqRange]) -> list[dict[str, Any]]:
        pk = events_pk(key)
        low = (query.after_seq or 0) + 1
        high = query.up_to_seq if query.up_to_seq is not None else _MAX_SEQ
        if low > high:
            return []
        paged = query.limit is not None or query.max_bytes is not None
        if query.after_timestamp is not None:
            ts = float(query.after_timestamp)
            if query.after_seq is None or query.num_recent is not None:
                # Where the selection starts (and ends): the seqs of the events at or after the time, read
                # without bodies; pages after the first resume from their seq instead.
                seqs = sorted(s for s in self._seqs_since(key, ts, low, high, hidden) if not in_ranges(s, hidden))
                if query.num_recent is not None:
                    seqs = seqs[-query.num_recent :]
                if not seqs:
                    return []
                low, high = seqs[0], seqs[-1]
            return self._read_forward(pk, low, high, query, ts, hidden)
        if query.num_recent is not None:
            if not paged or query.num_recent <= _BACKWARD_READ_MAX:
                # Newest first, stop after num_recent: one query reads the items, then the page is taken from
                # the oldest of them (payloads in S3 fetched only as far as the page goes).
                items = self._newest(pk, low, high, hidden, {}, query.num_recent)
                items.reverse()
                page = _Page(query)
                page.take(items, self.event_from_item)
                return page.events
            # A page of the newest num_recent starts at the oldest of them: find its seq without reading bodies.
            newest = self._newest(pk, low, high, hidden, {"ProjectionExpression": "seq"}, query.num_recent)
            if not newest:
                return []
            low = int(newest[-1]["seq"]["N"])
        return self._read_forward(pk, low, high, query, None, hidden)

    def _newest(
        self, pk: str, low: int, high: int, hidden: list[SeqRange], extra: dict[str, Any], limit: int | None
    ) -> list[dict[str, Any]]:
        """Up to ``limit`` items with low <= seq <= high outside ``hidden``, newest first."""
        items: list[dict[str, Any]] = []
        for a, b in reversed(_visible_segments(low, high, hidden)):
            left = None if limit is None else limit - len(items)
            if left is not None and left <= 0:
                break
            items += self._query_all(self._by_seq(pk, a, b) | {"ScanIndexForward": False} | extra, left)
        return items

    @staticmethod
    def _by_seq(pk: str, low: int, high: int) -> dict[str, Any]:
        return {
            "IndexName": "by_seq",
            "KeyConditionExpression": "PK = :pk AND seq BETWEEN :low AND :high",
            "ExpressionAttributeValues": {":pk": _s(pk), ":low": _n(low), ":high": _n(high)},
        }

    def _seqs_since(self, key: SessionKey, ts: float, low: int, high: int, hidden: list[SeqRange]) -> list[int]:
        """The seqs in [low, high] of the events whose timestamp is at or after ``ts``. A session whose time order
        is tracked: its newest events first from ``by_seq``, down to the first one below ``ts - skew``
        (``_TimeOrder``), so the read is about as long as the answer while timestamps follow the seqs. A session
        created before that: from the by_ts index, as its events were written."""
        pk = events_pk(key)
        order = _TimeOrder.of(self._session_attributes(key, f"{TIME_MAX_ATTR}, {TIME_SKEW_ATTR}"))
        if order is not None:
            stop = ts - order.skew
            found: list[int] = []
            # Pages that double from a small first one: a Query without a Limit reads (and is charged for) up to
            # 1 MB of items past the stop, one with a fixed small Limit takes many round trips for a long answer.
            limit = _SINCE_FIRST_PAGE
            for a, b in reversed(_visible_segments(low, high, hidden)):
                newest = self._by_seq(pk, a, b) | {"ScanIndexForward": False, "ProjectionExpression": "seq, t, ts"}
                while True:
                    newest["Limit"] = limit
                    limit = min(limit * 2, _QUERY_LIMIT_MAX)
                    page = self._db.query(TableName=self._table, ConsistentRead=True, **newest)
                    for item in page.get("Items", []):
                        at = _event_ts(item)
                        if at is not None and at >= ts:
                            found.append(_whole(item, "seq"))
                        elif at is not None and at < stop:
                            return found
                    if "LastEvaluatedKey" not in page:
                        break
                    newest["ExclusiveStartKey"] = page["LastEvaluatedKey"]
            return found
        params: dict[str, Any] = {
            "IndexName": "by_ts",
            "KeyConditionExpression": "PK = :pk AND ts >= :ts",
            "FilterExpression": "seq BETWEEN :low AND :high",
            "ExpressionAttributeValues": {":pk": _s(pk), ":ts": _n(ts), ":low": _n(low), ":high": _n(high)},
            "ProjectionExpression": "seq",
        }
        return [_whole(item, "seq") for item in self._query_all(params, None)]

    def _read_forward(
        self,
        pk: str,
        low: int,
        high: int,
        query: EventQuery,
        after_timestamp: float | None,
        hidden: list[SeqRange],
    ) -> list[dict[str, Any]]:
        """Events with low <= seq <= high (and ts >= after_timestamp) outside ``hidden``, oldest first, stopping at
        the query's ``limit`` and ``max_bytes``: a page reads about the items it returns, and no payload past its
        end."""
        page = _Page(query)
        for a, b in _visible_segments(low, high, hidden):
            params = self._by_seq(pk, a, b)
            if after_timestamp is not None:
                params["FilterExpression"] = "t >= :ts OR ts >= :ts"
                params["ExpressionAttributeValues"][":ts"] = _n(after_timestamp)
            while True:
                if query.limit is not None:
                    params["Limit"] = min(query.limit - len(page.events), _QUERY_LIMIT_MAX)
                response = self._db.query(TableName=self._table, ConsistentRead=True, **params)
                if page.take(response.get("Items", []), self.event_from_item):
                    return page.events
                if "LastEvaluatedKey" not in response:
                    break
                params["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        return page.events

    def read_tail(self, key: SessionKey, query: EventQuery, need: TailNeed) -> Tail:
        """Newest-first Queries of ``by_seq`` (``ScanIndexForward=False``, ``Limit`` the page ``need`` asks for),
        between the deletion marks' reads as ``read_events`` does (the caller's marks save the first), so that the
        pages are one view: a deletion committed meanwhile makes the read start again."""
        tail_query(query)
        known = query.marks
        for _ in range(_READ_ATTEMPTS):
            deletions, hidden = (known[0], list(known[1])) if known is not None else self._deletion_marks(key)
            known = None
            tail = self._read_tail(key, query, hidden, need)
            if self._deletion_marks(key, counter_only=True)[0] == deletions:
                return tail
        raise ServiceUnavailable("the session's events kept being deleted while they were read; retry", retry_after=1)

    def _read_tail(self, key: SessionKey, query: EventQuery, hidden: list[SeqRange], need: TailNeed) -> Tail:
        pk = events_pk(key)
        low = (query.after_seq or 0) + 1
        high = query.up_to_seq if query.up_to_seq is not None else _MAX_SEQ
        if low > high:
            return Tail(events=[])
        segments = list(reversed(_visible_segments(low, high, hidden)))  # newest first
        events: list[dict[str, Any]] = []
        below = high + 1  # the oldest seq read so far (seqs below it are not read)
        start: dict[str, Any] | None = None
        more = need([])
        if more <= 0:
            return Tail(events=[])
        while more > 0:
            left = more
            while left > 0 and segments:
                a, b = segments[0]
                params = self._by_seq(pk, a, b) | {"ScanIndexForward": False, "Limit": min(left, _QUERY_LIMIT_MAX)}
                if start is not None:
                    params["ExclusiveStartKey"] = start
                response = self._db.query(TableName=self._table, ConsistentRead=True, **params)
                items = response.get("Items", [])
                # Payloads in S3 are fetched for these items only.
                events = [self.event_from_item(item, verbatim=query.verbatim) for item in reversed(items)] + events
                if items:
                    below = _whole(items[-1], "seq")
                left -= len(items)
                start = response.get("LastEvaluatedKey")
                if start is None:
                    segments.pop(0)
            if not segments:
                return Tail(events=events)  # the selection's oldest event is read
            more = need(events)
        return Tail(events=events, older=self._count_before(pk, low, below - 1, hidden))

    def _count_before(self, pk: str, low: int, high: int, hidden: list[SeqRange]) -> int:
        """How many events a tail left unread, without reading them: the seqs from the oldest stored one (one
        Query, one item) through ``high``, less the pending deletions. Events deleted and purged between them are
        counted too (no item says where they were)."""
        segments = _visible_segments(low, high, hidden)
        for i, (a, b) in enumerate(segments):
            first = self._query_all(self._by_seq(pk, a, b) | {"ProjectionExpression": "seq"}, 1)
            if first:
                oldest = _whole(first[0], "seq")
                return (b - oldest + 1) + sum(hi - lo + 1 for lo, hi in segments[i + 1 :])
        return 0

    # --- deleting events --------------------------------------------------------------------------------------

    def delete_events(self, key: SessionKey, deletion: Deletion, expected_version: int | None) -> DeleteResult:
        """One conditional UpdateItem of the session item, whatever the number of events: it adds the deletion's
        seq ranges to ``hide`` (reads leave them out until ``purge_deleted`` has removed their items), counts it in
        ``dels``, moves ``version`` and the watermark and marks the session due. Conditioned on the counters the
        plan was made on; the request's token ``dtok`` recognises an update whose answer was lost."""
        budget = _Budget()
        token = uuid.uuid4().hex
        seen = deletion.record
        while True:
            # The plan's record (a consistent read a moment ago) stands in for the first read: the update is
            # conditioned on its counters, so a session that moved since fails it and is read below.
            item = _item_of(seen) if seen is not None else self._read_session_item(key, budget, _DELETE_PROJECTION)
            seen = None
            if item is None or "deleting" in item:
                raise SessionNotFound(key.session_id)
            version = _whole(item, "version")
            if _attr(item, "dtok") == token:  # an attempt whose answer was lost landed
                return DeleteResult(version=version)
            if expected_version is not None and version != expected_version:
                raise PreconditionFailed(
                    f"If-Match version {expected_version} is not the current version {version}", field="If-Match"
                )
            deletions = _whole(item, "dels")
            if (_whole(item, "last_seq"), deletions) != (deletion.based_on_seq, deletion.based_on_deletions):
                raise DeletionRaced()
            hidden = _merged([*_hidden_ranges(item), *deletion.ranges])
            update = _Update()
            update.set("version", _n(version + 1))
            update.set("dels", _n(deletions + 1))
            update.set("hide", _s(_hide_json(hidden)))
            update.set("dtok", _s(token))
            update.set("due", _s(due_shard(key)), if_absent=True)
            update.set("due_since", _n(time.time()), if_absent=True)
            # The watermark falls back to the newest summary left (none: no summary to start the context from).
            if deletion.summary_event_id is not None:
                update.set("cmp_id", _s(deletion.summary_event_id))
                update.set("cmp_end", _n(deletion.summary_end_seq))
                expression = update.expression()
            else:
                update.set("cmp_end", _n(0))
                expression = update.expression() + " REMOVE cmp_id"
            update.names["#dl"] = "deleting"
            update.values[":expected"] = _n(version)
            update.values[":last_seq"] = _n(deletion.based_on_seq)
            condition = "version = :expected AND last_seq = :last_seq AND attribute_not_exists(#dl)"
            if deletions:
                update.values[":dels_prev"] = _n(deletions)
                condition += " AND dels = :dels_prev"
            else:
                condition += " AND attribute_not_exists(dels)"
            if _attr(item, "inc"):
                update.values[":inc"] = item["inc"]
                condition += " AND inc = :inc"
            try:
                self._db.update_item(
                    TableName=self._table,
                    Key=self._session_key(key),
                    UpdateExpression=expression,
                    ConditionExpression=condition,
                    ExpressionAttributeNames=update.names,
                    ExpressionAttributeValues=update.values,
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
            except self._db.exceptions.ConditionalCheckFailedException as exc:
                old = exc.response.get("Item") or {}
                if _attr(old, "dtok") == token:  # botocore's retry met our own applied update
                    return DeleteResult(version=version + 1)
                budget.after_race()  # the session moved under us: read it again (and tell why)
                continue
            except Exception as exc:
                if not _transient(exc):
                    raise
                budget.after_fault(exc)  # maybe applied: the next read tells by dtok
                continue
            return DeleteResult(version=version + 1, hidden=tuple(hidden))

    def _read_session_item(self, key: SessionKey, budget: _Budget, projection: str) -> dict[str, Any] | None:
        """The session item's ``projection`` (a consistent GetItem; None when there is no item)."""
        item: dict[str, Any] | None = budget.call(
            self._db.get_item,
            TableName=self._table,
            Key=self._session_key(key),
            ConsistentRead=True,
            ProjectionExpression=projection,
        ).get("Item")
        return item

    def purge_deleted(
        self, key: SessionKey, before: Callable[[list[str]], None], hidden: tuple[SeqRange, ...] | None = None
    ) -> int:
        """Page by page (keys only) through the hidden ranges: ``before(ids)``, then every version of the page's
        offloaded payloads, then its items; once all are gone the ranges leave ``hide``. Stops with 503 after
        ``PURGE_BUDGET_S`` (reads stay right meanwhile; the next call goes on). ``hidden`` (the caller's, just
        read or just written) saves reading ``hide`` first; ranges purged meanwhile by another request are
        found empty."""
        budget = _Budget()
        started = time.monotonic()
        if hidden is None:
            item = self._read_session_item(key, budget, "hide")
        else:
            item = {"hide": _s(_hide_json(list(hidden)))} if hidden else {}
        ranges = _hidden_ranges(item or {})
        if not ranges:
            return 0
        pk = events_pk(key)
        removed = 0
        for lo, hi in ranges:
            while True:
                params = self._by_seq(pk, lo, hi) | {
                    "ProjectionExpression": "PK, SK, #blob",
                    "ExpressionAttributeNames": {"#blob": "blob"},  # a reserved word
                }
                # From the range's start each time: the items of the page before are gone.
                response = budget.call(
                    self._db.query, TableName=self._table, ConsistentRead=True, Limit=_PURGE_PAGE, **params
                )
                items = response.get("Items", [])
                if not items:
                    break
                before([i["SK"]["S"][2:] for i in items])
                for blob in (i["blob"]["S"] for i in items if "blob" in i):
                    # Every version of the payload the item names. (Uploads of failed resends, under other tokens, are
                    # still tagged staged: the lifecycle rule expires them. Not the event's whole folder: a new
                    # event may reuse the id once this one is gone.)
                    budget.call(self._blobs.delete_prefix, blob)
                parallel_batch_write(
                    self._db, self._table, [{"DeleteRequest": {"Key": {"PK": i["PK"], "SK": i["SK"]}}} for i in items]
                )
                removed += len(items)
                if time.monotonic() - started > PURGE_BUDGET_S:
                    raise ServiceUnavailable(
                        "the events are deleted (no read shows them); removing them from storage takes longer: "
                        "send the request again to finish",
                        retry_after=1,
                    )
                if "LastEvaluatedKey" not in response:
                    break  # the page held the rest of the range: nothing is left to ask for
        self._unhide(key, ranges, budget, item)
        return removed

    def _unhide(
        self, key: SessionKey, ranges: list[SeqRange], budget: _Budget, seen: dict[str, Any] | None = None
    ) -> None:
        """Take purged ranges out of ``hide`` (those a deletion added meanwhile stay). ``seen``: the session item's
        ``hide`` as the purge started from, tried first (conditional: a ``hide`` changed since is read)."""
        while True:
            item = seen if seen is not None else self._read_session_item(key, budget, "hide")
            seen = None
            if item is None or "hide" not in item:
                return
            rest = [r for r in _hidden_ranges(item) if not any(lo <= r[0] and r[1] <= hi for lo, hi in ranges)]
            params: dict[str, Any] = {
                "TableName": self._table,
                "Key": self._session_key(key),
                "ConditionExpression": "hide = :old",
                "ExpressionAttributeValues": {":old": item["hide"]},
            }
            if rest:
                params["UpdateExpression"] = "SET hide = :rest"
                params["ExpressionAttributeValues"][":rest"] = _s(_hide_json(rest))
            else:
                params["UpdateExpression"] = "REMOVE hide"
            try:
                budget.call(self._db.update_item, **params)
                return
            except self._db.exceptions.ConditionalCheckFailedException:
                budget.after_race()  # another deletion added ranges (or a retry removed ours): read again

    # --- the compaction schedule's index ------------------------------------------------------------------

    def list_due(self, limit: int) -> list[SessionKey]:
        """Up to ``limit`` due sessions, oldest first in each shard, the shards interleaved.

        Every round asks each shard that has more for an equal share of what is left (paging past a query's
        1 MB), so a busy shard cannot fill the listing while the others wait: with more sessions due than
        ``limit``, every shard gets its share and its oldest go first. The index is eventually consistent (a
        GSI always is): a session marked a moment ago may wait for the next run.
        """
        budget = _Budget()
        listed: dict[int, list[SessionKey]] = {shard: [] for shard in range(DUE_SHARDS)}
        cursors: dict[int, dict[str, Any] | None] = dict.fromkeys(range(DUE_SHARDS))
        total = 0
        while total < limit and cursors:
            share = max(1, -(-(limit - total) // len(cursors)))
            for shard in list(cursors):
                if total >= limit:
                    break
                params: dict[str, Any] = {
                    "TableName": self._table,
                    "IndexName": "by_due",
                    "KeyConditionExpression": "due = :d",
                    "ExpressionAttributeValues": {":d": _s(f"DUE#{shard}")},
                    "Limit": min(share, limit - total),
                }
                if cursors[shard] is not None:
                    params["ExclusiveStartKey"] = cursors[shard]
                response = budget.call(self._db.query, **params)
                for item in response.get("Items", []):
                    _, app_name, user_id = item["PK"]["S"].split("#", 2)
                    listed[shard].append(SessionKey(app_name, user_id, item["SK"]["S"][2:]))
                    total += 1
                if response.get("LastEvaluatedKey"):
                    cursors[shard] = response["LastEvaluatedKey"]
                else:
                    del cursors[shard]
        # Interleaved by rank (each shard's oldest, then each one's second …): a sweep that runs out of time leaves
        # the newest of every shard, not a whole shard.
        longest = max((len(keys) for keys in listed.values()), default=0)
        return [keys[rank] for rank in range(longest) for keys in listed.values() if rank < len(keys)]

    def clear_due(self, key: SessionKey, version: int) -> bool:
        try:
            # Idempotent: a retry after a lost answer meets the same version and removes nothing more.
            _Budget().call(
                self._db.update_item,
                TableName=self._table,
                Key=self._session_key(key),
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


def batch_write(db: Any, table: str, requests: list[dict[str, Any]], budget: _Budget | None = None) -> None:
    """BatchWriteItem in chunks of 25. Unprocessed items and throttles are retried with jittered backoff within
    the write budget (``aws.WRITE_BUDGET_S``), then ServiceUnavailable (503): never a loop past the function's
    timeout. The requests must be idempotent (puts of whole items, deletes), as a retry may repeat one."""
    budget = budget or _Budget()
    for start in range(0, len(requests), 25):
        pending: dict[str, Any] = {table: requests[start : start + 25]}
        while pending:
            response = budget.call(db.batch_write_item, RequestItems=pending)
            pending = response.get("UnprocessedItems") or {}
            if pending:
                budget.after_fault("unprocessed items")


def parallel_batch_write(db: Any, table: str, requests: list[dict[str, Any]], workers: int = 8) -> None:
    """``batch_write`` in chunks of 250 requests on up to ``workers`` threads (each chunk its own write budget):
    a purge of thousands of items takes its time divided by the workers. The first failure is raised once every
    chunk has ended."""
    chunks = [requests[start : start + 250] for start in range(0, len(requests), 250)]
    if len(chunks) <= 1:
        batch_write(db, table, requests)
        return
    with ThreadPoolExecutor(max_workers=min(workers, len(chunks))) as pool:
        futures = [pool.submit(batch_write, db, table, chunk) for chunk in chunks]
    for future in futures:
        future.result()


def _with_body(item: dict[str, Any], text: str) -> dict[str, Any]:
    """``item`` (every other attribute set) with the event's JSON ``text``: as ``body``, or zlib-compressed as
    ``bz`` when that makes the item (and its ``by_seq`` entry) fewer 1 KB write units."""
    data = text.encode()
    if len(data) >= _COMPRESS_MIN_BYTES:
        rest = item_size(item)
        plain = -(-(rest + 4 + len(data)) // _KB)  # "body"
        if plain > 1:
            deflater = zlib.compressobj(zdict=_ZDICT)
            packed = deflater.compress(data) + deflater.flush()
            if -(-(rest + 2 + len(packed)) // _KB) < plain:  # "bz"
                item[COMPRESSED_BODY_ATTR] = {"B": packed}
                return item
    item["body"] = _s(text)
    return item


def _inflate(value: Any) -> bytes:
    """A ``bz`` value as stored (bytes from boto3; base64 text in a Lambda stream record) inflated; Unreadable
    when it does not inflate (or inflates past ``_INFLATE_MAX_BYTES``)."""
    try:
        packed = base64.b64decode(value, validate=True) if isinstance(value, str) else bytes(value)
        inflater = zlib.decompressobj(zdict=_ZDICT)  # (a stream without FDICT inflates as well)
        data = inflater.decompress(packed, _INFLATE_MAX_BYTES)
    except (binascii.Error, ValueError, TypeError, zlib.error) as exc:
        raise Unreadable(f"its compressed body does not inflate ({exc})") from exc
    if inflater.unconsumed_tail:
        raise Unreadable(f"its compressed body inflates past {_INFLATE_MAX_BYTES} bytes")
    if not inflater.eof:
        raise Unreadable("its compressed body is truncated")
    return data


def _event_ts(item: dict[str, Any]) -> float | None:
    """An event item's timestamp: ``t``, or ``ts`` on the events of a session whose time order is not tracked."""
    return _number(item, "t") if "t" in item else _number(item, "ts")


def _number(item: dict[str, Any], name: str) -> float | None:
    try:
        return float(item[name]["N"])
    except (KeyError, TypeError, ValueError):
        return None


def _whole(item: dict[str, Any], name: str) -> int:
    value = _number(item, name)
    return int(value) if value is not None and value.is_integer() else 0


def _session_state(item: dict[str, Any], state_item: dict[str, Any] | None) -> dict[str, Any]:
    """The session's state: what a session item written before state items holds, overlaid by its state item's
    (newer: every state write since goes there). A state item of another incarnation (an earlier session of the
    id whose purge has not reached it yet) is not this session's."""
    state = _state_from_item(item)
    if state_item is not None and _attr(state_item, "inc") == _attr(item, "inc"):
        state.update(_state_from_item(state_item))
    return state


def _record_from_item(
    item: dict[str, Any], *, with_state: bool = True, state_item: dict[str, Any] | None = None
) -> SessionRecord:
    """A session item (and its state item) as a record; identifiers come from the keys, so a damaged item still
    reads."""
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
        state=_session_state(item, state_item) if with_state else {},
        summary_event_id=item["cmp_id"].get("S") if "cmp_id" in item else None,
        summary_end_seq=_whole(item, "cmp_end"),
        incarnation=_attr(item, "inc"),
        memo=_memo_from_item(item) if with_state else {},
        deletions=_whole(item, "dels"),
        hidden=tuple(_hidden_ranges(item)),
        claimed_at=_number(item, CLAIM_TIME_ATTR),
    )


def _memo_from_item(item: dict[str, Any]) -> dict[str, Any]:
    """The session's memo (``{}`` when none was written); one that does not read is left out (logged)."""
    if MEMO_ATTR not in item:
        return {}
    try:
        memo = load_stored(item[MEMO_ATTR]["S"], verbatim=True)
    except (KeyError, TypeError, Unreadable) as exc:
        logger.warning(
            "stored memo does not read; left out", extra={"pk": item.get("PK", {}).get("S"), "error": str(exc)[:200]}
        )
        return {}
    return memo if isinstance(memo, dict) else {}


def _stale_import(marks: dict[str, Any]) -> bool:
    """Whether an import placeholder was left by an import that died (older than ``IMPORT_STALE_S``)."""
    started = _number(marks, "import_started")
    return started is None or started < time.time() - IMPORT_STALE_S


def _import_under_way(marks: dict[str, Any]) -> ServiceUnavailable:
    """503 until an import's placeholder is stale: the import may still be writing (or died a moment ago)."""
    started = _number(marks, "import_started") or 0.0
    wait = max(1, int(started + IMPORT_STALE_S - time.time()) + 1)
    return ServiceUnavailable(
        "an import of this session is under way (or failed moments ago); retry after it ends", retry_after=wait
    )


def _hidden_ranges(item: dict[str, Any]) -> list[SeqRange]:
    """The seq ranges a session item's ``hide`` holds (deletions committed, not purged yet)."""
    try:
        ranges = json.loads(item["hide"]["S"])
        return [(int(lo), int(hi)) for lo, hi in ranges]
    except (KeyError, TypeError, ValueError):
        return []


def _visible_segments(low: int, high: int, hidden: list[SeqRange]) -> list[SeqRange]:
    """``low``..``high`` without the ``hidden`` ranges, as ascending inclusive segments."""
    segments: list[SeqRange] = []
    start = low
    for lo, hi in sorted(hidden):
        if hi < start or lo > high:
            continue
        if lo > start:
            segments.append((start, lo - 1))
        start = max(start, hi + 1)
        if start > high:
            break
    if start <= high:
        segments.append((start, high))
    return segments


# What ``delete_events`` reads of the session item when it reads it.
_DELETE_PROJECTION = "version, last_seq, dels, hide, inc, deleting, dtok"

# The stream record's ``userIdentity`` of an item DynamoDB's TTL deleted (a request's deletion carries none).
TTL_IDENTITY = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}


def _hide_json(ranges: list[SeqRange]) -> str:
    """``hide``'s value for ``ranges``: always written alike, so that a conditional write can name it."""
    return json.dumps(ranges, separators=(",", ":"))


def _item_of(record: SessionRecord) -> dict[str, Any]:
    """The attributes of the session item that ``delete_events`` conditions on, as ``record`` read them."""
    item: dict[str, Any] = {"version": _n(record.version), "last_seq": _n(record.last_seq)}
    if record.deletions:
        item["dels"] = _n(record.deletions)
    if record.hidden:
        item["hide"] = _s(_hide_json(list(record.hidden)))
    if record.incarnation:
        item["inc"] = _s(record.incarnation)
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


def _unreadable_event(item: dict[str, Any], reason: str, *, payload_missing: bool = False) -> dict[str, Any]:
    """What an event item that does not read reads as (``jsonio.unreadable_event``, with the author and invocation
    of the stub an offloaded event keeps). A missing offloaded payload is also marked in ``custom_metadata``
    (``PAYLOAD_MISSING_META``)."""
    sk = item.get("SK", {}).get("S", "")
    try:
        stub = json.loads(item["stub"]["S"]) if "stub" in item else {}
    except (KeyError, TypeError, ValueError):
        stub = {}
    event_id = sk[2:] if sk.startswith("V#") else sk
    marker = unreadable_event(
        event_id, _whole(item, "seq"), _event_ts(item), reason, stub=stub if isinstance(stub, dict) else {}
    )
    if payload_missing:
        marker["custom_metadata"] = {PAYLOAD_MISSING_META: True}
    return marker


def _too_large(field: str) -> PayloadTooLarge:
    return PayloadTooLarge(
        "the write would grow the session's state past DynamoDB's 400 KB item limit; keep large values in "
        "events or artifacts, not in state",
        field=field,
    )


def _collection_full() -> PayloadTooLarge:
    return PayloadTooLarge(
        "this session has reached DynamoDB's 10 GB limit for one session's events (the item collection of its "
        "local secondary indexes); compaction does not free it: start a new session"
    )


def _id_conflict(event_id: str, index: int) -> EventIdConflict:
    return EventIdConflict(
        f"event id {event_id!r} is stored already with a different body; send a new id for a new event",
        field=f"events[{index}].id",
    )


def _reason_codes(exc: Any) -> list[str]:
    return [r.get("Code", "None") for r in exc.response.get("CancellationReasons", [])]
