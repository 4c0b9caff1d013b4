"""The context use case with long-term memory: the search runs with the newest user message (or memory_query), hits
carry their dates, and a context that asks for no memory never builds the memory service."""

from __future__ import annotations

from typing import Any

import pytest

from agent_memory.composition import Services
from agent_memory.config import Settings
from agent_memory.edge.requests import MemoryText
from agent_memory.models import Event
from agent_memory.policy.context import MEMORIES_PREFIX, ContextOptions
from agent_memory.policy.profile import PROFILE_HEADER
from agent_memory.service.context import ContextService
from agent_memory.stores.inmemory import InMemorySessionStore

MAY_8 = 1683540000.0  # 2023-05-08T10:00:00Z


@pytest.fixture
def wired() -> Services:
    return Services(Settings(embedder="none"), "memory")


def converse(wired: Services, session_id: str, *texts: str) -> None:
    wired.sessions.create_session(app_name="a", user_id="u", session_id=session_id, state=None)
    for i, text in enumerate(texts):
        author = "user" if i % 2 == 0 else "agent"
        event = Event.model_validate(
            {"author": author, "content": {"role": "user" if author == "user" else "model", "parts": [{"text": text}]}}
        )
        wired.sessions.append_events(app_name="a", user_id="u", session_id=session_id, events=[event], if_match=None)


def remember(wired: Services, *texts: str, timestamp: float = MAY_8) -> None:
    wired.memories.add_texts(
        app_name="a", user_id="u", memories=[MemoryText(text=t, timestamp=timestamp) for t in texts]
    )


def context(wired: Services, session_id: str = "s", **options: Any) -> dict[str, Any]:
    return wired.context.get_context("a", "u", session_id, ContextOptions(**options))


def test_a_context_without_memories_or_profile_builds_no_memory_service() -> None:
    wired = Services(Settings(), "memory")  # the default embedder: loading it would show in _built
    converse(wired, "s", "hello", "hi")
    result = context(wired, system=("base",), max_tokens=500, format="full")
    assert [m["content"] for m in result["messages"]] == ["base", "hello", "hi"]
    assert not {"memories", "memory_store", "embedder", "claim_store"} & set(wired._built)
    # Asking for memories builds them (and only then).
    context(wired, memories=3)
    assert {"memories", "memory_store"} <= set(wired._built)


def test_a_context_service_without_memory_refuses_to_recall() -> None:
    store = InMemorySessionStore()
    service = ContextService(store)
    wired = Services(Settings(embedder="none"), "memory")
    wired._built["session_store"] = store
    converse(wired, "s", "hello")
    assert service.get_context("a", "u", "s", ContextOptions())["messages"] == [{"role": "user", "content": "hello"}]
    with pytest.raises(RuntimeError):
        service.get_context("a", "u", "s", ContextOptions(memories=1))


def test_memories_are_searched_with_the_newest_user_message_and_dated(wired: Services) -> None:
    remember(wired, "I am allergic to peanuts", "My sister lives in Porto")
    converse(wired, "s", "tell me about Porto", "Porto is lovely", "what snacks with peanuts are safe for me?")
    result = context(wired, memories=1)
    first = result["messages"][0]
    assert first == {"role": "system", "content": MEMORIES_PREFIX + "- [2023-05-08] I am allergic to peanuts"}
    assert [m["id"] for m in result["memories"]] and result["memories"][0]["score"] > 0


def test_memory_query_replaces_the_user_message(wired: Services) -> None:
    remember(wired, "I am allergic to peanuts", "My sister lives in Porto")
    converse(wired, "s", "what snacks with peanuts are safe for me?")
    result = context(wired, memories=1, memory_query="where does my sister live")
    assert result["messages"][0]["content"] == MEMORIES_PREFIX + "- [2023-05-08] My sister lives in Porto"


def test_no_user_message_and_no_query_searches_nothing(wired: Services) -> None:
    remember(wired, "I am allergic to peanuts")
    wired.sessions.create_session(app_name="a", user_id="u", session_id="s", state=None)
    result = context(wired, memories=5, system=("base",))
    assert result["messages"] == [{"role": "system", "content": "base"}] and result["memories"] == []


def test_min_score_and_nothing_matching(wired: Services) -> None:
    remember(wired, "I am allergic to peanuts")
    converse(wired, "s", "tungsten boiling point")
    assert context(wired, memories=5)["memories"] == []  # the calibrated cut: nothing, not the user's memories
    assert len(context(wired, memories=5, memory_query="peanuts")["memories"]) == 1
    assert context(wired, memories=5, memory_query="peanuts", memory_min_score=1)["memories"] == []


def test_a_forgotten_memory_is_never_recalled(wired: Services) -> None:
    remember(wired, "I am allergic to peanuts")
    converse(wired, "s", "are peanuts ok for me?")
    (recalled,) = context(wired, memories=5)["memories"]
    wired.memories.forget("a", "u", recalled["id"])
    result = context(wired, memories=5, memory_min_score=0)
    assert result["memories"] == [] and [m["role"] for m in result["messages"]] == ["user"]


def test_memories_of_another_user_are_never_recalled(wired: Services) -> None:
    wired.memories.add_texts(app_name="a", user_id="other", memories=[MemoryText(text="I am allergic to peanuts")])
    converse(wired, "s", "are peanuts ok for me?")
    assert context(wired, memories=5, memory_min_score=0)["memories"] == []


def test_the_profile_comes_after_the_base_prompt_and_before_the_memories(wired: Services) -> None:
    remember(wired, "My name is Ana", "I am allergic to peanuts")
    converse(wired, "s", "which snacks with peanuts are safe?")
    result = context(wired, system=("base",), memories=1, profile=True, format="full")
    base, profile, memories, question = result["messages"]
    assert base["content"] == "base"
    assert profile["content"] == PROFILE_HEADER + "\n- Name: Ana\n- Allergic to peanuts"
    assert profile["metadata"]["kind"] == "profile" and len(profile["metadata"]["memory_ids"]) == 2
    assert memories["metadata"]["kind"] == "memories" and question["role"] == "user"
    assert result["profile"] is True


def test_profile_facts_are_trimmed_least_important_first(wired: Services) -> None:
    remember(wired, "My name is Ana", "I am allergic to peanuts")
    converse(wired, "s", "hello")
    whole = len(PROFILE_HEADER + "\n- Name: Ana\n- Allergic to peanuts") + len("hello")
    assert context(wired, profile=True, max_chars=whole)["profile"] is True
    first = context(wired, profile=True, max_chars=whole - 1)["messages"][0]
    assert first["content"] == PROFILE_HEADER + "\n- Name: Ana"


def test_a_forgotten_fact_leaves_the_profile_and_no_profile_is_no_message(wired: Services) -> None:
    remember(wired, "I am allergic to peanuts")
    converse(wired, "s", "hello")
    assert context(wired, profile=True)["messages"][0]["content"] == PROFILE_HEADER + "\n- Allergic to peanuts"
    (memory_id,) = wired.memory_store.view("a", "u").records
    wired.memories.forget("a", "u", memory_id)
    result = context(wired, profile=True)
    assert result["messages"] == [{"role": "user", "content": "hello"}] and result["profile"] is False
