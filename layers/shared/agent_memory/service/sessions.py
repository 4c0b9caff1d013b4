"""Session use cases: create (get-or-create), get, list, delete, append."""

from __future__ import annotations

import logging
import math
import re
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import (
    AlreadyExists,
    Conflict,
    DeletionIncomplete,
    EventIdConflict,
    EventNotFound,
    InvalidInput,
    PayloadTooLarge,
    PreconditionFailed,
    ServiceUnavailable,
    SessionNotFound,
    ToolPairConflict,
    UnprocessableInput,
)
from ..limits import MAX_BATCH, MAX_EVENT_PAGE, MAX_PAGE
from ..policy.identifiers import validate_identifier, validate_new_session_id
from ..policy.paging import (
    AppCursor,
    EventCursor,
    UserCursor,
    decode_event_token,
    decode_page_token,
    encode_event_token,
    encode_page_token,
)
from ..policy.preconditions import IfMatch, parse_if_match, parse_if_none_match
from ..policy.state import merged_state, split_delta, strip_temp
from ..runtime.aws import capacity_error
from ..runtime.lazyclass import dataclass  # processed on first instance (lazyclass.py)
from ..stores.ports import (
    Deletion,
    DeletionRaced,
    EventPublisher,
    EventQuery,
    IdQuery,
    NewEvent,
    SessionKey,
    SessionRecord,
    SessionStore,
    marks_of,
    validated_key,
)
from ..view import Session
from ..wire.jsonio import RESPONSE_CAP, dumps, event_size, wire_size

if TYPE_CHECKING:  # the deletions' policy is imported by the deletions only (a create or an append never plans one)
    from ..policy.deletion import DeletePlan


class _Actions(Protocol):
    @property
    def state_delta(self) -> dict[str, Any]: ...


class AppendedEvent(Protocol):
    """A validated event to append: ``models.Event`` (pydantic) or ``plainevents.PlainEvent`` (the common body read
    without pydantic); both give the same stored JSON."""

    @property
    def id(self) -> str | None: ...
    @property
    def timestamp(self) -> float | None: ...
    @property
    def actions(self) -> _Actions: ...
    def stored(self, event_id: str, timestamp: float, state_delta: dict[str, Any]) -> dict[str, Any]: ...


logger = logging.getLogger(__name__)
# What an id prefix may hold: an event id's characters (policy/identifiers.py), any number of them.
_ID_CHARS = re.compile(r"[A-Za-z0-9._:@-]*")

DEFAULT_PAGE = 20
# A deletion planned on events that moved before it committed is planned again, at most this often.
DELETE_ATTEMPTS = 20
PAIRS = ("delete", "reject")

# What a deletion calls for each batch of deleted event ids before their items go (MemoryService.forget_events).
ForgetEvents = Callable[[SessionKey, list[str]], None]


def _forget_nothing(key: SessionKey, event_ids: list[str]) -> None:
    return None


@dataclass
class AppendOutcome:
    events: list[dict[str, Any]]
    created: bool  # at least one event was newly stored
    version: int


def parse_timestamp(value: str | float | None, field: str) -> float | None:
    """Seconds since the epoch, from a number or an ISO 8601 string."""
    if value is None:
        return None
    bad = InvalidInput(f"{field} must be seconds since the epoch or an ISO 8601 time", field=field)
    if isinstance(value, str):
        try:
            seconds = float(value)
        except ValueError:
            try:
                parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError as exc:
                raise bad from exc
            if parsed.tzinfo is None:  # a time without a zone is UTC, not the server's local time
                parsed = parsed.replace(tzinfo=UTC)
            return parsed.timestamp()
    else:
        seconds = float(value)
    if not math.isfinite(seconds):
        raise bad
    return seconds


