"""Long-term memory storage: per-user records and their search index in the S3 context bucket.

Layout under ``memories/{app}/{user}/``:

- ``manifest.json``  which objects make up the user's memory now: ``{"snapshot": key | null, "segments":
  [key, …], "forgotten": [id, …]}``; replaced only with a conditional write (``If-Match`` its ETag, or
  ``If-None-Match: *`` when new), so concurrent saves never lose each other's records;
- ``parts/{uuid}.mem``  immutable objects, each holding records (JSON) and their ``SearchIndex``: one big
  snapshot and at most ``MAX_SEGMENTS`` small append-only segments. A save that would pass that number
  merges everything into a new snapshot; forgetting merges at once, so a forgotten text is physically gone.

A search therefore loads the manifest, one snapshot and a bounded number of segments: O(1) S3 requests
whatever the number of records. A warm Lambda keeps the combined index keyed by the manifest's ETag and asks
S3 only whether the manifest changed (a conditional GET: one request per search).
"""

from __future__ import annotations

import json
import logging
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import Conflict
from .s3 import S3BlobStore

logger = logging.getLogger(__name__)

MAX_SEGMENTS = 8
MAX_CACHED_PARTS = 64
MANIFEST = "manifest.json"
_MAGIC = b"AMEM1"


def user_prefix(app_name: str, user_id: str) -> str:
    return f"memories/{app_name}/{user_id}/"


@dataclass
class MemoryRecord:
    """One long-term memory: the text, where it came from, and what to index it with."""

    id: str
    text: str
    author: str
    timestamp: float
    role: str = "user"
    session_id: str | None = None
    event_id: str | None = None
    custom_metadata: dict[str, Any] | None = None
    context: str = ""  # indexed with the text (contextual retrieval), never returned

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MemoryRecord:
        return cls(**data)


@dataclass
class Part:
    """A loaded snapshot or segment: its records and its index."""

    records: dict[str, MemoryRecord]
    index: Any  # search.index.SearchIndex


def encode_part(records: list[MemoryRecord], index_bytes: bytes) -> bytes:
    header = json.dumps([r.to_json() for r in records], separators=(",", ":"), ensure_ascii=False).encode()
    return _MAGIC + struct.pack(">Q", len(header)) + header + index_bytes


def decode_part(data: bytes) -> tuple[list[MemoryRecord], bytes]:
    if not data.startswith(_MAGIC):
        raise ValueError("not a memory part")
    (size,) = struct.unpack(">Q", data[len(_MAGIC) : len(_MAGIC) + 8])
    start = len(_MAGIC) + 8
    records = [MemoryRecord.from_json(r) for r in json.loads(data[start : start + size])]
    return records, data[start + size :]


@dataclass
class Manifest:
    snapshot: str | None = None
    segments: list[str] = field(default_factory=list)
    forgotten: list[str] = field(default_factory=list)
    etag: str | None = None  # of the stored manifest this was read from; None when there is none

    def objects(self) -> list[str]:
        return ([self.snapshot] if self.snapshot else []) + self.segments

    def body(self) -> bytes:
        data = {"snapshot": self.snapshot, "segments": self.segments, "forgotten": self.forgotten}
        return json.dumps(data, separators=(",", ":")).encode()


class _NotModified(Exception):
    pass


