"""Authentication: SigV4 for a deployed stack (IAM-authorised API Gateway), a bearer token, or none (``make run``).

SigV4 signs with botocore (service ``execute-api``), from the standard credential chain unless credentials are
given, in the region the URL names (``<api-id>.execute-api.<region>.amazonaws.com``) or the given or configured
one. The body's SHA-256 is part of the signature. Only headers no proxy rewrites are signed (host, content type,
the conditional headers, botocore's ``x-amz-*``), so a hop that adds or drops ``Connection`` or ``Accept-Encoding``
does not break the signature. Each attempt is signed anew: a retry carries a fresh ``X-Amz-Date``.
"""

from __future__ import annotations

import re
from collections.abc import Generator
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx

__all__ = ["BearerAuth", "SigV4Auth", "resolve_auth"]

SERVICE = "execute-api"
_REGION_IN_HOST = re.compile(r"\.execute-api(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$")
_SIGNED = ("content-type", "if-match", "if-none-match")
# What botocore adds while signing, copied back onto the request.
_AUTH_HEADERS = ("Authorization", "X-Amz-Date", "X-Amz-Security-Token")

AuthMode = Literal["sigv4", "none"]


def region_from_url(url: str) -> str | None:
    """The region an ``execute-api`` host names, or None for any other host (a custom domain, localhost)."""
    match = _REGION_IN_HOST.search(urlsplit(url).hostname or "")
    return match.group(1) if match else None


def is_aws_host(url: str) -> bool:
    """Whether ``url``'s host is AWS's own (``*.amazonaws.com``): the client then signs with SigV4 by default."""
    host = urlsplit(url).hostname or ""
    return host.endswith((".amazonaws.com", ".amazonaws.com.cn"))


class SigV4Auth(httpx.Auth):
    """httpx authentication signing each request with AWS Signature Version 4 (botocore).

    ``credentials``: a botocore ``Credentials`` (refreshable ones are refreshed by botocore when they near expiry).
    """

    requires_request_body = True  # the signature covers the body's hash

    def __init__(self, credentials: Any, region: str, service: str = SERVICE) -> None:
        self.credentials = credentials
        self.region = region
        self.service = service

    def sign(self, method: str, url: str, headers: dict[str, str], body: bytes) -> dict[str, str]:
        """The headers that authenticate this request (``Authorization``, ``X-Amz-Date`` and, with temporary
        credentials, ``X-Amz-Security-Token``)."""
        from botocore.auth import SigV4Auth as BotocoreSigV4
        from botocore.awsrequest import AWSRequest

        request = AWSRequest(method=method, url=url, headers=headers, data=body)
        BotocoreSigV4(self.credentials.get_frozen_credentials(), self.service, self.region).add_auth(request)
        return {name: str(request.headers[name]) for name in _AUTH_HEADERS if name in request.headers}

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        signed = {name: request.headers[name] for name in _SIGNED if name in request.headers}
        signed["host"] = request.headers["host"]
        request.headers.update(self.sign(request.method, str(request.url), signed, request.content))
        yield request


class BearerAuth(httpx.Auth):
    """``Authorization: Bearer <token>`` on every request (a JWT authoriser)."""

    def __init__(self, token: str) -> None:
        self._header = f"Bearer {token}"

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = self._header
        yield request


def resolve_auth(
    base_url: str,
    auth: AuthMode | httpx.Auth | None,
    *,
    region: str | None = None,
    credentials: Any = None,
    bearer_token: str | None = None,
) -> httpx.Auth | None:
    """The httpx authentication for a client's constructor arguments (see ``Client``)."""
    if isinstance(auth, httpx.Auth):
        if bearer_token is not None:
            raise ValueError("pass either auth= an httpx.Auth or bearer_token=, not both")
        return auth
    if auth is None:
        auth = "sigv4" if is_aws_host(base_url) and bearer_token is None else "none"
    if auth == "none":
        return BearerAuth(bearer_token) if bearer_token is not None else None
    if auth != "sigv4":
        raise ValueError(f"auth must be 'sigv4', 'none', an httpx.Auth or None, not {auth!r}")
    if bearer_token is not None:
        raise ValueError("SigV4 and a bearer token both use the Authorization header: pass one of them")
    session: Any = None
    if credentials is None or (region is None and region_from_url(base_url) is None):
        import botocore.session  # only signing clients pay for botocore's import

        session = botocore.session.Session()
    if credentials is None:
        credentials = session.get_credentials()
        if credentials is None:
            raise ValueError(
                "SigV4: no AWS credentials found in the standard chain (environment, shared files, SSO, "
                "container or instance role); pass credentials= or auth='none'"
            )
    region = region or region_from_url(base_url) or (session and session.get_config_variable("region"))
    if not region:
        raise ValueError("SigV4: no region in the URL or the AWS configuration; pass region=")
    return SigV4Auth(credentials, str(region))
