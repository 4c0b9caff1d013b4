"""Per-user authorization through the template's routes: API Gateway HTTP API events (payload 2.0) carrying what
the JWT authorizer vouched for (``requestContext.authorizer.jwt.claims``) reach the real handlers, against moto.

Every route × {own user, other user, other app, no identity, admin} in jwt mode, and the same routes in iam mode,
where nothing changed. A token that is expired, of another issuer or for another audience never reaches a function
(API Gateway answers 401 itself): tests/infra/test_template_auth.py checks the template configures the issuer and
the audience, and the local server's emulation is tested with ``make run AUTH=jwt``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_memory.edge import api as edge
from local.apigw import LambdaContext, http_api_event, response_body
from local.template import Route, load_handler, load_template, routes
from tests.support.aws import BUCKET, TABLE, clear_caches

TEMPLATE_ROUTES = routes(load_template())
APP, OTHER_APP = "app", "other"
ADMIN_SCOPE = "agent-memory/admin"
APP_CLAIM = "custom:app"
ISSUER = "https://issuer.example/pool"


def claims(user: str | None, *, app: str = APP, admin: bool = False, **extra: Any) -> dict[str, Any]:
    """What the JWT authorizer puts on the event for a valid token (claims rendered as strings, as API Gateway)."""
    found: dict[str, Any] = {"iss": ISSUER, "aud": "client", "exp": "4102444800", APP_CLAIM: app}
    if user is not None:
        found["sub"] = user
    found["scope"] = f"openid {ADMIN_SCOPE}" if admin else "openid"
    return found | extra


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: Any

    @property
    def error(self) -> dict[str, Any]:
        assert isinstance(self.body, dict) and set(self.body) == {"error"}, self.body
        error: dict[str, Any] = self.body["error"]
        return error


@dataclass
class Gateway:
    """API Gateway in front of the template's routes: it matches the route and hands the handler the event."""

    authorizer: dict[str, Any] | None = field(default=None)

    def request(
        self,
        method: str,
        path: str,
        *,
        caller: dict[str, Any] | None,
        body: Any = None,
        query: dict[str, str] | None = None,
        iam: bool = False,
    ) -> Reply:
        for route in TEMPLATE_ROUTES:
            params = route.match(method, path)
            if params is not None:
                return self.invoke(route, path, params, caller=caller, body=body, query=query, iam=iam)
        raise AssertionError(f"no template route for {method} {path}")

    def invoke(
        self,
        route: Route,
        path: str,
        params: dict[str, str],
        *,
        caller: dict[str, Any] | None,
        body: Any = None,
        query: dict[str, str] | None = None,
        iam: bool = False,
    ) -> Reply:
        event = http_api_event(route, path, params, query=query, body=None if body is None else json.dumps(body))
        context = event["requestContext"]
        if iam:
            context["authorizer"] = {"iam": {"userArn": "arn:aws:iam::123456789012:role/backend", "accountId": "1"}}
        elif caller is None:
            context.pop("authorizer", None)  # jwt mode: what a handler would see without a token (never, in AWS)
        else:
            scopes = [s for s in str(caller.get("scope", "")).split() if s]
            context["authorizer"] = {"jwt": {"claims": caller, "scopes": scopes or None}}
        response = load_handler(route)(event, LambdaContext(function_name=route.function))
        raw = response_body(response)
        headers = {k.lower(): str(v) for k, v in (response.get("headers") or {}).items()}
        return Reply(int(response["statusCode"]), headers, json.loads(raw) if raw else None)


def storage() -> dict[str, Any]:
    """Everything stored: the table's items and the bucket's objects (a refused request changes neither)."""
    table = boto3.client("dynamodb", region_name="us-east-1")
    items = table.scan(TableName=TABLE)["Items"]
    objects = boto3.client("s3", region_name="us-east-1").list_objects_v2(Bucket=BUCKET).get("Contents", [])
    return {
        "items": sorted(json.dumps(i, sort_keys=True) for i in items),
        "objects": sorted((o["Key"], o["ETag"]) for o in objects),
    }


