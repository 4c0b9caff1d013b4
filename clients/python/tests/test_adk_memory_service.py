"""RemoteMemoryService behaves as ADK's InMemoryMemoryService where their semantics coincide.

From google/adk-python's ``tests/unittests/memory/test_in_memory_memory_service.py`` (ADK 2.13): the tests of
ingestion (a session, explicit events, each event once, forgotten memories stay forgotten), scoping by user and app,
keyword matches and a query that matches nothing. Each runs against ADK's in-memory service too, the reference.
Left out, because the semantics differ by design: tests that read the in-memory service's private dicts (rewritten
here to observe the same thing through search), a slash in app names (the service refuses it: 400), substring
matching inside unspaced scripts, and thread-safety of an in-process dict.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from google.adk.events.event import Event
from google.adk.memory.base_memory_service import BaseMemoryService
from google.adk.memory.in_memory_memory_service import InMemoryMemoryService
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.sessions.session import Session
from google.genai import types

from agent_memory_client import AsyncClient
from agent_memory_client.adk import RemoteMemoryService

USER = "test-user"
OTHER_USER = "another-user"


@pytest.fixture(params=["in_memory", "remote"])
async def memory_service(request: pytest.FixtureRequest, server_url: str) -> AsyncIterator[BaseMemoryService]:
    if request.param == "in_memory":
        yield InMemoryMemoryService()
        return
    async with AsyncClient(server_url) as client:
        yield RemoteMemoryService(client)


def _event(event_id: str, text: str | None, author: str = "user", timestamp: float = 12345) -> Event:
    content = types.Content(parts=[types.Part(text=text)]) if text is not None else None
    return Event(id=event_id, invocation_id=f"inv-{event_id}", author=author, timestamp=timestamp, content=content)


def session_1(app_name: str) -> Session:
    return Session(
        app_name=app_name,
        user_id=USER,
        id="session-1",
        last_update_time=1000,
        events=[
            _event("event-1a", "The ADK is a great toolkit."),
            _event("event-1b", None),  # no content: never a memory
            _event("event-1c", "I agree. The Agent Development Kit (ADK) rocks!", author="model"),
        ],
    )


def session_2(app_name: str) -> Session:
    return Session(
        app_name=app_name,
        user_id=USER,
        id="session-2",
        last_update_time=2000,
        events=[_event("event-2a", "I like to code in Python.", timestamp=54321)],
    )


def other_users_session(app_name: str) -> Session:
    return Session(
        app_name=app_name,
        user_id=OTHER_USER,
        id="session-3",
        last_update_time=3000,
        events=[_event("event-3a", "This is a secret.", timestamp=60000)],
    )


async def texts(service: BaseMemoryService, app_name: str, query: str, user_id: str = USER) -> list[str]:
    result = await service.search_memory(app_name=app_name, user_id=user_id, query=query)
    return [memory.content.parts[0].text for memory in result.memories]


async def test_add_session_to_memory(memory_service: BaseMemoryService, app_name: str) -> None:
    """The session's events with content become memories; the one without content does not."""
    await memory_service.add_session_to_memory(session_1(app_name))
    assert sorted(await texts(memory_service, app_name, "ADK")) == [
        "I agree. The Agent Development Kit (ADK) rocks!",
        "The ADK is a great toolkit.",
    ]


async def test_add_events_to_memory_with_explicit_events(memory_service: BaseMemoryService, app_name: str) -> None:
    session = session_1(app_name)
    await memory_service.add_events_to_memory(
        app_name=app_name, user_id=USER, session_id=session.id, events=[session.events[0]]
    )
    assert await texts(memory_service, app_name, "ADK") == ["The ADK is a great toolkit."]


async def test_add_events_to_memory_without_session_id(memory_service: BaseMemoryService, app_name: str) -> None:
    await memory_service.add_events_to_memory(app_name=app_name, user_id=USER, events=[session_1(app_name).events[0]])
    assert await texts(memory_service, app_name, "toolkit") == ["The ADK is a great toolkit."]


async def test_add_events_to_memory_appends_without_replacing(memory_service: BaseMemoryService, app_name: str) -> None:
    session = session_1(app_name)
    await memory_service.add_session_to_memory(session)
    await memory_service.add_events_to_memory(
        app_name=app_name, user_id=USER, session_id=session.id, events=[_event("event-1d", "A new fact about ADK.")]
    )
    assert sorted(await texts(memory_service, app_name, "ADK")) == [
        "A new fact about ADK.",
        "I agree. The Agent Development Kit (ADK) rocks!",
        "The ADK is a great toolkit.",
    ]


async def test_add_events_to_memory_deduplicates_event_ids(memory_service: BaseMemoryService, app_name: str) -> None:
    session = session_1(app_name)
    await memory_service.add_session_to_memory(session)
    await memory_service.add_events_to_memory(
        app_name=app_name,
        user_id=USER,
        session_id=session.id,
        events=[_event("event-1a", "Updated duplicate text about tea.", timestamp=12349)],
    )
    assert await texts(memory_service, app_name, "duplicate tea") == []
    # The event's first text is the one kept.
    assert (await texts(memory_service, app_name, "great toolkit"))[0] == "The ADK is a great toolkit."


