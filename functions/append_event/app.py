"""POST /apps/{app_name}/users/{user_id}/sessions/{session_id}/events: append one event or a batch;
PUT …/sessions/{session_id}/memo: replace the session's memo (its version does not move)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_memory.composition import services
from agent_memory.edge.api import Response, create_app, json_response, lambda_entry
from agent_memory.service.transfer import SessionTransfer
from agent_memory.wire.plainevents import PlainBatch, PlainEvent

if TYPE_CHECKING:  # the parameter types: named, not imported (no pydantic on the cold path; params.py)
    from typing import Annotated

    from agent_memory.edge.requests import (
        AppendRequest,
        AppName,
        Body,
        IfMatch,
        MemoRequest,
        Prefer,
        SessionId,
        UserId,
    )

app = create_app()


@app.post("/apps/<app_name>/users/<user_id>/sessions/<session_id>/events")
def append_event(
    app_name: AppName,
    user_id: UserId,
    session_id: SessionId,
    body: Annotated[AppendRequest, Body()],
    if_match: IfMatch = None,
    prefer: Prefer = None,
) -> Response[str]:
    if isinstance(body, (PlainEvent, PlainBatch)):  # the common body, read without pydantic (params.py)
        batch = isinstance(body, PlainBatch)
    else:
        from agent_memory.edge.requests import EventBatch  # loaded with the body's validation (pydantic)

        batch = isinstance(body, EventBatch)
    outcome = services().sessions.append_events(
        app_name=app_name,
        user_id=user_id,
        session_id=session_id,
        events=body.events if batch else [body],
        if_match=if_match,
        single=not batch,
    )
    # No metric: an EMF line per append was a third of its log bytes, and no alarm reads it (Lambda's Invocations
    # and the API's Count say the append rate; docs/configuration.md, LogLevel).
    headers = {"ETag": f'"{outcome.version}"'}
    events = outcome.events
    if prefer is not None and "return=minimal" in prefer.replace(" ", "").lower().split(","):
        # What a writer needs back (where each event landed), not the bodies it just sent.
        events = [{key: e[key] for key in ("id", "seq", "timestamp") if key in e} for e in events]
        headers["Preference-Applied"] = "return=minimal"
    payload = {"events": events} if batch else events[0]
    return json_response(201 if outcome.created else 200, payload, headers)


@app.put("/apps/<app_name>/users/<user_id>/sessions/<session_id>/memo")
def put_memo(
    app_name: AppName, user_id: UserId, session_id: SessionId, body: Annotated[MemoRequest, Body()]
) -> Response[str]:
    memo = SessionTransfer(services().sessions.store).put_memo(app_name, user_id, session_id, body.memo)
    return json_response(200, memo)


lambda_handler = lambda_entry(app)