@pytest.fixture
def jwt_mode(aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Iterator[Gateway]:
    monkeypatch.setenv("AUTH_MODE", "jwt")
    monkeypatch.setenv("JWT_APP_CLAIM", APP_CLAIM)
    monkeypatch.setenv("JWT_ADMIN_SCOPE", ADMIN_SCOPE)
    monkeypatch.setenv("EMBEDDER", "none")  # the dense embedder has its own tests
    monkeypatch.setenv("AUTOSAVE_POLICY", "off")
    clear_caches()
    yield Gateway()
    clear_caches()


def seed(gateway: Gateway, user: str) -> dict[str, str]:
    """A session with an event and a memory for ``user`` in APP, stored with that user's own token."""
    own = claims(user)
    created = gateway.request("POST", f"/apps/{APP}/users/{user}/sessions", caller=own, body={"session_id": "s1"})
    assert created.status == 201, created.body
    event = {"id": "e1", "author": "user", "content": {"role": "user", "parts": [{"text": f"{user} likes tea"}]}}
    appended = gateway.request("POST", f"/apps/{APP}/users/{user}/sessions/s1/events", caller=own, body=event)
    assert appended.status == 201, appended.body
    saved = gateway.request(
        "POST", f"/apps/{APP}/users/{user}/memories", caller=own, body={"memories": [{"text": f"{user} likes tea"}]}
    )
    assert saved.status == 200, saved.body
    found = gateway.request("GET", f"/apps/{APP}/users/{user}/memories/search", caller=own, query={"query": "tea"})
    assert found.status == 200 and found.body["memories"], found.body
    return {"memory_id": found.body["memories"][0]["id"]}


@dataclass(frozen=True)
class Call:
    """One request of a route, with the answer a caller allowed to make it gets."""

    method: str
    path: str  # with {app}, {user}, {memory_id}
    ok: int
    body: Any = None
    query: dict[str, str] | None = None

    @property
    def key(self) -> str:
        template = self.path.replace("{app}", "{app_name}").replace("{user}", "{user_id}")
        template = template.replace("/s1", "/{session_id}").replace("/{memory_id}", "/{memory_id}")
        template = template.replace("/events/e1", "/events/{event_id}")
        return f"{self.method} {template}"

    def concrete(self, app: str, user: str, seeded: dict[str, str]) -> str:
        return self.path.format(app=app, user=user, memory_id=seeded["memory_id"])


EVENT = {"author": "user", "content": {"role": "user", "parts": [{"text": "more tea"}]}}


def exported(state_app: dict[str, Any] | None = None) -> dict[str, Any]:
    """A small export document (``POST …/sessions/import``)."""
    return {
        "format": "agent-memory/session@1",
        "app_name": APP,
        "user_id": "x",
        "session_id": "imp1",
        "create_time": 1.0,
        "last_update_time": 2.0,
        "version": 1,
        "last_seq": 1,
        "state": {"session": {}, "user": {}, "app": state_app or {}},
        "events": [{**EVENT, "id": "e1", "timestamp": 2.0, "seq": 1}],
    }


CALLS = (
    Call("POST", "/apps/{app}/users/{user}/sessions", 201, body={"session_id": "s2"}),
    Call("GET", "/apps/{app}/users/{user}/sessions", 200),
    Call("GET", "/apps/{app}/sessions", 200),
    Call("GET", "/apps/{app}/users/{user}/state", 200),
    Call("GET", "/apps/{app}/state", 200),
    Call("GET", "/apps/{app}/users/{user}/sessions/s1", 200),
    Call("DELETE", "/apps/{app}/users/{user}/sessions/s1", 204),
    Call("GET", "/apps/{app}/users/{user}/sessions/s1/events", 200, query={"id": "e1"}),
    Call("POST", "/apps/{app}/users/{user}/sessions/s1/events", 201, body=EVENT),
    Call("DELETE", "/apps/{app}/users/{user}/sessions/s1/events/e1", 200),
    Call("DELETE", "/apps/{app}/users/{user}/sessions/s1/events", 200),
    Call("GET", "/apps/{app}/users/{user}/sessions/s1/context", 200),
    Call(
        "POST",
        "/apps/{app}/users/{user}/sessions/s1/context",
        200,
        body={"system": ["Be brief."], "memories": 2, "profile": True},
    ),
    Call("POST", "/apps/{app}/users/{user}/sessions/s1/compact", 200),
    Call("POST", "/apps/{app}/users/{user}/memories", 200, body={"memories": [{"text": "green tea"}]}),
    Call("POST", "/apps/{app}/users/{user}/memories/search", 200, body={"query": "tea"}),
    Call("GET", "/apps/{app}/users/{user}/memories/search", 200, query={"query": "tea"}),
    Call("DELETE", "/apps/{app}/users/{user}/memories/{memory_id}", 204),
    Call("DELETE", "/apps/{app}/users/{user}/memories", 204),
    Call("GET", "/apps/{app}/users/{user}/profile", 200),
    Call("GET", "/openapi.json", 200),
    Call("GET", "/apps/{app}/users/{user}/sessions/s1/export", 200),
    Call("POST", "/apps/{app}/users/{user}/sessions/import", 201, body=exported(), query={"replace": "true"}),
    Call("GET", "/apps/{app}/users/{user}/sessions/s1/memo", 200),
    Call("PUT", "/apps/{app}/users/{user}/sessions/s1/memo", 200, body={"memo": {"a": 1}}),
)
BY_KEY = {call.key: call for call in CALLS}


def test_the_matrix_covers_every_route_of_the_template() -> None:
    assert set(BY_KEY) == {r.route_key for r in TEMPLATE_ROUTES}


def _has(call: Call, part: str) -> bool:
    return part in call.path


@pytest.mark.parametrize("key", sorted(BY_KEY))
def test_jwt_every_route_for_every_kind_of_caller(jwt_mode: Gateway, key: str) -> None:
    call = BY_KEY[key]
    alice = seed(jwt_mode, "alice")
    bob = seed(jwt_mode, "bob")
    per_user = _has(call, "{user}")
    app_wide_listing = key == "GET /apps/{app_name}/sessions"

    def send(caller: dict[str, Any] | None, app: str, user: str, seeded: dict[str, str]) -> Reply:
        return jwt_mode.request(
            call.method, call.concrete(app, user, seeded), caller=caller, body=call.body, query=call.query
        )

    # Refused first, and storage must not change: no identity, another user, another app, another app's admin.
    before = storage()
    refused = {
        "no identity": (send(None, APP, "bob", bob), 401, None),
        "other user": (send(claims("alice"), APP, "bob", bob), 403 if per_user else None, "user_id"),
        "other app": (send(claims("alice"), OTHER_APP, "alice", alice), 403, "app_name"),
        "other app's admin": (send(claims("carol", app=OTHER_APP, admin=True), APP, "bob", bob), 403, "app_name"),
    }
    if not _has(call, "{app}"):  # the API's own description: any identified caller
        refused = {"no identity": refused["no identity"]}
    for kind, (reply, status, named) in refused.items():
        if status is None:  # no user in the path: "another user" is the own-user case below
            continue
        if kind == "other user" and app_wide_listing:
            continue
        assert reply.status == status, (kind, reply.body)
        assert reply.error["code"] == ("unauthorized" if status == 401 else "forbidden"), kind
        if named is not None:
            assert reply.error.get("field") == named, (kind, reply.error)
    if app_wide_listing:  # not an admin: refused even in its own app
        reply = send(claims("alice"), APP, "alice", alice)
        assert (reply.status, reply.error["code"]) == (403, "forbidden")
    assert storage() == before

    # Allowed: the own user (but not the app-wide listing), then an admin of the app on another user's data.
    if not app_wide_listing:
        own = send(claims("alice"), APP, "alice", alice)
        assert own.status == call.ok, own.body
    admin = send(claims("dave", admin=True), APP, "bob", bob)
    assert admin.status == call.ok, admin.body
    if app_wide_listing:
        assert {s["user_id"] for s in admin.body["sessions"]} == {"alice", "bob"}


def test_alice_cannot_see_bobs_data_in_any_answer(jwt_mode: Gateway) -> None:
    seed(jwt_mode, "alice")
    seed(jwt_mode, "bob")
    alice = claims("alice")
    sessions = jwt_mode.request("GET", f"/apps/{APP}/users/alice/sessions", caller=alice)
    assert [s["user_id"] for s in sessions.body["sessions"]] == ["alice"]
    found = jwt_mode.request("POST", f"/apps/{APP}/users/alice/memories/search", caller=alice, body={"query": "tea"})
    assert found.status == 200 and found.body["memories"], found.body
    assert all("bob" not in json.dumps(m) for m in found.body["memories"]), found.body


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        (
            "/sessions/s1/events",
            {**EVENT, "actions": {"state_delta": {"app:theme": "dark"}}},
            "actions.state_delta.app:theme",
        ),
        (
            "/sessions/s1/events",
            {"events": [EVENT, {**EVENT, "actions": {"stateDelta": {"app:k": 1}}}]},
            "events[1].actions.state_delta.app:k",
        ),
        ("/sessions", {"session_id": "s9", "state": {"user:x": 1, "app:x": 2}}, "state.app:x"),
        ("/sessions/import", exported({"theme": "dark"}), "state.app"),
    ],
)  # fmt: skip
def test_writing_app_state_needs_an_admin(jwt_mode: Gateway, path: str, body: Any, field: str) -> None:
    seed(jwt_mode, "alice")
    before = storage()
    refused = jwt_mode.request("POST", f"/apps/{APP}/users/alice{path}", caller=claims("alice"), body=body)
    assert refused.status == 403, refused.body
    assert refused.error == {"code": "forbidden", "message": refused.error["message"], "field": field}
    assert storage() == before
    allowed = jwt_mode.request("POST", f"/apps/{APP}/users/alice{path}", caller=claims("root", admin=True), body=body)
    assert allowed.status == 201, allowed.body
    state = jwt_mode.request("GET", f"/apps/{APP}/state", caller=claims("alice"))
    assert state.status == 200 and state.body["state"], state.body


