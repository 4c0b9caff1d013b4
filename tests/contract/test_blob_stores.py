"""One contract, every BlobStore adapter: in memory, files on disk, and S3 (against moto)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_memory.errors import ServiceUnavailable
from agent_memory.stores import files
from agent_memory.stores.files import FileBlobStore
from agent_memory.stores.inmemory import InMemoryBlobStore
from agent_memory.stores.ports import BlobMissing, BlobStore
from agent_memory.stores.s3 import STAGED_TAG, S3BlobStore
from tests.support.aws import BUCKET


@pytest.fixture(params=["memory", "files", "s3"])
def blobs(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BlobStore]:
    if request.param == "memory":
        yield InMemoryBlobStore()
    elif request.param == "files":
        yield FileBlobStore(tmp_path / "blobs")
    else:
        aws: dict[str, Any] = request.getfixturevalue("aws")
        store = S3BlobStore(lambda: aws["s3"], BUCKET)
        store.aws = aws  # type: ignore[attr-defined]  # for is_staged and the listing below
        yield store


def is_staged(blobs: BlobStore, key: str) -> bool:
    """Whether the adapter holds ``key`` as staged (expiring unless confirmed), read from its storage."""
    if isinstance(blobs, InMemoryBlobStore):
        return key in blobs.staged
    if isinstance(blobs, FileBlobStore):
        return blobs.is_staged(key)
    s3 = blobs.aws["s3"]  # type: ignore[attr-defined]
    tags = s3.get_object_tagging(Bucket=BUCKET, Key=key)["TagSet"]
    return any(t["Key"] == STAGED_TAG for t in tags)


def keys(blobs: BlobStore, prefix: str = "") -> set[str]:
    """Every key stored under ``prefix`` (every version, for S3), read from the adapter's storage."""
    if isinstance(blobs, InMemoryBlobStore):
        return {k for k in blobs.objects if k.startswith(prefix)}
    if isinstance(blobs, FileBlobStore):
        root = blobs._objects
        stored = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
        return {k for k in stored if k.startswith(prefix)}
    listed = blobs.aws["s3"].list_object_versions(Bucket=BUCKET, Prefix=prefix)  # type: ignore[attr-defined]
    return {v["Key"] for v in listed.get("Versions", []) + listed.get("DeleteMarkers", [])}


def test_put_get_overwrite_and_delete(blobs: BlobStore) -> None:
    blobs.put("a/b/1.json", b'{"x": 1}')
    assert blobs.get("a/b/1.json") == b'{"x": 1}'
    blobs.put("a/b/1.json", b"second")
    assert blobs.get("a/b/1.json") == b"second"
    blobs.delete("a/b/1.json")
    with pytest.raises(BlobMissing):
        blobs.get("a/b/1.json")
    blobs.delete("a/b/1.json")  # deleting what is not there is no error
    with pytest.raises(BlobMissing):
        blobs.get("never/put")


def test_delete_prefix_is_a_string_prefix_and_counts(blobs: BlobStore) -> None:
    for key in ("a/1", "a/10/x", "a/2", "ab/1", "b/1"):
        blobs.put(key, key.encode())
    assert blobs.delete_prefix("a/1") == 2  # "a/1" and "a/10/x": a prefix of keys, not a folder
    assert keys(blobs) == {"a/2", "ab/1", "b/1"}
    assert blobs.delete_prefix("a") == 2
    assert keys(blobs) == {"b/1"}
    assert blobs.delete_prefix("nothing/") == 0
    assert blobs.get("b/1") == b"b/1"


def test_delete_prefix_keeps_the_keep_prefix(blobs: BlobStore) -> None:
    blobs.put("s/old/1", b"1", staged=True)
    blobs.put("s/new/1", b"2", staged=True)
    blobs.put("s/new/2", b"3")
    assert blobs.delete_prefix("s/", keep_prefix="s/new/") == 1
    assert keys(blobs) == {"s/new/1", "s/new/2"}
    with pytest.raises(BlobMissing):
        blobs.get("s/old/1")


