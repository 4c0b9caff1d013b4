"""GET or POST /apps/{app_name}/users/{user_id}/memories/search: hybrid search of the user's memories."""

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body

from agent_memory.api import create_app, json_response, lambda_entry
from agent_memory.composition import services
from agent_memory.requests import AppName, SearchQuery, SearchRequest, TopK, UserId
from agent_memory.service.memories import DEFAULT_TOP_K

app = create_app()


@app.get("/apps/<app_name>/users/<user_id>/memories/search")
def search_get(app_name: AppName, user_id: UserId, query: SearchQuery, top_k: TopK = None) -> Response[str]:
    result = services().memories.search(
        app_name=app_name, user_id=user_id, query=query, top_k=DEFAULT_TOP_K if top_k is None else top_k
    )
    return json_response(200, result)


@app.post("/apps/<app_name>/users/<user_id>/memories/search")
def search_post(app_name: AppName, user_id: UserId, body: Annotated[SearchRequest, Body()]) -> Response[str]:
    result = services().memories.search(app_name=app_name, user_id=user_id, query=body.query, top_k=body.top_k)
    return json_response(200, result)


lambda_handler = lambda_entry(app)
