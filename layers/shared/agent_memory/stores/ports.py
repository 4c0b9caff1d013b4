"""Ports: what the service needs from storage. Each has a real adapter and an in-memory one."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import field
from typing import Any, Protocol, runtime_checkable

from ..policy.identifiers import validate_identifier

# The listing cursors, defined with their tokens; re-exported for the adapters.
from ..policy.paging import AppCursor as AppCursor
from ..policy.paging import UserCursor as UserCursor
from ..policy.state import ScopedDelta
from ..runtime.lazyclass import dataclass  # processed on first instance (lazyclass.py)
from ..wire.jsonio import event_size


@dataclass(frozen=True)
class SessionKey:
    app_name: str
    user_id: str
    session_id: str


def validated_key(app_name: str, user_id: str, session_id: str) -> SessionKey:
    """The key of a request's session, each part checked against the identifier rule (InvalidInput naming it)."""
    return SessionKey(
        validate_identifier(app_name, "app_name"),
        validate_identifier(user_id, "user_id"),
        validate_identifier(session_id, "session_id"),
    )


@dataclass
class SessionRecord:
    """A session's stored metadata and state, split by scope (user and app keys without prefixes)."""

    app_name: str
    user_id: str
    session_id: str
    create_time: float
    update_time: float
    version: int = 0
    last_seq: int = 0
    state: dict[str, Any] = field(default_factory=dict)
    user_state: dict[str, Any] = field(default_factory=dict)
    app_state: dict[str, Any] = field(default_factory=dict)
    summary_event_id: str | None = None  # the newest compaction event
    summary_end_seq: int = 0  # the last seq it covers (the compaction watermark)
    # Which life of the session id the record belongs to: chosen at create, so that nothing of a deleted
    # session (events, seq, a compaction in flight) is taken for a re-created one's. "" only in a record built
    # before its session is stored.
    incarnation: str = ""
    # The application's own JSON object kept with the session (``PUT …/memo``): last writer wins, outside the
    # version; deleted with the session.
    memo: dict[str, Any] = field(default_factory=dict)
    # How many event deletions (DELETE of events, clear, rewind) the session has committed: a compaction planned
    # before one must not store a summary of what it deleted (``append_compaction``'s ``deletions``).
    deletions: int = 0
    # The seq ranges of those deletions whose purge has not finished (hidden from every read), as read with the
    # record: handed to ``read_events`` (``EventQuery.marks``) so that the store need not read them again.
    hidden: tuple[tuple[int, int], ...] = ()
    # When a seq was last claimed ahead of its event's write (DynamoDB's claim-first append; None: never, and in
    # the stores whose appends are atomic): until a while after it, a seq below ``last_seq`` with no event may
    # still be written (``policy.compaction.settled_events``).
    claimed_at: float | None = None


@dataclass(frozen=True)
class NewEvent:
    """An event ready to store: id and timestamp filled, ``temp:`` keys removed, its delta split by scope."""

    id: str
    timestamp: float
    body: dict[str, Any]
    delta: ScopedDelta
    # The server filled in the timestamp: a resend of the same event carries another one, so comparing a
    # resend with the stored event ignores it (an id reused with a different body is a conflict).
    timestamp_filled: bool = False


def same_event(stored: dict[str, Any], new: NewEvent) -> bool:
    """Whether ``new`` resends the event ``stored`` holds: the same body but for ``seq`` (assigned by the store)
    and, when the server filled in the new one's timestamp, the timestamp."""
    ignored = {"seq", "timestamp"} if new.timestamp_filled else {"seq"}
    return {k: v for k, v in stored.items() if k not in ignored} == {
        k: v for k, v in new.body.items() if k not in ignored
    }


