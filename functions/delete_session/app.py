"""DELETE /apps/{app_name}/users/{user_id}/sessions/{session_id}: remove a session and all it stored."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_memory.composition import services
from agent_memory.edge.api import Response, create_app, json_response, lambda_entry

if TYPE_CHECKING:  # the parameter types: named, not imported (no pydantic on the cold path; params.py)
    from agent_memory.edge.requests import AppName, SessionId, UserId

app = create_app()


@app.delete("/apps/<app_name>/users/<user_id>/sessions/<session_id>")
def delete_session(app_name: AppName, user_id: UserId, session_id: SessionId) -> Response[str]:
    services().sessions.delete_session(app_name, user_id, session_id)
    return json_response(204)


lambda_handler = lambda_entry(app)
