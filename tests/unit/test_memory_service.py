"""MemoryService over the in-memory adapters: saving by policy, context, idempotency, forgetting."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter

from agent_memory.edge.requests import (
    MemoryText,
    SaveEventsRequest,
    SaveMemoriesRequest,
    SaveTextsRequest,
    SearchRequest,
)
from agent_memory.errors import InvalidInput, SessionNotFound, UnprocessableInput
from agent_memory.policy.autosave import parse_policy
from agent_memory.policy.state import ScopedDelta
from agent_memory.providers.facts import ExtractiveFactExtractor
from agent_memory.search import Doc, SearchIndex
from agent_memory.service.memories import MemoryService, event_memory_id, text_memory_id
from agent_memory.stores.inmemory import InMemoryClaimStore, InMemoryMemoryStore, InMemorySessionStore
from agent_memory.stores.ports import EventQuery, MemoryRecord, NewEvent, SessionKey, SessionRecord
from tests.unit.edge import through_edge

KEY = SessionKey("app", "alice", "s1")


def build(records: list[MemoryRecord]) -> SearchIndex:
    return SearchIndex.build([Doc(r.id, f"{r.author}: {r.text}", r.context) for r in records], None)


@pytest.fixture
def parts() -> tuple[MemoryService, InMemorySessionStore, InMemoryMemoryStore]:
    sessions = InMemorySessionStore()
    memories = InMemoryMemoryStore(build, SearchIndex.combine)
    service = MemoryService(
        sessions,
        memories,
        InMemoryClaimStore(),
        lambda index, q, k, cut: index.search(q, k, min_score=cut),
        clock=lambda: 1000.0,
    )
    return service, sessions, memories


def save(service: MemoryService, app: str, user: str, body: Any) -> dict[str, int]:
    """What the save handler does: the body through SaveMemoriesRequest, then the service."""
    request = through_edge(body, TypeAdapter(SaveMemoriesRequest))
    if isinstance(request, SaveTextsRequest):
        return service.add_texts(app_name=app, user_id=user, memories=request.memories)
    return service.save_session(app_name=app, user_id=user, session_id=request.session_id, policy=request.policy)


def add_texts(service: MemoryService, app: str, user: str, items: list[dict[str, Any]]) -> dict[str, int]:
    memories = [MemoryText.model_validate(item) for item in items]
    return service.add_texts(app_name=app, user_id=user, memories=memories)


def search_body(service: MemoryService, app: str, user: str, body: Any) -> dict[str, Any]:
    """What the POST search handler does."""
    request = through_edge(body, TypeAdapter(SearchRequest))
    return service.search(app_name=app, user_id=user, query=request.query, top_k=request.top_k)


def event(i: int, author: str, text: str, **extra: Any) -> dict[str, Any]:
    role = "user" if author == "user" else "model"
    return {
        "id": f"e{i}",
        "author": author,
        "timestamp": 1000.0 + i,
        "content": {"role": role, "parts": [{"text": text}]},
        **extra,
    }


def seed(sessions: InMemorySessionStore, events: list[dict[str, Any]]) -> None:
    sessions.create_session(SessionRecord("app", "alice", "s1", 1000.0, 1000.0), ScopedDelta())
    sessions.append_events(KEY, [NewEvent(e["id"], e["timestamp"], e, ScopedDelta()) for e in events], None)


def test_default_policy_keeps_user_text_and_never_stores_filtered_text_as_context(parts: Any) -> None:
    service, sessions, memories = parts
    seed(
        sessions,
        [
            event(1, "user", "I live in Porto"),
            event(2, "planner", "SECRET assistant reasoning"),
            event(3, "user", "I like tea"),
        ],
    )
    assert save(service, "app", "alice", {"session_id": "s1"}) == {"saved": 2, "skipped": 1}
    records = memories.view("app", "alice").records
    assert set(records) == {event_memory_id("s1", "e1"), event_memory_id("s1", "e3")}
    tea = records[event_memory_id("s1", "e3")]
    assert "Porto" in tea.context and "SECRET" not in tea.context
    assert tea.session_id == "s1" and tea.event_id == "e3" and tea.author == "user"


def said(i: int, author: str, text: str) -> dict[str, Any]:
    """A person's turn (content role ``user``) by ``author``."""
    content = {"role": "user", "parts": [{"text": text}]}
    return {"id": f"e{i}", "author": author, "timestamp": 1000.0 + i, "content": content}


