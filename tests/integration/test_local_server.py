"""`make run` end to end: the local server in its own process, spoken to over real HTTP."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from local.server import spawned
from local.template import load_handler


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with spawned() as url:
        yield url


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


@dataclass(frozen=True)
class _SlowModule:
    code_uri: str
    handler: str = "slow.lambda_handler"


def test_load_handler_hands_out_a_module_only_once_its_code_has_run(tmp_path: Path) -> None:
    # A handler module that takes a while to load, as a real one does (imports, clients): a thread that finds it
    # half-run would see no lambda_handler yet.
    (tmp_path / "slow.py").write_text(
        "import time\ntime.sleep(0.3)\nLOADS = []\n\ndef lambda_handler(event, context):\n    return LOADS\n"
    )
    target = _SlowModule(code_uri=str(tmp_path))
    start = threading.Barrier(16)
    handlers: list[object] = []
    errors: list[BaseException] = []

    def first_call() -> None:
        start.wait()
        try:
            handlers.append(load_handler(target))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=first_call) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(handlers) == 16 and len({id(h) for h in handlers}) == 1  # one module, loaded once


def test_first_requests_racing_to_an_unloaded_function_all_get_an_answer(base_url: str) -> None:
    # No other test of this module calls the context function, and the server is probed on a path that loads
    # no handler: these 40 requests are the first the function gets, all at once.
    start = threading.Barrier(40)
    answers: list[int] = []
    failures: list[BaseException] = []

    def first_request(i: int) -> None:
        with httpx.Client(base_url=base_url, timeout=60) as http:
            start.wait()
            try:
                reply = http.get(f"/apps/race/users/u{i}/sessions/none/context")
                assert reply.json()["error"]["code"] == "session_not_found"
                answers.append(reply.status_code)
            except BaseException as exc:
                failures.append(exc)

    threads = [threading.Thread(target=first_request, args=(i,)) for i in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert answers == [404] * 40


def test_racing_appends_to_one_session_all_land_once_and_in_order(base_url: str) -> None:
    writers, appends = 8, 10
    with httpx.Client(base_url=base_url, timeout=30) as http:
        assert http.post("/apps/race/users/alice/sessions", json={"session_id": "busy"}).status_code == 201
    start = threading.Barrier(writers)
    statuses: dict[int, list[int]] = {}
    slowest: list[float] = []

    def writer(w: int) -> None:
        mine: list[int] = []
        with httpx.Client(base_url=base_url, timeout=60) as http:
            start.wait()
            for i in range(appends):
                began = time.monotonic()
                reply = http.post(
                    "/apps/race/users/alice/sessions/busy/events",
                    json={"id": f"w{w}-{i}", "author": "user", "content": {"parts": [{"text": f"{w}:{i}"}]}},
                )
                slowest.append(time.monotonic() - began)
                mine.append(reply.status_code)
        statuses[w] = mine

    began = time.monotonic()
    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - began
    print(f"{writers}x{appends} racing appends: {elapsed:.1f} s, slowest append {max(slowest):.1f} s")

    assert statuses == {w: [201] * appends for w in range(writers)}
    with httpx.Client(base_url=base_url, timeout=30) as http:
        events = http.get("/apps/race/users/alice/sessions/busy").json()["events"]
    # The local compaction sweep (every 10 s) may append its summaries among them: a ninth writer.
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    ids = [e["id"] for e in events if e["author"] != "system"]
    assert sorted(ids) == sorted(f"w{w}-{i}" for w in range(writers) for i in range(appends))  # each once
    for w in range(writers):  # each writer's events in the order it sent them
        assert [i for i in ids if i.startswith(f"w{w}-")] == [f"w{w}-{i}" for i in range(appends)]
