"""What a warm process keeps of the users' long-term memories: bounded by the bytes it holds, not by how many users.

A container (or ``make run``) serves many users; a user's decoded memory (records and their search index) ranges
from a few kilobytes to tens of megabytes (10,000 memories: about 20 MB). A bound by count let a 1 GB function
die after some 40 large users; this one evicts the least recently used entries once their estimated bytes pass a
budget taken from the function's configured memory.
"""

from __future__ import annotations

import os
import sys
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Any

from ..limits import MAX_MEMORY_CACHE_SHARE, MIN_MEMORY_CACHE_BYTES

# Bytes a memory record takes decoded, on average, beside its search index (its text, context, metadata, facts).
RECORD_BYTES = 700


def cache_budget(share: float = MAX_MEMORY_CACHE_SHARE) -> int:
    """The bytes the memory caches of this process may hold: ``share`` of the function's configured memory
    (``AWS_LAMBDA_FUNCTION_MEMORY_SIZE``, in MB), or of 2 GB for a process that is not a Lambda function (``make
    run``); never under ``MIN_MEMORY_CACHE_BYTES``."""
    try:
        megabytes = int(os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "2048"))
    except ValueError:
        megabytes = 2048
    return max(MIN_MEMORY_CACHE_BYTES, int(megabytes * 1024 * 1024 * share))


def _nbytes(value: Any, depth: int = 0) -> int:
    """The bytes of the numpy arrays ``value`` holds (in its attributes, lists and dicts, a few levels down)."""
    nbytes = getattr(value, "nbytes", None)
    if isinstance(nbytes, int) and hasattr(value, "dtype"):
        return nbytes
    if depth > 4 or value is None or isinstance(value, str | bytes | int | float | bool):
        return 0
    if isinstance(value, list | tuple):
        return sum(_nbytes(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return sum(_nbytes(v, depth + 1) for v in value.values())
    attributes = getattr(value, "__dict__", None)
    return sum(_nbytes(v, depth + 1) for v in attributes.values()) if isinstance(attributes, dict) else 0


def indexed_bytes(records: Any, index: Any) -> int:
    """About what a decoded memory takes: its index's arrays and a share per record (records read lazily count
    the same: they are decoded as searches reach them)."""
    return _nbytes(index) + RECORD_BYTES * len(records) + sys.getsizeof(records)


class ByteBudgetCache[K: Hashable, V]:
    """A least-recently-used mapping bounded by the bytes of its values (``size``), not their number. A value
    larger than the whole budget is not kept. Not thread-safe: its owner holds its own lock around it."""

    def __init__(self, budget: int, size: Callable[[V], int]) -> None:
        self.budget = budget
        self._size = size
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self.bytes = 0

    def get(self, key: K) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry[0]

    def put(self, key: K, value: V) -> None:
        self.pop(key)
        size = self._size(value)
        if size > self.budget:
            return
        self._entries[key] = (value, size)
        self.bytes += size
        while self.bytes > self.budget:
            _, (_, evicted) = self._entries.popitem(last=False)
            self.bytes -= evicted

    def pop(self, key: K) -> V | None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return None
        self.bytes -= entry[1]
        return entry[0]

    def values(self) -> dict[K, V]:
        """The entries as a plain dict (a copy)."""
        return {key: value for key, (value, _) in self._entries.items()}

    def __iter__(self) -> Iterator[K]:
        return iter(list(self._entries))

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)
