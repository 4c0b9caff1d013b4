"""The route table and the OpenAPI document: the table is the template's routes and the handlers' parameters,
the document is valid OpenAPI 3.1, and docs/openapi.json is the current one."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openapi_spec_validator import validate

from agent_memory.edge import openapi
from agent_memory.edge.routes import PENDING, ROUTES, Route
from local import template
from local.template import ROOT, load_handler, load_template, routes

TEMPLATE_ROUTES = {r.route_key: r for r in routes(load_template())}
DOCUMENT = ROOT / "docs" / "openapi.json"


def test_the_route_table_is_the_templates_routes() -> None:
    table = {r.key: r.function for r in ROUTES}
    assert len(table) == len(ROUTES), "a route is in the table twice"
    in_template = {key: route.function for key, route in TEMPLATE_ROUTES.items()}
    # a route of the contract whose handler lands with another branch may be missing from the template, not wrong
    expected = {key: function for key, function in table.items() if key not in PENDING or key in in_template}
    assert in_template == expected


def handler_of(route: Route) -> Any:
    """The function in functions/<name>/app.py that serves ``route`` (the route's operation id names it)."""
    target = TEMPLATE_ROUTES[route.key]
    load_handler(target)
    module = template._loaded[f"_functions.{(ROOT / target.code_uri).name}.app"]
    return getattr(module, route.operation_id)


@pytest.mark.parametrize("route", [r for r in ROUTES if r.key in TEMPLATE_ROUTES], ids=lambda r: r.key)
def test_each_handler_declares_exactly_the_tables_parameters_and_body(route: Route) -> None:
    handler = handler_of(route)
    stub = Route(route.method, route.path, route.function, handler, route.summary, route.responses)
    table_side = (openapi._parameters(route, {}), openapi._body_type(route))
    handler_side = (openapi._parameters(stub, {}), openapi._body_type(stub))
    if route.key in PENDING and table_side != handler_side:
        return  # the contract's new parameter (If-None-Match) lands with the i10-sessions branch
    assert handler_side == table_side


def test_the_document_is_valid_openapi_3_1_and_covers_every_route() -> None:
    document = openapi.document()
    validate(document)
    assert document["openapi"] == "3.1.0"
    operations = {f"{method.upper()} {path}" for path, item in document["paths"].items() for method in item}
    assert operations == {r.key for r in ROUTES}
    search = document["paths"]["/apps/{app_name}/users/{user_id}/memories/search"]
    assert [p["name"] for p in search["get"]["parameters"]] == ["app_name", "user_id", "query", "top_k", "min_score"]
    min_score = search["get"]["parameters"][-1]
    assert (
        min_score["required"] is False and min_score["schema"]["minimum"] == 0 and min_score["schema"]["maximum"] == 1
    )
    append = document["paths"]["/apps/{app_name}/users/{user_id}/sessions/{session_id}/events"]["post"]
    headers = [(p["name"], p["in"], p["required"]) for p in append["parameters"] if p["in"] == "header"]
    assert headers == [("if-match", "header", False), ("prefer", "header", False)]
    assert set(append["responses"]) >= {"200", "201", "400", "404", "409", "412", "413", "422", "503"}
    error = document["components"]["schemas"]["ErrorResponse"]
    assert error["properties"]["error"] == {"$ref": "#/components/schemas/ErrorDetail"}
    # snake_case, as the API answers (requests accept the camelCase aliases too)
    event = document["components"]["schemas"]["Event"]["properties"]
    assert "invocation_id" in event and "invocationId" not in event


def test_docs_openapi_json_is_current() -> None:
    assert DOCUMENT.read_text(encoding="utf-8") == openapi.document_json(), (
        "docs/openapi.json is out of date: run `make openapi`"
    )
    assert json.loads(openapi.document_json()) == openapi.document()
