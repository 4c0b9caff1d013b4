"""AWS requests per auto-save batch: S3 and DynamoDB requests the auto-save handler makes for one batch of
``--records`` stream records spread over k sessions, of one user or of k users (machine-independent counts).

    .venv/bin/python -m bench.perf.autosave_requests [--records 10] [--sessions 1 2 5 10] [--batches 18]

The workload goes through the template's handlers (``local.server.LocalApi`` over moto in process): each
batch appends ``--records`` events round-robin over the k sessions, reads them from the table's stream (the
template's filter) and hands them to the auto-save handler as one batch. ``--batches`` batches run in a row
so that the merges of a user's segments (every ``MAX_SEGMENTS + 1``-th save) are in the average. Requests are
counted with botocore hooks on the clients the handler uses; the lexical-only index (``EMBEDDER=none``) is
enough, since the embedder makes no AWS request.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import subprocess
import sys
from collections import Counter
from typing import Any

import local  # noqa: F401 - puts the shared layer on sys.path
from bench.support.aws_counter import RequestCounter
from bench.support.environment import bench_environment

TABLE = "agent-memory-autosave-bench"
BUCKET = "agent-memory-autosave-bench-context"


def run(records: int, sessions: int, batches: int, one_user: bool, trace: bool = False) -> Counter[str]:
    """The requests of ``batches`` auto-save batches (summed), each of ``records`` events over ``sessions``."""
    from local.apigw import LambdaContext
    from local.inprocess import in_process_aws
    from local.server import LocalApi, configure_environment, local_names
    from local.streams import read_to_end, stream_mappings
    from local.template import load_handler, load_template

    template = load_template()
    configure_environment(template, None)
    names = local_names(template)
    api = LocalApi(template)
    (mapping,) = stream_mappings(template, names)
    counts: Counter[str] = Counter()
    with in_process_aws(TABLE, BUCKET) as clients:
        import boto3

        streams = boto3.client("dynamodbstreams", region_name="us-east-1")
        arn = clients["dynamodb"].describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
        handler = load_handler(mapping)
        iterators: dict[str, str] = {}

        def user(s: int) -> str:
            return "u0" if one_user else f"u{s}"

        def new_records() -> list[dict[str, Any]]:
            return read_to_end(streams, arn, iterators, mapping.patterns)

        for s in range(sessions):
            status, _ = api.call("POST", f"/apps/chat/users/{user(s)}/sessions", {"session_id": f"s{s}"})
            assert status == 201
        new_records()
        counter = RequestCounter().attach(clients["dynamodb"], clients["s3"])
        n = 0
        for _ in range(batches):
            for i in range(records):
                s = i % sessions
                event = {"author": "user", "content": {"role": "user", "parts": [{"text": f"I like topic {n}"}]}}
                n += 1
                status, reply = api.call("POST", f"/apps/chat/users/{user(s)}/sessions/s{s}/events", event)
                assert status == 201, reply
            batch = new_records()
            assert len(batch) == records, len(batch)
            counter.reset()
            result = handler({"Records": batch}, LambdaContext())
            assert result == {"batchItemFailures": []}, result
            counts.update(f"{service}:{op}" for service, op in counter.calls)
            if trace:
                print(" ".join(op for _, op in counter.calls), file=sys.stderr)
    return counts


def run_isolated(records: int, sessions: int, batches: int, one_user: bool) -> Counter[str]:
    """``run`` in a fresh interpreter: its own moto, clients and caches."""
    spec = json.dumps([records, sessions, batches, one_user])
    out = subprocess.run(
        [sys.executable, "-m", "bench.perf.autosave_requests", "--variant", spec], capture_output=True, text=True
    )
    if out.returncode:
        raise SystemExit(f"variant {spec} failed:\n{out.stderr[-4000:]}")
    return Counter(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=10)
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 2, 5, 10])
    parser.add_argument("--batches", type=int, default=18)
    parser.add_argument("--trace", action="store_true", help="print each batch's requests in order (stderr)")
    parser.add_argument("--variant", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.variant:
        bench_environment(TABLE, BUCKET, EMBEDDER="none", AUTOSAVE_POLICY="default")
        with contextlib.redirect_stdout(io.StringIO()):  # the handlers' metrics and logs
            records, sessions, batches, one_user = json.loads(args.variant)
            counts = run(records, sessions, batches, one_user, trace=args.trace)
        print(json.dumps(counts))
        return
    rows = []
    ops: set[str] = set()
    for k in args.sessions:
        for one_user in (True, False):
            if k == 1 and not one_user:
                continue
            counts = run_isolated(args.records, k, args.batches, one_user)
            ops |= set(counts)
            rows.append((k, "1 user" if one_user else f"{k} users", counts))
    columns = sorted(ops)
    print(f"AWS requests per auto-save batch of {args.records} records (mean over {args.batches} batches)\n")
    print("| sessions | users | " + " | ".join(columns) + " | S3 PUT tier | S3 GET |")
    print("|---:|---|" + "---:|" * (len(columns) + 2))
    for k, users, counts in rows:
        per = {c: counts[c] / args.batches for c in columns}
        put = sum(v for c, v in per.items() if c.split(":")[1] in {"PutObject", "DeleteObjects", "ListObjectVersions"})
        get = sum(v for c, v in per.items() if c.split(":")[1] in {"GetObject", "HeadObject"})
        cells = " | ".join(f"{per[c]:.1f}" for c in columns)
        print(f"| {k} | {users} | {cells} | {put:.1f} | {get:.1f} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
