"""Mint a token for ``make run AUTH=jwt``: ``.venv/bin/python -m local.token --user alice [--admin]``.

The token is signed with the local key under ``--data-dir`` (made on first use) and carries what a Cognito or
OIDC token would: ``sub`` and the configured user claim (``JWT_USER_CLAIM``, default ``sub``) set to the user;
``--admin`` adds the admin scope (``JWT_ADMIN_SCOPE``) and, when ``JWT_ADMIN_GROUP`` is set, that group in
``cognito:groups``; ``--app`` puts the app in the claim ``JWT_APP_CLAIM`` names (``app`` when unset: run the
server with ``JWT_APP_CLAIM=app`` to have it bind apps). The settings are read from the environment, else from
the template's defaults, as the server reads them.
"""

from __future__ import annotations

import argparse
import os
import sys

from .auth import AUDIENCE, ISSUER, mint
from .template import load_template, parameter_defaults

# The template parameter behind each setting the token must agree with.
SETTINGS = {
    "JWT_USER_CLAIM": ("JwtUserClaim", "sub"),
    "JWT_APP_CLAIM": ("JwtAppClaim", ""),
    "JWT_ADMIN_SCOPE": ("JwtAdminScope", "agent-memory/admin"),
    "JWT_ADMIN_GROUP": ("JwtAdminGroup", ""),
}


def setting(name: str) -> str:
    """A JWT setting as the server's functions see it: the environment, else the template's default."""
    if name in os.environ:
        return os.environ[name]
    parameter, fallback = SETTINGS[name]
    return parameter_defaults(load_template()).get(parameter, fallback)


def token_claims(user: str, *, admin: bool = False, app: str | None = None) -> dict[str, object]:
    """The claims of a local token for ``user`` (see the module's docstring)."""
    claims: dict[str, object] = {"sub": user, setting("JWT_USER_CLAIM") or "sub": user}
    if app is not None:
        claims[setting("JWT_APP_CLAIM") or "app"] = app
    if admin:
        claims["scope"] = setting("JWT_ADMIN_SCOPE") or "agent-memory/admin"
        if group := setting("JWT_ADMIN_GROUP"):
            claims["cognito:groups"] = [group]
    return claims


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--user", required=True, help="the user the token is for (its sub and user claim)")
    parser.add_argument("--admin", action="store_true", help="add the admin scope (and the admin group if set)")
    parser.add_argument("--app", help="bind the token to this app (the JWT_APP_CLAIM claim)")
    parser.add_argument("--expires-in", type=int, default=3600, help="seconds until it expires (default 3600)")
    parser.add_argument(
        "--data-dir", default=os.environ.get("DATA_DIR", ".data"), help="where make run keeps its data and key"
    )
    args = parser.parse_args(argv)
    token = mint(args.data_dir, token_claims(args.user, admin=args.admin, app=args.app), expires_in=args.expires_in)
    print(token)
    print(f"(issuer {ISSUER}, audience {AUDIENCE}, expires in {args.expires_in} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
