"""MemoryService.profile over the in-memory adapters: facts extracted on every save path, stored with the record,
aggregated on read, and gone with the memory they came from."""

from __future__ import annotations

from typing import Any

import pytest

from agent_memory.edge.requests import MemoryText
from agent_memory.models import Event
from agent_memory.policy.state import ScopedDelta
from agent_memory.search import Doc, SearchIndex
from agent_memory.service.memories import MemoryService, event_memory_id, text_memory_id
from agent_memory.stores.inmemory import InMemoryClaimStore, InMemoryMemoryStore, InMemorySessionStore
from agent_memory.stores.ports import MemoryRecord, NewEvent, SessionKey, SessionRecord

KEY = SessionKey("app", "alice", "s1")


def build(records: list[MemoryRecord]) -> SearchIndex:
    return SearchIndex.build([Doc(r.id, f"{r.author}: {r.text}", r.context) for r in records], None)


class Extractor:
    """A fact extractor that records what it was asked and may fail."""

    name = "fake"

    def __init__(self, fail: BaseException | None = None) -> None:
        self.calls: list[list[str]] = []
        self.fail = fail

    def extract(self, texts: list[str]) -> list[list[dict[str, str]]]:
        self.calls.append(list(texts))
        if self.fail is not None:
            raise self.fail
        return [[{"category": "other", "text": f"said {t}"}] for t in texts]


def service(memories: InMemoryMemoryStore, sessions: InMemorySessionStore | None = None, **kw: Any) -> MemoryService:
    return MemoryService(
        sessions or InMemorySessionStore(),
        memories,
        InMemoryClaimStore(),
        lambda index, q, k, cut: index.search(q, k, min_score=cut),
        clock=lambda: 1000.0,
        **kw,
    )


@pytest.fixture
def memories() -> InMemoryMemoryStore:
    return InMemoryMemoryStore(build, SearchIndex.combine)


def add(svc: MemoryService, *items: tuple[str, float]) -> dict[str, int]:
    return svc.add_texts(
        app_name="app", user_id="alice", memories=[MemoryText(text=t, timestamp=ts) for t, ts in items]
    )


def texts(profile: dict[str, Any]) -> list[str]:
    return [f["text"] for f in profile["facts"]]


def text_event(i: int, author: str, text: str) -> dict[str, Any]:
    role = "user" if author == "user" else "model"
    return {
        "id": f"e{i}",
        "author": author,
        "timestamp": 2000.0 + i,
        "content": {"role": role, "parts": [{"text": text}]},
    }


def test_saved_texts_carry_their_facts_and_the_profile_aggregates_them(memories: InMemoryMemoryStore) -> None:
    svc = service(memories)
    add(svc, ("My name is Bob. I love sushi", 10.0), ("I'm allergic to nuts. I hate sushi now", 20.0))
    add(svc, ("I'm allergic to nuts", 30.0))
    stored = memories.view("app", "alice").records
    assert stored[text_memory_id("I'm allergic to nuts")].facts == [{"category": "allergy", "text": "Allergic to nuts"}]
    profile = svc.profile("app", "alice")
    assert profile["app_name"] == "app" and profile["user_id"] == "alice" and profile["memory_count"] == 3
    assert profile["facts"] == [
        {
            "category": "name",
            "text": "Name: Bob",
            "memory_ids": [text_memory_id("My name is Bob. I love sushi")],
            "updated_at": "1970-01-01T00:00:10Z",
        },
        {
            "category": "allergy",
            "text": "Allergic to nuts",
            "memory_ids": sorted(
                [text_memory_id("I'm allergic to nuts. I hate sushi now"), text_memory_id("I'm allergic to nuts")]
            ),
            "updated_at": "1970-01-01T00:00:30Z",
        },
        {
            "category": "dislike",
            "text": "Dislikes sushi",
            "memory_ids": [text_memory_id("I'm allergic to nuts. I hate sushi now")],
            "updated_at": "1970-01-01T00:00:20Z",
        },
    ]


