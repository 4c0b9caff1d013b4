"""What a million appended chat events cost, from the real handlers against moto (the cost model).

    .venv/bin/python -m bench.perf.cost [--sessions 20] [--turns 30]

A typical workload goes through the template's handlers (``local.server.LocalApi``, moto in process): sessions
created with ~200 B of state, then chat turns (a user event and an assistant reply of ~300 characters each, one
append per event), the sessions interleaved as many users' conversations are. The workload has a clock: each
session takes a turn every ``TURN_INTERVAL_S`` (a slow-chat variant: every 5 minutes; interleaved: the sessions'
turns spread evenly over it), and each stream record is stamped with the time of its append. Auto-save reads
the table's stream (the template's filter) through a model of the event source mapping (``StreamBatcher``): a
batch closes when it holds ``AutoSaveBatchSize`` records, when ``AutoSaveBatchingWindowSeconds`` have passed since
its first record, or when the next record would take its payload past Lambda's 6 MB, whichever comes first. The
compaction sweep runs every ``SWEEP_INTERVAL_S`` of the workload's clock (the 5-minute schedule: every 10 turns at
a turn per 30 s, every turn in the slow-chat variant's one per 5 minutes).

Every AWS request is counted per handler with botocore hooks; the units are computed from what was written:

- DynamoDB writes: each item written, ``ceil(max(size before, size after) / 1 KB)`` write units by DynamoDB's
  size formula (attribute names + values), ×2 inside ``TransactWriteItems``; each index entry written
  (the table's real indexes from ``template.yaml``: an entry put, deleted, or both when its key changes; none
  when no projected attribute changed), by the entry's size. Reads: ``ceil(size / 4 KB)`` per item
  (GetItem, BatchGetItem) or per request over the items it evaluated (Query), halved when eventually
  consistent. The sizes are those of the full items and index entries (the request is repeated without its
  projection on a second client that is not counted).
- S3 requests by price tier (PUT/COPY/POST/LIST, including DeleteObjects; GET and the rest).
- Lambda: the handler's CPU time (``time.process_time`` around each invocation, moto's own work left out),
  scaled by the CPU share of the function's ``MemorySize`` (one vCPU at 1,769 MB), plus an assumed round
  trip per AWS request that the function waits for; ×MemorySize as GB-seconds. The CPU is this machine's,
  not Graviton's: read the Lambda rows as an estimate, the request and unit rows as exact.
- Logs: the bytes the handlers write (at the template's default ``LogLevel``, the metrics' EMF lines included)
  plus Lambda's START/END/REPORT lines unless the function's ``LoggingConfig`` (Globals merged, at the
  parameters' defaults) has ``SystemLogLevel`` WARN or ERROR, which leaves them out; transfer: the API's response
  bodies.

Streams read by Lambda triggers and the EventBridge schedule cost nothing per event. Prices: ``PRICES_AS_OF``.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import random
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import local  # noqa: F401 - puts the shared layer on sys.path
from agent_memory.stores.dynamo.sizes import item_size
from bench.support.environment import bench_environment

TABLE = "agent-memory-cost"
BUCKET = "agent-memory-cost-context"

# --- us-east-1 on-demand list prices (USD) ----------------------------------------------------------------------
PRICES_AS_OF = "2025-06, us-east-1 list prices (DynamoDB on-demand after its 2024-11-01 reduction)"
API_HTTP_PER_M_REQUESTS = 1.00  # HTTP API, first 300 M a month, per 512 KB of request
LAMBDA_PER_M_REQUESTS = 0.20
LAMBDA_ARM_PER_GB_S = 0.0000133334  # arm64 (the template's architecture), first 7.5 G GB-s a month
DYNAMODB_PER_M_WRU = 0.625
DYNAMODB_PER_M_RRU = 0.125
DYNAMODB_STORAGE_PER_GB_MONTH = 0.25
DYNAMODB_PITR_PER_GB_MONTH = 0.20
S3_PER_K_PUT_LIST = 0.005  # PUT, COPY, POST (DeleteObjects), LIST
S3_PER_K_GET = 0.0004  # GET, HEAD and the rest (DeleteObject and DeleteObjectVersion are free)
S3_STORAGE_PER_GB_MONTH = 0.023
LOGS_INGEST_PER_GB = 0.50
TRANSFER_OUT_PER_GB = 0.09

# --- model assumptions ---------------------------------------------------------------------------------------------
VCPU_MB = 1769  # Lambda gives one vCPU at 1,769 MB and a proportional share below it
ROUND_TRIP_S = {"dynamodb": 0.006, "s3": 0.020, "events": 0.010}  # waited for (and billed) per request, assumed
COLD_START_FRACTION = 0.01  # of append invocations that pay the handler's INIT
PLATFORM_LOG_BYTES = 330  # START, END and REPORT lines per invocation (when the system log level keeps them)
TURN_INTERVAL_S = 30  # a user turn (and its reply) per session every 30 s
SWEEP_INTERVAL_S = 300  # the 5-minute CompactionSchedule
TEXT_CHARS = 300
PAYLOAD_LIMIT_BYTES = 6 * 1024 * 1024  # a synchronous invocation's payload: a stream batch closes before passing it

S3_PUT_TIER = {"PutObject", "CopyObject", "DeleteObjects", "ListObjectVersions", "ListObjectsV2", "ListObjects"}
S3_FREE = {"DeleteObject"}
DDB_WRITES = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}
KB = 1024

SAMPLE_TEXT = (
    "I want to plan a trip to Lisbon next spring with my sister and we need a hotel near the river that is quiet "
    "and not too expensive because last time the room was tiny and the breakfast was late every morning so please "
    "compare three options and tell me which one has the best reviews for families with a small dog and a car"
)
WORDS = SAMPLE_TEXT.split()


# --- DynamoDB's item size formula: agent_memory.stores.dynamo.sizes (the store sizes its items by it too) -----------


@dataclass(frozen=True)
class Index:
    name: str
    keys: tuple[str, ...]  # the index's own key attributes
    projection: str  # ALL or KEYS_ONLY (INCLUDE: the listed attributes)
    include: tuple[str, ...] = ()

    def entry(self, item: dict[str, Any] | None, table_keys: tuple[str, ...]) -> dict[str, Any] | None:
        """The item's entry in this index (None when the item lacks an index key: a sparse index)."""
        if not item or any(k not in item for k in self.keys):
            return None
        if self.projection == "ALL":
            return item
        names = set(table_keys) | set(self.keys) | set(self.include)
        return {k: v for k, v in item.items() if k in names}


