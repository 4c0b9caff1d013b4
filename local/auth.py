"""``make run AUTH=jwt``: a local issuer of JWTs and the checks API Gateway's JWT authorizer makes.

The signing key (RS256) is created once under ``<data dir>/auth/`` with its JWKS next to it (``make wipe``
deletes both, with the data); ``python -m local.token`` mints tokens with it, and the local server verifies a
request's ``Authorization`` header as an HTTP API JWT authorizer does before a handler runs: the signature by the
JWKS key the token's ``kid`` names, ``iss``, ``aud`` (or ``client_id`` when there is no ``aud``), ``exp``, ``nbf``
and ``iat``. A request that fails gets API Gateway's own 401 (``{"message":"Unauthorized"}``) and never reaches a
handler; one that passes reaches it with its claims in ``requestContext.authorizer.jwt``, every value a string, as
API Gateway hands them over. The handlers themselves (``AUTH_MODE=jwt``) then bind the path to the caller.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

# Fixed, not derived from the server's port, so a token stays valid across restarts on any port.
ISSUER = "agent-memory-local"
AUDIENCE = "agent-memory-local"
ALGORITHM = "RS256"
# API Gateway accepts RSA signatures only.
ACCEPTED_ALGORITHMS = ["RS256", "RS384", "RS512"]
KEY_FILE = "signing-key.pem"
JWKS_FILE = "jwks.json"
# API Gateway's answer to a request its JWT authorizer refuses, byte for byte.
UNAUTHORIZED_BODY = b'{"message":"Unauthorized"}'


def auth_dir(data_dir: str | Path) -> Path:
    """Where the local signing key and JWKS live: with the local data, so ``make wipe`` removes them too."""
    return Path(data_dir) / "auth"


@dataclass(frozen=True)
class SigningKey:
    """The local issuer's private key and the id (``kid``) its public half has in the JWKS."""

    private_key: rsa.RSAPrivateKey
    kid: str


def signing_key(data_dir: str | Path) -> SigningKey:
    """The local signing key, created on first use and reused ever after; its JWKS is (re)written beside it.

    Creation is atomic (written aside, then linked into place): a server and ``local.token`` starting at the same
    moment end up with the same key, whichever wrote it.
    """
    folder = auth_dir(data_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / KEY_FILE
    if not path.exists():
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".key-")  # created 0600: the key is readable by its owner only
        try:
            os.write(fd, pem)
            os.close(fd)
            with contextlib.suppress(FileExistsError):  # another process made it first: theirs is the key
                os.link(tmp, path)
        finally:
            os.unlink(tmp)
    loaded = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(loaded, rsa.RSAPrivateKey):
        raise SystemExit(f"{path} is not an RSA private key; delete it (make wipe) to have a new one made")
    jwk = public_jwk(loaded.public_key())
    jwks = folder / JWKS_FILE
    document = json.dumps({"keys": [jwk]}, indent=2) + "\n"
    if not jwks.exists() or jwks.read_text() != document:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".jwks-")
        with os.fdopen(fd, "w") as fh:
            fh.write(document)
        os.chmod(tmp, 0o644)
        os.replace(tmp, jwks)
    return SigningKey(loaded, str(jwk["kid"]))


def public_jwk(public_key: rsa.RSAPublicKey) -> dict[str, Any]:
    """The JWK of ``public_key``, its ``kid`` the RFC 7638 thumbprint (stable: the same key, the same id)."""
    jwk: dict[str, Any] = RSAAlgorithm.to_jwk(public_key, as_dict=True)
    canonical = json.dumps({k: jwk[k] for k in ("e", "kty", "n")}, separators=(",", ":"), sort_keys=True)
    kid = base64.urlsafe_b64encode(hashlib.sha256(canonical.encode()).digest()).rstrip(b"=").decode()
    return jwk | {"kid": kid, "use": "sig", "alg": ALGORITHM}


