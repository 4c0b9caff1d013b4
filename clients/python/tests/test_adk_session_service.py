"""ADK's session-service contract, against RemoteSessionService and `make run`.

The tests that take the ``session_service`` fixture in google/adk-python's
``tests/unittests/sessions/test_session_service.py`` (ADK 2.13), each rewritten to assert the same behaviour.
They run against ADK's own InMemorySessionService too (``in_memory``): the reference the remote service must match,
and the proof that each test states ADK's behaviour rather than ours. Two adjustments, because the server is
shared by the whole test session: the app is this test's own (``app_name`` fixture rather than ``'my_app'``), and
so is the "other app".

The tests after those are ADK behaviours its suite leaves to single backends (stale sessions, listing order, merged
state in listings) and the server's part of the bargain (a compaction never makes a held session stale).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import BaseSessionService, GetSessionConfig
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.genai import types

from agent_memory_client import AsyncClient
from agent_memory_client.adk import RemoteSessionService


@pytest.fixture(params=["in_memory", "remote"])
async def session_service(request: pytest.FixtureRequest, server_url: str) -> AsyncIterator[BaseSessionService]:
    if request.param == "in_memory":
        yield InMemorySessionService()
        return
    async with AsyncClient(server_url) as client:
        yield RemoteSessionService(client)


@pytest.fixture
async def remote(server_url: str) -> AsyncIterator[RemoteSessionService]:
    async with RemoteSessionService(base_url=server_url) as service:
        yield service


def _now() -> float:
    return datetime.now().astimezone(UTC).timestamp()


# --- ADK's suite ----------------------------------------------------------------------------------------------


async def test_get_empty_session(session_service: BaseSessionService, app_name: str) -> None:
    assert not await session_service.get_session(app_name=app_name, user_id="test_user", session_id="123")


async def test_create_get_session(session_service: BaseSessionService, app_name: str) -> None:
    user_id = "test_user"
    state = {"key": "value"}

    session = await session_service.create_session(app_name=app_name, user_id=user_id, state=state)
    assert session.app_name == app_name
    assert session.user_id == user_id
    assert session.id
    assert session.state == state
    assert session.last_update_time <= _now()

    got_session = await session_service.get_session(app_name=app_name, user_id=user_id, session_id=session.id)
    assert got_session == session
    assert got_session.last_update_time <= _now()

    await session_service.delete_session(app_name=app_name, user_id=user_id, session_id=session.id)
    assert await session_service.get_session(app_name=app_name, user_id=user_id, session_id=session.id) is None


async def test_create_and_list_sessions(session_service: BaseSessionService, app_name: str) -> None:
    user_id = "test_user"
    session_ids = ["session" + str(i) for i in range(5)]
    for session_id in session_ids:
        await session_service.create_session(
            app_name=app_name, user_id=user_id, session_id=session_id, state={"key": "value" + session_id}
        )

    sessions = (await session_service.list_sessions(app_name=app_name, user_id=user_id)).sessions
    assert len(sessions) == len(session_ids)
    assert {s.id for s in sessions} == set(session_ids)
    for session in sessions:
        assert session.state == {"key": "value" + session.id}


async def test_list_sessions_all_users(session_service: BaseSessionService, app_name: str) -> None:
    await session_service.create_session(
        app_name=app_name, user_id="user1", session_id="session1a", state={"key": "value1a"}
    )
    await session_service.create_session(
        app_name=app_name, user_id="user1", session_id="session1b", state={"key": "value1b"}
    )
    await session_service.create_session(
        app_name=app_name, user_id="user2", session_id="session2a", state={"key": "value2a"}
    )

    sessions_1 = (await session_service.list_sessions(app_name=app_name, user_id="user1")).sessions
    assert len(sessions_1) == 2
    sessions_1_map = {s.id: s for s in sessions_1}
    assert sessions_1_map["session1a"].state == {"key": "value1a"}
    assert sessions_1_map["session1b"].state == {"key": "value1b"}

    sessions_2 = (await session_service.list_sessions(app_name=app_name, user_id="user2")).sessions
    assert len(sessions_2) == 1
    assert sessions_2[0].id == "session2a"
    assert sessions_2[0].state == {"key": "value2a"}

    sessions_all = (await session_service.list_sessions(app_name=app_name, user_id=None)).sessions
    assert len(sessions_all) == 3
    sessions_all_map = {s.id: s for s in sessions_all}
    assert sessions_all_map["session1a"].state == {"key": "value1a"}
    assert sessions_all_map["session1b"].state == {"key": "value1b"}
    assert sessions_all_map["session2a"].state == {"key": "value2a"}


async def test_app_state_is_shared_by_all_users_of_app(session_service: BaseSessionService, app_name: str) -> None:
    session1 = await session_service.create_session(
        app_name=app_name, user_id="u1", session_id="s1", state={"app:k1": "v1"}
    )
    event = Event(invocation_id="inv1", author="user", actions=EventActions(state_delta={"app:k2": "v2"}))
    await session_service.append_event(session=session1, event=event)

    session2 = await session_service.create_session(app_name=app_name, user_id="u2", session_id="s2")
    assert session2.state == {"app:k1": "v1", "app:k2": "v2"}

    session1_got = await session_service.get_session(app_name=app_name, user_id="u1", session_id="s1")
    assert session1_got.state.get("app:k1") == "v1"
    assert session1_got.state.get("app:k2") == "v2"


async def test_user_state_is_shared_only_by_user_sessions(session_service: BaseSessionService, app_name: str) -> None:
    session1 = await session_service.create_session(
        app_name=app_name, user_id="u1", session_id="s1", state={"user:k1": "v1"}
    )
    event = Event(invocation_id="inv1", author="user", actions=EventActions(state_delta={"user:k2": "v2"}))
    await session_service.append_event(session=session1, event=event)

    session1b = await session_service.create_session(app_name=app_name, user_id="u1", session_id="s1b")
    assert session1b.state == {"user:k1": "v1", "user:k2": "v2"}

    session2 = await session_service.create_session(app_name=app_name, user_id="u2", session_id="s2")
    assert session2.state == {}


async def test_session_state_is_not_shared(session_service: BaseSessionService, app_name: str) -> None:
    session1 = await session_service.create_session(
        app_name=app_name, user_id="u1", session_id="s1", state={"sk1": "v1"}
    )
    event = Event(invocation_id="inv1", author="user", actions=EventActions(state_delta={"sk2": "v2"}))
    await session_service.append_event(session=session1, event=event)

    session1_got = await session_service.get_session(app_name=app_name, user_id="u1", session_id="s1")
    assert session1_got.state.get("sk1") == "v1"
    assert session1_got.state.get("sk2") == "v2"

    session1b = await session_service.create_session(app_name=app_name, user_id="u1", session_id="s1b")
    assert session1b.state == {}


async def test_temp_state_is_not_persisted_in_state_or_events(
    session_service: BaseSessionService, app_name: str
) -> None:
    session = await session_service.create_session(app_name=app_name, user_id="u1", session_id="s1")
    event = Event(invocation_id="inv1", author="user", actions=EventActions(state_delta={"temp:k1": "v1", "sk": "v2"}))
    await session_service.append_event(session=session, event=event)

    # Temp state is in the caller's session object (the same invocation) ...
    assert session.state.get("temp:k1") == "v1"
    assert session.state.get("sk") == "v2"
    # ... and not in the event's delta.
    assert "temp:k1" not in event.actions.state_delta
    assert event.actions.state_delta.get("sk") == "v2"
    # Nor stored (ADK 1.x's version of this test).
    session_got = await session_service.get_session(app_name=app_name, user_id="u1", session_id="s1")
    assert session_got.state.get("sk") == "v2"
    assert "temp:k1" not in session_got.state
    assert "temp:k1" not in session_got.events[0].actions.state_delta
    assert session_got.events[0].actions.state_delta.get("sk") == "v2"


async def test_temp_state_visible_across_sequential_events(session_service: BaseSessionService, app_name: str) -> None:
    session = await session_service.create_session(app_name=app_name, user_id="u1", session_id="s_seq")
    event1 = Event(
        invocation_id="inv1", author="agent1", actions=EventActions(state_delta={"temp:output": "result_from_a1"})
    )
    await session_service.append_event(session=session, event=event1)

    assert session.state.get("temp:output") == "result_from_a1"
    assert "temp:output" not in event1.actions.state_delta


async def test_get_session_respects_user_id(session_service: BaseSessionService, app_name: str) -> None:
    session1 = await session_service.create_session(app_name=app_name, user_id="u1", session_id="s1")
    await session_service.append_event(session1, Event(invocation_id="inv1", author="user"))
    await session_service.create_session(app_name=app_name, user_id="u2", session_id="s1")

    session2_got = await session_service.get_session(app_name=app_name, user_id="u2", session_id="s1")
    assert session2_got.user_id == "u2"
    assert len(session2_got.events) == 0


async def test_create_session_with_existing_id_raises_error(session_service: BaseSessionService, app_name: str) -> None:
    user_id = "test_user"
    session_id = "existing_session"
    await session_service.create_session(app_name=app_name, user_id=user_id, session_id=session_id)

    with pytest.raises(AlreadyExistsError):
        await session_service.create_session(app_name=app_name, user_id=user_id, session_id=session_id)


async def test_append_event_bytes(session_service: BaseSessionService, app_name: str) -> None:
    user_id = "user"
    session = await session_service.create_session(app_name=app_name, user_id=user_id)

    test_content = types.Content(
        role="user", parts=[types.Part.from_bytes(data=b"test_image_data", mime_type="image/png")]
    )
    test_grounding_metadata = types.GroundingMetadata(
        search_entry_point=types.SearchEntryPoint(sdk_blob=b"test_sdk_blob")
    )
    event = Event(
        invocation_id="invocation", author="user", content=test_content, grounding_metadata=test_grounding_metadata
    )
    await session_service.append_event(session=session, event=event)
    assert session.events[0].content == test_content

    session = await session_service.get_session(app_name=app_name, user_id=user_id, session_id=session.id)
    events = session.events
    assert len(events) == 1
    assert events[0].content == test_content
    assert events[0].grounding_metadata == test_grounding_metadata


async def test_append_event_complete(session_service: BaseSessionService, app_name: str) -> None:
    user_id = "user"
    session = await session_service.create_session(app_name=app_name, user_id=user_id)
    event = Event(
        invocation_id="invocation",
        author="user",
        content=types.Content(role="user", parts=[types.Part(text="test_text")]),
        turn_complete=True,
        partial=False,
        actions=EventActions(artifact_delta={"file": 0}, transfer_to_agent="agent", escalate=True),
        long_running_tool_ids={"tool1"},
        error_code="error_code",
        error_message="error_message",
        interrupted=True,
        grounding_metadata=types.GroundingMetadata(web_search_queries=["query1"]),
        usage_metadata=types.GenerateContentResponseUsageMetadata(
            prompt_token_count=1, candidates_token_count=1, total_token_count=2
        ),
        citation_metadata=types.CitationMetadata(),
        custom_metadata={"custom_key": "custom_value"},
        timestamp=1700000000.123,
        input_transcription=types.Transcription(text="input transcription", finished=True),
        output_transcription=types.Transcription(text="output transcription", finished=True),
    )
    await session_service.append_event(session=session, event=event)

    assert await session_service.get_session(app_name=app_name, user_id=user_id, session_id=session.id) == session


async def test_session_last_update_time_updates_on_event(session_service: BaseSessionService, app_name: str) -> None:
    user_id = "user"
    session = await session_service.create_session(app_name=app_name, user_id=user_id)
    original_update_time = session.last_update_time

    event_timestamp = original_update_time + 10
    await session_service.append_event(
        session=session, event=Event(invocation_id="invocation", author="user", timestamp=event_timestamp)
    )
    assert session.last_update_time == pytest.approx(event_timestamp, abs=1e-6)

    refreshed = await session_service.get_session(app_name=app_name, user_id=user_id, session_id=session.id)
    assert refreshed is not None
    assert refreshed.last_update_time == pytest.approx(event_timestamp, abs=1e-6)
    assert refreshed.last_update_time > original_update_time


async def test_get_session_with_config(session_service: BaseSessionService, app_name: str) -> None:
    user_id = "user"
    num_test_events = 5
    session = await session_service.create_session(app_name=app_name, user_id=user_id)
    for i in range(1, num_test_events + 1):
        await session_service.append_event(session, Event(author="user", timestamp=i))

    async def events(config: GetSessionConfig | None) -> list[Event]:
        got = await session_service.get_session(
            app_name=app_name, user_id=user_id, session_id=session.id, config=config
        )
        assert got is not None
        return got.events

    assert len(await events(None)) == num_test_events
    assert not await events(GetSessionConfig(num_recent_events=0))

    recent = await events(GetSessionConfig(num_recent_events=3))
    assert len(recent) == 3
    assert recent[0].timestamp == num_test_events - 3 + 1

    after = await events(GetSessionConfig(after_timestamp=4.0))
    assert len(after) == num_test_events - 4 + 1
    assert after[0].timestamp == 4.0

    assert not await events(GetSessionConfig(after_timestamp=num_test_events * 10))

    both = await events(GetSessionConfig(after_timestamp=4.0, num_recent_events=3))
    assert len(both) == num_test_events - 4 + 1


async def test_partial_events_are_not_persisted(session_service: BaseSessionService, app_name: str) -> None:
    user_id = "user"
    session = await session_service.create_session(app_name=app_name, user_id=user_id)
    await session_service.append_event(session, Event(author="user", partial=True))

    assert len(session.events) == 0
    session_got = await session_service.get_session(app_name=app_name, user_id=user_id, session_id=session.id)
    assert len(session_got.events) == 0


async def test_get_user_state_returns_empty_dict_when_no_state_exists(
    session_service: BaseSessionService, app_name: str
) -> None:
    assert not await session_service.get_user_state(app_name=app_name, user_id="u1")


async def test_get_user_state_returns_state_written_via_append_event(
    session_service: BaseSessionService, app_name: str
) -> None:
    session = await session_service.create_session(app_name=app_name, user_id="u1")
    await session_service.append_event(
        session,
        Event(author="system", actions=EventActions(state_delta={"user:profile": {"name": "Alice"}, "session_key": 1})),
    )
    state = await session_service.get_user_state(app_name=app_name, user_id="u1")
    assert state == {"profile": {"name": "Alice"}}
    assert "session_key" not in state


async def test_get_user_state_is_not_visible_across_users(session_service: BaseSessionService, app_name: str) -> None:
    session = await session_service.create_session(app_name=app_name, user_id="u1")
    await session_service.append_event(
        session, Event(author="system", actions=EventActions(state_delta={"user:secret": "only-for-u1"}))
    )
    assert not await session_service.get_user_state(app_name=app_name, user_id="u2")


async def test_get_user_state_is_not_visible_across_apps(session_service: BaseSessionService, app_name: str) -> None:
    session = await session_service.create_session(app_name=app_name, user_id="u1")
    await session_service.append_event(
        session, Event(author="system", actions=EventActions(state_delta={"user:data": "only-app-a"}))
    )
    assert not await session_service.get_user_state(app_name=app_name + "-other", user_id="u1")


async def test_get_user_state_available_before_session_is_created(
    session_service: BaseSessionService, app_name: str
) -> None:
    first_session = await session_service.create_session(app_name=app_name, user_id="u1")
    await session_service.append_event(
        first_session, Event(author="system", actions=EventActions(state_delta={"user:ctx": {"v": 1}}))
    )
    assert await session_service.get_user_state(app_name=app_name, user_id="u1") == {"ctx": {"v": 1}}


async def test_get_user_state_reflects_latest_write(session_service: BaseSessionService, app_name: str) -> None:
    session = await session_service.create_session(app_name=app_name, user_id="u1")
    for counter in (1, 2):
        await session_service.append_event(
            session, Event(author="system", actions=EventActions(state_delta={"user:counter": counter}))
        )
    assert (await session_service.get_user_state(app_name=app_name, user_id="u1"))["counter"] == 2


# --- ADK behaviours its suite checks on one backend only -----------------------------------------------------


async def test_list_sessions_oldest_updated_first_with_merged_state(
    session_service: BaseSessionService, app_name: str
) -> None:
    """BaseSessionService.list_sessions: "ordered by last update time, oldest first"; listed sessions carry the
    merged state (app: and user: keys), as ADK's in-memory service lists them."""
    a = await session_service.create_session(app_name=app_name, user_id="u1", session_id="a", state={"app:k": "A"})
    b = await session_service.create_session(app_name=app_name, user_id="u1", session_id="b", state={"user:k": "U"})
    c = await session_service.create_session(app_name=app_name, user_id="u2", session_id="c")
    # Updated later, out of id order: c, then a.
    await session_service.append_event(c, Event(author="user", timestamp=b.last_update_time + 10))
    await session_service.append_event(a, Event(author="user", timestamp=b.last_update_time + 20))

    mine = (await session_service.list_sessions(app_name=app_name, user_id="u1")).sessions
    assert [s.id for s in mine] == ["b", "a"]
    assert all(s.state == {"app:k": "A", "user:k": "U"} for s in mine)
    assert all(not s.events for s in mine)

    everyone = (await session_service.list_sessions(app_name=app_name)).sessions
    assert [s.id for s in everyone] == ["b", "c", "a"]
    assert {s.id: s.state for s in everyone}["c"] == {"app:k": "A"}


