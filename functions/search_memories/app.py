"""GET or POST /apps/{app_name}/users/{user_id}/memories/search: hybrid search of the user's memories."""

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Query

from agent_memory.api import create_app, json_body, json_response, lambda_entry
from agent_memory.errors import UnprocessableInput
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
    body: Any = json_body(app)
    if not isinstance(body, dict) or set(body) - {"query", "top_k"}:
        raise UnprocessableInput("body must be {query, top_k?}", field="body")
    return json_response(200, default_memory_service().search(app_name, user_id, body.get("query"), body.get("top_k")))


lambda_handler = lambda_entry(app)
