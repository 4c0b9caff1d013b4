"""Context reads are proportional to the window, not the session: a 10,000-event session, compacted.

    .venv/bin/python -m bench.context

The session is filled through the append route (batches of 100), as a client would; compaction, appends and the
context reads go through the real handlers too. Counts AWS requests and items read.
"""

from __future__ import annotations

import time
from typing import Any

import local  # noqa: F401 - puts the shared layer on sys.path
from bench.aws_counter import RequestCounter
from bench.environment import bench_environment

TABLE = "agent-memory-bench"
BUCKET = "agent-memory-bench-context"
EVENTS = 10_000


def seed(call: Any, base: str, sid: str, count: int) -> None:
    start = time.time() - count
    for first in range(1, count + 1, 100):
        events = [
            {
                "id": f"e{seq}",
                "role": "user" if seq % 2 else "assistant",
                "content": f"{'user' if seq % 2 else 'assistant'} turn {seq}",
                "timestamp": start + seq,
            }
            for seq in range(first, min(first + 100, count + 1))
        ]
        status, reply = call("POST", f"{base}/{sid}/events", {"events": events})
        assert status == 201, (status, reply)


def main() -> None:
    bench_environment(TABLE, BUCKET)
    from local.inprocess import in_process_aws
    from local.server import LocalApi
    from local.template import load_template

    api = LocalApi(load_template())

    call = api.call

    rows: list[tuple[str, int, int, int, int]] = []
    with in_process_aws(TABLE, BUCKET) as clients:
        base = "/apps/bench/users/u1/sessions"
        assert call("POST", base, {"session_id": "long"})[0] == 201
        seed(call, base, "long", EVENTS)
        counter = RequestCounter().attach(clients["dynamodb"], clients["s3"])

        def measure(name: str, method: str, path: str, body: Any = None) -> Any:
            counter.reset()
            status, reply = call(method, path, body)
            assert status == 200, (name, status, reply)
            rows.append((name, counter.count("dynamodb"), counter.count("s3"), counter.items_read, 0))
            return reply

        reply = measure("context, 10,000 events, not compacted", "GET", f"{base}/long/context?max_messages=20")
        rows[-1] = (*rows[-1][:4], len(reply["messages"]))
        reply = measure("compact now (reads the 10,000 once)", "POST", f"{base}/long/compact")
        assert reply["compacted"], reply
        for i in range(10):
            call("POST", f"{base}/long/events", {"role": "user" if i % 2 == 0 else "assistant", "content": f"new {i}"})
        reply = measure("context after compaction (+10 new events)", "GET", f"{base}/long/context")
        rows[-1] = (*rows[-1][:4], len(reply["messages"]))
        reply = measure("context after compaction, max_messages=5", "GET", f"{base}/long/context?max_messages=5")
        rows[-1] = (*rows[-1][:4], len(reply["messages"]))
    print("| operation | DynamoDB requests | S3 requests | items read | messages returned |")
    print("|---|---:|---:|---:|---:|")
    for name, ddb, s3, items, messages in rows:
        print(f"| {name} | {ddb} | {s3} | {items} | {messages or ''} |")


if __name__ == "__main__":
    main()
