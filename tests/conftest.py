"""Shared fixtures: AWS (moto, in-process) provisioned from template.yaml, and clean caches per test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

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
    monkeypatch.setenv("TABLE_NAME", TABLE)
    monkeypatch.setenv("BUCKET_NAME", BUCKET)
    monkeypatch.setenv("EVENT_BUS_NAME", "default")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "agent-memory")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "AgentMemoryTest")
    monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", "WARNING")
    _clear_caches()


def _clear_caches() -> None:
    from agent_memory.aws import reset_clients
    from agent_memory.config import settings
    from agent_memory.service.sessions import default_session_service

    reset_clients()
    settings.cache_clear()
    default_session_service.cache_clear()


@pytest.fixture
def aws() -> Iterator[dict[str, Any]]:
    """moto in-process with the template's table and bucket; yields the clients the code under test uses."""
    from moto import mock_aws
    from moto.core.botocore_stubber import BotocoreStubber

    from agent_memory.aws import client
    from local.moto_backend import MOTO_LOCK
    from local.template import load_template, provision

    # moto is not thread-safe; apply one request at a time, as the local server does (local/moto_backend.py).
    original = BotocoreStubber.process_request

    def serialized(self: Any, request: Any) -> Any:
        with MOTO_LOCK:
            return original(self, request)

    with mock_aws(), pytest.MonkeyPatch.context() as patch:
        patch.setattr(BotocoreStubber, "process_request", serialized)
        _clear_caches()
        provision(load_template(), client("dynamodb"), client("s3"), TABLE, BUCKET)
        yield {"dynamodb": client("dynamodb"), "s3": client("s3"), "events": client("events")}
        _clear_caches()


class RequestCounter:
    """Counts AWS API calls per service and operation through a botocore event hook."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def __call__(self, model: Any, **_: Any) -> None:
        self.calls.append((model.service_model.service_name, model.name))

    def attach(self, *clients: Any) -> RequestCounter:
        for c in clients:
            c.meta.events.register("before-call.*.*", self)
        return self

    def count(self, service: str | None = None, operation: str | None = None) -> int:
        return sum(
            1 for s, o in self.calls if (service is None or s == service) and (operation is None or o == operation)
        )

    def reset(self) -> None:
        self.calls.clear()


@pytest.fixture
def counter(aws: dict[str, Any]) -> RequestCounter:
    return RequestCounter().attach(aws["dynamodb"], aws["s3"], aws["events"])