def mint(
    data_dir: str | Path,
    claims: Mapping[str, Any],
    *,
    expires_in: int = 3600,
    issuer: str = ISSUER,
    audience: str | list[str] | None = AUDIENCE,
    now: int | None = None,
    key: SigningKey | None = None,
) -> str:
    """A token signed with the local key: ``claims`` plus ``iss``, ``aud``, ``iat``, ``nbf`` and ``exp``.

    ``claims`` override the standard ones (a test's token with an ``exp`` in the past, say); ``audience=None``
    leaves ``aud`` out.
    """
    key = key or signing_key(data_dir)
    issued = int(time.time()) if now is None else now
    payload: dict[str, Any] = {"iss": issuer, "iat": issued, "nbf": issued, "exp": issued + expires_in}
    if audience is not None:
        payload["aud"] = audience
    payload |= dict(claims)
    return jwt.encode(payload, key.private_key, algorithm=ALGORITHM, headers={"kid": key.kid})


class Unauthorized(Exception):
    """The authorizer refuses the request (401); the message says why, for the server's log only."""


class JwtAuthorizer:
    """API Gateway's HTTP API JWT authorizer, locally: identity source ``$request.header.Authorization``."""

    def __init__(self, jwks: Mapping[str, Any], issuer: str = ISSUER, audiences: list[str] | None = None) -> None:
        self.issuer = issuer
        self.audiences = list(audiences) if audiences is not None else [AUDIENCE]
        self._keys: dict[str, Any] = {}
        for jwk in jwks.get("keys", []):
            if jwk.get("kty") == "RSA" and "kid" in jwk:
                self._keys[str(jwk["kid"])] = RSAAlgorithm.from_jwk(jwk)

    @classmethod
    def from_data_dir(cls, data_dir: str | Path) -> JwtAuthorizer:
        """The authorizer for the local issuer: its key is made if missing, then its JWKS file is what is read."""
        signing_key(data_dir)
        return cls(json.loads((auth_dir(data_dir) / JWKS_FILE).read_text()))

    def authorize(self, headers: Mapping[str, str]) -> dict[str, Any]:
        """The verified claims of the request's token; ``Unauthorized`` when it has none or a bad one."""
        header = next((v for k, v in headers.items() if k.lower() == "authorization"), "").strip()
        if not header:
            raise Unauthorized("no Authorization header")
        # The header holds the token itself or "Bearer <token>".
        scheme, _, rest = header.partition(" ")
        token = rest.strip() if scheme.lower() == "bearer" else header
        try:
            unverified = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError as exc:
            raise Unauthorized(f"malformed token: {exc}") from exc
        key = self._keys.get(str(unverified.get("kid")))
        if key is None:
            raise Unauthorized(f"no JWKS key has the token's kid {unverified.get('kid')!r}")
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=ACCEPTED_ALGORITHMS,
                issuer=self.issuer,
                # aud, or client_id when a token has no aud (Cognito's access tokens), is checked below.
                options={"verify_aud": False, "require": ["exp", "iss"]},
                leeway=0,
            )
        except jwt.InvalidTokenError as exc:
            raise Unauthorized(f"{type(exc).__name__}: {exc}") from exc
        audience = claims["aud"] if "aud" in claims else claims.get("client_id")
        offered = audience if isinstance(audience, list) else [audience]
        if not any(isinstance(a, str) and a in self.audiences for a in offered):
            raise Unauthorized(f"audience {audience!r} is none of {self.audiences}")
        return claims


def event_claims(claims: Mapping[str, Any]) -> dict[str, str]:
    """The claims as API Gateway puts them in ``requestContext.authorizer.jwt.claims``: every value a string,
    numbers as written, lists as ``[a b]`` (``cognito:groups`` arrives as ``"[admins readers]"``)."""
    return {str(k): _claim_text(v) for k, v in claims.items()}


def _claim_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list):
        return "[" + " ".join(_claim_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_claim_text(v)}" for k, v in sorted(value.items())) + "]"
    return "" if value is None else str(value)


def jwt_authorizer_context(claims: Mapping[str, Any]) -> dict[str, Any]:
    """``requestContext.authorizer`` for a request the JWT authorizer let through. ``scopes`` is null as API
    Gateway sends it for a route without authorization scopes (the template's routes have none: the handlers read
    the ``scope`` claim themselves)."""
    return {"jwt": {"claims": event_claims(claims), "scopes": None}}
