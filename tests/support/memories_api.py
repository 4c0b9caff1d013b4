"""The long-term memory routes through the in-process API: save and search a user's memories."""

from __future__ import annotations

from typing import Any

from tests.support.api import Api

BASE = "/apps/app/users/alice/memories"


def save(api: Api, body: Any, user: str = "alice") -> Any:
    return api.request("POST", f"/apps/app/users/{user}/memories", json_body=body)


def search(api: Api, query: str, user: str = "alice", **extra: Any) -> Any:
    reply = api.request("POST", f"/apps/app/users/{user}/memories/search", json_body={"query": query, **extra})
    assert reply.status == 200, reply.body
    return reply.body["memories"]
