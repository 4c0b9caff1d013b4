"""A deletion racing a save leaves the deleted text nowhere, on every memory store: the deletion's forget (marks,
fence, merge) lands after the save checked the marks and before it writes, the interleaving that kept a deleted turn
searchable (the save wrote over a view the forget never changed, since nothing was held yet to merge away)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_memory.policy.state import ScopedDelta
from agent_memory.search import Doc, SearchIndex
from agent_memory.service.memories import MemoryService
from agent_memory.stores.inmemory import InMemoryClaimStore, InMemoryMemoryStore, InMemorySessionStore
from agent_memory.stores.ports import MemoryRecord, MemoryStore, NewEvent, SessionKey, SessionRecord
from agent_memory.stores.s3_memories import S3MemoryStore
from agent_memory.stores.sqlite.memories import SqliteMemoryStore
from tests.support.aws import BUCKET

APP, USER, SESSION = "app", "alice", "s1"
KEY = SessionKey(APP, USER, SESSION)
SECRET = "I am allergic to TOK"


def build(records: list[MemoryRecord]) -> SearchIndex:
    return SearchIndex.build([Doc(id=r.id, text=r.text, context=r.context) for r in records], None)


@pytest.fixture(params=["s3", "sqlite", "memory"])
def memories(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryStore]:
    if request.param == "memory":
        yield InMemoryMemoryStore(build, SearchIndex.combine)
    elif request.param == "sqlite":
        store = SqliteMemoryStore(tmp_path / "memory.db", build, SearchIndex.from_bytes, SearchIndex.combine)
        yield store
        store.close()
    else:
        aws: dict[str, Any] = request.getfixturevalue("aws")
        yield S3MemoryStore(lambda: aws["s3"], BUCKET, build, SearchIndex.from_bytes, SearchIndex.combine)


class DeleteMidSave:
    """The memory store, with the deletion of the secret turn run once from inside the save: after the save's
    ``prepare`` read the forgotten marks (unset), before its write. On the in-memory store a save prepares and
    writes under one lock, so the deletion runs just before the save instead (nothing else can happen there)."""

    def __init__(self, store: MemoryStore, service: Any) -> None:
        self.store = store
        self.service = service
        self.deleted = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def add(self, app_name: str, user_id: str, records: list[MemoryRecord], prepare: Any = None) -> list[str]:
        if isinstance(self.store, InMemoryMemoryStore):
            self._delete()
            return self.store.add(app_name, user_id, records, prepare)

        def prepared(held: Any) -> list[MemoryRecord]:
            chosen = prepare(held)
            self._delete()
            return chosen

        return self.store.add(app_name, user_id, records, prepared)

    def _delete(self) -> None:
        if not self.deleted:
            self.deleted = True
            self.service().forget_events(KEY, ["secret"])


def test_a_delete_landing_inside_a_save_leaves_its_text_nowhere(memories: MemoryStore) -> None:
    sessions = InMemorySessionStore()
    sessions.create_session(SessionRecord(APP, USER, SESSION, 1000.0, 1000.0), ScopedDelta())
    turns = [("secret", SECRET), ("t2", "I live in Porto"), ("t3", "I like quiet hotels")]
    events = [
        NewEvent(i, 1000.0 + n, {"id": i, "author": "user", "timestamp": 1000.0 + n,
                                 "content": {"role": "user", "parts": [{"text": text}]}}, ScopedDelta())
        for n, (i, text) in enumerate(turns)
    ]  # fmt: skip
    sessions.append_events(KEY, events, None)
    services: list[MemoryService] = []
    racing = DeleteMidSave(memories, lambda: services[0])
    service = MemoryService(sessions, racing, InMemoryClaimStore(), lambda *_: [])
    services.append(service)

    service.save_session(app_name=APP, user_id=USER, session_id=SESSION, policy="all")

    assert racing.deleted
    held = memories.view(APP, USER).records
    assert all(SECRET not in r.text for r in held.values())
    assert sorted(r.text for r in held.values()) == ["I like quiet hotels", "I live in Porto"]
    # Saved again later (auto-save redelivers the turn, or the client asks again): still forgotten.
    service.save_session(app_name=APP, user_id=USER, session_id=SESSION, policy="all")
    assert all(SECRET not in r.text for r in memories.view(APP, USER).records.values())