class S3MemoryStore:
    """Records and indexes of every user, in the context bucket. ``index`` adapts ``search.index``."""

    def __init__(
        self,
        client: Callable[[], Any],
        bucket: str,
        build_index: Callable[[list[MemoryRecord]], Any],
        load_index: Callable[[bytes], Any],
        combine: Callable[[list[Any]], Any],
    ) -> None:
        self._client = client
        self._bucket = bucket
        self._blobs = S3BlobStore(client, bucket)
        self._build_index = build_index
        self._load_index = load_index
        self._combine = combine
        self._parts: dict[str, Part] = {}  # immutable objects, by key
        self._views: dict[str, tuple[str, Part]] = {}  # user prefix -> (manifest etag, combined view)

    @property
    def _s3(self) -> Any:
        return self._client()

    # --- manifest -------------------------------------------------------------------------------------------

    def _read_manifest(self, prefix: str, if_none_match: str | None = None) -> Manifest:
        params: dict[str, Any] = {"Bucket": self._bucket, "Key": prefix + MANIFEST}
        if if_none_match:
            params["IfNoneMatch"] = if_none_match
        try:
            response = self._s3.get_object(**params)
        except self._s3.exceptions.NoSuchKey:
            return Manifest()
        except self._s3.exceptions.ClientError as exc:
            if exc.response["Error"]["Code"] in {"304", "NotModified"}:
                raise _NotModified() from exc
            raise
        data = json.loads(response["Body"].read())
        return Manifest(data.get("snapshot"), data.get("segments", []), data.get("forgotten", []), response["ETag"])

    def _write_manifest(self, prefix: str, manifest: Manifest, expected: Manifest) -> bool:
        params: dict[str, Any] = {
            "Bucket": self._bucket,
            "Key": prefix + MANIFEST,
            "Body": manifest.body(),
            "ContentType": "application/json",
        }
        if expected.etag is None:
            params["IfNoneMatch"] = "*"
        else:
            params["IfMatch"] = expected.etag
        try:
            self._s3.put_object(**params)
        except self._s3.exceptions.ClientError as exc:
            if exc.response["Error"]["Code"] in {"PreconditionFailed", "412", "ConditionalRequestConflict", "409"}:
                return False
            raise
        return True

    # --- parts ----------------------------------------------------------------------------------------------

    def _load_part(self, key: str) -> Part:
        part = self._parts.get(key)
        if part is None:
            data = self._s3.get_object(Bucket=self._bucket, Key=key)["Body"].read()
            records, index_bytes = decode_part(data)
            part = Part({r.id: r for r in records}, self._load_index(index_bytes))
            self._remember(key, part)
        return part

    def _put_part(self, prefix: str, records: list[MemoryRecord], index: Any) -> str:
        key = f"{prefix}parts/{uuid.uuid4().hex}.mem"
        self._s3.put_object(Bucket=self._bucket, Key=key, Body=encode_part(records, index.to_bytes()))
        self._remember(key, Part({r.id: r for r in records}, index))
        return key

    def _remember(self, key: str, part: Part) -> None:
        """Cache an immutable part; a warm container serving many users keeps only the most recent ones."""
        if len(self._parts) >= MAX_CACHED_PARTS:
            self._parts.pop(next(iter(self._parts)))
        self._parts[key] = part

    def _delete_object(self, key: str) -> None:
        """Delete every version of ``key`` (the bucket is versioned; forgotten text must not linger)."""
        self._parts.pop(key, None)
        self._blobs.delete_prefix(key)  # part keys are unique and of one length: the prefix is the key

    def _combined(self, manifest: Manifest) -> Part:
        parts = [self._load_part(k) for k in manifest.objects()]
        records: dict[str, MemoryRecord] = {}
        for part in parts:
            records.update(part.records)
        forgotten = set(manifest.forgotten)
        index = self._combine([p.index for p in parts]) if parts else None
        if index is not None and forgotten:
            index = index.without(forgotten)
        return Part({k: v for k, v in records.items() if k not in forgotten}, index)

    def _scrubbed(self, manifest: Manifest, merged: Part) -> Part:
        """``merged`` with the forgotten memories' texts also removed from the context other memories were
        indexed with (contextual retrieval stored the turns before each memory), those memories re-indexed."""
        if not manifest.forgotten:
            return merged
        forgotten = set(manifest.forgotten)
        fragments = [
            f"{r.author}: {r.text}"
            for key in manifest.objects()
            for r in self._load_part(key).records.values()
            if r.id in forgotten and r.text
        ]
        affected: list[MemoryRecord] = []
        for record in merged.records.values():
            context = record.context
            for fragment in fragments:
                context = context.replace(fragment, "")
            if context != record.context:
                record = MemoryRecord(**{**record.to_json(), "context": " ".join(context.split())})
                affected.append(record)
        if not affected:
            return merged
        records = dict(merged.records) | {r.id: r for r in affected}
        return Part(records, self._combine([merged.index, self._build_index(affected)]))

    # --- use cases ------------------------------------------------------------------------------------------

    def view(self, app_name: str, user_id: str) -> Part:
        """The user's records and combined index, current as of this call (cached by the manifest's ETag)."""
        prefix = user_prefix(app_name, user_id)
        cached = self._views.get(prefix)
        for _ in range(3):
            try:
                manifest = self._read_manifest(prefix, cached[0] if cached else None)
            except _NotModified:
                assert cached is not None
                return cached[1]
            try:
                combined = self._combined(manifest)
            except self._s3.exceptions.NoSuchKey:
                cached = None  # a merge replaced a part between our two reads: read the manifest again
                continue
            if manifest.etag is not None:
                if len(self._views) >= MAX_CACHED_PARTS:
                    self._views.pop(next(iter(self._views)))
                self._views[prefix] = (manifest.etag, combined)
            return combined
        raise Conflict("the memory index kept changing while it was read; retry")

    def add(self, app_name: str, user_id: str, records: list[MemoryRecord]) -> None:
        """Store ``records`` (already deduplicated by the caller) as a new segment."""
        if not records:
            return
        prefix = user_prefix(app_name, user_id)
        segment = self._put_part(prefix, records, self._build_index(records))
        self._update(prefix, lambda m: m.segments.append(segment), merge_when=lambda m: len(m.segments) > MAX_SEGMENTS)

    def forget(self, app_name: str, user_id: str, memory_ids: Iterable[str]) -> None:
        """Forget memories and merge at once, so that their text is gone from the bucket."""
        ids = set(memory_ids)
        prefix = user_prefix(app_name, user_id)
        self._update(prefix, lambda m: m.forgotten.extend(sorted(ids - set(m.forgotten))), merge_when=lambda m: True)

    def forget_all(self, app_name: str, user_id: str) -> None:
        prefix = user_prefix(app_name, user_id)
        self._views.pop(prefix, None)
        for key in [k for k in self._parts if k.startswith(prefix)]:
            del self._parts[key]
        self._blobs.delete_prefix(prefix)

    def _update(self, prefix: str, change: Callable[[Manifest], None], merge_when: Callable[[Manifest], bool]) -> None:
        delay = 0.02
        deadline = time.monotonic() + 20
        while True:
            current = self._read_manifest(prefix)
            new = Manifest(current.snapshot, list(current.segments), list(current.forgotten), current.etag)
            change(new)
            obsolete: list[str] = []
            created: list[str] = []
            if merge_when(new):
                merged = self._scrubbed(new, self._combined(new))
                live = list(merged.records.values())
                obsolete = new.objects()
                snapshot = self._put_part(prefix, live, merged.index or self._build_index(live)) if live else None
                created = [snapshot] if snapshot else []
                new = Manifest(snapshot, [], [], current.etag)
            if self._write_manifest(prefix, new, current):
                self._views.pop(prefix, None)
                for key in obsolete:
                    self._delete_object(key)
                return
            # Another writer replaced the manifest first: drop what this attempt merged, redo on the new one.
            for key in created:
                self._delete_object(key)
            if time.monotonic() > deadline:
                raise Conflict("too many concurrent writers on this user's memory; retry")
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


