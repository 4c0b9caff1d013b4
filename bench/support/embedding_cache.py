"""A disk cache of document embeddings for the benchmarks that seed large stores (``bench.perf.memory``).

Seeding 100,000 records embeds 100,000 texts with MiniLM (about a quarter of an hour on two cores). The index a
benchmark searches must still be the product's: the records go through the store's ``add`` and the
composition root's index builder (``Services.build_index`` -> ``SearchIndex.build``); only the embedder that
builder calls is wrapped, so that a text embedded by an earlier run is answered from the cache with the vector
MiniLM gave it then (same name, same dimensions, bit-identical rows). Texts not in the cache are embedded by the
wrapped embedder and added. Query embeddings never come from the cache: searches use the service's embedder.

    .venv/bin/python -m bench.support.embedding_cache --sizes 100000   # fill the cache for bench.perf.memory's corpus

The cache lives in ``.cache/bench/`` (ignored by git), one file per embedder name.
"""

from __future__ import annotations

import argparse
import hashlib
import time
from pathlib import Path
from typing import Any

import numpy as np

import local  # noqa: F401 - puts the shared layer on sys.path

ROOT = Path(__file__).resolve().parents[2]
CACHE_DIR = ROOT / ".cache" / "bench"


def _key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


class CachingEmbedder:
    """``inner`` with a disk cache of its rows by text (see the module docstring). Same ``name`` and ``dim``."""

    def __init__(self, inner: Any, path: Path | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.path = path or CACHE_DIR / f"{inner.name.replace(':', '_')}.npz"
        self._rows: dict[bytes, Any] = {}
        self._added = 0
        self.hits = 0
        self.misses = 0
        if self.path.exists():
            with np.load(self.path, allow_pickle=False) as archive:
                keys, vectors = archive["keys"], archive["vectors"]
            self._rows = {bytes(k): vectors[i] for i, k in enumerate(keys)}

    def __len__(self) -> int:
        return len(self._rows)

    def embed(self, texts: list[str]) -> Any:
        keys = [_key(t) for t in texts]
        todo = [i for i, k in enumerate(keys) if k not in self._rows]
        self.hits += len(texts) - len(todo)
        self.misses += len(todo)
        if todo:
            fresh = self.inner.embed([texts[i] for i in todo])
            for row, i in zip(fresh, todo, strict=True):
                self._rows[keys[i]] = np.array(row, dtype=np.float32)
            self._added += len(todo)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for r, k in enumerate(keys):
            out[r] = self._rows[k]
        return out

    def save(self) -> None:
        """Write the cache when this run added rows."""
        if not self._added:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        keys = np.array(list(self._rows), dtype="S16")
        vectors = np.stack(list(self._rows.values())).astype(np.float32)
        tmp = self.path.with_suffix(".tmp.npz")
        np.savez(tmp, keys=keys, vectors=vectors)
        tmp.replace(self.path)
        self._added = 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[100000])
    parser.add_argument("--chunk", type=int, default=2000)
    args = parser.parse_args()
    from agent_memory.providers.embedders import MiniLMEmbedder
    from agent_memory.search.stored import embedding_text
    from agent_memory.search.types import Doc
    from bench.support.corpus import seed_records

    cache = CachingEmbedder(MiniLMEmbedder())
    # in seeding order, so that a smaller size's records (a prefix of a larger one's) are cached first
    texts = list(
        dict.fromkeys(embedding_text(Doc(r.id, f"{r.author}: {r.text}")) for r in seed_records(max(args.sizes)))
    )
    started = time.perf_counter()
    for start in range(0, len(texts), args.chunk):
        cache.embed(texts[start : start + args.chunk])
        cache.save()
        print(f"{start + args.chunk} / {len(texts)} texts, {time.perf_counter() - started:.0f} s", flush=True)
    print(f"cache {cache.path}: {len(cache)} rows")


if __name__ == "__main__":
    main()
