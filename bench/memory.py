"""Long-term memory: search latency and S3 requests per search at 1,000 / 10,000 / 100,000 records for one
user, and save throughput, against the S3 store in moto with the configured embedder (default: MiniLM).

    .venv/bin/python -m bench.memory [--sizes 1000 10000 100000] [--embedder minilm|none]

Search latency is warm and in-process (the index cached by the manifest's ETag, one conditional GET per
search), reported with its ratio to a lexical-only search of the same index in the same run. Records are
seeded with large direct writes to the store (the index, not the write path, is what a search costs);
save throughput goes through the service's save path (claims, embedding, segment, manifest) in batches
of 100.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import local  # noqa: F401 - puts the shared layer on sys.path
from bench.aws_counter import RequestCounter
from bench.environment import bench_environment

TABLE = "agent-memory-bench"
BUCKET = "agent-memory-bench-context"
WORDS = [
    "trip",
    "flight",
    "hotel",
    "Lisbon",
    "Porto",
    "sister",
    "brother",
    "cat",
    "dog",
    "allergy",
    "peanuts",
    "gluten",
    "cello",
    "piano",
    "guitar",
    "marathon",
    "running",
    "swimming",
    "painting",
    "pottery",
    "garden",
    "tomatoes",
    "birthday",
    "anniversary",
    "wedding",
    "job",
    "interview",
    "promotion",
    "manager",
    "startup",
    "python",
    "rust",
    "recipe",
    "lasagna",
    "curry",
    "sushi",
    "museum",
    "concert",
    "festival",
    "camping",
    "hiking",
    "mountain",
    "beach",
    "ocean",
    "sunset",
    "coffee",
    "tea",
    "book",
    "novel",
    "poetry",
    "school",
    "university",
    "exam",
    "thesis",
    "doctor",
    "dentist",
    "insurance",
]


def synthetic(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [f"Memory {i}: " + " ".join(rng.choice(WORDS) for _ in range(14)) for i in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--queries", type=int, default=20)
    args = parser.parse_args()
    bench_environment(TABLE, BUCKET, EMBEDDER=args.embedder)
    from agent_memory.composition import services
    from agent_memory.requests import MemoryText
    from agent_memory.search.index import SearchConfig, SearchIndex
    from agent_memory.service.memories import MemoryService
    from agent_memory.stores.ports import MemoryRecord
    from agent_memory.stores.s3_memories import S3MemoryStore
    from local.inprocess import in_process_aws

    rows: list[str] = []
    with in_process_aws(TABLE, BUCKET) as clients:
        wired = services()
        embedder = wired.embedder
        build = wired.build_index

        queries = [" ".join(random.Random(q).sample(WORDS, 3)) for q in range(args.queries)]
        for size in args.sizes:
            user = f"u{size}"
            seeder = S3MemoryStore(lambda: clients["s3"], BUCKET, build, SearchIndex.from_bytes, SearchIndex.combine)
            texts = synthetic(size)
            started = time.perf_counter()
            for start in range(0, size, max(size // 4, 1)):  # four big parts: a snapshot after the merge
                chunk = texts[start : start + max(size // 4, 1)]
                seeder.add(
                    "bench", user, [MemoryRecord(f"m{start + i}", t, "user", 1.7e9) for i, t in enumerate(chunk)]
                )
            seed_s = time.perf_counter() - started
            store = S3MemoryStore(lambda: clients["s3"], BUCKET, build, SearchIndex.from_bytes, SearchIndex.combine)
            service = MemoryService(
                wired.session_store,
                store,
                wired.claim_store,
                lambda index, query, k, cut: index.search(query, k, embedder=embedder, min_score=cut),
            )
            counter = RequestCounter().attach(clients["s3"])
            started = time.perf_counter()
            service.search(app_name="bench", user_id=user, query=queries[0], top_k=10)
            cold_s = time.perf_counter() - started
            cold_requests = counter.count("s3")
            counter.reset()
            hybrid: list[float] = []
            lexical: list[float] = []
            for query in queries:
                t = time.perf_counter()
                service.search(app_name="bench", user_id=user, query=query, top_k=10)
                hybrid.append(time.perf_counter() - t)
            warm_requests = counter.count("s3") / len(queries)
            index = store.view("bench", user).index
            for query in queries:
                t = time.perf_counter()
                index.search(query, 10, config=SearchConfig(mode="lexical"))
                lexical.append(time.perf_counter() - t)
            h, lx = statistics.median(hybrid), statistics.median(lexical)
            rows.append(
                f"| {size:,} | {cold_requests} | {warm_requests:.0f} | {cold_s * 1000:.0f} | {h * 1000:.1f} | "
                f"{lx * 1000:.1f} | {h / lx:.1f} | {seed_s:.0f} |"
            )

        service = wired.memories
        batches = 20
        texts = synthetic(batches * 100, seed=11)
        started = time.perf_counter()
        for b in range(batches):
            batch = [MemoryText(text=t) for t in texts[b * 100 : (b + 1) * 100]]
            service.add_texts(app_name="bench", user_id="writer", memories=batch)
        save_s = time.perf_counter() - started
    print(f"embedder: {args.embedder}; {args.queries} queries of three words; top_k 10\n")
    print(
        "| records | S3 requests, cold search | S3 requests per warm search | cold search ms | warm search ms "
        "(median) | lexical-only ms (same index) | ratio | seed s |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(rows))
    print(f"\nsave throughput (service save path, batches of 100): {batches * 100 / save_s:.0f} records/s")


if __name__ == "__main__":
    main()
