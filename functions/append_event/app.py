"""POST /apps/{app_name}/users/{user_id}/sessions/{session_id}/events: append one event or a batch."""

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.metrics import MetricUnit

from agent_memory.api import create_app, json_body, json_response, lambda_entry, metrics
from agent_memory.service.sessions import default_session_service

app = create_app()


@app.post("/apps/<app_name>/users/<user_id>/sessions/<session_id>/events")
def append_event(app_name: str, user_id: str, session_id: str) -> Response[str]:
    outcome = default_session_service().append_events(
        app_name, user_id, session_id, json_body(app), app.current_event.headers.get("if-match")
    )
    metrics.add_metric(name="EventsAppended", unit=MetricUnit.Count, value=len(outcome.events))
    body = {"events": outcome.events} if outcome.batch else outcome.events[0]
    return json_response(201 if outcome.created else 200, body, {"ETag": f'"{outcome.version}"'})


lambda_handler = lambda_entry(app)
