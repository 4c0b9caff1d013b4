"""Generated hostile requests to every route of `make run`'s server: no 5xx, one error shape, nothing poisoned.

The requests are drawn by hypothesis (derandomized: the same requests every run), then sent over real HTTP
to the local server in its own process, from a few threads at once so that writes race as clients' do.
Before the run, "victim" sessions and memories of users the generated requests never name are stored in the
same apps; after it, they and every session the run created must still read back.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings

from local.server import spawned
from local.template import load_template, routes
from tests.support.strategies import APPS, SESSIONS, USERS, Request, requests_for

# Requests per route; more where the input is richest. At least 2,000 in all.
PER_ROUTE = {
    "POST /apps/{app_name}/users/{user_id}/sessions": 260,
    "GET /apps/{app_name}/users/{user_id}/sessions/{session_id}": 170,
    "GET /apps/{app_name}/users/{user_id}/sessions": 130,
    "GET /apps/{app_name}/sessions": 90,
    "GET /apps/{app_name}/users/{user_id}/state": 50,
    "GET /apps/{app_name}/state": 40,
    "DELETE /apps/{app_name}/users/{user_id}/sessions/{session_id}": 70,
    "GET /apps/{app_name}/users/{user_id}/sessions/{session_id}/events": 90,
    "POST /apps/{app_name}/users/{user_id}/sessions/{session_id}/events": 480,
    "DELETE /apps/{app_name}/users/{user_id}/sessions/{session_id}/events/{event_id}": 60,
    "DELETE /apps/{app_name}/users/{user_id}/sessions/{session_id}/events": 40,
    "GET /apps/{app_name}/users/{user_id}/sessions/{session_id}/context": 190,
    "POST /apps/{app_name}/users/{user_id}/sessions/{session_id}/context": 120,
    "POST /apps/{app_name}/users/{user_id}/sessions/{session_id}/compact": 90,
    "POST /apps/{app_name}/users/{user_id}/memories": 240,
    "POST /apps/{app_name}/users/{user_id}/memories/search": 150,
    "GET /apps/{app_name}/users/{user_id}/memories/search": 150,
    "DELETE /apps/{app_name}/users/{user_id}/memories/{memory_id}": 60,
    "DELETE /apps/{app_name}/users/{user_id}/memories": 30,
    "GET /apps/{app_name}/users/{user_id}/profile": 60,
    "GET /openapi.json": 20,
    "GET /apps/{app_name}/users/{user_id}/sessions/{session_id}/export": 60,
    "POST /apps/{app_name}/users/{user_id}/sessions/import": 200,
    "GET /apps/{app_name}/users/{user_id}/sessions/{session_id}/memo": 30,
    "PUT /apps/{app_name}/users/{user_id}/sessions/{session_id}/memo": 90,
}
SENDERS = 4
REPLAYS = 400  # failing requests replayed one by one to find their cause in the server's log
VICTIMS = ("victim-a", "victim-b")
CREATE = "POST /apps/{app_name}/users/{user_id}/sessions"  # users no generated request names


@dataclass(frozen=True)
class Outcome:
    request: Request
    status: int  # 0: no answer
    body: bytes
    error: str = ""


def draw(route_key: str, n: int) -> list[Request]:
    """``n`` requests to one route, the same ones every run."""
    route = next(r for r in routes(load_template()) if r.route_key == route_key)
    drawn: list[Request] = []

    @settings(
        max_examples=n,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(requests_for(route))
    def collect(request: Request) -> None:
        drawn.append(request)

    collect()
    return drawn


def interleave(groups: list[list[Request]]) -> list[Request]:
    """One request of each route in turn, so that every route meets the state the others leave."""
    out: list[Request] = []
    for i in range(max(len(g) for g in groups)):
        out.extend(g[i] for g in groups if i < len(g))
    return out


def send(http: httpx.Client, request: Request) -> Outcome:
    headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in request.headers]  # bytes as drawn
    try:
        reply = http.request(request.method, request.target, content=request.body, headers=headers, timeout=60)
    except httpx.HTTPError as exc:
        return Outcome(request, 0, b"", f"no answer: {exc!r}")
    return Outcome(request, reply.status_code, reply.content)


def shape_problem(outcome: Outcome) -> str | None:
    """What is wrong with an answer: a 5xx, no answer, or a 4xx that is not ``{"error": {code, message, field?}}``."""
    if outcome.status == 0:
        return outcome.error
    if outcome.status >= 500:
        return f"{outcome.status}: {outcome.body[:200]!r}"
    if 400 <= outcome.status < 500:
        try:
            body = json.loads(outcome.body)
        except ValueError:
            return f"{outcome.status} whose body is not JSON: {outcome.body[:200]!r}"
        error = body.get("error") if isinstance(body, dict) else None
        if not (
            isinstance(body, dict)
            and set(body) == {"error"}
            and isinstance(error, dict)
            and isinstance(error.get("code"), str)
            and isinstance(error.get("message"), str)
            and set(error) <= {"code", "message", "field"}
            and isinstance(error.get("field", ""), str)
        ):
            return f"{outcome.status} not in the error shape: {outcome.body[:200]!r}"
    return None


_FRAME = re.compile(r'File \\?"([^"\\]+)\\?", line (\d+), in ([\w<>]+)')
_OURS = ("/layers/shared/", "/functions/", "/local/")


def cause(log: str) -> str:
    """The exception a request raised, from the server's log while it alone ran: its name and the deepest frame
    of the project's code ("UnicodeDecodeError at agent_memory/edge/api.py:71 json_body")."""
    name, traceback = "", log
    for line in log.splitlines():
        if line.startswith("{") and "exception" in line:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("exception_name"):
                name, traceback = str(record["exception_name"]), str(record.get("exception", ""))
    if not name:  # a raw traceback (the local server's own, when a handler raised)
        ends = [line for line in log.splitlines() if re.match(r"^\w[\w.]*(Error|Exception)\b", line)]
        name = ends[-1].split(":")[0] if ends else ""
    frames = [f for f in _FRAME.findall(traceback) if any(marker in f[0] for marker in _OURS)]
    where = ""
    if frames:
        path, line_no, function = frames[-1]
        short = path.split("/layers/shared/")[-1].split("/wt-localfuzz/")[-1]
        where = f" at {short}:{line_no} {function}"
    return f"{name or 'no exception logged'}{where}"


