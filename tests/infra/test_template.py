"""template.yaml as deployed: API auth, routes and handlers, least-privilege policies, storage settings, logs,
layer layout, documented parameters; and the sample events in events/ invoke the real handlers."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from local.template import ROOT, Route, load_handler, load_template, routes
from tests.support.template import check_sample_event, deployed, invoke

TEMPLATE = load_template()
RESOURCES: dict[str, Any] = TEMPLATE["Resources"]
EVENTS_DIR = ROOT / "events"

EXPECTED_ROUTES = {
    ("POST", "/apps/{app_name}/users/{user_id}/sessions"),
    ("GET", "/apps/{app_name}/users/{user_id}/sessions"),
    ("GET", "/apps/{app_name}/sessions"),
    ("GET", "/apps/{app_name}/users/{user_id}/state"),
    ("GET", "/apps/{app_name}/state"),
    ("GET", "/apps/{app_name}/users/{user_id}/sessions/{session_id}"),
    ("DELETE", "/apps/{app_name}/users/{user_id}/sessions/{session_id}"),
    ("GET", "/apps/{app_name}/users/{user_id}/sessions/{session_id}/events"),
    ("POST", "/apps/{app_name}/users/{user_id}/sessions/{session_id}/events"),
    ("DELETE", "/apps/{app_name}/users/{user_id}/sessions/{session_id}/events"),
    ("DELETE", "/apps/{app_name}/users/{user_id}/sessions/{session_id}/events/{event_id}"),
    ("GET", "/apps/{app_name}/users/{user_id}/sessions/{session_id}/context"),
    ("POST", "/apps/{app_name}/users/{user_id}/sessions/{session_id}/context"),
    ("POST", "/apps/{app_name}/users/{user_id}/sessions/{session_id}/compact"),
    ("POST", "/apps/{app_name}/users/{user_id}/memories"),
    ("POST", "/apps/{app_name}/users/{user_id}/memories/search"),
    ("GET", "/apps/{app_name}/users/{user_id}/memories/search"),
    ("DELETE", "/apps/{app_name}/users/{user_id}/memories/{memory_id}"),
    ("DELETE", "/apps/{app_name}/users/{user_id}/memories"),
    ("GET", "/apps/{app_name}/users/{user_id}/profile"),
    ("GET", "/openapi.json"),
    # export / import and the memo
    ("GET", "/apps/{app_name}/users/{user_id}/sessions/{session_id}/export"),
    ("POST", "/apps/{app_name}/users/{user_id}/sessions/import"),
    ("GET", "/apps/{app_name}/users/{user_id}/sessions/{session_id}/memo"),
    ("PUT", "/apps/{app_name}/users/{user_id}/sessions/{session_id}/memo"),
}
READ_ONLY_FUNCTIONS = ("GetSessionFunction", "ListSessionsFunction", "GetContextFunction", "SearchMemoriesFunction")
WRITE_WORDS = ("put", "update", "delete", "batchwrite", "transact")
SAMPLE_EVENTS = ("create_session", "get_session", "list_sessions", "delete_session", "append_event")


def resources_of_type(resource_type: str) -> dict[str, dict[str, Any]]:
    return {name: r for name, r in RESOURCES.items() if r["Type"] == resource_type}


FUNCTIONS = resources_of_type("AWS::Serverless::Function")


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def policy_statements(function: str) -> list[dict[str, Any]]:
    """Every inline statement of a function's Policies; any other policy form (a managed policy, a SAM policy
    template) would hide its actions from these checks, so it fails the test instead."""
    statements = []
    for policy in as_list(FUNCTIONS[function]["Properties"].get("Policies", [])):
        assert isinstance(policy, dict) and set(policy) <= {"Version", "Statement"}, (
            f"{function}: only inline Statement policies can be checked, got {policy!r}"
        )
        for statement in as_list(policy["Statement"]):
            if "Fn::If" in statement:  # a conditional grant: check both branches that grant something
                _, when_true, when_false = statement["Fn::If"]
                statements.extend(s for s in (when_true, when_false) if s != {"Ref": "AWS::NoValue"})
            else:
                statements.append(statement)
    return statements


def actions(statement: dict[str, Any]) -> list[str]:
    assert "NotAction" not in statement, "NotAction grants everything it does not name"
    return [str(a) for a in as_list(statement["Action"])]


def ref(value: Any) -> str:
    assert isinstance(value, dict) and set(value) == {"Ref"}, f"expected a !Ref, got {value!r}"
    return str(value["Ref"])


# --- API and routes -----------------------------------------------------------------------------------------


def test_http_api_requires_iam_auth() -> None:
    apis = resources_of_type("AWS::Serverless::HttpApi")
    assert list(apis) == ["MemoryApi"]
    auth = apis["MemoryApi"]["Properties"]["Auth"]
    assert auth["DefaultAuthorizer"] == "AWS_IAM"
    assert auth["EnableIamAuthorizer"] is True


def test_every_route_is_on_the_iam_api_without_an_auth_override() -> None:
    # A route without ApiId lands on SAM's implicit API, which has no authorizer.
    for name, function in FUNCTIONS.items():
        for event in function["Properties"].get("Events", {}).values():
            if event["Type"] in {"Schedule", "DynamoDB"}:  # not routes: the compaction sweep and auto-save
                assert (name, event["Type"]) in {
                    ("CompactScheduledFunction", "Schedule"),
                    ("AutoSaveFunction", "DynamoDB"),
                }
                continue
            assert event["Type"] == "HttpApi", name
            assert ref(event["Properties"].get("ApiId")) == "MemoryApi", name
            assert "Auth" not in event["Properties"], f"{name} overrides the API's IAM auth"


def test_routes_are_exactly_those_of_the_contract() -> None:
    found = [(r.method, r.path) for r in routes(TEMPLATE)]
    assert len(found) == len(set(found)), f"duplicate routes: {found}"
    assert set(found) == EXPECTED_ROUTES


@pytest.mark.parametrize("route", routes(TEMPLATE), ids=lambda r: r.route_key)
def test_route_handler_exists_and_is_callable(route: Route) -> None:
    code_dir = ROOT / route.code_uri
    assert code_dir.is_dir(), f"{route.function}: CodeUri {route.code_uri} does not exist"
    assert route.handler == "app.lambda_handler"
    assert (code_dir / "app.py").is_file()
    handler = load_handler(route)
    assert callable(handler)


# --- least privilege ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("function", READ_ONLY_FUNCTIONS)
def test_read_only_functions_cannot_write(function: str) -> None:
    statements = policy_statements(function)
    assert statements, f"{function} has no policy statements"
    for statement in statements:
        for action in actions(statement):
            assert not any(word in action.lower() for word in WRITE_WORDS), f"{function} may write: {action}"


@pytest.mark.parametrize("function", sorted(FUNCTIONS))
def test_function_policies_have_no_wildcard_actions_or_resources(function: str) -> None:
    statements = policy_statements(function)
    assert statements, f"{function} has no policy statements"
    for statement in statements:
        for action in actions(statement):
            assert action != "*" and not action.endswith(":*"), f"{function}: wildcard action {action}"
        assert "NotResource" not in statement
        for resource in as_list(statement["Resource"]):
            assert resource != "*", f"{function}: Resource '*'"


# --- storage ------------------------------------------------------------------------------------------------


def test_table_settings() -> None:
    table = RESOURCES["MemoryTable"]
    assert table["Type"] == "AWS::DynamoDB::Table"
    props = table["Properties"]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    assert props["SSESpecification"]["SSEEnabled"] is True
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    assert props["StreamSpecification"]["StreamViewType"]
    assert {i["IndexName"] for i in props["LocalSecondaryIndexes"]} == {"by_seq", "by_ts"}


def test_bucket_settings() -> None:
    bucket = RESOURCES["ContextBucket"]
    assert bucket["Type"] == "AWS::S3::Bucket"
    props = bucket["Properties"]
    rules = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rules and all(r["ServerSideEncryptionByDefault"]["SSEAlgorithm"] for r in rules)
    assert props["VersioningConfiguration"]["Status"] == "Enabled"
    block = props["PublicAccessBlockConfiguration"]
    flags = ("BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets")
    assert {flag: block.get(flag) for flag in flags} == dict.fromkeys(flags, True)
    lifecycle = props["LifecycleConfiguration"]["Rules"]
    assert any(r.get("Status") == "Enabled" and "NoncurrentVersionExpiration" in r for r in lifecycle)


def test_staged_session_payloads_expire_by_lifecycle() -> None:
    from agent_memory.stores.s3 import STAGED_TAG

    rules = RESOURCES["ContextBucket"]["Properties"]["LifecycleConfiguration"]["Rules"]
    (rule,) = [r for r in rules if r.get("TagFilters")]
    assert rule["Status"] == "Enabled" and rule["Prefix"] == "sessions/" and rule["ExpirationInDays"] >= 1
    assert rule["TagFilters"] == [{"Key": STAGED_TAG, "Value": "true"}]


def test_bucket_policy_denies_insecure_transport() -> None:
    bucket_policies = resources_of_type("AWS::S3::BucketPolicy").values()
    policies = [p for p in bucket_policies if ref(p["Properties"]["Bucket"]) == "ContextBucket"]
    assert len(policies) == 1
    statements = as_list(policies[0]["Properties"]["PolicyDocument"]["Statement"])
    denies = [
        s
        for s in statements
        if s["Effect"] == "Deny"
        and str(s.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport")).lower() == "false"
    ]
    assert denies, "no statement denies requests without TLS"
    resources = [json.dumps(r) for s in denies for r in as_list(s["Resource"])]
    assert any("/*" in r for r in resources), "the deny must cover the bucket's objects"


# --- logs, globals, layer -----------------------------------------------------------------------------------


@pytest.mark.parametrize("function", sorted(FUNCTIONS))
def test_function_logs_to_a_log_group_with_retention(function: str) -> None:
    log_group = ref(FUNCTIONS[function]["Properties"]["LoggingConfig"]["LogGroup"])
    assert RESOURCES[log_group]["Type"] == "AWS::Logs::LogGroup"
    assert RESOURCES[log_group]["Properties"]["RetentionInDays"]


@pytest.mark.parametrize("level", ["DEBUG", "INFO", "WARNING", "ERROR"])
def test_log_format_drops_the_platform_lines_but_never_the_metrics(level: str) -> None:
    # As deployed (SAM merges the Globals' LoggingConfig into each function's): at DEBUG and INFO the JSON format,
    # the platform's START/END/REPORT lines left out (SystemLogLevel WARN) and Lambda's filter at LogLevel, which
    # an EMF metric line (no "level", so INFO) passes; at WARNING and ERROR that filter would drop the metrics, so
    # the Text format, which filters nothing.
    stack = deployed({"LogLevel": level})
    functions = [k for k, r in stack.template["Resources"].items() if r["Type"] == "AWS::Lambda::Function"]
    assert len(functions) == len(FUNCTIONS)
    for function in functions:
        config = stack.resource(function)["LoggingConfig"]
        assert config["LogGroup"].startswith("<"), function  # the function's own group is kept
        if level in {"DEBUG", "INFO"}:
            assert (config["LogFormat"], config["ApplicationLogLevel"], config["SystemLogLevel"]) == (
                "JSON",
                level,
                "WARN",
            ), function
        else:
            assert config["LogFormat"] == "Text" and "ApplicationLogLevel" not in config, function
            assert "SystemLogLevel" not in config, function


def test_globals() -> None:
    function = TEMPLATE["Globals"]["Function"]
    assert function["Runtime"] == "python3.13"
    assert function["Architectures"] == ["arm64"]
    variables = function["Environment"]["Variables"]
    for name in ("POWERTOOLS_SERVICE_NAME", "POWERTOOLS_METRICS_NAMESPACE", "POWERTOOLS_LOG_LEVEL"):
        assert variables.get(name), f"Globals lack {name}"
    for name, resource in FUNCTIONS.items():
        props = resource["Properties"]
        assert props.get("Runtime", "python3.13") == "python3.13", name
        assert props.get("Architectures", ["arm64"]) == ["arm64"], name


def test_layer_build_and_layout() -> None:
    layers = resources_of_type("AWS::Serverless::LayerVersion")
    assert list(layers) == ["SharedLayer"]
    layer = layers["SharedLayer"]
    assert layer["Metadata"]["BuildMethod"] == "makefile"
    assert layer["Properties"]["ContentUri"] == "layers/shared/"
    content = ROOT / "layers" / "shared"
    assert (content / "requirements.txt").is_file()
    assert (content / "agent_memory" / "__init__.py").is_file()
    # The Makefile installs into python/ itself; a source python/ dir would nest it.
    assert not (content / "python").exists()
    assert {"Ref": "SharedLayer"} in TEMPLATE["Globals"]["Function"]["Layers"]


def test_the_layer_recipe_builds_for_the_functions_runtime_and_architecture() -> None:
    # What `sam build` runs (make build-SharedLayer), dry: wheels for the functions' Python and CPU only.
    globals_ = TEMPLATE["Globals"]["Function"]
    layer = resources_of_type("AWS::Serverless::LayerVersion")["SharedLayer"]
    assert layer["Metadata"]["BuildArchitecture"] == "arm64" and globals_["Architectures"] == ["arm64"]
    assert layer["Properties"]["CompatibleRuntimes"] == [globals_["Runtime"]]
    version = globals_["Runtime"].removeprefix("python")
    recipe = subprocess.run(
        ["make", "--no-print-directory", "-n", "-C", "layers/shared", "build-SharedLayer", "ARTIFACTS_DIR=/tmp/x"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    install = next(line for line in recipe.splitlines() if "pip install" in line)
    for flag in ("--no-deps", "--only-binary=:all:", f"--python-version {version}", "--implementation cp"):
        assert flag in install
    platforms = re.findall(r"--platform (\S+)", install)
    # Amazon Linux 2023 has glibc 2.34: every manylinux tag up to it, for aarch64 only.
    assert "manylinux_2_17_aarch64" in platforms and "manylinux_2_34_aarch64" in platforms
    assert all(p.endswith("_aarch64") for p in platforms) and "manylinux_2_35_aarch64" not in platforms
    # pip and compileall run on the runtime's Python: bytecode is per version.
    assert recipe.split("pip install")[0].strip().endswith(f"python{version} -m")


# --- parameters ---------------------------------------------------------------------------------------------


def test_every_parameter_has_a_description() -> None:
    parameters = TEMPLATE["Parameters"]
    assert parameters
    for name, parameter in parameters.items():
        assert str(parameter.get("Description", "")).strip(), f"parameter {name} has no Description"


def test_the_docs_document_every_parameter() -> None:
    page = ROOT / "docs" / "configuration.md"
    assert page.is_file(), "docs/configuration.md is missing; it must document every template parameter"
    text = page.read_text()
    missing = [name for name in TEMPLATE["Parameters"] if f"| `{name}` |" not in text]
    assert not missing, f"docs/configuration.md has no row for parameters {missing}"


# --- sample events ------------------------------------------------------------------------------------------


@pytest.fixture
def session(aws: dict[str, Any]) -> Iterator[dict[str, Any]]:
    status, body = invoke("create_session")
    assert status == 201, body
    yield body


@pytest.mark.parametrize("name", SAMPLE_EVENTS)
def test_sample_event_matches_a_template_route(name: str) -> None:
    check_sample_event(name)


def test_create_session_event(aws: dict[str, Any]) -> None:
    status, body = invoke("create_session")
    assert status == 201
    assert body["id"] == "s1" and body["app_name"] == "demo" and body["user_id"] == "alice"
    assert body["state"] == {"user:name": "Alice"} and body["created"] is True


def test_append_event_event(session: dict[str, Any]) -> None:
    status, body = invoke("append_event")
    assert status == 201
    assert body["author"] == "user" and body["seq"] == 1
    assert body["content"]["role"] == "user" and body["content"]["parts"][0]["text"]
    assert body["actions"]["state_delta"] == {"topic": "travel"}


def test_get_session_event(session: dict[str, Any]) -> None:
    _, appended = invoke("append_event")
    status, body = invoke("get_session")
    assert status == 200
    assert body["id"] == "s1"
    assert body["events"] == [appended]
    assert body["state"] == {"user:name": "Alice", "topic": "travel"}


def test_list_sessions_event(session: dict[str, Any]) -> None:
    status, body = invoke("list_sessions")
    assert status == 200
    assert [s["id"] for s in body["sessions"]] == ["s1"]


def test_delete_session_event(session: dict[str, Any]) -> None:
    status, body = invoke("delete_session")
    assert status == 204 and body is None
    status, body = invoke("get_session")
    assert status == 404, body


@pytest.mark.parametrize("function", ["SaveMemoriesFunction", "AutoSaveFunction"])
def test_memory_saves_read_the_forgotten_marks_and_write_no_table_item(function: str) -> None:
    """A save reads the marks of forgotten events (BatchGetItem on ``M#…`` items) and writes nothing to the table
    (docs/design.md, "Forgotten events"); only forgetting and deleting write the marks."""
    dynamodb = [a for s in policy_statements(function) for a in actions(s) if a.startswith("dynamodb:")]
    assert "dynamodb:BatchGetItem" in dynamodb
    assert not [a for a in dynamodb if any(word in a.lower() for word in WRITE_WORDS)], dynamodb
