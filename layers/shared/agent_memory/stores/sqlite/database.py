"""``SqliteDatabase``: the embedded store's file, its connections and its transactions.

Every write is one ``BEGIN IMMEDIATE`` transaction: nothing partial is ever visible. Writers of this process queue on
a lock; another process holding the file waits ``busy_timeout``. A database still busy then, or failing with an I/O
error or a full disk, answers ServiceUnavailable (503) with the transaction rolled back. Reads run in a read
transaction (one snapshot) on a connection of their own: in WAL mode readers never wait for the writer.
"""

from __future__ import annotations

import contextlib
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Iterator

from ...errors import PayloadTooLarge, ServiceUnavailable
from ...runtime.aws import WRITE_BUDGET_S
from .gate import FileGate, gate_for
from .schema import create_schema

# Idle connections kept for reuse; more are opened under load and closed when given back.
_POOL_SIZE = 8

# Primary result codes (the low byte of an extended code) that mean the storage, not the request, failed.
_UNAVAILABLE = {
    5: "the database is busy",  # SQLITE_BUSY: another writer held it past busy_timeout
    6: "the database is locked",  # SQLITE_LOCKED
    10: "a disk I/O error",  # SQLITE_IOERR
    13: "the disk is full",  # SQLITE_FULL
    15: "a locking protocol error",  # SQLITE_PROTOCOL
}
_TOOBIG = 18


def storage_error(exc: sqlite3.Error) -> Exception | None:
    """The domain error for a SQLite failure of the storage (busy, locked, I/O, full: ServiceUnavailable; a value
    past SQLite's limits: PayloadTooLarge), None for anything else (a bug: left to answer 500)."""
    code = getattr(exc, "sqlite_errorcode", None)
    text = str(exc).lower()
    if isinstance(exc, sqlite3.DataError) or (code is not None and code & 0xFF == _TOOBIG) or "too big" in text:
        return PayloadTooLarge("a value is larger than the local database stores")
    what = _UNAVAILABLE.get(code & 0xFF) if code is not None else None
    if what is None and ("locked" in text or "busy" in text or "disk i/o" in text):
        what = text
    if what is None:
        return None
    return ServiceUnavailable(f"local storage failed ({what}); nothing partial was kept, retry", retry_after=1)


