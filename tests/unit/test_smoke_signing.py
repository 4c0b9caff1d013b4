"""local.smoke's request signing: SigV4 for execute-api URLs with the standard credential chain, none locally."""

from __future__ import annotations

import datetime as dt
import re

import httpx
import pytest

from local.smoke import Client, execute_api_region, sign


@pytest.mark.parametrize(
    ("url", "region"),
    [
        ("https://abc123defg.execute-api.eu-west-1.amazonaws.com", "eu-west-1"),
        ("https://abc123defg.execute-api.us-gov-west-1.amazonaws.com/", "us-gov-west-1"),
        ("https://abc123defg.execute-api.cn-north-1.amazonaws.com.cn", "cn-north-1"),
        ("http://127.0.0.1:3000", None),
        ("https://memory.example.com", None),
    ],
)
def test_region_is_read_from_an_execute_api_url_only(url: str, region: str | None) -> None:
    assert execute_api_region(url) == region


def test_signing_adds_an_execute_api_authorization_from_the_environment_credentials(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDSMOKETEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "session-token")
    url = "https://abc123defg.execute-api.eu-west-1.amazonaws.com/apps/smoke/users/u/sessions"
    headers = sign("POST", url, b'{"session_id": "trip"}', {"Content-Type": "application/json"}, "eu-west-1")
    today = dt.datetime.now(dt.UTC).strftime("%Y%m%d")
    authorization = headers["Authorization"]
    assert authorization.startswith(
        f"AWS4-HMAC-SHA256 Credential=AKIDSMOKETEST/{today}/eu-west-1/execute-api/aws4_request, "
    )
    signed = re.search(r"SignedHeaders=([^,]+)", authorization)
    assert signed and {"host", "x-amz-date", "x-amz-security-token"} <= set(signed.group(1).split(";"))
    assert re.fullmatch(r"Signature=[0-9a-f]{64}", authorization.rsplit(", ", 1)[1])
    assert headers["X-Amz-Security-Token"] == "session-token"
    assert headers["Content-Type"] == "application/json"


def test_the_client_signs_for_execute_api_and_not_locally(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"ok": True})

    with httpx.Client(transport=httpx.MockTransport(answer)) as http:
        Client("https://abc123defg.execute-api.eu-west-1.amazonaws.com", http, "eu-west-1").call("GET", "/apps/a")
        Client("http://127.0.0.1:3000", http, None).call("GET", "/apps/a")
    signed, unsigned = seen
    assert "/eu-west-1/execute-api/aws4_request" in signed.headers["authorization"]
    assert "authorization" not in unsigned.headers and "x-amz-date" not in unsigned.headers
