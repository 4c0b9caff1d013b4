"""template.yaml evaluated for given parameter values: API key ARNs (SSM names with or without a leading slash,
Secrets Manager names), the customer-managed KMS key, the auto-save failure destination, the alarms, the outputs;
and samconfig.toml's deploy defaults."""

from __future__ import annotations

import fnmatch
import json
import tomllib
from typing import Any

import boto3
import pytest
from moto import mock_aws

from local.apigw import LambdaContext
from local.template import ROOT, function_events, load_handler, load_template
from tests.support.cfn import ACCOUNT, REGION, Stack

TEMPLATE = load_template()
FUNCTIONS = sorted(k for k, r in TEMPLATE["Resources"].items() if r["Type"] == "AWS::Serverless::Function")
# Compaction summarises; the memory saves extract the profile's facts with the same model.
SUMMARIZER_KEY_READERS = (
    "CompactSessionFunction",
    "CompactWorkerFunction",  # the sweep's dispatcher (CompactScheduledFunction) only lists and invokes
    "SaveMemoriesFunction",
    "AutoSaveFunction",
)
EMBEDDER_KEY_READERS = (
    "SaveMemoriesFunction",
    "SearchMemoriesFunction",
    "ForgetMemoriesFunction",
    "AutoSaveFunction",
    "GetContextFunction",  # memories=k in the context searches memory
    "DeleteEventsFunction",  # forgets the memories saved from deleted events: re-indexes, embeds
)
KMS_KEY = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
TOPIC = f"arn:aws:sns:{REGION}:{ACCOUNT}:agent-memory-alarms"


def statements(stack: Stack, function: str) -> list[dict[str, Any]]:
    """The function's inline policy statements as deployed for the stack's parameters."""
    policies = stack.resource(function)["Policies"]
    return [s for policy in policies for s in policy["Statement"]]


def granting(stack: Stack, function: str, action: str) -> list[dict[str, Any]]:
    found = []
    for statement in statements(stack, function):
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        if statement["Effect"] == "Allow" and action in actions:
            found.append(statement)
    return found


def resources(statement: dict[str, Any]) -> list[str]:
    value = statement["Resource"]
    return value if isinstance(value, list) else [value]


def parameter_arn(name: str) -> str:
    """The ARN AWS gives an SSM parameter of that name (as moto models it)."""
    with mock_aws():
        ssm = boto3.client("ssm", region_name=REGION)
        ssm.put_parameter(Name=name, Value="sk-test", Type="SecureString")
        return str(ssm.get_parameter(Name=name)["Parameter"]["ARN"])


def secret_arn(name: str) -> str:
    """The ARN AWS gives a Secrets Manager secret of that name (name, hyphen, six random characters)."""
    with mock_aws():
        return str(boto3.client("secretsmanager", region_name=REGION).create_secret(Name=name, SecretString="k")["ARN"])


# --- API key ARNs -------------------------------------------------------------------------------------------

PARAMETER_NAMES = ("/agent-memory/openai-key", "agent-memory/openai-key", "openai-key", "/openai-key")


@pytest.mark.parametrize("name", PARAMETER_NAMES)
@pytest.mark.parametrize(
    ("parameter", "readers"),
    [("SummarizerApiKeyParameter", SUMMARIZER_KEY_READERS), ("EmbedderApiKeyParameter", EMBEDDER_KEY_READERS)],
)
def test_ssm_key_parameter_arn_is_the_parameters_own(parameter: str, readers: tuple[str, ...], name: str) -> None:
    stack = Stack(TEMPLATE, {parameter: name})
    expected = parameter_arn(name)
    assert "parameter//" not in expected  # the form IAM would never match
    for function in FUNCTIONS:
        grants = granting(stack, function, "ssm:GetParameter")
        if function in readers:
            assert [resources(s) for s in grants] == [[expected]], function
        else:
            assert grants == [], f"{function} may read the key parameter {name}"