@dataclass(frozen=True)
class Change:
    """A new event from a session store's change feed: its session, the event as ``read_events`` gives it, and
    the feed record's sequence number (what a Lambda partial-batch response names in ``batchItemFailures``).

    ``unread``: why the event could not be read now (a storage fault, e.g. S3 throttling its offloaded body);
    ``event`` is then empty and the consumer retries the record rather than failing the whole batch."""

    key: SessionKey
    event: dict[str, Any]
    sequence: str
    unread: str | None = None


@dataclass
class AppendResult:
    """The stored events in input order; ``created[i]`` is False where event i's id was already stored."""

    events: list[dict[str, Any]]
    created: list[bool]
    version: int


@dataclass(frozen=True)
class EventQuery:
    """Which events to read, always oldest first (by seq).

    The selection: events with ``after_seq < seq <= up_to_seq``, at or after ``after_timestamp``; of those the
    newest ``num_recent`` (None = all). A read can stop early, for paging: ``limit`` keeps the oldest ``limit``
    events of the selection; ``max_bytes`` stops after the event that brings the events read to ``max_bytes``
    (each counted as ``jsonio.event_size``), so at least one event comes back and the caller can tell that the
    read stopped on size when the events it got add up to ``max_bytes`` or more. A paged read reads about as
    many items as it returns (no read of the whole selection).

    ``verbatim``: values nested deeper than ``jsonio.MAX_DEPTH`` come back as ``RawJSON`` (for responses, which
    ``jsonio.dumps`` splices verbatim) rather than as a string of their JSON (for code that walks events).

    ``marks``: the session's deletion count and hidden seq ranges as the caller just read them with its record
    (``SessionRecord.deletions``, ``.hidden``; ``marks_of(record)``): a store that keeps deletions apart from the
    events (DynamoDB) then skips its own first read of them. It still checks the count after the events, so a
    deletion committed since the record was read is never half-seen, unless ``unchecked``: the caller's write is
    conditioned on the count it read (a deletion's plan, ``Deletion.based_on_deletions``; a compaction's summary,
    ``append_compaction``'s ``deletions``), so a deletion racing the read fails that write instead.
    """

    num_recent: int | None = None
    after_timestamp: float | None = None
    after_seq: int | None = None
    up_to_seq: int | None = None
    limit: int | None = None
    max_bytes: int | None = None
    verbatim: bool = False
    marks: tuple[int, tuple[tuple[int, int], ...]] | None = None
    unchecked: bool = False


SeqRange = tuple[int, int]  # seqs lo..hi, both included


@dataclass(frozen=True)
class IdQuery:
    """Events selected by their ids rather than their seqs: those named in ``ids`` (read back in that order; an id
    no event has is left out), or else those whose id starts with ``prefix`` ("" for every event), in id order
    (``descending``: greatest id first) and after ``after_id`` in that order. Either way at most ``limit`` events,
    stopping after the event that brings the events read to ``max_bytes`` (``jsonio.event_size``), so at least one
    comes back. A read by prefix reads about as many items as it returns.

    ``verbatim`` and ``marks``: as ``EventQuery``'s (a deletion committed during the read makes it start again;
    an event of a deletion not purged yet is never read)."""

    ids: tuple[str, ...] = ()
    prefix: str = ""
    after_id: str | None = None
    descending: bool = False
    limit: int | None = None
    max_bytes: int | None = None
    verbatim: bool = False
    marks: tuple[int, tuple[tuple[int, int], ...]] | None = None


def id_order(events: list[dict[str, Any]], query: IdQuery) -> list[dict[str, Any]]:
    """``events`` (the candidates a store read, in any order) as ``query`` selects and orders them: the named ids
    in their order, or the prefix's in id order after ``after_id``; then cut at ``limit`` and ``max_bytes``."""
    if query.ids:
        by_id = {str(e.get("id")): e for e in events}
        chosen = [by_id[i] for i in dict.fromkeys(query.ids) if i in by_id]
    else:
        chosen = sorted(
            (e for e in events if str(e.get("id", "")).startswith(query.prefix)),
            key=lambda e: str(e.get("id")),
            reverse=query.descending,
        )
        if query.after_id is not None:
            after = query.after_id
            chosen = [e for e in chosen if (str(e["id"]) < after if query.descending else str(e["id"]) > after)]
    if query.limit is not None:
        chosen = chosen[: query.limit]
    if query.max_bytes is not None:
        size = 0
        for count, event in enumerate(chosen, 1):
            size += event_size(event)
            if size >= query.max_bytes:
                return chosen[:count]
    return chosen


