"""The S3 memory store's inline records: a small save keeps its records in the manifest it writes
anyway (one PUT, no part) until they pass ``inline_max_bytes``, then a save writes them all out as a segment.
Real boto3 against moto; what is stored is read back from the bucket in its stored format
(``tests/support/memory_objects.py``)."""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest

from agent_memory.search import Doc, SearchIndex
from agent_memory.stores.memory_parts import decode_part
from agent_memory.stores.ports import MemoryRecord
from agent_memory.stores.s3_memories import S3MemoryStore
from bench.support.aws_counter import RequestCounter
from tests.support.aws import BUCKET, race
from tests.support.embedders import HashEmbedder
from tests.support.memory_objects import inline_records, version_bytes

PREFIX = "memories/app/alice/"
EMBEDDER = HashEmbedder()


def build(records: list[MemoryRecord]) -> SearchIndex:
    return SearchIndex.build([Doc(id=r.id, text=r.text, context=r.context) for r in records], EMBEDDER)


def store(aws: dict[str, Any], **options: Any) -> S3MemoryStore:
    return S3MemoryStore(lambda: aws["s3"], BUCKET, build, SearchIndex.from_bytes, SearchIndex.combine, **options)


def record(i: int, text: str | None = None) -> MemoryRecord:
    return MemoryRecord(
        id=f"m{i}", text=text or f"fact {i} about tea and kites number {i}", author="user", timestamp=1.0 + i
    )


