"""GET or POST /apps/{app_name}/users/{user_id}/memories/search: hybrid search of the user's memories."""

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Query

from agent_memory.api import create_app, json_body, json_response, lambda_entry
from agent_memory.service.memories import default_memory_service

app = create_app()


@app.get("/apps/<app_name>/users/<user_id>/memories/search")
def search_get(
    app_name: str,
    user_id: str,
    query: Annotated[str | None, Query()] = None,
    top_k: Annotated[int | None, Query()] = None,
) -> Response[str]:
    return json_response(200, default_memory_service().search(app_name, user_id, query, top_k))


@app.post("/apps/<app_name>/users/<user_id>/memories/search")
def search_post(app_name: str, user_id: str) -> Response[str]:
    return json_response(200, default_memory_service().search_body(app_name, user_id, json_body(app)))


lambda_handler = lambda_entry(app)