@dataclass(frozen=True)
class Tail:
    """What ``read_tail`` read: the newest events of a selection, oldest first, and how many events of the selection
    are older than them (not read). ``older`` is 0 when the read reached the selection's oldest event; otherwise it
    counts the events stored before those read (DynamoDB counts their seqs, from the oldest stored one and leaving
    out pending deletions: events deleted and purged between them are counted too)."""

    events: list[dict[str, Any]]
    older: int = 0


# ``read_tail``'s pacing: given the events read so far (oldest first), how many more to read (0: enough).
TailNeed = Callable[[list[dict[str, Any]]], int]


def tail_query(query: EventQuery) -> EventQuery:
    """``query`` if ``read_tail`` reads it (a selection by seq only); ValueError otherwise."""
    if (query.num_recent, query.after_timestamp, query.limit, query.max_bytes) != (None, None, None, None):
        raise ValueError("read_tail selects by seq only: num_recent, after_timestamp, limit and max_bytes are unset")
    return query


def marks_of(record: SessionRecord) -> tuple[int, tuple[SeqRange, ...]]:
    """A session record's deletion marks, for ``EventQuery.marks``."""
    return record.deletions, record.hidden


@dataclass(frozen=True)
class Deletion:
    """Events to delete from a session, as a service planned them on the events it read.

    ``ranges``: the seqs to delete (inclusive ranges; compaction events covering a deleted seq among them).
    ``based_on``: the session's ``last_seq`` and ``deletions`` when the plan was read; the store refuses the
    deletion (``DeletionRaced``) when either moved since (an append may hold a partner of a deleted tool call, a
    compaction may have summarised a deleted text, another deletion may have changed the watermark).
    ``summary_event_id`` / ``summary_end_seq``: the watermark after the deletion (the newest remaining summary
    that covers no deleted seq, or none)."""

    ranges: tuple[SeqRange, ...]
    based_on_seq: int
    based_on_deletions: int
    summary_event_id: str | None
    summary_end_seq: int
    # The record the plan was made on, read consistently a moment before: a store may condition its first write
    # on it instead of reading the session again (a session that moved since fails that write, then is read).
    record: SessionRecord | None = None


@dataclass(frozen=True)
class DeleteResult:
    """A committed deletion: the session's version after it, and how many stored events it took, when the store
    knows it at commit (None: DynamoDB, where counting a clear of 100 000 events would read them all; the purge's
    count tells)."""

    version: int
    deleted: int | None = None
    # The seq ranges still hidden after the commit, as it wrote them (DynamoDB; None: not known), for the purge.
    hidden: tuple[SeqRange, ...] | None = None


class DeletionRaced(Exception):
    """The session changed since the deletion was planned (an append, a compaction, another deletion): plan again."""


def in_ranges(seq: int, ranges: Iterable[SeqRange]) -> bool:
    """Whether ``seq`` is in one of ``ranges``."""
    return any(lo <= seq <= hi for lo, hi in ranges)


