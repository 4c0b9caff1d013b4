"""Long-term memory storage in SQLite: the embedded backend's MemoryStore (one file, WAL, stdlib ``sqlite3``).

Its tables, and the statements it runs on them, are ``memory_statements``'s.

What each operation does:

- **add** keeps the records whose ids are not held, builds their index *outside* any transaction (the embedder
  may be slow), then in one ``BEGIN IMMEDIATE`` transaction checks the ids again, writes one new part and bumps
  the generation. Ids that became held meanwhile (a racing save) make it rebuild for the rest and try again. A
  user's parts are merged like a binary counter (a part no bigger than the newer one after it is merged with
  it) and never number more than ``MAX_PARTS``: O(log n) parts, each record rewritten O(log n) times. Merging
  combines stored indexes (array concatenation), never calls the embedder.
- **forget** rewrites the parts holding the ids (or holding memories whose context quoted a forgotten text: that
  text is cut from their context and they are re-indexed, as ``S3MemoryStore`` does) into one part without
  them, if the generation is still the one it read. ``secure_delete`` zeroes the freed pages and a WAL
  checkpoint follows, so the text leaves the file rather than lingering in free pages or the log.
- **forget_all** deletes the user's parts and ids and bumps the generation; a save that built its index before
  lands after it and starts afresh.
- **view** asks for the user's generation (one indexed SELECT); when a cached view has it, that view is the
  answer. Otherwise only the parts not cached yet are read and decoded, and the view is recombined.

The database busy beyond ``busy_timeout_s`` (another process writing) and disk errors answer
``ServiceUnavailable``; ``add`` raises ``NotStored`` when nothing of it landed (its transaction rolled back).
Writers in one process queue on a lock rather than on SQLite's sleeping busy handler.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from ...errors import ServiceUnavailable
from ...limits import MAX_PARTS
from ...runtime import aws
from ...runtime.lazyclass import dataclass  # processed on first instance (lazyclass.py)
from ..cache import ByteBudgetCache, cache_budget, indexed_bytes
from ..ports import Before, IndexedRecords, MemoryRecord, NotStored, Prepare, without_fragments
from .gate import gate_for
from .memory_statements import (
    SCHEMA,
    as_unavailable,
    bump_generation,
    combine_parts,
    held_ids,
    insert_part,
    read_generation,
    replace_parts,
    unavailable_on_error,
)
from .rows import IN_CHUNK, marks

logger = logging.getLogger(__name__)


@dataclass
class _View:
    """A user's memory as of ``generation``: its parts by id (oldest first) and their combination."""

    generation: int
    parts: dict[int, IndexedRecords]
    combined: IndexedRecords


def _view_bytes(view: _View) -> int:
    combined = indexed_bytes(view.combined.records, view.combined.index)
    return combined + sum(indexed_bytes(p.records, p.index) for p in view.parts.values() if p is not view.combined)


class _Changed(Exception):
    """The user's memory changed between the read and the write transaction: read again."""


