"""One contract per long-term memory port, run against the AWS adapter (moto), the in-memory one and (claims) the
SQLite one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_memory.search.index import Doc, SearchIndex
from agent_memory.stores.claims import DynamoClaimStore
from agent_memory.stores.inmemory import InMemoryClaimStore, InMemoryMemoryStore
from agent_memory.stores.memories import S3MemoryStore, encode_part
from agent_memory.stores.ports import STALE_AFTER_S, ClaimStore, MemoryRecord, MemoryStore
from agent_memory.stores.sqlite import SqliteClaimStore, SqliteDatabase
from tests.conftest import BUCKET, TABLE


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["memory", "sqlite", "dynamodb"])
def claims(request: pytest.FixtureRequest, clock: Clock, tmp_path: Path) -> Iterator[ClaimStore]:
    if request.param == "memory":
        yield InMemoryClaimStore(clock)
        return
    if request.param == "sqlite":
        db = SqliteDatabase(tmp_path / "agent-memory.db")
        yield SqliteClaimStore(db, clock)
        db.close()
        return
    aws: dict[str, Any] = request.getfixturevalue("aws")
    yield DynamoClaimStore(aws["dynamodb"], TABLE, clock)


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


def test_abandon_gives_back_only_uncommitted_claims(claims: ClaimStore) -> None:
    claims.claim("app", "alice", ["landed", "lost"])
    claims.commit("app", "alice", ["landed"])
    claims.abandon("app", "alice", ["landed", "lost", "never-claimed"])
    assert claims.claim("app", "alice", ["landed", "lost"]) == {"lost"}


def test_commit_events_settles_every_uncommitted_event_claim(claims: ClaimStore, clock: Clock) -> None:
    claims.claim("app", "alice", ["E#s1#e1", "E#s1#e2", "T#abc"])
    claims.commit("app", "alice", ["E#s1#e1"])
    claims.commit_events("app", "alice")
    clock.now += STALE_AFTER_S + 1
    # The event claims never go stale now; the text claim, still uncommitted, does.
    assert claims.claim("app", "alice", ["E#s1#e1", "E#s1#e2", "T#abc"]) == {"T#abc"}
    assert claims.claim("app", "bob", ["E#s1#e1"]) == {"E#s1#e1"}  # per user


def test_add_skips_records_already_held_and_returns_what_it_stored(memories: MemoryStore) -> None:
    assert memories.add("app", "alice", [record(1), record(2)]) == ["m1", "m2"]
    assert memories.add("app", "alice", [record(2), record(3)]) == ["m3"]  # a retry, or a racing save
    assert memories.add("app", "alice", [record(1)]) == []
    view = memories.view("app", "alice")
    assert set(view.records) == {"m1", "m2", "m3"}
    assert sorted(i for i, _ in view.index.search("fact", 10)) == ["m1", "m2", "m3"]  # no duplicates


def test_forgetting_what_is_not_there_changes_nothing(memories: MemoryStore) -> None:
    memories.add("app", "alice", [record(1, "likes green tea")])
    memories.forget("app", "alice", ["m9"])
    memories.forget("app", "alice", ["m1"])
    memories.forget("app", "alice", ["m1"])  # idempotent
    assert memories.view("app", "alice").records == {}


def test_a_save_after_forget_all_starts_afresh(memories: MemoryStore) -> None:
    memories.add("app", "alice", [record(1), record(2)])
    memories.forget_all("app", "alice")
    memories.forget_all("app", "alice")  # idempotent
    assert memories.add("app", "alice", [record(2)]) == ["m2"]
    assert set(memories.view("app", "alice").records) == {"m2"}
    assert memories.view("app", "bob").records == {}


def s3_versions(aws: dict[str, Any]) -> list[dict[str, Any]]:
    listed = aws["s3"].list_object_versions(Bucket=BUCKET, Prefix="memories/app/alice/")
    return list(listed.get("Versions", [])) + list(listed.get("DeleteMarkers", []))


def test_the_s3_store_leaves_no_version_behind(aws: dict[str, Any]) -> None:
    store = S3MemoryStore(lambda: aws["s3"], BUCKET, build, SearchIndex.from_bytes, SearchIndex.combine)
    for i in range(12):  # merges on the way
        store.add("app", "alice", [record(i, f"fact {i} about tea")])
    store.forget("app", "alice", ["m3"])
    stored = b"".join(
        aws["s3"].get_object(Bucket=BUCKET, Key=v["Key"], VersionId=v["VersionId"])["Body"].read()
        for v in s3_versions(aws)
        if "VersionId" in v and not v["Key"].endswith("manifest.json")
    )
    assert b"fact 3 about" not in stored and b"fact 4 about" in stored
    parts = {v["Key"] for v in s3_versions(aws) if "/parts/" in v["Key"]}
    assert len(parts) == 1  # the one snapshot: every replaced part is deleted, every version of it
    store.forget_all("app", "alice")
    assert {v["Key"] for v in s3_versions(aws)} == {"memories/app/alice/manifest.json"}  # empty, no text


def test_the_s3_store_deletes_orphans_past_their_grace(aws: dict[str, Any]) -> None:
    store = S3MemoryStore(lambda: aws["s3"], BUCKET, build, SearchIndex.from_bytes, SearchIndex.combine)
    store.add("app", "alice", [record(1)])
    orphan = "memories/app/alice/parts/0123456789abcdef0123456789abcdef.mem"
    aws["s3"].put_object(Bucket=BUCKET, Key=orphan, Body=encode_part([record(5)], build([record(5)]).to_bytes()))
    store.forget("app", "alice", ["m9"])
    assert {v["Key"] for v in s3_versions(aws)} >= {orphan}  # young: perhaps a save about to name it
    patient = S3MemoryStore(
        lambda: aws["s3"], BUCKET, build, SearchIndex.from_bytes, SearchIndex.combine, orphan_grace_s=0
    )
    patient.forget("app", "alice", ["m9"])
    assert orphan not in {v["Key"] for v in s3_versions(aws)}
    assert set(patient.view("app", "alice").records) == {"m1"}
