"""Context reads are proportional to the window, not the session: a 10,000-event session, compacted.

    .venv/bin/python -m bench.context

The session is seeded with BatchWriteItem in the store's item format (moto copies the whole table on every
TransactWriteItems, which makes 10,000 transactional appends take hours locally); compaction, appends and
the context reads then go through the real handlers. Counts AWS requests and items read.
"""

from __future__ import annotations

import json
import time
from typing import Any

import local  # noqa: F401 - puts the shared layer on sys.path
from bench.aws_counter import RequestCounter
from bench.environment import bench_environment

TABLE = "agent-memory-bench"
BUCKET = "agent-memory-bench-context"
EVENTS = 10_000


def seed(db: Any, app: str, user: str, sid: str, count: int) -> None:
    from agent_memory.stores.dynamo import events_pk, session_pk
    from agent_memory.stores.ports import SessionKey

    pk = events_pk(SessionKey(app, user, sid))
    base = time.time() - count
    items = []
    for seq in range(1, count + 1):
        role = "user" if seq % 2 else "assistant"
        body = {
            "id": f"e{seq}",
            "author": role,
            "invocation_id": "",
            "timestamp": base + seq,
            "content": {"role": "user" if role == "user" else "model", "parts": [{"text": f"{role} turn {seq}"}]},
            "actions": {"state_delta": {}},
        }
        items.append(
            {
                "PK": {"S": pk},
                "SK": {"S": f"V#e{seq}"},
                "seq": {"N": str(seq)},
                "ts": {"N": repr(base + seq)},
                "body": {"S": json.dumps(body)},
            }
        )
    for start in range(0, len(items), 25):
        db.batch_write_item(RequestItems={TABLE: [{"PutRequest": {"Item": i}} for i in items[start : start + 25]]})
    db.update_item(
        TableName=TABLE,
        Key={"PK": {"S": session_pk(app, user)}, "SK": {"S": f"S#{sid}"}},
        UpdateExpression="SET last_seq = :n, version = :n, update_time = :t",
        ExpressionAttributeValues={":n": {"N": str(count)}, ":t": {"N": repr(base + count)}},
    )


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
        seed(clients["dynamodb"], "bench", "u1", "long", EVENTS)
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
