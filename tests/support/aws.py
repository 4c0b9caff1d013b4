"""The test AWS account: the table and bucket names the template is provisioned under, its caches, and threads
that race as Lambda containers do."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import botocore.session
import pytest

TABLE = "agent-memory-test"
BUCKET = "agent-memory-test-context"


def race(*targets: Callable[[], None]) -> None:
    """Run ``targets`` at once, each on its own thread (as Lambda containers, or the local server's request threads,
    run: with no lock between them); a thread's failure fails the caller."""
    errors: list[BaseException] = []

    def guarded(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:  # reported below: a thread's failure must fail the test
                errors.append(exc)

        return run

    threads = [threading.Thread(target=guarded(fn)) for fn in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def clear_caches() -> None:
    from agent_memory.composition import services
    from agent_memory.config import settings
    from agent_memory.providers.summarizers import clear_api_key_cache
    from agent_memory.runtime.aws import reset_clients

    reset_clients()
    settings.cache_clear()
    clear_api_key_cache()
    services.cache_clear()


def count_sessions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that grows by one for every botocore session made from now on."""
    made: list[int] = []
    init = botocore.session.Session.__init__

    def counting(self: Any, *args: Any, **kwargs: Any) -> None:
        made.append(1)
        init(self, *args, **kwargs)

    monkeypatch.setattr(botocore.session.Session, "__init__", counting)
    return made
