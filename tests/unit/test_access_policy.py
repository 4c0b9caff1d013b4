"""policy/access.py: the caller the authorizer vouched for, and who may call what."""

from __future__ import annotations

from typing import Any

import pytest

from agent_memory.edge.requests import CreateSessionRequest, EventBatch, SessionDocument
from agent_memory.edge.routes import ROUTES
from agent_memory.errors import Forbidden, Unauthorized
from agent_memory.models import Event
from agent_memory.policy.access import (
    ADMIN,
    ANY,
    APP,
    USER,
    AuthConfig,
    Principal,
    app_state_key,
    authorize,
    authorize_body,
    claim_values,
    principal,
)

JWT = AuthConfig(mode="jwt", app_claim="custom:app", admin_group="admins")


def jwt_context(claims: Any, scopes: Any = None) -> dict[str, Any]:
    return {"authorizer": {"jwt": {"claims": claims, "scopes": scopes}}}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("openid agent-memory/admin", ["openid", "agent-memory/admin"]),
        ("[admins readers]", ["admins", "readers"]),
        ("[admins,readers]", ["admins", "readers"]),
        (["admins", "readers"], ["admins", "readers"]),
        ("", []),
        (None, []),
        (3, []),
        ({"admins": True}, []),
    ],
)
def test_claim_values(value: Any, expected: list[str]) -> None:
    assert claim_values(value) == expected


def test_principal_of_a_jwt_caller() -> None:
    caller = principal(jwt_context({"sub": "alice", "custom:app": "demo", "scope": "openid"}), JWT)
    assert caller == Principal("jwt", "alice", user="alice", app="demo", admin=False)


@pytest.mark.parametrize(
    "context",
    [
        jwt_context({"sub": "x", "scope": "agent-memory/admin"}),
        jwt_context({"sub": "x", "scp": ["agent-memory/admin"]}),
        jwt_context({"sub": "x"}, scopes=["agent-memory/admin"]),
        jwt_context({"sub": "x", "cognito:groups": "[readers admins]"}),
    ],
)
def test_an_admin_by_scope_or_group(context: dict[str, Any]) -> None:
    caller = principal(context, JWT)
    assert caller is not None and caller.admin


def test_no_admin_scope_or_group_configured_makes_no_admin() -> None:
    config = AuthConfig(mode="jwt", admin_scope="", admin_group="")
    caller = principal(jwt_context({"sub": "x", "scope": "agent-memory/admin", "cognito:groups": "[]"}), config)
    assert caller is not None and not caller.admin


@pytest.mark.parametrize(
    "context", [None, {}, {"authorizer": None}, jwt_context(None), jwt_context({}), jwt_context("sub=alice")]
)
def test_no_jwt_claims_is_no_caller(context: Any) -> None:
    assert principal(context, JWT) is None


def test_iam_caller_is_its_arn_and_is_never_refused() -> None:
    iam = AuthConfig()
    caller = principal({"authorizer": {"iam": {"userArn": "arn:aws:iam::1:role/r"}}}, iam)
    assert caller == Principal("iam", "arn:aws:iam::1:role/r")
    for access in (USER, APP, ADMIN, ANY):
        authorize(None, iam, access=access, app_name="a", user_id="b")
    authorize_body(caller, iam, CreateSessionRequest.model_validate({"state": {"app:x": 1}}))


ALICE = Principal("jwt", "alice", user="alice", app="demo")
ADMIN_OF_DEMO = Principal("jwt", "root", user="root", app="demo", admin=True)


