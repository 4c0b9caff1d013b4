"""`make run` end to end: the local server in its own process, spoken to over real HTTP."""

from __future__ import annotations

import json
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from local.moto_backend import install_transaction_applier, uninstall_transaction_applier
from local.server import spawned
from local.template import load_handler
from tests.support.aws import TABLE

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", params=["embedded", "moto"])
def base_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """``make run`` with each backend: the same requests must get the same answers."""
    with spawned(backend=request.param) as url:
        yield url


def _searchable(http: httpx.Client, user: str, query: str, text: str, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        found = http.post(f"/apps/demo/users/{user}/memories/search", json={"query": query, "top_k": 5})
        if found.status_code == 200 and any(text in m["content"]["parts"][0]["text"] for m in found.json()["memories"]):
            return True
        time.sleep(0.5)
    return False


def test_the_embedded_backend_keeps_everything_across_a_restart(tmp_path: Path) -> None:
    with spawned(data_dir=tmp_path) as url, httpx.Client(base_url=url, timeout=30) as http:
        http.post("/apps/demo/users/bob/sessions", json={"session_id": "s1", "state": {"user:lang": "pt", "k": 1}})
        events = [{"id": f"e{i}", "role": "user", "content": f"turn {i}", "turn_id": i} for i in range(30)]
        assert http.post("/apps/demo/users/bob/sessions/s1/events", json={"events": events}).status_code == 201
        assert (
            http.post("/apps/demo/users/bob/memories", json={"memories": [{"text": "Bob keeps bees"}]}).status_code
            == 200
        )
        before = http.get("/apps/demo/users/bob/sessions/s1").json()
    with spawned(data_dir=tmp_path) as url, httpx.Client(base_url=url, timeout=30) as http:
        after = http.get("/apps/demo/users/bob/sessions/s1").json()
        assert after == before and [e["id"] for e in after["events"]] == [f"e{i}" for i in range(30)]
        assert after["state"] == {"user:lang": "pt", "k": 1}
        assert _searchable(http, "bob", "bees", "Bob keeps bees", within_s=5)


@pytest.mark.parametrize("backend", ["embedded", "moto"])
def test_auto_save_feeds_new_events_to_memory_search(backend: str) -> None:
    with (
        spawned({"AUTOSAVE_WINDOW_SECONDS": "0"}, backend=backend) as url,
        httpx.Client(base_url=url, timeout=30) as http,
    ):
        http.post("/apps/demo/users/carol/sessions", json={"session_id": "s1"})
        event = {"role": "user", "content": "I am allergic to hazelnuts", "turn_id": "t1"}
        assert http.post("/apps/demo/users/carol/sessions/s1/events", json=event).status_code == 201
        assert _searchable(http, "carol", "hazelnuts", "allergic to hazelnuts", within_s=60)


def test_make_run_auto_saves_within_seconds_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    # No AUTOSAVE_WINDOW_SECONDS: make run's own short window (LOCAL_AUTOSAVE_WINDOW_S), not the template's 300 s.
    monkeypatch.delenv("AUTOSAVE_WINDOW_SECONDS", raising=False)
    with spawned() as url, httpx.Client(base_url=url, timeout=30) as http:
        http.post("/apps/demo/users/erin/sessions", json={"session_id": "s1"})
        event = {"role": "user", "content": "I play the theremin on Sundays", "turn_id": "t1"}
        assert http.post("/apps/demo/users/erin/sessions/s1/events", json=event).status_code == 201
        assert _searchable(http, "erin", "theremin", "play the theremin", within_s=45)


def test_events_not_yet_auto_saved_when_the_server_stops_are_saved_after_a_restart(tmp_path: Path) -> None:
    # A window longer than the test: the feed holds the event, undelivered, when the server stops.
    with (
        spawned({"AUTOSAVE_WINDOW_SECONDS": "3600"}, data_dir=tmp_path) as url,
        httpx.Client(base_url=url, timeout=30) as http,
    ):
        http.post("/apps/demo/users/dan/sessions", json={"session_id": "s1"})
        event = {"role": "user", "content": "My dog is called Pastel", "turn_id": "t1"}
        assert http.post("/apps/demo/users/dan/sessions/s1/events", json=event).status_code == 201
        assert not _searchable(http, "dan", "dog Pastel", "Pastel", within_s=2)
    with (
        spawned({"AUTOSAVE_WINDOW_SECONDS": "0"}, data_dir=tmp_path) as url,
        httpx.Client(base_url=url, timeout=30) as http,
    ):
        assert _searchable(http, "dan", "dog Pastel", "My dog is called Pastel", within_s=60)


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


def test_local_server_serves_what_adk_needs(base_url: str) -> None:
    """State reads, both listings, strict create and an If-Match that outlives a compaction, on each backend."""
    app = f"adk-{time.monotonic_ns()}"  # the module's server is shared: an app of this test's own
    with httpx.Client(base_url=base_url, timeout=30) as http:
        sessions = f"/apps/{app}/users/ann/sessions"
        for sid in ["b", "a"]:
            reply = http.post(sessions, json={"session_id": sid, "state": {"own": sid}}, headers={"If-None-Match": "*"})
            assert reply.status_code == 201
        taken = http.post(sessions, json={"session_id": "a"}, headers={"If-None-Match": "*"})
        assert taken.status_code == 409 and taken.json()["error"]["code"] == "already_exists"
        http.post(f"/apps/{app}/users/bob/sessions", json={"session_id": "c", "state": {"app:tier": "pro"}})
        turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"} for i in range(12)]
        delta = {
            "author": "user",
            "actions": {"state_delta": {"user:lang": "pt"}},
            "usageMetadata": {"totalTokenCount": 1},
        }
        assert http.post(f"{sessions}/b/events", json={"events": [*turns, delta]}).status_code == 201

        assert http.get(f"/apps/{app}/users/ann/state").json()["state"] == {"user:lang": "pt"}
        assert http.get(f"/apps/{app}/state").json()["state"] == {"app:tier": "pro"}
        listed = http.get(sessions).json()["sessions"]
        assert [s["id"] for s in listed] == ["a", "b"]  # b was appended to last
        assert listed[0]["state"] == {"own": "a", "user:lang": "pt", "app:tier": "pro"}
        everyone = http.get(f"/apps/{app}/sessions", params={"limit": 2}).json()
        rest = http.get(f"/apps/{app}/sessions", params={"next_token": everyone["next_token"]}).json()
        assert [(s["user_id"], s["id"]) for s in everyone["sessions"] + rest["sessions"]] == [
            ("ann", "a"),
            ("ann", "b"),
            ("bob", "c"),
        ]

        etag = http.get(f"{sessions}/b").headers["etag"]
        assert http.post(f"{sessions}/b/compact").json()["compacted"] is True
        after = http.get(f"{sessions}/b")
        assert after.headers["etag"] == etag
        assert after.json()["events"][-2]["usage_metadata"] == {"total_token_count": 1}
        appended = http.post(
            f"{sessions}/b/events", json={"role": "user", "content": "go on"}, headers={"If-Match": etag}
        )
        assert appended.status_code == 201
        seqs = [e["seq"] for e in http.get(f"{sessions}/b").json()["events"]]
        assert seqs == list(range(1, len(seqs) + 1))


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
    ids = [e["id"] for e in events if not (e.get("actions") or {}).get("compaction")]
    assert sorted(ids) == sorted(f"w{w}-{i}" for w in range(writers) for i in range(appends))  # each once
    for w in range(writers):  # each writer's events in the order it sent them
        assert [i for i in ids if i.startswith(f"w{w}-")] == [f"w{w}-{i}" for i in range(appends)]


# --- moto's transactions, applied without copying tables -----------------------------------------------------


@pytest.fixture(params=["local", "moto"])
def applier(request: pytest.FixtureRequest, aws: dict[str, Any]) -> Iterator[str]:
    """Each transaction test runs against the local applier and against moto's own, expecting the same."""
    if request.param == "moto":
        uninstall_transaction_applier()
    try:
        yield str(request.param)
    finally:
        install_transaction_applier()


def _stream_records(aws: dict[str, Any]) -> list[dict[str, Any]]:
    from agent_memory.runtime.aws import client

    streams = client("dynamodbstreams")
    arn = aws["dynamodb"].describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    return list(streams.get_records(ShardIterator=iterator["ShardIterator"])["Records"])


def _item(aws: dict[str, Any], sk: str) -> dict[str, Any] | None:
    found = aws["dynamodb"].get_item(TableName=TABLE, Key={"PK": {"S": "p"}, "SK": {"S": sk}}, ConsistentRead=True)
    item: dict[str, Any] | None = found.get("Item")
    return item


def _bump(expected: int, new: int) -> dict[str, Any]:
    return {
        "Update": {
            "TableName": TABLE,
            "Key": {"PK": {"S": "p"}, "SK": {"S": "counter"}},
            "UpdateExpression": "SET v = :new",
            "ConditionExpression": "v = :expected",
            "ExpressionAttributeValues": {":new": {"N": str(new)}, ":expected": {"N": str(expected)}},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
    }


def _put(sk: str, **attrs: dict[str, str]) -> dict[str, Any]:
    item = {"PK": {"S": "p"}, "SK": {"S": sk}, **attrs}
    return {"Put": {"TableName": TABLE, "Item": item, "ConditionExpression": "attribute_not_exists(PK)"}}


def test_a_transaction_cancelled_on_a_condition_writes_nothing_and_names_its_reasons(
    aws: dict[str, Any], applier: str
) -> None:
    db = aws["dynamodb"]
    db.put_item(TableName=TABLE, Item={"PK": {"S": "p"}, "SK": {"S": "counter"}, "v": {"N": "1"}})
    before = _stream_records(aws)
    with pytest.raises(db.exceptions.TransactionCanceledException) as info:
        db.transact_write_items(TransactItems=[_bump(expected=2, new=3), _put("e1"), _put("e2")])
    reasons = info.value.response["CancellationReasons"]
    assert [r["Code"] for r in reasons] == ["ConditionalCheckFailed", "None", "None"]
    assert reasons[0]["Item"]["v"] == {"N": "1"}  # ALL_OLD: the item that failed the condition
    assert _item(aws, "counter") == {"PK": {"S": "p"}, "SK": {"S": "counter"}, "v": {"N": "1"}}
    assert _item(aws, "e1") is None and _item(aws, "e2") is None
    assert len(_stream_records(aws)) == len(before)


def test_a_transaction_whose_conditions_hold_applies_every_item_and_streams_them(
    aws: dict[str, Any], applier: str
) -> None:
    db = aws["dynamodb"]
    db.put_item(TableName=TABLE, Item={"PK": {"S": "p"}, "SK": {"S": "counter"}, "v": {"N": "1"}})
    before = _stream_records(aws)
    db.transact_write_items(TransactItems=[_bump(expected=1, new=2), _put("e1", body={"S": "x"})])
    assert _item(aws, "counter") == {"PK": {"S": "p"}, "SK": {"S": "counter"}, "v": {"N": "2"}}
    assert _item(aws, "e1") == {"PK": {"S": "p"}, "SK": {"S": "e1"}, "body": {"S": "x"}}
    assert [r["eventName"] for r in _stream_records(aws)[len(before) :]] == ["MODIFY", "INSERT"]


def test_a_transaction_failing_part_way_is_undone_items_and_stream_alike(aws: dict[str, Any], applier: str) -> None:
    db = aws["dynamodb"]
    db.put_item(TableName=TABLE, Item={"PK": {"S": "p"}, "SK": {"S": "counter"}, "v": {"N": "1"}})
    before = _stream_records(aws)
    too_big = {"S": "x" * 410_000}  # passes every condition, then fails DynamoDB's 400 KB item limit when written
    with pytest.raises(ClientError) as info:
        db.transact_write_items(TransactItems=[_bump(expected=1, new=2), _put("e1"), _put("e2", body=too_big)])
    assert info.value.response["Error"]["Code"] in {"ValidationException", "TransactionCanceledException"}
    assert _item(aws, "counter") == {"PK": {"S": "p"}, "SK": {"S": "counter"}, "v": {"N": "1"}}
    assert _item(aws, "e1") is None and _item(aws, "e2") is None
    assert len(_stream_records(aws)) == len(before)


def test_a_transaction_naming_one_item_twice_is_refused_whole(aws: dict[str, Any], applier: str) -> None:
    db = aws["dynamodb"]
    with pytest.raises(ClientError) as info:
        db.transact_write_items(TransactItems=[_put("e1"), _put("e1")])
    assert info.value.response["Error"]["Code"] == "ValidationException"
    assert _item(aws, "e1") is None


def test_the_server_imports_numpy_before_any_request_thread_can(tmp_path: Path) -> None:
    # numpy's C extension fails when two threads import it at once ("partially initialized module"), and the
    # handlers import it lazily: two first requests (or one and the change feed's auto-save) raced into a 500.
    # The server imports it on its own thread before it serves or feeds anything.
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    probe = (
        "import sys\n"
        "from local.server import free_port, start\n"
        "before = 'numpy' in sys.modules\n"
        f"server, shutdown = start('127.0.0.1', free_port(), data_dir={str(tmp_path)!r})\n"
        "after = 'numpy' in sys.modules\n"
        "shutdown()\n"
        "print(before, after)\n"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "EMBEDDER": "none"}
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=root, capture_output=True, text=True, timeout=120, env=env, check=True
    )
    assert out.stdout.strip().splitlines()[-1] == "False True"


# --- a server one can leave running ------------------------------------------------------------------------------


def _connect(port: int, timeout: float) -> socket.socket:
    # (socket.socket and connect rather than the module's one-call helper, whose name is also an EventBridge
    # operation's: local/botocore_data.py keeps the operations the sources name.)
    conn = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    conn.settimeout(timeout)
    conn.connect(("127.0.0.1", port))
    return conn


def _raw(port: int, request: bytes) -> bytes:
    with _connect(port, 10) as conn:
        conn.sendall(request)
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_a_malformed_request_gets_a_json_400_and_the_server_goes_on(tmp_path: Path) -> None:
    with spawned(data_dir=tmp_path) as url:
        port = int(url.rsplit(":", 1)[1])
        for request in (
            b"GET /a b/c HTTP/1.1\r\nHost: x\r\n\r\n",
            b"\x00\x01garbage\r\n\r\n",
            b"GET / HTTP/9.9\r\n\r\n",
        ):
            answer = _raw(port, request)
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.split(b" ", 2)[1] in (b"400", b"505"), answer
            assert json.loads(body)["error"]["code"] == "invalid_request"
        assert httpx.get(f"{url}/apps/a/users/u/sessions", timeout=10).status_code == 200


def test_a_burst_of_connections_all_get_an_answer(tmp_path: Path) -> None:
    with spawned(data_dir=tmp_path) as url:
        port = int(url.rsplit(":", 1)[1])
        sockets = [_connect(port, 30) for _ in range(200)]
        for conn in sockets:
            conn.sendall(b"GET /apps/a/users/u/sessions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answered = 0
        for conn in sockets:
            with conn:
                answered += conn.recv(64).startswith(b"HTTP/1.1 200")
        assert answered == 200


def test_one_server_per_data_dir_and_no_wipe_while_it_runs(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with spawned(data_dir=data) as url:
        assert httpx.post(f"{url}/apps/a/users/u/sessions", json={"session_id": "s"}, timeout=10).status_code == 201
        second = subprocess.run(
            [sys.executable, "-m", "local.server", "--port", "0", "--backend", "embedded", "--data-dir", str(data)],
            cwd=ROOT, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert second.returncode == 1
        assert second.stderr.strip().splitlines()[-1].startswith(f"{data} is in use by pid ")
        wipe = subprocess.run(["make", "-s", "wipe", f"DATA_DIR={data}"], cwd=ROOT, capture_output=True, text=True)
        assert wipe.returncode != 0 and "stop it first" in wipe.stdout
        assert (data / "agent-memory.sqlite3").exists()
        # What the server made is its user's alone.
        assert stat.S_IMODE(data.stat().st_mode) == 0o700
        assert {stat.S_IMODE(p.stat().st_mode) for p in data.iterdir() if p.is_file()} == {0o600}
    wipe = subprocess.run(["make", "-s", "wipe", f"DATA_DIR={data}"], cwd=ROOT, capture_output=True, text=True)
    assert wipe.returncode == 0 and not data.exists()