@pytest.mark.parametrize("parameter", ["SummarizerApiKeyParameter", "EmbedderApiKeyParameter"])
def test_no_ssm_grant_without_a_key_parameter(parameter: str) -> None:
    stack = Stack(TEMPLATE)
    assert stack.parameters[parameter] == ""
    assert not any(granting(stack, f, "ssm:GetParameter") for f in FUNCTIONS)


@pytest.mark.parametrize("name", ["agent-memory/openai-key", "/agent-memory/openai-key", "openai-key"])
@pytest.mark.parametrize(
    ("parameter", "readers"),
    [("SummarizerApiKeySecret", SUMMARIZER_KEY_READERS), ("EmbedderApiKeySecret", EMBEDDER_KEY_READERS)],
)
def test_secret_arn_pattern_matches_the_secret_and_no_other(
    parameter: str, readers: tuple[str, ...], name: str
) -> None:
    stack = Stack(TEMPLATE, {parameter: name})
    arn = secret_arn(name)
    other = secret_arn(f"{name}-old")  # a secret whose name starts with this one's
    for function in FUNCTIONS:
        grants = granting(stack, function, "secretsmanager:GetSecretValue")
        if function not in readers:
            assert grants == [], function
            continue
        (grant,) = grants
        (pattern,) = resources(grant)
        assert fnmatch.fnmatchcase(arn, pattern), (arn, pattern)
        assert not fnmatch.fnmatchcase(other, pattern), (other, pattern)


# --- customer-managed KMS key ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "readers"),
    [
        ({"SummarizerApiKeyParameter": "/agent-memory/openai-key"}, SUMMARIZER_KEY_READERS),
        ({"SummarizerApiKeySecret": "openai-key"}, SUMMARIZER_KEY_READERS),
        ({"EmbedderApiKeyParameter": "embed-key"}, EMBEDDER_KEY_READERS),
        ({"EmbedderApiKeySecret": "embed-key"}, EMBEDDER_KEY_READERS),
        ({}, ()),  # a KMS key but no API key to read: nobody decrypts
    ],
)
def test_kms_key_decrypts_only_for_the_functions_reading_a_key(
    overrides: dict[str, str], readers: tuple[str, ...]
) -> None:
    stack = Stack(TEMPLATE, {**overrides, "ApiKeyKmsKeyArn": KMS_KEY})
    for function in FUNCTIONS:
        grants = granting(stack, function, "kms:Decrypt")
        if function not in readers:
            assert grants == [], function
            continue
        (grant,) = grants
        assert resources(grant) == [KMS_KEY]
        # Only as SSM or Secrets Manager decrypt the key for the function, never a direct Decrypt of other data.
        assert sorted(grant["Condition"]["StringEquals"]["kms:ViaService"]) == [
            f"secretsmanager.{REGION}.amazonaws.com",
            f"ssm.{REGION}.amazonaws.com",
        ]


def test_no_kms_grant_without_a_kms_key() -> None:
    stack = Stack(TEMPLATE, {"SummarizerApiKeyParameter": "/k", "EmbedderApiKeySecret": "k"})
    assert not any(granting(stack, f, "kms:Decrypt") for f in FUNCTIONS)


# --- auto-save failures --------------------------------------------------------------------------------------


def stream_event() -> dict[str, Any]:
    (event,) = [
        e for e in TEMPLATE["Resources"]["AutoSaveFunction"]["Properties"]["Events"].values() if e["Type"] == "DynamoDB"
    ]
    properties: dict[str, Any] = Stack(TEMPLATE).resolve(event["Properties"])
    return properties


def test_failure_queue_is_encrypted_and_keeps_records_for_the_longest_time() -> None:
    queue = Stack(TEMPLATE).resource("AutoSaveFailureQueue")
    assert TEMPLATE["Resources"]["AutoSaveFailureQueue"]["Type"] == "AWS::SQS::Queue"
    assert queue["SqsManagedSseEnabled"] is True or queue.get("KmsMasterKeyId")
    assert queue["MessageRetentionPeriod"] == 14 * 24 * 3600


