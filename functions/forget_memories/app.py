"""DELETE /apps/{app_name}/users/{user_id}/memories[/{memory_id}]: forget one memory, or all of the user's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_memory.composition import services
from agent_memory.edge.api import Response, create_app, json_response, lambda_entry

if TYPE_CHECKING:  # the parameter types: named, not imported (no pydantic on the cold path; params.py)
    from agent_memory.edge.requests import AppName, MemoryId, UserId

app = create_app()


@app.delete("/apps/<app_name>/users/<user_id>/memories/<memory_id>")
def forget_one(app_name: AppName, user_id: UserId, memory_id: MemoryId) -> Response[str]:
    services().memories.forget(app_name, user_id, memory_id)
    return json_response(204)


@app.delete("/apps/<app_name>/users/<user_id>/memories")
def forget_all(app_name: AppName, user_id: UserId) -> Response[str]:
    services().memories.forget_all(app_name, user_id)
    return json_response(204)


lambda_handler = lambda_entry(app)