class SessionStore(Protocol):
    def create_session(self, record: SessionRecord, delta: ScopedDelta) -> tuple[SessionRecord, bool]:
        """Store a new session with its initial state (``delta``) unless one exists; return it and whether
        it was created. User and app state in ``delta`` are applied only on a true creation."""
        ...

    def get_session(self, key: SessionKey) -> SessionRecord | None:
        """The session with its own, user and app state; None if it does not exist."""
        ...

    def get_session_for_compaction(self, key: SessionKey) -> SessionRecord | None:
        """The session as a compaction plans on it: its counters, summary watermark, incarnation and deletion marks
        (its own, user and app state and its memo may be left empty), possibly a moment stale. What it is used for
        is checked again, consistently, by the writes a plan ends in: ``append_compaction`` stores nothing unless
        the watermark, the incarnation and the deletion count are still those of the record, and ``clear_due``
        removes nothing unless the version is. None if the session does not exist (or, stale, did not)."""
        ...

    def get_user_state(self, app_name: str, user_id: str) -> dict[str, Any]:
        """The user's state (keys without their ``user:`` prefix); empty when none was ever written."""
        ...

    def get_app_state(self, app_name: str) -> dict[str, Any]:
        """The app's state (keys without their ``app:`` prefix); empty when none was ever written."""
        ...

    def list_sessions(
        self, app_name: str, user_id: str, limit: int, after: UserCursor | None
    ) -> tuple[list[SessionRecord], UserCursor | None]:
        """One page of the user's sessions, oldest ``update_time`` first (ties by session id), each with its own,
        user and app state; and the cursor to resume after (None on the last page)."""
        ...

    def list_app_sessions(
        self, app_name: str, limit: int, after: AppCursor | None
    ) -> tuple[list[SessionRecord], AppCursor | None]:
        """One page of the sessions of every user of the app, by user id then session id, each with its own, user
        and app state; and the cursor to resume after (None on the last page). No Scan."""
        ...

    def delete_session(self, key: SessionKey) -> None:
        """Remove the session and everything stored for it. Idempotent and retry-safe: once it has started the
        session reads as absent, and a retry (or a create under the same id) finishes what a fault interrupted."""
        ...

    def append_events(self, key: SessionKey, events: list[NewEvent], expected_version: int | None) -> AppendResult:
        """Atomically store the events with their state deltas and bump the session's counters.

        Assigns ``seq`` strictly increasing; an event whose id is stored already with the same body
        (``same_event``) is not stored again (its stored form is returned, ``created`` False). An id stored with
        a different body, or repeated in the batch with a different body, raises EventIdConflict (field
        ``events[i].id``) and stores nothing of the batch. Raises SessionNotFound, PreconditionFailed when
        ``expected_version`` is stale, PayloadTooLarge, ServiceUnavailable when storage kept failing within the
        write budget (nothing partial is visible, except the committed transactions of a batch too large for one; a
        retry of the same request is recognised, not stored twice).
        """
        ...

    def read_events(self, key: SessionKey, query: EventQuery) -> list[dict[str, Any]]:
        """Events oldest first (by seq), as ``query`` selects them. Never fails on what is stored: an event whose
        stored form does not read comes back as a marker event (``error_code`` ``unreadable_event``)."""
        ...

    def read_events_by_id(self, key: SessionKey, query: IdQuery) -> list[dict[str, Any]]:
        """Events as ``query`` selects them by id (named, or by id prefix in id order), as consistent as
        ``read_events``; none when the session does not exist. Never fails on what is stored (marker events)."""
        ...

    def read_tail(self, key: SessionKey, query: EventQuery, need: TailNeed) -> Tail:
        """The newest events of ``query``'s selection (``after_seq``, ``up_to_seq``, ``marks``, ``verbatim``; its
        other fields must be unset), read newest first in pages: ``need([])`` sizes the first page, then ``need``
        is called with the events read so far (oldest first) and answers how many more to read, 0 when they are
        enough. So a read reads about as many items as ``need`` asks for, not the selection. Returns them oldest
        first, with the number of older events of the selection left unread (``Tail.older``; 0 when ``need([])``
        asks for none: nothing is read).

        As consistent as ``read_events``: the pages are one view (a deletion committed during the read makes it
        start again; none is half seen). Never fails on what is stored (marker events, as ``read_events``)."""
        ...

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
        """Append a compaction event and move the session's watermark to ``end_seq``, atomically, if the
        watermark is still ``expected_end_seq``; None when another compaction moved it first. With
        ``incarnation`` (the one of the record the compaction read), SessionNotFound when the session was
        deleted meanwhile, even if it was re-created under the same id. With ``deletions`` (the record's), None
        when events were deleted since: the summary may hold their text."""
        ...

    def delete_events(self, key: SessionKey, deletion: Deletion, expected_version: int | None) -> DeleteResult:
        """Delete the events in ``deletion.ranges`` and move the watermark, atomically with the session's counters:
        ``version`` moves (``last_seq`` does not: a seq is never reused) and the session becomes due for
        compaction. From the moment it commits, no read (``read_events``, whatever its query) shows any of the
        events, whatever their number; ``purge_deleted`` then removes what is left of them in storage.

        Raises SessionNotFound, PreconditionFailed when ``expected_version`` is stale, DeletionRaced when the
        session moved since the plan (``based_on_*``), ServiceUnavailable when storage kept failing (nothing
        committed, or committed: a retry tells, as the events no longer read)."""
        ...

    def purge_deleted(
        self, key: SessionKey, before: Callable[[list[str]], None], hidden: tuple[SeqRange, ...] | None = None
    ) -> int:
        """Finish the deletions committed on the session: for each batch of deleted events still stored, call
        ``before`` with their ids (the caller forgets what was derived from them), then remove them and their
        offloaded payloads (every version). Idempotent: a fault leaves the rest for the next call (the next
        delete of the session calls it first). Returns how many deleted events it settled (removed, or, where the
        deletion's commit removed them already, forgot what was derived from them); 0 when none was pending or the
        session does not exist. ``hidden``: the session's hidden ranges as the caller just read them
        (``SessionRecord.hidden``) or as the commit wrote them (``DeleteResult.hidden``); a store that keeps its
        pending deletions there need not read them again (None: it reads them)."""
        ...

    def list_due(self, limit: int) -> list[SessionKey]:
        """Up to ``limit`` sessions appended to since the compaction schedule last settled them (no Scan)."""
        ...

    def clear_due(self, key: SessionKey, version: int) -> bool:
        """Settle a session for the schedule unless it changed since ``version`` (then it stays due)."""
        ...

    def changes(self, records: list[dict[str, Any]]) -> list[Change]:
        """New events among a batch of change-feed records (others skipped), in record order."""
        ...

    def purge_expired(self, records: list[dict[str, Any]]) -> list[str]:
        """Delete what storage holds beside the events the retention's expiry removed among a batch of change-feed
        records (DynamoDB: their offloaded payloads, which TTL does not take); the sequence numbers of the records
        whose purge failed, for the feed to deliver again. A store whose expiry takes everything: []."""
        ...

    def put_memo(self, key: SessionKey, memo: dict[str, Any]) -> None:
        """Replace the session's memo (last writer wins); neither its version nor its times move.
        SessionNotFound when the session does not exist; PayloadTooLarge when its item cannot hold it."""
        ...

    def import_session(self, record: SessionRecord, events: list[dict[str, Any]], *, replace: bool) -> SessionRecord:
        """Store a session exactly as ``record`` and ``events`` give it (an export): its counters, times, watermark,
        memo and own state (``record.state``); ``record.user_state`` / ``record.app_state`` keys are set as an
        append's delta sets them. ``events`` are event JSON with ``id``, ``seq`` (increasing) and ``timestamp``,
        kept as given; they are not handed to the change feed (auto-save never saves an import).

        All or nothing at any size: a reader sees no session (or, with ``replace``, the one replaced) until the
        whole import is stored, and an import that failed part-way is never visible; a retry redoes it. Raises
        AlreadyExists when the session exists and ``replace`` is False, QuotaExceeded (sessions per user, events
        per session counted by ``record.last_seq``), PayloadTooLarge, ServiceUnavailable. Returns the stored
        session as ``get_session`` reads it."""
        ...