def test_stream_mapping_reports_failed_batches_to_the_queue_with_bounded_retries() -> None:
    event = stream_event()
    assert event["DestinationConfig"]["OnFailure"]["Destination"] == "<AutoSaveFailureQueue.Arn>"
    # Within the stream's 24 hours, so the records the failure names can still be read to redrive them.
    assert 60 <= event["MaximumRecordAgeInSeconds"] < 24 * 3600
    assert 0 <= event["MaximumRetryAttempts"] <= 10
    assert event["BisectBatchOnFunctionError"] is True
    assert event["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


def test_only_auto_save_may_send_to_the_failure_queue() -> None:
    stack = Stack(TEMPLATE)
    for function in FUNCTIONS:
        sends = [
            s
            for s in statements(stack, function)
            if any(str(a).startswith("sqs:") for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]]))
        ]
        if function == "AutoSaveFunction":
            assert sends == [{"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": "<AutoSaveFailureQueue.Arn>"}]
        else:
            assert sends == [], function


def test_failure_queue_refuses_insecure_transport() -> None:
    policies = [
        Stack(TEMPLATE).resource(name)
        for name, r in TEMPLATE["Resources"].items()
        if r["Type"] == "AWS::SQS::QueuePolicy"
    ]
    (policy,) = [p for p in policies if p["Queues"] == ["<AutoSaveFailureQueue>"]]
    (deny,) = policy["PolicyDocument"]["Statement"]
    assert deny["Effect"] == "Deny" and deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


# --- alarms ---------------------------------------------------------------------------------------------------


def alarms(overrides: dict[str, str] | None = None) -> list[dict[str, Any]]:
    stack = Stack(TEMPLATE, overrides)
    return [stack.resource(n) for n, r in TEMPLATE["Resources"].items() if r["Type"] == "AWS::CloudWatch::Alarm"]


def alarm_on(metric: str, dimensions: list[dict[str, str]], overrides: dict[str, str] | None = None) -> dict[str, Any]:
    found = [a for a in alarms(overrides) if a["MetricName"] == metric and a["Dimensions"] == dimensions]
    assert len(found) == 1, f"{len(found)} alarms on {metric} {dimensions}"
    alarm = found[0]
    # Any occurrence at all is an alarm: more than zero in a period.
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold" and alarm["Threshold"] == 0
    assert alarm["TreatMissingData"] == "notBreaching"
    return alarm


def test_alarm_when_the_failure_queue_is_not_empty() -> None:
    alarm = alarm_on(
        "ApproximateNumberOfMessagesVisible", [{"Name": "QueueName", "Value": "<AutoSaveFailureQueue.QueueName>"}]
    )
    assert alarm["Namespace"] == "AWS/SQS"


@pytest.mark.parametrize("function", FUNCTIONS)
@pytest.mark.parametrize("metric", ["Errors", "Throttles"])
def test_alarm_on_every_functions_errors_and_throttles(function: str, metric: str) -> None:
    alarm = alarm_on(metric, [{"Name": "FunctionName", "Value": f"<{function}>"}])
    assert alarm["Namespace"] == "AWS/Lambda" and alarm["Statistic"] == "Sum"