def test_a_memorys_context_is_the_turns_before_it_and_its_date_and_its_reply_another_authors_next_turn(
    parts: Any,
) -> None:
    service, sessions, memories = parts
    seed(
        sessions,
        [
            said(1, "Ana", "We adopted a puppy"),
            said(2, "Ben", "What breed is it?"),
            said(3, "Ana", "A corgi"),
            said(4, "Ana", "He loves the beach"),
            said(5, "Ben", "Take him to Porto"),
        ],
    )
    assert save(service, "app", "alice", {"session_id": "s1", "policy": "all"}) == {"saved": 5, "skipped": 0}
    got = {r.event_id: (r.context, r.reply) for r in memories.view("app", "alice").records.values()}
    day = "Thursday 01 January 1970"
    assert got == {
        "e1": (day, "Ben: What breed is it?"),
        "e2": (f"Ana: We adopted a puppy {day}", "Ana: A corgi"),
        "e3": (f"Ana: We adopted a puppy Ben: What breed is it? {day}", ""),  # its own author's next turn: no reply
        "e4": (f"Ben: What breed is it? Ana: A corgi {day}", "Ben: Take him to Porto"),
        "e5": (f"Ana: A corgi Ana: He loves the beach {day}", ""),  # the last turn: nothing after it
    }


def test_a_turn_the_policy_drops_is_never_a_reply(parts: Any) -> None:
    service, sessions, memories = parts
    seed(sessions, [event(1, "user", "I live in Porto"), event(2, "planner", "SECRET plan"), event(3, "Ben", "Nice")])
    # default: the people's turns only; the planner's is dropped, and the agent "Ben" (role model) too
    assert save(service, "app", "alice", {"session_id": "s1"}) == {"saved": 1, "skipped": 2}
    (porto,) = memories.view("app", "alice").records.values()
    assert (porto.context, porto.reply) == ("Thursday 01 January 1970", "")


def test_a_forgotten_reply_is_never_stored(parts: Any) -> None:
    """The reply's memory forgotten before the turn it answered is saved: the turn is stored without a reply."""
    service, sessions, memories = parts
    seed(sessions, [said(1, "Ana", "Where is the key?"), said(2, "Ben", "under the flowerpot")])
    events = sessions.read_events(KEY, EventQuery())
    assert service.save_events(KEY, events[1:], parse_policy("all"), previous=events[:1]) == {"saved": 1, "skipped": 0}
    service.forget("app", "alice", event_memory_id("s1", "e2"))
    assert save(service, "app", "alice", {"session_id": "s1", "policy": "all"}) == {"saved": 1, "skipped": 1}
    (key,) = memories.view("app", "alice").records.values()
    assert key.event_id == "e1" and (key.context, key.reply) == ("Thursday 01 January 1970", "")


def test_compaction_events_are_never_saved(parts: Any) -> None:
    service, sessions, _ = parts
    summary = {
        "id": "c1",
        "author": "system",
        "timestamp": 1005.0,
        "actions": {
            "compaction": {
                "start_timestamp": 1,
                "end_timestamp": 2,
                "compacted_content": {"parts": [{"text": "summary"}]},
            }
        },
    }
    seed(sessions, [event(1, "user", "hello there"), summary])
    assert save(service, "app", "alice", {"session_id": "s1", "policy": "all"}) == {"saved": 1, "skipped": 0}


