"""The API's OpenAPI 3.1 document, generated from the route table (``routes.py``) and its typed models.

Parameters come from each route's signature (the annotated types of ``requests.py``, with their bounds and
descriptions), bodies and answers from the pydantic models (``requests.py``, ``models.py``, ``responses.py``) as
JSON Schema 2020-12, which OpenAPI 3.1 uses as it is. Field names are the snake_case ones the API documents
(requests also accept ADK's camelCase aliases). The document is built on first use and kept.

    PYTHONPATH=layers/shared .venv/bin/python -m agent_memory.edge.openapi docs/openapi.json   # make openapi
"""

from __future__ import annotations

import functools
import inspect
import json
import sys
import typing
from typing import Any

from aws_lambda_powertools.event_handler.openapi.params import Body, Param
from pydantic import TypeAdapter

from .responses import ErrorResponse
from .routes import COMMON_ERRORS, ROUTES, Route
from .routes import hints as route_hints

OPENAPI_VERSION = "3.1.0"
API_VERSION = "0.1.0"
REF = "#/components/schemas/{model}"

ERROR_TEXT = {
    400: "a bad path, query or header parameter, or a body that is not JSON this service accepts",
    401: "`unauthorized`: no caller identity (AuthMode jwt: no bearer token; API Gateway itself answers a bad one)",
    403: "`forbidden`: another user's or app's data, or an admin-only route or `app:` state (AuthMode jwt)",
    404: "no such session (or route)",
    409: "`already_exists` (strict create), `event_id_conflict`, or `conflict` (an append kept losing races)",
    412: "`If-Match` does not match the session's ETag",
    413: "`payload_too_large` (a body or field over its bound) or `response_too_large` (the answer would pass 5 MB)",
    422: "body content that does not validate; `field` is its path",
    429: "`quota_exceeded`: a per-user quota would be passed; `field` names it, the message its limit",
    502: "`model_error`: the summarizer or the remote embedder failed; nothing was stored",
    503: "`service_unavailable`: storage or the model is out of capacity; retry after `Retry-After`",
    504: "`model_timeout`: the model did not answer within the request's budget; nothing was stored",
}
SUCCESS_TEXT = {200: "OK", 201: "Created", 204: "No content"}
DESCRIPTION = (
    "Sessions, events and state (short-term memory), context for the model, and long-term memory, for LLM "
    "agents. The deployed API (API Gateway HTTP API) takes requests signed with AWS SigV4 (service "
    "`execute-api`; AuthMode iam) or carrying `Authorization: Bearer <JWT>` (AuthMode jwt: a token reaches its "
    "own user's data only); `make run` checks no identity unless `AUTH=jwt`. Every error is "
    '`{"error": {"code", "message", "field"?}}`. Bodies are read as JSON whatever `Content-Type` says; '
    "snake_case field names are documented and answered, ADK's camelCase aliases are accepted in requests."
)


def _body_type(route: Route) -> Any | None:
    hints = route_hints(route.signature)
    for name in inspect.signature(route.signature).parameters:
        annotation = hints[name]
        if any(isinstance(m, Body) for m in typing.get_args(annotation)[1:]):
            return typing.get_args(annotation)[0]
    return None


def _parameters(route: Route, defs: dict[str, Any]) -> list[dict[str, Any]]:
    hints = route_hints(route.signature)
    out: list[dict[str, Any]] = []
    for name, parameter in inspect.signature(route.signature).parameters.items():
        annotation = hints[name]
        info = next((m for m in typing.get_args(annotation)[1:] if isinstance(m, Param)), None)
        if info is None or isinstance(info, Body):
            continue
        schema = TypeAdapter(annotation).json_schema(by_alias=False, ref_template=REF)
        defs.update(schema.pop("$defs", {}))
        description = schema.pop("description", None) or info.description
        required = parameter.default is inspect.Parameter.empty
        branches = schema.get("anyOf")
        if not required and isinstance(branches, list):  # an optional parameter is absent, never null
            kept = [b for b in branches if b != {"type": "null"}]
            if len(kept) == 1:
                schema = {**{k: v for k, v in schema.items() if k != "anyOf"}, **kept[0]}
        if not required and parameter.default is not None:
            schema["default"] = parameter.default
        entry: dict[str, Any] = {"name": info.alias or name, "in": info.in_.value, "required": required}
        if description:
            entry["description"] = description
        entry["schema"] = schema
        out.append(entry)
    return out


