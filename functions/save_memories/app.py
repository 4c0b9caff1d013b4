"""POST /apps/{app_name}/users/{user_id}/memories: save a session's events by policy, explicit events, or texts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_memory.composition import services
from agent_memory.edge.api import Response, create_app, json_response, lambda_entry, metrics

if TYPE_CHECKING:  # the parameter types: named, not imported (no pydantic on the cold path; params.py)
    from typing import Annotated

    from agent_memory.edge.requests import AppName, Body, SaveMemoriesRequest, UserId

app = create_app()


@app.post("/apps/<app_name>/users/<user_id>/memories")
def save_memories(app_name: AppName, user_id: UserId, body: Annotated[SaveMemoriesRequest, Body()]) -> Response[str]:
    # the body's shape by its fields: a plain body is params.py's reading of it, not a pydantic model (the cold path)
    service = services().memories
    if hasattr(body, "memories"):  # SaveTextsRequest
        result = service.add_texts(app_name=app_name, user_id=user_id, memories=body.memories)
    elif hasattr(body, "events"):  # SaveEventsRequest
        result = service.add_events(
            app_name=app_name, user_id=user_id, events=body.events, session_id=body.session_id, policy=body.policy
        )
    else:
        result = service.save_session(
            app_name=app_name, user_id=user_id, session_id=body.session_id, policy=body.policy
        )
    metrics.add_metric(name="MemoriesSaved", unit="Count", value=result["saved"])
    return json_response(200, result)


lambda_handler = lambda_entry(app)
