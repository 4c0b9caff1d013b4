"""The embedded backend's change feed → the auto-save function, as Lambda's event source mapping would run it.

The SQLite session store writes every stored event to an outbox in the same transaction as the event
(``stores/sqlite/appends.py``), so nothing an append stores can be missed, and a restart resumes where delivery stopped.
This pump reads the outbox, hands the records to the function the template maps to the table's stream (its
``BatchSize``, its ``MaximumBatchingWindowInSeconds`` or the local override), and deletes them from the outbox
once the function has taken them. Records a batch reports as failed (``batchItemFailures``) are handed over
again from the first failed one on, after a delay that doubles (at most a minute), as Lambda retries a stream;
a record that kept failing for ``MAX_ATTEMPTS`` deliveries is dropped with an error in the log (Lambda's
``MaximumRetryAttempts``), so one poisoned record never stops auto-save for everyone.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from agent_memory.stores.ports import ChangeFeed

from .apigw import LambdaContext
from .streams import StreamMapping, stream_mappings
from .template import load_handler

MAX_ATTEMPTS = 10
POLL_S = 0.5


def start_change_feed(
    template: dict[str, Any],
    names: dict[str, str],
    outbox: ChangeFeed,
    window_override_s: float | None,
    stop: threading.Event,
) -> list[threading.Thread]:
    """One pump per stream mapping of the template (there is one: auto-save)."""
    threads = []
    for mapping in stream_mappings(template, names):
        window = mapping.window_s if window_override_s is None else window_override_s
        pump = FeedPump(mapping, outbox, window)
        thread = threading.Thread(target=pump.run, args=(stop,), name=f"feed-{mapping.function}", daemon=True)
        thread.start()
        threads.append(thread)
    return threads


class FeedPump:
    def __init__(self, mapping: StreamMapping, outbox: ChangeFeed, window_s: float) -> None:
        self.mapping = mapping
        self.outbox = outbox
        self.window_s = window_s
        self._attempts: dict[str, int] = {}
        self._retry_at = 0.0  # after a failed delivery, the next waits (doubling, at most a minute)

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(POLL_S):
            try:
                while self.step() and not stop.is_set():  # a backlog goes batch after batch, not one per poll
                    pass
            except Exception as exc:  # keep the pump alive; the error is in the log
                print(f"change feed {self.mapping.function} failed: {exc!r}", file=sys.stderr)

    def step(self, now: float | None = None) -> int:
        """Deliver one batch if one is due; return how many records the function took."""
        now = time.time() if now is None else now
        if now < self._retry_at:
            return 0
        pending = self.outbox.read_changes(0, self.mapping.batch_size)
        if not pending:
            return 0
        oldest = float(pending[0]["dynamodb"].get("ApproximateCreationDateTime") or 0)
        if len(pending) < self.mapping.batch_size and now - oldest < self.window_s:
            return 0
        return self.deliver(pending, now)

    def deliver(self, batch: list[dict[str, Any]], now: float) -> int:
        handler = load_handler(self.mapping)
        result = handler({"Records": batch}, LambdaContext(function_name=self.mapping.function))
        failed = {f["itemIdentifier"] for f in (result or {}).get("batchItemFailures", [])}
        taken = batch
        if failed:
            first = next((i for i, r in enumerate(batch) if _sequence(r) in failed), 0)
            head = _sequence(batch[first])
            self._attempts[head] = self._attempts.get(head, 0) + 1
            if self._attempts[head] < MAX_ATTEMPTS:
                taken = batch[:first]
                self._retry_at = now + min(2.0 ** self._attempts[head], 60.0)
                print(f"change feed {self.mapping.function}: {len(failed)} records to retry", file=sys.stderr)
            else:
                taken = batch[: first + 1]
                print(
                    f"change feed {self.mapping.function}: record {head} failed {MAX_ATTEMPTS} times; dropped",
                    file=sys.stderr,
                )
                self._attempts.pop(head, None)
        if taken:
            self.outbox.ack_changes(int(_sequence(taken[-1])))
        return len(taken)


def _sequence(record: dict[str, Any]) -> str:
    return str(record["dynamodb"]["SequenceNumber"])
