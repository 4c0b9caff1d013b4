"""GET /apps/{app_name}/users/{user_id}/sessions: one page of the user's sessions, oldest ``last_update_time`` first;
GET /apps/{app_name}/sessions: one page of the sessions of every user of the app, by user id then session id.

Sessions come without events, each with its merged state (session, ``user:`` and ``app:`` keys). A page holds at
most ``limit`` sessions (1-100, default 20), fewer when their state would pass the response cap; ``next_token``
continues it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_memory.composition import services
from agent_memory.edge.api import Response, create_app, json_response, lambda_entry

if TYPE_CHECKING:  # the parameter types: named, not imported (no pydantic on the cold path; params.py)
    from agent_memory.edge.requests import AppName, Limit, NextToken, UserId

app = create_app()


@app.get("/apps/<app_name>/users/<user_id>/sessions")
def list_sessions(
    app_name: AppName, user_id: UserId, limit: Limit = None, next_token: NextToken = None
) -> Response[str]:
    return json_response(200, services().sessions.list_sessions(app_name, user_id, limit, next_token))


@app.get("/apps/<app_name>/sessions")
def list_app_sessions(app_name: AppName, limit: Limit = None, next_token: NextToken = None) -> Response[str]:
    return json_response(200, services().sessions.list_sessions(app_name, None, limit, next_token))


lambda_handler = lambda_entry(app)
