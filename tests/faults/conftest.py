"""The fault tier: moto in-process with a fault injector between botocore and moto."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .injector import FaultInjector


@pytest.fixture
def faults(aws: dict[str, Any]) -> Iterator[FaultInjector]:
    injector = FaultInjector().install()
    try:
        yield injector
    finally:
        injector.uninstall()


@pytest.fixture
def real_backoff() -> None:
    """Keep botocore's waits between its retries: for the tests that measure how long a faulted request takes."""


@pytest.fixture(autouse=True)
def _no_backoff_waits(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore still retries every faulted attempt (twice, in standard mode), without waiting in between.

    Its jittered waits (up to 1 s, then up to 2 s, for each call that meets a fault) were most of this tier's
    time, and no test but the timing ones (``real_backoff``) can see them: what is retried, what the store
    does when botocore gives up, and what storage holds afterwards are the same. The stores' own backoff and
    budgets are the code under test and keep their waits.
    """
    if "real_backoff" in request.fixturenames:
        return
    from botocore.retries.standard import ExponentialBackoff

    monkeypatch.setattr(ExponentialBackoff, "delay_amount", lambda self, context: 0.0)


@pytest.fixture
def memory_write_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 3 s write budget (10 s in production): the tests that run it out stay quick, and what each fault
    leaves behind is the same (the session tier measures the real budget)."""
    monkeypatch.setattr("agent_memory.runtime.aws.WRITE_BUDGET_S", 3.0)
    monkeypatch.setattr("agent_memory.stores.dynamo.retries.WRITE_BUDGET_S", 3.0)


@pytest.fixture
def lexical_default_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lexical search (no embedder) and the default auto-save policy, for the memory fault tests."""
    monkeypatch.setenv("EMBEDDER", "none")
    monkeypatch.setenv("AUTOSAVE_POLICY", "default")
