"""Long-term memory: search latency, warm and cold, S3 requests per search and peak memory at 1,000 / 10,000 /
100,000 records for one user, and save throughput, against the S3 store in moto with the configured embedder
(default: MiniLM).

    .venv/bin/python -m bench.perf.memory [--sizes 1000 10000 100000] [--embedder minilm|none] [--runs 3]
                                     [--baseline DIR] [--inline-tail N]

moto runs as a server in this process; every search goes through it over HTTP, as a function's would.

- **warm**: the search function's handler (API Gateway event in, JSON out) in a process that has served a search
  of that user before: the index is cached by the manifest's ETag, one conditional GET per search; the query
  embedding is included. Median of ``--queries`` three-word queries, in each fresh process after its first search.
- **first search in a fresh process**: a new interpreter (as a new Lambda container) imports the handler, wires
  the service and answers one search: model load, S3 reads, index load, query. "adds" is first minus warm.
  The same without the model preload (``Services.preload_embedder``) shows what overlapping the load saves, and
  the boto3 floor (a fresh interpreter: ``import boto3``, an S3 client, one GET of the manifest) what any
  function pays; medians of ``--runs`` processes each, interleaved.
- ``--baseline DIR``: the first search is also measured with another checkout's layer and search handler (e.g.
  ``git worktree add /tmp/base main``), interleaved with this tree's, against the same records and indexes: a
  before / after comparison under the same machine load (the machine is shared: separate runs drift apart). The
  baseline reads a copy of the user's memory whose parts are as that tree writes them (the same records and
  index arrays): without the index's stored term order for a tree that does not store it. A tree that does not
  read ``AMEM2`` parts is refused: no stored memory holds another format.
- **S3 requests** are counted (botocore hooks) on a store without cached parts (cold) and per warm search.
- **peak RSS**: the fresh process's maximum resident set after its searches.
- **CPU time** (with ``--baseline``): every thread's CPU time in the fresh process (``time.process_time``: the
  model's preload thread included; moto's is this process's), from the interpreter's first line to the first
  search's answer, and per warm search (median), for this tree and the baseline; and the boto3 floor's. On a
  shared machine it moves far less than wall time, which a neighbour's load stretches. With it, the garbage
  collections before the first answer (counted with ``gc.callbacks`` from the child's first line, so the handler's
  import included) and their wall time.

``--inline-tail N`` seeds the last N records by saves of 10 (auto-save's size), which the manifest holds inline
while they fit (the state between two write-outs; the table says the manifest's size); the baseline's copy
holds them as one segment, as the tree before stored them.

Records are seeded through the store's ``add`` in four large parts (the index, not the write path, is what a
search costs) with the product's index builder (``Services.build_index``); document embeddings come from a disk
cache of earlier runs' MiniLM vectors when there is one (``bench.support.embedding_cache``: same vectors, computed
once).
Save throughput goes through the service's save path (forgotten events, embedding, segment, manifest) in batches of 100.
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import os
import random
import statistics
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import local  # noqa: F401 - puts the shared layer on sys.path
from bench.support.aws_counter import RequestCounter
from bench.support.corpus import WORDS, seed_records, synthetic
from bench.support.environment import bench_environment

ROOT = Path(__file__).resolve().parents[2]
LAYER = ROOT / "layers" / "shared"
TABLE = "agent-memory-bench"
BUCKET = "agent-memory-bench-context"
CHILD = r"""
import gc, json, resource, sys, time
events = json.loads(sys.stdin.read())
started = time.perf_counter()
cpu_started = time.process_time()  # every thread's CPU (the model's preload included); moto runs in the parent
gc_runs = [0, 0.0, 0.0]  # collections, and their wall seconds, until the first answer

def gc_probe(phase, info):
    if phase == "start":
        gc_runs[2] = time.perf_counter()
    else:
        gc_runs[0] += 1
        gc_runs[1] += time.perf_counter() - gc_runs[2]

gc.callbacks.append(gc_probe)
import importlib.util
sys.path.insert(0, {layer!r})
if {no_preload!r}:
    from agent_memory.composition import Services
    Services.preload_embedder = lambda self: None