def table_indexes(template: dict[str, Any]) -> tuple[tuple[str, ...], list[Index]]:
    """The table's key attributes and its LSIs and GSIs, as ``template.yaml`` defines them."""
    props = template["Resources"]["MemoryTable"]["Properties"]
    table_keys = tuple(k["AttributeName"] for k in props["KeySchema"])
    indexes = []
    for spec in props.get("LocalSecondaryIndexes", []) + props.get("GlobalSecondaryIndexes", []):
        keys = tuple(k["AttributeName"] for k in spec["KeySchema"] if k["AttributeName"] not in table_keys)
        if spec in props.get("GlobalSecondaryIndexes", []):
            keys = tuple(k["AttributeName"] for k in spec["KeySchema"])
        projection = spec["Projection"]
        indexes.append(
            Index(spec["IndexName"], keys, projection["ProjectionType"], tuple(projection.get("NonKeyAttributes", [])))
        )
    return table_keys, indexes


def item_kind(key: dict[str, Any]) -> str:
    sk = key.get("SK", {}).get("S", "")
    return {"V#": "event", "S#": "session", "#S": "state", "C#": "claim"}.get(sk[:2], "other")


# --- the meter ----------------------------------------------------------------------------------------------------


@dataclass
class Usage:
    """What one component (a function's invocations) used."""

    invocations: int = 0
    cpu_s: float = 0.0
    billed_s: float = 0.0
    requests: Counter[str] = field(default_factory=Counter)  # "service:Operation"
    wru: Counter[str] = field(default_factory=Counter)  # by what was written: item kind or index
    wru_tx: Counter[str] = field(default_factory=Counter)  # the part of ``wru`` written inside a transaction (×2)
    rru: float = 0.0
    failed_writes: int = 0
    log_bytes: int = 0
    api_requests: int = 0
    response_bytes: int = 0
    init_cpu_s: float = 0.0


