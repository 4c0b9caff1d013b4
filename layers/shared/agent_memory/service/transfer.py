"""Export and import of a whole session (JSON or YAML), and the session's memo.

The export document (``EXPORT_FORMAT``), keys in this order: ``format``, ``app_name``, ``user_id``,
``session_id``, ``create_time``, ``last_update_time``, ``version``, ``last_seq``, ``state`` (``session`` /
``user`` / ``app``, keys without their prefixes), ``memo``, ``compaction`` (``summary_event_id``, ``end_seq``)
and ``events`` (every event up to ``last_seq``, summaries included, as ``GET`` returns them). An import stores
the document as it is, so export → import → export gives the same bytes apart from the ids the import changed.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..edge.params import EXPORT_FORMAT
from ..errors import InvalidInput, PayloadTooLarge, SessionNotFound, UnprocessableInput
from ..limits import MAX_EVENT_PAGE
from ..policy.identifiers import validate_identifier, validate_new_session_id
from ..policy.paging import EventCursor, decode_event_token, encode_event_token
from ..policy.state import APP_PREFIX, TEMP_PREFIX, USER_PREFIX
from ..stores.ports import EventQuery, SessionKey, SessionRecord, SessionStore, marks_of, validated_key
from ..wire.jsonio import RESPONSE_CAP, dumps, event_size, wire_size
from .sessions import SessionService, fit_page

if TYPE_CHECKING:
    from ..edge.requests import SessionDocument  # the import's body, validated by the handler (pydantic)

logger = logging.getLogger(__name__)


class SessionTransfer:
    """The export, import and memo use cases over a session store."""

    def __init__(self, store: SessionStore) -> None:
        self._store = store

    @staticmethod
    def _key(app_name: str, user_id: str, session_id: str) -> SessionKey:
        return validated_key(app_name, user_id, session_id)

    def export_session(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        limit: int | None = None,
        next_token: str | None = None,
    ) -> dict[str, Any]:
        """The session as one document (see the module). PayloadTooLarge (413) when its events alone would pass
        what one response carries (``jsonio.RESPONSE_CAP``), unless paged: with ``limit`` (1 to MAX_EVENT_PAGE
        events a page) or ``next_token``, each page is the document with a page of its events and ``next_token``
        (null on the last page); the pages read the events up to the first page's ``last_seq``, and their events
        put together are the document's, so a session of any length exports."""
        key = self._key(app_name, user_id, session_id)
        if limit is not None and not 1 <= limit <= MAX_EVENT_PAGE:
            raise InvalidInput(f"limit must be between 1 and {MAX_EVENT_PAGE}", field="limit")
        record = self._store.get_session(key)
        if record is None:
            raise SessionNotFound(session_id)
        paged = limit is not None or next_token is not None
        incarnation = record.incarnation or repr(record.create_time)
        if next_token is None:
            cursor = EventCursor(after_seq=0, until_seq=record.last_seq, after_timestamp=None, num_recent=None)
        else:
            cursor = decode_event_token(app_name, user_id, session_id, incarnation, next_token)
        # Up to the last seq the record counts: an append landing meanwhile is not half in the document. The read
        # stops once it passes what a response carries (no session of any size is read whole into memory).
        events = self._store.read_events(
            key,
            EventQuery(
                after_seq=cursor.after_seq or None,
                up_to_seq=cursor.until_seq,
                limit=None if limit is None else limit + 1,
                max_bytes=RESPONSE_CAP,
                verbatim=True,
                marks=marks_of(record),
            ),
        )
        document = {
            "format": EXPORT_FORMAT,
            "app_name": record.app_name,
            "user_id": record.user_id,
            "session_id": record.session_id,
            "create_time": record.create_time,
            "last_update_time": record.update_time,
            "version": record.version,
            "last_seq": cursor.until_seq,
            "state": {"session": record.state, "user": record.user_state, "app": record.app_state},
            "memo": record.memo,
            "compaction": {"summary_event_id": record.summary_event_id, "end_seq": record.summary_end_seq},
            "events": events,
        }
        if not paged:
            if sum(event_size(e) for e in events) >= RESPONSE_CAP:
                raise PayloadTooLarge(
                    f"the session's events take more than {RESPONSE_CAP} bytes, more than one response carries: "
                    "export it in pages (limit, next_token)",
                    field="session_id",
                )
            return document
        room = RESPONSE_CAP - wire_size(dumps(document | {"events": [], "next_token": "x" * 400}))
        page, more = fit_page(events, limit, room)
        document["events"] = page
        document["next_token"] = None
        if more and page:
            last = EventCursor(
                after_seq=int(page[-1]["seq"]), until_seq=cursor.until_seq, after_timestamp=None, num_recent=None
            )
            document["next_token"] = encode_event_token(app_name, user_id, session_id, incarnation, last)
        return document

    def import_session(
        self,
        app_name: str,
        user_id: str,
        document: SessionDocument,
        *,
        session_id: str | None = None,
        replace: bool = False,
    ) -> dict[str, Any]:
        """Store ``document`` under the path's app and user and ``session_id`` (default: the document's); return
        the session as a create answers it (no events, ``created`` true).

        Checks what the model cannot (422 naming the document's field): unique event ids, seqs increasing and
        within ``last_seq``, the watermark's summary among the events, no scope prefix in the session's own
        state. The store makes it all-or-nothing and applies the quotas."""
        validate_identifier(app_name, "app_name")
        validate_identifier(user_id, "user_id")
        if session_id is None:
            target = validate_new_session_id(document.session_id, "session_id", UnprocessableInput)
        else:
            target = validate_new_session_id(session_id, "session_id")
        events = [_stored_form(event.dump()) for event in document.events]
        _check_document(document, events)
        record = SessionRecord(
            app_name,
            user_id,
            target,
            create_time=document.create_time,
            update_time=document.last_update_time,
            version=document.version,
            last_seq=document.last_seq,
            state=document.state.session,
            user_state=document.state.user,
            app_state=document.state.app,
            summary_event_id=document.compaction.summary_event_id,
            summary_end_seq=document.compaction.end_seq,
            memo=document.memo,
        )
        stored = self._store.import_session(record, events, replace=replace)
        logger.info("session imported", extra={"session_id": target, "events": len(events), "replace": replace})
        data = SessionService._session(stored).dump()
        data["created"] = True
        return data

    def get_memo(self, app_name: str, user_id: str, session_id: str) -> dict[str, Any]:
        """``{"memo": {...}}`` (``{}`` when never written); SessionNotFound."""
        record = self._store.get_session(self._key(app_name, user_id, session_id))
        if record is None:
            raise SessionNotFound(session_id)
        return {"memo": record.memo}

    def put_memo(self, app_name: str, user_id: str, session_id: str, memo: dict[str, Any]) -> dict[str, Any]:
        """Replace the memo (bounded by the request model); ``{"memo": memo}``. The version does not move."""
        self._store.put_memo(self._key(app_name, user_id, session_id), memo)
        return {"memo": memo}


