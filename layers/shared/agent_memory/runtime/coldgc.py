"""Python's garbage collector paused over a cold start: from the layer's import to the first response.

Before a cold function's first answer Python collects dozens of times (botocore's service models and endpoint
data, Powertools' resolver, the handler's modules; a search function's index parts too): the objects are young and
live on, so each collection traverses them all and finds next to nothing to free; some 10% of a session function's
first response and 60 ms of a search's at 100,000 records. So in a Lambda function invoked on demand the
collector is paused when ``agent_memory`` is first imported (``pause_for_cold_start``) and resumed when the first
response is answered (``api.lambda_entry``; a search function's first index search resumes it earlier; a
background function, auto-save or compaction, resumes it when its handler starts), or after
``COLD_GC_PAUSE_S`` whatever happens. The resume freezes what the cold path built (``gc.freeze``): it lives on,
out of every later collection, not traversed now. Garbage made meanwhile (a cycle is rare on this path) is
collected once the collector is back.

Not ahead of requests (provisioned concurrency, SnapStart: the init runs before any request, so there is nothing
to gain and the pause would outlive it), and not outside Lambda (tests, the local server, benchmarks), where
``AWS_LAMBDA_FUNCTION_NAME`` is not set.
"""

from __future__ import annotations

import gc
import os
import threading

# Lambda's initialisation types in which the init phase runs ahead of any request (and the environment may be
# frozen, background threads with it, until the first one arrives).
AHEAD_OF_REQUESTS = frozenset({"provisioned-concurrency", "snap-start"})

# How long a cold function's garbage collector may stay paused at most: its first response comes within it (a
# search's in 1-1.5 s at 100,000 records); a container whose first request never comes collects again from then on.
COLD_GC_PAUSE_S = 5.0


class _ColdGCPause:
    """The garbage collector paused over a cold start, once per process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._used = False
        self.paused = False

    def pause(self) -> None:
        with self._lock:
            if self._used or not gc.isenabled():  # once; and never re-enable what someone else disabled
                return
            self._used = self.paused = True
            gc.disable()
            self._timer = threading.Timer(COLD_GC_PAUSE_S, self.resume)
            self._timer.daemon = True
            self._timer.start()

    def resume(self) -> None:
        if not self.paused:  # every request asks: one attribute read once resumed
            return
        with self._lock:
            if self.paused:
                self.paused = False
                gc.freeze()  # what the cold path built lives on: out of every later collection, not traversed now
                gc.enable()
                if self._timer is not None:
                    self._timer.cancel()


_cold_gc = _ColdGCPause()


def on_demand_in_lambda() -> bool:
    """Whether this process is a Lambda function's, initialised for the request that follows (not ahead of it)."""
    return bool(os.environ.get("AWS_LAMBDA_FUNCTION_NAME")) and (
        os.environ.get("AWS_LAMBDA_INITIALIZATION_TYPE") not in AHEAD_OF_REQUESTS
    )


def pause_for_cold_start() -> None:
    """``agent_memory``'s import: pause the collector until the first response, in a Lambda function on demand."""
    if on_demand_in_lambda():
        _cold_gc.pause()


def resume() -> None:
    """After a response: the collector back (and the cold path's objects frozen), the first time only."""
    _cold_gc.resume()
