"""Client overhead per call against `make run`: the SDK vs raw httpx doing the same requests, in the same process.

    .venv-client/bin/python bench/perf/client_overhead.py [--url URL] [--calls 300] [--rounds 5]

(run by the client's environment, which has the SDK's dependencies; `make test` builds it.)

Without --url it starts `make run` (embedded backend) the way the tests do. Both sides use one pooled
connection, send the same bytes and parse the JSON answer; the SDK also validates it into pydantic models,
assigns event ids, signs nothing (local server) and runs its retry loop. Rounds alternate which side goes first;
the medians of the per-round means are reported, with the ratio and the difference per call. A second table runs
both sides over httpx.MockTransport (no server, no socket): the SDK's own CPU cost per call.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "python"
sys.path[:0] = [str(CLIENT / "src"), str(CLIENT / "tests")]

from agent_memory_client import Client  # noqa: E402


def event(text: str) -> dict[str, Any]:
    return {"author": "user", "content": {"role": "user", "parts": [{"text": text}]}}


class Pair:
    """The same operations done by raw httpx and by the SDK."""

    def __init__(self, url: str, transport: httpx.BaseTransport | None = None, sigv4: bool = False) -> None:
        self.raw = httpx.Client(base_url=url, transport=transport, timeout=10)
        if sigv4:  # the SDK signs every request (fixed credentials); raw httpx does not
            from botocore.credentials import Credentials

            self.sdk = Client(
                url, transport=transport, auth="sigv4", region="eu-west-1", credentials=Credentials("AKID", "SECRET")
            )
        else:
            self.sdk = Client(url, transport=transport, auth="none")
        self.app = f"bench-{uuid.uuid4().hex[:8]}"
        self.session = self.sdk.create_session(self.app, "u").id
        self.sdk.append_events(self.app, "u", self.session, [event(f"message {i} " * 10) for i in range(20)])
        self.base = f"/apps/{self.app}/users/u/sessions/{self.session}"

    def operations(self) -> dict[str, tuple[Callable[[], Any], Callable[[], Any]]]:
        def raw_get() -> Any:
            response = self.raw.get(self.base)
            response.raise_for_status()
            return response.json()

        def raw_append() -> Any:
            body = json.dumps(event("hello") | {"id": str(uuid.uuid4())}).encode()
            response = self.raw.post(f"{self.base}/events", content=body, headers={"Content-Type": "application/json"})
            response.raise_for_status()
            return response.json()

        def raw_list() -> Any:
            response = self.raw.get(f"/apps/{self.app}/users/u/sessions")
            response.raise_for_status()
            return response.json()

        return {
            "get_session (20+ events)": (raw_get, lambda: self.sdk.get_session(self.app, "u", self.session)),
            "append_event": (raw_append, lambda: self.sdk.append_event(self.app, "u", self.session, event("hello"))),
            "list_sessions": (raw_list, lambda: self.sdk.list_sessions(self.app, "u")),
        }

    def close(self) -> None:
        self.raw.close()
        self.sdk.close()


def per_call(fn: Callable[[], Any], calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - started) / calls


def measure(pair: Pair, calls: int, rounds: int) -> list[tuple[str, float, float]]:
    rows = []
    for name, (raw, sdk) in pair.operations().items():
        raw(), sdk()  # warm: connections, imports, caches
        raw_times: list[float] = []
        sdk_times: list[float] = []
        for r in range(rounds):
            order = [(raw, raw_times), (sdk, sdk_times)]
            for fn, times in order if r % 2 == 0 else order[::-1]:
                times.append(per_call(fn, calls))
        rows.append((name, statistics.median(raw_times), statistics.median(sdk_times)))
    return rows


def report(title: str, rows: list[tuple[str, float, float]]) -> None:
    print(f"\n{title}")
    print(f"{'operation':<26} {'raw httpx':>11} {'client':>11} {'ratio':>7} {'overhead':>10}")
    for name, raw, sdk in rows:
        print(f"{name:<26} {raw * 1e6:>9.0f}µs {sdk * 1e6:>9.0f}µs {sdk / raw:>6.2f}x {(sdk - raw) * 1e6:>8.0f}µs")


class Canned(httpx.BaseTransport):
    """Answers like the server, from memory: a session, an appended event, a listing."""

    def __init__(self) -> None:
        self.session: dict[str, Any] = {}

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        headers = {"content-type": "application/json", "etag": '"1"'}
        if request.method == "POST" and path.endswith("/events"):
            body = json.loads(request.content)
            batch = body.get("events")
            stored = [e | {"seq": i + 1, "timestamp": 1.0} for i, e in enumerate(batch or [body])]
            return httpx.Response(201, json={"events": stored} if batch else stored[0], headers=headers)
        if request.method == "POST":
            data = json.loads(request.content)
            self.session = {
                "id": data["session_id"],
                "app_name": "a",
                "user_id": "u",
                "state": {},
                "events": [],
                "create_time": 1.0,
                "last_update_time": 1.0,
                "version": 0,
                "created": True,
            }
            return httpx.Response(201, json=self.session, headers=headers)
        if path.endswith("/sessions"):
            return httpx.Response(200, json={"sessions": [self.session] * 5, "next_token": None}, headers=headers)
        events = [event(f"message {i} " * 10) | {"id": str(i), "seq": i, "timestamp": 1.0} for i in range(20)]
        return httpx.Response(200, json=self.session | {"events": events, "next_token": None}, headers=headers)


@contextmanager
def server(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    from conftest import local_server

    with local_server() as started:
        yield started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="an API to measure against (default: start make run)")
    parser.add_argument("--calls", type=int, default=100, help="calls per side per round")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    with server(args.url) as url:
        pair = Pair(url)
        try:
            report(
                f"against {url} ({args.calls} calls x {args.rounds} rounds, median round)",
                measure(pair, args.calls, args.rounds),
            )
        finally:
            pair.close()
    for sigv4 in (False, True):
        canned = Pair("http://canned.test", transport=Canned(), sigv4=sigv4)
        title = "in memory (a canned transport, no socket): the client's own cost" + (", signing" if sigv4 else "")
        report(title, measure(canned, args.calls, args.rounds))
        canned.close()


if __name__ == "__main__":
    main()
