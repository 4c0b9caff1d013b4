"""GET /apps/{app_name}/users/{user_id}/sessions/{session_id}/context: the messages to send a model next.

A context whose response would pass the response cap answers 413 ``response_too_large`` naming ``max_chars``.

``system`` may be repeated. API Gateway's payload 2.0 joins a repeated parameter's values with commas in
``queryStringParameters`` (and Powertools splits them on every comma again), so a system message holding a comma
would come apart: its values are read from ``rawQueryString``, which keeps each one whole.
"""

from typing import Annotated
from urllib.parse import parse_qs

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Query

from agent_memory.api import create_app, json_response, lambda_entry
from agent_memory.composition import services
from agent_memory.policy.context import ContextOptions
from agent_memory.requests import (
    AppName,
    Budget,
    ContextFormat,
    MemoryCount,
    MemoryMinScore,
    MemoryQuery,
    SessionId,
    SystemMessages,
    UserId,
    WithProfile,
)

app = create_app()


def _system_values(validated: list[str] | None) -> tuple[str, ...]:
    """Each ``system`` value as the client sent it (see the module's docstring)."""
    if not validated:
        return ()
    raw = app.current_event.raw_query_string
    if raw:
        return tuple(parse_qs(raw, keep_blank_values=True).get("system", []))
    # An event without the raw string (built by hand): the one value API Gateway gives, commas and all.
    return (str((app.current_event.query_string_parameters or {}).get("system", "")),)


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
    system: SystemMessages = None,
    memories: MemoryCount = None,
    memory_query: MemoryQuery = None,
    memory_min_score: MemoryMinScore = None,
    profile: WithProfile = False,
) -> Response[str]:
    options = ContextOptions(
        format=format,
        max_tokens=max_tokens,
        max_messages=max_messages,
        max_chars=max_chars,
        keep_first=keep_first,
        start_with_user=start_with_user,
        include_summary=include_summary,
        system=_system_values(system),
        memories=memories or 0,
        memory_query=memory_query,
        memory_min_score=memory_min_score,
        profile=profile,
    )
    context = services().context.get_context(app_name, user_id, session_id, options)
    return json_response(
        200,
        context,
        too_large_field="max_chars",
        too_large_hint="pass max_chars or max_tokens to bound the context",
    )


lambda_handler = lambda_entry(app)