def test_saves_are_idempotent_and_a_wider_policy_adds_what_was_filtered(parts: Any) -> None:
    service, sessions, _ = parts
    seed(sessions, [event(1, "user", "I live in Porto"), event(2, "planner", "Noted")])
    assert save(service, "app", "alice", {"session_id": "s1"})["saved"] == 1
    assert save(service, "app", "alice", {"session_id": "s1"})["saved"] == 0
    assert save(service, "app", "alice", {"session_id": "s1", "policy": "all"})["saved"] == 1


def test_direct_texts_dedupe_by_normalised_text_and_forget_releases_them(parts: Any) -> None:
    service, _, memories = parts
    assert add_texts(service, "app", "alice", [{"text": "likes  jazz"}, {"text": "likes jazz "}]) == {
        "saved": 1,
        "skipped": 1,
    }
    memory_id = text_memory_id("likes jazz")
    assert memory_id in memories.view("app", "alice").records
    service.forget("app", "alice", memory_id)
    assert memories.view("app", "alice").records == {}
    assert add_texts(service, "app", "alice", [{"text": "likes jazz"}])["saved"] == 1


def test_forgotten_event_memories_are_not_saved_again(parts: Any) -> None:
    service, sessions, _ = parts
    seed(sessions, [event(1, "user", "I live in Porto")])
    save(service, "app", "alice", {"session_id": "s1"})
    service.forget("app", "alice", event_memory_id("s1", "e1"))
    assert save(service, "app", "alice", {"session_id": "s1"})["saved"] == 0
    service.forget_all("app", "alice")
    assert save(service, "app", "alice", {"session_id": "s1"})["saved"] == 0


def test_forget_all_marks_every_event_memory_it_removes_and_saves_write_no_mark(parts: Any) -> None:
    service, sessions, _ = parts
    seed(sessions, [event(1, "user", "I live in Porto"), event(2, "user", "I keep bees")])
    assert save(service, "app", "alice", {"session_id": "s1"})["saved"] == 2
    claims = service._claims
    assert claims.forgotten("app", "alice", ["E#s1#e1", "E#s1#e2"]) == set()  # a save writes no claim
    service.forget_all("app", "alice")
    assert claims.forgotten("app", "alice", ["E#s1#e1", "E#s1#e2"]) == {"E#s1#e1", "E#s1#e2"}
    sessions.append_events(KEY, [NewEvent("e3", 1003.0, event(3, "user", "I moved to Lisbon"), ScopedDelta())], None)
    # the session's save now stores only the turn said after the forget-all
    assert save(service, "app", "alice", {"session_id": "s1"}) == {"saved": 1, "skipped": 2}


class CountingExtractor(ExtractiveFactExtractor):
    def __init__(self) -> None:
        self.texts: list[str] = []

    def extract(self, texts: list[str]) -> list[list[dict[str, str]]]:
        self.texts += texts
        return super().extract(texts)


def test_facts_are_extracted_only_for_records_not_stored_yet() -> None:
    sessions = InMemorySessionStore()
    extractor = CountingExtractor()
    service = MemoryService(
        sessions,
        InMemoryMemoryStore(build, SearchIndex.combine),
        InMemoryClaimStore(),
        lambda index, q, k, cut: index.search(q, k, min_score=cut),
        facts=extractor,
    )
    seed(sessions, [event(1, "user", "I am allergic to cats")])
    assert save(service, "app", "alice", {"session_id": "s1"})["saved"] == 1
    assert save(service, "app", "alice", {"session_id": "s1"})["saved"] == 0  # a resend: no model call
    sessions.append_events(KEY, [NewEvent("e2", 1002.0, event(2, "user", "I love jazz"), ScopedDelta())], None)
    service.forget("app", "alice", event_memory_id("s1", "e1"))
    assert save(service, "app", "alice", {"session_id": "s1"})["saved"] == 1
    assert extractor.texts == ["I am allergic to cats", "I love jazz"]  # never the stored or forgotten turn again