def test_a_callable_keep_prefix_is_asked_and_obeyed(blobs: BlobStore) -> None:
    for i in range(3):
        blobs.put(f"s/old/{i}", b"x")
        blobs.put(f"s/live/{i}", b"y")
    asked: list[int] = []

    def keep() -> str | None:
        asked.append(1)
        return "s/live/"

    assert blobs.delete_prefix("s/", keep_prefix=keep) == 3
    assert asked
    assert keys(blobs) == {f"s/live/{i}" for i in range(3)}
    assert blobs.delete_prefix("s/", keep_prefix=lambda: None) == 3  # None: keep nothing


def test_modified_before_keeps_what_was_written_at_or_after(blobs: BlobStore) -> None:
    # S3 lists LastModified to the second: bounds a few seconds away hold on every adapter.
    blobs.put("p/1", b"1")
    blobs.put("p/2", b"2")
    assert blobs.delete_prefix("p/", modified_before=time.time() - 5) == 0
    assert keys(blobs, "p/") == {"p/1", "p/2"}
    assert blobs.delete_prefix("p/", modified_before=time.time() + 5) == 2
    assert keys(blobs, "p/") == set()


def test_staged_objects_until_confirmed(blobs: BlobStore) -> None:
    blobs.put("s/1", b"1", staged=True)
    blobs.put("s/2", b"2", staged=True)
    assert is_staged(blobs, "s/1") and is_staged(blobs, "s/2")
    blobs.confirm("s/1")
    blobs.confirm("s/1")  # idempotent
    if not isinstance(blobs, S3BlobStore):  # moto 5 fails DeleteObjectTagging of a missing key (S3: NoSuchKey)
        blobs.confirm("s/missing")  # ignored
    assert not is_staged(blobs, "s/1") and is_staged(blobs, "s/2")
    assert blobs.get("s/1") == b"1"
    blobs.put("s/2", b"again")  # an unstaged put over a staged object keeps it for good
    assert not is_staged(blobs, "s/2")
    blobs.put("s/1", b"re-staged", staged=True)
    assert is_staged(blobs, "s/1")


def test_deleting_a_staged_object_leaves_no_mark(blobs: BlobStore) -> None:
    blobs.put("s/1", b"1", staged=True)
    blobs.put("s/2", b"2", staged=True)
    blobs.delete("s/1")
    assert blobs.delete_prefix("s/") >= 1  # S3 counts object versions (s/1's and its delete marker too)
    assert keys(blobs, "s/") == set()
    blobs.put("s/1", b"new")  # a later object under the same key starts unstaged
    assert not is_staged(blobs, "s/1")


# --- the file store ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["../x", "a/../../x", "/etc/passwd", "a//b", "a/./b", "", "a/", "a\x00b"])
def test_the_file_store_refuses_keys_outside_its_root(tmp_path: Path, key: str) -> None:
    store = FileBlobStore(tmp_path / "blobs")
    with pytest.raises(ValueError):
        store.put(key, b"x")
    with pytest.raises(ValueError):
        store.get(key)
    with pytest.raises(ValueError):
        store.delete(key)
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


@pytest.mark.parametrize("prefix", ["../", "a/../../", "/etc/"])
def test_the_file_store_refuses_prefixes_outside_its_root(tmp_path: Path, prefix: str) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    store = FileBlobStore(tmp_path / "root")
    with pytest.raises(ValueError):
        store.delete_prefix(prefix)
    assert outside.read_text() == "keep me"


def test_the_file_store_persists_across_instances_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    FileBlobStore(tmp_path).put("sessions/app/u/s1/events/e1/t.json", b"payload", staged=True)
    reopened = FileBlobStore(tmp_path)
    assert reopened.get("sessions/app/u/s1/events/e1/t.json") == b"payload"
    assert reopened.is_staged("sessions/app/u/s1/events/e1/t.json")
    assert list((tmp_path / "tmp").iterdir()) == []
    assert (tmp_path / "objects/sessions/app/u/s1/events/e1/t.json").read_bytes() == b"payload"