class SqliteMemoryStore:
    """Every user's records and indexes in the SQLite file at ``path``. ``build_index``, ``load_index`` and
    ``combine`` adapt ``search.index`` (as for ``S3MemoryStore``). Safe for the threads of one process and for
    several processes on one file."""

    def __init__(
        self,
        path: Path | str,
        build_index: Callable[[list[MemoryRecord]], Any],
        load_index: Callable[[bytes], Any],
        combine: Callable[[list[Any]], Any],
        *,
        busy_timeout_s: float = 5.0,
        write_budget_s: float | None = None,
        cache_bytes: int | None = None,
    ) -> None:
        self._path = str(path)
        self._build_index = build_index
        self._load_index = load_index
        self._combine = combine
        self._busy_timeout_s = busy_timeout_s
        self._budget_s = aws.WRITE_BUDGET_S if write_budget_s is None else write_budget_s
        self._pool: list[sqlite3.Connection] = []  # idle connections (a server's threads come and go)
        self._pool_lock = threading.Lock()
        self._write_lock = threading.Lock()  # this process's writers queue here, not in SQLite's busy handler
        self._gate = gate_for(self._path)
        self._cache_lock = threading.Lock()
        # Bounded by bytes (``stores/cache.py``): the users' views (a view's parts and their combination both
        # count), and the parts this process wrote lately, so that the next view need not read and decode them.
        budget = cache_budget() if cache_bytes is None else cache_bytes
        self._views: ByteBudgetCache[tuple[str, str], _View] = ByteBudgetCache(int(budget * 0.8), _view_bytes)
        self._written: ByteBudgetCache[int, IndexedRecords] = ByteBudgetCache(
            int(budget * 0.2), lambda part: indexed_bytes(part.records, part.index)
        )
        with self._connection() as db, unavailable_on_error("could not open the memory database"):
            db.executescript(SCHEMA)

    # --- connections ------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _connection(self, *, gated: bool = True) -> Iterator[sqlite3.Connection]:
        """A pooled connection, its use shared with this process's other transactions on the file (``gate.py``):
        a checkpoint emptying the log (``gated=False``) waits for them."""
        with self._pool_lock:
            db = self._pool.pop() if self._pool else None
        if db is None:
            db = self._connect()
        try:
            with self._gate.shared() if gated else contextlib.nullcontext():
                try:
                    yield db
                finally:
                    if db.in_transaction:  # an error inside a transaction: leave nothing half done on a pooled one
                        with contextlib.suppress(sqlite3.Error):
                            db.execute("ROLLBACK")
        finally:
            with self._pool_lock:
                self._pool.append(db)

    def _connect(self) -> sqlite3.Connection:
        with unavailable_on_error("could not open the memory database"):
            db = sqlite3.connect(
                self._path, timeout=self._busy_timeout_s, isolation_level=None, check_same_thread=False
            )
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA secure_delete=ON")  # freed pages are zeroed: forgotten text leaves the file
        return db

    def close(self) -> None:
        """Close the idle connections (those in use close when their call returns them, if ever)."""
        with self._pool_lock:
            pool, self._pool = self._pool, []
        for db in pool:
            db.close()

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``): committed when the block ends, rolled back on an error."""
        with self._write_lock, self._connection() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                if db.in_transaction:  # (SQLite rolls back by itself after some errors, a full disk say)
                    db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def _checkpoint(self) -> None:
        """Copy the log into the file and empty it, so that overwritten pages of forgotten text go from the log
        too, waiting for readers within the busy timeout. ServiceUnavailable when a reader holding an old snapshot
        kept it from finishing: the forgotten text may still be in the log, and a retry of the forget finishes."""
        with (
            unavailable_on_error("could not empty the memory database's log; retry"),
            self._write_lock,
            self._connection(gated=False) as db,
            self._gate.exclusive(self._budget_s),
        ):
            db.execute(f"PRAGMA busy_timeout = {max(1, int(self._budget_s * 1000))}")
            busy, _, _ = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:
            raise ServiceUnavailable(
                "another reader of the memory database holds an old snapshot: forgotten text may still be in its "
                "write-ahead log; retry to finish",
                retry_after=1,
            )

    # --- reads ------------------------------------------------------------------------------------------------

    def view(self, app_name: str, user_id: str) -> IndexedRecords:
        """Every record of the user with their combined index (None when there are none); cached by the user's
        generation, so a warm view costs one small SELECT."""
        with unavailable_on_error("the memory database is busy or failing"):
            return self._state(app_name, user_id).combined

    def _state(self, app_name: str, user_id: str) -> _View:
        key = (app_name, user_id)
        with self._cache_lock:
            cached = self._views.get(key)
        with self._connection() as db:
            generation = read_generation(db, app_name, user_id)
            if cached is not None and cached.generation == generation:
                return cached
            # One read transaction: the generation and the parts it names are one snapshot (WAL readers see a
            # consistent state while writers go on).
            db.execute("BEGIN")
            try:
                generation = read_generation(db, app_name, user_id)
                ids = [
                    row[0]
                    for row in db.execute(
                        "SELECT part_id FROM memory_parts WHERE app = ? AND user = ? ORDER BY part_id",
                        (app_name, user_id),
                    )
                ]
                known = self._known(cached)
                wanted = [i for i in ids if i not in known]
                loaded = self._read_parts(db, wanted)
            finally:
                db.execute("COMMIT")
        parts = {i: known[i] if i in known else loaded[i] for i in ids}
        view = _View(generation, parts, combine_parts(list(parts.values()), self._combine))
        with self._cache_lock:
            current = self._views.get(key)
            if current is None or current.generation <= generation:
                self._views.put(key, view)
        return view

    def _read_parts(self, db: sqlite3.Connection, part_ids: list[int]) -> dict[int, IndexedRecords]:
        parts: dict[int, IndexedRecords] = {}
        for start in range(0, len(part_ids), IN_CHUNK):
            chunk = part_ids[start : start + IN_CHUNK]
            for part_id, records, blob in db.execute(
                f"SELECT part_id, records, index_blob FROM memory_parts WHERE part_id IN ({marks(chunk)})", chunk
            ):
                decoded = [MemoryRecord.from_json(r) for r in json.loads(records)]
                parts[part_id] = IndexedRecords({r.id: r for r in decoded}, self._load_index(bytes(blob)))
        return parts

    # --- writes -----------------------------------------------------------------------------------------------

    def add(
        self, app_name: str, user_id: str, records: list[MemoryRecord], prepare: Prepare | None = None
    ) -> list[str]:
        """Store those of ``records`` whose ids the user's memory does not hold yet, as one new part; return
        their ids. ``NotStored`` when it failed (nothing of it landed: its transaction rolled back)."""
        try:
            if prepare is None:
                return self._add(app_name, user_id, records)
            deadline = time.monotonic() + self._budget_s
            while True:
                # Off the (cached) view, and written only if the user's generation is still the view's: a fence
                # or a forget in between makes it prepare again (``fence``).
                state = self._state(app_name, user_id)
                try:
                    return self._add(app_name, user_id, prepare(state.combined.records), state.generation)
                except _Changed:
                    if time.monotonic() > deadline:
                        raise ServiceUnavailable("this user's memory kept changing; retry", retry_after=1) from None
        except NotStored:
            raise
        except Exception as exc:
            raise NotStored(as_unavailable(exc)) from exc

    def fence(self, app_name: str, user_id: str) -> None:
        """Bump the user's generation: an ``add`` that prepared over an earlier one finds it moved in its write
        transaction and prepares again."""
        with unavailable_on_error("could not fence the memory; retry"), self._write() as db:
            bump_generation(db, app_name, user_id)

    def _add(
        self, app_name: str, user_id: str, records: list[MemoryRecord], generation: int | None = None
    ) -> list[str]:
        """Store the records not held yet; with ``generation`` (the one ``prepare`` read), only while the user's
        generation is still it (else ``_Changed``, nothing written)."""
        batch = list({r.id: r for r in records}.values())  # a repeated id: the last record, stored once
        if not batch:
            return []
        deadline = time.monotonic() + self._budget_s
        with self._connection() as db:
            held = held_ids(db, app_name, user_id, [r.id for r in batch])
        fresh = [r for r in batch if r.id not in held]
        while fresh:
            index = self._build_index(fresh)  # outside the transaction: a slow embedder holds no lock
            blob = index.to_bytes()
            with self._write() as db:
                if generation is not None and read_generation(db, app_name, user_id) != generation:
                    raise _Changed()
                raced = held_ids(db, app_name, user_id, [r.id for r in fresh])
                if not raced:
                    part = IndexedRecords({r.id: r for r in fresh}, index)
                    written = {insert_part(db, app_name, user_id, fresh, blob): part}
                    written.update(self._merge_if_needed(db, app_name, user_id, written))
                    bump_generation(db, app_name, user_id)
            if not raced:
                # Only once committed: a rolled-back part's id may be given again (AUTOINCREMENT rolls back too).
                for part_id, stored in written.items():
                    self._remember(part_id, stored)
                return [r.id for r in fresh]
            # A racing save stored some of them meanwhile: index the rest again (never stored twice).
            fresh = [r for r in fresh if r.id not in raced]
            if time.monotonic() > deadline:
                raise ServiceUnavailable("too many concurrent saves on this user's memory; retry", retry_after=1)
        return []

    def _known(self, cached: _View | None) -> dict[int, IndexedRecords]:
        """The decoded parts at hand: those of the cached view and those this process wrote lately."""
        with self._cache_lock:
            return {**(cached.parts if cached is not None else {}), **self._written.values()}

    def _remember(self, part_id: int, part: IndexedRecords) -> None:
        with self._cache_lock:
            self._written.put(part_id, part)

    def _merge_if_needed(
        self, db: sqlite3.Connection, app_name: str, user_id: str, at_hand: dict[int, IndexedRecords]
    ) -> dict[int, IndexedRecords]:
        """Merge the user's newest parts while the one before them is no bigger than they are together (a
        binary counter) or the user has more than ``MAX_PARTS``: one part replaces them. The part written
        (by id), if any."""
        sizes = db.execute(
            "SELECT part_id, size FROM memory_parts WHERE app = ? AND user = ? ORDER BY part_id",
            (app_name, user_id),
        ).fetchall()
        tail = 1
        total = sizes[-1][1]
        while tail < len(sizes) and (sizes[-tail - 1][1] <= total or len(sizes) - tail + 1 > MAX_PARTS):
            total += sizes[-tail - 1][1]
            tail += 1
        if tail == 1:
            return {}
        merged_ids = [part_id for part_id, _ in sizes[-tail:]]
        with self._cache_lock:
            cached = self._views.get((app_name, user_id))
        known = self._known(cached) | at_hand
        loaded = self._read_parts(db, [i for i in merged_ids if i not in known])
        parts = [known[i] if i in known else loaded[i] for i in merged_ids]
        merged = combine_parts(parts, self._combine)
        part_id = replace_parts(db, app_name, user_id, merged_ids, merged)
        return {} if part_id is None else {part_id: merged}

    def held(self, app_name: str, user_id: str, memory_ids: Iterable[str]) -> set[str]:
        records = self.view(app_name, user_id).records  # cached by generation: one small SELECT when warm
        return {i for i in memory_ids if i in records}

    def forget(self, app_name: str, user_id: str, memory_ids: Iterable[str]) -> None:
        """Forget memories: their records, their text in the index and in other memories' context. Idempotent;
        ``ServiceUnavailable`` when the database is busy or failing (then nothing changed)."""
        ids = set(memory_ids)
        if not ids:
            return
        deadline = time.monotonic() + self._budget_s
        with unavailable_on_error("could not forget the memories; retry"):
            while True:
                state = self._state(app_name, user_id)
                if not ids & set(state.combined.records):
                    break  # forgotten already (a retry after a checkpoint a reader held back ends here)
                try:
                    self._rewrite_without(app_name, user_id, state, ids)
                    break
                except _Changed:
                    if time.monotonic() > deadline:
                        raise ServiceUnavailable("this user's memory kept changing; retry", retry_after=1) from None
        self._checkpoint()

    def _rewrite_without(self, app_name: str, user_id: str, state: _View, ids: set[str]) -> None:
        """Replace the parts holding ``ids`` (or a context quoting them) by one part without them, if the user's
        memory is still at ``state``'s generation (else ``_Changed``)."""
        everything = state.combined.records
        gone = ids & set(everything)
        fragments = [f"{everything[i].author}: {everything[i].text}" for i in gone if everything[i].text]
        scrubbed: dict[str, MemoryRecord] = {}
        for record in everything.values():
            if record.id in gone:
                continue
            clean = without_fragments(record, fragments)
            if clean is not None:
                scrubbed[record.id] = clean
        rebuilt = self._build_index(list(scrubbed.values())) if scrubbed else None  # outside the transaction
        dropped = gone | set(scrubbed)
        touched = [pid for pid, part in state.parts.items() if dropped & set(part.records)]
        kept: dict[str, MemoryRecord] = {}
        indexes: list[Any] = []
        for pid in touched:
            part = state.parts[pid]
            kept.update({k: scrubbed.get(k, v) for k, v in part.records.items() if k not in gone})
            indexes.append(part.index.without(dropped))
        if rebuilt is not None:
            indexes.append(rebuilt)
        replacement = IndexedRecords(kept, self._combine(indexes) if kept else None)
        with self._write() as db:
            if read_generation(db, app_name, user_id) != state.generation:
                raise _Changed()
            doomed = sorted(gone)
            for start in range(0, len(doomed), IN_CHUNK):
                chunk = doomed[start : start + IN_CHUNK]
                db.execute(
                    f"DELETE FROM memory_ids WHERE app = ? AND user = ? AND memory_id IN ({marks(chunk)})",
                    (app_name, user_id, *chunk),
                )
            written = replace_parts(db, app_name, user_id, touched, replacement)
            bump_generation(db, app_name, user_id)
        if written is not None:
            self._remember(written, replacement)

    def forget_all(self, app_name: str, user_id: str, before: Before | None = None) -> None:
        """Forget every memory of the user; a later save starts afresh. Idempotent. ``before`` gets the view the
        deletion removes: the deletion is redone over a new view when a save landed after it was read."""
        deadline = time.monotonic() + self._budget_s
        with unavailable_on_error("could not forget the memories; retry"):
            while True:
                if before is not None:
                    with self._connection() as db:
                        generation = read_generation(db, app_name, user_id)
                    before(self.view(app_name, user_id).records)
                with self._write() as db:
                    raced = before is not None and read_generation(db, app_name, user_id) != generation
                    if not raced:
                        db.execute("DELETE FROM memory_ids WHERE app = ? AND user = ?", (app_name, user_id))
                        db.execute("DELETE FROM memory_parts WHERE app = ? AND user = ?", (app_name, user_id))
                        bump_generation(db, app_name, user_id)
                if not raced:
                    break
                if time.monotonic() > deadline:  # a save landed after the view was read: read it again
                    raise ServiceUnavailable("too many concurrent saves on this user's memory; retry", retry_after=1)
            with self._cache_lock:
                self._views.pop((app_name, user_id))
        self._checkpoint()