async def test_add_session_with_no_events_to_memory(memory_service: BaseMemoryService, app_name: str) -> None:
    await memory_service.add_session_to_memory(Session(app_name=app_name, user_id=USER, id="session-4"))
    assert await texts(memory_service, app_name, "anything") == []


async def test_search_memory_simple_match(memory_service: BaseMemoryService, app_name: str) -> None:
    await memory_service.add_session_to_memory(session_1(app_name))
    await memory_service.add_session_to_memory(session_2(app_name))

    result = await memory_service.search_memory(app_name=app_name, user_id=USER, query="Python")
    assert len(result.memories) == 1
    assert result.memories[0].content.parts[0].text == "I like to code in Python."
    assert result.memories[0].author == "user"


async def test_search_memory_case_insensitive_match(memory_service: BaseMemoryService, app_name: str) -> None:
    await memory_service.add_session_to_memory(session_1(app_name))
    assert await texts(memory_service, app_name, "development") == ["I agree. The Agent Development Kit (ADK) rocks!"]


async def test_search_memory_multiple_matches(memory_service: BaseMemoryService, app_name: str) -> None:
    await memory_service.add_session_to_memory(session_1(app_name))
    assert set(await texts(memory_service, app_name, "How about ADK?")) == {
        "The ADK is a great toolkit.",
        "I agree. The Agent Development Kit (ADK) rocks!",
    }


async def test_search_memory_no_match(memory_service: BaseMemoryService, app_name: str) -> None:
    await memory_service.add_session_to_memory(session_1(app_name))
    assert await texts(memory_service, app_name, "nonexistent") == []


async def test_search_memory_is_scoped_by_user(memory_service: BaseMemoryService, app_name: str) -> None:
    await memory_service.add_session_to_memory(session_1(app_name))
    await memory_service.add_session_to_memory(other_users_session(app_name))

    assert await texts(memory_service, app_name, "secret") == []
    assert await texts(memory_service, app_name, "secret", user_id=OTHER_USER) == ["This is a secret."]


async def test_search_memory_is_scoped_by_app(memory_service: BaseMemoryService, app_name: str) -> None:
    await memory_service.add_session_to_memory(other_users_session(app_name))
    assert await texts(memory_service, app_name + "-other", "secret", user_id=OTHER_USER) == []


async def test_search_memory_ranks_by_number_of_matching_words(
    memory_service: BaseMemoryService, app_name: str
) -> None:
    await memory_service.add_session_to_memory(
        Session(
            app_name=app_name,
            user_id=USER,
            id="session-ranked",
            events=[
                _event("ranked-a", "The deploy is ready."),
                _event("ranked-b", "Ready."),
                _event("ranked-c", "The deploy status is ready."),
            ],
        )
    )
    assert await texts(memory_service, app_name, "deploy status ready") == [
        "The deploy status is ready.",
        "The deploy is ready.",
        "Ready.",
    ]


async def test_deleted_memory_is_not_ingested_again(memory_service: BaseMemoryService, app_name: str) -> None:
    """delete_memory: the id from search_memory; saving the session again does not bring it back."""
    session = session_2(app_name)
    await memory_service.add_session_to_memory(session)
    [memory] = (await memory_service.search_memory(app_name=app_name, user_id=USER, query="Python")).memories

    await memory_service.delete_memory(app_name=app_name, user_id=USER, memory_id=memory.id)
    assert await texts(memory_service, app_name, "Python") == []
    await memory_service.add_session_to_memory(session)
    assert await texts(memory_service, app_name, "Python") == []


async def test_add_memory_direct_texts(server_url: str, app_name: str) -> None:
    """add_memory (ADK's direct writes; the in-memory service has none): texts with their metadata."""
    async with RemoteMemoryService(base_url=server_url) as service:
        await service.add_memory(
            app_name=app_name,
            user_id=USER,
            memories=[
                MemoryEntry(
                    content=types.Content(parts=[types.Part(text="My cat is called Miso.")]),
                    custom_metadata={"source": "form"},
                )
            ],
        )
        [memory] = (await service.search_memory(app_name=app_name, user_id=USER, query="cat name Miso")).memories
    assert memory.content.parts[0].text == "My cat is called Miso."
    assert memory.custom_metadata == {"source": "form"}


async def test_session_policy_saves_the_stored_session_by_the_servers_policy(server_url: str, app_name: str) -> None:
    """session_policy: the service reads the stored session and keeps what the policy keeps (default: the user's
    text), rather than every event with text the caller holds."""
    from agent_memory_client.adk import RemoteSessionService

    async with AsyncClient(server_url) as client:
        sessions = RemoteSessionService(client)
        session = await sessions.create_session(app_name=app_name, user_id=USER)
        for event in session_1(app_name).events:
            await sessions.append_event(session, event)
        memory = RemoteMemoryService(client, session_policy="default")
        await memory.add_session_to_memory(session)
        assert await texts(memory, app_name, "ADK toolkit") == ["The ADK is a great toolkit."]