def test_search_validation_and_results(parts: Any) -> None:
    service, _, _ = parts
    add_texts(service, "app", "alice", [{"text": "allergic to shellfish", "metadata": {"k": 1}, "timestamp": 0}])
    (hit,) = service.search(app_name="app", user_id="alice", query="shellfish", top_k=3)["memories"]
    assert hit["content"]["parts"][0]["text"] == "allergic to shellfish" and hit["custom_metadata"] == {"k": 1}
    assert hit["timestamp"] == "1970-01-01T00:00:00Z"
    assert service.search(app_name="app", user_id="bob", query="shellfish")["memories"] == []
    for query, top_k, field in [(" ", 5, "query"), ("x", 0, "top_k"), ("x", True, "top_k"), ("x", 101, "top_k")]:
        with pytest.raises(InvalidInput) as err:
            service.search(app_name="app", user_id="alice", query=query, top_k=top_k)
        assert err.value.field == field


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ([], "body"),
        ({"session_id": "s1", "extra": 1}, "extra"),
        ({"memories": [{"text": "x"}], "session_id": "s1"}, "session_id"),
        ({"memories": [{"text": "x", "when": 1}]}, "memories[0].when"),
        ({"memories": [{"text": "   "}]}, "memories[0].text"),
        ({"memories": [{"text": "x", "timestamp": True}]}, "memories[0].timestamp"),
        ({"memories": [{"text": "x", "timestamp": -1e12}]}, "memories[0].timestamp"),
        ({"memories": [{"text": "x", "timestamp": 1e20}]}, "memories[0].timestamp"),
        ({"memories": [{"text": "x", "timestamp": float("nan")}]}, "memories[0].timestamp"),
        ({"memories": [{"text": "x", "metadata": [1]}]}, "memories[0].metadata"),
        ({"sessionId": "s1", "session_id": "s1"}, "session_id"),
        ({"memories": [{"text": "x", "timestamp": "soon"}]}, "memories[0].timestamp"),
        ({"memories": [{"text": "x" * 20_001}]}, "memories[0].text"),
        ({"memories": [{"text": "x"}] * 101}, "memories"),
        ({"session_id": "bad id"}, "session_id"),
    ],
)
def test_bad_save_bodies(parts: Any, body: Any, field: str) -> None:
    service, _, _ = parts
    with pytest.raises((UnprocessableInput, InvalidInput)) as err:
        save(service, "app", "alice", body)
    assert err.value.field == field


def test_save_of_a_missing_session_is_404(parts: Any) -> None:
    service, _, _ = parts
    with pytest.raises(SessionNotFound):
        save(service, "app", "alice", {"session_id": "ghost"})


@pytest.mark.parametrize(
    ("body", "field"), [(None, "body"), ([], "body"), ({"query": "x", "limit": 3}, "limit"), ({}, "query")]
)
def test_search_body_must_be_query_and_top_k(parts: Any, body: Any, field: str) -> None:
    service, _, _ = parts
    with pytest.raises(UnprocessableInput) as err:
        search_body(service, "app", "alice", body)
    assert err.value.field == field


def test_search_body_answers_what_search_does(parts: Any) -> None:
    service, _, _ = parts
    add_texts(service, "app", "alice", [{"text": "plays the oboe"}, {"text": "grows basil"}])
    assert search_body(service, "app", "alice", {"query": "oboe", "top_k": 1}) == service.search(
        app_name="app", user_id="alice", query="oboe", top_k=1
    )


def add_events(service: MemoryService, app: str, user: str, body: Any) -> dict[str, int]:
    """What the save handler does with ``{events: [...]}``."""
    request = through_edge(body, TypeAdapter(SaveMemoriesRequest))
    assert isinstance(request, SaveEventsRequest)
    return service.add_events(
        app_name=app, user_id=user, events=request.events, session_id=request.session_id, policy=request.policy
    )


