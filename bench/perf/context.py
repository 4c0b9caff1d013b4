"""Context reads are proportional to the window, not the session: 1,000- and 10,000-event sessions never compacted
(a budget: only the newest events are read, until they decide the window), then the 10,000 compacted.

    .venv/bin/python -m bench.perf.context

The sessions are filled through the append route (batches of 100), as a client would; compaction, appends and the
context reads go through the real handlers too (moto in process). Counts AWS requests, items read (botocore
hooks: a Query's Count, a GetItem's item, a BatchGetItem's items) and DynamoDB read units (from the items' sizes,
``ReadUnits``), which do not depend on the machine; the USD are those read units at on-demand list prices
(``bench.perf.cost``), per million such requests.
"""

from __future__ import annotations

import math
import time
from typing import Any

import local  # noqa: F401 - puts the shared layer on sys.path
from agent_memory.stores.dynamo.sizes import item_size
from bench.perf.cost import DYNAMODB_PER_M_RRU
from bench.support.aws_counter import RequestCounter
from bench.support.environment import bench_environment

TABLE = "agent-memory-bench"
BUCKET = "agent-memory-bench-context"
SIZES = (1_000, 10_000)
# The windows read of each never-compacted session: the message budget of the issue, a token budget (a turn of this
# bench is ~14 characters, 8 tokens: 2,000 tokens hold about 250 of them) and no budget (all of it is emitted).
WINDOWS = ("max_messages=20", "max_tokens=2000", "max_messages=20&system=Be+brief.&start_with_user=true")


class ReadUnits:
    """Strongly consistent read units of the DynamoDB reads, from the sizes of the items they returned: a Query is
    charged on the sum of its items rounded up to 4 KB, a GetItem or BatchGetItem item by item. A projected read
    is charged for the whole item, not the projection; those here (the deletion count, the oldest seq) read items
    under 4 KB: one unit each, as counted."""

    def __init__(self) -> None:
        self.units = 0

    def attach(self, client: Any) -> ReadUnits:
        client.meta.events.register("after-call.dynamodb.*", self._after)
        return self

    def _after(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "Query":
            self.units += max(1, math.ceil(sum(item_size(i) for i in parsed.get("Items", [])) / 4096))
        elif model.name == "GetItem":
            self.units += max(1, math.ceil(item_size(parsed.get("Item")) / 4096))
        elif model.name == "BatchGetItem":
            items = [i for found in parsed.get("Responses", {}).values() for i in found]
            self.units += sum(max(1, math.ceil(item_size(i) / 4096)) for i in items)


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

    rows: list[tuple[str, int, int, int, int, int | None]] = []
    with in_process_aws(TABLE, BUCKET) as clients:
        base = "/apps/bench/users/u1/sessions"
        for size in SIZES:
            assert call("POST", base, {"session_id": f"s{size}"})[0] == 201
            seed(call, base, f"s{size}", size)
        counter = RequestCounter().attach(clients["dynamodb"], clients["s3"])
        units = ReadUnits().attach(clients["dynamodb"])

        def measure(name: str, method: str, path: str, body: Any = None) -> Any:
            counter.reset()
            units.units = 0
            status, reply = call(method, path, body)
            assert status == 200, (name, status, reply)
            messages = len(reply["messages"]) if "messages" in reply else None
            row = (name, counter.count("dynamodb"), counter.count("s3"), counter.items_read, units.units, messages)
            rows.append(row)
            return reply

        for size in SIZES:
            for window in WINDOWS:
                label = window.replace("&", ", ").replace("+", " ")
                measure(f"context, {size:,} events, not compacted, {label}", "GET", f"{base}/s{size}/context?{window}")
        measure("context, 1,000 events, not compacted, no budget", "GET", f"{base}/s1000/context")
        long = f"{base}/s10000"
        reply = measure("compact now (reads the 10,000 once)", "POST", f"{long}/compact")
        assert reply["compacted"], reply
        for i in range(10):
            call("POST", f"{long}/events", {"role": "user" if i % 2 == 0 else "assistant", "content": f"new {i}"})
        measure("context after compaction (+10 new events)", "GET", f"{long}/context")
        measure("context after compaction, max_messages=5", "GET", f"{long}/context?max_messages=5")
        measure("context after compaction, max_messages=20", "GET", f"{long}/context?max_messages=20")
    print(
        "| operation | DynamoDB requests | S3 requests | items read | read units | USD per 1M (DynamoDB) | messages |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, ddb, s3, items, rru, messages in rows:
        usd = rru * DYNAMODB_PER_M_RRU
        print(f"| {name} | {ddb} | {s3} | {items} | {rru} | {usd:.2f} | {'' if messages is None else messages} |")


if __name__ == "__main__":
    main()
