"""Shared fixtures: AWS (moto, in-process) provisioned from template.yaml, and clean caches per test."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import pytest

from agent_memory import composition
from bench.support.aws_counter import RequestCounter
from tests.support.aws import BUCKET, TABLE, clear_caches

# A test process imports the search handler many times over (a cold search function's init pauses the garbage
# collector until its first search, then freezes what is alive): not here. tests/unit/test_cold_gc.py tests it.
composition._cold_gc.pause = lambda: None  # type: ignore[method-assign]


@pytest.fixture(scope="session", autouse=True)
def _shared_botocore_data() -> Iterator[None]:
    """One loader of botocore's data files (service models, endpoints, partitions) for every session of the run.

    Each test builds its clients afresh (new sessions: their own retry quotas, hooks and credentials), and each
    new session read and parsed those JSON files again: about 0.4 s per test for three clients. The files are
    the same for the whole run, and one session shares its loader across all its clients in production too.
    """
    import botocore.loaders
    import botocore.session

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(botocore.session, "create_loader", functools.cache(botocore.loaders.create_loader))
        yield


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
    clear_caches()


@pytest.fixture(scope="session")
def _one_kms_key_pair() -> Iterator[None]:
    """moto generates a 2048-bit RSA key pair for every KMS key, even a symmetric one, and creating the template's
    encrypted table creates DynamoDB's default KMS key: 50-100 ms of every test's setup, for key material no
    test reads. The run's KMS keys share one key pair per key spec; every table is still created encrypted."""
    import moto.kms.models

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(moto.kms.models, "generate_private_key", functools.cache(moto.kms.models.generate_private_key))
        yield


@pytest.fixture
def aws(_one_kms_key_pair: None) -> Iterator[dict[str, Any]]:
    """moto in-process with the template's table and bucket; yields the clients the code under test uses.

    A fresh moto per test (starting one costs about 10 ms): each test sees an AWS account holding only the
    template's empty table and bucket, and builds its own clients."""
    from local.inprocess import in_process_aws

    clear_caches()
    with in_process_aws(TABLE, BUCKET) as clients:
        yield clients
    clear_caches()


@pytest.fixture
def counter(aws: dict[str, Any]) -> RequestCounter:
    return RequestCounter().attach(aws["dynamodb"], aws["s3"], aws["events"])


@pytest.fixture
def parts_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every memory save writes a part (none keeps its records inline in the manifest): for the tests of what
    happens to parts (their faults, merges, orphans); the inline path has tests of its own."""
    monkeypatch.setattr("agent_memory.stores.s3_memories.INLINE_MAX_BYTES", 0)