class MemoryStore(Protocol):
    """Port of the long-term memory storage (S3 in production, in memory for unit tests)."""

    def view(self, app_name: str, user_id: str) -> Part: ...

    def add(self, app_name: str, user_id: str, records: list[MemoryRecord]) -> None: ...

    def forget(self, app_name: str, user_id: str, memory_ids: Iterable[str]) -> None: ...

    def forget_all(self, app_name: str, user_id: str) -> None: ...


class InMemoryMemoryStore:
    def __init__(self, build_index: Callable[[list[MemoryRecord]], Any], combine: Callable[[list[Any]], Any]) -> None:
        self._build_index = build_index
        self._combine = combine
        self._lock = threading.Lock()
        self._parts: dict[tuple[str, str], list[Part]] = {}

    def view(self, app_name: str, user_id: str) -> Part:
        with self._lock:
            parts = list(self._parts.get((app_name, user_id), []))
        records: dict[str, MemoryRecord] = {}
        for part in parts:
            records.update(part.records)
        return Part(records, self._combine([p.index for p in parts]) if parts else None)

    def add(self, app_name: str, user_id: str, records: list[MemoryRecord]) -> None:
        if records:
            part = Part({r.id: r for r in records}, self._build_index(records))
            with self._lock:
                self._parts.setdefault((app_name, user_id), []).append(part)

    def forget(self, app_name: str, user_id: str, memory_ids: Iterable[str]) -> None:
        ids = set(memory_ids)
        with self._lock:
            parts = self._parts.get((app_name, user_id), [])
            self._parts[(app_name, user_id)] = [
                Part({k: v for k, v in p.records.items() if k not in ids}, p.index.without(ids)) for p in parts
            ]

    def forget_all(self, app_name: str, user_id: str) -> None:
        with self._lock:
            self._parts.pop((app_name, user_id), None)