@pytest.mark.parametrize(
    ("caller", "access", "app", "user", "refusal"),
    [
        (ALICE, USER, "demo", "alice", None),
        (ALICE, USER, "demo", "bob", Forbidden),
        (ALICE, USER, "other", "alice", Forbidden),
        (ALICE, APP, "demo", None, None),
        (ALICE, APP, "other", None, Forbidden),
        (ALICE, ADMIN, "demo", None, Forbidden),
        (ALICE, ANY, None, None, None),
        (ADMIN_OF_DEMO, USER, "demo", "bob", None),
        (ADMIN_OF_DEMO, ADMIN, "demo", None, None),
        (ADMIN_OF_DEMO, USER, "other", "bob", Forbidden),
        (Principal("jwt", "s", user=None, app="demo"), USER, "demo", "s", Forbidden),
        (None, ANY, None, None, Unauthorized),
        (None, USER, "demo", "alice", Unauthorized),
    ],
)
def test_authorize(
    caller: Principal | None, access: str, app: str | None, user: str | None, refusal: type[Exception] | None
) -> None:
    if refusal is None:
        authorize(caller, JWT, access=access, app_name=app, user_id=user)
    else:
        with pytest.raises(refusal):
            authorize(caller, JWT, access=access, app_name=app, user_id=user)


def test_app_state_key_of_each_body() -> None:
    plain = {"author": "user", "content": {"role": "user", "parts": [{"text": "hi"}]}}
    writes_app = {**plain, "actions": {"state_delta": {"user:a": 1, "app:b": 2}}}
    assert app_state_key(Event.model_validate(plain)) is None
    assert app_state_key(Event.model_validate(writes_app)) == "actions.state_delta.app:b"
    batch = EventBatch.model_validate({"events": [plain, writes_app]})
    assert app_state_key(batch) == "events[1].actions.state_delta.app:b"
    assert app_state_key(CreateSessionRequest.model_validate({"state": {"app:x": 1}})) == "state.app:x"
    assert app_state_key(CreateSessionRequest.model_validate({})) is None
    document = {
        "format": "agent-memory/session@1",
        "app_name": "a",
        "user_id": "u",
        "session_id": "s",
        "create_time": 1.0,
        "last_update_time": 1.0,
        "version": 0,
        "last_seq": 1,
        # an imported event's app: delta is history (never applied): only the document's state.app is written
        "events": [{**writes_app, "id": "e1", "timestamp": 1.0, "seq": 1}],
    }
    assert app_state_key(SessionDocument.model_validate(document)) is None
    with_app = {**document, "state": {"app": {"theme": "dark"}}}
    assert app_state_key(SessionDocument.model_validate(with_app)) == "state.app"
    assert app_state_key(None) is None
    with pytest.raises(Forbidden):
        authorize_body(ALICE, JWT, batch)
    authorize_body(ADMIN_OF_DEMO, JWT, batch)


def test_every_route_says_who_may_call_it() -> None:
    assert {r.access for r in ROUTES} <= {USER, APP, ADMIN, ANY}
    for route in ROUTES:
        # a route with a user in its path is that user's: nothing may widen it but an admin token
        assert (route.access == USER) == ("{user_id}" in route.path), route.key
    writes = {r.key for r in ROUTES if r.is_write}
    assert "POST /apps/{app_name}/users/{user_id}/memories/search" not in writes
    assert "DELETE /apps/{app_name}/users/{user_id}/memories" in writes


def test_an_unknown_mode_is_refused_at_start() -> None:
    with pytest.raises(ValueError):
        AuthConfig(mode="none")


def test_settings_read_the_auth_variables_and_an_empty_one_means_none(monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_memory.config import Settings

    for name in ("AUTH_MODE", "JWT_USER_CLAIM", "JWT_APP_CLAIM", "JWT_ADMIN_SCOPE", "JWT_ADMIN_GROUP"):
        monkeypatch.delenv(name, raising=False)
    defaults = Settings.from_env()
    assert (defaults.auth_mode, defaults.jwt_user_claim, defaults.jwt_admin_scope) == (
        "iam",
        "sub",
        "agent-memory/admin",
    )
    monkeypatch.setenv("AUTH_MODE", "jwt")
    monkeypatch.setenv("JWT_ADMIN_SCOPE", "")  # the template passes JwtAdminScope "" through: no admin scope
    monkeypatch.setenv("JWT_USER_CLAIM", "")  # an empty user claim is no claim: the default
    configured = Settings.from_env()
    assert (configured.auth_mode, configured.jwt_admin_scope, configured.jwt_user_claim) == ("jwt", "", "sub")
    monkeypatch.setenv("AUTH_MODE", "cookie")
    with pytest.raises(ValueError):
        Settings.from_env()
