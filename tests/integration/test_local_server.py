"""`make run` end to end: the local server in its own process, spoken to over real HTTP."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from local.server import free_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "local.server", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                httpx.get(f"{url}/apps/probe/users/u/sessions", timeout=1)
                break
            except httpx.TransportError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    output = proc.stdout.read() if proc.stdout else ""
                    raise RuntimeError(f"local server did not start:\n{output}") from None
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_local_server_serves_the_session_lifecycle(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=10) as http:
        created = http.post("/apps/demo/users/alice/sessions", json={"session_id": "trip", "state": {"user:n": 1}})
        assert created.status_code == 201 and created.json()["created"] is True
        appended = http.post(
            "/apps/demo/users/alice/sessions/trip/events",
            json={"role": "user", "content": "Book Lisbon", "turn_id": "t1"},
        )
        assert appended.status_code == 201 and appended.json()["seq"] == 1
        got = http.get("/apps/demo/users/alice/sessions/trip")
        assert got.status_code == 200 and got.headers["etag"] == '"1"'
        assert got.json()["events"][0]["content"]["parts"][0]["text"] == "Book Lisbon"
        assert http.get("/apps/demo/users/alice/sessions").json()["sessions"][0]["id"] == "trip"
        assert http.delete("/apps/demo/users/alice/sessions/trip").status_code == 204
        assert http.get("/apps/demo/users/alice/sessions/trip").status_code == 404


def test_local_server_answers_json_errors(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=10) as http:
        bad = http.post(
            "/apps/demo/users/alice/sessions", content=b"{nope", headers={"content-type": "application/json"}
        )
        assert bad.status_code == 400 and bad.json()["error"]["field"] == "body"
        unknown = http.get("/nowhere")
        assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "route_not_found"
        wrong_method = http.put("/apps/demo/users/alice/sessions")
        assert wrong_method.status_code == 405
