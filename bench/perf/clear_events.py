"""How long a clear of a large session takes, and that no read ever shows part of it: the service's
``clear_events`` on each backend (in memory, SQLite, DynamoDB + S3 in moto in-process).

    .venv/bin/python -m bench.perf.clear_events --backend embedded --events 100000
    .venv/bin/python -m bench.perf.clear_events --backend aws --events 10000

Prints the append time (setup), the clear's total (the commit is one write; the rest is the purge: items, claims,
memories), the requests it made (aws), and the reads after it. moto is far slower than DynamoDB per request:
read its numbers as request counts, not as production latency.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import local  # noqa: F401 - puts the shared layer on sys.path
from bench.support.aws_counter import RequestCounter

TABLE = "agent-memory-bench"
BUCKET = "agent-memory-bench-context"


@contextlib.contextmanager
def backend(name: str) -> Iterator[dict[str, Any] | None]:
    os.environ.update(
        {"BACKEND": name, "EMBEDDER": "none", "AWS_DEFAULT_REGION": "us-east-1", "POWERTOOLS_LOG_LEVEL": "ERROR"}
    )
    if name != "aws":
        with tempfile.TemporaryDirectory() as folder:
            os.environ["DATA_DIR"] = folder
            yield None
        return
    from local.inprocess import in_process_aws

    os.environ |= {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "TABLE_NAME": TABLE, "BUCKET_NAME": BUCKET}
    with in_process_aws(TABLE, BUCKET) as clients:
        yield clients


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backend", choices=["memory", "embedded", "aws"], default="embedded")
    parser.add_argument("--events", type=int, default=100_000)
    args = parser.parse_args()
    with backend(args.backend) as clients:
        from agent_memory.composition import services
        from agent_memory.errors import DeletionIncomplete

        sessions, memories = services().sessions, services().memories
        sessions.create_session(app_name="bench", user_id="u", session_id="big")
        started = time.monotonic()
        for start in range(0, args.events, 100):
            batch = [
                {"id": f"e{i}", "author": "user", "content": {"role": "user", "parts": [{"text": f"turn {i}"}]}}
                for i in range(start, min(args.events, start + 100))
            ]
            from agent_memory.models import Event

            sessions.append_events(
                app_name="bench", user_id="u", session_id="big", events=[Event.model_validate(e) for e in batch]
            )
        appended = time.monotonic() - started
        counter = RequestCounter().attach(clients["dynamodb"], clients["s3"]) if clients else None
        started = time.monotonic()
        attempts = 0
        while True:
            attempts += 1
            try:
                answer = sessions.clear_events(
                    app_name="bench", user_id="u", session_id="big", forget=memories.forget_events
                )
                break
            except DeletionIncomplete:
                # Committed: reads show nothing; a resend goes on with the purge.
                assert sessions.get_session("bench", "u", "big", limit=5)["events"] == []
        cleared = time.monotonic() - started
        after = sessions.get_session("bench", "u", "big")
        print(f"backend {args.backend}: {args.events} events appended in {appended:.1f} s")
        print(f"clear: {answer} in {cleared:.2f} s, {attempts} request(s) (503 deletion_incomplete before the last)")
        print(f"after: {len(after['events'])} events, version {after['version']}")
        if counter is not None:
            calls: dict[str, int] = {}
            for _, op in counter.calls:
                calls[op] = calls.get(op, 0) + 1
            print(f"requests: {dict(sorted(calls.items()))}")


if __name__ == "__main__":
    main()
