"""Shared fixtures: AWS (moto, in-process) provisioned from template.yaml, and clean caches per test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from bench.aws_counter import RequestCounter

TABLE = "agent-memory-test"
BUCKET = "agent-memory-test-context"


@pytest.fixture(autouse=True)
def _aws_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test can reach a real AWS account: fake credentials, a fixed region, the test table and bucket."""
    for var in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("BACKEND", "aws")  # the handlers in-process run the AWS adapters (against moto)
    monkeypatch.delenv("DATA_DIR", raising=False)
    monkeypatch.setenv("TABLE_NAME", TABLE)
    monkeypatch.setenv("BUCKET_NAME", BUCKET)
    monkeypatch.setenv("EVENT_BUS_NAME", "default")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "agent-memory")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "AgentMemoryTest")
    monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", "WARNING")
    _clear_caches()


def _clear_caches() -> None:
    from agent_memory.aws import reset_clients
    from agent_memory.composition import services
    from agent_memory.config import settings
    from agent_memory.providers.summarizers import clear_api_key_cache

    reset_clients()
    settings.cache_clear()
    clear_api_key_cache()
    services.cache_clear()


@pytest.fixture
def aws() -> Iterator[dict[str, Any]]:
    """moto in-process with the template's table and bucket; yields the clients the code under test uses."""
    from local.inprocess import in_process_aws

    _clear_caches()
    with in_process_aws(TABLE, BUCKET) as clients:
        yield clients
    _clear_caches()


@pytest.fixture
def counter(aws: dict[str, Any]) -> RequestCounter:
    return RequestCounter().attach(aws["dynamodb"], aws["s3"], aws["events"])
