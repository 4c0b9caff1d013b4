"""In-memory adapters for unit tests of the service. Same behaviour as the AWS adapters (one contract suite)."""

from __future__ import annotations

import copy
import dataclasses
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from ..errors import AlreadyExists, EventIdConflict, PreconditionFailed, SessionNotFound
from ..policy.quotas import NO_QUOTAS, Quotas
from ..policy.state import ScopedDelta
from ..wire.jsonio import dumps, event_size
from .ports import (
    AppCursor,
    AppendResult,
    Before,
    BlobMissing,
    Change,
    DeleteResult,
    Deletion,
    DeletionRaced,
    EventQuery,
    IdQuery,
    IndexedRecords,
    MemoryRecord,
    NewEvent,
    Prepare,
    SeqRange,
    SessionKey,
    SessionRecord,
    Tail,
    TailNeed,
    UserCursor,
    id_order,
    in_ranges,
    same_event,
    tail_query,
)
from .sqlite.feed import changes_from_feed, feed_record

FEED_SOURCE = "agent-memory:memory"

_C = TypeVar("_C", UserCursor, AppCursor)


class InMemorySessionStore:
    """Sessions in dicts, with a change feed as the SQLite store has it (``read_changes``, ``ack_changes``,
    ``changes``): an outbox entry per stored event, written under the same lock as the event."""

    def __init__(self, quotas: Quotas = NO_QUOTAS) -> None:
        self._lock = threading.Lock()
        self._quotas = quotas
        self._sessions: dict[SessionKey, SessionRecord] = {}
        self._events: dict[SessionKey, dict[str, dict[str, Any]]] = {}  # by event id
        self._user_state: dict[tuple[str, str], dict[str, Any]] = {}
        self._app_state: dict[str, dict[str, Any]] = {}
        self._due: dict[SessionKey, None] = {}  # insertion-ordered set of sessions due for compaction
        # Seq ranges of committed deletions not purged yet: reads leave their events out (as DynamoDB's do).
        self._hidden: dict[SessionKey, list[SeqRange]] = {}
        # The change feed: (sequence, created, key, event id, seq, timestamp, body JSON text), oldest first.
        self._outbox: list[tuple[int, float, SessionKey, str, int, float, str]] = []
        self._sequence = 0

    def _full(self, record: SessionRecord) -> SessionRecord:
        full = copy.deepcopy(record)
        full.user_state = copy.deepcopy(self._user_state.get((record.app_name, record.user_id), {}))
        full.app_state = copy.deepcopy(self._app_state.get(record.app_name, {}))
        return full

    def create_session(self, record: SessionRecord, delta: ScopedDelta) -> tuple[SessionRecord, bool]:
        key = SessionKey(record.app_name, record.user_id, record.session_id)
        with self._lock:
            existing = self._sessions.get(key)
            if existing is not None:
                return self._full(existing), False
            held = sum(1 for k in self._sessions if (k.app_name, k.user_id) == (key.app_name, key.user_id))
            self._quotas.check_sessions(held)
            stored = copy.deepcopy(record)
            stored.incarnation = uuid.uuid4().hex
            stored.state = copy.deepcopy(delta.session)
            self._sessions[key] = stored
            self._events[key] = {}
            self._user_state.setdefault((record.app_name, record.user_id), {}).update(copy.deepcopy(delta.user))
            self._app_state.setdefault(record.app_name, {}).update(copy.deepcopy(delta.app))
            return self._full(stored), True

    def get_session(self, key: SessionKey) -> SessionRecord | None:
        with self._lock:
            record = self._sessions.get(key)
            return None if record is None else self._full(record)

    def get_session_for_compaction(self, key: SessionKey) -> SessionRecord | None:
        return self.get_session(key)  # reads here are consistent and cheap: the whole record

    def get_user_state(self, app_name: str, user_id: str) -> dict[str, Any]:
        with self._lock:
            return copy.deepcopy(self._user_state.get((app_name, user_id), {}))

    def get_app_state(self, app_name: str) -> dict[str, Any]:
        with self._lock:
            return copy.deepcopy(self._app_state.get(app_name, {}))

    def list_sessions(
        self, app_name: str, user_id: str, limit: int, after: UserCursor | None
    ) -> tuple[list[SessionRecord], UserCursor | None]:
        with self._lock:
            found = sorted(
                (UserCursor.of(r), k)
                for k, r in self._sessions.items()
                if k.app_name == app_name and k.user_id == user_id and (after is None or UserCursor.of(r) > after)
            )
            return self._page([k for _, k in found], limit, UserCursor.of)

    def list_app_sessions(
        self, app_name: str, limit: int, after: AppCursor | None
    ) -> tuple[list[SessionRecord], AppCursor | None]:
        with self._lock:
            found = sorted(
                (AppCursor.of(r), k)
                for k, r in self._sessions.items()
                if k.app_name == app_name and (after is None or AppCursor.of(r) > after)
            )
            return self._page([k for _, k in found], limit, AppCursor.of)

    def _page(
        self, keys: list[SessionKey], limit: int, cursor: Callable[[SessionRecord], _C]
    ) -> tuple[list[SessionRecord], _C | None]:
        records = [self._full(self._sessions[k]) for k in keys[:limit]]
        return records, (cursor(records[-1]) if len(keys) > limit and records else None)

    def delete_session(self, key: SessionKey) -> None:
        with self._lock:
            self._sessions.pop(key, None)
            self._events.pop(key, None)
            self._hidden.pop(key, None)
            self._due.pop(key, None)
            # Pending changes go with the session, as in the SQLite store.
            self._outbox = [change for change in self._outbox if change[2] != key]

    def append_events(self, key: SessionKey, events: list[NewEvent], expected_version: int | None) -> AppendResult:
        with self._lock:
            result = self._append(key, events, expected_version)
            if any(result.created):
                self._due.setdefault(key)
            return result

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
        with self._lock:
            record = self._sessions.get(key)
            if record is None or (incarnation is not None and record.incarnation != incarnation):
                raise SessionNotFound(key.session_id)
            if record.summary_end_seq != expected_end_seq:
                return None
            if deletions is not None and record.deletions != deletions:
                return None
            stored = self._append(key, [event], None, compaction=True).events[0]
            record.summary_event_id = event.id
            record.summary_end_seq = end_seq
            return stored

    def delete_events(self, key: SessionKey, deletion: Deletion, expected_version: int | None) -> DeleteResult:
        with self._lock:
            record = self._sessions.get(key)
            if record is None:
                raise SessionNotFound(key.session_id)
            if expected_version is not None and expected_version != record.version:
                raise PreconditionFailed(
                    f"If-Match version {expected_version} is not the current version {record.version}",
                    field="If-Match",
                )
            if (record.last_seq, record.deletions) != (deletion.based_on_seq, deletion.based_on_deletions):
                raise DeletionRaced()
            hidden = self._hidden.setdefault(key, [])
            deleted = sum(
                1
                for event in self._events[key].values()
                if in_ranges(event["seq"], deletion.ranges) and not in_ranges(event["seq"], hidden)
            )
            hidden.extend(deletion.ranges)
            record.version += 1
            record.deletions += 1
            record.summary_event_id = deletion.summary_event_id
            record.summary_end_seq = deletion.summary_end_seq
            self._due.setdefault(key)
            return DeleteResult(version=record.version, deleted=deleted)

    def purge_deleted(
        self, key: SessionKey, before: Callable[[list[str]], None], hidden: tuple[SeqRange, ...] | None = None
    ) -> int:
        with self._lock:
            ranges = list(self._hidden.get(key, []))
            doomed = [i for i, e in self._events.get(key, {}).items() if in_ranges(e["seq"], ranges)]
        if not ranges:
            return 0
        if doomed:
            before(doomed)  # outside the lock: it calls other stores
        with self._lock:
            events = self._events.get(key, {})
            for event_id in doomed:
                events.pop(event_id, None)
            gone = set(doomed)
            self._outbox = [c for c in self._outbox if not (c[2] == key and c[3] in gone)]
            # Ranges added meanwhile (another deletion) stay for the next purge.
            self._hidden[key] = [r for r in self._hidden.get(key, []) if r not in ranges]
            if not self._hidden[key]:
                self._hidden.pop(key, None)
        return len(doomed)

    def list_due(self, limit: int) -> list[SessionKey]:
        with self._lock:
            return [k for k in self._due if k in self._sessions][:limit]

    def clear_due(self, key: SessionKey, version: int) -> bool:
        with self._lock:
            record = self._sessions.get(key)
            if record is not None and record.version != version:
                return False
            self._due.pop(key, None)
            return True

    def _append(
        self, key: SessionKey, events: list[NewEvent], expected_version: int | None, *, compaction: bool = False
    ) -> AppendResult:
        record = self._sessions.get(key)
        if record is None:
            raise SessionNotFound(key.session_id)
        if expected_version is not None and expected_version != record.version:
            raise PreconditionFailed(
                f"If-Match version {expected_version} is not the current version {record.version}",
                field="If-Match",
            )
        stored_events = self._events[key]
        # Reused ids first, so that a conflict stores nothing of the batch.
        first: dict[str, NewEvent] = {}
        for i, event in enumerate(events):
            earlier = stored_events[event.id] if event.id in stored_events else first.get(event.id)
            if earlier is None:
                first[event.id] = event
            elif not same_event(earlier if isinstance(earlier, dict) else earlier.body, event):
                raise EventIdConflict(
                    f"event id {event.id!r} is stored already with a different body; send a new id for a new event",
                    field=f"events[{i}].id",
                )
        if not compaction:  # a compaction is the server's own: never refused
            self._quotas.check_events(record.last_seq, len(first))
        out: list[dict[str, Any]] = []
        created: list[bool] = []
        new: list[NewEvent] = []
        for event in events:
            if event.id in stored_events:
                out.append(copy.deepcopy(stored_events[event.id]))
                created.append(False)
                continue
            record.last_seq += 1
            body = dict(copy.deepcopy(event.body), seq=record.last_seq)
            stored_events[event.id] = body
            out.append(copy.deepcopy(body))
            self._sequence += 1
            text = dumps(event.body)
            self._outbox.append((self._sequence, time.time(), key, event.id, body["seq"], event.timestamp, text))
            created.append(True)
            new.append(event)
        if new and not compaction:  # a compaction moves neither the version (the ETag) nor last_update_time
            record.version += 1
            record.update_time = max(record.update_time, max(e.timestamp for e in new))
            for event in new:
                record.state.update(copy.deepcopy(event.delta.session))
                self._user_state.setdefault((key.app_name, key.user_id), {}).update(copy.deepcopy(event.delta.user))
                self._app_state.setdefault(key.app_name, {}).update(copy.deepcopy(event.delta.app))
        return AppendResult(events=out, created=created, version=record.version)

    def read_events(self, key: SessionKey, query: EventQuery) -> list[dict[str, Any]]:
        with self._lock:
            hidden = self._hidden.get(key, [])
            events = sorted(
                (e for e in self._events.get(key, {}).values() if not in_ranges(e["seq"], hidden)),
                key=lambda e: e["seq"],
            )
            if query.after_seq is not None:
                events = [e for e in events if e["seq"] > query.after_seq]
            if query.up_to_seq is not None:
                events = [e for e in events if e["seq"] <= query.up_to_seq]
            if query.after_timestamp is not None:
                events = [e for e in events if e["timestamp"] >= query.after_timestamp]
            if query.num_recent is not None:
                events = events[-query.num_recent :] if query.num_recent else []
            if query.limit is not None:
                events = events[: query.limit]
            if query.max_bytes is not None:
                size = 0
                for count, event in enumerate(events, 1):
                    size += event_size(event)
                    if size >= query.max_bytes:
                        events = events[:count]
                        break
            return copy.deepcopy(events)

    def read_events_by_id(self, key: SessionKey, query: IdQuery) -> list[dict[str, Any]]:
        with self._lock:
            hidden = self._hidden.get(key, [])
            events = [e for e in self._events.get(key, {}).values() if not in_ranges(e["seq"], hidden)]
            return copy.deepcopy(id_order(events, query))

    def read_tail(self, key: SessionKey, query: EventQuery, need: TailNeed) -> Tail:
        tail_query(query)
        selected = self.read_events(key, dataclasses.replace(query, marks=None))
        # One snapshot, handed out page by page as ``need`` asks: what the other stores read from storage.
        taken: list[dict[str, Any]] = []
        more = need([])
        if more <= 0:
            return Tail(events=[])
        while more > 0:
            taken = selected[-(len(taken) + more) :]
            if len(taken) == len(selected):
                return Tail(events=taken)
            more = need(taken)
        return Tail(events=taken, older=len(selected) - len(taken))

    # --- export / import: the memo and a whole session at once ---------------------------------------------

    def put_memo(self, key: SessionKey, memo: dict[str, Any]) -> None:
        with self._lock:
            record = self._sessions.get(key)
            if record is None:
                raise SessionNotFound(key.session_id)
            record.memo = copy.deepcopy(memo)

    def import_session(self, record: SessionRecord, events: list[dict[str, Any]], *, replace: bool) -> SessionRecord:
        key = SessionKey(record.app_name, record.user_id, record.session_id)
        with self._lock:
            existing = self._sessions.get(key)
            if existing is not None and not replace:
                raise AlreadyExists(f"session {key.session_id!r} exists already", field="session_id")
            if existing is None:
                held = sum(1 for k in self._sessions if (k.app_name, k.user_id) == (key.app_name, key.user_id))
                self._quotas.check_sessions(held)
            self._quotas.check_events(0, record.last_seq)
            stored = copy.deepcopy(record)
            stored.incarnation = uuid.uuid4().hex
            stored.user_state, stored.app_state = {}, {}
            # Replaced whole, under the lock: a reader sees the old session or the new one. No outbox entries.
            self._outbox = [change for change in self._outbox if change[2] != key]
            self._due.pop(key, None)
            self._sessions[key] = stored
            # seq last, as every store reads an event back.
            self._events[key] = {
                str(e["id"]): {k: copy.deepcopy(v) for k, v in e.items() if k != "seq"} | {"seq": e["seq"]}
                for e in events
            }
            self._user_state.setdefault((key.app_name, key.user_id), {}).update(copy.deepcopy(record.user_state))
            self._app_state.setdefault(key.app_name, {}).update(copy.deepcopy(record.app_state))
            return self._full(stored)

    def read_changes(self, after: int, limit: int) -> list[dict[str, Any]]:
        """Up to ``limit`` change-feed records after the sequence number ``after``, oldest first."""
        with self._lock:
            pending = [change for change in self._outbox if change[0] > after][: max(0, limit)]
        return [feed_record(FEED_SOURCE, *change) for change in pending]

    def ack_changes(self, up_to: int) -> None:
        """Forget the change-feed records up to the sequence number ``up_to`` (delivered)."""
        with self._lock:
            self._outbox = [change for change in self._outbox if change[0] > up_to]

    def changes(self, records: list[dict[str, Any]]) -> list[Change]:
        return changes_from_feed(records)

    def purge_expired(self, records: list[dict[str, Any]]) -> list[str]:
        return []  # no expiry here