def manifest(aws: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(aws["s3"].get_object(Bucket=BUCKET, Key=PREFIX + "manifest.json")["Body"].read())
    return data


def parts(aws: dict[str, Any]) -> list[str]:
    listed = aws["s3"].list_object_versions(Bucket=BUCKET, Prefix=PREFIX + "parts/")
    return [v["Key"] for v in listed.get("Versions", [])]


def held(aws: dict[str, Any]) -> list[str]:
    """Every record id the manifest holds inline or names in a part, in order (an id twice: listed twice)."""
    m = manifest(aws)
    ids: list[str] = []
    for key in ([m["snapshot"]] if m.get("snapshot") else []) + m["segments"]:
        ids += [r.id for r in decode_part(aws["s3"].get_object(Bucket=BUCKET, Key=key)["Body"].read())[0]]
    return ids + [r.id for r in inline_records(m)]


QUERIES = ["tea", "kites number 3", "fact 7", "cello", "green tea kites"]


def test_small_saves_write_only_the_manifest_and_search_as_parts_would(aws: dict[str, Any]) -> None:
    inline = store(aws)
    counter = RequestCounter().attach(aws["s3"])
    for i in range(6):
        assert inline.add("app", "alice", [record(2 * i), record(2 * i + 1)]) == [f"m{2 * i}", f"m{2 * i + 1}"]
    assert counter.count("s3", "PutObject") == 6  # one PUT a save: the manifest
    assert parts(aws) == [] and held(aws) == [f"m{i}" for i in range(12)]
    # A cold reader (a new container) finds them, ranked and scored exactly as the same saves stored as parts.
    cold = store(aws).view("app", "alice")
    assert set(cold.records) == {f"m{i}" for i in range(12)} and cold.records["m5"] == record(5)
    as_parts = store(aws, inline_max_bytes=0)
    for i in range(6):
        as_parts.add("app", "bob", [record(2 * i), record(2 * i + 1)])
    reference = store(aws).view("app", "bob").index
    assert store(aws).view("app", "bob").records.keys() == cold.records.keys()
    for query in QUERIES:
        found = cold.index.search(query, 5, EMBEDDER)
        assert found and found == reference.search(query, 5, EMBEDDER)


def test_inline_records_are_written_out_as_one_segment_once_they_pass_the_bound(aws: dict[str, Any]) -> None:
    bound = 2000
    small = store(aws, inline_max_bytes=bound)
    sizes = []
    for i in range(40):
        small.add("app", "alice", [record(i)])
        body = aws["s3"].get_object(Bucket=BUCKET, Key=PREFIX + "manifest.json")["Body"].read()
        sizes.append(len(json.loads(body).get("i", "")))
    assert max(sizes) <= bound  # the manifest's inline records stay within the bound
    assert 0 in sizes and max(sizes) > bound // 2  # written out when full, and full before that
    m = manifest(aws)
    assert m["segments"] or m["snapshot"]  # some went to parts (a merge too, at 9 segments)
    ids = held(aws)
    assert sorted(ids) == sorted(f"m{i}" for i in range(40)) and len(ids) == len(set(ids))  # each once
    view = store(aws).view("app", "alice")
    assert all(
        view.index.search(f"fact {i} about tea and kites number {i}", 1, EMBEDDER)[0][0] == f"m{i}" for i in (0, 17, 39)
    )


def test_a_forgotten_inline_record_is_in_no_version_of_any_object(aws: dict[str, Any]) -> None:
    s = store(aws)
    s.add("app", "alice", [record(1, "my password is hunter2")])
    s.add("app", "alice", [record(2, "I like green tea")])
    s.add("app", "alice", [record(3, "I play the oboe")])
    assert b"hunter2" in version_bytes(aws["s3"], BUCKET, PREFIX)  # inline in three manifest versions
    s.forget("app", "alice", ["m1"])
    stored = version_bytes(aws["s3"], BUCKET, PREFIX)
    assert b"hunter2" not in stored and b"green tea" in stored and b"oboe" in stored
    assert "x" not in manifest(aws)  # the earlier manifests' deletion is done
    view = store(aws).view("app", "alice")
    assert set(view.records) == {"m2", "m3"} and view.index.search("oboe", 1, EMBEDDER)[0][0] == "m3"
    s.add("app", "alice", [record(4, "I grow basil")])  # inline again, after the forget's snapshot
    assert set(store(aws).view("app", "alice").records) == {"m2", "m3", "m4"} and inline_records(manifest(aws))


def test_concurrent_small_saves_of_one_user_lose_nothing(aws: dict[str, Any]) -> None:
    def writer(w: int) -> None:
        s = store(aws)  # a container of its own
        for i in range(5):
            assert s.add("app", "alice", [record(100 * w + i)]) == [f"m{100 * w + i}"]

    race(*(functools.partial(writer, w) for w in range(4)))
    expected = {f"m{100 * w + i}" for w in range(4) for i in range(5)}
    ids = held(aws)
    assert set(ids) == expected and len(ids) == len(expected)  # every record, each once
    assert set(store(aws).view("app", "alice").records) == expected


def test_a_memory_stored_before_inline_records_reads_and_takes_them(aws: dict[str, Any]) -> None:
    """A manifest of the version before (no ``"i"``) reads as it did; the next small save adds records inline
    beside its parts; a forget merges parts and inline records into one snapshot."""
    old = store(aws, inline_max_bytes=0)
    old.add("app", "alice", [record(1, "likes green tea")])
    old.add("app", "alice", [record(2, "plays the cello")])
    assert "i" not in manifest(aws) and len(parts(aws)) == 2
    s = store(aws)
    assert set(s.view("app", "alice").records) == {"m1", "m2"}
    assert s.add("app", "alice", [record(3, "allergic to cats"), record(2)]) == ["m3"]
    assert len(parts(aws)) == 2 and [r.id for r in inline_records(manifest(aws))] == ["m3"]
    view = store(aws).view("app", "alice")
    assert (
        view.index.search("cats", 1, EMBEDDER)[0][0] == "m3" and view.index.search("cello", 1, EMBEDDER)[0][0] == "m2"
    )
    s.forget("app", "alice", ["m1"])
    m = manifest(aws)
    assert "i" not in m and m["segments"] == [] and len(parts(aws)) == 1 and held(aws) == ["m2", "m3"]


def test_each_users_inline_records_are_their_own(aws: dict[str, Any]) -> None:
    s = store(aws)
    s.add("app", "alice", [record(1, "alice likes tea")])
    s.add("app", "bob", [record(2, "bob likes coffee")])
    assert set(store(aws).view("app", "alice").records) == {"m1"}
    assert set(store(aws).view("app", "bob").records) == {"m2"}
    s.forget_all("app", "alice")
    assert store(aws).view("app", "alice").records == {} and b"alice likes" not in version_bytes(
        aws["s3"], BUCKET, PREFIX
    )
    assert set(store(aws).view("app", "bob").records) == {"m2"}


@pytest.mark.parametrize("size", [1, 300])
def test_a_save_too_large_for_the_manifest_writes_a_part_with_the_inline_records(
    aws: dict[str, Any], size: int
) -> None:
    s = store(aws, inline_max_bytes=8000)
    s.add("app", "alice", [record(0)])
    assert [r.id for r in inline_records(manifest(aws))] == ["m0"]
    s.add("app", "alice", [record(i) for i in range(1, 1 + size)])
    if size == 1:
        assert parts(aws) == [] and len(inline_records(manifest(aws))) == 2
    else:  # one segment holding the earlier inline record and the new ones; the manifest holds none
        m = manifest(aws)
        assert len(parts(aws)) == 1 and "i" not in m and held(aws) == [f"m{i}" for i in range(1 + size)]
