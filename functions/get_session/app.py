"""GET /apps/{app_name}/users/{user_id}/sessions/{session_id}: a session with one page of its events and merged state.

Pages: ``limit`` (1-1000 events) and ``next_token`` (from the previous page); every page also stops before the
response would pass the response cap, so a request without paging parameters may answer a first page and a
``next_token`` (see the README's Limits).
"""

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Query
from pydantic import BeforeValidator

from agent_memory.api import create_app, json_response, lambda_entry
from agent_memory.service.sessions import MAX_EVENT_PAGE, default_session_service

app = create_app()


def _digits(value: Any) -> Any:
    # "1.0" or "+5" name no page size: only plain digits parse as a number of events.
    if isinstance(value, str) and not (value.isascii() and value.isdigit()):
        raise ValueError("must be a whole number written in digits")
    return value


@app.get("/apps/<app_name>/users/<user_id>/sessions/<session_id>")
def get_session(
    app_name: str,
    user_id: str,
    session_id: str,
    num_recent_events: Annotated[int | None, BeforeValidator(_digits), Query(ge=0)] = None,
    after_timestamp: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int | None, BeforeValidator(_digits), Query(ge=1, le=MAX_EVENT_PAGE)] = None,
    next_token: Annotated[str | None, Query(min_length=1, max_length=1024)] = None,
) -> Response[str]:
    session = default_session_service().get_session(
        app_name, user_id, session_id, num_recent_events, after_timestamp, limit, next_token
    )
    return json_response(200, session, {"ETag": f'"{session["version"]}"'})


lambda_handler = lambda_entry(app)
