"""One contract per long-term memory port, run against the AWS adapter (moto), the embedded one (SQLite) and the
in-memory one."""

from __future__ import annotations

import functools
import json
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_memory.errors import ServiceUnavailable
from agent_memory.limits import MAX_PARTS
from agent_memory.search import Doc, SearchIndex
from agent_memory.stores.dynamo.claims import DynamoClaimStore
from agent_memory.stores.inmemory import InMemoryClaimStore, InMemoryMemoryStore
from agent_memory.stores.ports import ClaimStore, MemoryRecord, MemoryStore, NotStored
from agent_memory.stores.s3_memories import S3MemoryStore, encode_part
from agent_memory.stores.sqlite.claims import SqliteClaimStore
from agent_memory.stores.sqlite.database import SqliteDatabase
from agent_memory.stores.sqlite.memories import SqliteMemoryStore
from tests.support.aws import BUCKET, TABLE, race


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


@pytest.fixture(params=["memory", "s3", "s3-parts", "sqlite"])
def memories(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryStore]:
    if request.param == "memory":
        yield InMemoryMemoryStore(build, SearchIndex.combine)
    elif request.param == "sqlite":
        store = sqlite_store(tmp_path / "memory.db")
        yield store
        store.close()
    else:
        aws: dict[str, Any] = request.getfixturevalue("aws")
        # "s3": small saves keep their records inline in the manifest; "s3-parts": every save writes a part
        inline = {"inline_max_bytes": 0} if request.param == "s3-parts" else {}
        yield S3MemoryStore(lambda: aws["s3"], BUCKET, build, SearchIndex.from_bytes, SearchIndex.combine, **inline)


def sqlite_store(path: Path, **options: Any) -> SqliteMemoryStore:
    return SqliteMemoryStore(path, build, SearchIndex.from_bytes, SearchIndex.combine, **options)


def record(i: int, text: str | None = None) -> MemoryRecord:
    return MemoryRecord(id=f"m{i}", text=text or f"fact {i}", author="user", timestamp=1.0 + i)


def test_only_marked_keys_are_forgotten(claims: ClaimStore) -> None:
    assert claims.forgotten("app", "alice", ["E#s1#e1", "E#s1#e2"]) == set()
    claims.commit("app", "alice", ["E#s1#e1", "E#s1#e1"])
    assert claims.forgotten("app", "alice", ["E#s1#e1", "E#s1#e2", "E#s1#e1"]) == {"E#s1#e1"}
    assert claims.forgotten("app", "bob", ["E#s1#e1"]) == set()  # per user
    assert claims.forgotten("other", "alice", ["E#s1#e1"]) == set()  # per app
    assert claims.forgotten("app", "alice", []) == set()


def test_many_keys_in_one_call(claims: ClaimStore) -> None:
    keys = [f"E#s1#e{i}" for i in range(250)]  # more than one BatchGetItem (100) and one BatchWriteItem (25)
    claims.commit("app", "alice", keys[:130])
    assert claims.forgotten("app", "alice", keys) == set(keys[:130])


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


def test_held_names_the_ids_the_memory_holds(memories: MemoryStore) -> None:
    for i in range(12):  # parts, merges and (S3) the inline records of the last saves
        memories.add("app", "alice", [record(i)])
    memories.forget("app", "alice", ["m3"])
    asked = ["m1", "m3", "m11", "m99"]
    assert memories.held("app", "alice", asked) == {"m1", "m11"}
    assert memories.held("app", "alice", []) == set()
    assert memories.held("app", "bob", asked) == set()  # per user
    assert memories.held("other", "alice", asked) == set()  # per app


@pytest.mark.parametrize("inline", [None, 0])
def test_a_cold_s3_held_reads_no_index(aws: dict[str, Any], inline: int | None) -> None:
    store = S3MemoryStore(
        lambda: aws["s3"], BUCKET, build, SearchIndex.from_bytes, SearchIndex.combine, inline_max_bytes=inline
    )
    for i in range(12):
        store.add("app", "alice", [record(i)])
    store.forget("app", "alice", ["m3"])

    def no_index(data: bytes | memoryview) -> SearchIndex:
        raise AssertionError("held loaded a search index")

    cold = S3MemoryStore(lambda: aws["s3"], BUCKET, build, no_index, SearchIndex.combine, inline_max_bytes=inline)
    assert cold.held("app", "alice", ["m1", "m3", "m11", "m99"]) == {"m1", "m11"}