def diagnose(base_url: str, log_path: Path, failures: list[tuple[Outcome, str]]) -> dict[int, str]:
    """Replay each failing request alone and read what the server logged for it (the run's own log lines are
    interleaved across threads). Keyed by the failure's index; at most ``REPLAYS`` replays."""
    causes: dict[int, str] = {}
    with httpx.Client(base_url=base_url, timeout=60) as http:
        stop = time.monotonic() + 90
        for i, (outcome, _) in enumerate(failures[:REPLAYS]):
            if outcome.status == 0 or time.monotonic() > stop:
                continue  # an unanswered request would hold the replay for its whole timeout
            before = log_path.stat().st_size
            again = send(http, outcome.request)
            time.sleep(0.05)  # let the server's log reach the file (written before the answer, flushed after)
            with log_path.open("rb") as fh:
                fh.seek(before)
                logged = fh.read().decode("utf-8", "replace")
            found = cause(logged)
            causes[i] = found if again.status == outcome.status else f"{found} (replay answered {again.status})"
    return causes


def report(failures: list[tuple[Outcome, str]], causes: dict[int, str], title: str) -> str:
    """One line per failure class (route, status, cause) with its count and its shortest reproducer."""
    classes: dict[str, list[tuple[Outcome, str]]] = defaultdict(list)
    for i, (outcome, problem) in enumerate(failures):
        name = f"{outcome.request.route} -> {outcome.status or 'no answer'}: {causes.get(i, problem[:80])}"
        classes[name].append((outcome, problem))
    lines = [f"{title}: {len(failures)} in {len(classes)} classes"]
    for name, members in sorted(classes.items()):
        shortest = min(members, key=lambda m: len(m[0].request.reproducer()))
        lines.append(f"- {name}  x{len(members)}\n    {shortest[0].request.reproducer()}\n    -> {shortest[1][:200]}")
    return "\n".join(lines)


# --- victims and read-back ---------------------------------------------------------------------------------


def plant_victims(http: httpx.Client) -> dict[tuple[str, str], int]:
    """Sessions (with state at every scope) and memories of users the run never names; their event counts."""
    planted = {}
    for app in APPS:
        for user in VICTIMS:
            base = f"/apps/{app}/users/{user}"
            created = http.post(f"{base}/sessions", json={"session_id": "keep", "state": {"user:tone": "dry", "k": 1}})
            assert created.status_code == 201, created.text
            for i in range(3):
                appended = http.post(
                    f"{base}/sessions/keep/events",
                    json={
                        "role": "user" if i % 2 == 0 else "assistant",
                        "content": f"victim turn {i}",
                        "turn_id": f"t{i}",
                    },
                )
                assert appended.status_code == 201, appended.text
            saved = http.post(f"{base}/memories", json={"memories": [{"text": f"{user} likes green tea"}]})
            assert saved.status_code == 200, saved.text
            planted[(app, user)] = 3
    return planted