@runtime_checkable
class ChangeFeed(Protocol):
    """An outbox of stored events (embedded and in-memory session stores) that a pump hands to auto-save, as
    Lambda hands it a DynamoDB stream. In AWS the table's stream is the feed: there is no adapter for it."""

    def read_changes(self, after: int, limit: int) -> list[dict[str, Any]]:
        """Up to ``limit`` records after the sequence number ``after``, oldest first, shaped as DynamoDB stream
        records (what ``SessionStore.changes`` reads)."""
        ...

    def ack_changes(self, up_to: int) -> None:
        """Forget the records up to the sequence number ``up_to``: auto-save has taken them."""
        ...


class BlobMissing(KeyError):
    """The object is not in the store."""


class BlobStore(Protocol):
    """Object storage for payloads too large for a table item."""

    def put(self, key: str, data: bytes, *, staged: bool = False) -> None:
        """Store ``data``; ``staged``: nothing refers to it yet, and it expires (by the bucket's lifecycle rule)
        unless ``confirm`` is called."""
        ...

    def confirm(self, key: str) -> None:
        """Keep a staged object: something now refers to it. Idempotent; a missing object is ignored."""
        ...

    def get(self, key: str) -> bytes:
        """The object's bytes; BlobMissing when there is none."""
        ...

    def delete(self, key: str) -> None: ...

    def delete_prefix(
        self,
        prefix: str,
        *,
        keep_prefix: str | Callable[[], str | None] | None = None,
        modified_before: float | None = None,
    ) -> int:
        """Delete every object (every version) under ``prefix`` except those under ``keep_prefix`` (a callable
        is asked again for every page) and, with ``modified_before``, those written at or after that time;
        return how many."""
        ...