def _stored_form(event: dict[str, Any]) -> dict[str, Any]:
    """An event as the stores read it back: its fields in order, ``seq`` last."""
    seq = event.pop("seq")
    event["seq"] = seq
    return event


def _check_document(document: SessionDocument, events: list[dict[str, Any]]) -> None:
    """UnprocessableInput (422) naming the first field of the document that cannot be stored as given."""
    for name in document.state.session:
        if name.startswith((APP_PREFIX, USER_PREFIX, TEMP_PREFIX)):
            raise UnprocessableInput(
                f"session state key {name!r} has a scope prefix; `user` and `app` keys go in their own scopes",
                field=f"state.session.{name}",
            )
    seen: dict[str, int] = {}
    previous = 0
    for index, event in enumerate(events):
        if event["id"] in seen:
            raise UnprocessableInput(
                f"event id {event['id']!r} is also events[{seen[event['id']]}]'s", field=f"events[{index}].id"
            )
        seen[event["id"]] = index
        if event["seq"] <= previous:
            raise UnprocessableInput(
                f"seq {event['seq']} does not follow the previous event's {previous}", field=f"events[{index}].seq"
            )
        if event["seq"] > document.last_seq:
            raise UnprocessableInput(
                f"seq {event['seq']} is past last_seq {document.last_seq}", field=f"events[{index}].seq"
            )
        previous = event["seq"]
    compaction = document.compaction
    if compaction.end_seq > document.last_seq:
        raise UnprocessableInput(
            f"end_seq {compaction.end_seq} is past last_seq {document.last_seq}", field="compaction.end_seq"
        )
    if compaction.summary_event_id is not None:
        summary = events[seen[compaction.summary_event_id]] if compaction.summary_event_id in seen else None
        if summary is None or not (summary.get("actions") or {}).get("compaction"):
            raise UnprocessableInput(
                f"{compaction.summary_event_id!r} is not a compaction event of events",
                field="compaction.summary_event_id",
            )