def test_user_state_is_still_the_users_to_write(jwt_mode: Gateway) -> None:
    seed(jwt_mode, "alice")
    event = {**EVENT, "actions": {"state_delta": {"user:theme": "dark", "mood": "calm"}}}
    reply = jwt_mode.request("POST", f"/apps/{APP}/users/alice/sessions/s1/events", caller=claims("alice"), body=event)
    assert reply.status == 201, reply.body
    state = jwt_mode.request("GET", f"/apps/{APP}/users/alice/state", caller=claims("alice"))
    assert state.body["state"] == {"user:theme": "dark"}


def test_no_identity_is_a_401_asking_for_a_bearer_token(jwt_mode: Gateway) -> None:
    reply = jwt_mode.request("GET", f"/apps/{APP}/users/alice/sessions", caller=None)
    assert reply.status == 401
    assert reply.error["code"] == "unauthorized"
    assert reply.headers.get("www-authenticate") == "Bearer"
    # before anything about the request is answered: a bad body of a caller without identity is still a 401
    bad = jwt_mode.request("POST", f"/apps/{APP}/users/alice/sessions/s1/events", caller=None, body={"nope": 1})
    assert bad.status == 401


def test_another_users_bad_request_is_a_403_not_a_validation_error(jwt_mode: Gateway) -> None:
    reply = jwt_mode.request(
        "POST", f"/apps/{APP}/users/bob/sessions/s1/events", caller=claims("alice"), body={"nope": 1}
    )
    assert (reply.status, reply.error["code"]) == (403, "forbidden")


