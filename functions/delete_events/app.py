"""DELETE /apps/{app_name}/users/{user_id}/sessions/{session_id}/events[/{event_id}]: delete one event (with its
tool-call partners), clear a session's events, or rewind it (``before_seq`` / ``before_invocation_id``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_memory.composition import services
from agent_memory.edge.api import Response, create_app, json_response, lambda_entry, metrics

if TYPE_CHECKING:  # the parameter types: named, not imported (no pydantic on the cold path; params.py)
    from agent_memory.edge.requests import (
        AppName,
        BeforeInvocationId,
        BeforeSeq,
        EventId,
        IfMatch,
        Pairs,
        SessionId,
        UserId,
    )

app = create_app()


@app.delete("/apps/<app_name>/users/<user_id>/sessions/<session_id>/events/<event_id>")
def delete_event(
    app_name: AppName,
    user_id: UserId,
    session_id: SessionId,
    event_id: EventId,
    pairs: Pairs = None,
    if_match: IfMatch = None,
) -> Response[str]:
    answer = services().sessions.delete_event(
        app_name=app_name,
        user_id=user_id,
        session_id=session_id,
        event_id=event_id,
        pairs=pairs,
        if_match=if_match,
        forget=services().memories.forget_events,
    )
    metrics.add_metric(name="EventsDeleted", unit="Count", value=len(answer["deleted"]))
    return json_response(200, answer, {"ETag": f'"{answer["version"]}"'})


@app.delete("/apps/<app_name>/users/<user_id>/sessions/<session_id>/events")
def clear_events(
    app_name: AppName,
    user_id: UserId,
    session_id: SessionId,
    before_seq: BeforeSeq = None,
    before_invocation_id: BeforeInvocationId = None,
    if_match: IfMatch = None,
) -> Response[str]:
    answer = services().sessions.clear_events(
        app_name=app_name,
        user_id=user_id,
        session_id=session_id,
        before_seq=before_seq,
        before_invocation_id=before_invocation_id,
        if_match=if_match,
        forget=services().memories.forget_events,
    )
    metrics.add_metric(name="EventsDeleted", unit="Count", value=answer["deleted"])
    return json_response(200, answer, {"ETag": f'"{answer["version"]}"'})


lambda_handler = lambda_entry(app)