def test_a_forgotten_memorys_facts_leave_the_profile_at_once(memories: InMemoryMemoryStore) -> None:
    svc = service(memories)
    add(svc, ("I'm allergic to nuts", 10.0), ("I am allergic to nuts and I live in Porto", 20.0))
    svc.forget("app", "alice", text_memory_id("I am allergic to nuts and I live in Porto"))
    profile = svc.profile("app", "alice")
    assert texts(profile) == ["Allergic to nuts"] and profile["memory_count"] == 1
    assert profile["facts"][0]["memory_ids"] == [text_memory_id("I'm allergic to nuts")]
    svc.forget_all("app", "alice")
    assert svc.profile("app", "alice") == {"app_name": "app", "user_id": "alice", "facts": [], "memory_count": 0}


def test_session_events_explicit_events_and_only_the_users_words(memories: InMemoryMemoryStore) -> None:
    sessions = InMemorySessionStore()
    svc = service(memories, sessions)
    sessions.create_session(SessionRecord("app", "alice", "s1", 1000.0, 1000.0), ScopedDelta())
    events = [
        text_event(1, "user", "I live in Lisbon"),
        text_event(2, "assistant", "I love Lisbon too! My name is Bot"),
    ]
    sessions.append_events(KEY, [NewEvent(e["id"], e["timestamp"], e, ScopedDelta()) for e in events], None)
    assert svc.save_session(app_name="app", user_id="alice", session_id="s1", policy="all")["saved"] == 2
    stored = memories.view("app", "alice").records
    assert stored[event_memory_id("s1", "e1")].facts == [{"category": "place", "text": "Lives in Lisbon"}]
    assert stored[event_memory_id("s1", "e2")].facts == []  # the assistant's words are not the user's profile
    svc.add_events(app_name="app", user_id="alice", events=[Event.model_validate(text_event(3, "user", "I'm vegan"))])
    assert texts(svc.profile("app", "alice")) == ["Vegan", "Lives in Lisbon"]


def test_records_saved_before_facts_existed_are_extracted_on_read(memories: InMemoryMemoryStore) -> None:
    old = MemoryRecord(id="t-old", text="My sister Ana lives here. I'm a nurse", author="user", timestamp=5.0)
    assert old.facts is None and "facts" not in old.to_json()  # stored as before the field existed
    memories.add(
        "app", "alice", [old, MemoryRecord(id="e-x", text="I'm a pilot", author="bot", timestamp=6.0, role="model")]
    )
    assert texts(service(memories).profile("app", "alice")) == ["Sister: Ana", "Works as nurse"]


def test_the_configured_extractor_is_asked_once_per_save_for_the_new_user_texts(memories: InMemoryMemoryStore) -> None:
    extractor = Extractor()
    svc = service(memories, facts=extractor)
    add(svc, ("one", 1.0), ("two", 2.0))
    add(svc, ("one", 1.0), ("three", 3.0))  # "one" is held already: not extracted again
    assert extractor.calls == [["one", "two"], ["three"]]
    assert texts(svc.profile("app", "alice")) == ["said three", "said two", "said one"]


def test_a_failing_extractor_never_fails_the_save(memories: InMemoryMemoryStore) -> None:
    svc = service(memories, facts=Extractor(fail=RuntimeError("model down")))
    assert add(svc, ("I'm allergic to cats", 1.0)) == {"saved": 1, "skipped": 0}
    (record,) = memories.view("app", "alice").records.values()
    assert record.facts is None  # left for the read to extract offline
    assert texts(svc.profile("app", "alice")) == ["Allergic to cats"]


def test_profile_validates_its_identifiers(memories: InMemoryMemoryStore) -> None:
    from agent_memory.errors import InvalidInput

    with pytest.raises(InvalidInput):
        service(memories).profile("app", "bad/user")


def test_reading_old_records_extracts_each_text_once_per_process(
    memories: InMemoryMemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agent_memory.providers.facts as facts_module

    calls: list[str] = []
    real = facts_module.extract_facts

    def counting(text: str) -> list[dict[str, str]]:
        calls.append(text)
        return real(text)

    monkeypatch.setattr(facts_module, "extract_facts", counting)
    text = "I'm allergic to kiwis (a text no other test reads)"
    memories.add("app", "alice", [MemoryRecord(id="t-kiwi", text=text, author="user", timestamp=1.0)])
    svc = service(memories)
    for _ in range(3):
        assert texts(svc.profile("app", "alice")) == ["Allergic to kiwis"]
    assert calls == [text]
