"""``SqliteSessionStore``: the ``SessionStore`` port (sessions, events, state, the due index) and the change feed on a
``SqliteDatabase``. Each operation is its module's: this class holds the collaborators (the database, the clock, the
quotas) and hands them over. Events of any size are stored inline: no blob store."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ...policy.quotas import NO_QUOTAS, Quotas
from ...policy.state import ScopedDelta
from ..ports import (
    AppCursor,
    AppendResult,
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
from . import appends, due, feed, reads, sessions, transfer
from . import deletion as _deletion  # (named apart: the port names ``delete_events``'s argument ``deletion``)
from .database import SqliteDatabase


class SqliteSessionStore:
    """``SessionStore`` on a ``SqliteDatabase``, with its change feed (``read_changes``, ``ack_changes``,
    ``changes``)."""

    def __init__(
        self, db: SqliteDatabase, clock: Callable[[], float] = time.time, *, quotas: Quotas = NO_QUOTAS
    ) -> None:
        self._db = db
        self._clock = clock
        self._quotas = quotas

    # --- sessions ---------------------------------------------------------------------------------------------

    def create_session(self, record: SessionRecord, delta: ScopedDelta) -> tuple[SessionRecord, bool]:
        return sessions.create_session(self._db, self._quotas, record, delta)

    def get_session(self, key: SessionKey) -> SessionRecord | None:
        return sessions.get_session(self._db, key)

    def get_session_for_compaction(self, key: SessionKey) -> SessionRecord | None:
        return self.get_session(key)  # reads here are consistent and cheap: the whole record

    def get_user_state(self, app_name: str, user_id: str) -> dict[str, Any]:
        return sessions.get_user_state(self._db, app_name, user_id)

    def get_app_state(self, app_name: str) -> dict[str, Any]:
        return sessions.get_app_state(self._db, app_name)

    def list_sessions(
        self, app_name: str, user_id: str, limit: int, after: UserCursor | None
    ) -> tuple[list[SessionRecord], UserCursor | None]:
        return sessions.list_sessions(self._db, app_name, user_id, limit, after)

    def list_app_sessions(
        self, app_name: str, limit: int, after: AppCursor | None
    ) -> tuple[list[SessionRecord], AppCursor | None]:
        return sessions.list_app_sessions(self._db, app_name, limit, after)

    def delete_session(self, key: SessionKey) -> None:
        sessions.delete_session(self._db, key)

    # --- events -------------------------------------------------------------------------------------------------

    def append_events(self, key: SessionKey, events: list[NewEvent], expected_version: int | None) -> AppendResult:
        return appends.append_events(self._db, self._clock, self._quotas, key, events, expected_version)

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
        return appends.append_compaction(
            self._db, self._clock, key, event, end_seq, expected_end_seq, incarnation=incarnation, deletions=deletions
        )

    def read_events(self, key: SessionKey, query: EventQuery) -> list[dict[str, Any]]:
        return reads.read_events(self._db, key, query)

    def read_events_by_id(self, key: SessionKey, query: IdQuery) -> list[dict[str, Any]]:
        return reads.read_events_by_id(self._db, key, query)

    def read_tail(self, key: SessionKey, query: EventQuery, need: TailNeed) -> Tail:
        return reads.read_tail(self._db, key, query, need)

    # --- export / import -------------------------------------------------------------------------------------

    def put_memo(self, key: SessionKey, memo: dict[str, Any]) -> None:
        transfer.put_memo(self._db, key, memo)

    def import_session(self, record: SessionRecord, events: list[dict[str, Any]], *, replace: bool) -> SessionRecord:
        return transfer.import_session(self._db, self._quotas, record, events, replace=replace)

    # --- deleting events ------------------------------------------------------------------------------------------

    def delete_events(self, key: SessionKey, deletion: Deletion, expected_version: int | None) -> DeleteResult:
        return _deletion.delete_events(self._db, self._clock, key, deletion, expected_version)

    def purge_deleted(
        self, key: SessionKey, before: Callable[[list[str]], None], hidden: tuple[SeqRange, ...] | None = None
    ) -> int:
        return _deletion.purge_deleted(self._db, key, before, hidden)

    # --- the compaction schedule's index ----------------------------------------------------------------------

    def list_due(self, limit: int) -> list[SessionKey]:
        return due.list_due(self._db, limit)

    def clear_due(self, key: SessionKey, version: int) -> bool:
        return due.clear_due(self._db, key, version)

    # --- the change feed ----------------------------------------------------------------------------------------

    def read_changes(self, after: int, limit: int) -> list[dict[str, Any]]:
        return feed.read_changes(self._db, after, limit)

    def ack_changes(self, up_to: int) -> None:
        feed.ack_changes(self._db, up_to)

    def changes(self, records: list[dict[str, Any]]) -> list[Change]:
        return feed.changes_from_feed(records)

    def purge_expired(self, records: list[dict[str, Any]]) -> list[str]:
        return []  # no expiry here (retention is DynamoDB's TTL)
