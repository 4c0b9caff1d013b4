"""The contract tier: the ``store`` fixture, every SessionStore adapter over its storage, shared by the
session store's contract and the contracts of event deletion, the event tail and the events' time order."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_memory.stores.dynamo.store import DynamoSessionStore
from agent_memory.stores.inmemory import InMemorySessionStore
from agent_memory.stores.ports import SessionStore
from agent_memory.stores.s3 import S3BlobStore
from agent_memory.stores.sqlite.database import SqliteDatabase
from agent_memory.stores.sqlite.store import SqliteSessionStore
from tests.support.aws import BUCKET, TABLE


@pytest.fixture(params=["memory", "sqlite", "dynamodb"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    if request.param == "memory":
        yield InMemorySessionStore()
    elif request.param == "sqlite":
        db = SqliteDatabase(tmp_path / "agent-memory.db")
        yield SqliteSessionStore(db)
        db.close()
    else:
        aws: dict[str, Any] = request.getfixturevalue("aws")
        yield DynamoSessionStore(aws["dynamodb"], TABLE, S3BlobStore(lambda: aws["s3"], BUCKET), offload_bytes=2_000)