def test_the_file_store_prunes_empty_folders(tmp_path: Path) -> None:
    store = FileBlobStore(tmp_path)
    store.put("sessions/app/u/s1/inc/events/e1/t.json", b"1", staged=True)
    store.put("sessions/app/u/s2/events/e1/t.json", b"2")
    assert store.delete_prefix("sessions/app/u/s1/") == 1
    assert sorted(p.name for p in (tmp_path / "objects/sessions/app/u").iterdir()) == ["s2"]
    assert list((tmp_path / "staged").iterdir()) == []
    store.put("sessions/app/u/s1/inc/events/e2/t.json", b"3")  # the folders come back when needed
    assert store.get("sessions/app/u/s1/inc/events/e2/t.json") == b"3"


def test_the_file_store_compares_modified_before_exactly(tmp_path: Path) -> None:
    store = FileBlobStore(tmp_path)
    store.put("p/old", b"1")
    old = time.time() - 100
    os.utime(tmp_path / "objects/p/old", (old, old))
    started = time.time()
    store.put("p/new", b"2")  # written after ``started``, however coarse the file system's clock
    assert store.delete_prefix("p/", modified_before=started) == 1
    assert store.get("p/new") == b"2"
    with pytest.raises(BlobMissing):
        store.get("p/old")


def test_the_file_store_asks_a_callable_keep_prefix_for_every_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files, "PAGE_SIZE", 2)
    store = FileBlobStore(tmp_path)
    for i in range(6):
        store.put(f"s/{i}", b"x")
    answers = iter([None, "s/", "s/"])  # a session re-created after the first page: the rest is kept
    assert store.delete_prefix("s/", keep_prefix=lambda: next(answers)) == 2
    assert len(keys(store, "s/")) == 4


def test_the_file_store_expires_old_staged_objects(tmp_path: Path) -> None:
    store = FileBlobStore(tmp_path)
    store.put("a/orphan", b"1", staged=True)
    store.put("a/young", b"2", staged=True)
    store.put("a/kept", b"3", staged=True)
    store.confirm("a/kept")
    old = time.time() - 2 * files.STAGED_EXPIRY_S
    for name in ("orphan", "kept"):
        os.utime(tmp_path / "objects/a" / name, (old, old))
    (tmp_path / "tmp/dead.tmp").write_bytes(b"torn")
    os.utime(tmp_path / "tmp/dead.tmp", (old, old))
    assert store.expire_staged() == 1
    assert keys(store) == {"a/young", "a/kept"}
    assert list((tmp_path / "tmp").iterdir()) == []


def test_the_file_store_refuses_an_object_where_a_folder_is(tmp_path: Path) -> None:
    store = FileBlobStore(tmp_path)
    store.put("a/b/c", b"1")
    with pytest.raises(ValueError):
        store.put("a/b", b"2")
    with pytest.raises(ValueError):
        store.put("a/b/c/d", b"3", staged=True)
    assert store.get("a/b/c") == b"1"
    assert not store.is_staged("a/b") and store.expire_staged(0) == 0  # no marker left of the refused puts


def test_concurrent_puts_of_one_key_leave_one_whole_value(tmp_path: Path) -> None:
    store = FileBlobStore(tmp_path)
    values = [bytes([i]) * 200_000 for i in range(8)]
    threads = [threading.Thread(target=store.put, args=("k/v", v)) for v in values]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.get("k/v") in values
    assert list((tmp_path / "tmp").iterdir()) == []


def test_a_full_disk_answers_service_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = FileBlobStore(tmp_path)
    store.put("a/1", b"old")

    def full(*args: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", full)
    with pytest.raises(ServiceUnavailable):
        store.put("a/1", b"new")
    monkeypatch.undo()
    assert store.get("a/1") == b"old"  # the old bytes stay whole
    assert list((tmp_path / "tmp").iterdir()) == []
