"""One exception hierarchy for every failure a call can meet.

The service answers ``{"error": {"code", "message", "field"?}}``; API Gateway answers its own errors (throttling,
IAM, an integration timeout) as ``{"message": "..."}`` (REST APIs also ``{"Message": "..."}``); a proxy may answer
HTML. All become an :class:`AgentMemoryError` subclass chosen by status (and by code where one status has several
meanings), with ``status``, ``code``, ``message``, ``field``, ``retry_after`` and ``request_id``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any

__all__ = [
    "AgentMemoryError",
    "AlreadyExists",
    "BadRequest",
    "Conflict",
    "EventIdConflict",
    "Forbidden",
    "ModelTimeout",
    "NotFound",
    "PayloadTooLarge",
    "PreconditionFailed",
    "RateLimited",
    "RequestTimeout",
    "ServerError",
    "ServiceUnavailable",
    "TransportError",
    "Unauthorized",
    "error_from_response",
]


class AgentMemoryError(Exception):
    """Base of every error the client raises.

    ``status``: the HTTP status (None when no answer came); ``code``: the service's error code (for API Gateway's
    own answers, one derived from the status, e.g. ``forbidden``); ``field``: the input the service blames;
    ``retry_after``: seconds from ``Retry-After``; ``request_id``: API Gateway's request id, for support.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str = "error",
        field: str | None = None,
        retry_after: float | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.field = field
        self.retry_after = retry_after
        self.request_id = request_id

    def __str__(self) -> str:
        where = f" (field {self.field})" if self.field else ""
        status = f"{self.status} " if self.status is not None else ""
        return f"{status}{self.code}: {self.message}{where}"


class BadRequest(AgentMemoryError):
    """400 ``invalid_input``, 422 ``validation_error``, 405: the request itself is wrong; do not retry it."""


class Unauthorized(AgentMemoryError):
    """401: no or invalid credentials (API Gateway's authorizer)."""


class Forbidden(AgentMemoryError):
    """403: the credentials are not allowed to call this route (IAM), or the signature did not verify."""


class NotFound(AgentMemoryError):
    """404: ``session_not_found``, or ``route_not_found`` (a server without this route)."""


class Conflict(AgentMemoryError):
    """409: ``conflict`` (an append kept losing races), and the more specific subclasses."""


class AlreadyExists(Conflict):
    """409 ``already_exists``: a strict create (``If-None-Match: *``) found the session id taken."""


class EventIdConflict(Conflict):
    """409 ``event_id_conflict``: an event id is stored already with another body."""


class ToolPairConflict(Conflict):
    """409 ``tool_pair``: deleting the event would split a tool call from its response (``pairs="reject"``); the
    message names the partner events, nothing was deleted."""


class EventNotFound(NotFound):
    """404 ``event_not_found``: the session holds no such event (or no event of the invocation a rewind names)."""


class PreconditionFailed(AgentMemoryError):
    """412: ``If-Match`` did not match the session's current version (someone else appended)."""


class PayloadTooLarge(AgentMemoryError):
    """413 ``payload_too_large`` / ``response_too_large`` (``field`` names what to make smaller)."""


class RateLimited(AgentMemoryError):
    """429: throttled (API Gateway's stage or route limits); retried by the client before it reaches you."""


class QuotaExceeded(RateLimited):
    """429 ``quota_exceeded``: a per-user quota of the deployment would be passed (``field`` names it:
    ``sessions_per_user``, ``events_per_session``, ``memories_per_user``); nothing was stored. Never retried: it
    stands until something is deleted or the limit is raised."""


class ServerError(AgentMemoryError):
    """5xx: the service or API Gateway failed (500, 502 ``model_error``, a 504 integration timeout, ...)."""


class ServiceUnavailable(ServerError):
    """503 ``service_unavailable``: storage or the model kept throttling; ``retry_after`` says when to retry."""


class ModelTimeout(ServerError):
    """504 ``model_timeout``: the model did not answer within the request's budget; nothing was stored."""


class TransportError(AgentMemoryError):
    """No answer: the connection failed or broke, or a timeout passed (``status`` is None)."""


class RequestTimeout(TransportError):
    """A connect, write, read or pool timeout passed (``timeout`` in the client's constructor)."""


_BY_STATUS: dict[int, type[AgentMemoryError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: BadRequest,
    409: Conflict,
    412: PreconditionFailed,
    413: PayloadTooLarge,
    422: BadRequest,
    429: RateLimited,
    503: ServiceUnavailable,
}
_BY_CODE: dict[str, type[AgentMemoryError]] = {
    "already_exists": AlreadyExists,
    "event_id_conflict": EventIdConflict,
    "event_not_found": EventNotFound,
    "tool_pair": ToolPairConflict,
    "model_timeout": ModelTimeout,
    "quota_exceeded": QuotaExceeded,
}
# Codes for answers that carry none (API Gateway's {"message"}, a proxy's HTML page).
_STATUS_CODES: dict[int, str] = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    412: "precondition_failed",
    413: "payload_too_large",
    422: "validation_error",
    429: "too_many_requests",
    500: "internal_error",
    502: "bad_gateway",
    503: "service_unavailable",
    504: "gateway_timeout",
}


def parse_retry_after(value: str | None) -> float | None:
    """``Retry-After`` as seconds from now: delta-seconds or an HTTP date; None when absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def _describe(status: int, body: bytes) -> tuple[str | None, str, str | None]:
    """(code, message, field) from either error shape, or from whatever else the body holds."""
    try:
        data: Any = json.loads(body) if body else None
    except ValueError:
        data = None
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            field = error.get("field")
            return (
                str(code) if code is not None else None,
                str(error.get("message") or ""),
                str(field) if field is not None else None,
            )
        for key in ("message", "Message"):  # API Gateway: HTTP APIs "message", REST APIs' IAM denials "Message"
            if isinstance(data.get(key), str):
                return None, data[key], None
    text = body.decode("utf-8", "replace").strip()
    return None, text[:500] or f"HTTP {status}", None


def error_from_response(status: int, headers: Mapping[str, str], body: bytes) -> AgentMemoryError:
    """The exception for an error answer, whichever of the two shapes (or neither) its body has."""
    code, message, field = _describe(status, body)
    cls = _BY_CODE.get(code or "") or _BY_STATUS.get(status)
    if cls is None:
        cls = ServerError if status >= 500 else AgentMemoryError
    return cls(
        message,
        status=status,
        code=code or _STATUS_CODES.get(status, f"http_{status}"),
        field=field,
        retry_after=parse_retry_after(headers.get("retry-after")),
        request_id=headers.get("apigw-requestid") or headers.get("x-amzn-requestid"),
    )
