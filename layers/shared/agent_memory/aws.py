"""Cached boto3 client factories.

Clients are built on first use (not at import, which would slow every cold start and pin the endpoint) and
cached per service; ``reset_clients()`` clears the cache so tests can point them at another endpoint.
boto3 honours ``AWS_ENDPOINT_URL``, which is how ``make run`` points everything at the local moto server.
"""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def client(service: str) -> Any:
    import boto3
    from botocore.config import Config

    config = Config(retries={"mode": "standard", "max_attempts": 5}, connect_timeout=3, read_timeout=10)
    return boto3.session.Session().client(service, config=config)  # type: ignore[call-overload]


def reset_clients() -> None:
    """Forget every cached client (tests call this after changing the endpoint or credentials)."""
    client.cache_clear()
