"""POST /apps/{app_name}/users/{user_id}/memories: save a session's events by policy, or texts directly."""

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.metrics import MetricUnit

from agent_memory.api import create_app, json_body, json_response, lambda_entry, metrics
from agent_memory.service.memories import default_memory_service

app = create_app()


@app.post("/apps/<app_name>/users/<user_id>/memories")
def save_memories(app_name: str, user_id: str) -> Response[str]:
    result = default_memory_service().save(app_name, user_id, json_body(app))
    metrics.add_metric(name="MemoriesSaved", unit=MetricUnit.Count, value=result["saved"])
    return json_response(200, result)


lambda_handler = lambda_entry(app)
