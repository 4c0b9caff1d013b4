"""HTTP glue shared by every function: the resolver, error mapping, JSON responses, logging and metrics.

Errors are mapped to responses here and only here: domain exceptions carry their status; Powertools'
request validation errors take the same ``{"error": {"code", "message", "field"}}`` shape (400 for path,
query and header parameters, 422 for the body); anything unexpected is logged and answered with a JSON 500
that reveals nothing.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable
from typing import Any, cast

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.logging import correlation_paths

from .aws import capacity_error
from .errors import InvalidInput, MemoryServiceError, ServiceUnavailable
from .jsonio import RESPONSE_CAP, dumps, wire_size

# Defaults for when the environment does not name them (the template always does): a metric without a
# namespace would otherwise fail the request that emits it.
logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME") or "agent-memory")
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "AgentMemory")
# Read-only routes emit no application metric; that is expected, not worth a warning per request.
warnings.filterwarnings("ignore", message="No application metrics to publish")

JSON = "application/json"


def json_response(
    status: int,
    body: Any = None,
    headers: dict[str, str] | None = None,
    *,
    too_large_field: str | None = None,
    too_large_hint: str = "",
) -> Response[str]:
    """A JSON response (None body: no content). Stored JSON kept verbatim (``jsonio.RawJSON``) is spliced in.

    The last guard before Lambda: a body past ``jsonio.RESPONSE_CAP`` (as Lambda carries it) answers 413
    ``response_too_large`` instead of a response Lambda would refuse; ``too_large_field`` / ``too_large_hint``
    name the parameter that makes the answer smaller.
    """
    text = "" if body is None else dumps(body)
    if text and wire_size(text) > RESPONSE_CAP:
        logger.warning("response over the cap; answered 413", extra={"bytes": wire_size(text), "status": status})
        message = f"the response would take more than {RESPONSE_CAP} bytes; {too_large_hint or 'ask for less'}"
        return error_response(413, "response_too_large", message, too_large_field)
    return Response(status_code=status, content_type=JSON, body=text, headers=headers)


def error_response(status: int, code: str, message: str, field: str | None = None) -> Response[str]:
    error: dict[str, Any] = {"code": code, "message": message}
    if field is not None:
        error["field"] = field
    return json_response(status, {"error": error})


def domain_error_response(exc: MemoryServiceError) -> Response[str]:
    """A domain error as its JSON response; a 503 says when to retry."""
    headers = {"Retry-After": str(exc.retry_after)} if isinstance(exc, ServiceUnavailable) else None
    return json_response(exc.status, exc.to_body(), headers)


def json_body(app: APIGatewayHttpResolver) -> Any:
    """The request body parsed as JSON; None when there is no body. Bad JSON: 400 naming ``body``."""
    raw = app.current_event.decoded_body
    if raw is None or not raw.strip():
        return None
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"body is not valid JSON: {exc}", field="body") from exc


def _validation_error(exc: RequestValidationError) -> Response[str]:
    first = exc.errors()[0] if exc.errors() else {"loc": ("body",), "msg": "invalid"}
    loc = [str(p) for p in first.get("loc", ())]
    where = loc[0] if loc else "body"
    field = ".".join(loc[1:]) or where
    message = f"{field}: {first.get('msg', 'invalid value')}"
    status = 422 if where == "body" else 400
    return error_response(status, "validation_error" if status == 422 else "invalid_input", message, field)


def create_app() -> APIGatewayHttpResolver:
    """A resolver with validation and the project's error mapping."""
    app = APIGatewayHttpResolver(enable_validation=True)

    @app.exception_handler(MemoryServiceError)
    def _domain(exc: MemoryServiceError) -> Response[str]:
        return domain_error_response(exc)

    @app.exception_handler(RequestValidationError)
    def _validation(exc: RequestValidationError) -> Response[str]:
        return _validation_error(exc)

    @app.not_found
    def _not_found(exc: Exception) -> Response[str]:
        return error_response(
            404, "route_not_found", f"no route for {app.current_event.http_method} {app.current_event.path}"
        )

    @app.exception_handler(Exception)
    def _unexpected(exc: Exception) -> Response[str]:
        unavailable = capacity_error(exc)
        if unavailable is not None:
            logger.warning("AWS capacity or transport fault", extra={"error": repr(exc)})
            return domain_error_response(unavailable)
        logger.exception("unhandled error")
        return error_response(500, "internal_error", "internal error; the request id is in the logs")

    return app


def lambda_entry(app: APIGatewayHttpResolver) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """The Lambda handler for ``app``: correlation id from the request, metrics flushed after each call."""

    @logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
    @metrics.log_metrics(raise_on_empty_metrics=False)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return app.resolve(event, context)

    return cast(Callable[[dict[str, Any], Any], dict[str, Any]], handler)
