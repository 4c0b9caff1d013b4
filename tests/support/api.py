"""The HTTP API in-process: requests become API Gateway HTTP API events routed by template.yaml to the real
handlers (``local.server.LocalApi``), and the replies they answer."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from local.server import LocalApi
from local.template import load_template


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    raw: bytes

    @property
    def body(self) -> Any:
        return json.loads(self.raw) if self.raw else None

    @property
    def error(self) -> dict[str, Any]:
        body = self.body
        assert isinstance(body, dict) and set(body) == {"error"}, body
        error: dict[str, Any] = body["error"]
        assert {"code", "message"} <= set(error)
        return error


class Api:
    def __init__(self) -> None:
        self._api = LocalApi(load_template())

    def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        raw: bytes | str | None = None,
        query: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        body = raw if raw is not None else (None if json_body is None else json.dumps(json_body))
        target = path + ("?" + urlencode(query) if query else "")
        status, out_headers, payload = self._api.handle(
            method, target, headers or {}, body.encode() if isinstance(body, str) else body
        )
        return Reply(status, out_headers, payload)

    # Shortcuts for the contract's routes.
    def create(self, app: str = "app", user: str = "alice", **body: Any) -> Reply:
        return self.request("POST", f"/apps/{app}/users/{user}/sessions", json_body=body or None)

    def get(self, sid: str, app: str = "app", user: str = "alice", **query: Any) -> Reply:
        return self.request("GET", f"/apps/{app}/users/{user}/sessions/{sid}", query=query or None)

    def append(
        self, sid: str, body: Any, app: str = "app", user: str = "alice", headers: dict[str, str] | None = None
    ) -> Reply:
        return self.request("POST", f"/apps/{app}/users/{user}/sessions/{sid}/events", json_body=body, headers=headers)


def text_event(text: str, author: str = "user", **extra: Any) -> dict[str, Any]:
    role = "user" if author == "user" else "model"
    return {"author": author, "content": {"role": role, "parts": [{"text": text}]}, **extra}
