"""HTTP glue shared by every function: the resolver, access checks, error mapping, JSON responses, logging and
metrics.

Access is checked here and only here, first for every request (``_Edge``): the route table
says who may call each route (``routes.Route.access``), ``policy/access.py`` decides from the identity API Gateway's
authorizer put on the event (401 ``unauthorized`` / 403 ``forbidden``), and every write is logged with its caller.

Errors are mapped to responses here and only here: domain exceptions carry their status; Powertools'
request validation errors take the same ``{"error": {"code", "message", "field"}}`` shape (400 for path,
query and header parameters, 422 for the body, 413 for a bounded body field that is too large); anything
unexpected is logged and answered with a JSON 500 that reveals nothing.

Request bodies are parsed once, by the hardened parser (``jsonvalues.parse_json_body``) that the resolver
uses for every ``Body()`` parameter, whatever the ``Content-Type`` says (``curl -d`` sends form-urlencoded):
a body that is not UTF-8, not JSON, or JSON this service refuses answers 400 naming ``body``. One exception: the
import (``POST …/sessions/import``) with a YAML ``Content-Type`` is read by ``yamlio.parse_yaml_body``, which
refuses what the JSON parser refuses and YAML's aliases, anchors and tags besides (``RequestEvent.json_body``).
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import threading
import warnings
from collections.abc import Callable, Sequence
from functools import cached_property
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.event_handler import Response as Response  # for the handlers: imported after lean.install
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2

from ..config import settings
from ..errors import AgentMemoryError, InvalidInput, ModelFailure, PayloadTooLarge, ServiceUnavailable, Unauthorized
from ..limits import MAX_BODY_BYTES
from ..policy import access
from ..runtime import budget, coldgc
from ..runtime.aws import capacity_error
from ..wire.jsonio import RESPONSE_CAP, dumps, wire_size
from ..wire.jsonvalues import JsonRejected, JsonTooLarge, parse_json_body
from . import params, routes

# Defaults for when the environment does not name them (the template always does): a metric without a
# namespace would otherwise fail the request that emits it.
# The service is also the dimension of every metric, which the template's alarm on CompactionFailures names.
SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME") or "agent-memory"
logger = Logger(service=SERVICE)
# Keys every line of a function's log group would repeat (each function has its own group; ``service`` is the
# stack's, one value for all), the code location, and the time (CloudWatch Logs stamps every log event with the
# time Lambda read it, to the millisecond: Logs Insights' ``@timestamp``, the console's and a subscription's
# ``timestamp``): left out of the lines a request logs (its "write" line is one per write; logs are billed by the
# byte). The request ids (``function_request_id``, ``correlation_id``) and the level stay; ``cold_start`` is on the
# lines of a cold start only (``cold_start: true``; absent on the others).
CONSTANT_LOG_KEYS = ("function_name", "function_arn", "function_memory_size", "location", "service", "timestamp")


class _Metrics:
    """Powertools' ``Metrics``, made when first used: a request that emits no metric (every read) never imports
    the metrics package (about 10 ms of a cold start). Anything asked of it is the real object's."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._real: Any = None

    @property
    def used(self) -> bool:
        return self._real is not None

    def __getattr__(self, name: str) -> Any:
        if self._real is None:
            from aws_lambda_powertools.metrics import Metrics

            self._real = Metrics(**self._options)
        return getattr(self._real, name)


metrics: Any = _Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "AgentMemory", service=SERVICE)
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


def _printable(text: str) -> str:
    # A message may quote what the client sent (a path holding a lone surrogate): keep it encodable as UTF-8.
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def error_response(status: int, code: str, message: str, field: str | None = None) -> Response[str]:
    """The one error shape: ``{"error": {"code", "message", "field"?}}``."""
    error: dict[str, Any] = {"code": code, "message": _printable(message)}
    if field is not None:
        error["field"] = _printable(field)
    return json_response(status, {"error": error})