def test_explicit_events_are_saved_once_per_event_id(parts: Any) -> None:
    service, _, memories = parts
    events = [event(1, "user", "I moved to Porto"), event(2, "model", "Porto has great tiles"), event(3, "user", "")]
    assert add_events(service, "app", "alice", {"events": events}) == {"saved": 2, "skipped": 1}
    # ADK sends the latest turns again with the next ones: only the new event is saved
    more = [*events, event(4, "user", "My cat is called Miso")]
    assert add_events(service, "app", "alice", {"events": more}) == {"saved": 1, "skipped": 3}
    records = memories.view("app", "alice").records
    assert {r.event_id for r in records.values()} == {"e1", "e2", "e4"}
    assert {r.session_id for r in records.values()} == {""}
    miso = records[event_memory_id("", "e4")]
    assert miso.author == "user" and miso.timestamp == 1004.0 and "I moved to Porto" in miso.context


def test_explicit_events_share_the_ids_of_their_sessions_save(parts: Any) -> None:
    service, sessions, _ = parts
    seed(sessions, [event(1, "user", "I live in Porto")])
    assert (
        add_events(service, "app", "alice", {"events": [event(1, "user", "I live in Porto")], "session_id": "s1"})[
            "saved"
        ]
        == 1
    )
    assert save(service, "app", "alice", {"session_id": "s1"}) == {"saved": 0, "skipped": 1}
    # the session need not exist, and another session scopes the same event id apart
    assert add_events(service, "app", "alice", {"events": [event(1, "user", "x")], "sessionId": "gone"})["saved"] == 1


def test_a_forgotten_explicit_event_is_never_saved_again(parts: Any) -> None:
    service, _, memories = parts
    add_events(service, "app", "alice", {"events": [event(1, "user", "I live in Porto")]})
    service.forget("app", "alice", event_memory_id("", "e1"))
    assert add_events(service, "app", "alice", {"events": [event(1, "user", "I live in Porto")]})["saved"] == 0
    assert memories.view("app", "alice").records == {}


def test_explicit_events_without_an_id_are_named_by_their_content(parts: Any) -> None:
    service, _, memories = parts
    body = {"events": [{"author": "user", "timestamp": 5, "content": {"parts": [{"text": "tea, no sugar"}]}}]}
    assert add_events(service, "app", "alice", body)["saved"] == 1
    assert add_events(service, "app", "alice", body)["saved"] == 0
    (record,) = memories.view("app", "alice").records.values()
    assert record.event_id is not None and record.event_id.startswith("c-")


def test_explicit_events_keep_tool_calls_but_no_thoughts_and_take_a_policy(parts: Any) -> None:
    service, _, memories = parts
    call = {"id": "t1", "author": "agent", "content": {"parts": [{"function_call": {"name": "weather", "args": {}}}]}}
    thought = {"id": "t2", "author": "agent", "content": {"parts": [{"text": "secret plan", "thought": True}]}}
    assert add_events(service, "app", "alice", {"events": [call, thought]}) == {"saved": 1, "skipped": 1}
    texts = [r.text for r in memories.view("app", "alice").records.values()]
    assert texts == ["called weather({})"]
    body = {"events": [event(9, "model", "only users")], "policy": "default"}
    assert add_events(service, "app", "alice", body) == {"saved": 0, "skipped": 1}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"events": []}, "events"),
        ({"events": [event(1, "user", "x")] * 101}, "events"),
        ({"events": [{"author": "user", "timestamp": True}]}, "events[0].timestamp"),
        ({"events": [event(1, "user", "x")], "session_id": "bad id"}, "session_id"),
        ({"events": [event(1, "user", "x")], "policy": "everything"}, "policy"),
        ({"events": [event(1, "user", "x")], "memories": [{"text": "x"}]}, "events"),
        ({"events": [event(1, "user", "x")], "extra": 1}, "extra"),
    ],
)
def test_bad_explicit_event_bodies(parts: Any, body: Any, field: str) -> None:
    service, _, _ = parts
    with pytest.raises((UnprocessableInput, InvalidInput)) as err:
        add_events(service, "app", "alice", body)
    assert err.value.field == field
