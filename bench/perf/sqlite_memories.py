"""The embedded long-term memory store (SQLite): the cost of ``add`` one record at a time as a user's memory
grows, and of a warm ``view`` + search.

    .venv/bin/python -m bench.perf.sqlite_memories [--records 1000] [--embedder none|minilm] [--path DIR]

``add`` is timed per call (index build with the embedder, the write transaction, merges on the way); the first
and the last 100 calls are compared. A warm search is ``view`` (one SELECT of the user's generation) plus
``SearchIndex.search`` on the cached combined index; a cold view is a new store reading the file.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import local  # noqa: F401 - puts the shared layer on sys.path
from agent_memory.search import Doc, SearchIndex
from agent_memory.stores.ports import MemoryRecord
from agent_memory.stores.sqlite.memories import SqliteMemoryStore
from bench.support.corpus import WORDS


def ms(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return f"median {statistics.median(values) * 1000:.2f} ms, p95 {p95 * 1000:.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--embedder", choices=["none", "minilm"], default="none")
    parser.add_argument("--path", type=Path, default=None, help="folder for the database (default: a temp dir)")
    args = parser.parse_args()

    embedder: Any = None
    if args.embedder == "minilm":
        from agent_memory.providers.embedders import MiniLMEmbedder

        embedder = MiniLMEmbedder()
        embedder.warm_up()

    def build(records: list[MemoryRecord]) -> SearchIndex:
        return SearchIndex.build([Doc(r.id, r.text, r.context) for r in records], embedder)

    folder = args.path or Path(tempfile.mkdtemp(prefix="bench-sqlite-memories-"))
    path = folder / "memory.db"
    store = SqliteMemoryStore(path, build, SearchIndex.from_bytes, SearchIndex.combine)
    rng = random.Random(7)
    times: list[float] = []
    for i in range(args.records):
        text = " ".join(rng.choice(WORDS) for _ in range(12)) + f" item{i}"
        record = MemoryRecord(id=f"m{i}", text=text, author="user", timestamp=float(i))
        start = time.perf_counter()
        store.add("app", "alice", [record])
        times.append(time.perf_counter() - start)

    queries = [" ".join(rng.choice(WORDS) for _ in range(3)) for _ in range(200)]
    store.view("app", "alice")  # warm the cache
    warm: list[float] = []
    for query in queries:
        start = time.perf_counter()
        view = store.view("app", "alice")
        view.index.search(query, 5, embedder)
        warm.append(time.perf_counter() - start)
    cold: list[float] = []
    for _ in range(5):
        fresh = SqliteMemoryStore(path, build, SearchIndex.from_bytes, SearchIndex.combine)
        start = time.perf_counter()
        fresh.view("app", "alice")
        cold.append(time.perf_counter() - start)
        fresh.close()
    assert len(store.view("app", "alice").records) == args.records

    print(f"SqliteMemoryStore, {args.records} records added one at a time, embedder {args.embedder}")
    print(f"  add, first 100: {ms(times[:100])}")
    print(f"  add, last 100:  {ms(times[-100:])}")
    print(f"  add, total:     {sum(times):.2f} s")
    print(f"  warm view + search (200 queries): {ms(warm)}")
    print(f"  cold view (new store, {args.records} records): {ms(cold)}")
    print(f"  database: {path.stat().st_size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
