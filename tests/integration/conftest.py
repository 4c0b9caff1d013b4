"""Integration tier: requests become API Gateway HTTP API events routed by template.yaml to the real handlers
(``tests/support/api.py``), against DynamoDB, S3 and EventBridge in moto."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.api import Api


@pytest.fixture
def api(aws: dict[str, Any]) -> Api:
    return Api()


@pytest.fixture
def small_compaction_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """A session is due for compaction every 3 invocations, keeping 2 raw events, whatever its tokens: for the
    context routes' tests (``pytestmark`` in test_context_api.py and test_context_window_reads.py)."""
    monkeypatch.setenv("COMPACTION_INTERVAL", "3")
    monkeypatch.setenv("EVENT_RETENTION_SIZE", "2")
    monkeypatch.setenv("TOKEN_THRESHOLD", "100000")
