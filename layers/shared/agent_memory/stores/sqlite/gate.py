"""One gate per database file for the connections of this process: transactions pass it shared, a checkpoint that
must empty the write-ahead log passes it alone.

``wal_checkpoint(TRUNCATE)`` can only empty the log while no transaction reads from it. The server's threads start
read transactions all the time, so under load a checkpoint waiting on SQLite's busy handler could go on waiting
(a deletion then answered 503 although no one held an old snapshot for long). The gate stops new transactions of
this process for the moment of the checkpoint and lets the ones under way finish; what can still keep it from
finishing is another process's reader (a ``.backup``), which is then worth a 503 and a retry.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator


class FileGate:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._active = 0
        self._draining = False

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        """A transaction of this process: waits while a checkpoint drains the file."""
        with self._cond:
            while self._draining:
                self._cond.wait()
            self._active += 1
        try:
            yield
        finally:
            with self._cond:
                self._active -= 1
                if not self._active:
                    self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self, timeout_s: float) -> Iterator[None]:
        """No transaction of this process under way (those running finish first, within ``timeout_s``; past it
        the block runs anyway, and its checkpoint may find them) and none starting until the block ends."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._draining:  # another checkpoint
                self._cond.wait()
            self._draining = True
            while self._active and (left := deadline - time.monotonic()) > 0:
                self._cond.wait(left)
        try:
            yield
        finally:
            with self._cond:
                self._draining = False
                self._cond.notify_all()


_GATES: dict[str, FileGate] = {}
_GATES_LOCK = threading.Lock()


def gate_for(path: str) -> FileGate:
    """The gate of the database file at ``path`` (one per file, whichever store opens it)."""
    key = os.path.realpath(path)
    with _GATES_LOCK:
        gate = _GATES.get(key)
        if gate is None:
            gate = _GATES[key] = FileGate()
        return gate
