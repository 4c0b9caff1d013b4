"""POST /apps/{app_name}/users/{user_id}/sessions/{session_id}/compact: compact a session now."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_memory.composition import services
from agent_memory.config import settings
from agent_memory.edge.api import Response, create_app, json_response, lambda_entry, metrics

if TYPE_CHECKING:  # the parameter types: named, not imported (no pydantic on the cold path; params.py)
    from agent_memory.edge.requests import AppName, SessionId, UserId

settings()  # start-up check: a prompt template without {conversation_history} stops the function here

app = create_app()


@app.post("/apps/<app_name>/users/<user_id>/sessions/<session_id>/compact")
def compact_session(app_name: AppName, user_id: UserId, session_id: SessionId) -> Response[str]:
    outcome = services().compaction.compact(app_name, user_id, session_id)
    metrics.add_metric(name="Compactions", unit="Count", value=int(outcome.compacted))
    return json_response(200, outcome.body())


lambda_handler = lambda_entry(app)
