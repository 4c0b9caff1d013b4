"""``make run AUTH=jwt``'s authorizer: every token API Gateway's JWT authorizer refuses is refused here (401 with
its exact body, no handler run), and one it accepts reaches the handler with its claims as API Gateway gives them."""

from __future__ import annotations

import json
import stat
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

import local.server
from local.auth import (
    AUDIENCE,
    ISSUER,
    JWKS_FILE,
    KEY_FILE,
    JwtAuthorizer,
    SigningKey,
    Unauthorized,
    auth_dir,
    event_claims,
    mint,
    signing_key,
)
from local.server import LocalApi
from local.template import load_template
from local.token import main as token_main
from local.token import token_claims


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("data")


@pytest.fixture(scope="module")
def authorizer(data_dir: Path) -> JwtAuthorizer:
    return JwtAuthorizer.from_data_dir(data_dir)


def _bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def test_the_signing_key_is_made_once_private_and_reused(tmp_path: Path) -> None:
    first = signing_key(tmp_path)
    key_file = auth_dir(tmp_path) / KEY_FILE
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    pem = key_file.read_bytes()
    again = signing_key(tmp_path)
    assert again.kid == first.kid and key_file.read_bytes() == pem
    jwks = json.loads((auth_dir(tmp_path) / JWKS_FILE).read_text())
    assert [k["kid"] for k in jwks["keys"]] == [first.kid]
    assert {"d", "p", "q"}.isdisjoint(jwks["keys"][0])  # the public half only
    assert signing_key(tmp_path / "other").kid != first.kid  # another data folder, another key


def test_a_minted_token_passes_with_or_without_the_bearer_prefix(data_dir: Path, authorizer: JwtAuthorizer) -> None:
    token = mint(data_dir, {"sub": "alice"})
    assert authorizer.authorize(_bearer(token))["sub"] == "alice"
    assert authorizer.authorize({"Authorization": token})["sub"] == "alice"
    assert authorizer.authorize({"authorization": f"bearer {token}"})["aud"] == AUDIENCE


def test_a_token_without_aud_is_checked_on_its_client_id_as_cognito_access_tokens_are(
    data_dir: Path, authorizer: JwtAuthorizer
) -> None:
    good = mint(data_dir, {"sub": "alice", "client_id": AUDIENCE}, audience=None)
    assert authorizer.authorize(_bearer(good))["sub"] == "alice"
    with pytest.raises(Unauthorized):
        authorizer.authorize(_bearer(mint(data_dir, {"sub": "alice", "client_id": "another"}, audience=None)))
    with pytest.raises(Unauthorized):
        authorizer.authorize(_bearer(mint(data_dir, {"sub": "alice"}, audience=None)))


def test_one_of_several_audiences_is_enough(data_dir: Path, authorizer: JwtAuthorizer) -> None:
    token = mint(data_dir, {"sub": "alice"}, audience=["someone-else", AUDIENCE])
    assert authorizer.authorize(_bearer(token))["sub"] == "alice"


def _other_key() -> SigningKey:
    return SigningKey(rsa.generate_private_key(public_exponent=65537, key_size=2048), "unknown")


REFUSED: dict[str, Any] = {
    "no header": lambda d: {},
    "empty header": lambda d: {"authorization": ""},
    "bearer without a token": lambda d: {"authorization": "Bearer "},
    "not a jwt": lambda d: _bearer("not-a-token"),
    "three parts of garbage": lambda d: _bearer("abc.def.ghi"),
    "expired": lambda d: _bearer(mint(d, {"sub": "alice"}, now=int(time.time()) - 7200)),
    "not before in the future": lambda d: _bearer(mint(d, {"sub": "alice", "nbf": int(time.time()) + 600})),
    "issued in the future": lambda d: _bearer(mint(d, {"sub": "alice", "iat": int(time.time()) + 600})),
    "no exp": lambda d: _bearer(_without(d, "exp")),
    "wrong audience": lambda d: _bearer(mint(d, {"sub": "alice"}, audience="another-api")),
    "wrong issuer": lambda d: _bearer(mint(d, {"sub": "alice"}, issuer="https://evil.example")),
    "no issuer": lambda d: _bearer(_without(d, "iss")),
    "bad signature": lambda d: _bearer(_tampered(d)),
    "signed by another key under our kid": lambda d: _bearer(
        mint(d, {"sub": "alice"}, key=SigningKey(_other_key().private_key, signing_key(d).kid))
    ),
    "a kid the JWKS does not have": lambda d: _bearer(mint(d, {"sub": "alice"}, key=_other_key())),
    "no kid": lambda d: _bearer(
        jwt.encode(
            {"sub": "alice", "iss": ISSUER, "aud": AUDIENCE, "exp": time.time() + 60},
            signing_key(d).private_key,
            algorithm="RS256",
        )
    ),
    "HS256 keyed with the public JWK": lambda d: _bearer(_hmac_confusion(d)),
    "alg none": lambda d: _bearer(
        jwt.encode(
            {"sub": "alice", "iss": ISSUER, "aud": AUDIENCE, "exp": time.time() + 60},
            None,
            algorithm="none",
            headers={"kid": signing_key(d).kid},
        )
    ),
}


