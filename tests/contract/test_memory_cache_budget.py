"""What a warm process keeps of its users' memories is bounded by bytes, on the S3 and SQLite stores: searches over
many users with large memories (each user's view a fifth of the budget) keep the caches under their budget, evict
the least recently used users first, and still answer every user right."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_memory.search import Doc, SearchIndex
from agent_memory.stores.cache import ByteBudgetCache, cache_budget, indexed_bytes
from agent_memory.stores.ports import MemoryRecord, MemoryStore
from agent_memory.stores.s3_memories import S3MemoryStore
from agent_memory.stores.sqlite.memories import SqliteMemoryStore
from tests.support.aws import BUCKET

USERS = 30
PER_USER = 300


def build(records: list[MemoryRecord]) -> SearchIndex:
    return SearchIndex.build([Doc(id=r.id, text=r.text, context=r.context) for r in records], None)


def user_bytes() -> int:
    records = [
        MemoryRecord(id=f"m{i}", text=f"fact {i} about trains", author="user", timestamp=1.0) for i in range(PER_USER)
    ]
    return indexed_bytes({r.id: r for r in records}, build(records))


@pytest.fixture(params=["s3", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[MemoryStore, int]]:
    budget = 5 * user_bytes()  # room for about five users' views
    if request.param == "sqlite":
        sqlite = SqliteMemoryStore(
            tmp_path / "memory.db", build, SearchIndex.from_bytes, SearchIndex.combine, cache_bytes=budget
        )
        yield sqlite, budget
        sqlite.close()
    else:
        aws: dict[str, Any] = request.getfixturevalue("aws")
        yield (
            S3MemoryStore(
                lambda: aws["s3"], BUCKET, build, SearchIndex.from_bytes, SearchIndex.combine, cache_bytes=budget
            ),
            budget,
        )


def cached_bytes(store: MemoryStore) -> int:
    caches = [getattr(store, name) for name in ("_views", "_parts", "_written") if hasattr(store, name)]
    assert caches and all(isinstance(c, ByteBudgetCache) for c in caches)
    return sum(c.bytes for c in caches)


def test_a_warm_process_over_many_large_users_stays_under_its_budget(store: tuple[MemoryStore, int]) -> None:
    memories, budget = store
    for u in range(USERS):
        records = [
            MemoryRecord(id=f"m{i}", text=f"user {u} fact {i} about trains", author="user", timestamp=1.0)
            for i in range(PER_USER)
        ]
        memories.add("app", f"user{u}", records)
        assert len(memories.view("app", f"user{u}").records) == PER_USER
        assert cached_bytes(memories) <= budget
    # Every user still reads whole (from storage when evicted), and the caches stay within their budget.
    for u in range(USERS):
        view = memories.view("app", f"user{u}")
        assert len(view.records) == PER_USER and view.records["m7"].text == f"user {u} fact 7 about trains"
        assert cached_bytes(memories) <= budget
    views = memories._views  # type: ignore[attr-defined]
    assert 1 <= len(views) < USERS  # some kept, the least recently used evicted
    assert ("app", f"user{USERS - 1}") in views or f"memories/app/user{USERS - 1}/" in list(views)


def test_the_budget_follows_the_functions_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "1024")
    assert cache_budget() == int(1024 * 1024 * 1024 * 0.35)
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "64")
    assert cache_budget() == 32 * 1024 * 1024  # never under the floor
    cache: ByteBudgetCache[str, bytes] = ByteBudgetCache(10, len)
    cache.put("a", b"1234")
    cache.put("b", b"1234")
    assert cache.get("a") == b"1234"  # a is now the most recent
    cache.put("c", b"1234")  # 12 > 10: b, the least recently used, goes
    assert list(cache) == ["a", "c"] and cache.bytes == 8
    cache.put("huge", b"x" * 11)  # larger than the budget: not kept, nothing evicted for it
    assert list(cache) == ["a", "c"] and cache.pop("a") == b"1234" and cache.bytes == 4
