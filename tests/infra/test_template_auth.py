"""template.yaml's auth modes as SAM translates them and CloudFormation then resolves them: every route's authorizer
(AWS_IAM by default, exactly as before; the JWT authorizer with AuthMode=jwt, with its issuer and audience), the
fallback for a route the DefinitionBody forgets, the rules, the functions' auth settings, route throttling, and the
principal-tag caller policy the stack outputs."""

from __future__ import annotations

import copy
import fnmatch
import json
from typing import Any

import pytest

from local.template import load_template, routes
from tests.support.cfn import ACCOUNT, REGION, Stack
from tests.support.template import deployed

TEMPLATE = load_template()
ROUTES = {(r.method.lower(), r.path) for r in routes(TEMPLATE)}
ISSUER = "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_Example"
JWT = {"AuthMode": "jwt", "JwtIssuer": ISSUER, "JwtAudience": "client-a,client-b"}
SIGV4 = {"type": "apiKey", "name": "Authorization", "in": "header", "x-amazon-apigateway-authtype": "awsSigv4"}


def api_body(stack: Stack) -> dict[str, Any]:
    (api,) = [k for k, r in stack.template["Resources"].items() if r["Type"] == "AWS::ApiGatewayV2::Api"]
    body: dict[str, Any] = stack.resource(api)["Body"]
    return body


def operations(body: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(method, path): op for path, item in body["paths"].items() for method, op in item.items()}


def test_iam_mode_is_the_default_and_guards_every_route_with_aws_iam() -> None:
    body = api_body(deployed())
    ops = operations(body)
    assert set(ops) == ROUTES
    for key, op in ops.items():
        assert op["security"] == [{"AWS_IAM": []}], key
        assert op["x-amazon-apigateway-integration"]["type"] == "aws_proxy", key
    assert body["components"]["securitySchemes"] == {"AWS_IAM": SIGV4}


def test_iam_mode_deploys_the_api_exactly_as_before_the_auth_modes() -> None:
    # The API as the template had it before AuthMode (SAM's Auth alone): with the throttles off, an existing
    # deployment that keeps AuthMode's default gets the same routes, authorizers and stage.
    before = copy.deepcopy(TEMPLATE)
    before["Resources"]["MemoryApi"]["Properties"] = {
        "Auth": {"EnableIamAuthorizer": True, "DefaultAuthorizer": "AWS_IAM"}
    }
    no_throttles = {"ThrottleRateLimit": "0", "ThrottleBurstLimit": "0"}
    old, new = deployed(no_throttles, before), deployed(no_throttles)
    assert api_body(new) == api_body(old)
    stages = [
        (k, {p: v for p, v in s.resource(k).items() if v != {}})
        for s in (old, new)
        for k, r in s.template["Resources"].items()
        if r["Type"] == "AWS::ApiGatewayV2::Stage"
    ]
    assert len(stages) == 2 and stages[0] == stages[1]
    permissions = [
        sorted(json.dumps(s.resource(k), sort_keys=True) for k, r in s.template["Resources"].items()
               if r["Type"] == "AWS::Lambda::Permission")
        for s in (old, new)
    ]  # fmt: skip
    assert permissions[0] == permissions[1] and len(permissions[0]) > len(ROUTES)  # + the schedule's


def test_jwt_mode_guards_every_route_with_the_jwt_authorizer_of_the_issuer_and_audience() -> None:
    body = api_body(deployed(JWT))
    ops = operations(body)
    assert set(ops) == ROUTES
    for key, op in ops.items():
        assert op["security"] == [{"JwtAuthorizer": []}], key
    # A token from another issuer, for another audience, expired or not yet valid never reaches a function:
    # API Gateway checks them against this configuration (and the issuer's JWKS) and answers 401 itself.
    scheme = body["components"]["securitySchemes"]["JwtAuthorizer"]
    assert scheme["type"] == "oauth2"
    authorizer = scheme["x-amazon-apigateway-authorizer"]
    assert authorizer["type"] == "jwt"
    assert authorizer["identitySource"] == "$request.header.Authorization"
    assert authorizer["jwtConfiguration"] == {"issuer": ISSUER, "audience": ["client-a", "client-b"]}


def test_a_route_the_definition_body_forgets_falls_back_to_aws_iam_never_to_no_authorizer() -> None:
    forgetful = copy.deepcopy(TEMPLATE)
    paths = forgetful["Resources"]["MemoryApi"]["Properties"]["DefinitionBody"]["paths"]
    del paths["/apps/{app_name}/sessions"]
    ops = operations(api_body(deployed(JWT, forgetful)))
    assert set(ops) == ROUTES
    assert ops[("get", "/apps/{app_name}/sessions")]["security"] == [{"AWS_IAM": []}]


def test_the_definition_body_names_exactly_the_template_routes() -> None:
    body = TEMPLATE["Resources"]["MemoryApi"]["Properties"]["DefinitionBody"]
    written = {(method, path) for path, item in body["paths"].items() for method in item}
    assert written == ROUTES


