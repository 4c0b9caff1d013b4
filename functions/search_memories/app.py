"""GET or POST /apps/{app_name}/users/{user_id}/memories/search: hybrid search of the user's memories.

GET /apps/{app_name}/users/{user_id}/profile: the user's profile, aggregated from the same memory view.

Also GET /openapi.json: the API's OpenAPI document, generated from the route table on the first request (any
function could serve it; this one is read-only and already loads the request models).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_memory.composition import preload_embedder, services
from agent_memory.edge.api import JSON, Response, create_app, json_response, lambda_entry
from agent_memory.service.memories import DEFAULT_TOP_K

if TYPE_CHECKING:  # the parameter types: named, not imported (no pydantic on the cold path; params.py)
    from typing import Annotated

    from agent_memory.edge.requests import AppName, Body, MinScore, SearchQuery, SearchRequest, TopK, UserId

app = create_app()
# Lambda's init phase: the embedder's model (most of a second for MiniLM) loads in a background thread from here
# on, while the rest of the cold start and the first request's S3 reads go ahead; a query embedding waits for it.
preload_embedder()


@app.get("/apps/<app_name>/users/<user_id>/memories/search")
def search_get(
    app_name: AppName, user_id: UserId, query: SearchQuery, top_k: TopK = None, min_score: MinScore = None
) -> Response[str]:
    result = services().memories.search(
        app_name=app_name,
        user_id=user_id,
        query=query,
        top_k=DEFAULT_TOP_K if top_k is None else top_k,
        min_score=min_score,
    )
    return json_response(200, result)


@app.post("/apps/<app_name>/users/<user_id>/memories/search")
def search_post(app_name: AppName, user_id: UserId, body: Annotated[SearchRequest, Body()]) -> Response[str]:
    result = services().memories.search(
        app_name=app_name, user_id=user_id, query=body.query, top_k=body.top_k, min_score=body.min_score
    )
    return json_response(200, result)


@app.get("/apps/<app_name>/users/<user_id>/profile")
def get_profile(app_name: AppName, user_id: UserId) -> Response[str]:
    return json_response(200, services().memories.profile(app_name, user_id))


@app.get("/openapi.json")
def openapi() -> Response[str]:
    from agent_memory.edge.openapi import document_json  # built on the first request only

    return Response(status_code=200, content_type=JSON, body=document_json())


lambda_handler = lambda_entry(app)
