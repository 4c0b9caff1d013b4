"""Smoke test of a running API: the README's quick-start flow, step by step, against a URL.

    make smoke API_URL=https://abc123.execute-api.eu-west-1.amazonaws.com
    .venv/bin/python -m local.smoke --url http://127.0.0.1:3000      (make run)

Requests to an ``execute-api`` URL are signed with SigV4 (service ``execute-api``) with the credentials of the
standard AWS chain (environment, profile, SSO, instance role …), the region taken from the URL (else
``AWS_REGION`` / ``AWS_DEFAULT_REGION``); any other URL is called unsigned. Every run works in a user of its own
(``smoke-<random>``) and deletes what it made: the session, then the user's long-term memories. Stops at the
first step that does not answer as expected, with the step, status and body, and exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

# {api id}.execute-api.{region}.amazonaws.com (or .amazonaws.com.cn)
_EXECUTE_API_HOST = re.compile(r"^[a-z0-9]+\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$")
APP = "smoke"


class SmokeFailure(Exception):
    """A step answered something else than the flow expects."""


def execute_api_region(url: str) -> str | None:
    """The region of an ``execute-api`` URL, or None for any other host (``make run``, a custom domain)."""
    found = _EXECUTE_API_HOST.match(urlsplit(url).hostname or "")
    return found.group(1) if found else None


def sign(
    method: str, url: str, body: bytes, headers: dict[str, str], region: str, credentials: Any = None
) -> dict[str, str]:
    """``headers`` plus the SigV4 ones (Authorization, X-Amz-Date, X-Amz-Security-Token for temporary
    credentials) for the service ``execute-api``; credentials from the standard chain unless given."""
    import botocore.session
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    if credentials is None:
        credentials = botocore.session.get_session().get_credentials()
        if credentials is None:
            raise SmokeFailure("no AWS credentials found to sign execute-api requests (environment, profile, role)")
    request = AWSRequest(method=method, url=url, data=body, headers=headers)
    SigV4Auth(credentials.get_frozen_credentials(), "execute-api", region).add_auth(request)
    return dict(request.headers.items())


@dataclass
class Client:
    """Sends JSON to the API under test, signed when it is an execute-api URL."""

    base_url: str
    http: httpx.Client
    region: str | None  # sign for this region; None: unsigned

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        url = self.base_url.rstrip("/") + path
        data = json.dumps(body).encode() if body is not None else b""
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.region is not None:
            headers = sign(method, url, data, headers, self.region)
        try:
            response = self.http.request(method, url, content=data or None, headers=headers)
        except httpx.HTTPError as exc:
            raise SmokeFailure(f"no answer: {type(exc).__name__}: {exc}") from exc
        try:
            answer = response.json() if response.content else None
        except ValueError:
            answer = response.text[:500]
        return response.status_code, answer


@dataclass
class Step:
    name: str
    method: str
    path: str
    body: dict[str, Any] | None
    status: int
    check: Callable[[Any], bool] = lambda _body: True


def steps(user: str, session: str) -> list[Step]:
    """The README's quick start (create, append twice, get, context, compact, save, search), then clean-up."""
    base = f"/apps/{APP}/users/{user}"
    sessions = f"{base}/sessions/{session}"
    city = {"role": "user", "parts": [{"text": "Book me a table in Lisbon"}]}
    return [
        Step(
            "create session",
            "POST",
            f"{base}/sessions",
            {"session_id": session, "state": {"user:name": "Alice"}},
            201,
            lambda b: b["id"] == session and b["state"] == {"user:name": "Alice"},
        ),
        Step(
            "append an event",
            "POST",
            f"{sessions}/events",
            {"author": "user", "content": city, "actions": {"stateDelta": {"city": "Lisbon", "temp:draft": "x"}}},
            201,
            lambda b: b["seq"] == 1,
        ),
        Step(
            "append a chat message",
            "POST",
            f"{sessions}/events",
            {"role": "assistant", "content": "Which day?", "turn_id": "t2"},
            201,
            lambda b: b["seq"] == 2,
        ),
        Step(
            "get the session",
            "GET",
            f"{sessions}?num_recent_events=10",
            None,
            200,
            lambda b: len(b["events"]) == 2 and b["state"] == {"user:name": "Alice", "city": "Lisbon"},
        ),
        Step(
            "get the context",
            "GET",
            f"{sessions}/context?max_tokens=2000",
            None,
            200,
            lambda b: [m["role"] for m in b["messages"]][-2:] == ["user", "assistant"],
        ),
        Step("compact", "POST", f"{sessions}/compact", None, 200, lambda b: isinstance(b["compacted"], bool)),
        # Deployed, auto-save may have stored the events first (then ``saved`` is 0): the search step checks.
        Step("save to memory", "POST", f"{base}/memories", {"session_id": session}, 200, lambda b: b["saved"] >= 0),
        Step(
            "search memory",
            "POST",
            f"{base}/memories/search",
            {"query": "table in Lisbon", "top_k": 5},
            200,
            lambda b: any("Lisbon" in json.dumps(hit["content"]) for hit in b["memories"]),
        ),
        Step("delete the session", "DELETE", sessions, None, 204),
        Step("the session is gone", "GET", sessions, None, 404, lambda b: b["error"]["code"] == "session_not_found"),
        Step("forget the user's memories", "DELETE", f"{base}/memories", None, 204),
    ]


def run(client: Client, out: Callable[[str], None] = print) -> None:
    """Every step in order; raises SmokeFailure at the first that answers otherwise."""
    user, session = f"smoke-{uuid.uuid4().hex[:12]}", "trip"
    flow = steps(user, session)
    for number, step in enumerate(flow, 1):
        label = f"step {number}/{len(flow)} {step.name} ({step.method} {step.path})"
        try:
            status, body = client.call(step.method, step.path, step.body)
        except SmokeFailure as exc:  # no answer at all: unreachable, timed out, no credentials
            raise SmokeFailure(f"{label}: {exc}") from exc
        if status != step.status:
            raise SmokeFailure(f"{label}: expected HTTP {step.status}, got {status}: {json.dumps(body)[:500]}")
        try:
            ok = step.check(body)
        except (KeyError, TypeError, IndexError) as exc:
            ok, body = False, {"unexpected shape": repr(exc), "body": body}
        if not ok:
            raise SmokeFailure(f"{label}: HTTP {status} but not the expected answer: {json.dumps(body)[:500]}")
        out(f"ok  {label}: {status}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m local.smoke", description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="the API's base URL (the stack's ApiUrl output, or make run's)")
    parser.add_argument("--timeout", type=float, default=35.0, help="seconds per request (API Gateway stops at 30)")
    args = parser.parse_args(argv)
    region = execute_api_region(args.url)
    if region is None and "execute-api" in args.url:
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    signing = f"SigV4 ({region})" if region else "unsigned"
    print(f"smoke test of {args.url}, {signing}")
    try:
        with httpx.Client(timeout=args.timeout) as http:
            run(Client(args.url, http, region))
    except SmokeFailure as exc:
        print(f"FAILED {exc}", file=sys.stderr)
        return 1
    print("all steps passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
