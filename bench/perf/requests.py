"""AWS requests and items read per operation, through the real handlers against moto.

    make bench            (or: .venv/bin/python -m bench.perf.requests)

Counts do not depend on the machine: they are what a deployment pays per call (DynamoDB and S3 bill per
request and per item read).
"""

from __future__ import annotations

from typing import Any

import local  # noqa: F401 - puts the shared layer on sys.path
from bench.support.aws_counter import RequestCounter
from bench.support.environment import bench_environment

TABLE = "agent-memory-bench"
BUCKET = "agent-memory-bench-context"


def _event(text: str, **extra: Any) -> dict[str, Any]:
    return {"author": "user", "content": {"role": "user", "parts": [{"text": text}]}, **extra}


def run() -> list[tuple[str, int, int, int, int]]:

    from local.server import LocalApi
    from local.template import load_template

    api = LocalApi(load_template())

    call = api.call

    from local.inprocess import in_process_aws

    rows: list[tuple[str, int, int, int, int]] = []
    with in_process_aws(TABLE, BUCKET) as clients:
        counter = RequestCounter().attach(clients["dynamodb"], clients["s3"], clients["events"])
        base = "/apps/bench/users/u1/sessions"

        def measure(name: str, method: str, path: str, body: Any = None, expect: int = 200) -> Any:
            counter.reset()
            status, reply = call(method, path, body)
            assert status == expect, (name, status, reply)
            rows.append(
                (
                    name,
                    counter.count("dynamodb"),
                    counter.count("s3"),
                    counter.count("events"),
                    counter.items_read,
                )
            )
            return reply

        measure("create (new session)", "POST", base, {"session_id": "big"}, 201)
        measure("create (existing id)", "POST", base, {"session_id": "big"}, 200)
        measure("append 1 event", "POST", f"{base}/big/events", _event("hello"), 201)
        measure(
            "append 1 event with app:/user:/session state",
            "POST",
            f"{base}/big/events",
            _event("x", actions={"state_delta": {"a": 1, "user:b": 2, "app:c": 3}}),
            201,
        )
        measure("append batch of 100", "POST", f"{base}/big/events", {"events": [_event("m")] * 100}, 201)
        for _ in range(8):
            call("POST", f"{base}/big/events", {"events": [_event(f"turn {i}") for i in range(100)]})
        call("POST", f"{base}/big/events", {"events": [_event("pad")] * 98})  # 1,000 events in all
        reply = measure("get, 1,000-event session", "GET", f"{base}/big")
        assert len(reply["events"]) == 1000
        reply = measure("get, num_recent_events=20", "GET", f"{base}/big?num_recent_events=20")
        assert len(reply["events"]) == 20
        measure("get, num_recent_events=0", "GET", f"{base}/big?num_recent_events=0")
        measure("append 600 KB event (to S3)", "POST", f"{base}/big/events", _event("z" * 600_000), 201)
        # The state, memo, export and import routes on a 20-event chat, its turns saved to long-term memory first.
        call("POST", base, {"session_id": "chat"})
        turns = [_event(f"I like topic {i}; my sister Rita lives in Porto", id=f"t{i}") for i in range(20)]
        call("POST", f"{base}/chat/events", {"events": turns})
        call("POST", "/apps/bench/users/u1/memories", {"session_id": "chat", "policy": "all"})
        measure("context, 20 events", "GET", f"{base}/chat/context")
        measure("context + memories=5 (warm)", "GET", f"{base}/chat/context?memories=5")
        measure("context + profile=true (warm)", "GET", f"{base}/chat/context?profile=true")
        measure("profile (warm)", "GET", "/apps/bench/users/u1/profile")
        measure("put memo", "PUT", f"{base}/chat/memo", {"memo": {"turns": 20}})
        measure("get memo", "GET", f"{base}/chat/memo")
        document = measure("export, 20 events", "GET", f"{base}/chat/export")
        measure("import, 20 events (new id)", "POST", f"{base}/import?session_id=copy", document, 201)
        measure("delete 1 event (and its memory)", "DELETE", f"{base}/chat/events/t3")
        measure("rewind: the last 2 events", "DELETE", f"{base}/chat/events?before_seq=19")
        measure("clear the 16 left", "DELETE", f"{base}/chat/events")
        for i in range(50):
            call("POST", base, {"session_id": f"s{i:03d}"})
        call("POST", f"{base}/s000/events", {"events": [_event(f"turn {i}") for i in range(20)]})
        measure("list, page of 20 (of 51)", "GET", f"{base}?limit=20")
        measure("delete, 20-event session (no payload)", "DELETE", f"{base}/s000", expect=204)
        measure("delete, 1,001-event session", "DELETE", f"{base}/big", expect=204)
    return rows


def main() -> None:
    bench_environment(TABLE, BUCKET)
    rows = run()
    print("| operation | DynamoDB requests | S3 requests | EventBridge requests | items read |")
    print("|---|---:|---:|---:|---:|")
    for name, ddb, s3, events, items in rows:
        print(f"| {name} | {ddb} | {s3} | {events} | {items} |")


if __name__ == "__main__":
    main()
