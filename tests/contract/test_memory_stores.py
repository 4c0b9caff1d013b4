"""One contract per long-term memory port, run against the AWS adapter (moto) and the in-memory one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agent_memory.search.index import Doc, SearchIndex
from agent_memory.stores.claims import STALE_AFTER_S, ClaimStore, DynamoClaimStore, InMemoryClaimStore
from agent_memory.stores.memories import InMemoryMemoryStore, MemoryRecord, MemoryStore, S3MemoryStore
from tests.conftest import BUCKET, TABLE


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["memory", "dynamodb"])
def claims(request: pytest.FixtureRequest, clock: Clock) -> ClaimStore:
    if request.param == "memory":
        return InMemoryClaimStore(clock)
    aws: dict[str, Any] = request.getfixturevalue("aws")
    return DynamoClaimStore(aws["dynamodb"], TABLE, clock)


def build(records: list[MemoryRecord]) -> SearchIndex:
    return SearchIndex.build([Doc(id=r.id, text=r.text, context=r.context) for r in records], None)


@pytest.fixture(params=["memory", "s3"])
def memories(request: pytest.FixtureRequest) -> Iterator[MemoryStore]:
    if request.param == "memory":
        yield InMemoryMemoryStore(build, SearchIndex.combine)
    else:
        aws: dict[str, Any] = request.getfixturevalue("aws")
        yield S3MemoryStore(lambda: aws["s3"], BUCKET, build, SearchIndex.from_bytes, SearchIndex.combine)


def record(i: int, text: str | None = None) -> MemoryRecord:
    return MemoryRecord(id=f"m{i}", text=text or f"fact {i}", author="user", timestamp=1.0 + i)


def test_a_claim_is_held_once(claims: ClaimStore) -> None:
    assert claims.claim("app", "alice", ["a", "b", "a"]) == {"a", "b"}
    assert claims.claim("app", "alice", ["a", "c"]) == {"c"}
    assert claims.claim("app", "bob", ["a"]) == {"a"}  # per user


def test_committed_claims_never_go_stale_uncommitted_ones_do(claims: ClaimStore, clock: Clock) -> None:
    claims.claim("app", "alice", ["done", "dead"])
    claims.commit("app", "alice", ["done"])
    clock.now += STALE_AFTER_S + 1
    assert claims.claim("app", "alice", ["done", "dead"]) == {"dead"}


def test_release_and_release_texts(claims: ClaimStore) -> None:
    claims.claim("app", "alice", ["E#s1#e1", "T#abc", "T#def"])
    claims.commit("app", "alice", ["E#s1#e1", "T#abc", "T#def"])
    claims.release("app", "alice", ["T#abc"])
    assert claims.claim("app", "alice", ["T#abc"]) == {"T#abc"}
    claims.release_texts("app", "alice")
    assert claims.claim("app", "alice", ["E#s1#e1", "T#abc", "T#def"]) == {"T#abc", "T#def"}


def test_many_claims_in_one_call(claims: ClaimStore) -> None:
    keys = [f"k{i}" for i in range(250)]
    assert claims.claim("app", "alice", keys[:120]) == set(keys[:120])
    assert claims.claim("app", "alice", keys) == set(keys[120:])


def test_added_records_are_searchable(memories: MemoryStore) -> None:
    memories.add("app", "alice", [record(1, "likes green tea"), record(2, "plays the cello")])
    memories.add("app", "alice", [record(3, "allergic to cats")])
    view = memories.view("app", "alice")
    assert set(view.records) == {"m1", "m2", "m3"}
    assert view.index.search("cello", 1)[0][0] == "m2"
    assert memories.view("app", "bob").records == {}


def test_forget_and_forget_all(memories: MemoryStore) -> None:
    for i in range(12):  # enough segments for the S3 store to merge on the way
        memories.add("app", "alice", [record(i, f"fact {i} about tea")])
    memories.forget("app", "alice", ["m3", "m7"])
    view = memories.view("app", "alice")
    assert set(view.records) == {f"m{i}" for i in range(12)} - {"m3", "m7"}
    assert {i for i, _ in view.index.search("tea", 20)} == set(view.records)
    memories.forget_all("app", "alice")
    assert memories.view("app", "alice").records == {}


def test_the_s3_store_merges_segments_and_reads_o1_objects(aws: dict[str, Any]) -> None:
    store = S3MemoryStore(lambda: aws["s3"], BUCKET, build, SearchIndex.from_bytes, SearchIndex.combine)
    for i in range(30):
        store.add("app", "alice", [record(i)])
    keys = [o["Key"] for o in aws["s3"].list_objects_v2(Bucket=BUCKET, Prefix="memories/app/alice/")["Contents"]]
    assert len(keys) <= 1 + 1 + 9  # the manifest, a snapshot, at most MAX_SEGMENTS (+1 in flight) segments
    fresh = S3MemoryStore(lambda: aws["s3"], BUCKET, build, SearchIndex.from_bytes, SearchIndex.combine)
    assert len(fresh.view("app", "alice").records) == 30