_BOUNDS = {"ge": "minimum", "le": "maximum", "gt": "exclusiveMinimum", "lt": "exclusiveMaximum"}


def _json_schema_bounds(node: Any) -> Any:
    """pydantic writes a numeric bound it could not fold into a validated type (``Field(ge=0)`` beside
    validators, as ``bounds.Timestamp`` has) under its own name (``ge``); JSON Schema names it ``minimum``."""
    if isinstance(node, list):
        return [_json_schema_bounds(item) for item in node]
    if not isinstance(node, dict):
        return node
    numeric = node.get("type") in ("number", "integer")
    return {(_BOUNDS.get(k, k) if numeric else k): _json_schema_bounds(v) for k, v in node.items()}


@functools.cache
def document() -> dict[str, Any]:
    """The OpenAPI 3.1 document of every route of ``routes.ROUTES`` (built once)."""
    inputs: list[tuple[Any, Any, TypeAdapter[Any]]] = [(("error", 0), "serialization", TypeAdapter(ErrorResponse))]
    for route in ROUTES:
        body = _body_type(route)
        if body is not None:
            inputs.append(((route.key, 0), "validation", TypeAdapter(body)))
        for status, model in route.responses.items():
            if model is not None:
                inputs.append(((route.key, status), "serialization", TypeAdapter(model)))
    schemas, definitions = TypeAdapter.json_schemas(inputs, by_alias=False, ref_template=REF)
    defs: dict[str, Any] = dict(definitions.get("$defs", {}))
    error = {"application/json": {"schema": schemas[(("error", 0), "serialization")]}}

    paths: dict[str, dict[str, Any]] = {}
    for route in ROUTES:
        operation: dict[str, Any] = {"operationId": route.operation_id, "summary": route.summary, "tags": [route.tag]}
        parameters = _parameters(route, defs)
        if parameters:
            operation["parameters"] = parameters
        if (route.key, 0) in {key for key, _ in schemas}:
            body = _body_type(route)
            optional = inspect.signature(route.signature).parameters["body"].default is None
            body_schema = schemas[((route.key, 0), "validation")]
            if optional and isinstance(body_schema.get("anyOf"), list):
                kept = [b for b in body_schema["anyOf"] if b != {"type": "null"}]
                body_schema = kept[0] if len(kept) == 1 else {"anyOf": kept}
            operation["requestBody"] = {
                "required": not optional,
                "content": {"application/json": {"schema": body_schema}},
            }
            del body
        answers: dict[str, Any] = {}
        for status, model in sorted(route.responses.items()):
            answer: dict[str, Any] = {"description": SUCCESS_TEXT.get(status, "OK")}
            if model is not None:
                answer["content"] = {"application/json": {"schema": schemas[((route.key, status), "serialization")]}}
            if status in route.headers:
                answer["headers"] = {
                    name: {"description": text, "schema": {"type": "string"}}
                    for name, text in route.headers[status].items()
                }
            answers[str(status)] = answer
        if route.tag != "meta":
            for status in sorted({*COMMON_ERRORS, *route.errors}):
                answer = {"description": ERROR_TEXT[status], "content": error}
                if status == 503:
                    answer["headers"] = {"Retry-After": {"description": "seconds", "schema": {"type": "string"}}}
                answers[str(status)] = answer
        operation["responses"] = answers
        paths.setdefault(route.path, {})[route.method.lower()] = operation

    return _document(paths, defs)


def _document(paths: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    document: dict[str, Any] = {
        "openapi": OPENAPI_VERSION,
        "info": {"title": "Serverless agent memory", "version": API_VERSION, "description": DESCRIPTION},
        "paths": paths,
        "components": {
            "schemas": dict(sorted(defs.items())),
            "securitySchemes": {
                "sigv4": {
                    "type": "apiKey",
                    "name": "Authorization",
                    "in": "header",
                    "description": "AWS Signature Version 4 (service `execute-api`), on the deployed API",
                }
            },
        },
        "security": [{"sigv4": []}],
    }
    return dict(_json_schema_bounds(document))


@functools.cache
def document_json() -> str:
    """The document as the API serves it and ``docs/openapi.json`` holds it: indented, one trailing newline."""
    return json.dumps(document(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> None:
    """Write the document to the file named by ``argv[0]`` (stdout without one)."""
    text = document_json()
    if argv:
        with open(argv[0], "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main(sys.argv[1:])
