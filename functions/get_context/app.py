"""GET /apps/{app_name}/users/{user_id}/sessions/{session_id}/context: the messages to send a model next.

A context whose response would pass the response cap answers 413 ``response_too_large`` naming ``max_chars``.
"""

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Query

from agent_memory.api import create_app, json_response, lambda_entry
from agent_memory.composition import services
from agent_memory.policy.context import ContextOptions
from agent_memory.requests import AppName, Budget, ContextFormat, SessionId, UserId

app = create_app()


@app.get("/apps/<app_name>/users/<user_id>/sessions/<session_id>/context")
def get_context(
    app_name: AppName,
    user_id: UserId,
    session_id: SessionId,
    format: ContextFormat = "openai",
    max_tokens: Budget = None,
    max_messages: Budget = None,
    max_chars: Budget = None,
    keep_first: Annotated[bool, Query()] = False,
    start_with_user: Annotated[bool, Query()] = False,
    include_summary: Annotated[bool, Query()] = True,
) -> Response[str]:
    options = ContextOptions(
        format=format,
        max_tokens=max_tokens,
        max_messages=max_messages,
        max_chars=max_chars,
        keep_first=keep_first,
        start_with_user=start_with_user,
        include_summary=include_summary,
    )
    context = services().context.get_context(app_name, user_id, session_id, options)
    return json_response(
        200,
        context,
        too_large_field="max_chars",
        too_large_hint="pass max_chars or max_tokens to bound the context",
    )


lambda_handler = lambda_entry(app)
