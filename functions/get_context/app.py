"""GET /apps/{app_name}/users/{user_id}/sessions/{session_id}/context: the messages to send a model next.

POST to the same path takes the same parameters as a JSON body (``ContextRequest``): a long base system prompt does
not fit in a URL (API Gateway's HTTP API takes at most 10240 bytes of request line and headers together). It reads
only, like the GET.

A context whose response would pass the response cap answers 413 ``response_too_large`` naming ``max_chars``.

``system`` may be repeated. API Gateway's payload 2.0 joins a repeated parameter's values with commas in
``queryStringParameters`` (and Powertools splits them on every comma again), so a system message holding a comma
would come apart: its values are read from ``rawQueryString``, which keeps each one whole.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import parse_qs

from agent_memory.composition import services
from agent_memory.edge.api import Response, create_app, json_response, lambda_entry
from agent_memory.errors import InvalidInput, UnprocessableInput
from agent_memory.policy.context import ContextOptions

if TYPE_CHECKING:  # the parameter types: named, not imported (no pydantic on the cold path; params.py)
    from typing import Annotated

    from agent_memory.edge.requests import (
        AppName,
        Body,
        Budget,
        ContextFormat,
        ContextRequest,
        Flag,
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
    keep_first: Flag = False,
    start_with_user: Flag = False,
    include_summary: Flag = True,
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
    return _context(app_name, user_id, session_id, options)


@app.post("/apps/<app_name>/users/<user_id>/sessions/<session_id>/context")
def post_context(
    app_name: AppName,
    user_id: UserId,
    session_id: SessionId,
    body: Annotated[ContextRequest | None, Body()] = None,
) -> Response[str]:
    if body is None:
        from agent_memory.edge.requests import ContextRequest  # no body: the defaults

        body = ContextRequest()
    request = body
    try:
        options = ContextOptions(**{**request.model_dump(), "system": tuple(request.system)})
    except InvalidInput as exc:  # a body's content that does not validate: 422, as the body model's own errors
        raise UnprocessableInput(exc.message, field=exc.field) from None
    return _context(app_name, user_id, session_id, options)


def _context(app_name: str, user_id: str, session_id: str, options: ContextOptions) -> Response[str]:
    context = services().context.get_context(app_name, user_id, session_id, options)
    return json_response(
        200,
        context,
        too_large_field="max_chars",
        too_large_hint="pass max_chars or max_tokens to bound the context",
    )


lambda_handler = lambda_entry(app)