def _without(data_dir: Path, claim: str) -> str:
    key = signing_key(data_dir)
    payload = {"sub": "alice", "iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + 60}
    payload.pop(claim)
    return jwt.encode(payload, key.private_key, algorithm="RS256", headers={"kid": key.kid})


def _tampered(data_dir: Path) -> str:
    # alice's signature on bob's claims.
    header, _, signature = mint(data_dir, {"sub": "alice"}).split(".")
    body = mint(data_dir, {"sub": "bob"}).split(".")[1]
    return f"{header}.{body}.{signature}"


def _hmac_confusion(data_dir: Path) -> str:
    import base64
    import hashlib
    import hmac

    key = signing_key(data_dir)
    segments = [
        base64.urlsafe_b64encode(json.dumps(part).encode()).rstrip(b"=").decode()
        for part in (
            {"alg": "HS256", "typ": "JWT", "kid": key.kid},
            {"sub": "alice", "iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + 60},
        )
    ]
    secret = (auth_dir(data_dir) / JWKS_FILE).read_bytes()
    mac = hmac.new(secret, ".".join(segments).encode(), hashlib.sha256).digest()
    return ".".join([*segments, base64.urlsafe_b64encode(mac).rstrip(b"=").decode()])


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_the_authorizer_refuses(case: str, data_dir: Path, authorizer: JwtAuthorizer) -> None:
    with pytest.raises(Unauthorized):
        authorizer.authorize(REFUSED[case](data_dir))


def test_claims_reach_the_event_as_strings_as_api_gateway_gives_them() -> None:
    claims = {
        "sub": "alice",
        "exp": 1700000000,
        "auth_time": 1.7e9,
        "email_verified": True,
        "cognito:groups": ["admins", "readers"],
        "scope": "a b",
        "address": {"zip": "1000", "city": "Lx"},
    }
    assert event_claims(claims) == {
        "sub": "alice",
        "exp": "1700000000",
        "auth_time": "1700000000",
        "email_verified": "true",
        "cognito:groups": "[admins readers]",
        "scope": "a b",
        "address": "map[city:Lx zip:1000]",
    }


class _Recorder:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        self.events.append(event)
        return {"statusCode": 200, "headers": {"content-type": "application/json"}, "body": "{}"}


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> _Recorder:
    handler = _Recorder()
    monkeypatch.setattr(local.server, "load_handler", lambda route: handler)
    return handler


def test_a_refused_request_gets_api_gateways_401_and_never_reaches_a_handler(
    data_dir: Path, authorizer: JwtAuthorizer, recorder: _Recorder
) -> None:
    api = LocalApi(load_template(), authorizer)
    expired = mint(data_dir, {"sub": "alice"}, now=int(time.time()) - 7200)
    for headers in ({}, _bearer(expired), _bearer(mint(data_dir, {"sub": "alice"}, audience="x"))):
        status, out, body = api.handle("GET", "/apps/demo/users/alice/sessions", headers, None)
        assert (status, body, out["content-type"]) == (401, b'{"message":"Unauthorized"}', "application/json")
    assert recorder.events == []
    # An unmatched route is still API Gateway's 404, before any authorizer.
    assert api.handle("GET", "/nowhere", {}, None)[0] == 404


def test_an_accepted_request_reaches_the_handler_with_its_claims(
    data_dir: Path, authorizer: JwtAuthorizer, recorder: _Recorder
) -> None:
    api = LocalApi(load_template(), authorizer)
    token = mint(data_dir, token_claims("alice", admin=True, app="demo"))
    status, _, _ = api.handle("GET", "/apps/demo/users/alice/sessions", _bearer(token), None)
    assert status == 200
    (event,) = recorder.events
    context = event["requestContext"]["authorizer"]
    assert set(context) == {"jwt"} and context["jwt"]["scopes"] is None
    claims = context["jwt"]["claims"]
    assert claims["sub"] == "alice" and claims["app"] == "demo" and claims["scope"] == "agent-memory/admin"
    assert claims["iss"] == ISSUER and claims["aud"] == AUDIENCE and claims["exp"].isdigit()


def test_without_an_authorizer_every_request_is_the_local_iam_caller(recorder: _Recorder) -> None:
    status, _, _ = LocalApi(load_template()).handle("GET", "/apps/demo/users/alice/sessions", {}, None)
    assert status == 200
    assert recorder.events[0]["requestContext"]["authorizer"]["iam"]["userArn"] == "local"


def test_the_token_command_prints_a_token_the_server_accepts(
    data_dir: Path, authorizer: JwtAuthorizer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JWT_ADMIN_GROUP", "admins")
    token_main(["--user", "bob", "--admin", "--app", "demo", "--expires-in", "60", "--data-dir", str(data_dir)])
    claims = authorizer.authorize(_bearer(capsys.readouterr().out.strip()))
    assert claims["sub"] == "bob" and claims["exp"] - claims["iat"] == 60
    assert claims["scope"] == "agent-memory/admin" and claims["cognito:groups"] == ["admins"]
    assert claims["app"] == "demo"
    token_main(["--user", "carol", "--data-dir", str(data_dir)])
    plain = authorizer.authorize(_bearer(capsys.readouterr().out.strip()))
    assert plain["sub"] == "carol" and "scope" not in plain and "app" not in plain


def test_the_user_and_app_claims_follow_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JWT_USER_CLAIM", "username")
    monkeypatch.setenv("JWT_APP_CLAIM", "custom:app")
    monkeypatch.setenv("JWT_ADMIN_SCOPE", "memory/all")
    monkeypatch.delenv("JWT_ADMIN_GROUP", raising=False)
    claims = token_claims("alice", admin=True, app="demo")
    assert claims == {"sub": "alice", "username": "alice", "custom:app": "demo", "scope": "memory/all"}
