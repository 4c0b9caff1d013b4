"""Long-term memory storage: per-user records and their search index in the S3 context bucket.

Layout under ``memories/{app}/{user}/``:

- ``manifest.json``  which objects make up the user's memory now: ``{"snapshot": key | null, "segments":
  [key, …], "pending_delete": [key, …], "epoch": str, "purge": bool, "w": nonce}``, and the records saved
  since the last segment (``"i"``: an ``AMEM2`` part, zlib-compressed, base64; at most ``INLINE_MAX_BYTES``);
  replaced only with a conditional write (``If-Match`` its ETag, or ``If-None-Match: *`` when new), so
  concurrent writers never lose each other's work, and each write carries a nonce so that a writer recognises
  its own write after a lost answer;
- ``parts/{epoch}/{uuid}.mem``  immutable objects, each holding records (JSON) and their ``SearchIndex``
  (``memory_parts``: a table of offsets, so that a search decodes only the records of its hits): one big
  snapshot and at most ``MAX_SEGMENTS`` small append-only segments. A save that would pass that number merges
  everything into a new snapshot; forgetting merges at once.

What each write guarantees after a fault at any step (an error, a timeout, an applied write whose answer was
lost):

- **save** reads the manifest and the records it names and holds, then writes only the records not there yet
  (record ids are deterministic): inline in the new manifest while the inline records fit (one PUT), else a
  part holding them and the inline ones, then the manifest naming it. A retry, a racing save or a lost answer
  never stores a record twice. A part whose manifest write failed is an orphan (below).
- **merge and forget**: the objects a merge makes obsolete are listed in ``pending_delete`` by the same
  conditional write that drops them from the view; their deletion (every version) follows, then a write
  clears the list. A save's merge deletes them by key and the version id the manifest recorded when the part
  was written (``"v"``; a part whose PUT botocore retried has none, and its versions are listed). A failure
  in between leaves the list for the forget's retry or the next write of that user's memory to finish; a
  forget answers only once nothing is pending. A forget also deletes every earlier version of the manifest
  (one may hold a forgotten record inline); until that is done its manifest says so (``"x"``), and the
  forget's retry or the next save finishes it.
- **forget-all** first writes an empty manifest (a tombstone) of a new ``epoch`` with ``purge`` set, then
  deletes every version of every object under the prefix except the parts of that epoch and the current
  manifest, then clears the flag (the empty manifest stays; it holds no text). A save that read the older
  manifest meets the new epoch at its conditional write and redoes its part in the new epoch, so it lands
  either before the forget-all (and is deleted with the rest) or after it (and starts afresh); an
  interrupted purge is finished by the forget-all's retry or the next write.
- **orphans** (parts no manifest names): a save whose manifest write failed deletes its parts when the
  manifest, read then, names none of them; the rest (a function that died in between) are deleted by the next
  forget or every ``ORPHAN_SWEEP_EVERY``-th merge when they belong to an older epoch or are older than
  ``ORPHAN_GRACE_S`` (no write is in flight that long), and at once when they hold a memory being forgotten.
- a manifest naming a part that is gone is repaired by the reader that meets it (the part is dropped from the
  view and from the manifest) instead of failing every read.

A search loads the manifest, one snapshot and a bounded number of segments: O(1) S3 requests whatever the
number of records; listing ``parts/`` happens only on merges, forgets and a pending cleanup. A warm Lambda
keeps the combined index keyed by the manifest's ETag and asks S3 only whether the manifest changed (a
conditional GET: one request per search).
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import field
from datetime import datetime
from typing import Any

from ..errors import ServiceUnavailable
from ..limits import MAX_SEGMENTS
from ..runtime import aws
from ..runtime.lazyclass import dataclass  # processed on first instance (lazyclass.py)
from .cache import ByteBudgetCache, cache_budget, indexed_bytes
from .memory_parts import CombinedRecords, decode_part, encode_part, read_part
from .ports import Before, IndexedRecords, MemoryRecord, NotStored, Prepare, without_fragments

__all__ = ["MANIFEST", "S3MemoryStore", "decode_part", "encode_part", "user_prefix"]

logger = logging.getLogger(__name__)

# A save's merge deletes the parts it replaced by key and version id (no listing); every this-many merges it
# also lists the user's parts for orphans (parts of writes that died before naming them).
ORPHAN_SWEEP_EVERY = 8
# Older than any write in flight (15 minutes is the longest a Lambda function runs): an unreferenced part
# that old is an orphan, never the segment of a save about to name it.
ORPHAN_GRACE_S = 900.0
MANIFEST = "manifest.json"
# A save whose new records, with those already inline, encode (an ``AMEM2`` part, zlib-compressed, base64) to at
# most this many bytes keeps them in the manifest it writes anyway instead of a new part: one PUT per save
# instead of two. The save that would pass it writes them all out as a segment. It also bounds the manifest every
# search's cold path reads. 0: no inline records (read at use: tests change it).
INLINE_MAX_BYTES = 64 * 1024
# an uncompressed part this many times the bound is not compressed to find out (it would not fit)
_INLINE_RAW_FACTOR = 4
_MISSING = frozenset({"NoSuchKey", "404", "NoSuchVersion"})
# A conditional write lost: another writer replaced (or a forget-all removed) the manifest first.
_LOST_RACE = frozenset({"PreconditionFailed", "412", "ConditionalRequestConflict", "409", "NoSuchKey", "404"})


def user_prefix(app_name: str, user_id: str) -> str:
    return f"memories/{app_name}/{user_id}/"


@dataclass
class Manifest:
    snapshot: str | None = None
    segments: list[str] = field(default_factory=list)
    pending_delete: list[str] = field(default_factory=list)  # replaced objects whose deletion is not done yet
    epoch: str = ""  # the folder of this memory's parts; a forget-all starts a new one
    purge: bool = False  # a forget-all has not finished deleting the objects of earlier epochs
    writer: str = ""  # the nonce of the write that stored this manifest
    etag: str | None = None  # of the stored manifest this was read from; None when there is none
    version_id: str | None = None
    # The version id of each part (named or pending deletion) whose one and only version is known: deleted by
    # key and version id, without listing the bucket. A part missing here (written by a PUT that botocore
    # retried, which may have left another version) is deleted by listing its versions.
    versions: dict[str, str] = field(default_factory=dict)
    merges: int = 0  # merges of this memory so far: every ``ORPHAN_SWEEP_EVERY``-th also sweeps for orphans
    # The records saved since the last segment, in the manifest itself (``"i"``): an ``AMEM2`` part, zlib-
    # compressed; None when there are none. Newer than every named part.
    inline: bytes | None = None
    decoded: IndexedRecords | None = field(default=None, repr=False, compare=False)  # ``inline``, once read
    # A forget wrote this manifest: its earlier versions, which may hold forgotten records inline, are not all
    # deleted yet (``"x"``; the forget's retry or the next write deletes them, then clears it).
    scrub: bool = False

    def objects(self) -> list[str]:
        return ([self.snapshot] if self.snapshot else []) + self.segments

    def successor(self) -> Manifest:
        """A copy to change and write over this one."""
        return Manifest(
            self.snapshot,
            list(self.segments),
            list(self.pending_delete),
            self.epoch,
            self.purge,
            versions=dict(self.versions),
            merges=self.merges,
            inline=self.inline,
            decoded=self.decoded,
            scrub=self.scrub,
        )

    def without(self, keys: Iterable[str]) -> Manifest:
        """This manifest no longer naming ``keys`` (parts that are gone)."""
        gone = set(keys)
        if self.snapshot in gone:
            self.snapshot = None
        self.segments = [k for k in self.segments if k not in gone]
        return self

    def body(self) -> bytes:
        data: dict[str, Any] = {
            "snapshot": self.snapshot,
            "segments": self.segments,
            "forgotten": [],  # always empty: a forget merges its memories out in the write that forgets them
            "pending_delete": self.pending_delete,
            "epoch": self.epoch,
            "purge": self.purge,
            "w": self.writer,
        }
        # Only what is still named or pending: the versions of parts deleted since are dropped.
        kept = set(self.objects()) | set(self.pending_delete)
        versions = {k: v for k, v in self.versions.items() if k in kept}
        if versions:
            data["v"] = versions
        if self.merges:
            data["m"] = self.merges
        if self.inline:
            data["i"] = base64.b64encode(self.inline).decode("ascii")
        if self.scrub:
            data["x"] = True
        return json.dumps(data, separators=(",", ":")).encode()

    @classmethod
    def parse(cls, data: dict[str, Any], etag: str | None, version_id: str | None) -> Manifest:
        return cls(
            data.get("snapshot"),
            list(data.get("segments") or []),
            list(data.get("pending_delete") or []),
            str(data.get("epoch") or ""),
            bool(data.get("purge")),
            str(data.get("w") or ""),
            etag,
            version_id,
            versions={str(k): str(v) for k, v in (data.get("v") or {}).items()},
            merges=int(data.get("m") or 0),
            inline=base64.b64decode(data["i"], validate=True) if data.get("i") else None,
            scrub=bool(data.get("x")),
        )


class _NotModified(Exception):
    pass


class S3MemoryStore:
    """Records and indexes of every user, in the context bucket. ``index`` adapts ``search.index``.

    ``orphan_grace_s``: how old an unreferenced part must be before a merge or forget deletes it (tests lower
    it); ``inline_max_bytes``: the bound of the records a manifest holds inline (``INLINE_MAX_BYTES``);
    ``cache_bytes``: what the container keeps of the users' memories (``cache.cache_budget()``). The
    retry loops stop at ``aws.WRITE_BUDGET_S`` and answer ``ServiceUnavailable`` (503)."""

    def __init__(
        self,
        client: Callable[[], Any],
        bucket: str,
        build_index: Callable[[list[MemoryRecord]], Any],
        load_index: Callable[[bytes | memoryview], Any],
        combine: Callable[[list[Any]], Any],
        orphan_grace_s: float | None = None,
        inline_max_bytes: int | None = None,
        cache_bytes: int | None = None,
    ) -> None:
        self._client = client
        self._bucket = bucket
        self._build_index = build_index
        self._load_index = load_index
        self._combine = combine
        self._orphan_grace_s = orphan_grace_s  # None: ORPHAN_GRACE_S, read when used
        self._inline_max_bytes = inline_max_bytes  # None: INLINE_MAX_BYTES, read when used
        self._lock = threading.Lock()  # the caches are shared by the threads of a local server
        # What a warm container keeps, bounded by bytes (``cache.py``): immutable parts by key, and each user's
        # manifest with the combined view it names (a user's view and its parts share no arrays: both count).
        budget = cache_budget() if cache_bytes is None else cache_bytes
        self._parts: ByteBudgetCache[str, IndexedRecords] = ByteBudgetCache(
            int(budget * 0.4), lambda part: indexed_bytes(part.records, part.index)
        )
        self._views: ByteBudgetCache[str, tuple[Manifest, IndexedRecords]] = ByteBudgetCache(
            int(budget * 0.6), lambda cached: indexed_bytes(cached[1].records, cached[1].index)
        )

    @property
    def _s3(self) -> Any:
        return self._client()

    def _code(self, exc: BaseException) -> str | None:
        return aws.error_code(exc)

    # --- manifest -------------------------------------------------------------------------------------------

    def _read_manifest(self, prefix: str, if_none_match: str | None = None) -> Manifest:
        params: dict[str, Any] = {"Bucket": self._bucket, "Key": prefix + MANIFEST}
        if if_none_match:
            params["IfNoneMatch"] = if_none_match
        try:
            response = self._s3.get_object(**params)
        except self._s3.exceptions.ClientError as exc:
            code = self._code(exc)
            if code in _MISSING:
                return Manifest()
            if code in {"304", "NotModified"}:
                raise _NotModified() from exc
            raise
        data = json.loads(response["Body"].read())
        return Manifest.parse(data, response["ETag"], response.get("VersionId"))

    def _write_manifest(self, prefix: str, new: Manifest, expected: Manifest) -> Manifest | None:
        """Replace ``expected`` by ``new`` unless another writer replaced it first: the stored manifest, or None
        when the race was lost. A write applied but whose answer was lost (botocore's retry then fails the
        precondition) is recognised by its nonce."""
        new.writer = uuid.uuid4().hex
        params: dict[str, Any] = {
            "Bucket": self._bucket,
            "Key": prefix + MANIFEST,
            "Body": new.body(),
            "ContentType": "application/json",
        }
        if expected.etag is None:
            params["IfNoneMatch"] = "*"
        else:
            params["IfMatch"] = expected.etag
        try:
            response = self._s3.put_object(**params)
        except self._s3.exceptions.ClientError as exc:
            if self._code(exc) not in _LOST_RACE:
                raise
            current = self._read_manifest(prefix)
            return current if current.writer == new.writer else None
        new.etag = response["ETag"]
        new.version_id = response.get("VersionId")
        return new

    def _forget_view(self, prefix: str, parts_too: bool = False) -> None:
        with self._lock:
            self._views.pop(prefix)
            if parts_too:
                for key in [k for k in self._parts if k.startswith(prefix)]:
                    self._parts.pop(key)

    # --- parts ----------------------------------------------------------------------------------------------

    def _part_bytes(self, key: str) -> bytes | None:
        """The stored bytes of the part at ``key``; None when it is gone."""
        try:
            data: bytes = self._s3.get_object(Bucket=self._bucket, Key=key)["Body"].read()
        except self._s3.exceptions.ClientError as exc:
            if self._code(exc) in _MISSING:
                return None
            raise
        return data

    def _load_part(self, key: str) -> IndexedRecords | None:
        """The part stored at ``key``; None when it is gone."""
        with self._lock:
            part = self._parts.get(key)
        if part is None:
            data = self._part_bytes(key)
            if data is None:
                return None
            records, index_bytes = read_part(data)
            part = IndexedRecords(records, self._load_index(index_bytes))
            self._remember(key, part)
        return part

    def _load_parts(self, keys: list[str]) -> list[IndexedRecords | None]:
        """``_load_part`` of each key, in order. The parts not cached yet are fetched at once, each on its own
        thread: a cold search's parts (at 100,000 records some 80 MB) then arrive in about the time of the
        largest instead of their sum, and one part is decoded while the others are still in transit. The first
        error (in key order) is raised, after every fetch has ended."""
        with self._lock:
            uncached = [k for k in keys if k not in self._parts]
        if len(uncached) < 2:
            return [self._load_part(k) for k in keys]
        with ThreadPoolExecutor(max_workers=min(len(uncached), MAX_SEGMENTS + 1)) as pool:
            futures = {k: pool.submit(self._load_part, k) for k in uncached}
        return [futures[k].result() if k in futures else self._load_part(k) for k in keys]

    def _put_part(
        self, prefix: str, epoch: str, records: list[MemoryRecord], index: Any, data: bytes | None = None
    ) -> tuple[str, str | None]:
        """Write a new part (``data``: its bytes when already encoded): its key, and its version id when that is
        its only version (None when botocore retried the PUT: an attempt whose answer was lost may have stored
        another version)."""
        key = f"{prefix}parts/{epoch + '/' if epoch else ''}{uuid.uuid4().hex}.mem"
        body = data if data is not None else encode_part(records, index.to_bytes())
        response = self._s3.put_object(Bucket=self._bucket, Key=key, Body=body)
        self._remember(key, IndexedRecords({r.id: r for r in records}, index))
        retried = response.get("ResponseMetadata", {}).get("RetryAttempts", 0)
        version = response.get("VersionId")
        return key, str(version) if version and not retried else None

    @staticmethod
    def _epoch_of(prefix: str, key: str) -> str | None:
        """The epoch folder of a part's key ("" for the first epoch's, which have none); None for any other key."""
        if not key.startswith(prefix + "parts/"):
            return None
        rest = key[len(prefix) + len("parts/") :]
        return rest.split("/", 1)[0] if "/" in rest else ""

    def _remember(self, key: str, part: IndexedRecords) -> None:
        """Cache an immutable part; a warm container serving many users keeps only the most recent ones."""
        with self._lock:
            self._parts.put(key, part)

    def _discard(self, key: str | None) -> None:
        """Delete (every version of) a part this call wrote and no manifest names; best effort, since a part
        left behind is an orphan that the next merge or forget deletes."""
        if key is None:
            return
        try:
            self._delete_versions(self._versions(key))
        except Exception as exc:
            logger.warning("could not delete an unused memory part", extra={"key": key, "error": repr(exc)})

    def _versions(self, prefix: str) -> list[dict[str, Any]]:
        """Every version and delete marker under ``prefix`` (part keys are unique and of one length, so the
        prefix of a part is the part)."""
        found: list[dict[str, Any]] = []
        paginator = self._s3.get_paginator("list_object_versions")
        for page in paginator.paginate(Bucket=self._bucket, Prefix=prefix):
            found += page.get("Versions", []) + page.get("DeleteMarkers", [])
        return found

    def _delete_versions(self, versions: list[dict[str, Any]]) -> None:
        """Delete the given object versions for good (the bucket is versioned: nothing may remain)."""
        with self._lock:
            for v in versions:
                self._parts.pop(v["Key"])
        for start in range(0, len(versions), 1000):
            batch = [{"Key": v["Key"], "VersionId": v["VersionId"]} for v in versions[start : start + 1000]]
            response = self._s3.delete_objects(Bucket=self._bucket, Delete={"Objects": batch, "Quiet": True})
            if response.get("Errors"):
                first = response["Errors"][0]
                raise ServiceUnavailable(f"S3 did not delete {first.get('Key')} ({first.get('Code')}); retry")

    def _inline_part(self, manifest: Manifest) -> IndexedRecords | None:
        """The records ``manifest`` holds inline, with their index (decoded once per manifest read; a search
        decodes only the records of its hits, as of a part); None when it holds none."""
        if manifest.inline is None:
            return None
        if manifest.decoded is None:
            records, index_bytes = read_part(zlib.decompress(manifest.inline))
            manifest.decoded = IndexedRecords(records, self._load_index(index_bytes))
        return manifest.decoded

    def _inline_limit(self) -> int:
        return INLINE_MAX_BYTES if self._inline_max_bytes is None else self._inline_max_bytes

    def _fits_inline(self, raw: bytes) -> bytes | None:
        """``raw`` (an encoded part) compressed for the manifest, or None when it would pass the bound."""
        limit = self._inline_limit()
        if limit <= 0 or len(raw) > limit * _INLINE_RAW_FACTOR:
            return None
        blob = zlib.compress(raw, 6)
        return blob if 4 * ((len(blob) + 2) // 3) <= limit else None  # its base64 length in the manifest

    def _combined(
        self, manifest: Manifest, forgotten: frozenset[str] = frozenset()
    ) -> tuple[IndexedRecords, list[str]]:
        """The view ``manifest`` names (its parts, then its inline records) without ``forgotten``, and the keys it
        names that are gone."""
        loaded = list(zip(manifest.objects(), self._load_parts(manifest.objects()), strict=True))
        parts = [p for _, p in loaded if p is not None]
        missing = [k for k, p in loaded if p is None]
        inline = self._inline_part(manifest)
        if inline is not None:
            parts.append(inline)
        index = self._combine([p.index for p in parts]) if parts else None
        if index is not None and forgotten:
            index = index.without(forgotten)
        # no record is decoded here: a search reads only its hits
        return IndexedRecords(CombinedRecords([p.records for p in parts], forgotten), index), missing

    def _scrubbed(self, manifest: Manifest, merged: IndexedRecords, forgotten: frozenset[str]) -> IndexedRecords:
        """``merged`` with the ``forgotten`` memories' texts also removed from the context and reply other memories
        were indexed with (contextual retrieval stored the turns around each memory), those memories re-indexed."""
        if not forgotten:
            return merged
        sources = [self._load_part(key) for key in manifest.objects()] + [self._inline_part(manifest)]
        fragments = [
            f"{r.author}: {r.text}"
            for source in sources
            for held in [getattr(source, "records", None) or {}]
            for r in (held[i] for i in held if i in forgotten)  # only the forgotten ones decoded
            if r.text
        ]
        affected: list[MemoryRecord] = []
        for record in merged.records.values():
            scrubbed = without_fragments(record, fragments)
            if scrubbed is not None:
                affected.append(scrubbed)
        if not affected:
            return merged
        records = dict(merged.records) | {r.id: r for r in affected}
        return IndexedRecords(records, self._combine([merged.index, self._build_index(affected)]))

    def _state(self, prefix: str) -> tuple[Manifest, IndexedRecords, list[str]]:
        """The current manifest, the view it names and the keys it names that are gone (the manifest is asked
        for conditionally when a view is cached: one request when nothing changed)."""
        with self._lock:
            cached = self._views.get(prefix)
        try:
            manifest = self._read_manifest(prefix, cached[0].etag if cached else None)
        except _NotModified:
            assert cached is not None
            return cached[0], cached[1], []
        view, missing = self._combined(manifest)
        if manifest.etag is not None and not missing:
            with self._lock:
                self._views.put(prefix, (manifest, view))
        return manifest, view, missing

    def _merge(self, prefix: str, new: Manifest, forgotten: frozenset[str] = frozenset()) -> str | None:
        """Rewrite ``new``'s view into one snapshot without the ``forgotten`` memories (nor their text in others'
        context). ``new`` then names only that snapshot and lists what it replaces as pending deletions; the
        snapshot's key is returned (None when nothing is left)."""
        merged, _ = self._combined(new, forgotten)
        merged = self._scrubbed(new, merged, forgotten)
        live = list(merged.records.values())
        snapshot = None
        if live:
            snapshot, version = self._put_part(prefix, new.epoch, live, merged.index or self._build_index(live))
            if version:
                new.versions[snapshot] = version
        new.pending_delete = list(dict.fromkeys(new.pending_delete + new.objects()))
        new.snapshot, new.segments = snapshot, []
        new.inline = new.decoded = None  # in the snapshot now
        new.merges += 1
        return snapshot

    @staticmethod
    def _backoff(deadline: float, delay: float) -> float:
        """Wait before another attempt of a lost race; 503 once the write budget is spent."""
        if time.monotonic() + delay > deadline:
            raise ServiceUnavailable("too many concurrent writers on this user's memory; retry", retry_after=1)
        time.sleep(delay)
        return min(delay * 2, 0.5)

    # --- deletion ---------------------------------------------------------------------------------------------

    def _settle(self, prefix: str, written: Manifest, forgotten: set[str] | None, required: bool) -> None:
        """Delete every version of what ``written`` lists as pending and of the orphans that may go, then clear
        the list. ``required`` (a forget): a failure answers 503 and the list stays for the retry; otherwise
        (a save's merge) it is logged and left to the next write."""
        try:
            if required or written.merges % ORPHAN_SWEEP_EVERY == 0:
                self._delete_unreferenced(prefix, set(written.pending_delete), forgotten, sweep=True)
            else:  # a save's merge: what it replaced, by version id where known (no listing)
                self._delete_pending(written)
        except Exception as exc:
            if not required:
                logger.warning("memory cleanup left for the next write", extra={"error": repr(exc)})
                return
            if isinstance(exc, ServiceUnavailable):
                raise
            raise ServiceUnavailable("forgotten memories are not deleted yet; retry", retry_after=1) from exc
        if written.pending_delete or (written.scrub and required):
            cleared = written.successor()
            cleared.pending_delete = []
            cleared.scrub = cleared.scrub and not required  # a forget's settling deleted the earlier versions
            try:
                self._write_manifest(prefix, cleared, written)  # lost race: the winner carries the list, finds
            except Exception as exc:  # those objects gone and drops them
                logger.warning("could not clear the pending deletions", extra={"error": repr(exc)})
        self._forget_view(prefix)

    def _delete_unreferenced(self, prefix: str, pending: set[str], forgotten: set[str] | None, sweep: bool) -> None:
        """Delete every version of the parts in ``pending`` and, with ``sweep``, of the orphans: parts of an
        earlier epoch, older than the grace period, or (when ``forgotten`` is given) holding one of those ids.
        A forget (``forgotten`` given) also deletes every earlier version of the manifest: one may hold a
        forgotten record inline (none is of any use: writes are conditional on the current one).

        The manifest is read after the listing, so that nothing a later manifest names is deleted."""
        listed = self._versions(prefix if forgotten is not None else prefix + "parts/")
        # the latest version when listed may be replaced since, never the other way round: an earlier one stays so
        earlier = [v for v in listed if v["Key"] == prefix + MANIFEST and not v.get("IsLatest")]
        versions = [v for v in listed if v["Key"].startswith(prefix + "parts/")]
        if not versions:
            self._delete_versions(earlier)
            return
        current = self._read_manifest(prefix)
        live = set(current.objects())
        pending = pending | set(current.pending_delete)
        grace = ORPHAN_GRACE_S if self._orphan_grace_s is None else self._orphan_grace_s
        oldest = time.time() - grace
        doomed: list[dict[str, Any]] = list(earlier)
        young: dict[str, list[dict[str, Any]]] = {}
        for v in versions:
            key = v["Key"]
            if key in live:
                continue
            orphan = sweep and (
                self._epoch_of(prefix, key) != current.epoch or _timestamp(v.get("LastModified")) < oldest
            )
            if key in pending or orphan:
                doomed.append(v)
            elif sweep and forgotten:
                young.setdefault(key, []).append(v)
        for key, key_versions in young.items():
            # A recent orphan: perhaps the part of a save about to name it; deleted only if it holds what is
            # being forgotten (its save, if still alive, then finds its part gone and the reader repairs).
            try:
                part = self._load_part(key)
            except self._s3.exceptions.ClientError:
                raise
            except Exception:  # not a memory part at all: nothing will ever name it
                doomed += key_versions
                continue
            if part is not None and forgotten and forgotten & set(part.records):
                doomed += key_versions
        self._delete_versions(doomed)

    def _purge(self, prefix: str) -> None:
        """Finish a forget-all: delete every version under the prefix except the current manifest and the parts
        of its epoch, then remove the tombstone (or clear its flag when a save has written since)."""
        versions = self._versions(prefix)
        current = self._read_manifest(prefix)  # after the listing: parts a later save wrote are not listed
        manifest_key = prefix + MANIFEST
        doomed = [
            v
            for v in versions
            if (v["Key"] == manifest_key and v["VersionId"] != current.version_id)
            or (v["Key"] != manifest_key and self._epoch_of(prefix, v["Key"]) != current.epoch)
        ]
        self._delete_versions(doomed)
        self._forget_view(prefix, parts_too=True)
        if not current.purge:
            return
        # The emptied manifest stays (without the flag): were it deleted, a save that read "no manifest"
        # before this forget-all could create one naming a part the purge deleted.
        cleared = current.successor()
        cleared.purge = False
        if self._write_manifest(prefix, cleared, current) is not None and current.version_id:
            # The tombstone's own version holds nothing but it need not linger either (best effort).
            try:
                self._s3.delete_object(Bucket=self._bucket, Key=manifest_key, VersionId=current.version_id)
            except Exception as exc:
                logger.warning("could not delete the tombstone's version", extra={"error": repr(exc)})
        # A lost race: the winner saw the flag and purged before writing.

    # --- use cases ------------------------------------------------------------------------------------------

    def view(self, app_name: str, user_id: str) -> IndexedRecords:
        """The user's records and combined index, current as of this call (cached by the manifest's ETag)."""
        prefix = user_prefix(app_name, user_id)
        for _ in range(4):
            manifest, view, missing = self._state(prefix)
            if not missing:
                return view
            if self._read_manifest(prefix).etag != manifest.etag:
                continue  # a merge replaced parts between our two reads: read the new manifest
            self._repair(prefix, manifest, missing)
            return view
        raise ServiceUnavailable("the memory index kept changing while it was read; retry", retry_after=1)

    def held(self, app_name: str, user_id: str, memory_ids: Iterable[str]) -> set[str]:
        """Those of ``memory_ids`` the user's memory holds. Cold, it reads the manifest and the record tables of
        its parts, never their search index: deleting an event that was never saved (nearly every deletion)
        costs one GET and imports no search code (delete_event's first response). With a view cached,
        that view (one conditional GET)."""
        wanted = set(memory_ids)
        if not wanted:
            return set()
        prefix = user_prefix(app_name, user_id)
        with self._lock:
            cached = prefix in self._views
        if not cached:
            manifest = self._read_manifest(prefix)
            found = [self._part_records(k) for k in manifest.objects()]
            tables = [t for t in found if t is not None]
            if len(tables) == len(found):
                if manifest.inline is not None:
                    tables.append(read_part(zlib.decompress(manifest.inline))[0])
                combined = CombinedRecords(tables)
                return {i for i in wanted if i in combined}
            # A part is gone: a merge replaced it since the manifest was read (or it needs repair): ``view`` knows.
        held = self.view(app_name, user_id).records
        return {i for i in wanted if i in held}

    def _part_records(self, key: str) -> Mapping[str, MemoryRecord] | None:
        """The records of the part at ``key`` (its index not loaded when it is not cached); None when it is gone."""
        with self._lock:
            part = self._parts.get(key)
        if part is not None:
            return part.records
        data = self._part_bytes(key)
        return None if data is None else read_part(data)[0]

    def _repair(self, prefix: str, manifest: Manifest, missing: list[str]) -> None:
        """Drop parts that are gone from the manifest so that no reader meets them again (best effort: the
        view without them is answered either way)."""
        logger.warning("a memory manifest named missing parts; repairing", extra={"missing": missing})
        try:
            self._write_manifest(prefix, manifest.successor().without(missing), manifest)
        except Exception as exc:
            logger.warning("could not repair the memory manifest", extra={"error": repr(exc)})

    def add(
        self, app_name: str, user_id: str, records: list[MemoryRecord], prepare: Prepare | None = None
    ) -> list[str]:
        """Store those of ``records`` whose ids the user's memory does not hold yet, and return their ids: inline
        in the manifest while the manifest's inline records stay within ``INLINE_MAX_BYTES`` (one PUT), else as
        one new segment holding them and the inline ones (a part, then the manifest). Safe to retry after any
        fault: what an earlier attempt stored is skipped. Raises ``NotStored`` when it failed before any manifest
        write (then none of ``records`` landed). ``prepare`` gets the view of the manifest this write replaces:
        one manifest read per save."""
        if not records:
            return []
        prefix = user_prefix(app_name, user_id)
        deadline = time.monotonic() + aws.WRITE_BUDGET_S
        delay = 0.02
        # the records this call stores and their index: built (embedded) once, unless a retry changes them
        built: tuple[tuple[MemoryRecord, ...], Any] | None = None
        # (key, epoch, records, version id if its only version is known, ids this call stores) of the segment
        # this call wrote: this call's records after the inline ones it writes out
        part: tuple[str, str, tuple[MemoryRecord, ...], str | None, list[str]] | None = None
        unsure: list[str] = []  # parts named by a write of ours that lost its race, or seemed to
        snapshot: str | None = None  # of a merge this call made
        exposed = False  # a manifest write naming the part is under way: it may be referenced
        try:
            while True:
                manifest, view, missing = self._state(prefix)
                if part is not None and set(unsure) & set(manifest.objects()):
                    # Our write was applied after all (its answer was lost, and another writer followed).
                    return part[4]
                for key in unsure:  # not named: our write never landed (or was merged away since)
                    if part is None or key != part[0]:
                        self._discard(key)
                unsure = []
                if manifest.purge:
                    self._purge(prefix)  # a forget-all was interrupted: finish it before adding anything
                    self._backoff(deadline, 0)  # within the budget still
                    continue
                candidates = prepare(view.records) if prepare is not None else records
                fresh = list({r.id: r for r in candidates if r.id not in view.records}.values())
                if not fresh:
                    if part is not None:
                        self._discard(part[0])
                        part = None
                    return []
                if built is None or built[0] != tuple(fresh):
                    # a racing save stored some, or a forget changed the context they are stored with
                    built = (tuple(fresh), self._build_index(fresh))
                held = self._inline_part(manifest)
                kept = list(held.records.values()) + fresh if held else fresh
                index = self._combine([held.index, built[1]]) if held else built[1]
                if part is not None and (part[1] != manifest.epoch or part[2] != tuple(kept)):
                    # a forget-all started a new epoch, or the records to write out changed
                    self._discard(part[0])
                    part = None
                raw = encode_part(kept, index.to_bytes()) if part is None else b""
                inline = self._fits_inline(raw) if part is None else None
                new = manifest.successor().without(missing)
                if inline is not None:
                    new.inline = inline
                    new.decoded = IndexedRecords({r.id: r for r in kept}, index)
                else:
                    if part is None:
                        key, version = self._put_part(prefix, manifest.epoch, kept, index, raw)
                        part = (key, manifest.epoch, tuple(kept), version, [r.id for r in fresh])
                    new.segments.append(part[0])
                    if part[3]:
                        new.versions[part[0]] = part[3]
                    new.inline = new.decoded = None  # in the segment now
                if new.pending_delete:  # left by an earlier write: finish it on the way (best effort)
                    new.pending_delete = self._finish_pending(prefix, new, new.pending_delete)
                if new.scrub:  # a forget's deletions of earlier manifests, likewise
                    new.scrub = not self._scrub_manifests(prefix)
                snapshot = self._merge(prefix, new) if len(new.segments) > MAX_SEGMENTS else None
                exposed = True
                written = self._write_manifest(prefix, new, manifest)
                exposed = False
                if written is not None:
                    if snapshot is None:
                        self._keep_view(prefix, written, view, IndexedRecords({r.id: r for r in fresh}, built[1]))
                    else:
                        self._forget_view(prefix)
                        self._settle(prefix, written, forgotten=None, required=False)
                    return [r.id for r in fresh]
                unsure = ([part[0]] if part is not None else []) + ([snapshot] if snapshot else [])
                delay = self._backoff(deadline, delay)
        except Exception as exc:
            if exposed or unsure:
                # A manifest write naming our parts (or holding our records inline) may have been applied: keep
                # the parts unless the manifest, read now, names none of them (botocore's attempts are over: that
                # write will never land). Then they are deleted now rather than left as orphans for a later sweep.
                ours = [k for k in (part[0] if part else None, snapshot if exposed else None, *unsure) if k]
                if ours and self._none_named(prefix, ours):
                    for key in ours:
                        self._discard(key)
                raise
            if part is not None:
                self._discard(part[0])
            raise NotStored(exc) from exc

    def _none_named(self, prefix: str, keys: list[str]) -> bool:
        """Whether the user's manifest names none of ``keys`` (False when it cannot be read)."""
        try:
            return not set(keys) & set(self._read_manifest(prefix).objects())
        except Exception as exc:
            logger.warning("could not read the manifest after a failed write", extra={"error": repr(exc)})
            return False

    def _keep_view(self, prefix: str, written: Manifest, view: IndexedRecords, added: IndexedRecords) -> None:
        """Cache the view ``written`` names (the view it replaced plus the records this save ``added``, inline or
        in its segment), so that the user's next save or search in this container asks S3 only whether the
        manifest changed, instead of reading it and its parts again (a container serves many users: their parts
        do not all stay cached)."""
        if written.etag is None:
            self._forget_view(prefix)
            return
        try:
            index = self._combine([view.index, added.index]) if view.index is not None else added.index
        except Exception as exc:  # the write is done: the next reader builds the view itself
            logger.warning("could not cache the memory view", extra={"error": repr(exc)})
            self._forget_view(prefix)
            return
        combined = IndexedRecords(CombinedRecords([view.records, added.records]), index)
        with self._lock:
            self._views.put(prefix, (written, combined))

    def _scrub_manifests(self, prefix: str) -> bool:
        """Delete every earlier version of the manifest (a forget left them: one may hold a forgotten record
        inline); whether that is done (False, logged, when S3 failed)."""
        try:
            listed = self._versions(prefix + MANIFEST)
            self._delete_versions([v for v in listed if v["Key"] == prefix + MANIFEST and not v.get("IsLatest")])
        except Exception as exc:
            logger.warning("earlier memory manifests left for the next write", extra={"error": repr(exc)})
            return False
        return True

    def _finish_pending(self, prefix: str, manifest: Manifest, pending: list[str]) -> list[str]:
        """Delete the pending objects; what is still pending afterwards (all of them if S3 failed)."""
        try:
            self._delete_pending(manifest)
        except Exception as exc:
            logger.warning("pending memory deletions left for the next write", extra={"error": repr(exc)})
            return pending
        return []

    def _delete_pending(self, manifest: Manifest) -> None:
        """Delete every version of the parts ``manifest`` lists as pending deletion: by key and version id when
        the manifest knows a part's only version, by listing that part's versions otherwise. The parts are not
        named by this manifest, nor by any later one (a merge names only parts it writes), so deleting them
        needs no second read of the manifest; deleting a version already gone succeeds (a retry)."""
        known = [
            {"Key": k, "VersionId": manifest.versions[k]} for k in manifest.pending_delete if k in manifest.versions
        ]
        unknown = [k for k in manifest.pending_delete if k not in manifest.versions]
        listed: list[dict[str, Any]] = []
        for key in unknown:
            listed += self._versions(key)
        self._delete_versions(known + listed)

    def fence(self, app_name: str, user_id: str) -> None:
        """Write the user's manifest again, unchanged (created empty when the user has none): a save's write,
        conditional on the manifest it prepared over, then loses its race and prepares again. One read and one
        write; the cached view stays (it is the same view)."""
        prefix = user_prefix(app_name, user_id)
        deadline = time.monotonic() + aws.WRITE_BUDGET_S
        delay = 0.02
        while True:
            manifest = self._read_manifest(prefix)
            written = self._write_manifest(prefix, manifest.successor(), manifest)
            if written is not None:
                break
            delay = self._backoff(deadline, delay)
        with self._lock:
            cached = self._views.get(prefix)
            if cached is not None and cached[0].etag == manifest.etag and written.etag is not None:
                self._views.put(prefix, (written, cached[1]))
            else:
                self._views.pop(prefix)

    def forget(self, app_name: str, user_id: str, memory_ids: Iterable[str]) -> None:
        """Forget memories: rewrite the view without them, then delete every object version that held them
        (and the orphans that may go). Idempotent, and it first finishes what an earlier attempt left pending;
        raises ``ServiceUnavailable`` while S3 keeps failing (the deletions stay recorded in the manifest)."""
        ids = set(memory_ids)
        prefix = user_prefix(app_name, user_id)
        deadline = time.monotonic() + aws.WRITE_BUDGET_S
        delay = 0.02
        unsure: str | None = None  # the snapshot of a write of ours that lost its race, or seemed to
        while True:
            manifest, view, missing = self._state(prefix)
            if unsure is not None and unsure not in manifest.objects():
                self._discard(unsure)  # not named: that write never landed (or was merged away since)
            unsure = None
            if manifest.purge:
                self._purge(prefix)
                self._backoff(deadline, 0)  # within the budget still
                continue
            present = ids & set(view.records)
            if not (present or missing):
                break
            new = manifest.successor().without(missing)
            new.scrub = True  # earlier manifest versions may hold what is forgotten inline
            snapshot = self._merge(prefix, new, frozenset(present))
            written = self._write_manifest(prefix, new, manifest)
            if written is not None:
                manifest = written
                break
            unsure = snapshot
            delay = self._backoff(deadline, delay)
        self._forget_view(prefix)
        self._settle(prefix, manifest, forgotten=ids, required=True)

    def forget_all(self, app_name: str, user_id: str, before: Before | None = None) -> None:
        """Forget everything of the user: an empty manifest of a new epoch first (so that a racing save lands
        either before, and is deleted, or after, and starts afresh), then every version of every other object
        under the prefix. Raises ``ServiceUnavailable`` while S3 keeps failing; the tombstone's ``purge`` flag
        makes the retry or the next write finish the deletions. ``before`` gets the view the tombstone replaces."""
        prefix = user_prefix(app_name, user_id)
        deadline = time.monotonic() + aws.WRITE_BUDGET_S
        delay = 0.02
        while True:
            if before is None:
                current = self._read_manifest(prefix)
            else:
                current, view, _ = self._state(prefix)
                before(view.records)
            tombstone = Manifest(epoch=uuid.uuid4().hex[:16], purge=True)
            if self._write_manifest(prefix, tombstone, current) is not None:
                break
            delay = self._backoff(deadline, delay)
        self._forget_view(prefix, parts_too=True)
        try:
            self._purge(prefix)
        except ServiceUnavailable:
            raise
        except Exception as exc:
            raise ServiceUnavailable(
                "the memories are forgotten but not all deleted yet; retry", retry_after=1
            ) from exc


def _timestamp(value: Any) -> float:
    """An S3 ``LastModified`` (datetime) as epoch seconds; 0 when unknown (treated as old)."""
    return value.timestamp() if isinstance(value, datetime) else 0.0
