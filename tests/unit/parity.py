"""The edge's answers against an oracle: Powertools' pydantic validation of every request, as the edge was
before it took requests itself. A request a route takes is answered alike by both, never with a 5xx."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.middlewares.openapi_validation import OpenAPIRequestValidationMiddleware
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError

from agent_memory.edge import api
from agent_memory.edge.routes import ROUTES, Route
from agent_memory.errors import AgentMemoryError
from agent_memory.wire import jsonio
from local import template
from local.apigw import LambdaContext, http_api_event
from local.template import ROOT, load_handler, load_template, routes
from tests.support.strategies import Request

TEMPLATE_ROUTES = {r.route_key: r for r in routes(load_template())}
TABLE = {r.key: r for r in ROUTES}


def _powertools_path(path: str) -> str:
    return path.replace("{", "<").replace("}", ">")


def shown(value: Any) -> str:
    """An argument as the handler sees it: a body as its fields (params.NewSession stands for
    CreateSessionRequest), an append's events as the JSON the service stores of them, in the bytes the store writes
    (plainevents.PlainEvent stands for models.Event; ids and times filled alike), anything else as its repr."""
    if hasattr(value, "stored"):
        return "event " + _stored(value)
    events = getattr(value, "events", None)  # requests.EventBatch or plainevents.PlainBatch
    if isinstance(events, list) and events and all(hasattr(e, "stored") for e in events):
        return "batch " + " ".join(_stored(e) for e in events)
    return repr(value.model_dump() if hasattr(value, "model_dump") else value)


def _stored(event: Any) -> str:
    from agent_memory.policy.state import strip_temp

    body = event.stored(event.id or "filled-id", event.timestamp or 1.0, strip_temp(event.actions.state_delta))
    return jsonio.dumps(body)


def _echo(app: Any, next_middleware: Any) -> Response[str]:
    """The handler's arguments as the validation left them (the handler itself is not run)."""
    arguments = app.context.get("_route_args") or {}
    return Response(200, "application/json", json.dumps({k: shown(v) for k, v in sorted(arguments.items())}))


class _OldValidation(OpenAPIRequestValidationMiddleware):
    """What the edge was before: Powertools' validation of every request, each body read by the hardened parser."""

    def _get_body(self, app: Any) -> Any:
        return app.current_event.json_body


class _Oracle(APIGatewayHttpResolver):
    def __init__(self) -> None:
        super().__init__(enable_validation=True, json_body_deserializer=api.parse_body)
        self._request_validation_middleware = _OldValidation()  # type: ignore[no-untyped-call]

    def _to_proxy_event(self, event: dict[str, Any]) -> api.RequestEvent:
        return api.RequestEvent(event, self._json_body_deserializer)


def _errors(app: APIGatewayHttpResolver) -> None:
    app.exception_handler(RequestValidationError)(api._validation_error)
    app.exception_handler(AgentMemoryError)(api.domain_error_response)


def route_handler(route: Route) -> Any:
    target = TEMPLATE_ROUTES[route.key]
    load_handler(target)
    return getattr(template._loaded[f"_functions.{(ROOT / target.code_uri).name}.app"], route.operation_id)


def _resolvers() -> tuple[APIGatewayHttpResolver, APIGatewayHttpResolver]:
    oracle = _Oracle()
    _errors(oracle)
    oracle.use([_echo])
    edge = api.Resolver()
    _errors(edge)
    edge.use([_echo])
    for route in ROUTES:
        if route.key not in TEMPLATE_ROUTES:
            continue
        path = _powertools_path(route.path)
        oracle.route(path, route.method)(api.typed(route.signature))  # the table's types, evaluated: pydantic
        edge.route(path, route.method)(route_handler(route))  # the handler as deployed: its annotations unevaluated
    return oracle, edge


ORACLE, EDGE = _resolvers()


def gateway_event(request: Request) -> dict[str, Any] | None:
    """The event API Gateway would send for ``request`` (None: no route takes it, so no function sees it)."""
    route = TEMPLATE_ROUTES[request.route]
    split = urlsplit(request.target)
    found = route.match(request.method, split.path)
    if found is None:
        return None
    return http_api_event(
        route, split.path, found, raw_query=split.query, headers=dict(request.headers), body=request.body
    )


def _answer(resolver: APIGatewayHttpResolver, event: dict[str, Any]) -> tuple[int, Any]:
    out = resolver.resolve(json.loads(json.dumps(event)), LambdaContext(function_name="parity"))
    return out["statusCode"], json.loads(out["body"]) if out.get("body") else None


def answered_alike(request: Request) -> None:
    """``request`` (one a route takes) answered by the edge exactly as by Powertools' pydantic validation, never
    with a 5xx."""
    event = gateway_event(request)
    assert event is not None
    expected = _answer(ORACLE, event)
    got = _answer(EDGE, event)
    assert got == expected, request.reproducer()
    assert got[0] < 500, request.reproducer()
