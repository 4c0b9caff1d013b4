"""SigV4: each request's signature is recomputed on the receiving side with botocore from the known credentials
and the request as it arrived (method, URL, signed headers, body), the way API Gateway checks it."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from botocore.auth import SigV4Auth as BotocoreSigV4
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from support import Driver, Script, answer, session_json

from agent_memory_client import Client
from agent_memory_client.auth import SigV4Auth

KEY, SECRET, TOKEN = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "session-token-xyz"
API = "https://abc123defg.execute-api.eu-west-1.amazonaws.com"
AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/(?P<service>[^/]+)/aws4_request, "
    r"SignedHeaders=(?P<signed>[a-z0-9;-]+), Signature=(?P<signature>[0-9a-f]{64})$"
)


def verify(request: httpx.Request, secret: str = SECRET, body: bytes | None = None) -> dict[str, Any]:
    """The parsed Authorization header if the signature is the one these credentials give the request as it
    arrived; AssertionError otherwise."""
    match = AUTHORIZATION.match(request.headers.get("authorization", ""))
    assert match, request.headers.get("authorization")
    signed = match["signed"].split(";")
    aws = AWSRequest(
        method=request.method,
        url=str(request.url),
        headers={name: request.headers[name] for name in signed},
        data=request.content if body is None else body,
    )
    aws.context["timestamp"] = request.headers["x-amz-date"]
    signer = BotocoreSigV4(Credentials(match["key"], secret, TOKEN), match["service"], match["region"])
    canonical = signer.canonical_request(aws)
    expected = signer.signature(signer.string_to_sign(aws, canonical), aws)
    assert expected == match["signature"], canonical
    assert match["date"] == request.headers["x-amz-date"][:8]
    return match.groupdict() | {"signed": signed}


def signing_client(script: Script, base_url: str = API, **kwargs: Any) -> Client:
    kwargs.setdefault("credentials", Credentials(KEY, SECRET, TOKEN))
    return Client(base_url, transport=httpx.MockTransport(script), **kwargs)


def test_an_append_is_signed_over_its_body_path_and_conditional_header() -> None:
    script = Script(lambda r: answer(201, {"id": "e1", "seq": 1}, {"ETag": '"2"'}))
    with signing_client(script) as client:  # an execute-api host: SigV4 by default, the region from the host
        client.append_event("my-app", "user@example.com", "sess:1", {"id": "e1", "author": "user"}, if_match=1)
    (request,) = script.requests
    assert request.url.raw_path == b"/apps/my-app/users/user@example.com/sessions/sess:1/events"
    signature = verify(request)
    assert (signature["key"], signature["region"], signature["service"]) == (KEY, "eu-west-1", "execute-api")
    assert {"host", "x-amz-date", "content-type", "if-match", "x-amz-security-token"} <= set(signature["signed"])
    assert request.headers["x-amz-security-token"] == TOKEN
    # The verifier can fail: the same request with another body, or checked with another secret, does not verify.
    with pytest.raises(AssertionError):
        verify(request, body=request.content.replace(b"user", b"evil"))
    with pytest.raises(AssertionError):
        verify(request, secret="not-the-secret")


def test_a_query_string_is_signed_as_sent() -> None:
    # next_token is opaque: base64's + / = and anything else must reach the server exactly as signed.
    script = Script(lambda r: answer(200, {"sessions": [], "next_token": None}))
    with signing_client(script) as client:
        client.list_sessions("app", "u", limit=5, next_token="a+b/c=d e~f:é")
    (request,) = script.requests
    verify(request)
    assert request.url.params["next_token"] == "a+b/c=d e~f:é"
    assert request.url.query == b"limit=5&next_token=a%2Bb%2Fc%3Dd%20e~f%3A%C3%A9"


async def test_every_attempt_is_signed_anew(kind: str) -> None:
    script = Script(
        answer(503, {"error": {"code": "service_unavailable", "message": "x"}}), answer(200, session_json())
    )
    driver = Driver(kind, API, credentials=Credentials(KEY, SECRET), transport=httpx.MockTransport(script))
    await driver.call("get_session", "app", "u", "s1")
    assert len(script.requests) == 2
    for request in script.requests:
        signature = verify(request)
        assert "x-amz-security-token" not in signature["signed"]  # long-term keys: no token


def test_the_standard_chain_and_configured_region_for_a_custom_domain(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_aws(monkeypatch)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", TOKEN)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ap-south-1")
    script = Script(lambda r: answer(200, {"app_name": "app", "state": {"app:k": 1}}))
    # A custom domain says nothing of AWS: SigV4 is asked for, the region comes from the configuration.
    with Client("https://memory.example.com", auth="sigv4", transport=httpx.MockTransport(script)) as client:
        assert client.get_app_state("app") == {"app:k": 1}
    assert verify(script.requests[0])["region"] == "ap-south-1"
    # An explicit region wins over both.
    script = Script(lambda r: answer(200, {"app_name": "app", "state": {}}))
    with Client(API, region="us-west-2", transport=httpx.MockTransport(script)) as client:
        client.get_app_state("app")
    assert verify(script.requests[0])["region"] == "us-west-2"


def test_without_credentials_sigv4_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_aws(monkeypatch)
    with pytest.raises(ValueError, match="no AWS credentials"):
        Client(API)
    with pytest.raises(ValueError, match="no region"):
        Client("https://memory.example.com", auth="sigv4", credentials=Credentials(KEY, SECRET))


def test_local_and_bearer_requests_are_not_signed() -> None:
    script = Script(
        lambda r: answer(200, {"app_name": "a", "state": {}}), lambda r: answer(200, {"app_name": "a", "state": {}})
    )
    with Client("http://127.0.0.1:3000", transport=httpx.MockTransport(script)) as client:
        client.get_app_state("a")
    with Client(API, bearer_token="jwt.token", transport=httpx.MockTransport(script)) as client:
        client.get_app_state("a")
    assert "authorization" not in script.requests[0].headers
    assert script.requests[1].headers["authorization"] == "Bearer jwt.token"
    with pytest.raises(ValueError):
        Client(API, auth="sigv4", bearer_token="jwt.token", credentials=Credentials(KEY, SECRET))
    with pytest.raises(ValueError):
        Client(API, auth="kerberos")  # type: ignore[arg-type]


def test_the_signer_alone() -> None:
    headers = SigV4Auth(Credentials(KEY, SECRET), "eu-west-1").sign(
        "POST", f"{API}/apps/a/users/u/sessions", {"host": "abc123defg.execute-api.eu-west-1.amazonaws.com"}, b"{}"
    )
    assert set(headers) == {"Authorization", "X-Amz-Date"}
    request = httpx.Request("POST", f"{API}/apps/a/users/u/sessions", headers=headers, content=b"{}")
    verify(request)


def isolate_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    """No credentials or configuration from this machine, and no instance metadata lookups."""
    for name in [n for n in __import__("os").environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
