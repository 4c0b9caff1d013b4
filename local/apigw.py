"""API Gateway HTTP API (payload format 2.0) events and a Lambda context, as the real services build them."""

from __future__ import annotations

import base64
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode

from .template import Route

# requestContext.authorizer when no authorizer emulation is asked for: an IAM caller, as the default AuthMode.
LOCAL_IAM_CALLER: dict[str, Any] = {"iam": {"accessKey": "LOCAL", "accountId": "123456789012", "userArn": "local"}}


@dataclass
class LambdaContext:
    """The attributes of the Lambda runtime's context object that handlers and Powertools read."""

    function_name: str = "local"
    memory_limit_in_mb: int = 512
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:local"
    deadline: float = field(default_factory=lambda: time.time() + 29)

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.deadline - time.time()) * 1000))


def http_api_event(
    route: Route,
    path: str,
    path_parameters: dict[str, str],
    *,
    query: dict[str, str] | None = None,
    raw_query: str | None = None,
    headers: dict[str, str] | None = None,
    body: bytes | str | None = None,
    source_ip: str = "127.0.0.1",
    authorizer: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The event API Gateway hands a Lambda proxy integration for ``path`` matched to ``route``.

    ``raw_query`` is the query string as the client sent it: ``rawQueryString`` keeps it as it is, and
    ``queryStringParameters`` joins a repeated parameter's decoded values with commas, as API Gateway does
    (without it, ``query`` is both). Binary or non-UTF-8 bodies travel base64-encoded, as API Gateway sends them.
    ``authorizer`` is ``requestContext.authorizer`` (a JWT authorizer's ``{"jwt": …}``); by default the IAM
    caller ``local``.
    """
    now = time.time()
    request_id = str(uuid.uuid4())
    lowered = {k.lower(): v for k, v in (headers or {}).items()}
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route.route_key,
        "rawPath": path,
        "rawQueryString": urlencode(query or {}) if raw_query is None else raw_query,
        "headers": lowered,
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "local",
            "authorizer": authorizer or LOCAL_IAM_CALLER,
            "domainName": "127.0.0.1",
            "domainPrefix": "local",
            "http": {
                "method": route.method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": source_ip,
                "userAgent": lowered.get("user-agent", ""),
            },
            "requestId": request_id,
            "routeKey": route.route_key,
            "stage": "$default",
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "timeEpoch": int(now * 1000),
        },
        "pathParameters": path_parameters,
        "isBase64Encoded": False,
    }
    if raw_query is not None:
        query = joined_query(raw_query)
    if query:
        event["queryStringParameters"] = dict(query)
    if body is not None:
        raw = body.encode() if isinstance(body, str) else body
        try:
            event["body"] = raw.decode("utf-8")
        except UnicodeDecodeError:
            event["body"] = base64.b64encode(raw).decode("ascii")
            event["isBase64Encoded"] = True
    return event


def joined_query(raw_query: str) -> dict[str, str]:
    """``queryStringParameters`` of a raw query string: values decoded, a repeated name's values joined by commas."""
    joined: dict[str, str] = {}
    for name, value in parse_qsl(raw_query, keep_blank_values=True):
        joined[name] = f"{joined[name]},{value}" if name in joined else value
    return joined


def response_body(response: dict[str, Any]) -> bytes:
    """The bytes of a proxy integration response."""
    body = response.get("body") or ""
    if response.get("isBase64Encoded"):
        return base64.b64decode(body)
    return str(body).encode()