def domain_error_response(exc: AgentMemoryError) -> Response[str]:
    """A domain error as its JSON response; a 503 says when to retry."""
    body = exc.to_body()
    error = body.get("error")
    if isinstance(error, dict):
        for key in ("message", "field"):
            if isinstance(error.get(key), str):
                error[key] = _printable(error[key])
    headers = None
    if isinstance(exc, ServiceUnavailable) or (isinstance(exc, ModelFailure) and exc.kind == "busy"):
        headers = {"Retry-After": str(exc.retry_after)}
    elif isinstance(exc, Unauthorized):
        headers = {"WWW-Authenticate": "Bearer"}
    return json_response(exc.status, body, headers)


def parse_body(text: str) -> Any:
    """The resolver's JSON deserializer: a blank body is no body; anything refused is a 400 naming ``body``."""
    return _parse_refusing(parse_json_body, text)


def _parse_refusing(parse: Callable[[str], Any], text: str) -> Any:
    """``parse(text)``, a blank body as no body; what the parser refuses is a 400 (413 when too large) naming
    ``body``. The JSON and the YAML bodies share it, so both refuse alike."""
    if not text.strip():
        return None
    try:
        return parse(text)
    except JsonTooLarge as exc:
        raise PayloadTooLarge(str(exc), field="body") from exc
    except JsonRejected as exc:
        raise InvalidInput(str(exc), field="body") from exc


class RequestEvent(APIGatewayProxyEventV2):
    """The HTTP API event, with a body decoded strictly: bad base64 or UTF-8 is the client's error (400)."""

    @cached_property
    def json_body(self) -> Any:
        """The body as JSON values: by the JSON parser, or, for the import sent as YAML, by the YAML one. Both
        refuse the same values; only the import's route reads YAML (elsewhere a YAML body is not JSON: 400)."""
        text = self.decoded_body
        if not text:
            return None
        content_type = self.headers.get("content-type")
        if content_type and "yaml" in content_type.lower():  # PyYAML is imported only when a body may be YAML
            from ..wire.yamlio import content_type_is_yaml, parse_yaml_body

            if (
                content_type_is_yaml(content_type)
                and self.http_method == "POST"
                and self.path.rstrip("/").endswith(IMPORT_PATH_SUFFIX)
            ):
                return _parse_refusing(parse_yaml_body, text)
        return self._json_deserializer(text)

    @cached_property
    def decoded_body(self) -> str | None:
        body = self.body
        if not body:
            return body
        if len(body) > MAX_BODY_BYTES * 4 // 3 + 4:
            raise PayloadTooLarge(f"body is over {MAX_BODY_BYTES} bytes", field="body")
        if not self.is_base64_encoded:
            _check_request_bytes(len(body), body)
            return body
        try:
            raw = base64.b64decode(body, validate=True)
            _check_request_bytes(len(raw))
            return raw.decode("utf-8")
        except (binascii.Error, ValueError) as exc:  # UnicodeDecodeError is a ValueError
            raise InvalidInput("body is not valid UTF-8 text", field="body") from exc


# The import's route (routes.py): the one route that also reads YAML bodies.
IMPORT_PATH_SUFFIX = "/sessions/import"


def yaml_response(status: int, text: str, headers: dict[str, str] | None = None) -> Response[str]:
    """A YAML response (``application/yaml``), refused past ``jsonio.RESPONSE_CAP`` as ``json_response`` does."""
    from ..wire.yamlio import YAML

    if wire_size(text) > RESPONSE_CAP:
        logger.warning("response over the cap; answered 413", extra={"bytes": wire_size(text), "status": status})
        return error_response(413, "response_too_large", f"the response would take more than {RESPONSE_CAP} bytes")
    return Response(status_code=status, content_type=YAML, body=text, headers=headers)


_POWERTOOLS_PARAMETER = re.compile(r"<(\w+)>")


def _route_access(app: Any) -> tuple[str, str, bool]:
    """The matched route's key, who may call it and whether it writes, from the route table. A route the table
    lacks (there is none: tests hold the table equal to the handlers) is checked as a user's write: fail closed."""
    matched = app.context.get("_route")
    method = str(getattr(matched, "method", app.current_event.http_method)).upper()
    path = _POWERTOOLS_PARAMETER.sub(r"{\1}", str(getattr(matched, "path", app.current_event.path)))
    route = _ROUTES.get(f"{method} {path}")
    if route is None:
        return f"{method} {path}", routes.USER, method != "GET"
    return route.key, route.access, route.is_write