class SqliteDatabase:
    """One SQLite database file (or ``":memory:"``) shared by the embedded stores, safe to use from many threads.

    WAL journal, ``busy_timeout`` (seconds), foreign keys on, ``synchronous`` NORMAL by default (a committed write
    survives a crash of the process; a power loss may lose the last ones, never corrupting the file). Connections
    come from a small pool rather than one per thread: the local server starts a thread per request. A
    ``":memory:"`` database lives in one connection that every caller takes in turn.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, busy_timeout_s: float = WRITE_BUDGET_S, synchronous: str = "NORMAL"
    ) -> None:
        self.path = os.fspath(path)
        self._memory = self.path == ":memory:" or self.path.startswith("file::memory:")
        self._busy_timeout_s = busy_timeout_s
        if synchronous.upper() not in {"OFF", "NORMAL", "FULL", "EXTRA"}:
            raise ValueError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}")
        self._synchronous = synchronous.upper()
        self._write_lock = threading.Lock()
        self._gate = gate_for(self.path) if not self._memory else FileGate()
        self._idle: queue.LifoQueue[sqlite3.Connection] = queue.LifoQueue()
        self._closed = False
        first = self._open()
        try:
            if not self._memory:
                first.execute("PRAGMA journal_mode = WAL")
            create_schema(first, self.path)
        except BaseException:
            first.close()
            raise
        self._idle.put(first)

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path,
            timeout=self._busy_timeout_s,
            isolation_level=None,  # autocommit: transactions are begun and ended explicitly
            check_same_thread=False,  # a pooled connection serves one thread at a time, any thread
            uri=self.path.startswith("file:"),
        )
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute(f"PRAGMA synchronous = {self._synchronous}")
        # Deleted rows' bytes are overwritten with zeros, not left in free pages (``checkpoint`` empties the log).
        conn.execute("PRAGMA secure_delete = ON")
        return conn

    def _take(self, deadline: float) -> sqlite3.Connection:
        if self._closed:
            raise RuntimeError("the database is closed")
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            if not self._memory:
                return self._open()
        try:
            return self._idle.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise ServiceUnavailable("the local database is busy; retry", retry_after=1) from None

    def _give(self, conn: sqlite3.Connection, *, broken: bool) -> None:
        # A ":memory:" database lives in its one connection: kept whatever failed on it.
        keep = not self._closed and (self._memory or (not broken and self._idle.qsize() < _POOL_SIZE))
        if keep:
            self._idle.put(conn)
            return
        with contextlib.suppress(sqlite3.Error):
            conn.close()

    @contextlib.contextmanager
    def _transaction(self, write: bool) -> Iterator[sqlite3.Connection]:
        deadline = time.monotonic() + self._busy_timeout_s
        # Writers of this process queue here (a fair, fast wait) rather than in SQLite's polling busy handler.
        if write and not self._write_lock.acquire(timeout=self._busy_timeout_s):
            raise ServiceUnavailable("the local database is busy with other writes; retry", retry_after=1)
        try:
            # Shared with this process's other transactions; a checkpoint emptying the log waits for them (gate.py).
            with self._gate.shared():
                conn = self._take(deadline)
                broken = False
                try:
                    if write:
                        # What is left of the budget for another process's lock.
                        remaining_ms = max(1, int((deadline - time.monotonic()) * 1000))
                        conn.execute(f"PRAGMA busy_timeout = {remaining_ms}")
                    conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                    try:
                        yield conn
                        conn.execute("COMMIT")
                    except BaseException:
                        if conn.in_transaction:
                            with contextlib.suppress(sqlite3.Error):
                                conn.execute("ROLLBACK")
                        raise
                except sqlite3.Error as exc:
                    broken = not isinstance(exc, sqlite3.IntegrityError)
                    mapped = storage_error(exc)
                    if mapped is None:
                        raise
                    raise mapped from exc
                finally:
                    self._give(conn, broken=broken)
        finally:
            if write:
                self._write_lock.release()

    def read(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """A connection in a read transaction (one consistent snapshot), ended when the block ends."""
        return self._transaction(write=False)

    def write(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """A connection in a ``BEGIN IMMEDIATE`` transaction, committed when the block ends, rolled back when it
        raises. Busy past the timeout, I/O errors, a full disk: ServiceUnavailable, nothing written."""
        return self._transaction(write=True)

    def checkpoint(self) -> None:
        """Copy the write-ahead log into the file and empty it (``wal_checkpoint(TRUNCATE)``), waiting for readers
        within the busy timeout: what a deletion overwrote then leaves the log too, not only the file.
        ServiceUnavailable when a reader (another process holding a snapshot) kept it from finishing: the deleted
        bytes may still be in the log, and a retry finishes."""
        if self._memory:
            return
        deadline = time.monotonic() + self._busy_timeout_s
        if not self._write_lock.acquire(timeout=self._busy_timeout_s):
            raise ServiceUnavailable("the local database is busy with other writes; retry", retry_after=1)
        try:
            conn = self._take(deadline)
            broken = False
            try:
                # This process's transactions drained first: only another process's reader can hold the log.
                with self._gate.exclusive(max(0.0, deadline - time.monotonic())):
                    conn.execute(f"PRAGMA busy_timeout = {max(1, int((deadline - time.monotonic()) * 1000))}")
                    busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            except sqlite3.Error as exc:
                broken = True
                mapped = storage_error(exc)
                if mapped is None:
                    raise
                raise mapped from exc
            finally:
                self._give(conn, broken=broken)
        finally:
            self._write_lock.release()
        if busy:
            raise ServiceUnavailable(
                "another reader of the local database holds an old snapshot: deleted text may still be in its "
                "write-ahead log; retry to finish",
                retry_after=1,
            )

    def close(self) -> None:
        """Close every connection (those in use close when given back)."""
        self._closed = True
        while True:
            try:
                conn = self._idle.get_nowait()
            except queue.Empty:
                break
            with contextlib.suppress(sqlite3.Error):
                conn.close()