class InMemoryBlobStore:
    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.written: dict[str, float] = {}  # key -> when it was put (S3's LastModified)
        self.staged: set[str] = set()  # keys put staged and not confirmed

    def put(self, key: str, data: bytes, *, staged: bool = False) -> None:
        self.objects[key] = data
        self.written[key] = time.time()
        if staged:
            self.staged.add(key)
        else:
            self.staged.discard(key)

    def confirm(self, key: str) -> None:
        self.staged.discard(key)

    def get(self, key: str) -> bytes:
        if key not in self.objects:
            raise BlobMissing(key)
        return self.objects[key]

    def delete(self, key: str) -> None:
        self.objects.pop(key, None)
        self.staged.discard(key)

    def delete_prefix(
        self,
        prefix: str,
        *,
        keep_prefix: str | Callable[[], str | None] | None = None,
        modified_before: float | None = None,
    ) -> int:
        keep_prefix = keep_prefix() if callable(keep_prefix) else keep_prefix
        doomed = [
            k
            for k in self.objects
            if k.startswith(prefix)
            and (keep_prefix is None or not k.startswith(keep_prefix))
            and (modified_before is None or self.written[k] < modified_before)
        ]
        self.staged.difference_update(doomed)
        for k in doomed:
            del self.objects[k]
        return len(doomed)