_ROUTES = {r.key: r for r in routes.ROUTES}


def auth_config() -> access.AuthConfig:
    """The deployment's auth settings (AUTH_MODE, JWT_*)."""
    cfg = settings()
    return access.AuthConfig(
        mode=cfg.auth_mode,
        user_claim=cfg.jwt_user_claim,
        app_claim=cfg.jwt_app_claim,
        admin_scope=cfg.jwt_admin_scope,
        admin_group=cfg.jwt_admin_group,
    )


def _check_request_bytes(size: int, text: str | None = None) -> None:
    """PayloadTooLarge naming ``MaxRequestBytes`` when a body of ``size`` bytes (``text``: ``size`` characters, its
    UTF-8 length counted only when it could matter) is over the deployment's limit. Before any parsing."""
    limit = settings().max_request_bytes
    if not limit or size * (4 if text is not None else 1) <= limit:
        return
    if text is not None and size <= limit:
        size = len(text.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise PayloadTooLarge(
            f"the request body is {size} bytes; over the limit MaxRequestBytes = {limit}", field="body"
        )


class _Edge:
    """The first step of every request: who may call what, then the parameters and the body.

    Access is checked here, in one place for every route of every function, before anything about the request's
    parameters or body is answered: no identity is a 401, another user's or app's data a 403
    (``policy/access.py``). The parameters of a body-less route are read by ``params.arguments`` without pydantic
    when it takes every one of them; otherwise (a body, or a value it leaves to pydantic) Powertools' request
    validation reads the request (every body as JSON through ``parse_body``), as it read every request before
    (``_pydantic_validation``). Writing ``app:`` state is checked on the validated body, and every write is logged
    with its caller before the handler runs.
    """

    __name__ = "edge"  # Powertools names each middleware in its debug trail

    def __call__(self, app: Any, next_middleware: Any) -> Any:
        key, route_access, writes = _route_access(app)
        config = auth_config()
        event = app.current_event
        caller = access.principal(event.raw_event.get("requestContext"), config)
        path = app.context.get("_route_args") or {}
        try:
            access.authorize(
                caller, config, access=route_access, app_name=path.get("app_name"), user_id=path.get("user_id")
            )
        except AgentMemoryError as exc:
            logger.info(
                "request denied",
                extra={"route": key, "status": exc.status, **(caller.log_fields() if caller else {})},
            )
            raise

        def validated(app: Any) -> Any:
            arguments = app.context.get("_route_args") or {}
            access.authorize_body(caller, config, arguments.get("body"))
            if writes and caller is not None:
                logger.info(
                    "write",
                    extra={
                        "route": key,
                        "app_name": arguments.get("app_name"),
                        "user_id": arguments.get("user_id"),
                        **caller.log_fields(),
                    },
                )
            return next_middleware(app)

        route = app.context["_route"]
        route.request_param_name_checked = True  # no handler takes Powertools' Request (its check evaluates hints)
        lean = params.arguments(
            route.func,
            path,
            event.query_string_parameters,
            event.raw_query_string,
            event.headers,
            lambda: event.json_body,
        )
        if lean is None:
            return _pydantic_validation(route).handler(app, validated)
        app.context["_route_args"] = lean
        return validated(app)


_VALIDATION: list[Any] = []


def _pydantic_validation(route: Any) -> Any:
    """Powertools' request validation (pydantic), imported on first use; the route's signature evaluated with
    ``requests.py``'s types (the handlers name them without importing them)."""
    if not _VALIDATION:
        from aws_lambda_powertools.event_handler.middlewares.openapi_validation import (
            OpenAPIRequestValidationMiddleware,
        )

        class JsonBodyValidation(OpenAPIRequestValidationMiddleware):
            def __init__(self) -> None:
                super().__init__()  # type: ignore[no-untyped-call]

            def _get_body(self, app: Any) -> Any:
                return app.current_event.json_body

        _VALIDATION.append(JsonBodyValidation())
    if route._dependant is None:
        from aws_lambda_powertools.event_handler.openapi.dependant import get_dependant

        route._dependant = get_dependant(path=route.openapi_path, call=typed(route.func), responses=route.responses)
    return _VALIDATION[0]


def typed(func: Callable[..., Any]) -> Callable[..., Any]:
    """A stand-in for the handler ``func`` whose signature holds its annotations evaluated (names from
    ``requests.py`` first, then the handler's module), for Powertools' pydantic validation and the tests."""
    import inspect

    hints = routes.hints(func)
    signature = inspect.signature(func)
    parameters = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in signature.parameters.values()]

    def stand_in(**kwargs: Any) -> Any:
        return func(**kwargs)

    stand_in.__name__ = func.__name__
    stand_in.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=parameters, return_annotation=inspect.Signature.empty
    )
    return stand_in


