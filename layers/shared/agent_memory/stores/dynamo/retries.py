"""Retries, time budgets and what DynamoDB's errors mean to a client.

Faults (see docs/design.md, "Fault model: session writes"): every write retries throttling, cancelled
transactions and transport errors with jittered backoff for ``aws.WRITE_BUDGET_S``, then answers 503. Lost races
on a session's version are retried for ``RACE_BUDGET_S``, then answer 409.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from ...errors import Conflict, EventIdConflict, PayloadTooLarge, ServiceUnavailable
from ...runtime.aws import WRITE_BUDGET_S, capacity_error, error_code

# Lost races on a session's version are retried this long (each attempt is two quick requests, so the last one
# ends well inside the function's 29 s); faults have their own, shorter budget, ``aws.WRITE_BUDGET_S``.
RACE_BUDGET_S = 12.0

_T = TypeVar("_T")


class Budget:
    """How long one write may keep retrying: ``WRITE_BUDGET_S`` from its start, with jittered backoff.

    Transient faults (throttling, a transaction cancelled for capacity or a conflict, a transport error, a 5xx)
    end in ServiceUnavailable (503, ``Retry-After``); lost races on the session's version are retried for
    ``RACE_BUDGET_S`` and then end in Conflict (409).
    """

    def __init__(self, seconds: float | None = None) -> None:
        start = time.monotonic()
        self._deadline = start + (WRITE_BUDGET_S if seconds is None else seconds)
        self._race_deadline = start + RACE_BUDGET_S
        self._faults = 0
        self._races = 0

    def after_fault(self, cause: BaseException | str) -> None:
        """Sleep before the next attempt, or raise ServiceUnavailable when that would pass the budget."""
        self._faults += 1
        # Exponential from 50 ms, capped at 1 s, with jitter so that throttled writers do not retry in step.
        delay = random.uniform(0.5, 1.0) * min(1.0, 0.025 * 2**self._faults)
        if time.monotonic() + delay >= self._deadline:
            what = cause if isinstance(cause, str) else (error_code(cause) or type(cause).__name__)
            error = ServiceUnavailable(f"storage kept failing ({what}); nothing partial was kept, retry", retry_after=2)
            if isinstance(cause, BaseException):
                raise error from cause
            raise error
        time.sleep(delay)

    def after_race(self) -> None:
        """Sleep before re-reading a session whose version moved, or raise Conflict past the budget."""
        self._races += 1
        if time.monotonic() > self._race_deadline:
            raise Conflict("too many concurrent writers on the session; retry the request")
        time.sleep(random.uniform(0, min(0.2, 0.005 * 2**self._races)))

    def call(self, fn: Callable[..., _T], /, *args: Any, **kwargs: Any) -> _T:
        """``fn(*args, **kwargs)``, retried on transient faults within the budget (for idempotent calls)."""
        while True:
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                if not transient(exc):
                    raise
                self.after_fault(exc)


def transient(exc: BaseException) -> bool:
    """A fault a later attempt can clear (cancellations and failed conditions are read by their callers)."""
    if error_code(exc) in {"TransactionCanceledException", "ConditionalCheckFailedException"}:
        return False
    return capacity_error(exc) is not None


def too_big(exc: BaseException) -> bool:
    """DynamoDB refused a write because an item would pass its 400 KB limit."""
    return error_code(exc) == "ValidationException" and "size" in str(exc)


class Unsettled(Exception):
    """A transaction failed in a way a retry can clear; it may have been applied (its answer lost)."""


def reason_codes(exc: Any) -> list[str]:
    """The codes of a cancelled transaction's reasons, one per action, in order ("None" for an action that was fine)."""
    return [r.get("Code", "None") for r in exc.response.get("CancellationReasons", [])]


def state_too_large(field: str) -> PayloadTooLarge:
    return PayloadTooLarge(
        "the write would grow the session's state past DynamoDB's 400 KB item limit; keep large values in "
        "events or artifacts, not in state",
        field=field,
    )


def collection_full() -> PayloadTooLarge:
    return PayloadTooLarge(
        "the session has reached DynamoDB's 10 GB limit for one session's events (the item collection of its "
        "local secondary indexes); compaction does not free it: start a new session"
    )


def id_conflict(event_id: str, index: int) -> EventIdConflict:
    return EventIdConflict(
        f"event id {event_id!r} is stored already with a different body; send a new id for a new event",
        field=f"events[{index}].id",
    )


def batch_write(db: Any, table: str, requests: list[dict[str, Any]], budget: Budget | None = None) -> None:
    """BatchWriteItem in chunks of 25. Unprocessed items and throttles are retried with jittered backoff within
    the write budget (``aws.WRITE_BUDGET_S``), then ServiceUnavailable (503): never a loop past the function's
    timeout. The requests must be idempotent (puts of whole items, deletes), as a retry may repeat one."""
    budget = budget or Budget()
    for start in range(0, len(requests), 25):
        pending: dict[str, Any] = {table: requests[start : start + 25]}
        while pending:
            response = budget.call(db.batch_write_item, RequestItems=pending)
            pending = response.get("UnprocessedItems") or {}
            if pending:
                budget.after_fault("unprocessed items")


def parallel_batch_write(db: Any, table: str, requests: list[dict[str, Any]], workers: int = 8) -> None:
    """``batch_write`` in chunks of 250 requests on up to ``workers`` threads (each chunk its own write budget):
    a purge of thousands of items takes its time divided by the workers. The first failure is raised once every
    chunk has ended."""
    chunks = [requests[start : start + 250] for start in range(0, len(requests), 250)]
    if len(chunks) <= 1:
        batch_write(db, table, requests)
        return
    with ThreadPoolExecutor(max_workers=min(workers, len(chunks))) as pool:
        futures = [pool.submit(batch_write, db, table, chunk) for chunk in chunks]
    for future in futures:
        future.result()