class InMemoryPublisher:
    def __init__(self) -> None:
        self.published: list[tuple[str, dict[str, Any]]] = []

    def publish(self, detail_type: str, detail: dict[str, Any]) -> None:
        self.published.append((detail_type, copy.deepcopy(detail)))


class InMemoryMemoryStore:
    def __init__(self, build_index: Callable[[list[MemoryRecord]], Any], combine: Callable[[list[Any]], Any]) -> None:
        self._build_index = build_index
        self._combine = combine
        self._lock = threading.Lock()
        self._parts: dict[tuple[str, str], list[IndexedRecords]] = {}

    def view(self, app_name: str, user_id: str) -> IndexedRecords:
        with self._lock:
            parts = list(self._parts.get((app_name, user_id), []))
        records: dict[str, MemoryRecord] = {}
        for part in parts:
            records.update(part.records)
        return IndexedRecords(records, self._combine([p.index for p in parts]) if parts else None)

    def add(
        self, app_name: str, user_id: str, records: list[MemoryRecord], prepare: Prepare | None = None
    ) -> list[str]:
        with self._lock:
            parts = self._parts.setdefault((app_name, user_id), [])
            held = {i for p in parts for i in p.records}
            if prepare is not None:
                records = prepare({k: v for p in parts for k, v in p.records.items()})
            fresh = list({r.id: r for r in records if r.id not in held}.values())
            if fresh:
                parts.append(IndexedRecords({r.id: r for r in fresh}, self._build_index(fresh)))
            return [r.id for r in fresh]

    def fence(self, app_name: str, user_id: str) -> None:
        """Nothing to do: ``add`` prepares and writes under one lock, so no add prepared before this call writes
        after it."""

    def held(self, app_name: str, user_id: str, memory_ids: Iterable[str]) -> set[str]:
        with self._lock:
            parts = list(self._parts.get((app_name, user_id), []))
        return {i for i in memory_ids if any(i in p.records for p in parts)}

    def forget(self, app_name: str, user_id: str, memory_ids: Iterable[str]) -> None:
        ids = set(memory_ids)
        with self._lock:
            parts = self._parts.get((app_name, user_id), [])
            self._parts[(app_name, user_id)] = [
                IndexedRecords({k: v for k, v in p.records.items() if k not in ids}, p.index.without(ids))
                for p in parts
            ]

    def forget_all(self, app_name: str, user_id: str, before: Before | None = None) -> None:
        with self._lock:
            if before is not None:
                before({k: v for p in self._parts.get((app_name, user_id), []) for k, v in p.records.items()})
            self._parts.pop((app_name, user_id), None)


class InMemoryClaimStore:
    """``ClaimStore`` in a dict: (app, user, key) -> the time of its mark; see ``stores/dynamo/claims.py``."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._lock = threading.Lock()
        self._claims: dict[tuple[str, str, str], float] = {}
        self._clock = clock

    def forgotten(self, app_name: str, user_id: str, keys: list[str]) -> set[str]:
        with self._lock:
            return {k for k in keys if (app_name, user_id, k) in self._claims}

    def commit(self, app_name: str, user_id: str, keys: list[str]) -> None:
        with self._lock:
            for key in keys:
                self._claims[(app_name, user_id, key)] = self._clock()


class InlineSweepInvoker:
    """The compaction sweep's workers run here, one share after the other (``make run``, the tests): ``run``
    compacts a share while the time it is given (``budget_s`` from the share's start, as a worker's timeout gives
    it) lasts, and returns its report."""

    def __init__(
        self,
        run: Callable[[list[SessionKey], Callable[[], float]], dict[str, Any]],
        budget_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._run = run
        self._budget_s = budget_s
        self._clock = clock

    def start(self, keys: list[SessionKey]) -> dict[str, Any] | None:
        deadline = self._clock() + self._budget_s
        return self._run(keys, lambda: deadline - self._clock())
