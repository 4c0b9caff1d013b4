"""Every error answer becomes one exception class: the service's {"error": {...}}, API Gateway's {"message"}
(and REST APIs' {"Message"}), and bodies that are neither."""

from __future__ import annotations

import httpx
import pytest
from support import Script, answer, mocked

from agent_memory_client import errors
from agent_memory_client.errors import error_from_response


def ours(code: str, message: str = "m", field: str | None = None) -> dict:
    error = {"code": code, "message": message}
    return {"error": error | ({"field": field} if field else {})}


@pytest.mark.parametrize(
    ("status", "code", "cls"),
    [
        (400, "invalid_input", errors.BadRequest),
        (404, "session_not_found", errors.NotFound),
        (404, "route_not_found", errors.NotFound),
        (405, "method_not_allowed", errors.BadRequest),
        (409, "conflict", errors.Conflict),
        (409, "event_id_conflict", errors.EventIdConflict),
        (409, "already_exists", errors.AlreadyExists),
        (412, "precondition_failed", errors.PreconditionFailed),
        (413, "payload_too_large", errors.PayloadTooLarge),
        (413, "response_too_large", errors.PayloadTooLarge),
        (422, "validation_error", errors.BadRequest),
        (500, "internal_error", errors.ServerError),
        (502, "model_error", errors.ServerError),
        (503, "service_unavailable", errors.ServiceUnavailable),
        (504, "model_timeout", errors.ModelTimeout),
    ],
)
def test_the_services_errors(status: int, code: str, cls: type[errors.AgentMemoryError]) -> None:
    body = httpx.Response(status, json=ours(code, "what happened", "events[3].timestamp")).content
    error = error_from_response(status, {"retry-after": "3"}, body)
    assert type(error) is cls
    assert (error.status, error.code, error.message, error.field) == (
        status,
        code,
        "what happened",
        "events[3].timestamp",
    )
    assert error.retry_after == 3.0
    assert isinstance(error, errors.AgentMemoryError)


@pytest.mark.parametrize(
    ("status", "body", "cls", "code"),
    [
        (401, {"message": "Unauthorized"}, errors.Unauthorized, "unauthorized"),
        (403, {"message": "Forbidden"}, errors.Forbidden, "forbidden"),
        (
            403,
            {"Message": "User: arn:aws:iam::1:user/x is not authorized to perform: execute-api:Invoke"},
            errors.Forbidden,
            "forbidden",
        ),
        (404, {"message": "Not Found"}, errors.NotFound, "not_found"),
        (413, {"message": "Request Entity Too Large"}, errors.PayloadTooLarge, "payload_too_large"),
        (429, {"message": "Too Many Requests"}, errors.RateLimited, "too_many_requests"),
        (500, {"message": "Internal Server Error"}, errors.ServerError, "internal_error"),
        (502, {"message": "Internal server error"}, errors.ServerError, "bad_gateway"),
        (503, {"message": "Service Unavailable"}, errors.ServiceUnavailable, "service_unavailable"),
        # API Gateway's integration timeout is not the model's: the function may still have finished.
        (504, {"message": "Endpoint request timed out"}, errors.ServerError, "gateway_timeout"),
    ],
)
def test_api_gateways_errors(status: int, body: dict, cls: type[errors.AgentMemoryError], code: str) -> None:
    headers = {"apigw-requestid": "Xy1=", "content-type": "application/json"}
    error = error_from_response(status, headers, httpx.Response(status, json=body).content)
    assert type(error) is cls
    assert error.code == code and error.message == next(iter(body.values())) and error.field is None
    assert error.request_id == "Xy1="


def test_bodies_that_are_neither_shape() -> None:
    html = error_from_response(502, {}, b"<html><body>Bad Gateway</body></html>")
    assert type(html) is errors.ServerError and html.code == "bad_gateway" and "Bad Gateway" in html.message
    empty = error_from_response(418, {}, b"")
    assert type(empty) is errors.AgentMemoryError and empty.code == "http_418" and empty.message == "HTTP 418"
    odd = error_from_response(400, {}, b'{"error": "just a string"}')
    assert type(odd) is errors.BadRequest and odd.code == "bad_request"
    assert error_from_response(503, {"retry-after": "soon"}, b"").retry_after is None


async def test_the_client_raises_them(kind: str) -> None:
    script = Script(answer(422, ours("validation_error", "timestamp: not a number", "timestamp")))
    client = mocked(kind, script)
    with pytest.raises(errors.BadRequest) as caught:
        await client.call("append_event", "app", "u", "s", {"timestamp": "x"})
    assert caught.value.field == "timestamp"
    assert str(caught.value) == "422 validation_error: timestamp: not a number (field timestamp)"
    script = Script(answer(403, {"message": "Forbidden"}, {"x-amzn-requestid": "r-1"}))
    with pytest.raises(errors.Forbidden) as forbidden:
        await mocked(kind, script).call("get_app_state", "app")
    assert forbidden.value.request_id == "r-1"
