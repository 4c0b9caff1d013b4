"""moto in-process, provisioned from template.yaml: for the integration tests and the benchmarks."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from .moto_backend import MOTO_LOCK, install_transaction_applier
from .template import load_template, provision


@contextlib.contextmanager
def in_process_aws(table: str, bucket: str) -> Iterator[dict[str, Any]]:
    """Start moto in this process, create the template's table and bucket, and yield the service's clients.

    The caller sets credentials, region, TABLE_NAME and BUCKET_NAME. moto is not thread-safe, so requests are
    applied one at a time (as DynamoDB applies each request atomically); concurrent clients still interleave
    between requests. Transactions are applied as the local server applies them (``moto_backend``).
    """
    from moto import mock_aws
    from moto.core.botocore_stubber import BotocoreStubber

    from agent_memory.runtime.aws import client, reset_clients

    original = BotocoreStubber.process_request

    def serialized(self: Any, request: Any) -> Any:
        with MOTO_LOCK:
            return original(self, request)

    install_transaction_applier()
    with mock_aws():
        BotocoreStubber.process_request = serialized  # type: ignore[method-assign]
        try:
            reset_clients()
            provision(load_template(), client("dynamodb"), client("s3"), table, bucket)
            yield {"dynamodb": client("dynamodb"), "s3": client("s3"), "events": client("events")}
        finally:
            BotocoreStubber.process_request = original  # type: ignore[method-assign]
            reset_clients()