async def test_append_event_to_stale_session(remote: RemoteSessionService, app_name: str) -> None:
    """ADK's test_append_event_to_stale_session (database service): a session object appended to elsewhere since
    it was read is refused, nothing of it stored."""
    user_id = "user"
    current_time = _now()
    original = await remote.create_session(app_name=app_name, user_id=user_id)
    await remote.append_event(
        original,
        Event(
            invocation_id="inv1",
            author="user",
            timestamp=current_time + 1,
            actions=EventActions(state_delta={"sk1": "v1"}),
        ),
    )
    updated = await remote.get_session(app_name=app_name, user_id=user_id, session_id=original.id)
    assert updated is not None
    await remote.append_event(
        updated,
        Event(
            invocation_id="inv2",
            author="user",
            timestamp=current_time + 2,
            actions=EventActions(state_delta={"sk2": "v2"}),
        ),
    )
    # A copy taken before the last append is stale.
    stale = original
    assert stale.last_update_time < updated.last_update_time
    assert "sk2" not in stale.state

    with pytest.raises(StaleSessionError, match="modified in storage"):
        await remote.append_event(
            stale,
            Event(
                invocation_id="inv3",
                author="user",
                timestamp=current_time + 3,
                actions=EventActions(state_delta={"sk3": "v3"}),
            ),
        )
    final = await remote.get_session(app_name=app_name, user_id=user_id, session_id=original.id)
    assert final is not None
    assert [e.invocation_id for e in final.events] == ["inv1", "inv2"]
    assert final.state.get("sk1") == "v1" and final.state.get("sk2") == "v2" and "sk3" not in final.state


