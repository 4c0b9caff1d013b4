"""Who may call what: the caller API Gateway's authorizer vouched for, checked against the path it asks for.

Two auth modes (the template's ``AuthMode``):

- ``iam``: API Gateway's ``AWS_IAM`` authorizer decides, from the caller's IAM policy, which routes (and, through
  principal tags in that policy, which apps and users) it may invoke; the handler adds no check of its own.
- ``jwt``: API Gateway's JWT authorizer has checked the token's signature, issuer, audience and expiry; what is left
  is to bind the caller to its data. The path's ``user_id`` must equal the token's user claim (``JWT_USER_CLAIM``,
  ``sub`` by default) unless the caller is an admin (the admin scope or group); when ``JWT_APP_CLAIM`` is set, the
  path's ``app_name`` must equal that claim for everyone, admins included. App-wide routes are admin-only, and so
  is writing ``app:`` state (shared by every user of the app).

Everything here is pure: the edge (``api.py``) hands it the request context and the matched route.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import Forbidden, Unauthorized
from ..runtime.lazyclass import dataclass  # processed on first instance (lazyclass.py)
from .state import APP_PREFIX

IAM = "iam"
JWT = "jwt"
MODES = (IAM, JWT)
# routes.py's access levels (repeated here so that the policy imports no route table)
USER, APP, ADMIN, ANY = "user", "app", "admin", "any"


@dataclass(frozen=True)
class AuthConfig:
    """The deployment's auth settings (the template's AuthMode and Jwt* parameters)."""

    mode: str = IAM
    user_claim: str = "sub"
    app_claim: str = ""  # empty: tokens are not bound to an app
    admin_scope: str = "agent-memory/admin"  # empty: no scope makes an admin
    admin_group: str = ""  # empty: no group makes an admin

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"AUTH_MODE must be one of {', '.join(MODES)}, not {self.mode!r}")


@dataclass(frozen=True)
class Principal:
    """The caller as the authorizer vouched for it."""

    mode: str
    subject: str  # jwt: the sub claim (or the user claim); iam: the caller's ARN
    user: str | None = None  # jwt: the user claim's value
    app: str | None = None  # jwt: the app claim's value, when the deployment binds tokens to an app
    admin: bool = False

    def log_fields(self) -> dict[str, Any]:
        """What the write log records of the caller."""
        fields: dict[str, Any] = {"auth_mode": self.mode, "principal": self.subject}
        if self.mode == JWT:
            fields["principal_user"] = self.user
            fields["principal_admin"] = self.admin
        return fields


def _claim_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value or None
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):  # a numeric claim, as API Gateway would render it
        return str(value)
    return None


def claim_values(value: Any) -> list[str]:
    """A multi-valued claim as a list: a JSON list, a space-separated string (``scope``) or API Gateway's
    rendering of an array claim in a payload 2.0 event (``"[admins readers]"``, sometimes comma-separated)."""
    if isinstance(value, list | tuple):
        return [str(v) for v in value if isinstance(v, str | int)]
    if not isinstance(value, str):
        return []
    text = value.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    return [part for part in text.replace(",", " ").split() if part]


def _is_admin(jwt: Mapping[str, Any], claims: Mapping[str, Any], config: AuthConfig) -> bool:
    if config.admin_scope:
        scopes: list[str] = []
        for source in (claims.get("scope"), claims.get("scp"), jwt.get("scopes")):
            scopes.extend(claim_values(source))
        if config.admin_scope in scopes:
            return True
    return bool(config.admin_group) and config.admin_group in claim_values(claims.get("cognito:groups"))


def principal(request_context: Any, config: AuthConfig) -> Principal | None:
    """The caller of a request with this ``requestContext`` (API Gateway HTTP API, payload 2.0); None when the
    mode's authorizer left no identity (jwt: no verified claims)."""
    context = request_context if isinstance(request_context, Mapping) else {}
    authorizer = context.get("authorizer")
    authorizer = authorizer if isinstance(authorizer, Mapping) else {}
    if config.mode == IAM:
        iam = authorizer.get("iam")
        iam = iam if isinstance(iam, Mapping) else {}
        arn = _claim_text(iam.get("userArn")) or _claim_text(iam.get("callerId")) or "unknown"
        return Principal(IAM, arn)
    jwt = authorizer.get("jwt")
    if not isinstance(jwt, Mapping) or not isinstance(jwt.get("claims"), Mapping) or not jwt["claims"]:
        return None
    claims: Mapping[str, Any] = jwt["claims"]
    user = _claim_text(claims.get(config.user_claim))
    app = _claim_text(claims.get(config.app_claim)) if config.app_claim else None
    subject = _claim_text(claims.get("sub")) or user or "unknown"
    return Principal(JWT, subject, user=user, app=app, admin=_is_admin(jwt, claims, config))


def authorize(
    caller: Principal | None, config: AuthConfig, *, access: str, app_name: str | None, user_id: str | None
) -> None:
    """Raise ``Unauthorized`` (no identity) or ``Forbidden`` unless ``caller`` may call a route of ``access``
    for this path's app and user. iam mode: IAM has decided already."""
    if config.mode == IAM:
        return
    if caller is None:
        raise Unauthorized("this API needs a bearer token (Authorization: Bearer <JWT>)")
    if config.app_claim and app_name is not None and caller.app != app_name:
        # the app binding holds for admins too: an admin token of one app is no admin of another
        raise Forbidden(f"the token's {config.app_claim} claim does not grant app {app_name!r}", field="app_name")
    if caller.admin or access == ANY:
        return
    if access == ADMIN:
        raise Forbidden("this route lists every user's data: it needs an admin token", field="app_name")
    if access == APP:
        return
    if caller.user is None:
        raise Forbidden(f"the token has no {config.user_claim} claim to bind it to a user", field="user_id")
    if user_id != caller.user:
        raise Forbidden(f"a token of user {caller.user!r} cannot reach user {user_id!r}", field="user_id")


def app_state_key(body: Any) -> str | None:
    """The field of a validated request body that writes ``app:`` state (shared by every user of the app), or
    None: an append's ``actions.state_delta`` (one event or a batch), a new session's ``state``, or an imported
    session's ``state.app``."""
    events: Iterable[tuple[str, Any]]
    scoped = getattr(body, "state", None)
    if scoped is not None and hasattr(scoped, "app"):
        # An import's document: it sets its `state.app` keys; its events' deltas are history, never applied.
        return "state.app" if scoped.app else None
    if hasattr(body, "events") and isinstance(body.events, list):
        events = ((f"events[{i}].", event) for i, event in enumerate(body.events))
    elif hasattr(body, "actions"):
        events = (("", body),)
    else:
        state = getattr(body, "state", None)
        for key in state or {}:
            if isinstance(key, str) and key.startswith(APP_PREFIX):
                return f"state.{key}"
        return None
    for prefix, event in events:
        delta = getattr(getattr(event, "actions", None), "state_delta", None) or {}
        for key in delta:
            if isinstance(key, str) and key.startswith(APP_PREFIX):
                return f"{prefix}actions.state_delta.{key}"
    return None


def authorize_body(caller: Principal | None, config: AuthConfig, body: Any) -> None:
    """Raise ``Forbidden`` when a caller that is not an admin writes ``app:`` state (jwt mode)."""
    if config.mode == IAM or caller is None or caller.admin:
        return
    field = app_state_key(body)
    if field is not None:
        raise Forbidden("app: state is shared by every user of the app: writing it needs an admin token", field=field)