class Meter:
    """botocore hooks that attribute every request, and the units it consumed, to the current component."""

    def __init__(self, raw: Any, table_keys: tuple[str, ...], indexes: list[Index], sink: CountingSink) -> None:
        self.raw = raw  # an uncounted client of the same moto, for item images and full-size reads
        self.table_keys = table_keys
        self.indexes = indexes
        self.sink = sink
        self.usage: dict[str, Usage] = defaultdict(Usage)
        self.current = "setup"
        self.excluded_cpu = 0.0  # moto's and the meter's own work, inside the invocation being timed
        self._in_hook = False

    # time spent outside the service's code
    @contextmanager
    def excluded(self) -> Iterator[None]:
        if self._in_hook:
            yield
            return
        self._in_hook = True
        start = time.process_time()
        try:
            yield
        finally:
            self.excluded_cpu += time.process_time() - start
            self._in_hook = False

    def attach(self, *clients: Any) -> None:
        for c in clients:
            # the API's own parameters (before-call sees the serialized HTTP request); the same request context
            # reaches after-call
            c.meta.events.register("before-parameter-build.*.*", self._before)
            c.meta.events.register("after-call.*.*", self._after)

    def _get(self, key: dict[str, Any]) -> dict[str, Any] | None:
        item: dict[str, Any] | None = self.raw.get_item(TableName=TABLE, Key=key, ConsistentRead=True).get("Item")
        return item

    def _key(self, item: dict[str, Any]) -> dict[str, Any]:
        return {k: item[k] for k in self.table_keys}

    def _writes(self, operation: str, params: dict[str, Any]) -> list[tuple[str, dict[str, Any], int]]:
        """(action, key, factor) of every item a write request touches."""
        if operation == "PutItem":
            return [("put", self._key(params["Item"]), 1)]
        if operation in {"UpdateItem", "DeleteItem"}:
            return [("write", params["Key"], 1)]
        if operation == "BatchWriteItem":
            out = []
            for requests in params["RequestItems"].values():
                for r in requests:
                    if "PutRequest" in r:
                        out.append(("put", self._key(r["PutRequest"]["Item"]), 1))
                    else:
                        out.append(("write", r["DeleteRequest"]["Key"], 1))
            return out
        out = []
        for action in params["TransactItems"]:
            (kind, spec), *_ = action.items()
            key = self._key(spec["Item"]) if kind == "Put" else spec["Key"]
            out.append(("check" if kind == "ConditionCheck" else "write", key, 2))
        return out

    def _before(self, model: Any, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        with self.excluded():
            service, operation = model.service_model.service_name, model.name
            usage = self.usage[self.current]
            usage.requests[f"{service}:{operation}"] += 1
            if service == "dynamodb" and operation in DDB_WRITES:
                context["cost_images"] = [(a, k, self._get(k), f) for a, k, f in self._writes(operation, params)]
            elif service == "dynamodb":
                context["cost_params"] = json.loads(json.dumps(params, default=str))

    def _after(self, http_response: Any, parsed: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        with self.excluded():
            service, operation = model.service_model.service_name, model.name
            usage = self.usage[self.current]
            if service == "dynamodb" and operation in DDB_WRITES:
                self._charge_writes(usage, context.get("cost_images") or [], failed="Error" in parsed)
            elif service == "dynamodb" and operation in {"GetItem", "BatchGetItem", "Query", "Scan"}:
                usage.rru += self._read_units(operation, context.get("cost_params") or {})

    def _charge_writes(self, usage: Usage, images: list[Any], failed: bool) -> None:
        for action, key, old, factor in images:
            new = None if failed else self._get(key)
            kind = item_kind(key)
            size = max(item_size(old), item_size(new))
            usage.wru[kind] += factor * max(1, math.ceil(size / KB))
            if factor == 2:
                usage.wru_tx[kind] += factor * max(1, math.ceil(size / KB))
            if failed or action == "check":
                usage.failed_writes += int(failed)
                continue
            for index in self.indexes:
                before, after = index.entry(old, self.table_keys), index.entry(new, self.table_keys)
                if before is None and after is None:
                    continue
                keys_changed = (before is None) != (after is None) or any(
                    before[k] != after[k] for k in index.keys if before and after
                )
                if before is not None and after is not None and not keys_changed and before == after:
                    continue  # no projected attribute changed: the index is not written
                writes = [e for e in (before, after) if e is not None] if keys_changed else [after]
                usage.wru[f"index {index.name}"] += sum(max(1, math.ceil(item_size(e) / KB)) for e in writes)

    def _read_units(self, operation: str, params: dict[str, Any]) -> float:
        """Read units of a read request, from the full items (or index entries) it evaluated."""
        full = _without_projection(params)
        if operation == "GetItem":
            item = self.raw.get_item(**full).get("Item")
            units = max(1, math.ceil(item_size(item) / (4 * KB)))
            return units if full.get("ConsistentRead") else units / 2
        if operation == "BatchGetItem":
            total = 0.0
            for table, spec in full["RequestItems"].items():
                for key in spec["Keys"]:
                    item = self.raw.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
                    units = max(1, math.ceil(item_size(item) / (4 * KB)))
                    total += units if spec.get("ConsistentRead") else units / 2
            return total
        response = getattr(self.raw, "query" if operation == "Query" else "scan")(**full)
        size = sum(item_size(i) for i in response.get("Items", []))
        units = max(1, math.ceil(size / (4 * KB)))
        return units if full.get("ConsistentRead") else units / 2

    @contextmanager
    def invocation(self, component: str, memory_mb: int, platform_bytes: int = PLATFORM_LOG_BYTES) -> Iterator[Usage]:
        """Time one handler invocation and bill it: CPU scaled by the memory's CPU share plus round trips."""
        usage = self.usage[component]
        previous, self.current = self.current, component
        before_requests = Counter(usage.requests)
        log_start = self.sink.bytes
        excluded_start = self.excluded_cpu
        start = time.process_time()
        try:
            yield usage
        finally:
            cpu = time.process_time() - start - (self.excluded_cpu - excluded_start)
            waited = sum(
                ROUND_TRIP_S.get(name.split(":")[0], 0.0) * (n - before_requests[name])
                for name, n in usage.requests.items()
            )
            usage.invocations += 1
            usage.cpu_s += cpu
            billed_ms = math.ceil((cpu * max(1.0, VCPU_MB / memory_mb) + waited) * 1000)
            usage.billed_s += billed_ms / 1000
            usage.log_bytes += self.sink.bytes - log_start + platform_bytes
            self.current = previous


def _without_projection(params: dict[str, Any]) -> dict[str, Any]:
    """A read request returning whole items (or index entries): what DynamoDB charges a read by."""
    full = {k: v for k, v in params.items() if k not in {"ProjectionExpression", "Select", "FilterExpression"}}
    if "RequestItems" in full:
        full["RequestItems"] = {
            t: {k: v for k, v in spec.items() if k not in {"ProjectionExpression", "ExpressionAttributeNames"}}
            for t, spec in full["RequestItems"].items()
        }
    used = " ".join(str(full.get(k, "")) for k in ("KeyConditionExpression", "ConditionExpression"))
    if "ExpressionAttributeNames" in full:
        names = {k: v for k, v in full["ExpressionAttributeNames"].items() if k in used}
        full.pop("ExpressionAttributeNames")
        if names:
            full["ExpressionAttributeNames"] = names
    if "ExpressionAttributeValues" in full:
        values = {k: v for k, v in full["ExpressionAttributeValues"].items() if k in used}
        full.pop("ExpressionAttributeValues")
        if values:
            full["ExpressionAttributeValues"] = values
    return full


class CountingSink(io.TextIOBase):
    """Stands in for stdout while the handlers run: counts the bytes they log, keeps none."""

    def __init__(self) -> None:
        self.bytes = 0

    def write(self, s: str) -> int:
        self.bytes += len(s.encode())
        return len(s)


# --- the stream's event source mapping, on the workload's clock ----------------------------------------------


@dataclass
class StreamBatcher:
    """Lambda's batching of a stream shard, on the workload's clock: a batch opens with its first record and
    closes when it holds ``batch_size`` records, when ``window_s`` have passed since that record, or when the
    next record would take the invocation's payload past ``PAYLOAD_LIMIT_BYTES``, whichever comes first. (One
    batch at a time per shard, as with ``ParallelizationFactor`` 1: the function's own run time, seconds against
    a window of minutes, is left out.)"""

    batch_size: int
    window_s: float
    pending: list[tuple[float, int, dict[str, Any]]] = field(default_factory=list)  # (time, payload bytes, record)
    closed_by: Counter[str] = field(default_factory=Counter)
    payload_bytes: int = 0  # of every record added

    def add(self, at: float, record: dict[str, Any]) -> None:
        nbytes = len(json.dumps(record)) + 2
        self.payload_bytes += nbytes
        self.pending.append((at, nbytes, record))

    def due(self, now: float, flush: bool = False) -> Iterator[list[dict[str, Any]]]:
        """The batches that have closed by ``now`` (with ``flush``, the last one too, as its window would)."""
        while self.pending:
            opened = self.pending[0][0]
            count, size, reason = 0, len('{"Records": []}'), "window"
            for at, nbytes, _ in self.pending:
                if at > opened + self.window_s:
                    break
                if size + nbytes > PAYLOAD_LIMIT_BYTES:
                    reason = "payload"
                    break
                count, size = count + 1, size + nbytes
                if count == self.batch_size:
                    reason = "count"
                    break
            if reason == "window":
                closes = opened + self.window_s
            elif reason == "count":
                closes = self.pending[count - 1][0]
            else:  # the record that does not fit arrives
                closes = self.pending[count][0]
            if now < closes and not flush:
                return  # still open: later records may join it
            batch = [r for _, _, r in self.pending[:count]]
            del self.pending[:count]
            self.closed_by[reason if now >= closes else "end of run"] += 1
            yield batch


# --- the workload -----------------------------------------------------------------------------------------------


def _at_defaults(template: dict[str, Any], value: Any) -> Any:
    """``value`` with the intrinsics a LoggingConfig uses (Ref, Fn::If, Fn::Equals, Fn::Or, Fn::Not) evaluated at
    the parameters' defaults; ``None`` for ``AWS::NoValue``."""
    if not isinstance(value, dict) or len(value) != 1:
        return value
    ((name, argument),) = value.items()
    if name == "Ref":
        if argument == "AWS::NoValue":
            return None
        return str(template["Parameters"][argument].get("Default", ""))
    if name in {"Condition", "Fn::Condition"}:
        return _at_defaults(template, template["Conditions"][argument])
    if name == "Fn::If":
        condition, when_true, when_false = argument
        chosen = when_true if _at_defaults(template, template["Conditions"][condition]) else when_false
        return _at_defaults(template, chosen)
    arguments = [_at_defaults(template, a) for a in argument]
    if name == "Fn::Equals":
        return str(arguments[0]) == str(arguments[1])
    if name == "Fn::Or":
        return any(arguments)
    if name == "Fn::And":
        return all(arguments)
    if name == "Fn::Not":
        return not arguments[0]
    raise ValueError(f"not evaluated here: {name}")


def platform_log_bytes(template: dict[str, Any], function: str) -> int:
    """The platform's bytes an invocation of ``function`` logs: none when its system log level is WARN or ERROR
    (Lambda's JSON log format; SAM merges the Globals' LoggingConfig into the function's)."""
    config = template["Globals"]["Function"].get("LoggingConfig", {}) | (
        template["Resources"][function]["Properties"].get("LoggingConfig") or {}
    )
    level = _at_defaults(template, config.get("SystemLogLevel"))
    json_format = _at_defaults(template, config.get("LogFormat")) == "JSON"
    return 0 if json_format and level in {"WARN", "ERROR"} else PLATFORM_LOG_BYTES


def memory_mb(template: dict[str, Any], function: str) -> int:
    own = template["Resources"][function]["Properties"].get("MemorySize")
    return int(own or template["Globals"]["Function"]["MemorySize"])


def chat_text(rng: random.Random) -> str:
    words: list[str] = []
    while len(" ".join(words)) < TEXT_CHARS:
        words.append(rng.choice(WORDS))
    return " ".join(words)[:TEXT_CHARS]


def state_of(size: int) -> dict[str, Any]:
    """Session state whose JSON is about ``size`` bytes."""
    return {"profile": "p" * max(0, size - 16)}


def run(
    sessions: int,
    turns: int,
    state_bytes: int,
    interleaved: bool,
    batch_size: int | None = None,
    window_s: float | None = None,
    turn_interval_s: float = TURN_INTERVAL_S,
) -> dict[str, Any]:
    """Drive the workload through the handlers; return every component's usage and the storage left behind."""
    import boto3

    from local.apigw import LambdaContext
    from local.inprocess import in_process_aws
    from local.server import LocalApi, configure_environment, local_names
    from local.streams import read_to_end, stream_mappings
    from local.template import load_handler, load_template, routes, schedules

    template = load_template()
    configure_environment(template, None)
    names = local_names(template)
    api = LocalApi(template)
    route_function = {(r.method, r.path): r.function for r in routes(template)}
    batch = {"AutoSaveBatchSize": str(batch_size)} if batch_size else {}
    if window_s is not None:
        batch["AutoSaveBatchingWindowSeconds"] = str(window_s)
    (mapping,) = stream_mappings(template, names | batch)
    (sweep,) = schedules(template, names)
    table_keys, indexes = table_indexes(template)
    sink = CountingSink()
    real_stdout, sys.stdout = sys.stdout, sink
    rng = random.Random(14)
    try:
        with in_process_aws(TABLE, BUCKET) as clients:
            from moto.core.botocore_stubber import BotocoreStubber

            raw = boto3.client("dynamodb", region_name="us-east-1")
            streams = boto3.client("dynamodbstreams", region_name="us-east-1")
            meter = Meter(raw, table_keys, indexes, sink)
            meter.attach(clients["dynamodb"], clients["s3"], clients["events"])
            serialized = BotocoreStubber.process_request

            def timed(self: Any, request: Any) -> Any:
                with meter.excluded():  # moto's emulation is not the function's work
                    return serialized(self, request)

            BotocoreStubber.process_request = timed  # type: ignore[method-assign]
            init_start = time.process_time()
            load_handler(next(r for r in routes(template) if r.function == "AppendEventFunction"))
            meter.usage["append"].init_cpu_s = time.process_time() - init_start

            def call(component: str, method: str, path: str, template_path: str, body: Any, expect: int) -> None:
                function = route_function[(method, template_path)]
                with meter.invocation(
                    component, memory_mb(template, function), platform_log_bytes(template, function)
                ) as usage:
                    status, reply = api.call(method, path, body)
                assert status == expect, (path, status, reply)
                usage.api_requests += 1
                usage.response_bytes += len(json.dumps(reply)) if reply is not None else 0

            arn = clients["dynamodb"].describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
            iterators: dict[str, str] = {}
            batcher = StreamBatcher(mapping.batch_size, mapping.window_s)
            appended_at: dict[str, list[float]] = defaultdict(list)  # session id -> its appends' workload times
            batch_sizes: list[int] = []
            batch_users: list[int] = []
            autosave = load_handler(mapping)
            sweeper = load_handler(sweep)
            timeout_s = float(template["Resources"][mapping.function]["Properties"].get("Timeout", 300))

            def read_stream(now: float) -> None:
                """Hand the stream's new records to the mapping, each at the time of its append (a compaction
                event the sweep appended: ``now``, the sweep's time)."""
                for record in read_to_end(streams, arn, iterators, mapping.patterns):
                    session = record["dynamodb"]["Keys"]["PK"]["S"].rsplit("#", 1)[-1]
                    times = appended_at[session]
                    batcher.add(times.pop(0) if times else now, record)

            def drain_stream(now: float, flush: bool) -> None:
                read_stream(now)
                for batch in batcher.due(now, flush):
                    context = LambdaContext(function_name=mapping.function, memory_limit_in_mb=1024)
                    context.deadline = time.time() + timeout_s
                    function = mapping.function
                    with meter.invocation(
                        "autosave", memory_mb(template, function), platform_log_bytes(template, function)
                    ):
                        result = autosave({"Records": batch}, context)
                    assert result == {"batchItemFailures": []}, result
                    batch_sizes.append(len(batch))
                    batch_users.append(len({r["dynamodb"]["Keys"]["PK"]["S"] for r in batch}))

            def run_sweep(now: float) -> None:
                event = {"detail-type": "Scheduled Event", "source": "aws.events", "detail": {}}
                context = LambdaContext(function_name=sweep.function, deadline=time.time() + 300)
                with meter.invocation(
                    "sweep", memory_mb(template, sweep.function), platform_log_bytes(template, sweep.function)
                ):
                    report = sweeper(event, context)
                assert not report["failed"], report
                read_stream(now)  # the compaction events it appended

            base = "/apps/{app_name}/users/{user_id}/sessions"
            for s in range(sessions):
                body = {"session_id": f"s{s}", "state": state_of(state_bytes)}
                call("create", "POST", f"/apps/chat/users/u{s}/sessions", base, body, 201)
            events_path = base + "/{session_id}/events"

            def turn(s: int, t: int, at: float) -> None:
                for author, role in (("user", "user"), ("assistant", "model")):
                    appended_at[f"s{s}"].append(at)
                    event = {
                        "author": author,
                        "invocation_id": f"inv-{t}",
                        "content": {"role": role, "parts": [{"text": chat_text(rng)}]},
                    }
                    call("append", "POST", f"/apps/chat/users/u{s}/sessions/s{s}/events", events_path, event, 201)

            sweep_every = max(1, round(SWEEP_INTERVAL_S / turn_interval_s))  # turns of a session between sweeps
            # The workload's clock: a session takes a turn every turn_interval_s; interleaved, the sessions' turns
            # are spread evenly over that interval, one after another, each session's turns follow each other.
            if interleaved:
                for t in range(turns):
                    for s in range(sessions):
                        turn(s, t, (t + s / sessions) * turn_interval_s)
                    drain_stream((t + 1) * turn_interval_s, flush=False)
                    if (t + 1) % sweep_every == 0:
                        run_sweep((t + 1) * turn_interval_s)
            else:
                for s in range(sessions):
                    for t in range(turns):
                        turn(s, t, (s * turns + t) * turn_interval_s)
                        drain_stream((s * turns + t + 1) * turn_interval_s, flush=False)
                        if (t + 1) % sweep_every == 0:
                            run_sweep((s * turns + t + 1) * turn_interval_s)
            drain_stream(math.inf, flush=True)
            run_sweep(math.inf)
            BotocoreStubber.process_request = serialized  # type: ignore[method-assign]
            storage = measure_storage(raw, clients["s3"], table_keys, indexes)
    finally:
        sys.stdout = real_stdout
    return {
        "appended": sessions * turns * 2,
        "sessions": sessions,
        "state_bytes": state_bytes,
        "interleaved": interleaved,
        "usage": {name: _usage_json(u) for name, u in meter.usage.items() if name != "setup"},
        "storage": storage,
        "autosave_batches": {
            "batch_size": mapping.batch_size,
            "window_s": mapping.window_s,
            "records": batch_sizes,
            "sessions": batch_users,
            "closed_by": dict(batcher.closed_by),
            "payload_bytes": batcher.payload_bytes,
        },
        "memory_mb": {
            "append": memory_mb(template, "AppendEventFunction"),
            "autosave": memory_mb(template, mapping.function),
            "sweep": memory_mb(template, sweep.function),
        },
    }


def _usage_json(u: Usage) -> dict[str, Any]:
    return {
        "invocations": u.invocations,
        "cpu_s": u.cpu_s,
        "billed_s": u.billed_s,
        "requests": dict(u.requests),
        "wru": dict(u.wru),
        "wru_tx": dict(u.wru_tx),
        "rru": u.rru,
        "failed_writes": u.failed_writes,
        "log_bytes": u.log_bytes,
        "api_requests": u.api_requests,
        "response_bytes": u.response_bytes,
        "init_cpu_s": u.init_cpu_s,
    }


def measure_storage(raw: Any, s3: Any, table_keys: tuple[str, ...], indexes: list[Index]) -> dict[str, Any]:
    """Bytes stored: items and index entries with DynamoDB's 100 bytes of overhead each, every S3 version."""
    table = index_bytes = items = events = 0
    by_index: Counter[str] = Counter()
    for page in raw.get_paginator("scan").paginate(TableName=TABLE):
        for item in page["Items"]:
            items += 1
            events += item_kind(item) == "event"
            table += item_size(item) + 100
            for index in indexes:
                entry = index.entry(item, table_keys)
                if entry is not None:
                    index_bytes += item_size(entry) + 100
                    by_index[index.name] += item_size(entry) + 100
    s3_bytes = 0
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=BUCKET):
        s3_bytes += sum(v["Size"] for v in page.get("Versions", []))
    return {
        "items": items,
        "events": events,
        "table_bytes": table,
        "index_bytes": index_bytes,
        "index_bytes_by": dict(by_index),
        "s3_bytes": s3_bytes,
    }


# --- prices -------------------------------------------------------------------------------------------------------


def component_costs(result: dict[str, Any]) -> dict[str, float]:
    """USD per million appended events, by component."""
    per = 1e6 / result["appended"]
    usage = result["usage"]
    mb = result["memory_mb"]
    costs: dict[str, float] = {}
    api = sum(u["api_requests"] for u in usage.values())
    costs["API Gateway HTTP API"] = api * per * API_HTTP_PER_M_REQUESTS / 1e6

    def lambda_cost(name: str, memory: int) -> float:
        u = usage.get(name)
        if not u:
            return 0.0
        seconds = u["billed_s"]
        if u["init_cpu_s"]:
            seconds += COLD_START_FRACTION * u["invocations"] * u["init_cpu_s"] * max(1.0, VCPU_MB / memory)
        return float(
            per * (u["invocations"] * LAMBDA_PER_M_REQUESTS / 1e6 + seconds * memory / 1024 * LAMBDA_ARM_PER_GB_S)
        )

    def dynamodb_cost(name: str) -> float:
        u = usage.get(name)
        if not u:
            return 0.0
        return float(per * (sum(u["wru"].values()) * DYNAMODB_PER_M_WRU + u["rru"] * DYNAMODB_PER_M_RRU) / 1e6)

    def s3_cost(name: str) -> float:
        u = usage.get(name)
        if not u:
            return 0.0
        put = sum(n for op, n in u["requests"].items() if op.startswith("s3:") and op[3:] in S3_PUT_TIER)
        get = sum(
            n
            for op, n in u["requests"].items()
            if op.startswith("s3:") and op[3:] not in S3_PUT_TIER and op[3:] not in S3_FREE
        )
        return float(per * (put * S3_PER_K_PUT_LIST + get * S3_PER_K_GET) / 1e3)

    costs["append Lambda"] = lambda_cost("append", mb["append"])
    costs["append DynamoDB"] = dynamodb_cost("append")
    costs["create session (Lambda, DynamoDB, EventBridge)"] = (
        lambda_cost("create", 512)
        + dynamodb_cost("create")
        + per * usage.get("create", {}).get("requests", {}).get("events:PutEvents", 0) / 1e6
    )
    costs["auto-save Lambda"] = lambda_cost("autosave", mb["autosave"])
    costs["auto-save DynamoDB"] = dynamodb_cost("autosave")
    costs["auto-save S3 requests"] = s3_cost("autosave")
    costs["compaction sweep (Lambda, DynamoDB, S3)"] = (
        lambda_cost("sweep", mb["sweep"]) + dynamodb_cost("sweep") + s3_cost("sweep")
    )
    log_bytes = sum(u["log_bytes"] for u in usage.values())
    response_bytes = sum(u["response_bytes"] for u in usage.values())
    costs["logs, transfer"] = per * (log_bytes * LOGS_INGEST_PER_GB + response_bytes * TRANSFER_OUT_PER_GB) / 1e9
    return costs


def storage_per_month(result: dict[str, Any]) -> tuple[float, float, float]:
    """(DynamoDB GB, S3 GB, USD a month) for a million appended events."""
    per = 1e6 / result["appended"]
    s = result["storage"]
    ddb_gb = (s["table_bytes"] + s["index_bytes"]) * per / 1e9
    s3_gb = s["s3_bytes"] * per / 1e9
    usd = ddb_gb * (DYNAMODB_STORAGE_PER_GB_MONTH + DYNAMODB_PITR_PER_GB_MONTH) + s3_gb * S3_STORAGE_PER_GB_MONTH
    return ddb_gb, s3_gb, usd


# --- the append keyed by seq (docs/design.md, "An append keyed by seq": a designed alternative, not built) ---------
# (The claim-first append, built, is what the measured rows price: docs/design.md, "The claim-first append".)

# The LSIs it drops (the events' own sort key is their seq; reads by time walk it newest first), and the item it
# adds per event: ``E#…`` / ``I#{event id}`` with the writer's token, its time and the incarnation.
DESIGN_DROPPED_INDEXES = ("by_seq", "by_ts")
DESIGN_ID_ITEM_BYTES = 150


def design_append(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` as the seq-keyed append would have used it, from the sizes measured: every event (a
    compaction's too) written by a plain PutItem (1× its units, not 2×) with an id item beside it (1 WRU), the
    session item's update out of the transaction (1×; its writes outside one, the sweep's settling, as they
    were), no entry in the dropped LSIs, and four requests an append (the session read, the id item, the event,
    the counters): two more round trips than a transaction's append or a claim-first one, whose claim
    (UpdateItem) becomes the counters' update and which gains the session read (1 RRU) and the id item's put.
    Storage loses the LSIs' entries and gains an id item an event."""
    out: dict[str, Any] = json.loads(json.dumps(result))
    for name in ("append", "sweep"):
        u = out["usage"].get(name)
        if not u:
            continue
        transactions = u["requests"].pop("dynamodb:TransactWriteItems", 0)
        # the claim-first appends (their claim is the append's only UpdateItem): already 1× and out of a
        # transaction; the design adds the session read and the id item's put to each
        claims = u["requests"].get("dynamodb:UpdateItem", 0) if name == "append" else 0
        wru = u["wru"]
        # appends with a state delta (none in this workload) keep the transaction: only events and counters move
        for kind in ("event", "session"):
            if kind in wru:
                wru[kind] -= u["wru_tx"].get(kind, 0) / 2
        for index in DESIGN_DROPPED_INDEXES:
            wru.pop(f"index {index}", None)
        events = wru.get("event", 0.0) and (result["appended"] if name == "append" else transactions)
        wru["id"] = float(events)
        u["requests"]["dynamodb:PutItem"] = u["requests"].get("dynamodb:PutItem", 0) + 2 * transactions
        u["requests"]["dynamodb:UpdateItem"] = u["requests"].get("dynamodb:UpdateItem", 0) + transactions
        u["billed_s"] += 2 * transactions * ROUND_TRIP_S["dynamodb"]
        if claims:
            u["requests"]["dynamodb:GetItem"] = u["requests"].get("dynamodb:GetItem", 0) + claims
            u["requests"]["dynamodb:PutItem"] += claims
            u["rru"] = u.get("rru", 0) + claims
            u["billed_s"] += 2 * claims * ROUND_TRIP_S["dynamodb"]
    storage = out["storage"]
    dropped = sum(storage["index_bytes_by"].get(i, 0) for i in DESIGN_DROPPED_INDEXES)
    storage["index_bytes"] -= dropped
    storage["table_bytes"] += storage["events"] * (DESIGN_ID_ITEM_BYTES + 100)
    return out


def _per_event(result: dict[str, Any], name: str) -> str:
    u = result["usage"][name]
    n = result["appended"]
    wru = ", ".join(f"{k} {v / n:.2f}" for k, v in sorted(u["wru"].items()))
    requests = ", ".join(f"{k} {v / n:.3f}" for k, v in sorted(u["requests"].items()))
    cpu_ms = 1000 * u["cpu_s"] / max(1, u["invocations"])
    billed_ms = 1000 * u["billed_s"] / max(1, u["invocations"])
    log_b = u["log_bytes"] / max(1, u["invocations"])
    return (
        f"{name}: {u['invocations']} invocations, CPU {cpu_ms:.1f} ms and billed {billed_ms:.0f} ms each, "
        f"{log_b:.0f} B logged each; "
        f"per appended event: WRU {sum(u['wru'].values()) / n:.2f} ({wru}), RRU {u['rru'] / n:.2f}, "
        f"requests: {requests}; failed writes {u['failed_writes']}"
    )


def _batches(result: dict[str, Any]) -> str:
    """How the stream mapping cut the auto-save batches."""
    b = result["autosave_batches"]
    records, sessions = b["records"], b["sessions"]
    n = max(1, len(records))
    closed = ", ".join(f"{k} {v}" for k, v in sorted(b["closed_by"].items()))
    return (
        f"auto-save batches (BatchSize {b['batch_size']}, window {b['window_s']:g} s): {len(records)}, "
        f"{sum(records) / n:.1f} records and {sum(sessions) / n:.1f} sessions each, "
        f"{sum(records) / max(1, sum(sessions)):.2f} records per session a save, "
        f"{b['payload_bytes'] / max(1, sum(records)):.0f} B of payload a record; closed by {closed}"
    )


def run_variant(
    sessions: int,
    turns: int,
    state_bytes: int,
    interleaved: bool,
    batch_size: int | None = None,
    window_s: float | None = None,
    turn_interval_s: float = TURN_INTERVAL_S,
) -> dict[str, Any]:
    """One workload in a fresh interpreter (its own moto, caches and handler modules)."""
    spec = json.dumps(
        {
            "sessions": sessions,
            "turns": turns,
            "state_bytes": state_bytes,
            "interleaved": interleaved,
            "batch_size": batch_size,
            "window_s": window_s,
            "turn_interval_s": turn_interval_s,
        }
    )
    out = subprocess.run(
        [sys.executable, "-m", "bench.perf.cost", "--variant", spec], capture_output=True, text=True, check=False
    )
    if out.returncode:
        raise SystemExit(f"variant {spec} failed:\n{out.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=20, help="conversations interleaved")
    parser.add_argument("--turns", type=int, default=30, help="turns (user + assistant events) per conversation")
    parser.add_argument("--variant", help=argparse.SUPPRESS)
    parser.add_argument(
        "--autosave-batch-size", type=int, help="also price auto-save with this AutoSaveBatchSize (a lever)"
    )
    parser.add_argument(
        "--autosave-window", type=float, help="also price auto-save with this AutoSaveBatchingWindowSeconds (a lever)"
    )
    parser.add_argument("--only-default", action="store_true", help="the default workload's table only")
    parser.add_argument("--only-variant", help="of the other workloads, only those whose label contains this")
    args = parser.parse_args()
    if args.variant:
        spec = json.loads(args.variant)
        # the metrics on: their EMF lines are log lines CloudWatch ingests (and bills) like any other
        bench_environment(TABLE, BUCKET, POWERTOOLS_LOG_LEVEL="INFO", POWERTOOLS_METRICS_DISABLED="false")
        print(json.dumps(run(**spec)))
        return
    base = run_variant(args.sessions, args.turns, 200, True)
    costs = component_costs(base)
    print(f"{base['appended']:,} events appended in {base['sessions']} interleaved sessions; prices {PRICES_AS_OF}\n")
    print("| per 1M appended events | USD |")
    print("|---|---:|")
    for name, usd in costs.items():
        print(f"| {name} | {usd:.2f} |")
    print(f"| **total** | **{sum(costs.values()):.2f}** |\n")
    for line in ("append", "autosave", "sweep"):
        print(_per_event(base, line))
    print(_batches(base))
    print()
    lines: list[tuple[str, dict[str, Any]]] = []
    variants: dict[str, tuple[int, bool, int | None, float | None, float]] = {
        "one session per auto-save batch (200 B state)": (200, False, None, None, TURN_INTERVAL_S),
        "4 KB of session state": (4096, True, None, None, TURN_INTERVAL_S),
        "40 KB of session state": (40960, True, None, None, TURN_INTERVAL_S),
        "the old auto-save default (AutoSaveBatchSize 10, window 60 s)": (200, True, 10, 60.0, TURN_INTERVAL_S),
        "slow chat, a turn every 5 minutes (a sweep after every turn)": (200, True, None, None, 300.0),
    }
    if args.only_default:
        variants = {}
    if args.autosave_batch_size or args.autosave_window is not None:
        label = f"AutoSaveBatchSize {args.autosave_batch_size}, window {args.autosave_window} s"
        variants[label] = (200, True, args.autosave_batch_size, args.autosave_window, TURN_INTERVAL_S)
    if args.only_variant:
        variants = {k: v for k, v in variants.items() if args.only_variant in k}
    for label, (state, interleaved, size, window, interval) in variants.items():
        lines.append((label, run_variant(args.sessions, args.turns, state, interleaved, size, window, interval)))
    for label, other in lines:
        c = component_costs(other)
        wru = sum(other["usage"]["append"]["wru"].values()) / other["appended"]
        print(
            f"{label}: total {sum(c.values()):.2f} USD per 1M appended events (append DynamoDB "
            f"{c['append DynamoDB']:.2f}, {wru:.1f} WRU an append; auto-save Lambda {c['auto-save Lambda']:.2f}, "
            f"DynamoDB {c['auto-save DynamoDB']:.2f}, S3 {c['auto-save S3 requests']:.2f}; with the seq-keyed append "
            f"{sum(component_costs(design_append(other)).values()):.2f}); {_batches(other)}"
        )
    design = design_append(base)
    d = component_costs(design)
    wru = sum(design["usage"]["append"]["wru"].values()) / design["appended"]
    rru = design["usage"]["append"]["rru"] / design["appended"]
    print(
        'the append is claim-first (built: the rows above; docs/design.md, "The claim-first append"); the append '
        "keyed by seq (docs/design.md, a designed alternative, not built), priced from this run's sizes: total "
        f"{sum(d.values()):.2f} USD per 1M appended events (append DynamoDB {d['append DynamoDB']:.2f}, {wru:.2f} WRU "
        f"and {rru:.2f} RRU an append; append Lambda {d['append Lambda']:.2f}; compaction sweep "
        f"{d['compaction sweep (Lambda, DynamoDB, S3)']:.2f}); storage {storage_per_month(design)[0]:.2f} GB in "
        f"DynamoDB, {storage_per_month(design)[2]:.2f} USD a month with PITR"
    )
    ddb_gb, s3_gb, usd = storage_per_month(base)
    s = base["storage"]
    print(
        f"\nstorage of 1M appended events: DynamoDB {ddb_gb:.2f} GB (table {s['table_bytes'] / base['appended']:.0f} B "
        f"and indexes {s['index_bytes'] / base['appended']:.0f} B an event, 100 B overhead per item and entry), "
        f"S3 {s3_gb:.3f} GB (every version); {usd:.2f} USD a month with PITR"
    )


if __name__ == "__main__":
    main()
