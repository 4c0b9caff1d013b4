"""The cached clients share one botocore session (a second client on a cold start costs a fraction of a new
session), keep their own event hooks, and are built again, from a new session, after ``reset_clients()``; building
them imports no boto3 (its resource layer is a cold start's cost that nothing here uses)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from agent_memory.runtime import aws
from tests.support.aws import count_sessions


def test_clients_of_several_services_come_from_one_session(clean_keys: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    made = count_sessions(monkeypatch)
    dynamodb, events = aws.client("dynamodb"), aws.client("events")
    model = aws._model_client("bedrock-runtime", 3, 2)
    assert len(made) == 1
    assert aws.client("dynamodb") is dynamodb
    assert {c.meta.service_model.service_name for c in (dynamodb, events, model)} == {
        "dynamodb",
        "events",
        "bedrock-runtime",
    }
    # each client's hooks are its own (tests register on one client to count its calls)
    assert events.meta.events is not dynamodb.meta.events


def test_reset_clients_starts_a_new_session(clean_keys: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    first = aws.client("dynamodb")
    aws.reset_clients()
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:2")
    made = count_sessions(monkeypatch)
    second = aws.client("dynamodb")
    assert second is not first and len(made) == 1
    assert second.meta.endpoint_url == "http://127.0.0.1:2"


def test_threads_building_clients_at_once_get_working_clients(
    clean_keys: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    built: dict[str, Any] = {}
    services = ("dynamodb", "s3", "events", "ssm", "secretsmanager", "sts")

    def build(service: str) -> None:
        built[service] = aws.client(service)

    threads = [threading.Thread(target=build, args=(s,)) for s in services]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(built) == sorted(services)
    assert all(callable(getattr(c, "close", None)) for c in built.values())


LAYER = Path(__file__).resolve().parents[2] / "layers" / "shared"


def _fresh(code: str, env: dict[str, str]) -> dict[str, Any]:
    """What a fresh interpreter with the layer first on its path prints (JSON) after running ``code``."""
    out = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path[:0] = [{str(LAYER)!r}]\n{code}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", **env},
    )
    result: dict[str, Any] = json.loads(out.stdout.splitlines()[-1])
    return result


def test_building_clients_imports_no_boto3() -> None:
    got = _fresh(
        "from agent_memory.runtime import aws\n"
        "c = aws.client('dynamodb'); s3 = aws.client('s3')\n"
        "import json; print(json.dumps({'boto3': 'boto3' in sys.modules, 'services': "
        "[c.meta.service_model.service_name, s3.meta.service_model.service_name], 'region': c.meta.region_name, "
        "'endpoint': c.meta.endpoint_url}))",
        {"AWS_DEFAULT_REGION": "eu-west-1", "AWS_ENDPOINT_URL": "http://127.0.0.1:9"},
    )
    assert got == {
        "boto3": False,
        "services": ["dynamodb", "s3"],
        "region": "eu-west-1",  # the environment's region and endpoint, as boto3's clients took them
        "endpoint": "http://127.0.0.1:9",
    }


def test_a_lambda_function_starts_numpy_with_one_blas_thread_unless_told_otherwise() -> None:
    code = "import agent_memory, json, os; print(json.dumps({'threads': os.environ.get('OPENBLAS_NUM_THREADS')}))"
    assert _fresh(code, {"AWS_LAMBDA_FUNCTION_NAME": "search"}) == {"threads": "1"}
    assert _fresh(code, {"AWS_LAMBDA_FUNCTION_NAME": "search", "OPENBLAS_NUM_THREADS": "4"}) == {"threads": "4"}
    assert _fresh(code, {}) == {"threads": None}  # tests, the local server, benchmarks: numpy as it is