async def test_concurrent_stale_writers_one_wins(remote: RemoteSessionService, app_name: str) -> None:
    """ADK's test_append_event_concurrent_stale_sessions_reject_stale_writer: two copies of one version append at
    once; exactly one is stored, the other raises StaleSessionError."""
    session = await remote.create_session(app_name=app_name, user_id="user")
    for i in range(4):
        latest = await remote.get_session(app_name=app_name, user_id="user", session_id=session.id)
        assert latest is not None
        copies = [latest.model_copy(deep=True), latest.model_copy(deep=True)]
        results = await asyncio.gather(
            *(
                remote.append_event(
                    copy,
                    Event(
                        invocation_id=f"inv{i}-{n}", author="user", actions=EventActions(state_delta={f"sk{i}-{n}": n})
                    ),
                )
                for n, copy in enumerate(copies)
            ),
            return_exceptions=True,
        )
        errors = [r for r in results if isinstance(r, BaseException)]
        assert len(errors) == 1 and isinstance(errors[0], StaleSessionError), results
    final = await remote.get_session(app_name=app_name, user_id="user", session_id=session.id)
    assert final is not None
    assert len(final.events) == 4


async def test_compaction_never_makes_a_held_session_stale(
    remote: RemoteSessionService, server_url: str, app_name: str
) -> None:
    """An invocation holds its session while the server compacts it: the server's summary event does not move the
    version the invocation appends onto, so its next append is stored."""
    session = await remote.create_session(app_name=app_name, user_id="u1")
    for i in range(12):
        text = f"turn {i}: the user talks about their trip to Lisbon and the museums there"
        await remote.append_event(
            session,
            Event(
                author="user" if i % 2 == 0 else "agent",
                invocation_id=f"inv{i}",
                content=types.Content(role="user" if i % 2 == 0 else "model", parts=[types.Part(text=text)]),
            ),
        )
    async with AsyncClient(server_url) as client:
        result = await client.compact(app_name, "u1", session.id)
    assert result.compacted, result.reason

    await remote.append_event(
        session,
        Event(
            author="user",
            invocation_id="after",
            content=types.Content(role="user", parts=[types.Part(text="and then?")]),
        ),
    )
    stored = await remote.get_session(app_name=app_name, user_id="u1", session_id=session.id)
    assert stored is not None
    assert stored.events[-1].invocation_id == "after"
    assert any(e.actions.compaction for e in stored.events)


async def test_get_app_state(remote: RemoteSessionService, app_name: str) -> None:
    """Not part of ADK's interface: the app's state without a session, keys without their prefix."""
    assert await remote.get_app_state(app_name=app_name) == {}
    session = await remote.create_session(app_name=app_name, user_id="u1", state={"app:plan": "pro", "user:x": 1})
    await remote.append_event(session, Event(author="system", actions=EventActions(state_delta={"app:seats": 3})))
    assert await remote.get_app_state(app_name=app_name) == {"plan": "pro", "seats": 3}
