"""GET /apps/{app_name}/users/{user_id}/sessions/{session_id}: a session with its events and merged state."""

from aws_lambda_powertools.event_handler import Response

from agent_memory.api import create_app, json_response, lambda_entry
from agent_memory.requests import AfterTimestamp, AppName, NumRecentEvents, SessionId, UserId
from agent_memory.service.sessions import default_session_service

app = create_app()


@app.get("/apps/<app_name>/users/<user_id>/sessions/<session_id>")
def get_session(
    app_name: AppName,
    user_id: UserId,
    session_id: SessionId,
    num_recent_events: NumRecentEvents = None,
    after_timestamp: AfterTimestamp = None,
) -> Response[str]:
    session = default_session_service().get_session(app_name, user_id, session_id, num_recent_events, after_timestamp)
    return json_response(200, session, {"ETag": f'"{session["version"]}"'})


lambda_handler = lambda_entry(app)