class EventPublisher(Protocol):
    """Where domain events (``SessionCreated``) go for users to hang follow-up work on."""

    def publish(self, detail_type: str, detail: dict[str, Any]) -> None: ...


# --- long-term memory ---------------------------------------------------------------------------------


@dataclass
class MemoryRecord:
    """One long-term memory: the text, where it came from, and what to index it with."""

    id: str
    text: str
    author: str
    timestamp: float
    role: str = "user"
    session_id: str | None = None
    event_id: str | None = None
    custom_metadata: dict[str, Any] | None = None
    context: str = ""  # indexed with the text (contextual retrieval), never returned
    # The facts about the user the text states ({"category", "text"} each; policy/profile.py), extracted when it
    # was saved; None on records saved before facts existed (the profile extracts those on read).
    facts: list[dict[str, str]] | None = None
    # The turn that answered it ("author: text": the next turn its save kept, by another author), embedded with it
    # after the context and never indexed as words, never returned; "" when none (and on older records).
    reply: str = ""

    def to_json(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items()}
        if data["facts"] is None:  # records without facts keep the stored form they had before the field existed
            del data["facts"]
        if not data["reply"]:  # likewise records without a reply
            del data["reply"]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MemoryRecord:
        return cls(**data)


def without_fragments(record: MemoryRecord, fragments: list[str]) -> MemoryRecord | None:
    """``record`` with every one of ``fragments`` (forgotten turns, ``"author: text"``) taken out of its retrieval
    context and reply, or None when it quotes none of them (a forget's scrub: the stores re-index what it returns)."""
    context, reply = record.context, record.reply
    for fragment in fragments:
        context, reply = context.replace(fragment, ""), reply.replace(fragment, "")
    if (context, reply) == (record.context, record.reply):
        return None
    return MemoryRecord(**{**record.to_json(), "context": " ".join(context.split()), "reply": " ".join(reply.split())})


@dataclass
class IndexedRecords:
    """Memory records with their search index: a stored snapshot or segment, or a user's whole memory. The
    records may be decoded only when read (``memory_parts``): a search reads those of its hits."""

    records: Mapping[str, MemoryRecord]
    index: Any  # search.index.SearchIndex (named only: the stores import no search code)