def test_an_s3_held_whose_part_is_gone_answers_as_the_view_does(aws: dict[str, Any]) -> None:
    store = S3MemoryStore(
        lambda: aws["s3"], BUCKET, build, SearchIndex.from_bytes, SearchIndex.combine, inline_max_bytes=0
    )
    for i in range(3):
        store.add("app", "alice", [record(i)])
    parts = [o for o in aws["s3"].list_object_versions(Bucket=BUCKET, Prefix="memories/app/alice/parts/")["Versions"]]
    gone = parts[0]
    aws["s3"].delete_object(Bucket=BUCKET, Key=gone["Key"], VersionId=gone["VersionId"])
    cold = S3MemoryStore(
        lambda: aws["s3"], BUCKET, build, SearchIndex.from_bytes, SearchIndex.combine, inline_max_bytes=0
    )
    held = cold.held("app", "alice", ["m0", "m1", "m2"])
    assert len(held) == 2
    assert held == set(cold.view("app", "alice").records)


def test_the_s3_store_merges_segments_and_reads_o1_objects(aws: dict[str, Any]) -> None:
    store = S3MemoryStore(lambda: aws["s3"], BUCKET, build, SearchIndex.from_bytes, SearchIndex.combine)
    for i in range(30):
        store.add("app", "alice", [record(i)])
    keys = [o["Key"] for o in aws["s3"].list_objects_v2(Bucket=BUCKET, Prefix="memories/app/alice/")["Contents"]]
    assert len(keys) <= 1 + 1 + 9  # the manifest, a snapshot, at most MAX_SEGMENTS (+1 in flight) segments
    fresh = S3MemoryStore(lambda: aws["s3"], BUCKET, build, SearchIndex.from_bytes, SearchIndex.combine)
    assert len(fresh.view("app", "alice").records) == 30


def test_forget_all_shows_before_the_records_it_removes(memories: MemoryStore) -> None:
    memories.add("app", "alice", [record(1), record(2)])
    seen: list[list[str]] = []
    memories.forget_all("app", "alice", lambda held: seen.append(sorted(held)))
    assert seen == [["m1", "m2"]] and memories.view("app", "alice").records == {}


def test_a_forget_all_whose_before_fails_forgets_nothing(memories: MemoryStore) -> None:
    memories.add("app", "alice", [record(1)])

    def refuse(held: Any) -> None:
        raise RuntimeError("the marks could not be written")

    with pytest.raises(RuntimeError):
        memories.forget_all("app", "alice", refuse)
    assert set(memories.view("app", "alice").records) == {"m1"}


