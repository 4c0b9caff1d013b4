"""Cached AWS client factories, and the time budget every AWS call works within.

Clients are built on first use (not at import, which would slow every cold start and pin the endpoint) and
cached per service, all from one botocore session: a second client (the create's EventBridge publisher, the search's
S3) then costs about 12 CPU ms instead of the 90 a new session spends reading botocore's endpoint and partition
data again. ``reset_clients()`` forgets the clients and the session, so tests can point them at another endpoint.
botocore honours ``AWS_ENDPOINT_URL``, which is how ``make run`` points everything at the local moto server.

The clients are botocore's own, not boto3's: a boto3 client is the same botocore client (boto3 only adds the
resource layer, which nothing here uses, and S3's transfer helpers, which nothing here calls), and ``import boto3``
loads that resource layer on every cold start, about 20 CPU ms of a session function's first response
(docs/benchmarks.md, "First response").

Budget: an API function stops at 29 s (API Gateway's integration limit is 30 s). botocore retries a throttle
or a transport error at most twice (standard mode: up to 1 s, then 2 s of jittered backoff) with short
timeouts, so one call gives up after a few seconds; the stores' own retry loops (a lost race, a cancelled
transaction) stop at ``WRITE_BUDGET_S``. What is still failing then is answered 503 with ``Retry-After``.
"""

from __future__ import annotations

import functools
import threading
import time
from pathlib import Path
from typing import Any

from ..errors import ServiceUnavailable
from . import budget

# The stores' own retry loops start no new attempt after this long. The last call may still run botocore's
# three attempts (at most 1 s to connect + 3 s to read each, plus up to 3 s of backoff: 15 s), so a request
# that meets faults all the way answers by about 25 s, inside the 29 s function timeout.
WRITE_BUDGET_S = 10.0

# Error codes that mean "not now" rather than "not ever": capacity, throttling, transient service faults.
CAPACITY_CODES = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "ThrottlingError",
        "ProvisionedThroughputExceededException",
        "ProvisionedThroughputExceeded",
        "RequestLimitExceeded",
        "TransactionConflictException",
        "TransactionConflict",
        "TransactionInProgressException",
        "TransactionCanceledException",
        "InternalServerError",
        "InternalError",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "SlowDown",
        "RequestTimeout",
        "RequestTimeoutException",
        "LimitExceededException",
    }
)


# Lean service models (``local/botocore_data.py``): the operations this code calls, without documentation. botocore
# looks here first, then in its own data (endpoint rules, paginators, waiters, every other service).
LEAN_MODELS = str(Path(__file__).resolve().parents[1] / "botocore_data")


@functools.cache
def _session() -> Any:
    import botocore.session

    session = botocore.session.get_session()
    session.get_component("data_loader").search_paths.insert(0, LEAN_MODELS)
    return session


# botocore sessions are not thread-safe (the local server's threads share a function's module): one client at a time.
_SESSION_LOCK = threading.Lock()


def _new_client(service: str, config: Any) -> Any:
    with _SESSION_LOCK:
        return _session().create_client(service, config=config)


@functools.cache
def client(service: str) -> Any:
    from botocore.config import Config

    config = Config(retries={"mode": "standard", "max_attempts": 3}, connect_timeout=1, read_timeout=3)
    return _new_client(service, config)


@functools.cache
def _model_client(service: str, read_timeout_s: int, attempts: int) -> Any:
    from botocore.config import Config

    config = Config(
        retries={"mode": "standard", "total_max_attempts": attempts},  # botocore's max_attempts counts retries only
        connect_timeout=min(read_timeout_s, int(budget.CONNECT_TIMEOUT_S)),
        read_timeout=read_timeout_s,
    )
    return _new_client(service, config)


def model_client(service: str, use: budget.ModelBudget | None = None, deadline: float | None = None) -> Any | None:
    """A client for model calls (``bedrock-runtime``) whose attempts and read timeout fit ``use`` (default: the
    use being served) and end by ``deadline`` (default: the budget's from now); None when no attempt fits.

    botocore's standard retries pause up to 1 s, then 2 s, between attempts: the budget's own backoff. Clients
    are cached per (whole-second timeout, attempts), so a shortened budget costs a new client once.
    """
    chosen = use or budget.current()
    end = budget.deadline(use) if deadline is None else deadline
    plan = chosen.plan(end - time.monotonic())
    if plan is None:
        return None
    attempts, timeout = plan
    return _model_client(service, max(1, int(timeout)), attempts)


# Bedrock's "not now" answers (503 with Retry-After); any other error of a model call is 502 model_error.
MODEL_BUSY_CODES = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "TooManyRequestsException",
        "ServiceUnavailableException",
        "ServiceUnavailable",
        "ModelNotReadyException",
    }
)


def model_failure(exc: BaseException) -> tuple[str, str]:
    """``(kind, reason)`` of a failed model call through botocore: ``timeout`` (read/connect timeout, Bedrock's
    ModelTimeoutException), ``busy`` (throttled, not ready) or ``error``; the reason names the error, not its text."""
    from botocore.exceptions import ClientError, ConnectTimeoutError, ReadTimeoutError

    if isinstance(exc, ReadTimeoutError | ConnectTimeoutError):
        return "timeout", type(exc).__name__
    if isinstance(exc, ClientError):
        code = error_code(exc) or "ClientError"
        if code == "ModelTimeoutException":
            return "timeout", code
        return ("busy" if code in MODEL_BUSY_CODES else "error"), code
    return "error", type(exc).__name__


def reset_clients() -> None:
    """Forget every cached client and their session (tests call this after changing the endpoint or credentials)."""
    with _SESSION_LOCK:
        client.cache_clear()
        _model_client.cache_clear()
        _session.cache_clear()


def error_code(exc: BaseException) -> str | None:
    """The AWS error code of a botocore ClientError (None for anything else)."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return None
    code = response.get("Error", {}).get("Code")
    return str(code) if code is not None else None


def capacity_error(exc: BaseException) -> ServiceUnavailable | None:
    """``exc`` as a 503 when it is a capacity, throttling or transport fault that a later retry can clear."""
    from botocore.exceptions import ClientError, HTTPClientError

    if isinstance(exc, HTTPClientError):  # connect/read timeouts, closed connections, unreachable endpoint
        return ServiceUnavailable(f"an AWS call failed in transport ({type(exc).__name__}); retry", retry_after=1)
    if isinstance(exc, ClientError):
        code = error_code(exc)
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        if code in CAPACITY_CODES or status >= 500:
            return ServiceUnavailable(f"AWS is busy ({code}); retry", retry_after=1)
    return None