def read_back(http: httpx.Client, app: str, user: str, session: str | None) -> list[tuple[str, int, bytes]]:
    """The reads of one user (session None: list, memory search both ways) or of one of its sessions (GET,
    context) that did not answer 200."""
    base = f"/apps/{app}/users/{user}"
    reads: list[tuple[str, str, Any]] = [
        ("GET", f"{base}/sessions", None),
        ("GET", f"{base}/memories/search?query=tea", None),
        ("POST", f"{base}/memories/search", {"query": "tea"}),
    ]
    if session is not None:
        reads = [("GET", f"{base}/sessions/{session}", None), ("GET", f"{base}/sessions/{session}/context", None)]
    bad = []
    for method, path, body in reads:
        reply = http.request(method, path, json=body, timeout=60)
        if reply.status_code != 200:
            bad.append((f"{method} {path}", reply.status_code, reply.content[:300]))
    return bad


def listed(http: httpx.Client, app: str, user: str) -> list[str]:
    """The ids of every session a user holds, page by page (none when the list itself fails)."""
    ids: list[str] = []
    token: str | None = None
    while True:
        reply = http.get(
            f"/apps/{app}/users/{user}/sessions", params={"limit": 100, **({"next_token": token} if token else {})}
        )
        if reply.status_code != 200:
            return ids
        ids += [s["id"] for s in reply.json()["sessions"]]
        token = reply.json().get("next_token")
        if not token:
            return ids


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    log_path = tmp_path_factory.mktemp("fuzz") / "server.log"
    with spawned(log_path=log_path) as url:
        yield url, log_path


def test_hostile_requests_get_no_5xx_one_error_shape_and_poison_nothing(server: tuple[str, Path]) -> None:
    base_url, log_path = server
    groups = [draw(route.route_key, PER_ROUTE[route.route_key]) for route in routes(load_template())]
    requests = interleave(groups)
    per_route = Counter(r.route for r in requests)
    assert set(per_route) == set(PER_ROUTE) and len(requests) >= 2000

    with httpx.Client(base_url=base_url, timeout=60) as http:
        victims = plant_victims(http)
        for app in APPS:  # the pool's sessions exist, so that appends and reads reach storage
            for user in USERS:
                for session in SESSIONS:
                    http.post(f"/apps/{app}/users/{user}/sessions", json={"session_id": session})

    began = time.monotonic()
    local = threading.local()

    def client() -> httpx.Client:
        if not hasattr(local, "http"):
            local.http = httpx.Client(base_url=base_url, timeout=60)
        return local.http  # type: ignore[no-any-return]

    with ThreadPoolExecutor(SENDERS) as pool:
        outcomes = list(pool.map(lambda r: send(client(), r), requests))
    elapsed = time.monotonic() - began

    statuses = Counter(o.status for o in outcomes)
    print(f"\n{len(outcomes)} hostile requests in {elapsed:.0f} s from {SENDERS} threads; statuses {dict(statuses)}")
    for route_key, n in sorted(per_route.items()):
        print(f"  {n:4} {route_key}")

    failures = [(o, p) for o in outcomes if (p := shape_problem(o)) is not None]

    # Afterwards: the victims, every session the run created, and every session the pool's users hold.
    created: set[tuple[str, str, str]] = set()
    for o in outcomes:
        if o.request.route == CREATE and o.status == 201:
            parts = o.request.path.split("/")
            created.add((parts[2], parts[4], quote(json.loads(o.body)["id"], safe="")))
    lost: list[str] = []
    with httpx.Client(base_url=base_url, timeout=60) as http:
        for (app, user), count in victims.items():
            for session in (None, "keep"):
                lost += [f"victim {app}/{user}: {w} -> {s} {b!r}" for w, s, b in read_back(http, app, user, session)]
            got = http.get(f"/apps/{app}/users/{user}/sessions/keep")
            # The victim's own events, all of them (the compaction sweep may have added a summary among them).
            own = [e for e in got.json()["events"] if e["author"] != "system"] if got.status_code == 200 else []
            if got.status_code == 200 and len(own) != count:
                lost.append(f"victim {app}/{user}: {len(own)} events, not {count}")
        held: set[tuple[str, str, str]] = set()
        for app in APPS:
            for user in USERS:
                lost += [f"user {app}/{user}: {w} -> {s} {b!r}" for w, s, b in read_back(http, app, user, None)]
                held |= {(app, user, quote(sid, safe="")) for sid in listed(http, app, user)}
        for app, user, session in sorted(held | created):
            for what, status, body in read_back(http, app, user, session):
                if not (status == 404 and (app, user, session) not in held):  # created, then deleted by the run
                    lost.append(f"session {app}/{user}/{session}: {what} -> {status} {body!r}")
    print(f"read back {len(victims)} victims and {len(held | created)} sessions (held by the pool or created)")

    causes = diagnose(base_url, log_path, failures)
    message = "\n".join(
        part
        for part in (
            report(failures, causes, "5xx, unanswered or misshapen answers") if failures else "",
            (f"reads that failed afterwards: {len(lost)} (the first 60)\n" + "\n".join(lost[:60])) if lost else "",
        )
        if part
    )
    print(message)
    assert not failures and not lost, message
