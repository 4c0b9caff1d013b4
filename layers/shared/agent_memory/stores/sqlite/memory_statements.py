"""The long-term memory store's tables and the statements it runs on them inside its transactions, with its
storage failures as domain errors.

Tables (prefixed ``memory_`` so that the file can also hold the session store's):

- ``memory_parts``  immutable parts of a user's memory: records (JSON) and the ``SearchIndex`` built for just
  them (``to_bytes``); ``part_id`` is AUTOINCREMENT, never reused, so a process may cache a part by its id;
- ``memory_ids``  which part holds each memory id (the held-id check of ``add``, the parts ``forget`` rewrites);
- ``memory_users``  a per-user ``generation``, bumped in the same transaction as any change of the user's
  parts. The row is never deleted (forget-all bumps it too), so a generation names one state for good.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
from collections.abc import Callable, Iterator
from typing import Any

from ...errors import ServiceUnavailable
from ..ports import IndexedRecords, MemoryRecord
from .rows import IN_CHUNK, marks

logger = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS memory_users (
    app TEXT NOT NULL,
    user TEXT NOT NULL,
    generation INTEGER NOT NULL,
    PRIMARY KEY (app, user)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS memory_parts (
    part_id INTEGER PRIMARY KEY AUTOINCREMENT,
    app TEXT NOT NULL,
    user TEXT NOT NULL,
    size INTEGER NOT NULL,
    records TEXT NOT NULL,
    index_blob BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS memory_parts_by_user ON memory_parts (app, user, part_id);
CREATE TABLE IF NOT EXISTS memory_ids (
    app TEXT NOT NULL,
    user TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    part_id INTEGER NOT NULL,
    PRIMARY KEY (app, user, memory_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS memory_ids_by_part ON memory_ids (part_id);
"""


# --- statements -------------------------------------------------------------------------------------------------


def read_generation(db: sqlite3.Connection, app_name: str, user_id: str) -> int:
    row = db.execute("SELECT generation FROM memory_users WHERE app = ? AND user = ?", (app_name, user_id)).fetchone()
    return int(row[0]) if row else 0


def bump_generation(db: sqlite3.Connection, app_name: str, user_id: str) -> None:
    db.execute(
        "INSERT INTO memory_users (app, user, generation) VALUES (?, ?, 1) "
        "ON CONFLICT (app, user) DO UPDATE SET generation = generation + 1",
        (app_name, user_id),
    )


def held_ids(db: sqlite3.Connection, app_name: str, user_id: str, ids: list[str]) -> set[str]:
    held: set[str] = set()
    for start in range(0, len(ids), IN_CHUNK):
        chunk = ids[start : start + IN_CHUNK]
        held.update(
            row[0]
            for row in db.execute(
                f"SELECT memory_id FROM memory_ids WHERE app = ? AND user = ? AND memory_id IN ({marks(chunk)})",
                (app_name, user_id, *chunk),
            )
        )
    return held


def insert_part(
    db: sqlite3.Connection, app_name: str, user_id: str, records: list[MemoryRecord], index_bytes: bytes
) -> int:
    body = json.dumps([r.to_json() for r in records], separators=(",", ":"), ensure_ascii=False)
    cursor = db.execute(
        "INSERT INTO memory_parts (app, user, size, records, index_blob) VALUES (?, ?, ?, ?, ?)",
        (app_name, user_id, len(records), body, index_bytes),
    )
    part_id = cursor.lastrowid
    assert part_id is not None
    db.executemany(
        "INSERT OR REPLACE INTO memory_ids (app, user, memory_id, part_id) VALUES (?, ?, ?, ?)",
        [(app_name, user_id, r.id, part_id) for r in records],
    )
    return part_id


def replace_parts(
    db: sqlite3.Connection, app_name: str, user_id: str, old: list[int], new: IndexedRecords
) -> int | None:
    """Delete the parts ``old`` and store ``new`` (unless empty) in their place, its ids pointing at it; the
    new part's id."""
    for start in range(0, len(old), IN_CHUNK):
        chunk = old[start : start + IN_CHUNK]
        db.execute(f"DELETE FROM memory_parts WHERE part_id IN ({marks(chunk)})", chunk)
    if not new.records:
        return None
    return insert_part(db, app_name, user_id, list(new.records.values()), new.index.to_bytes())


def combine_parts(parts: list[IndexedRecords], combine: Callable[[list[Any]], Any]) -> IndexedRecords:
    records: dict[str, MemoryRecord] = {}
    for part in parts:
        records.update(part.records)
    return IndexedRecords(records, combine([p.index for p in parts]) if parts else None)


# --- errors -----------------------------------------------------------------------------------------------------


def as_unavailable(exc: BaseException) -> BaseException:
    """A busy or failing database as ``ServiceUnavailable`` (503); anything else as it is."""
    if isinstance(exc, sqlite3.OperationalError) or type(exc) is sqlite3.DatabaseError:
        logger.warning("memory database error", extra={"error": repr(exc)})
        busy = "locked" in str(exc) or "busy" in str(exc)
        message = "the memory database is busy; retry" if busy else f"the memory database failed ({exc}); retry"
        unavailable = ServiceUnavailable(message, retry_after=1)
        unavailable.__cause__ = exc
        return unavailable
    return exc


@contextlib.contextmanager
def unavailable_on_error(message: str) -> Iterator[None]:
    try:
        yield
    except (sqlite3.OperationalError, sqlite3.DatabaseError) as exc:
        converted = as_unavailable(exc)
        if converted is exc:
            raise
        logger.warning(message, extra={"error": repr(exc)})
        raise converted from exc
