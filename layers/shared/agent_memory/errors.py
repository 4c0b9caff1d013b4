"""Domain exceptions. Each carries its HTTP status so that it is mapped to a response in one place (api.py)."""

from __future__ import annotations


class AgentMemoryError(Exception):
    """Base class: an error a client can cause, answered with a JSON error body."""

    status = 400
    code = "bad_request"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def to_body(self) -> dict[str, object]:
        error: dict[str, object] = {"code": self.code, "message": self.message}
        if self.field is not None:
            error["field"] = self.field
        return {"error": error}


class InvalidInput(AgentMemoryError):
    """Malformed input: a bad identifier, query parameter or JSON shape."""

    status = 400
    code = "invalid_input"


class UnprocessableInput(AgentMemoryError):
    """Well-formed JSON whose content does not validate (pydantic errors)."""

    status = 422
    code = "validation_error"


class SessionNotFound(AgentMemoryError):
    status = 404
    code = "session_not_found"

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id!r} not found", field="session_id")


class Unauthorized(AgentMemoryError):
    """No caller identity where the deployment's auth mode needs one (jwt mode: no verified claims)."""

    status = 401
    code = "unauthorized"


class Forbidden(AgentMemoryError):
    """An identified caller asked for another user's or another app's data, or for an admin-only operation."""

    status = 403
    code = "forbidden"


class PreconditionFailed(AgentMemoryError):
    """If-Match named a version that is no longer current."""

    status = 412
    code = "precondition_failed"


class Conflict(AgentMemoryError):
    """A write lost a race it could not retry within its budget."""

    status = 409
    code = "conflict"


class AlreadyExists(Conflict):
    """A strict create (``If-None-Match: *``) named a session id that exists; nothing was changed."""

    code = "already_exists"


class PayloadTooLarge(AgentMemoryError):
    status = 413
    code = "payload_too_large"


class QuotaExceeded(AgentMemoryError):
    """A per-user quota (a deployment parameter) would be passed: nothing was stored. 429 naming the limit.

    ``limit_name`` is one of ``sessions_per_user``, ``events_per_session``, ``memories_per_user``; it is the
    error's ``field`` and the message says the limit's value, so a client can tell which quota it hit.
    """

    status = 429
    code = "quota_exceeded"

    def __init__(self, what: str, *, limit_name: str, limit: int) -> None:
        super().__init__(f"{what}: limit {limit_name} = {limit}", field=limit_name)
        self.limit_name = limit_name
        self.limit = limit


class EventIdConflict(AgentMemoryError):
    """An event id that is stored already, sent again with a different body."""

    status = 409
    code = "event_id_conflict"


class ServiceUnavailable(AgentMemoryError):
    """AWS kept throttling, cancelling or timing out within the request's time budget: retry later.

    Answered 503 with ``Retry-After``; nothing partial is left behind (the write paths guarantee it).
    """

    status = 503
    code = "service_unavailable"

    def __init__(self, message: str, *, retry_after: int = 1, field: str | None = None) -> None:
        super().__init__(message, field=field)
        self.retry_after = retry_after


class ModelFailure(AgentMemoryError):
    """A model (summarizer or remote embedder) did not give a usable answer within its time budget.

    ``kind`` sets the answer: ``timeout`` 504 ``model_timeout`` (slow, or no time left), ``busy`` 503
    ``service_unavailable`` with ``Retry-After`` (throttled), ``error`` 502 ``model_error`` (unreachable, 5xx, an
    answer that is not usable, a key that cannot be read). The message names the provider, never its key. The
    use case stores nothing of what needed the model: a retry starts afresh.
    """

    status = 502
    code = "model_error"
    KINDS = {
        "error": (502, "model_error"),
        "timeout": (504, "model_timeout"),
        "busy": (503, "service_unavailable"),
    }

    def __init__(self, message: str, *, kind: str = "error", retry_after: int = 1) -> None:
        super().__init__(message)
        if kind not in self.KINDS:
            raise ValueError(f"unknown model failure kind {kind!r}")
        self.kind = kind
        self.status, self.code = self.KINDS[kind]
        self.retry_after = retry_after


class EventNotFound(AgentMemoryError):
    """No event of the session has this id (or no event of the invocation a rewind names)."""

    status = 404
    code = "event_not_found"


class ToolPairConflict(Conflict):
    """Deleting the event would split a tool call from its response (``?pairs=reject``)."""

    code = "tool_pair"


class DeletionIncomplete(ServiceUnavailable):
    """A deletion committed (no read shows its events) whose purge (items, payloads, memories) did not finish:
    sending the request again finishes it. Unlike ``service_unavailable``, something was done."""

    code = "deletion_incomplete"
