"""Helpers shared by the client's tests: scripted transports, and one way to call either client."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

import httpx

from agent_memory_client import AsyncClient, Client

Reply = httpx.Response | Callable[[httpx.Request], httpx.Response] | type[httpx.TransportError]


def answer(status: int, body: Any = None, headers: dict[str, str] | None = None) -> httpx.Response:
    """A JSON answer (``body`` None: an empty one)."""
    content = b"" if body is None else json.dumps(body).encode()
    return httpx.Response(status, content=content, headers={"content-type": "application/json", **(headers or {})})


def session_json(
    session_id: str = "s1", version: int = 0, events: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {
        "id": session_id,
        "app_name": "app",
        "user_id": "u",
        "state": {},
        "events": events or [],
        "create_time": 1.0,
        "last_update_time": 1.0,
        "version": version,
        "next_token": None,
    }


class Script:
    """A transport handler answering from a script: a response, a function of the request, or a transport error
    class (raised for that attempt). Records every request it receives."""

    def __init__(self, *replies: Reply) -> None:
        self.replies = list(replies)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if not self.replies:
            raise AssertionError(f"unexpected request {request.method} {request.url}")
        reply = self.replies.pop(0)
        if isinstance(reply, type) and issubclass(reply, httpx.TransportError):
            raise reply("scripted", request=request)
        if isinstance(reply, httpx.Response):
            return reply
        return reply(request)

    def bodies(self) -> list[Any]:
        return [json.loads(r.content) if r.content else None for r in self.requests]


class Driver:
    """Either client behind one awaitable interface, its sleeps recorded instead of slept."""

    def __init__(self, kind: str, base_url: str, **kwargs: Any) -> None:
        self.kind = kind
        self.sleeps: list[float] = []
        if kind == "sync":
            self.client: Client | AsyncClient = Client(base_url, **kwargs)
            self.client._sleep = self.sleeps.append
        else:
            self.client = AsyncClient(base_url, **kwargs)

            async def sleep(seconds: float) -> None:
                self.sleeps.append(seconds)

            self.client._sleep = sleep

    async def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        result = getattr(self.client, method)(*args, **kwargs)
        return await result if inspect.isawaitable(result) else result

    async def close(self) -> None:
        await self.call("close")


def mocked(kind: str, script: Script, **kwargs: Any) -> Driver:
    """A driver over ``script`` (no network), its random draws fixed at 1.0 (the top of each jitter range)."""
    driver = Driver(kind, "https://api.example.test", auth="none", transport=httpx.MockTransport(script), **kwargs)
    driver.client._core.random = lambda: 1.0
    return driver