class SessionService:
    def __init__(
        self,
        store: SessionStore,
        publisher: EventPublisher | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self._publisher = publisher
        self._clock = clock

    # --- helpers --------------------------------------------------------------------------------------------

    @staticmethod
    def _key(app_name: str, user_id: str, session_id: str) -> SessionKey:
        return validated_key(app_name, user_id, session_id)

    @staticmethod
    def _session(record: SessionRecord, events: list[dict[str, Any]] | None = None) -> Session:
        # No validation: what is stored reads as stored (see view.Session).
        return Session(
            id=record.session_id,
            app_name=record.app_name,
            user_id=record.user_id,
            state=merged_state(record.state, record.user_state, record.app_state),
            events=events or [],
            create_time=record.create_time,
            last_update_time=record.update_time,
            version=record.version,
        )

    # --- use cases ------------------------------------------------------------------------------------------

    def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str | None = None,
        state: dict[str, Any] | None = None,
        if_none_match: str | None = None,
    ) -> tuple[dict[str, Any], bool]:
        """Get-or-create. Returns the session (with ``created``) and whether it was created.

        ``state`` (already bounded by the request model) applies only on a true creation; ``temp:`` keys are
        dropped, ``app:`` / ``user:`` keys go to those scopes. ``if_none_match`` is the raw ``If-None-Match``
        header: ``*`` makes the create strict (AlreadyExists, 409, when the id is taken; nothing changes).
        """
        validate_identifier(app_name, "app_name")
        validate_identifier(user_id, "user_id")
        strict = parse_if_none_match(if_none_match)
        if session_id is None:
            session_id = str(uuid.uuid4())
        else:
            validate_new_session_id(session_id, "session_id", UnprocessableInput)
        now = self._clock()
        record = SessionRecord(app_name, user_id, session_id, create_time=now, update_time=now)
        stored, created = self.store.create_session(record, split_delta(state or {}))
        if strict and not created:
            # The store changes nothing for an existing id (its state applies only on a true creation).
            raise AlreadyExists(f"session {session_id!r} exists already", field="session_id")
        if created:
            self._publish_created(stored)
        data = self._session(stored).dump()
        data["created"] = created
        return data, created

    def _publish_created(self, record: SessionRecord) -> None:
        if self._publisher is None:
            return
        detail = {
            "app_name": record.app_name,
            "user_id": record.user_id,
            "session_id": record.session_id,
            "create_time": record.create_time,
        }
        try:
            self._publisher.publish("SessionCreated", detail)
        except Exception:  # the session exists; a lost notification must not fail the request
            logger.exception("could not publish SessionCreated", extra=detail)

    def get_session(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        num_recent_events: int | None = None,
        after_timestamp: str | float | None = None,
        limit: int | None = None,
        next_token: str | None = None,
        after_summary: bool = False,
    ) -> dict[str, Any]:
        """The session with one page of its events, oldest first, and ``next_token`` (null on the last page).

        ``after_summary``: only the events after what the newest summary covers (the summary, the raw events it
        kept and every later one): what a client that applies summaries itself (ADK) needs, read in about as many
        items as it answers, whatever the session's length.

        The events are those at or after ``after_timestamp``, of them the newest ``num_recent_events``; ``limit``
        cuts them into pages (1 to MAX_EVENT_PAGE). Whatever the parameters, a page stops before its response
        would pass ``jsonio.RESPONSE_CAP``: a client that sends no paging parameter gets the first page that
        fits and a ``next_token``. Pages after the first page through the same window (the events up to the
        session's last seq when the first page was read) with the same filters; repeating ``num_recent_events``
        or ``after_timestamp`` with ``next_token`` is allowed if they are the first request's.
        """
        key = self._key(app_name, user_id, session_id)
        if num_recent_events is not None and num_recent_events < 0:
            raise InvalidInput("num_recent_events must be 0 or more", field="num_recent_events")
        if limit is not None and not 1 <= limit <= MAX_EVENT_PAGE:
            raise InvalidInput(f"limit must be between 1 and {MAX_EVENT_PAGE}", field="limit")
        after = parse_timestamp(after_timestamp, "after_timestamp")
        record = self.store.get_session(key)
        if record is None:
            raise SessionNotFound(session_id)
        if next_token is None:
            start = record.summary_end_seq if after_summary and record.summary_event_id else 0
            cursor = EventCursor(after_seq=start, until_seq=record.last_seq, after_timestamp=after, num_recent=None)
            num_recent = num_recent_events
        else:
            cursor = decode_event_token(app_name, user_id, session_id, _incarnation(record), next_token)
            if (after is not None and after != cursor.after_timestamp) or (
                num_recent_events is not None and num_recent_events != cursor.num_recent
            ):
                raise InvalidInput(
                    "next_token was issued for other num_recent_events or after_timestamp", field="next_token"
                )
            num_recent = None  # the window's start is behind us
        query = EventQuery(
            num_recent=num_recent,
            after_timestamp=cursor.after_timestamp,
            after_seq=cursor.after_seq or None,
            up_to_seq=cursor.until_seq,
            # One more than the page: tells whether more remain without another read.
            limit=None if limit is None else limit + 1,
            max_bytes=RESPONSE_CAP,
            verbatim=True,
            marks=marks_of(record),
        )
        events = self.store.read_events(key, query)
        data = self._session(record).dump()
        # The room the session's fields, the separators and the longest token leave for the page's events.
        room = RESPONSE_CAP - wire_size(dumps(data | {"next_token": "x" * 400}))
        page, more = fit_page(events, limit, room)
        data["events"] = page
        data["next_token"] = None
        if more and page:
            last = EventCursor(
                after_seq=int(page[-1]["seq"]),
                until_seq=cursor.until_seq,
                after_timestamp=cursor.after_timestamp,
                num_recent=num_recent_events if next_token is None else cursor.num_recent,
            )
            data["next_token"] = encode_event_token(app_name, user_id, session_id, _incarnation(record), last)
        return data

    def get_events(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        ids: Sequence[str] | None = None,
        id_prefix: str | None = None,
        after_id: str | None = None,
        order: str | None = None,
        limit: int | None = None,
    ) -> dict[str, Any]:
        """Events by id: those ``ids`` names (at most MAX_BATCH, answered in that order; an id the session does not
        hold is left out), or one page of those whose id starts with ``id_prefix`` (none: every event) in id order
        (``order`` ``asc``, the default, or ``desc``), after ``after_id`` in that order, at most ``limit`` (1 to
        MAX_EVENT_PAGE, default MAX_BATCH). A page cut by ``limit`` or the response cap answers ``next_after_id``
        (the ``after_id`` of the next page; null on the last); a named read the cap cut answers the ids it left
        unread in ``unread``. Reads about the events it answers, whatever the session holds."""
        key = self._key(app_name, user_id, session_id)
        wanted = list(ids or [])
        if wanted and (id_prefix is not None or after_id is not None or order is not None):
            raise InvalidInput("id names events: id_prefix, after_id and order page a prefix instead", field="id")
        if len(wanted) > MAX_BATCH:
            raise InvalidInput(f"at most {MAX_BATCH} ids", field="id")
        for event_id in wanted:
            validate_identifier(event_id, "id")
        if id_prefix is not None and (len(id_prefix) > 128 or not _ID_CHARS.fullmatch(id_prefix)):
            raise InvalidInput("id_prefix must be at most 128 characters of [A-Za-z0-9._:@-]", field="id_prefix")
        if after_id is not None:
            validate_identifier(after_id, "after_id")
        if order not in (None, "asc", "desc"):
            raise InvalidInput("order must be asc or desc", field="order")
        if limit is not None and not 1 <= limit <= MAX_EVENT_PAGE:
            raise InvalidInput(f"limit must be between 1 and {MAX_EVENT_PAGE}", field="limit")
        record = self.store.get_session(key)
        if record is None:
            raise SessionNotFound(session_id)
        page_size = MAX_BATCH if limit is None else limit
        query = IdQuery(
            ids=tuple(wanted),
            prefix=id_prefix or "",
            after_id=after_id,
            descending=order == "desc",
            # One more than the page: tells whether more remain without another read.
            limit=None if wanted else page_size + 1,
            # Named events are read whole (at most MAX_BATCH): an id the cap leaves out must be told from one the
            # session does not hold (``unread``).
            max_bytes=None if wanted else RESPONSE_CAP,
            verbatim=True,
            marks=marks_of(record),
        )
        events = self.store.read_events_by_id(key, query)
        data: dict[str, Any] = {"app_name": app_name, "user_id": user_id, "session_id": session_id}
        room = RESPONSE_CAP - wire_size(dumps(data | {"events": [], "next_after_id": "x" * 128, "unread": wanted}))
        page, more = fit_page(events, None if wanted else page_size, room)
        data["events"] = page
        if wanted:
            answered = {str(e.get("id")) for e in page}
            read = {str(e.get("id")) for e in events}
            data["unread"] = [i for i in dict.fromkeys(wanted) if i in read and i not in answered]
        else:
            data["next_after_id"] = str(page[-1]["id"]) if more and page else None
        return data

    def list_sessions(
        self, app_name: str, user_id: str | None, limit: int | None = None, next_token: str | None = None
    ) -> dict[str, Any]:
        """One page of sessions without events, each with its merged state (session, ``user:``, ``app:``), cut
        short before the response would pass ``jsonio.RESPONSE_CAP``; ``next_token`` is null on the last page.

        A user's sessions (``user_id``) come oldest ``last_update_time`` first, ties by id (as ADK lists them); an
        app's (``user_id`` None: every user's) by user id, then session id. Each page is read afresh: a session
        appended to between two pages of a user's listing moves forward in the order, so it may show again on a
        later page; none is skipped."""
        validate_identifier(app_name, "app_name")
        if user_id is not None:
            validate_identifier(user_id, "user_id")
        limit = DEFAULT_PAGE if limit is None else limit
        if not 1 <= limit <= MAX_PAGE:
            raise InvalidInput(f"limit must be between 1 and {MAX_PAGE}", field="limit")
        after = None if next_token is None else decode_page_token(app_name, user_id, next_token)
        records: list[SessionRecord]
        last: UserCursor | AppCursor | None
        if user_id is None:
            assert after is None or isinstance(after, AppCursor)
            records, last = self.store.list_app_sessions(app_name, limit, after)
        else:
            assert after is None or isinstance(after, UserCursor)
            records, last = self.store.list_sessions(app_name, user_id, limit, after)
        room = RESPONSE_CAP - wire_size(dumps({"sessions": [], "next_token": "x" * 400}))
        sessions: list[dict[str, Any]] = []
        for index, record in enumerate(records):
            session = self._session(record).dump(with_events=False)
            room -= wire_size(dumps(session)) - 1  # its JSON escaped, and a separator
            if room < 0 and sessions:
                previous = records[index - 1]
                last = AppCursor.of(previous) if user_id is None else UserCursor.of(previous)
                break
            sessions.append(session)
        return {
            "sessions": sessions,
            "next_token": None if last is None else encode_page_token(app_name, user_id, last),
        }

    def get_user_state(self, app_name: str, user_id: str) -> dict[str, Any]:
        """The user's state, keys with their ``user:`` prefix (``{}`` when none: never SessionNotFound)."""
        validate_identifier(app_name, "app_name")
        validate_identifier(user_id, "user_id")
        state = merged_state({}, self.store.get_user_state(app_name, user_id), {})
        return {"app_name": app_name, "user_id": user_id, "state": state}

    def get_app_state(self, app_name: str) -> dict[str, Any]:
        """The app's state, keys with their ``app:`` prefix (``{}`` when none)."""
        validate_identifier(app_name, "app_name")
        return {"app_name": app_name, "state": merged_state({}, {}, self.store.get_app_state(app_name))}

    def delete_session(self, app_name: str, user_id: str, session_id: str) -> None:
        self.store.delete_session(self._key(app_name, user_id, session_id))

    def append_events(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        events: Sequence[AppendedEvent],
        if_match: str | None = None,
        single: bool = False,
    ) -> AppendOutcome:
        """Append validated events atomically; ``if_match`` is the raw ``If-Match`` header (RFC 9110 strong).

        ``single``: the request sent one event, not ``{events: [...]}``, so an error names its own fields
        (``id``) rather than ``events[0].id``."""
        key = self._key(app_name, user_id, session_id)
        condition = parse_if_match(if_match)
        if not events:
            raise UnprocessableInput("events must be a non-empty list", field="events")
        if len(events) > MAX_BATCH:
            raise UnprocessableInput(f"events holds {len(events)} events; at most {MAX_BATCH}", field="events")
        new_events = [self._normalise(event) for event in events]
        # The answer carries the stored events: refuse, before anything is written, what could never be
        # answered (a 2 MB text of emoji is 6 MB JSON-escaped) rather than store it and answer 413.
        if sum(event_size(e.body) for e in new_events) > RESPONSE_CAP - 100_000:
            raise PayloadTooLarge(
                f"the events take more than {RESPONSE_CAP} bytes as the JSON of the answer; send fewer or smaller",
                field="body" if single else "events",
            )
        expected = self._expected_version(key, condition)
        try:
            result = self.store.append_events(key, new_events, expected)
        except EventIdConflict as exc:
            if single:
                exc.field = "id"
            raise
        return AppendOutcome(events=result.events, created=any(result.created), version=result.version)

    def _expected_version(self, key: SessionKey, condition: IfMatch | None) -> int | None:
        """The version the store must find (None: any), or PreconditionFailed when nothing can match."""
        if condition is None:
            return None
        if len(condition.versions) == 1 and not condition.any_version:
            (version,) = condition.versions
            return version  # the store's conditional write compares it, no read needed
        if not condition.any_version and not condition.versions:
            raise PreconditionFailed("If-Match names no current ETag of the session", field="If-Match")
        record = self.store.get_session(key)
        if record is None:
            raise SessionNotFound(key.session_id)
        if not condition.matches(record.version):
            raise PreconditionFailed(f'If-Match does not match the current ETag "{record.version}"', field="If-Match")
        # "*": any version; a list: the one that matched, so a write racing in between still answers 412.
        return None if condition.any_version else record.version

    def _normalise(self, event: AppendedEvent) -> NewEvent:
        """Fill a validated event's id and timestamp; drop ``temp:`` state, which is never stored."""
        filled = event.timestamp is None
        delta = event.actions.state_delta
        event_id = event.id if event.id is not None else str(uuid.uuid4())
        timestamp = self._clock() if filled else event.timestamp
        assert timestamp is not None
        return NewEvent(
            id=event_id,
            timestamp=timestamp,
            body=event.stored(event_id, timestamp, strip_temp(delta)),
            delta=split_delta(delta),
            timestamp_filled=filled,
        )

    # --- deleting events --------------------------------------------------------------------------------------

    def delete_event(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        event_id: str,
        pairs: str | None = None,
        if_match: str | None = None,
        forget: ForgetEvents | None = None,
    ) -> dict[str, Any]:
        """Delete one event with its tool-call partners (``pairs`` ``reject``: ToolPairConflict naming them, nothing
        deleted) and every summary that covered one of them; ``{"deleted": [ids], "version": n}``.

        ``forget`` is called with the ids of the deleted events, in batches, before their items go (the memory
        service forgets what was saved from them). The session's state is not rewound (see ``clear_events``)."""
        key = self._key(app_name, user_id, session_id)
        validate_identifier(event_id, "event_id")
        if pairs is not None and pairs not in PAIRS:
            raise InvalidInput("pairs must be `delete` or `reject`", field="pairs")
        from ..policy.deletion import plan_delete, seq_ranges, with_partners

        def plan(record: SessionRecord) -> tuple[DeletePlan, tuple[tuple[int, int], ...]]:
            events = self.store.read_events(key, EventQuery(marks=marks_of(record), unchecked=True))
            if not any(e.get("id") == event_id for e in events):
                raise EventNotFound(f"session {session_id!r} holds no event {event_id!r}", field="event_id")
            if pairs == "reject":
                partners = sorted(with_partners(events, {event_id}) - {event_id})
                if partners:
                    raise ToolPairConflict(
                        f"event {event_id!r} shares tool calls with {', '.join(map(repr, partners))}: deleting it "
                        "alone would split a call from its response (send pairs=delete to delete them together)",
                        field="event_id",
                    )
            found = plan_delete(events, {event_id}, watermark=(record.summary_event_id, record.summary_end_seq))
            return found, seq_ranges(found.seqs)

        found, version, _ = self._delete(key, if_match, plan, forget)
        return {"deleted": found.ids, "version": version}

    def clear_events(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        before_seq: int | None = None,
        before_invocation_id: str | None = None,
        if_match: str | None = None,
        forget: ForgetEvents | None = None,
    ) -> dict[str, Any]:
        """Delete every event (a clear), or rewind: those with ``seq >= before_seq``, or from the first event of
        ``before_invocation_id`` onwards, with every tool partner of theirs (before the cut too) and every summary
        that covered one of them; ``{"deleted": n, "version": n}``.

        The session's state stays as it is: state deltas of deleted events are not undone (ADK rewinds state by
        appending an event whose ``state_delta`` reverses them). Seqs are never reused."""
        key = self._key(app_name, user_id, session_id)
        if before_seq is not None and before_invocation_id is not None:
            raise InvalidInput("send before_seq or before_invocation_id, not both", field="before_invocation_id")
        if before_seq is not None and (isinstance(before_seq, bool) or before_seq < 1):
            raise InvalidInput("before_seq must be 1 or more", field="before_seq")
        from ..policy.deletion import DeletePlan, first_of_invocation, plan_delete, seq_ranges

        def plan(record: SessionRecord) -> tuple[DeletePlan, tuple[tuple[int, int], ...]]:
            if before_seq is None and before_invocation_id is None:
                # Everything: no event needs reading, whatever their number (one tells whether any is left).
                left = record.last_seq and self.store.read_events(
                    key, EventQuery(num_recent=1, marks=marks_of(record), unchecked=True)
                )
                ranges = ((1, record.last_seq),) if left else ()
                return DeletePlan([], [], None, 0), ranges
            events = self.store.read_events(key, EventQuery(marks=marks_of(record), unchecked=True))
            cut = before_seq
            if before_invocation_id is not None:
                cut = first_of_invocation(events, before_invocation_id)
                if cut is None:
                    raise EventNotFound(
                        f"no event of session {session_id!r} has invocation id {before_invocation_id!r}",
                        field="before_invocation_id",
                    )
            assert cut is not None
            found = plan_delete(
                events, set(), from_seq=cut, watermark=(record.summary_event_id, record.summary_end_seq)
            )
            if not found.ids:
                return found, ()
            return found, seq_ranges(found.seqs, tail=(cut, record.last_seq))

        _, version, deleted = self._delete(key, if_match, plan, forget)
        return {"deleted": deleted, "version": version}

    def _delete(
        self,
        key: SessionKey,
        if_match: str | None,
        plan: Callable[[SessionRecord], tuple[DeletePlan, tuple[tuple[int, int], ...]]],
        forget: ForgetEvents | None,
    ) -> tuple[DeletePlan, int, int]:
        """Finish earlier deletions, plan on the session as read, commit (planning again when the session moved
        meanwhile), then purge: the answer comes once the events, their payloads and their memories are gone."""
        condition = parse_if_match(if_match)
        settle = forget or _forget_nothing

        def before(event_ids: list[str]) -> None:
            settle(key, event_ids)

        expected = self._expected_version(key, condition)
        unfinished = True  # whether a deletion a fault interrupted may be left to finish
        for _ in range(DELETE_ATTEMPTS):
            record = self.store.get_session(key)
            if record is None:
                raise SessionNotFound(key.session_id)
            if unfinished:
                # Finished first (also when this request deletes nothing); the record just read tells the store
                # what is pending, so that nothing is read again when nothing is.
                unfinished = False
                if self.store.purge_deleted(key, before, hidden=record.hidden) and record.hidden:
                    record = self.store.get_session(key)  # its hidden ranges are gone now
                    if record is None:
                        raise SessionNotFound(key.session_id)
            found, ranges = plan(record)
            if not ranges:
                if expected is not None and expected != record.version:
                    raise PreconditionFailed(
                        f"If-Match version {expected} is not the current version {record.version}", field="If-Match"
                    )
                return found, record.version, 0
            deletion = Deletion(
                ranges=ranges,
                based_on_seq=record.last_seq,
                based_on_deletions=record.deletions,
                summary_event_id=found.summary_event_id,
                summary_end_seq=found.summary_end_seq,
                record=record,
            )
            try:
                result = self.store.delete_events(key, deletion, expected)
            except DeletionRaced:
                continue
            try:
                purged = self.store.purge_deleted(key, before, hidden=result.hidden)
            except Exception as exc:
                unavailable = exc if isinstance(exc, ServiceUnavailable) else capacity_error(exc)
                if unavailable is None:
                    raise
                raise DeletionIncomplete(
                    "the events are deleted (no read shows them), but removing them from storage did not finish "
                    f"({unavailable.message}): send the request again to finish",
                    retry_after=unavailable.retry_after,
                ) from exc
            # The store's count at commit, else what the purge took (the earlier deletions were finished above).
            return found, result.version, purged if result.deleted is None else result.deleted
        raise Conflict("the session kept changing while the deletion was planned; retry the request")


