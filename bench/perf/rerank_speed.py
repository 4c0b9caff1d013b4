"""What the learned rerank below the top 5 adds to a warm search: the service's search against the same search
without the rerank (``rerank_depth=0``), in one process, interleaved query by query, on the same index.

    .venv/bin/python -m bench.perf.rerank_speed --cache FILE [--sizes 10000 100000] [--queries 200]

The index holds LoCoMo's memories (text, two turns of context with the date, author, timestamp) repeated up to
each size, with random unit vectors quantised as the index quantises MiniLM's (scoring time does not depend on
the values; embedding 100,000 texts would take a quarter of an hour). The queries are LoCoMo's questions, their
MiniLM vectors (as typed and with neutral names) from ``bench.quality.locomo``'s ``--cache`` file or embedded before the
timing: no query is embedded while timing, so the rows are the index's own time. With random document vectors
few memories pass the 0.015 cut, so every query is also timed at ``min_score`` 0, where the rerank always
reorders a full top 50 (its most expensive case). Reported: medians of wall time and of this thread's CPU time
per search, and the ratio.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from pathlib import Path

import numpy as np

import local  # noqa: F401 - puts the shared layer on sys.path
from agent_memory.providers import embedders
from agent_memory.providers.embedders import MiniLMEmbedder
from agent_memory.search import Doc, SearchIndex, stored
from agent_memory.search.types import DEFAULT_CONFIG
from bench.quality.locomo import CATEGORIES, CachingEmbedder, documents, load_conversations


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cache", type=Path, required=True, help="bench.quality.locomo's --cache file")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    embedder = CachingEmbedder(MiniLMEmbedder())
    embedder.load(args.cache)
    conversations = load_conversations()
    memories = [d for c in conversations for d in documents(c, 2, True)]
    asked = [q.question for c in conversations for q in c.questions if q.category in CATEGORIES and q.evidence]
    queries = asked[: args.queries]
    service = DEFAULT_CONFIG
    first_pass = dataclasses.replace(service, rerank_depth=0)
    print(f"{len(queries)} LoCoMo questions, top_k 10, query vectors precomputed; medians per search\n")
    print(
        "| memories | min_score | first pass ms (CPU ms) | with the rerank ms (CPU ms) | added CPU ms | "
        "ratio (CPU) | results reordered |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for size in args.sizes:
        docs = [
            Doc(f"m{i}", m.text, m.context, m.author, m.timestamp)
            for i, m in ((i, memories[i % len(memories)]) for i in range(size))
        ]
        built = SearchIndex.build(docs)
        rng = np.random.default_rng(size)
        quantised, scales = stored.quantise(
            embedders.normalize_rows(rng.standard_normal((size, 384)).astype(np.float32))
        )
        index = built._replace(vectors=quantised, scales=scales, model="minilm")
        for query in queries:  # every text a search embeds, as typed and with neutral names, before the timing
            embedder.embed([query, index._dense_query(query, service)])
        for min_score in (None, 0.0):
            label = "0.015 (default)" if min_score is None else "0"
            index.search(queries[0], 10, embedder, min_score=min_score)  # postings built, as in a warm function
            wall: dict[str, list[float]] = {"first": [], "rerank": []}
            cpu: dict[str, list[float]] = {"first": [], "rerank": []}
            reordered = 0
            for query in queries:
                results = {}
                for name, config in (("first", first_pass), ("rerank", service)):
                    t, c = time.perf_counter(), time.thread_time()
                    results[name] = index.search(query, 10, embedder, config=config, min_score=min_score)
                    cpu[name].append(time.thread_time() - c)
                    wall[name].append(time.perf_counter() - t)
                reordered += [i for i, _ in results["first"]] != [i for i, _ in results["rerank"]]
            fw, rw = (statistics.median(wall[k]) * 1000 for k in ("first", "rerank"))
            fc, rc = (statistics.median(cpu[k]) * 1000 for k in ("first", "rerank"))
            added = statistics.median(b - a for a, b in zip(cpu["first"], cpu["rerank"], strict=True)) * 1000
            print(
                f"| {size:,} | {label} | {fw:.2f} ({fc:.2f}) | {rw:.2f} ({rc:.2f}) | {added:.2f} | "
                f"{rc / fc:.2f} | {reordered} / {len(queries)} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
