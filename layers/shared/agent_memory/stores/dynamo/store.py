"""The DynamoDB session store: one table, one item per event, atomic appends, no Scan.

Items (``PK`` / ``SK``):

- session      ``U#{app}#{user}`` / ``S#{session}``  counters, times, the incarnation ``inc``, the
  ``memo`` (JSON text; ``PUT …/memo``), ``stx`` (the session state item's expiry, with a retention);
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
  number. The timestamp is in no index (the table's ``by_ts`` index, keyed on ``ts``, takes no item), so an
  append pays for one index entry; ``after_timestamp`` reads use ``by_seq`` and the session's time order
  (``tmax``, ``tskew``).

State keys are stored as top-level attributes ``st:{key}`` holding JSON text, so an update can set a key whether or
not the item exists and values keep their JSON types exactly. Events whose item would pass the offload threshold
keep their body in S3 under the session's prefix; an inline body is stored zlib-compressed, as the binary ``bz``
instead of the text ``body``, when that makes the item fewer 1 KB write units (``items.with_body``).

The package's rooms: ``keys`` (keys, attribute names, typed values), ``items`` (items as stored and read),
``retries`` (budgets, error mapping, batch writes), ``table`` (the collaborator every operation takes),
``sessions`` and ``listing`` (sessions written and read), ``appends`` with ``claim_first`` and ``transact``,
``reads``, ``deletion`` (events deleted), ``transfer`` (import, memo), ``schedule`` (the compaction schedule),
``feed`` (the change feed), and ``claims`` (forgotten events, a store of its own).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...policy.quotas import NO_QUOTAS, Quotas
from ...policy.state import ScopedDelta
from ..ports import (
    AppCursor,
    AppendResult,
    BlobStore,
    Change,
    DeleteResult,
    Deletion,
    EventQuery,
    IdQuery,
    NewEvent,
    SeqRange,
    SessionKey,
    SessionRecord,
    Tail,
    TailNeed,
    UserCursor,
)
from . import appends, feed, listing, reads, schedule, sessions, transfer
from . import deletion as event_deletion
from .table import Table
from .transact import Watermark, WatermarkMoved


class DynamoSessionStore:
    """The SessionStore port over one DynamoDB table (and a bucket for large event bodies)."""

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
        self._table = Table(
            client, table_name, blobs, offload_bytes=offload_bytes, retention_days=retention_days, quotas=quotas
        )

    # --- sessions -----------------------------------------------------------------------------------------------

    def create_session(self, record: SessionRecord, delta: ScopedDelta) -> tuple[SessionRecord, bool]:
        return sessions.create_session(self._table, record, delta)

    def get_session(self, key: SessionKey) -> SessionRecord | None:
        return listing.get_session(self._table, key)

    def get_session_for_compaction(self, key: SessionKey) -> SessionRecord | None:
        return listing.get_session_for_compaction(self._table, key)

    def get_user_state(self, app_name: str, user_id: str) -> dict[str, Any]:
        return listing.get_user_state(self._table, app_name, user_id)

    def get_app_state(self, app_name: str) -> dict[str, Any]:
        return listing.get_app_state(self._table, app_name)

    def list_sessions(
        self, app_name: str, user_id: str, limit: int, after: UserCursor | None
    ) -> tuple[list[SessionRecord], UserCursor | None]:
        return listing.list_sessions(self._table, app_name, user_id, limit, after)

    def list_app_sessions(
        self, app_name: str, limit: int, after: AppCursor | None
    ) -> tuple[list[SessionRecord], AppCursor | None]:
        return listing.list_app_sessions(self._table, app_name, limit, after)

    def delete_session(self, key: SessionKey) -> None:
        sessions.delete_session(self._table, key)

    # --- export / import ----------------------------------------------------------------------------------------

    def put_memo(self, key: SessionKey, memo: dict[str, Any]) -> None:
        transfer.put_memo(self._table, key, memo)

    def import_session(self, record: SessionRecord, events: list[dict[str, Any]], *, replace: bool) -> SessionRecord:
        return transfer.import_session(self._table, record, events, replace=replace)

    # --- events -------------------------------------------------------------------------------------------------

    def append_events(self, key: SessionKey, events: list[NewEvent], expected_version: int | None) -> AppendResult:
        return appends.append(self._table, key, events, expected_version, None)

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
        watermark = Watermark(event.id, end_seq, expected_end_seq, incarnation, deletions)
        try:
            result = appends.append(self._table, key, [event], None, watermark)
        except WatermarkMoved:
            return None
        return result.events[0]

    def read_events(self, key: SessionKey, query: EventQuery) -> list[dict[str, Any]]:
        return reads.read_events(self._table, key, query)

    def read_events_by_id(self, key: SessionKey, query: IdQuery) -> list[dict[str, Any]]:
        return reads.read_events_by_id(self._table, key, query)

    def read_tail(self, key: SessionKey, query: EventQuery, need: TailNeed) -> Tail:
        return reads.read_tail(self._table, key, query, need)

    def delete_events(self, key: SessionKey, deletion: Deletion, expected_version: int | None) -> DeleteResult:
        return event_deletion.delete_events(self._table, key, deletion, expected_version)

    def purge_deleted(
        self, key: SessionKey, before: Callable[[list[str]], None], hidden: tuple[SeqRange, ...] | None = None
    ) -> int:
        return event_deletion.purge_deleted(self._table, key, before, hidden)

    # --- the change feed and the compaction schedule --------------------------------------------------------------

    def changes(self, records: list[dict[str, Any]]) -> list[Change]:
        return feed.changes(self._table.blobs, records)

    def purge_expired(self, records: list[dict[str, Any]]) -> list[str]:
        return feed.purge_expired(self._table.blobs, records)

    def list_due(self, limit: int) -> list[SessionKey]:
        return schedule.list_due(self._table, limit)

    def clear_due(self, key: SessionKey, version: int) -> bool:
        return schedule.clear_due(self._table, key, version)
