"""POST /apps/{app_name}/users/{user_id}/sessions: get-or-create a session; with ``If-None-Match: *`` create only
(an existing id answers 409 ``already_exists``)."""

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.metrics import MetricUnit

from agent_memory.api import create_app, json_response, lambda_entry, metrics
from agent_memory.composition import services
from agent_memory.requests import AppName, CreateSessionRequest, IfNoneMatch, UserId

app = create_app()


@app.post("/apps/<app_name>/users/<user_id>/sessions")
def create_session(
    app_name: AppName,
    user_id: UserId,
    body: Annotated[CreateSessionRequest | None, Body()] = None,
    if_none_match: IfNoneMatch = None,
) -> Response[str]:
    request = body or CreateSessionRequest()
    session, created = services().sessions.create_session(
        app_name=app_name,
        user_id=user_id,
        session_id=request.session_id,
        state=request.state,
        if_none_match=if_none_match,
    )
    metrics.add_metric(name="SessionsCreated", unit=MetricUnit.Count, value=int(created))
    return json_response(201 if created else 200, session, {"ETag": f'"{session["version"]}"'})


lambda_handler = lambda_entry(app)