class NotStored(Exception):
    """``add`` failed before any write that could name its records: none of them landed (``cause`` says why)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(repr(cause))
        self.cause = cause


# The last step of a save, given the records the user's memory holds when it is written (``MemoryStore.add``):
# it checks the quota and builds the records' retrieval context from the turns whose memories are held, off
# the same read of the memory the write is made over.
Prepare = Callable[[Mapping[str, MemoryRecord]], list[MemoryRecord]]
# Called by a forget-all with the records it is about to forget (``MemoryStore.forget_all``).
Before = Callable[[Mapping[str, MemoryRecord]], None]


class MemoryStore(Protocol):
    """Port of the long-term memory storage (S3 in AWS, SQLite embedded, in memory for unit tests)."""

    def view(self, app_name: str, user_id: str) -> IndexedRecords:
        """Every record of the user with their combined index (index None when there are none)."""
        ...

    def add(
        self, app_name: str, user_id: str, records: list[MemoryRecord], prepare: Prepare | None = None
    ) -> list[str]:
        """Store the records whose ids are not stored yet; return their ids. ``prepare``, when given, is called
        with the records the user's memory holds as the write is made (again if the write is redone after a
        race) and returns the records to store in place of ``records`` (same ids or fewer); what it raises
        fails the add with nothing stored (``NotStored``, or the error itself)."""
        ...

    def held(self, app_name: str, user_id: str, memory_ids: Iterable[str]) -> set[str]:
        """Those of ``memory_ids`` the user's memory holds (``view``'s records, read without their index where the
        store can: a forget of events that were never saved loads no search index)."""
        ...

    def forget(self, app_name: str, user_id: str, memory_ids: Iterable[str]) -> None: ...

    def fence(self, app_name: str, user_id: str) -> None:
        """Make every ``add`` that called its ``prepare`` before this call prepare again before it writes: its
        write, made over what the memory held before the fence, loses to it and is redone. So what ``prepare``
        reads from elsewhere (the forgotten marks committed before the fence) is read again, and nothing it would
        now refuse is stored after the fence returns. A store whose ``add`` prepares and writes atomically (under
        one lock) needs nothing here."""
        ...

    def forget_all(self, app_name: str, user_id: str, before: Before | None = None) -> None:
        """Forget every record of the user. ``before``, when given, is called with the records the forget-all
        replaces as it is written (again if a racing save makes it redo the write): what it raises fails the
        forget-all with nothing forgotten."""
        ...


# Claim keys: ``E#{session}#{event id}``, one per forgotten event.
EVENT_PREFIX = "E#"


class ClaimStore(Protocol):
    """The events whose memories must never be stored again (docs/design.md, "Forgotten events"): a committed
    claim ``E#{session}#{event id}`` per event forgotten (or deleted). A save writes nothing here: the memory
    store already writes only records whose deterministic ids its view does not hold, and a save drops the
    events marked here inside that write (``MemoryStore.add``'s ``prepare``)."""

    def forgotten(self, app_name: str, user_id: str, keys: list[str]) -> set[str]:
        """Those of ``keys`` that are marked (a strongly consistent read: a mark written before the call is seen)."""
        ...

    def commit(self, app_name: str, user_id: str, keys: list[str]) -> None:
        """Mark ``keys``: their events' memories are forgotten, and no save stores them again."""
        ...


# --- the compaction sweep's fan-out ------------------------------------------------------------------------


class SweepInvoker(Protocol):
    """Where the compaction schedule hands each share of the due sessions: a worker that compacts them (an
    asynchronous Lambda invocation when deployed; in this process in ``make run`` and the tests)."""

    def start(self, keys: list[SessionKey]) -> dict[str, Any] | None:
        """Start a worker on ``keys``. Returns the worker's report when it ran in this process, None when it was
        started elsewhere; raises when it could not be started (the sessions stay due for the next run)."""
        ...
