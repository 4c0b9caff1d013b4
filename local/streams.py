"""The DynamoDB stream → Lambda event source mapping, locally (moto runs no mappings without Docker).

Polls the table's stream in moto from its start (the table is created with the server, so every record is
new; a record written before the first poll is not missed), keeps the records the template's filter admits,
and hands them to the function in batches of the mapping's ``BatchSize`` or after its
``MaximumBatchingWindowInSeconds``, as Lambda does. Records a batch reports as failed (``batchItemFailures``)
are handed over again with the next batch, from the first failed one on, as Lambda retries a stream.
"""

from __future__ import annotations

import base64
import json
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from .apigw import LambdaContext
from .template import function_events, load_handler, resolve


@dataclass(frozen=True)
class StreamMapping:
    function: str
    code_uri: str
    handler: str
    batch_size: int
    window_s: float
    patterns: list[dict[str, Any]] | None  # the mapping's filters (a record passes one of them); None: no filter


def stream_mappings(template: dict[str, Any], names: dict[str, str]) -> list[StreamMapping]:
    found = []
    for e in function_events(template, "DynamoDB"):
        filters = (e.properties.get("FilterCriteria") or {}).get("Filters") or []
        found.append(
            StreamMapping(
                function=e.function,
                code_uri=e.code_uri,
                handler=e.handler,
                batch_size=int(resolve(e.properties.get("BatchSize", 100), names)),
                window_s=float(resolve(e.properties.get("MaximumBatchingWindowInSeconds", 0), names)),
                patterns=[json.loads(f["Pattern"]) for f in filters] if filters else None,
            )
        )
    return found


def admits(patterns: list[dict[str, Any]] | None, record: dict[str, Any]) -> bool:
    """Whether a mapping with these filters hands ``record`` to its function (one pattern matching is enough)."""
    return patterns is None or any(matches(p, record) for p in patterns)


def matches(pattern: Any, value: Any) -> bool:
    """The subset of EventBridge-style filter patterns the template uses: lists of values, prefixes and
    ``exists``."""
    if isinstance(pattern, dict):
        return isinstance(value, dict) and all(matches(p, value.get(k)) for k, p in pattern.items())
    if isinstance(pattern, list):
        for option in pattern:
            if isinstance(option, dict) and "prefix" in option:
                if isinstance(value, str) and value.startswith(option["prefix"]):
                    return True
            elif isinstance(option, dict) and "exists" in option:
                if (value is not None) == bool(option["exists"]):
                    return True
            elif option == value:
                return True
        return False
    return bool(pattern == value)


def start_stream_mappings(
    template: dict[str, Any],
    names: dict[str, str],
    dynamodb: Any,
    streams: Any,
    table: str,
    window_override_s: float | None,
    stop: threading.Event,
) -> list[threading.Thread]:
    stream_arn = dynamodb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    threads = []
    for mapping in stream_mappings(template, names):
        window = mapping.window_s if window_override_s is None else window_override_s
        args = (mapping, window, streams, stream_arn, stop)
        thread = threading.Thread(target=_pump, args=args, name=f"stream-{mapping.function}", daemon=True)
        thread.start()
        threads.append(thread)
    return threads


def _start(streams: Any, stream_arn: str, shard_id: str, iterators: dict[str, str]) -> str:
    """``shard_id``, with its iterator in ``iterators`` (from the shard's oldest record, as a new mapping reads)."""
    if shard_id not in iterators:
        iterators[shard_id] = streams.get_shard_iterator(
            StreamArn=stream_arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
    return shard_id


def _pump(mapping: StreamMapping, window_s: float, streams: Any, stream_arn: str, stop: threading.Event) -> None:
    handler = load_handler(mapping)
    iterators: dict[str, str] = {}
    buffer: list[dict[str, Any]] = []
    first_at: float | None = None
    while not stop.wait(0.5):
        try:
            for shard in streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]:
                shard_id = _start(streams, stream_arn, shard["ShardId"], iterators)
                response = streams.get_records(ShardIterator=iterators[shard_id])
                iterators[shard_id] = response["NextShardIterator"]
                for record in response.get("Records", []):
                    if admits(mapping.patterns, _json_record(record)):
                        buffer.append(_json_record(record))
            if buffer and first_at is None:
                first_at = time.monotonic()
            due = buffer and (len(buffer) >= mapping.batch_size or time.monotonic() - (first_at or 0) >= window_s)
            if due:
                batch, buffer = buffer[: mapping.batch_size], buffer[mapping.batch_size :]
                result = handler({"Records": batch}, LambdaContext(function_name=mapping.function))
                failed = {f["itemIdentifier"] for f in (result or {}).get("batchItemFailures", [])}
                if failed:
                    first = next(i for i, r in enumerate(batch) if r["dynamodb"]["SequenceNumber"] in failed)
                    buffer = batch[first:] + buffer
                    print(f"stream {mapping.function}: {len(failed)} records to retry", file=sys.stderr)
                first_at = time.monotonic() if buffer else None
        except Exception as exc:  # keep the pump alive; the error is in the log
            print(f"stream {mapping.function} failed: {exc!r}", file=sys.stderr)


def read_to_end(
    streams: Any, stream_arn: str, iterators: dict[str, str], patterns: list[dict[str, Any]] | None
) -> list[dict[str, Any]]:
    """Every record of every shard written since the last call (``iterators`` keeps each shard's place), as Lambda
    delivers them and passing the mapping's filters ``patterns`` (None: all). For benchmarks that drive the
    mapping step by step; the server's pump above reads one page per shard per tick instead."""
    out: list[dict[str, Any]] = []
    for shard in streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]:
        shard_id = _start(streams, stream_arn, shard["ShardId"], iterators)
        while True:
            response = streams.get_records(ShardIterator=iterators[shard_id])
            iterators[shard_id] = response["NextShardIterator"]
            records = [_json_record(r) for r in response.get("Records", [])]
            out += [r for r in records if admits(patterns, r)]
            if not records:
                break
    return out


def _json_record(record: dict[str, Any]) -> dict[str, Any]:
    """A stream record as Lambda delivers it (JSON-safe: the approximate creation time as epoch seconds, binary
    attribute values as base64 text)."""
    out = dict(record)
    change = dict(out.get("dynamodb") or {})
    created: Any = change.get("ApproximateCreationDateTime")
    if created is not None and hasattr(created, "timestamp"):
        change["ApproximateCreationDateTime"] = created.timestamp()
    for image in ("Keys", "NewImage", "OldImage"):
        if image in change:
            change[image] = {name: _json_value(value) for name, value in change[image].items()}
    out["dynamodb"] = change
    return out


def _json_value(value: dict[str, Any]) -> dict[str, Any]:
    """One typed attribute value as Lambda's JSON holds it: ``B`` / ``BS`` base64, in maps and lists too."""
    (kind, v), *_ = value.items()
    if kind == "B":
        return {"B": base64.b64encode(v).decode("ascii")}
    if kind == "BS":
        return {"BS": [base64.b64encode(e).decode("ascii") for e in v]}
    if kind == "M":
        return {"M": {k: _json_value(e) for k, e in v.items()}}
    if kind == "L":
        return {"L": [_json_value(e) for e in v]}
    return value
