"""POST /apps/{app_name}/users/{user_id}/sessions: get-or-create a session; with ``If-None-Match: *`` create only
(an existing id answers 409 ``already_exists``);
POST …/sessions/import: store a session exported by ``GET …/export`` (JSON, or YAML with
``Content-Type: application/yaml``), under the document's id or ``?session_id=``; ``?replace=true`` replaces an
existing one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_memory.composition import services
from agent_memory.edge.api import Response, create_app, json_response, lambda_entry, metrics
from agent_memory.edge.params import NewSession
from agent_memory.service.transfer import SessionTransfer

if TYPE_CHECKING:  # the parameter types: named, not imported (no pydantic on the cold path; params.py)
    from typing import Annotated

    from agent_memory.edge.requests import (
        AppName,
        Body,
        CreateSessionRequest,
        IfNoneMatch,
        ImportSessionId,
        Replace,
        SessionDocument,
        UserId,
    )

app = create_app()


@app.post("/apps/<app_name>/users/<user_id>/sessions")
def create_session(
    app_name: AppName,
    user_id: UserId,
    body: Annotated[CreateSessionRequest | None, Body()] = None,
    if_none_match: IfNoneMatch = None,
) -> Response[str]:
    request = body if body is not None else NewSession(None, None)  # no body: CreateSessionRequest's defaults
    session, created = services().sessions.create_session(
        app_name=app_name,
        user_id=user_id,
        session_id=request.session_id,
        state=request.state,
        if_none_match=if_none_match,
    )
    metrics.add_metric(name="SessionsCreated", unit="Count", value=int(created))
    return json_response(201 if created else 200, session, {"ETag": f'"{session["version"]}"'})


@app.post("/apps/<app_name>/users/<user_id>/sessions/import")
def import_session(
    app_name: AppName,
    user_id: UserId,
    body: Annotated[SessionDocument, Body()],
    session_id: ImportSessionId = None,
    replace: Replace = False,
) -> Response[str]:
    session = SessionTransfer(services().sessions.store).import_session(
        app_name, user_id, body, session_id=session_id, replace=replace
    )
    metrics.add_metric(name="SessionsImported", unit="Count", value=1)
    return json_response(201, session, {"ETag": f'"{session["version"]}"'})


lambda_handler = lambda_entry(app)