class Resolver(APIGatewayHttpResolver):
    """The HTTP API resolver with the project's edge (``_Edge``), the hardened body parser and ``RequestEvent``."""

    def __init__(self) -> None:
        # Powertools' own validation is off: ``_Edge`` validates, with pydantic only when it must.
        super().__init__(enable_validation=False, json_body_deserializer=parse_body)
        self.use([_Edge()])

    def _to_proxy_event(self, event: dict[str, Any]) -> RequestEvent:
        return RequestEvent(event, self._json_body_deserializer)


def field_path(loc: Sequence[Any]) -> str:
    """``("events", 3, "timestamp")`` as ``events[3].timestamp``; union tags are left out."""
    path = ""
    for part in loc:
        if part in params.UNION_TAGS:
            continue
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


def _validation_error(exc: RequestValidationError) -> Response[str]:
    first = exc.errors()[0] if exc.errors() else {"loc": ("body",), "msg": "invalid"}
    loc = list(first.get("loc", ()))
    where = str(loc[0]) if loc else "body"
    field = field_path(loc[1:]) or where
    message = f"{field}: {first.get('msg', 'invalid value')}"
    if where != "body":
        return error_response(400, "invalid_input", message, field)
    if first.get("type") == "payload_too_large":
        return error_response(413, "payload_too_large", message, field)
    return error_response(422, "validation_error", message, field)


def create_app() -> Resolver:
    """A resolver with validation and the project's error mapping."""
    app = Resolver()

    @app.exception_handler(AgentMemoryError)
    def _domain(exc: AgentMemoryError) -> Response[str]:
        if isinstance(exc, ModelFailure):  # not the client's doing: visible in the logs, as a 5xx should be
            logger.warning("model call failed", extra={"kind": exc.kind, "error": exc.message})
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


def lambda_entry(app: Resolver) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """The Lambda handler for ``app``: correlation id from the request, metrics flushed after each call.

    The resolver keeps the request being handled on itself (``current_event``, the validated arguments), so
    one resolver handles one request at a time: Lambda never runs two at once in a process, the local server
    does (its threads share the handler's module), hence the lock. It is re-entrant: a test that, inside an
    injected fault, makes a second request to the same function (another writer, as another container would
    be) must not deadlock on itself.
    """
    lock = threading.RLock()

    @logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
    def resolve(event: dict[str, Any], context: Any) -> dict[str, Any]:
        # what inject_lambda_context added (and the logger's defaults) that the log group already says; a warm
        # start's cold_start: false, which every request but a container's first would repeat
        warm = logger.get_current_keys().get("cold_start") is False
        logger.remove_keys(CONSTANT_LOG_KEYS + (("cold_start",) if warm else ()))
        try:
            return app.resolve(event, context)
        finally:  # what Powertools' log_metrics does; a process that never added a metric has none to flush
            if metrics.used:
                metrics.flush_metrics(raise_on_empty_metrics=False)

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        # the lock: the logger's correlation id and the metrics buffer are per request too; the budget: a model
        # call behind API Gateway fits the request's budget and ends before the function's timeout
        try:
            with lock, budget.invocation(context, budget.REQUEST):
                return resolve(event, context)
        finally:
            coldgc.resume()  # the first response is answered: the cold start's pause of the collector ends

    return handler