def _incarnation(record: SessionRecord) -> str:
    # A session deleted and created again under the same id is another incarnation: its tokens do not carry over.
    # Sessions stored before incarnations existed fall back to their create time.
    return record.incarnation or repr(record.create_time)


def fit_page(events: list[dict[str, Any]], limit: int | None, room: int) -> tuple[list[dict[str, Any]], bool]:
    """The page: the first events that fit ``room`` bytes (and ``limit``), and whether more remain.

    ``events`` were read with ``limit + 1`` and ``max_bytes=RESPONSE_CAP`` (measured alike, by
    ``jsonio.event_size``): more remain when the read went past the page, or stopped on size. An event too
    large for any response is answered as a marker (``error_code`` ``event_too_large``) so the rest stays readable.
    """
    page: list[dict[str, Any]] = []
    total = 0
    for event in events:
        size = event_size(event)
        total += size
        if limit is not None and len(page) == limit:
            return page, True
        if size > room:
            if page:
                return page, True
            event = _too_large_marker(event, size)
            size = event_size(event)
        page.append(event)
        room -= size
    return page, total >= RESPONSE_CAP


def _too_large_marker(event: dict[str, Any], size: int) -> dict[str, Any]:
    logger.warning("event too large for any response; answered as a marker", extra={"event_id": event.get("id")})
    return {
        "id": event.get("id") if isinstance(event.get("id"), str) else "",
        "invocation_id": event.get("invocation_id") if isinstance(event.get("invocation_id"), str) else "",
        "author": event.get("author") if isinstance(event.get("author"), str) else "agent_memory",
        "timestamp": event.get("timestamp"),
        "error_code": "event_too_large",
        "error_message": f"the event takes {size} bytes, more than a response can carry ({RESPONSE_CAP})",
        "seq": event.get("seq"),
    }