@pytest.mark.parametrize(
    ("overrides", "holds"),
    [
        ({}, True),
        (JWT, True),
        ({"AuthMode": "jwt", "JwtAudience": "client-a"}, False),
        ({"AuthMode": "jwt", "JwtIssuer": ISSUER}, False),
    ],
)
def test_jwt_mode_needs_an_issuer_and_an_audience(overrides: dict[str, str], holds: bool) -> None:
    stack = Stack(TEMPLATE, overrides)
    (rule,) = TEMPLATE["Rules"].values()
    applies = stack.resolve(rule["RuleCondition"])
    assert applies == (overrides.get("AuthMode") == "jwt")
    assert (not applies or all(stack.resolve(a["Assert"]) for a in rule["Assertions"])) == holds
    assert TEMPLATE["Parameters"]["AuthMode"]["AllowedValues"] == ["iam", "jwt"]


def test_functions_get_the_auth_settings() -> None:
    overrides = JWT | {"JwtAppClaim": "custom:app", "JwtAdminGroup": "admins", "JwtAdminScope": ""}
    variables = Stack(TEMPLATE, overrides).resolve(TEMPLATE["Globals"]["Function"]["Environment"]["Variables"])
    assert {k: v for k, v in variables.items() if k.startswith(("AUTH_", "JWT_"))} == {
        "AUTH_MODE": "jwt",
        "JWT_USER_CLAIM": "sub",
        "JWT_APP_CLAIM": "custom:app",
        "JWT_ADMIN_SCOPE": "",
        "JWT_ADMIN_GROUP": "admins",
    }
    defaults = Stack(TEMPLATE).resolve(TEMPLATE["Globals"]["Function"]["Environment"]["Variables"])
    assert defaults["AUTH_MODE"] == "iam" and defaults["JWT_ADMIN_SCOPE"] == "agent-memory/admin"


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({}, {"ThrottlingRateLimit": "100", "ThrottlingBurstLimit": "200"}),
        (
            {"ThrottleRateLimit": "25.5", "ThrottleBurstLimit": "50"},
            {"ThrottlingRateLimit": "25.5", "ThrottlingBurstLimit": "50"},
        ),
        ({"ThrottleRateLimit": "0", "ThrottleBurstLimit": "0"}, {}),
    ],
)  # fmt: skip
def test_route_throttling_is_the_stages_default_route_settings(
    overrides: dict[str, str], expected: dict[str, str]
) -> None:
    stack = deployed(overrides)
    (stage,) = [k for k, r in stack.template["Resources"].items() if r["Type"] == "AWS::ApiGatewayV2::Stage"]
    settings = stack.resource(stage)
    assert settings["StageName"] == "$default" and settings["AutoDeploy"] is True
    assert settings.get("DefaultRouteSettings", {}) == expected


# --- iam mode narrowed by principal tags ---------------------------------------------------------------------


def allows(policy: dict[str, Any], tags: dict[str, str], method: str, path: str) -> bool:
    """IAM's answer for ``execute-api:Invoke`` of ``METHOD path`` by a principal with ``tags``: policy variables
    substituted (a statement whose variable the principal lacks applies to nothing), ``*`` matching any run of
    characters, ``/`` included, as IAM's ARN matching does."""
    arn = f"arn:aws:execute-api:{REGION}:{ACCOUNT}:<MemoryApi>/$default/{method}{path}"
    for statement in policy["Statement"]:
        assert statement["Effect"] == "Allow" and statement["Action"] == "execute-api:Invoke"
        resource = statement["Resource"]
        missing = False
        for key in ("agent-memory-app", "agent-memory-user"):
            variable = "${aws:PrincipalTag/" + key + "}"
            if variable in resource:
                if key not in tags:
                    missing = True
                resource = resource.replace(variable, tags.get(key, ""))
        if not missing and fnmatch.fnmatchcase(arn, resource.replace("[", "[[]").replace("?", "[?]")):
            return True
    return False


def test_the_tagged_caller_policy_reaches_only_its_users_routes_of_its_app() -> None:
    stack = Stack(TEMPLATE)
    policy = json.loads(stack.resolve(TEMPLATE["Outputs"]["TaggedCallerPolicy"]["Value"]))
    assert policy["Version"] == "2012-10-17"
    alice = {"agent-memory-app": "demo", "agent-memory-user": "alice"}
    for method, path in sorted(ROUTES):
        concrete = (
            path.replace("{app_name}", "demo")
            .replace("{user_id}", "alice")
            .replace("{session_id}", "s1")
            .replace("{memory_id}", "m1")
        )
        user_route = "/users/{user_id}/" in path
        assert allows(policy, alice, method.upper(), concrete) == user_route, (method, path)
        assert not allows(policy, alice, method.upper(), concrete.replace("/users/alice/", "/users/bob/"))
        assert not allows(policy, alice, method.upper(), concrete.replace("/users/alice/", "/users/alice2/"))
        assert not allows(policy, alice, method.upper(), concrete.replace("/apps/demo/", "/apps/other/"))
        assert not allows(policy, {"agent-memory-app": "demo"}, method.upper(), concrete)
        assert not allows(policy, {}, method.upper(), concrete)


def test_the_security_page_shows_the_tagged_caller_policy() -> None:
    from local.template import ROOT

    page = (ROOT / "docs" / "security.md").read_text()
    assert "${aws:PrincipalTag/agent-memory-user}" in page and "${aws:PrincipalTag/agent-memory-app}" in page
    assert "TaggedCallerPolicy" in page
