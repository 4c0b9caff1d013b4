"""Appending events: the claim-first path for a plain chat append (``claim_first``), the transaction path
(``transact``) for every other one, a compaction's summary included.

Keying events by id makes the id unique within the session. Every item a request writes carries its token ``w``
(and the version ``v`` its transaction made): an attempt whose answer was lost is recognised on the next one. A
batch too big for one transaction takes several; reused ids are found before the first commits, so that a
conflict stores nothing of the batch. An offloaded payload is written tagged as staged and untagged once an event
that refers to it is stored; nothing deletes it after a failed or unknown transaction (the bucket's lifecycle rule
expires payloads still tagged staged after a day).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import field
from typing import Any

from ...errors import PreconditionFailed, QuotaExceeded, SessionNotFound
from ...runtime.lazyclass import dataclass  # processed on first instance (lazyclass.py)
from ..ports import AppendResult, NewEvent, SessionKey, same_event
from .claim_first import claim_first
from .keys import NO_PAYLOADS_ATTR, S, incarnation_prefix, session_key, string_attr, whole_attr
from .retries import Budget, Unsettled, id_conflict
from .table import Table
from .transact import Counters, Existing, Staged, Watermark, WatermarkMoved, read_counters, take_chunk, transact

logger = logging.getLogger(__name__)


@dataclass
class AppendState:
    """One append request as it goes: what is left to store, what is stored, and what the next attempt must know."""

    key: SessionKey
    events: list[NewEvent]  # as the request sent them (ids may repeat)
    first_index: dict[str, int]  # event id -> its first index in ``events``
    pending: list[NewEvent]  # not stored yet (each id once)
    expected_version: int | None
    watermark: Watermark | None
    budget: Budget = field(default_factory=Budget)
    # Every item this request writes carries its token: an attempt whose answer was lost is known again.
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)  # event id -> stored event
    created_ids: set[str] = field(default_factory=set)
    confirm: list[str] = field(default_factory=list)  # payloads stored events refer to: untag them (lifecycle)
    staged: dict[str, Staged] = field(default_factory=dict)
    version: int = 0
    checked: bool = False  # the pending ids were looked up before the first transaction (or need not be)
    resends_checked: bool = False  # ... because the events quota refused them
    unsettled: list[NewEvent] = field(default_factory=list)  # the chunk whose last transaction may have landed
    landed: list[int] = field(default_factory=list)  # versions of our transactions recognised after a lost answer

    def settle(self, table: Table, found: dict[str, dict[str, Any]]) -> None:
        """Event ids found stored: ours (an earlier attempt landed), resends, or conflicts. They leave ``pending``."""
        for event_id, item in found.items():
            stored = table.read_event(item)
            event = self.events[self.first_index[event_id]]
            if string_attr(item, "w") == self.token:
                self.created_ids.add(event_id)
                self.landed.append(whole_attr(item, "v"))
            elif not same_event(stored, event):
                raise id_conflict(event_id, self.first_index[event_id])
            self.results[event_id] = stored
            if "blob" in item:
                self.confirm.append(item["blob"]["S"])
        self.pending = [e for e in self.pending if e.id not in found]

    def stored(self, chunk: list[NewEvent], events: list[dict[str, Any]], meta: Counters) -> None:
        """A transaction of ``chunk`` committed."""
        for event in events:
            self.results[event["id"]] = event
            self.created_ids.add(event["id"])
            if self.staged[event["id"]].blob_key:
                self.confirm.append(self.staged[event["id"]].blob_key)
        done = {e.id for e in chunk}
        self.pending = [e for e in self.pending if e.id not in done]
        self.version = meta.version + 1 if self.watermark is None else meta.version
        # The precondition held for the batch's first transaction; later chunks (a batch too big for one
        # transaction) only need their own conditional write.
        self.expected_version = None

    def result(self) -> AppendResult:
        created: list[bool] = []
        seen: set[str] = set()
        for event in self.events:
            created.append(event.id in self.created_ids and event.id not in seen)
            seen.add(event.id)
        return AppendResult(events=[self.results[e.id] for e in self.events], created=created, version=self.version)


def append(
    table: Table, key: SessionKey, events: list[NewEvent], expected_version: int | None, watermark: Watermark | None
) -> AppendResult:
    """Store ``events`` (``watermark``: a compaction's summary, which moves the watermark, not the version)."""
    first_index: dict[str, int] = {}
    unique: list[NewEvent] = []
    for i, event in enumerate(events):
        if event.id not in first_index:
            first_index[event.id] = i
            unique.append(event)
        elif not same_event(events[first_index[event.id]].body, event):
            raise id_conflict(event.id, i)
    state = AppendState(key, events, first_index, unique, expected_version, watermark)
    if watermark is None and expected_version is None and len(events) == 1 and not events[0].delta:
        # What every chat append is: the claim-first path, two requests and no read.
        fast = claim_first(table, key, events[0], state.token, state.budget)
        if fast is not None:
            return fast
    committed = False
    try:
        while state.pending:
            _attempt(table, state)
        committed = True
    finally:
        # Untag every payload a stored event refers to, also when a later transaction of the batch failed
        # (the events of the earlier ones stay stored): the lifecycle rule must never expire them.
        for blob_key in state.confirm:
            try:
                state.budget.call(table.blobs.confirm, blob_key)
            except Exception:
                if committed:
                    raise  # 503: a resend finds the stored event and untags its payload again
                logger.warning("payload of a stored event left tagged staged", extra={"blob": blob_key})
    return state.result()


def _attempt(table: Table, state: AppendState) -> None:
    """One step towards storing ``state.pending``: read the counters, then commit a chunk (or learn why not)."""
    if state.unsettled and _landed(table, state):
        return
    meta = state.budget.call(read_counters, table, state.key)
    if meta is None:
        raise SessionNotFound(state.key.session_id)
    _check_watermark(state, meta)
    state.version = meta.version
    if state.expected_version is not None and meta.version != state.expected_version:
        raise PreconditionFailed(
            f"If-Match version {state.expected_version} is not the current version {meta.version}", field="If-Match"
        )
    if state.watermark is None and not _within_quota(table, state, meta):
        return
    chunk = take_chunk(table, state.pending, state.staged)
    offloads = any(state.staged[e.id].offload for e in chunk)
    if not state.checked and (len(chunk) < len(state.pending) or offloads):
        # The batch takes several transactions: find reused ids before the first commits, so that a conflict
        # stores nothing of the batch. A large event: before uploading a payload a resend does not need.
        state.checked = True
        found = table.stored_items(state.key, [e.id for e in state.pending], state.budget)
        state.settle(table, found)
        if found:
            return
    state.checked = True
    if offloads and not _upload_all(table, state, chunk, meta):
        return
    try:
        outcome = transact(table, state.key, chunk, state.staged, meta, state.watermark, state.token)
    except Unsettled as exc:
        state.unsettled = chunk
        state.budget.after_fault(exc.__cause__ or exc)
        return
    if isinstance(outcome, Existing):
        _cancelled(table, state, outcome)
        return
    state.stored(chunk, outcome, meta)


def _landed(table: Table, state: AppendState) -> bool:
    """Did the transaction whose answer was lost land? Its items carry our token. True when it did."""
    found = table.stored_items(state.key, [e.id for e in state.unsettled], state.budget)
    mine = {i: item for i, item in found.items() if string_attr(item, "w") == state.token}
    state.unsettled = []
    state.landed.clear()
    if not mine:
        return False
    state.settle(table, mine)
    state.version = max(state.landed)
    state.expected_version = None
    return True


def _check_watermark(state: AppendState, meta: Counters) -> None:
    """A compaction stores its summary only on the session, watermark and deletions it was planned on."""
    watermark = state.watermark
    if watermark is None:
        return
    if watermark.incarnation is not None and meta.incarnation != watermark.incarnation:
        raise SessionNotFound(state.key.session_id)  # deleted (and maybe re-created) since it was read
    if meta.summary_end_seq != watermark.expected_end_seq:
        raise WatermarkMoved()
    if watermark.deletions is not None and meta.deletions != watermark.deletions:
        raise WatermarkMoved()  # events were deleted since the compaction read them


def _within_quota(table: Table, state: AppendState, meta: Counters) -> bool:
    """Whether the pending events fit the events quota; False when resent ones were found and settled (read the
    counters again). The transaction is conditioned on last_seq as read here: the count cannot move before it
    commits, so checking it costs no request and concurrent appends never overshoot. The whole batch is checked
    before its first transaction (nothing of a refused batch is stored)."""
    if not table.quotas.events_per_session:
        return True
    try:
        table.quotas.check_events(meta.last_seq, len(state.pending))
        return True
    except QuotaExceeded:
        if state.resends_checked:
            raise
        # Resent events are no new ones (a retry whose first answer was lost): look them up once.
        state.resends_checked = state.checked = True
        found = table.stored_items(state.key, [e.id for e in state.pending], state.budget)
        state.settle(table, found)
        if not found:
            raise
        return False


def _cancelled(table: Table, state: AppendState, outcome: Existing) -> None:
    """A transaction cancelled: by a lost race on the session's version (read again), or by ids stored already."""
    if not outcome.items:
        state.budget.after_race()
        return
    state.landed.clear()
    state.settle(table, outcome.items)
    if state.landed:  # botocore's retry met our own applied transaction
        state.version = max(state.landed)
        state.expected_version = None


def _upload_all(table: Table, state: AppendState, chunk: list[NewEvent], meta: Counters) -> bool:
    """Offload the chunk's large bodies under the session's incarnation; False when the session is gone or
    re-created since its counters were read (read them again)."""
    if meta.no_payloads and not _clear_no_payloads(table, state.key, meta.incarnation, state.budget):
        state.budget.after_race()
        return False
    # (Again if the session was re-created meanwhile: a payload lives under its incarnation's prefix.)
    here = incarnation_prefix(state.key, meta.incarnation)
    for event in chunk:
        staged = state.staged[event.id]
        if staged.offload and not staged.blob_key.startswith(here):
            staged.blob_key = _upload(table, state, event, staged, meta.incarnation)
    return True


def _upload(table: Table, state: AppendState, event: NewEvent, staged: Staged, incarnation: str) -> str:
    """Offload an event's body to S3; return its key.

    The key is this request's own (the token): a resend never overwrites the payload of the stored event,
    and the object is tagged staged until an event refers to it, so an orphan (the transaction failed, or
    its outcome is unknown and the client never comes back) expires by the bucket's lifecycle rule.
    """
    blob_key = f"{incarnation_prefix(state.key, incarnation)}events/{event.id}/{state.token}.json"
    state.budget.call(table.blobs.put, blob_key, staged.body.encode(), staged=True)
    return blob_key


def _clear_no_payloads(table: Table, key: SessionKey, incarnation: str, budget: Budget) -> bool:
    """Take the no-payload mark off the session item before a payload of this incarnation is uploaded, so that
    its DELETE lists the bucket; False when the session is gone or re-created (read it again)."""
    try:
        budget.call(
            table.db.update_item,
            TableName=table.name,
            Key=session_key(key),
            UpdateExpression="REMOVE #nb",
            ConditionExpression="inc = :inc",
            ExpressionAttributeNames={"#nb": NO_PAYLOADS_ATTR},
            ExpressionAttributeValues={":inc": S(incarnation)},
        )
    except table.db.exceptions.ConditionalCheckFailedException:
        return False
    return True