def test_a_token_without_the_user_claim_reaches_no_user(jwt_mode: Gateway) -> None:
    reply = jwt_mode.request("GET", f"/apps/{APP}/users/alice/sessions", caller=claims(None))
    assert (reply.status, reply.error["code"]) == (403, "forbidden")
    # the app's shared state needs no user
    assert jwt_mode.request("GET", f"/apps/{APP}/state", caller=claims(None)).status == 200


def test_the_user_claim_is_configurable(jwt_mode: Gateway, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JWT_USER_CLAIM", "username")
    clear_caches()
    caller = claims("8f1c-uuid", username="alice")
    assert jwt_mode.request("GET", f"/apps/{APP}/users/alice/sessions", caller=caller).status == 200
    assert jwt_mode.request("GET", f"/apps/{APP}/users/8f1c-uuid/sessions", caller=caller).status == 403


def test_without_an_app_claim_a_token_reaches_its_user_in_any_app(
    jwt_mode: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JWT_APP_CLAIM", "")
    clear_caches()
    alice = claims("alice", app="whatever")
    assert jwt_mode.request("GET", f"/apps/{OTHER_APP}/users/alice/sessions", caller=alice).status == 200
    assert jwt_mode.request("GET", f"/apps/{OTHER_APP}/users/bob/sessions", caller=alice).status == 403


@pytest.mark.parametrize("groups", ["[admins readers]", ["readers", "admins"], "admins"])
def test_an_admin_group_makes_an_admin(jwt_mode: Gateway, monkeypatch: pytest.MonkeyPatch, groups: Any) -> None:
    monkeypatch.setenv("JWT_ADMIN_GROUP", "admins")
    monkeypatch.setenv("JWT_ADMIN_SCOPE", "")  # and the scope no longer does
    clear_caches()
    grouped = claims("dave", **{"cognito:groups": groups})
    assert jwt_mode.request("GET", f"/apps/{APP}/sessions", caller=grouped).status == 200
    scoped = claims("erin", admin=True)
    assert jwt_mode.request("GET", f"/apps/{APP}/sessions", caller=scoped).status == 403
    reader = claims("frank", **{"cognito:groups": "[readers]"})
    assert jwt_mode.request("GET", f"/apps/{APP}/sessions", caller=reader).status == 403


@pytest.mark.parametrize(
    "authorizer",
    [
        {"jwt": None},
        {"jwt": {"claims": None, "scopes": None}},
        {"jwt": {"claims": {}, "scopes": None}},
        {"jwt": {"claims": "sub=alice"}},
        {"jwt": {"claims": {"sub": ["alice"]}}},
        {"jwt": {"claims": {"sub": 7, "scope": 3, "cognito:groups": {"a": 1}, APP_CLAIM: None}}},
        {"iam": {"userArn": "arn:aws:iam::123456789012:role/x"}},
        "alice",
    ],
)
def test_odd_authorizer_contexts_are_refused_never_a_5xx(jwt_mode: Gateway, authorizer: Any) -> None:
    (route,) = [r for r in TEMPLATE_ROUTES if r.route_key == "GET /apps/{app_name}/users/{user_id}/sessions"]
    path = f"/apps/{APP}/users/alice/sessions"
    event = http_api_event(route, path, {"app_name": APP, "user_id": "alice"})
    event["requestContext"]["authorizer"] = authorizer
    response = load_handler(route)(event, LambdaContext(function_name=route.function))
    assert response["statusCode"] in (401, 403), response
    assert json.loads(response_body(response))["error"]["code"] in ("unauthorized", "forbidden")


def logged(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    """The edge's log records, with the fields they carry."""
    return [{"message": r.getMessage(), **r.__dict__} for r in caplog.records if r.name == edge.logger.name]


@pytest.fixture
def info_logs() -> Iterator[None]:
    level = edge.logger.log_level
    edge.logger.setLevel("INFO")
    yield
    edge.logger.setLevel(level)


def test_every_write_is_logged_with_its_caller(
    jwt_mode: Gateway, info_logs: None, caplog: pytest.LogCaptureFixture
) -> None:
    seed(jwt_mode, "alice")
    jwt_mode.request("GET", f"/apps/{APP}/users/alice/sessions", caller=claims("alice"))
    jwt_mode.request("DELETE", f"/apps/{APP}/users/bob/memories", caller=claims("alice"))
    jwt_mode.request("DELETE", f"/apps/{APP}/users/alice/memories", caller=claims("root", admin=True))
    lines = logged(caplog)
    writes = [(r["route"], r["principal"], r["principal_admin"]) for r in lines if r.get("message") == "write"]
    assert writes == [
        ("POST /apps/{app_name}/users/{user_id}/sessions", "alice", False),
        ("POST /apps/{app_name}/users/{user_id}/sessions/{session_id}/events", "alice", False),
        ("POST /apps/{app_name}/users/{user_id}/memories", "alice", False),
        ("DELETE /apps/{app_name}/users/{user_id}/memories", "root", True),
    ]  # the reads (the list, the seed's search) are not writes; the refused forget is logged as denied
    (denied,) = [r for r in lines if r.get("message") == "request denied"]
    assert (denied["route"], denied["principal"], denied["status"]) == (
        "DELETE /apps/{app_name}/users/{user_id}/memories",
        "alice",
        403,
    )


# --- iam mode: unchanged ---------------------------------------------------------------------------------------


@pytest.fixture
def iam_mode(aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Iterator[Gateway]:
    monkeypatch.delenv("AUTH_MODE", raising=False)  # the default
    monkeypatch.setenv("EMBEDDER", "none")
    monkeypatch.setenv("AUTOSAVE_POLICY", "off")
    clear_caches()
    yield Gateway()
    clear_caches()


@pytest.mark.parametrize("key", sorted(BY_KEY))
def test_iam_every_route_serves_any_user_the_policy_let_through(iam_mode: Gateway, key: str) -> None:
    call = BY_KEY[key]
    bob = {"memory_id": "none"}
    for user in ("alice", "bob"):
        created = iam_mode.request(
            "POST", f"/apps/{APP}/users/{user}/sessions", caller=None, iam=True, body={"session_id": "s1"}
        )
        assert created.status == 201
    event = {"id": "e1", "author": "user", "content": {"role": "user", "parts": [{"text": "bob likes tea"}]}}
    appended = iam_mode.request(
        "POST", f"/apps/{APP}/users/bob/sessions/s1/events", caller=None, iam=True, body=event
    )  # an event for the delete routes
    assert appended.status == 201
    saved = iam_mode.request(
        "POST", f"/apps/{APP}/users/bob/memories", caller=None, iam=True, body={"memories": [{"text": "bob tea"}]}
    )
    assert saved.status == 200
    found = iam_mode.request(
        "GET", f"/apps/{APP}/users/bob/memories/search", caller=None, iam=True, query={"query": "tea"}
    )
    bob["memory_id"] = found.body["memories"][0]["id"]
    # IAM decided who may invoke the route; the handler serves bob's data to this backend as it always did,
    # even with a JWT-looking context on the event (never there in iam mode: nothing reads it)
    reply = iam_mode.request(
        call.method, call.concrete(APP, "bob", bob), caller=None, iam=True, body=call.body, query=call.query
    )
    assert reply.status == call.ok, reply.body
    again = iam_mode.request(
        "GET", f"/apps/{APP}/users/bob/state", caller=claims("alice"), body=None
    )  # a jwt context, ignored in iam mode
    assert again.status == 200


def test_iam_writes_are_logged_with_the_callers_arn(
    iam_mode: Gateway, info_logs: None, caplog: pytest.LogCaptureFixture
) -> None:
    reply = iam_mode.request("POST", f"/apps/{APP}/users/bob/sessions", caller=None, iam=True)
    lines = logged(caplog)
    assert reply.status == 201
    (write,) = [r for r in lines if r.get("message") == "write"]
    assert write["principal"] == "arn:aws:iam::123456789012:role/backend"
    assert (write["auth_mode"], write["app_name"], write["user_id"]) == ("iam", APP, "bob")


def _write_line(caplog: pytest.LogCaptureFixture) -> dict[str, Any]:
    """The last "write" record, as the logger writes it to the log (formatted at once: the keys are the request's)."""
    record = [r for r in caplog.records if r.name == edge.logger.name and r.getMessage() == "write"][-1]
    line: dict[str, Any] = json.loads(edge.logger.registered_formatter.format(record))
    return line


def test_a_write_line_leaves_out_what_the_log_group_already_says(
    iam_mode: Gateway, info_logs: None, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Logs are billed by the byte and an append logs one "write" line: the function's name, ARN and memory size
    # (one log group per function), the service (one for the stack), the code location and the time (CloudWatch
    # stamps every log event) are left out, and cold_start is there on a cold start only; the request's ids, the
    # route, the user and the caller stay.
    from aws_lambda_powertools.logging import logger as powertools_logger

    monkeypatch.setattr(powertools_logger, "is_cold_start", True)  # this process's next invocation is its first
    created = iam_mode.request("POST", f"/apps/{APP}/users/bob/sessions", caller=None, iam=True)
    assert created.status == 201
    cold = _write_line(caplog)
    event = {"author": "user", "content": {"role": "user", "parts": [{"text": "hello"}]}}
    session = created.body["id"]
    appended = iam_mode.request(
        "POST", f"/apps/{APP}/users/bob/sessions/{session}/events", caller=None, iam=True, body=event
    )
    assert appended.status == 201
    warm = _write_line(caplog)
    gone = set(edge.CONSTANT_LOG_KEYS)
    assert {"service", "timestamp", "location", "function_name"} <= gone
    assert not gone & set(cold) and not gone & set(warm), (cold, warm)
    assert cold["cold_start"] is True and "cold_start" not in warm
    assert cold["route"] == "POST /apps/{app_name}/users/{user_id}/sessions"
    assert warm["route"] == "POST /apps/{app_name}/users/{user_id}/sessions/{session_id}/events"
    for line in (cold, warm):
        assert line["function_request_id"] and line["correlation_id"], line
        assert (line["level"], line["message"], line["app_name"], line["user_id"]) == ("INFO", "write", APP, "bob")
        assert (line["auth_mode"], line["principal"]) == ("iam", "arn:aws:iam::123456789012:role/backend")
    assert warm["function_request_id"] != cold["function_request_id"]
    assert warm["correlation_id"] != cold["correlation_id"]


def test_an_append_logs_its_write_line_and_no_metric(
    iam_mode: Gateway, info_logs: None, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    # An append's EMF line (EventsAppended) was a third of its log bytes and no alarm reads it: an append writes
    # its "write" line only; a create still publishes SessionsCreated (the sweep's metrics, which an alarm reads:
    # tests/infra/test_template_deploy.py).
    created = iam_mode.request("POST", f"/apps/{APP}/users/bob/sessions", caller=None, iam=True)
    assert created.status == 201
    emitted = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert any("SessionsCreated" in m and "_aws" in m for m in emitted), emitted
    caplog.clear()
    event = {"author": "user", "content": {"role": "user", "parts": [{"text": "hello"}]}}
    path = f"/apps/{APP}/users/bob/sessions/{created.body['id']}/events"
    for _ in range(2):
        assert iam_mode.request("POST", path, caller=None, iam=True, body=event).status == 201
    emitted = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert not [m for m in emitted if "_aws" in m], emitted
    writes = [r for r in logged(caplog) if r["message"] == "write"]
    assert [(w["route"], w["user_id"]) for w in writes] == [
        ("POST /apps/{app_name}/users/{user_id}/sessions/{session_id}/events", "bob")
    ] * 2


def test_a_route_the_table_lacks_fails_closed(jwt_mode: Gateway) -> None:
    # API Gateway routes only the template's routes, and the route table holds them all; a path a function's
    # resolver does not know is still checked, as strictly as a user's route.
    (route,) = [r for r in TEMPLATE_ROUTES if r.route_key == "GET /apps/{app_name}/users/{user_id}/sessions"]
    for caller, status in ((claims("alice"), 403), (claims("root", admin=True), 404), (None, 401)):
        reply = jwt_mode.invoke(route, f"/apps/{APP}/users/alice/elsewhere", {"app_name": APP}, caller=caller)
        assert reply.status == status, reply.body


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
_NAMES = st.sampled_from(["alice", "bob", APP, OTHER_APP, ADMIN_SCOPE, f"openid {ADMIN_SCOPE}", "[admins]", ""])
_NOISE = st.dictionaries(
    st.sampled_from(["sub", APP_CLAIM, "scope", "scp", "cognito:groups", "username", "aud", "x"]),
    _NAMES | _JSON,
    max_size=3,
)


def _claims(sub: Any, app: Any, scope: Any, noise: dict[str, Any], noise_first: bool) -> dict[str, Any]:
    plausible = {k: v for k, v in (("sub", sub), (APP_CLAIM, app), ("scope", scope)) if v is not None}
    return noise | plausible if noise_first else plausible | noise


# Mostly plausible tokens (so that many requests are allowed and the property below has something to hold
# against), sometimes overwritten by noise of any JSON shape.
_CLAIMS = st.builds(
    _claims,
    sub=st.sampled_from(["alice", "bob", None, 7, ["alice"], ""]),
    app=st.sampled_from([APP, OTHER_APP, None, [APP]]),
    scope=st.sampled_from(["openid", f"openid {ADMIN_SCOPE}", None, [ADMIN_SCOPE], "agent-memory/admins"]),
    noise=_NOISE,
    noise_first=st.booleans(),
)


def _words(claim: Any) -> list[str]:
    if isinstance(claim, list):
        return [str(c) for c in claim]
    return str(claim).strip("[]").replace(",", " ").split() if isinstance(claim, str) else []


@settings(
    max_examples=300,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    call=st.sampled_from(CALLS),
    caller=st.none() | _CLAIMS | _NOISE,
    app=st.sampled_from([APP, OTHER_APP]),
    user=st.sampled_from(["alice", "bob"]),
)
def test_generated_callers_get_no_5xx_and_nothing_they_may_not_have(
    jwt_mode: Gateway, call: Call, caller: dict[str, Any] | None, app: str, user: str
) -> None:
    path = call.concrete(app, user, {"memory_id": "m1"})
    reply = jwt_mode.request(call.method, path, caller=caller, body=call.body, query=call.query)
    assert reply.status < 500, reply.body
    if reply.status >= 400:
        assert reply.error["code"], reply.body
        return
    assert caller, "an answer without identity"
    if "{app}" in call.path:  # the app claim binds every caller
        assert caller.get(APP_CLAIM) == app, (caller, path)
    admin = any(ADMIN_SCOPE in _words(caller.get(k)) for k in ("scope", "scp"))
    if "{user}" in call.path and not admin:
        assert caller.get("sub") == user, (caller, path)
    if call.key == "GET /apps/{app_name}/sessions":
        assert admin, caller
