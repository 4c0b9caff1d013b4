"""POST /apps/{app_name}/users/{user_id}/sessions: get-or-create a session."""

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.metrics import MetricUnit

from agent_memory.api import create_app, json_body, json_response, lambda_entry, metrics
from agent_memory.service.sessions import default_session_service

app = create_app()


@app.post("/apps/<app_name>/users/<user_id>/sessions")
def create_session(app_name: str, user_id: str) -> Response[str]:
    session, created = default_session_service().create_session(app_name, user_id, json_body(app))
    metrics.add_metric(name="SessionsCreated", unit=MetricUnit.Count, value=int(created))
    return json_response(201 if created else 200, session, {"ETag": f'"{session["version"]}"'})


lambda_handler = lambda_entry(app)