spec = importlib.util.spec_from_file_location("app", {handler!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
imported = time.perf_counter()

class Context:
    function_name = "SearchMemoriesFunction"
    memory_limit_in_mb = 1024
    aws_request_id = "bench"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:bench"
    def get_remaining_time_in_millis(self):
        return 29000

def search(event):
    response = module.lambda_handler(event, Context())
    assert response["statusCode"] == 200, response
    return len(json.loads(response["body"])["memories"])

def peak_rss_mb():
    # VmHWM, this process image's own peak: ru_maxrss survives exec, so a child of a big parent (this bench,
    # holding the seed cache) would report the parent's footprint at the fork.
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

hits = search(events[0])
first = time.perf_counter()
first_cpu = time.process_time()
gc.callbacks.remove(gc_probe)
warm = []
warm_cpu = []
for event in events[1:]:
    t = time.perf_counter()
    c = time.process_time()
    search(event)
    warm.append(time.perf_counter() - t)
    warm_cpu.append(time.process_time() - c)
warm.sort()
warm_cpu.sort()
print(json.dumps({{"import": imported - started, "first": first - started, "hits": hits,
    "warm": warm[len(warm) // 2], "rss_mb": peak_rss_mb(), "first_cpu": first_cpu - cpu_started,
    "warm_cpu": warm_cpu[len(warm_cpu) // 2], "gc_runs": gc_runs[0], "gc_s": gc_runs[1]}}))
"""

FLOOR = r"""
import json, time
started = time.perf_counter()
cpu_started = time.process_time()
import boto3
s3 = boto3.client("s3")
s3.get_object(Bucket={bucket!r}, Key={key!r})["Body"].read()
print(json.dumps({{"first": time.perf_counter() - started, "first_cpu": time.process_time() - cpu_started}}))
"""


def _fresh(code: str, events: list[dict[str, Any]], env: dict[str, str]) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", code], input=json.dumps(events), capture_output=True, text=True, env=env, check=False
    )
    if out.returncode:
        raise RuntimeError(f"fresh process failed: {out.stderr[-2000:]}")
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _search_events(app_name: str, user: str, queries: list[str]) -> list[dict[str, Any]]:
    from local.apigw import http_api_event
    from local.template import load_template, routes

    path = f"/apps/{app_name}/users/{user}/memories/search"
    for route in routes(load_template()):
        params = route.match("POST", path)
        if params is not None:
            return [
                http_api_event(
                    route,
                    path,
                    params,
                    headers={"content-type": "application/json"},
                    body=json.dumps({"query": q, "top_k": 10}),
                )
                for q in queries
            ]
    raise LookupError("no POST search route in template.yaml")


def _baseline_stores_term_order(tree: Path) -> bool:
    """Whether the indexes of the tree at ``tree`` store their term order; SystemExit when it does not read
    ``AMEM2`` parts (the only format this tree can write for it)."""
    layer = tree / "layers" / "shared" / "agent_memory"
    parts = (layer / "stores" / "memory_parts.py").read_text(encoding="utf-8")
    if "AMEM2" not in parts:
        raise SystemExit(f"--baseline {tree}: its memory parts are not AMEM2, which this tree writes")
    return "term_order" in (layer / "search" / "index.py").read_text(encoding="utf-8")


def _without_term_order(index_bytes: bytes) -> bytes:
    """An index's bytes as a tree before the stored term order wrote them (the same arrays without it)."""
    import io

    import numpy as np

    with np.load(io.BytesIO(index_bytes), allow_pickle=False) as archive:
        arrays = {name: archive[name] for name in archive.files if name != "term_order"}
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def _copy_for_baseline(s3: Any, source: str, target: str, tree: Path) -> None:
    """Copy the memory under ``source`` to ``target`` with every part re-encoded as the baseline tree at
    ``tree`` writes them (the same records and index arrays): without the index's term order for a tree that
    does not store it."""
    from agent_memory.stores.memory_parts import decode_part, encode_part
    from agent_memory.stores.s3_memories import MANIFEST

    term_order = _baseline_stores_term_order(tree)
    manifest = json.loads(s3.get_object(Bucket=BUCKET, Key=source + MANIFEST)["Body"].read())
    if manifest.get("i"):  # records held inline, which a tree before them stored as a segment
        inline = zlib.decompress(base64.b64decode(manifest.pop("i")))
        key = f"{source}parts/{'0' * 31}i.mem"
        s3.put_object(Bucket=BUCKET, Key=key, Body=inline)
        manifest["segments"].append(key)
    for key in ([manifest["snapshot"]] if manifest.get("snapshot") else []) + manifest["segments"]:
        records, index_bytes = decode_part(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
        stored = bytes(index_bytes) if term_order else _without_term_order(bytes(index_bytes))
        body = encode_part(records, stored)
        s3.put_object(Bucket=BUCKET, Key=target + key[len(source) :], Body=body)
    manifest = json.loads(json.dumps(manifest).replace(source, target))
    manifest.pop("v", None)  # the copies' versions are not the originals'
    s3.put_object(Bucket=BUCKET, Key=target + MANIFEST, Body=json.dumps(manifest).encode())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per size and variant")
    parser.add_argument("--save-batches", type=int, default=20, help="batches of 100 for save throughput (0: skip)")
    parser.add_argument("--baseline", type=Path, help="another checkout whose first search is measured alongside")
    parser.add_argument(
        "--inline-tail",
        type=int,
        default=0,
        help="the last N records seeded by saves of 10 (held inline in the manifest while they fit; a baseline "
        "copy holds them as one segment)",
    )
    args = parser.parse_args()
    bench_environment(TABLE, BUCKET, EMBEDDER=args.embedder)
    from agent_memory.composition import Services
    from agent_memory.config import settings
    from agent_memory.edge.requests import MemoryText
    from agent_memory.runtime.aws import client, reset_clients
    from agent_memory.search import SearchConfig, SearchIndex
    from agent_memory.stores.s3_memories import MANIFEST, S3MemoryStore, user_prefix
    from bench.support.embedding_cache import CachingEmbedder
    from local.moto_backend import SerializedMotoServer
    from local.server import free_port
    from local.template import load_template, provision

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    port = free_port()
    server = SerializedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    os.environ["AWS_ENDPOINT_URL"] = f"http://127.0.0.1:{port}"
    reset_clients()
    provision(load_template(), client("dynamodb"), client("s3"), TABLE, BUCKET)
    child_env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    child_env.update({"POWERTOOLS_SERVICE_NAME": "bench", "POWERTOOLS_METRICS_NAMESPACE": "bench"})

    wired = Services(settings())
    embedder = wired.embedder
    cache = CachingEmbedder(embedder) if embedder is not None else None

    class Seeding(Services):
        """The composition root's index builder, its embedder answering from the seed cache."""

        @property
        def embedder(self) -> Any:
            return cache

    seeding = Seeding(settings())
    queries = [" ".join(random.Random(q).sample(WORDS, 3)) for q in range(args.queries)]
    rows: list[str] = []
    fresh_rows: list[str] = []
    baseline_rows: list[str] = []
    cpu_rows: list[str] = []
    floors: list[float] = []
    floor_cpus: list[float] = []
    try:
        for size in args.sizes:
            user = f"u{size}"
            seeder = S3MemoryStore(
                lambda: client("s3"), BUCKET, seeding.build_index, SearchIndex.from_bytes, SearchIndex.combine
            )
            records = seed_records(size)
            started = time.perf_counter()
            head = size - min(args.inline_tail, size)
            step = max(head // 4, 1)
            for start in range(0, head, step):  # four big parts: a snapshot after the merge
                seeder.add("bench", user, records[start : start + step])
            for start in range(head, size, 10):  # small saves (auto-save's): inline in the manifest while they fit
                seeder.add("bench", user, records[start : start + 10])
            manifest_bytes = len(
                client("s3").get_object(Bucket=BUCKET, Key=user_prefix("bench", user) + MANIFEST)["Body"].read()
            )
            seed_s = time.perf_counter() - started
            if cache is not None:
                cache.save()

            # in this process (the model loaded): S3 requests cold and warm, and the lexical-only search
            store = S3MemoryStore(
                lambda: client("s3"), BUCKET, wired.build_index, SearchIndex.from_bytes, SearchIndex.combine
            )
            counter = RequestCounter().attach(client("s3"))
            store.view("bench", user)
            cold_requests = counter.count("s3")
            counter.reset()
            for _ in queries:
                store.view("bench", user)
            warm_requests = counter.count("s3") / len(queries)
            counter.reset()
            index = store.view("bench", user).index
            lexical: list[float] = []
            for query in queries:
                t = time.perf_counter()
                index.search(query, 10, config=SearchConfig(mode="lexical"))
                lexical.append(time.perf_counter() - t)

            # fresh processes: the first search of a new container, then warm ones; with and without preload
            events = _search_events("bench", user, [queries[0], *queries])
            baseline_events = events
            if args.baseline is not None:
                _copy_for_baseline(
                    client("s3"), user_prefix("bench", user), user_prefix("bench", user + "v1"), args.baseline
                )
                baseline_events = _search_events("bench", user + "v1", [queries[0], *queries])
            samples: dict[str, list[dict[str, float]]] = {"preload": [], "no preload": []}
            if args.baseline is not None:
                samples["baseline"] = []
            for _ in range(args.runs):  # interleaved, so that drift in machine load hits every variant alike
                for variant in samples:
                    root = args.baseline if variant == "baseline" else ROOT
                    code = CHILD.format(
                        layer=str(root / "layers" / "shared"),
                        handler=str(root / "functions" / "search_memories" / "app.py"),
                        no_preload=variant == "no preload",
                    )
                    samples[variant].append(
                        _fresh(code, baseline_events if variant == "baseline" else events, child_env)
                    )
                floor_code = FLOOR.format(bucket=BUCKET, key=user_prefix("bench", user) + MANIFEST)
                floor_sample = _fresh(floor_code, [], child_env)
                floors.append(floor_sample["first"])
                floor_cpus.append(floor_sample["first_cpu"])
            med = {
                variant: {key: statistics.median(r[key] for r in runs) for key in runs[0]}
                for variant, runs in samples.items()
            }
            on, off = med["preload"], med["no preload"]
            rows.append(
                f"| {size:,} | {cold_requests} | {warm_requests:.0f} | {on['warm'] * 1000:.1f} | "
                f"{statistics.median(lexical) * 1000:.1f} | {on['first'] * 1000:.0f} | "
                f"{(on['first'] - on['warm']) * 1000:.0f} | {off['first'] * 1000:.0f} | {on['rss_mb']:.0f} | "
                f"{seed_s:.0f} | {manifest_bytes:,} |"
            )
            fresh_rows.append(f"{size:,}|{on['first']:.4f}|{off['first']:.4f}")
            if "baseline" in med:
                base = med["baseline"]
                adds, base_adds = on["first"] - on["warm"], base["first"] - base["warm"]
                baseline_rows.append(
                    f"| {size:,} | {on['first'] * 1000:.0f} | {adds * 1000:.0f} | {on['warm'] * 1000:.1f} | "
                    f"{base['first'] * 1000:.0f} | {base_adds * 1000:.0f} | {base['warm'] * 1000:.1f} | "
                    f"{adds / base_adds:.2f} |"
                )
                cpu_rows.append(
                    f"| {size:,} | {on['first_cpu'] * 1000:.0f} | {base['first_cpu'] * 1000:.0f} | "
                    f"{on['first_cpu'] / base['first_cpu']:.2f} | {on['warm_cpu'] * 1000:.1f} | "
                    f"{base['warm_cpu'] * 1000:.1f} | {on['gc_runs']:.0f} / {base['gc_runs']:.0f} | "
                    f"{on['gc_s'] * 1000:.1f} / {base['gc_s'] * 1000:.1f} |"
                )

        save_rate = 0.0
        if args.save_batches:
            service = wired.memories
            texts = synthetic(args.save_batches * 100, seed=11)
            started = time.perf_counter()
            for b in range(args.save_batches):
                batch = [MemoryText(text=t) for t in texts[b * 100 : (b + 1) * 100]]
                service.add_texts(app_name="bench", user_id="writer", memories=batch)
            save_rate = args.save_batches * 100 / (time.perf_counter() - started)
    finally:
        server.stop()
    floor = statistics.median(floors)
    print(f"embedder: {args.embedder}; {args.queries} queries of three words; top_k 10; {args.runs} fresh processes")
    print("per size and variant (medians); times in ms on a shared machine\n")
    print(
        "| records | S3 requests, cold search | S3 requests per warm search | warm search ms (p50, handler) | "
        "lexical-only ms (same index) | first search, fresh process ms | first − warm ms | "
        "first search without preload ms | peak RSS MB | seed s | manifest bytes |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(rows))
    print(f"\nboto3 floor (fresh process: import boto3, S3 client, GET the manifest): {floor * 1000:.0f} ms\n")
    print("| records | first search / floor | without preload / floor |")
    print("|---:|---:|---:|")
    for line in fresh_rows:
        size_text, first, off_first = line.split("|")
        print(f"| {size_text} | {float(first) / floor:.2f} | {float(off_first) / floor:.2f} |")
    if baseline_rows:
        print(f"\nthis tree against {args.baseline} (interleaved, same parts; medians):\n")
        print(
            "| records | first search ms | first − warm ms | warm ms | baseline first ms | baseline first − warm ms | "
            "baseline warm ms | first − warm / baseline |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        print("\n".join(baseline_rows))
        print(
            f"\nCPU time (every thread of the fresh process, medians; moto's is the parent's): the first search from "
            f"the interpreter's start, and one warm search; boto3 floor {statistics.median(floor_cpus) * 1000:.0f} ms\n"
        )
        print(
            "| records | first search CPU ms | baseline | now / baseline | warm search CPU ms | baseline | "
            "GC runs before the first answer, now / baseline | their wall ms, now / baseline |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        print("\n".join(cpu_rows))
    if cache is not None:
        print(f"\nseed embeddings: {cache.hits} from the cache, {cache.misses} embedded ({cache.path.name})")
    if args.save_batches:
        print(f"save throughput (service save path, batches of 100): {save_rate:.0f} records/s")


if __name__ == "__main__":
    main()
