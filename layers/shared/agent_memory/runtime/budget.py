"""One time budget for model calls (summarizers, remote embedders), per use, and the invocation's deadline.

A model call is ``attempts`` tries of ``attempt_timeout_s`` each with exponential backoff between them (1 s,
then 2 s, ... as botocore's standard retries do), and ``attempt_timeout_s`` is derived from the use's total so
that the whole call fits the budget: ``attempts * attempt_timeout_s + backoff_total_s == total_s``.

Two uses:

- ``REQUEST`` (20 s, 2 attempts of 9.5 s): behind API Gateway (compaction on demand, memory save and search
  with a remote embedder). API functions stop at 29 s and API Gateway at 30 s; the rest is room for the
  session store's reads and writes and for the answer.
- ``BACKGROUND`` (60 s, 2 attempts of 29.5 s): the scheduled sweep and auto-save (300 s functions), once per
  session.

The handler of each function opens ``invocation(context, use)``: it names the use and, from the Lambda
context, a deadline ``ANSWER_RESERVE_S`` before the function's own timeout. A model call never runs past that
deadline: attempts are shortened, or dropped, to fit (a call with no time left fails at once as a timeout).
Outside any invocation (local scripts, unit tests) the ``REQUEST`` budget applies without a deadline.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator
from typing import Any

from ..limits import MIN_ATTEMPT_S
from .lazyclass import dataclass  # processed on first instance (lazyclass.py)

# Room kept after the last model call for the store's write and the answer (the stores' own retries are
# bounded by aws.WRITE_BUDGET_S; this reserve is for the usual case, the deadline for the worst one).
ANSWER_RESERVE_S = 5.0
# An attempt shorter than this is not started: it could not get an answer from a model anyway.
# Connecting is quick or it is not going to happen; the rest of an attempt's time is for the answer.
CONNECT_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class ModelBudget:
    """The time one model call may take, all retries included."""

    name: str
    total_s: float
    attempts: int
    backoff_s: float = 1.0  # before the 2nd attempt; doubled before each further one

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("a model budget needs at least one attempt")
        if self.backoff_s < 0:
            raise ValueError("backoff must not be negative")
        if self.attempt_timeout_s < MIN_ATTEMPT_S:
            raise ValueError(f"budget {self.name!r} leaves less than {MIN_ATTEMPT_S} s per attempt")

    def backoff_before(self, attempt: int) -> float:
        """The pause before attempt number ``attempt`` (0-based; none before the first)."""
        return self.backoff_s * 2 ** (attempt - 1) if attempt else 0.0

    def backoff_total(self, attempts: int | None = None) -> float:
        """The pauses between ``attempts`` (default: all of this budget's) attempts."""
        n = self.attempts if attempts is None else attempts
        return sum(self.backoff_before(i) for i in range(n))

    @property
    def backoff_total_s(self) -> float:
        return self.backoff_total()

    @property
    def attempt_timeout_s(self) -> float:
        """Each attempt's timeout: what the budget leaves after the backoff, shared by the attempts."""
        return (self.total_s - self.backoff_total()) / self.attempts

    def plan(self, remaining_s: float | None) -> tuple[int, float] | None:
        """``(attempts, attempt timeout)`` that fit ``remaining_s`` (None: no deadline, the whole budget);
        fewer or shorter attempts when less remains; None when not even one attempt of ``MIN_ATTEMPT_S`` fits."""
        if remaining_s is None or remaining_s >= self.total_s:
            return self.attempts, self.attempt_timeout_s
        for n in range(self.attempts, 0, -1):
            timeout = min(self.attempt_timeout_s, (remaining_s - self.backoff_total(n)) / n)
            if timeout >= MIN_ATTEMPT_S:
                return n, timeout
        return None


REQUEST = ModelBudget("request", total_s=20.0, attempts=2)
BACKGROUND = ModelBudget("background", total_s=60.0, attempts=2)
# The scheduled sweep starts no new session with less than this left: a model call of at least a few
# seconds, then the write and the report.
SWEEP_RESERVE_S = ANSWER_RESERVE_S + 10.0


@dataclass(frozen=True)
class _Invocation:
    budget: ModelBudget
    deadline: float | None  # time.monotonic() after which no model call runs


_current: contextvars.ContextVar[_Invocation | None] = contextvars.ContextVar("model_budget", default=None)


def remaining_ms(context: Any) -> float | None:
    """The Lambda context's remaining time in ms, or None when there is no usable context."""
    getter = getattr(context, "get_remaining_time_in_millis", None)
    if getter is None:
        return None
    try:
        value = getter()
    except Exception:  # a context that cannot tell: no deadline rather than a failed request
        return None
    return float(value) if isinstance(value, int | float) else None


def remaining_s(context: Any) -> float | None:
    """The Lambda context's remaining time in seconds, or None when there is no usable context."""
    left = remaining_ms(context)
    return None if left is None else left / 1000


def scaled_reserve(context: Any, most_s: float) -> float:
    """A reserve before the context's deadline: ``most_s``, or a tenth of the time left when the invocation was
    given less than ten times that (a local emulation's short context), never below ``ANSWER_RESERVE_S``."""
    left = remaining_s(context)
    return ANSWER_RESERVE_S if left is None else max(ANSWER_RESERVE_S, min(most_s, left / 10))


@contextlib.contextmanager
def invocation(context: Any, use: ModelBudget, *, reserve_s: float = ANSWER_RESERVE_S) -> Iterator[None]:
    """Within this block, model calls use ``use`` and end ``reserve_s`` before the Lambda context's deadline."""
    left = remaining_ms(context)
    deadline = None if left is None else time.monotonic() + left / 1000 - reserve_s
    token = _current.set(_Invocation(use, deadline))
    try:
        yield
    finally:
        _current.reset(token)


def current() -> ModelBudget:
    """The budget of the use being served (``REQUEST`` outside any invocation)."""
    active = _current.get()
    return REQUEST if active is None else active.budget


def deadline(budget: ModelBudget | None = None) -> float:
    """The ``time.monotonic()`` by which a model call starting now must end: its budget, or the invocation's
    deadline when that comes first. A call made of several requests (an embedder's batches) computes it once."""
    use = budget or current()
    end = time.monotonic() + use.total_s
    active = _current.get()
    if active is not None and active.deadline is not None:
        end = min(end, active.deadline)
    return end
