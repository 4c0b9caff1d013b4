"""GET /apps/{app_name}/users/{user_id}/sessions/{session_id}: a session with one page of its events and merged state;
GET /apps/{app_name}/users/{user_id}/state and GET /apps/{app_name}/state: the user's and the app's state (keys with
their ``user:`` / ``app:`` prefix; ``{}`` when none, never 404);
GET …/sessions/{session_id}/events: events by id (``id=``, repeated) or a page of an id prefix's (``id_prefix``,
``after_id``, ``order``, ``limit``);
GET …/sessions/{session_id}/export: the whole session as one document (``?format=json|yaml``), or in pages
(``limit``, ``next_token``);
GET …/sessions/{session_id}/memo: the session's memo.

Pages: ``limit`` (1-1000 events) and ``next_token`` (from the previous page); every page also stops before the
response would pass the response cap, so a request without paging parameters may answer a first page and a
``next_token`` (docs/api.md, Limits).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_memory.composition import services
from agent_memory.edge.api import Response, create_app, json_response, lambda_entry, yaml_response
from agent_memory.service.transfer import SessionTransfer

if TYPE_CHECKING:  # the parameter types: named, not imported (no pydantic on the cold path; params.py)
    from agent_memory.edge.requests import (
        AfterId,
        AfterSummary,
        AfterTimestamp,
        AppName,
        EventIds,
        EventPageLimit,
        ExportFormat,
        IdOrder,
        IdPrefix,
        NextToken,
        NumRecentEvents,
        SessionId,
        UserId,
    )

app = create_app()


@app.get("/apps/<app_name>/users/<user_id>/sessions/<session_id>")
def get_session(
    app_name: AppName,
    user_id: UserId,
    session_id: SessionId,
    num_recent_events: NumRecentEvents = None,
    after_timestamp: AfterTimestamp = None,
    limit: EventPageLimit = None,
    next_token: NextToken = None,
    after_summary: AfterSummary = False,
) -> Response[str]:
    session = services().sessions.get_session(
        app_name, user_id, session_id, num_recent_events, after_timestamp, limit, next_token, after_summary
    )
    return json_response(200, session, {"ETag": f'"{session["version"]}"'})


@app.get("/apps/<app_name>/users/<user_id>/sessions/<session_id>/events")
def get_events(
    app_name: AppName,
    user_id: UserId,
    session_id: SessionId,
    id: EventIds = None,
    id_prefix: IdPrefix = None,
    after_id: AfterId = None,
    order: IdOrder = None,
    limit: EventPageLimit = None,
) -> Response[str]:
    answer = services().sessions.get_events(app_name, user_id, session_id, id, id_prefix, after_id, order, limit)
    return json_response(200, answer)


@app.get("/apps/<app_name>/users/<user_id>/state")
def get_user_state(app_name: AppName, user_id: UserId) -> Response[str]:
    return json_response(200, services().sessions.get_user_state(app_name, user_id))


@app.get("/apps/<app_name>/state")
def get_app_state(app_name: AppName) -> Response[str]:
    return json_response(200, services().sessions.get_app_state(app_name))


@app.get("/apps/<app_name>/users/<user_id>/sessions/<session_id>/export")
def export_session(
    app_name: AppName,
    user_id: UserId,
    session_id: SessionId,
    format: ExportFormat = "json",
    limit: EventPageLimit = None,
    next_token: NextToken = None,
) -> Response[str]:
    document = SessionTransfer(services().sessions.store).export_session(
        app_name, user_id, session_id, limit, next_token
    )
    etag = {"ETag": f'"{document["version"]}"'}
    if format == "yaml":
        from agent_memory.wire.yamlio import dump_yaml  # PyYAML only for the export that asks for it

        return yaml_response(200, dump_yaml(document), etag)
    return json_response(200, document, etag)


@app.get("/apps/<app_name>/users/<user_id>/sessions/<session_id>/memo")
def get_memo(app_name: AppName, user_id: UserId, session_id: SessionId) -> Response[str]:
    return json_response(200, SessionTransfer(services().sessions.store).get_memo(app_name, user_id, session_id))


lambda_handler = lambda_entry(app)