@pytest.mark.parametrize("backend", ["s3", "sqlite"])  # in memory, a forget-all holds the store's lock throughout
def test_a_save_landing_during_forget_all_is_shown_to_before(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    if backend == "s3":
        aws: dict[str, Any] = request.getfixturevalue("aws")
        store: MemoryStore = S3MemoryStore(
            lambda: aws["s3"], BUCKET, build, SearchIndex.from_bytes, SearchIndex.combine
        )
    else:
        store = sqlite_store(tmp_path / "memory.db")
    store.add("app", "alice", [record(1)])
    seen: list[list[str]] = []

    def before(held: Any) -> None:
        seen.append(sorted(held))
        if len(seen) == 1:  # a save lands after the forget-all read the memory, before it is written
            store.add("app", "alice", [record(2)])

    store.forget_all("app", "alice", before)
    assert seen == [["m1"], ["m1", "m2"]]  # the forget-all was redone over the view holding the save
    assert store.view("app", "alice").records == {}


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


def test_an_s3_search_decodes_only_the_records_it_returns(aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    store = S3MemoryStore(lambda: aws["s3"], BUCKET, build, SearchIndex.from_bytes, SearchIndex.combine)
    for start in (0, 20):
        store.add(
            "app",
            "alice",
            [record(i, f"fact {i} about {'tea' if i % 10 == 3 else 'cake'}") for i in range(start, start + 20)],
        )
    decoded: list[str] = []
    original = MemoryRecord.from_json.__func__  # type: ignore[attr-defined]

    def counting(cls: type[MemoryRecord], data: dict[str, Any]) -> MemoryRecord:
        decoded.append(data["id"])
        return original(cls, data)  # type: ignore[no-any-return]

    monkeypatch.setattr(MemoryRecord, "from_json", classmethod(counting))
    view = S3MemoryStore(lambda: aws["s3"], BUCKET, build, SearchIndex.from_bytes, SearchIndex.combine).view(
        "app", "alice"
    )
    assert view.records and "m25" in view.records and decoded == []
    hits = [i for i, _ in view.index.search("tea", 5)]
    assert sorted(hits) == ["m13", "m23", "m3", "m33"]
    assert [view.records[i].text for i in hits] and sorted(decoded) == sorted(hits)
    assert len(view.records) == 40 and decoded == hits  # the ids alone count them


# --- the SQLite store ----------------------------------------------------------------------------------------


def test_a_forgotten_memorys_words_are_not_found(memories: MemoryStore) -> None:
    memories.add("app", "alice", [record(1, "flew to Zanzibar in May"), record(2, "plays the cello")])
    memories.forget("app", "alice", ["m1"])
    view = memories.view("app", "alice")
    assert view.index.search("zanzibar", 5) == []
    assert [i for i, _ in view.index.search("cello", 5)] == ["m2"]


def test_the_sqlite_store_keeps_everything_across_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    first = sqlite_store(path)
    first.add("app", "alice", [record(i, f"fact {i} about tea") for i in range(5)])
    first.add("app", "bob", [record(9, "bob likes chess")])
    first.forget("app", "alice", ["m2"])
    first.add("app", "carol", [record(7)])
    first.forget_all("app", "carol")
    first.close()
    reopened = sqlite_store(path)
    view = reopened.view("app", "alice")
    assert set(view.records) == {"m0", "m1", "m3", "m4"}
    assert view.records["m3"].text == "fact 3 about tea"
    assert {i for i, _ in view.index.search("tea", 10)} == {"m0", "m1", "m3", "m4"}
    assert set(reopened.view("app", "bob").records) == {"m9"}
    assert reopened.view("app", "carol").records == {}
    assert reopened.add("app", "alice", [record(2), record(3)]) == ["m2"]  # forgotten: stored again if saved again


def file_bytes(path: Path) -> bytes:
    """The database file and its write-ahead log, as on disk."""
    return b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists())


def test_a_reply_is_stored_with_its_record(memories: MemoryStore) -> None:
    answered = MemoryRecord(id="m1", text="where is the key?", author="Ana", timestamp=1.0, reply="Ben: in the shed")
    memories.add("app", "alice", [answered, record(2, "likes tea")])
    records = memories.view("app", "alice").records
    assert records["m1"].reply == "Ben: in the shed" and records["m2"].reply == ""
    assert "reply" not in records["m2"].to_json()  # a record without one keeps the stored form it had before


@pytest.mark.parametrize("kind", ["s3", "s3-parts", "sqlite"])
def test_forgetting_a_reply_scrubs_it_from_the_record_it_answered(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if kind == "sqlite":
        store: MemoryStore = sqlite_store(tmp_path / "memory.db")
    else:
        aws: dict[str, Any] = request.getfixturevalue("aws")
        inline = {"inline_max_bytes": 0} if kind == "s3-parts" else {}
        store = S3MemoryStore(lambda: aws["s3"], BUCKET, build, SearchIndex.from_bytes, SearchIndex.combine, **inline)
    question = MemoryRecord(id="m1", text="what is your PIN?", author="Ana", timestamp=1.0, reply="Ben: quokka4412")
    answer = MemoryRecord(id="m2", text="quokka4412", author="Ben", timestamp=2.0, context="Ana: what is your PIN?")
    store.add("app", "alice", [question, answer, record(3, "likes tea")])
    store.forget("app", "alice", ["m2"])
    records = store.view("app", "alice").records
    assert set(records) == {"m1", "m3"} and records["m1"].reply == "" and records["m1"].context == ""
    assert all("quokka4412" not in json.dumps(r.to_json()) for r in records.values())


def test_the_sqlite_store_scrubs_forgotten_text_from_context_index_and_file(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    store = sqlite_store(path)
    secret = MemoryRecord(id="m1", text="my PIN is quokka4412", author="user", timestamp=1.0)
    quoting = MemoryRecord(
        id="m2", text="went hiking", author="user", timestamp=2.0, context="user: my PIN is quokka4412"
    )
    store.add("app", "alice", [secret])
    store.add("app", "alice", [quoting, record(3, "likes tea")])
    assert b"quokka4412" in file_bytes(path)
    store.forget("app", "alice", ["m1"])
    view = store.view("app", "alice")
    assert set(view.records) == {"m2", "m3"} and view.records["m2"].context == ""
    assert view.index.search("quokka4412", 5) == []  # neither its own text nor the context quoting it
    assert [i for i, _ in view.index.search("hiking", 5)] == ["m2"]
    assert b"quokka4412" not in file_bytes(path)  # zeroed pages, log truncated: not in the file either
    store.add("app", "alice", [record(4, "my second secret is wombat77")])
    store.forget_all("app", "alice")
    assert b"wombat77" not in file_bytes(path) and b"hiking" not in file_bytes(path)
    assert sqlite_store(path).view("app", "alice").records == {}


def part_count(path: Path, user: str = "alice") -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("SELECT count(*) FROM memory_parts WHERE user = ?", (user,)).fetchone()[0])


def test_many_adds_keep_parts_bounded_and_everything_searchable(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    store = sqlite_store(path)
    most = 0
    for i in range(50):
        assert store.add("app", "alice", [record(i, f"fact {i} about tea")]) == [f"m{i}"]
        most = max(most, part_count(path))
    assert most <= MAX_PARTS
    assert part_count(path) == bin(50).count("1")  # a binary counter: one part per bit of the count
    for view in (store.view("app", "alice"), sqlite_store(path).view("app", "alice")):
        assert len(view.records) == 50
        assert {i for i, _ in view.index.search("tea", 100)} == {f"m{i}" for i in range(50)}
        assert [i for i, _ in view.index.search("fact 37", 1)] == ["m37"]
    store.forget("app", "alice", [f"m{i}" for i in range(0, 50, 2)])
    assert part_count(path) <= MAX_PARTS
    assert {i for i, _ in store.view("app", "alice").index.search("tea", 100)} == {f"m{i}" for i in range(1, 50, 2)}


def test_concurrent_adds_store_every_record_once(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    stores = [sqlite_store(path), sqlite_store(path)]  # two stores: as two processes on one file would
    returned: list[list[str]] = []

    def save(n: int) -> None:
        # Overlapping batches: record n*5 .. n*5+9, so each record is offered by two threads.
        ids = stores[n % 2].add("app", "alice", [record(i, f"fact {i} about tea") for i in range(n * 5, n * 5 + 10)])
        returned.append(ids)

    race(*(functools.partial(save, n) for n in range(8)))
    flat = [i for ids in returned for i in ids]
    assert sorted(flat) == sorted({f"m{i}" for i in range(45)})  # each stored by exactly one thread
    for store in stores:
        view = store.view("app", "alice")
        assert len(view.records) == 45
        assert sorted(i for i, _ in view.index.search("tea", 100)) == sorted(view.records)  # no duplicate
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM memory_ids").fetchone()[0] == 45


def test_a_slow_embedder_holds_no_write_lock(tmp_path: Path) -> None:
    entered, release = threading.Event(), threading.Event()

    def slow_build(records: list[MemoryRecord]) -> SearchIndex:
        if any(r.id == "slow" for r in records):
            entered.set()
            release.wait(10)
        return build(records)

    store = SqliteMemoryStore(tmp_path / "memory.db", slow_build, SearchIndex.from_bytes, SearchIndex.combine)
    store.add("app", "alice", [record(1, "likes tea")])
    slow = threading.Thread(target=store.add, args=("app", "alice", [MemoryRecord("slow", "slow fact", "user", 1.0)]))
    slow.start()
    assert entered.wait(10)
    try:  # while the embedder works, other writes go through (with a lock held they would wait for it)
        fast = sqlite_store(tmp_path / "memory.db", busy_timeout_s=0.2)
        assert fast.add("app", "alice", [record(2, "plays chess")]) == ["m2"]
        fast.forget("app", "alice", ["m1"])
        fast.forget_all("app", "bob")
    finally:
        release.set()
        slow.join()
    assert set(store.view("app", "alice").records) == {"m2", "slow"}


def test_records_a_racing_save_stored_meanwhile_are_not_stored_twice(tmp_path: Path) -> None:
    calls: list[list[str]] = []

    def racing_build(records: list[MemoryRecord]) -> SearchIndex:
        calls.append([r.id for r in records])
        if len(calls) == 1:  # another save lands m2 while this one indexes
            other = sqlite_store(tmp_path / "memory.db")
            assert other.add("app", "alice", [record(2, "the other save's m2")]) == ["m2"]
        return build(records)

    store = SqliteMemoryStore(tmp_path / "memory.db", racing_build, SearchIndex.from_bytes, SearchIndex.combine)
    assert store.add("app", "alice", [record(1), record(2), record(3)]) == ["m1", "m3"]
    assert calls == [["m1", "m2", "m3"], ["m1", "m3"]]  # indexed again for the rest
    view = store.view("app", "alice")
    assert view.records["m2"].text == "the other save's m2"
    assert sorted(i for i, _ in view.index.search("fact", 10)) == ["m1", "m3"]


def test_a_busy_database_answers_service_unavailable_and_stores_nothing(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    store = sqlite_store(path, busy_timeout_s=0.05)
    store.add("app", "alice", [record(1, "likes tea")])
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another process writing, for longer than the busy timeout
    try:
        with pytest.raises(NotStored) as failed:
            store.add("app", "alice", [record(2, "plays chess")])
        assert isinstance(failed.value.cause, ServiceUnavailable)
        with pytest.raises(ServiceUnavailable):
            store.forget("app", "alice", ["m1"])
        with pytest.raises(ServiceUnavailable):
            store.forget_all("app", "alice")
        assert set(store.view("app", "alice").records) == {"m1"}  # reads go on (WAL)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    reopened = sqlite_store(path)
    assert set(reopened.view("app", "alice").records) == {"m1"}
    assert reopened.add("app", "alice", [record(2, "plays chess")]) == ["m2"]  # the retry stores it


def test_a_failing_embedder_stores_nothing(tmp_path: Path) -> None:
    def broken(records: list[MemoryRecord]) -> SearchIndex:
        raise RuntimeError("embedder down")

    store = SqliteMemoryStore(tmp_path / "memory.db", broken, SearchIndex.from_bytes, SearchIndex.combine)
    with pytest.raises(NotStored) as failed:
        store.add("app", "alice", [record(1)])
    assert isinstance(failed.value.cause, RuntimeError)
    assert sqlite_store(tmp_path / "memory.db").view("app", "alice").records == {}


# --- facts (the user profile) ---------------------------------------------------------------------------------

FACTS = [{"category": "allergy", "text": "Allergic to cats"}, {"category": "place", "text": "Lives in Porto"}]


def with_facts(i: int, text: str, facts: list[dict[str, str]] | None, context: str = "") -> MemoryRecord:
    return MemoryRecord(id=f"m{i}", text=text, author="user", timestamp=1.0 + i, facts=facts, context=context)


def test_a_records_facts_are_kept_through_merges_and_rewrites(memories: MemoryStore) -> None:
    memories.add("app", "alice", [with_facts(0, "I am allergic to cats and live in Porto", FACTS)])
    memories.add("app", "alice", [with_facts(1, "hello", [])])
    memories.add("app", "alice", [with_facts(2, "saved before facts existed", None)])
    # m3's context quotes m1: forgetting m1 rewrites m3 (its context scrubbed); its facts must survive that.
    memories.add("app", "alice", [with_facts(3, "I live in Porto", FACTS[1:], context="user: hello")])
    for i in range(4, 14):  # enough segments for the S3 store to merge on the way
        memories.add("app", "alice", [with_facts(i, f"fact {i}", [{"category": "other", "text": f"fact {i}"}])])
    memories.forget("app", "alice", ["m1"])
    records = memories.view("app", "alice").records
    assert records["m0"].facts == FACTS and records["m2"].facts is None
    assert records["m3"].facts == FACTS[1:]
    assert records["m13"].facts == [{"category": "other", "text": "fact 13"}]


def test_the_s3_and_sqlite_stores_keep_facts_on_storage(aws: dict[str, Any], tmp_path: Path) -> None:
    first = sqlite_store(tmp_path / "memory.db")
    first.add("app", "alice", [with_facts(1, "I am allergic to cats", FACTS[:1]), with_facts(2, "old", None)])
    first.close()
    again = sqlite_store(tmp_path / "memory.db")
    try:
        stored = again.view("app", "alice").records
    finally:
        again.close()
    assert stored["m1"].facts == FACTS[:1] and stored["m2"].facts is None

    def s3_store() -> S3MemoryStore:
        return S3MemoryStore(lambda: aws["s3"], BUCKET, build, SearchIndex.from_bytes, SearchIndex.combine)

    s3_store().add("app", "alice", [with_facts(1, "I am allergic to cats", FACTS[:1]), with_facts(2, "old", None)])
    stored = s3_store().view("app", "alice").records  # a new store: no cached view
    assert stored["m1"].facts == FACTS[:1] and stored["m2"].facts is None