def test_alarm_on_compaction_sweep_failures_as_the_sweep_emits_them(
    aws: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    # What the sweep publishes: Embedded Metric Format on stdout, in the namespace of POWERTOOLS_METRICS_NAMESPACE
    # as the process had it when the layer was imported (tests import it under more than one environment).
    (sweep,) = function_events(TEMPLATE, "Schedule")
    assert sweep.function == "CompactScheduledFunction"
    handler = load_handler(sweep)
    capsys.readouterr()
    handler({}, LambdaContext(function_name="compact_scheduled"))
    emitted = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    metrics = [m for m in emitted if "_aws" in m and "CompactionFailures" in m]
    assert metrics, emitted
    (directive,) = metrics[-1]["_aws"]["CloudWatchMetrics"]
    namespace = directive["Namespace"]

    # Deployed with that namespace, the functions get it as POWERTOOLS_METRICS_NAMESPACE and the alarm watches it,
    # on the metric's service dimension as the functions get it.
    stack = Stack(TEMPLATE, {"MetricsNamespace": namespace})
    variables = stack.resolve(TEMPLATE["Globals"]["Function"]["Environment"]["Variables"])
    assert variables["POWERTOOLS_METRICS_NAMESPACE"] == namespace
    service = variables["POWERTOOLS_SERVICE_NAME"]
    alarm = alarm_on("CompactionFailures", [{"Name": "service", "Value": service}], {"MetricsNamespace": namespace})
    assert alarm["Namespace"] == namespace and alarm["Statistic"] == "Sum"
    assert ["service"] in directive["Dimensions"]
    assert metrics[-1]["service"] == service
    assert {"Name": "CompactionFailures", "Unit": "Count"} in directive["Metrics"]


def test_alarms_notify_the_topic_when_one_is_given() -> None:
    assert all("AlarmActions" not in a for a in alarms())
    with_topic = alarms({"AlarmTopicArn": TOPIC})
    assert with_topic and all(a["AlarmActions"] == [TOPIC] for a in with_topic)


# --- outputs and samconfig -----------------------------------------------------------------------------------


def test_outputs_name_the_api_table_bucket_and_failure_queue() -> None:
    stack = Stack(TEMPLATE)
    outputs = {name: stack.resolve(o["Value"]) for name, o in TEMPLATE["Outputs"].items()}
    assert outputs["ApiId"] == "<MemoryApi>"
    assert outputs["ApiUrl"] == f"https://<MemoryApi>.execute-api.{REGION}.amazonaws.com"
    assert outputs["TableName"] == "<MemoryTable>"
    assert outputs["BucketName"] == "<ContextBucket>"
    assert outputs["AutoSaveFailureQueueUrl"] == "<AutoSaveFailureQueue>"  # Ref of a queue is its URL
    assert outputs["CallerResourceArn"] == f"arn:aws:execute-api:{REGION}:{ACCOUNT}:<MemoryApi>/*/*/apps/*"
    assert all(str(o.get("Description", "")).strip() for o in TEMPLATE["Outputs"].values())


def test_samconfig_gives_deploy_its_recommended_answers() -> None:
    config = tomllib.loads((ROOT / "samconfig.toml").read_text())
    default = config["default"]
    assert default["global"]["parameters"]["stack_name"] == "agent-memory"
    deploy = default["deploy"]["parameters"]
    assert deploy["capabilities"] == "CAPABILITY_IAM"  # the roles SAM creates have generated names
    assert deploy["confirm_changeset"] is True
    assert deploy["resolve_s3"] is True
    # The region is the caller's (AWS_REGION or the profile's), never pinned for everyone.
    assert not any("region" in section.get("parameters", {}) for section in default.values())


def test_the_deploy_page_says_how_to_redrive_and_shows_a_caller_policy() -> None:
    page = (ROOT / "docs" / "deploy.md").read_text()
    assert "When auto-save fails" in page
    assert "AutoSaveFailureQueueUrl" in page
    assert '"execute-api:Invoke"' in page
    assert "/*/*/apps/" in page


# --- the summarizer's model -----------------------------------------------------------------------------------


@pytest.mark.parametrize("summarizer", ["bedrock", "extractive", "openai"])
def test_only_the_summarizers_users_may_invoke_a_bedrock_model_and_only_with_bedrock(summarizer: str) -> None:
    # Compaction summarises; the memory saves extract the profile's facts; nothing else calls the summarizer.
    stack = Stack(TEMPLATE, {"Summarizer": summarizer, "SummarizerModel": "m"})
    invoking = {f for f in FUNCTIONS if granting(stack, f, "bedrock:InvokeModel")}
    assert invoking == (set(SUMMARIZER_KEY_READERS) if summarizer == "bedrock" else set())
    for function in FUNCTIONS:
        env = stack.resource(function).get("Environment", {}).get("Variables", {})
        assert (env.get("SUMMARIZER") == summarizer) == (function in SUMMARIZER_KEY_READERS), function
