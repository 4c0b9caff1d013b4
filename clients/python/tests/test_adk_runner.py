"""A real ADK Runner on RemoteSessionService stores what it stores on ADK's InMemorySessionService, event for event.

The model is scripted (examples/adk_agent.py's ScriptedModel: no network); its tool writes user:, app:, temp: and
session state. The example agent itself runs against `make run` too.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from google.adk.events.event import Event
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.adk.sessions.session import Session

from agent_memory_client import AsyncClient
from agent_memory_client.adk import RemoteMemoryService, RemoteSessionService

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import adk_agent


def _comparable(event: Event) -> dict[str, Any]:
    # What ADK decides: ids, invocation ids and times are fresh on every run.
    data = event.model_dump(mode="json", exclude_none=True)
    for key in ("id", "invocation_id", "timestamp"):
        data.pop(key, None)
    for part in (data.get("content") or {}).get("parts", []):
        for call in ("function_call", "function_response"):
            if call in part:
                part[call].pop("id", None)
    return data


async def _run(service: BaseSessionService, app_name: str) -> tuple[Session, dict[str, Any], list[str], Session]:
    runner = Runner(
        app_name=app_name,
        agent=adk_agent.build_agent(adk_agent.first_session_script("like green tea")),
        session_service=service,
    )
    session = await service.create_session(app_name=app_name, user_id="u1", state={"greeting": "hello"})
    replies = await adk_agent.ask(runner, "u1", session.id, "I like green tea, remember that.")
    stored = await service.get_session(app_name=app_name, user_id="u1", session_id=session.id)
    assert stored is not None
    user_state = await service.get_user_state(app_name=app_name, user_id="u1")
    other = await service.create_session(app_name=app_name, user_id="u2")
    return stored, user_state, replies, other


async def test_runner_stores_what_the_in_memory_service_stores(server_url: str, app_name: str) -> None:
    expected, expected_user_state, expected_replies, expected_other = await _run(InMemorySessionService(), app_name)
    async with AsyncClient(server_url) as client:
        got, user_state, replies, other = await _run(RemoteSessionService(client), app_name)

    assert replies == expected_replies == ["Noted: you like green tea."]
    assert [_comparable(e) for e in got.events] == [_comparable(e) for e in expected.events]
    assert [e.author for e in got.events] == ["user", "assistant", "assistant", "assistant"]
    # The tool's writes, scope by scope; temp: never stored, not even in the event's delta.
    assert (
        got.state
        == expected.state
        == {
            "greeting": "hello",
            "last_tool": "remember",
            "user:fact": "like green tea",
            "app:facts_remembered": 1,
        }
    )
    assert user_state == expected_user_state == {"fact": "like green tea"}
    assert other.state == expected_other.state == {"app:facts_remembered": 1}
    assert all("temp:draft" not in e.actions.state_delta for e in got.events)


async def test_example_agent_runs_against_make_run(server_url: str, app_name: str) -> None:
    result = await adk_agent.main(server_url, app_name=app_name, user_id="alice")

    assert result["replies"] == ["Noted: you like green tea.", "You like green tea."]
    assert result["first_session_state"] == {
        "last_tool": "remember",
        "user:fact": "like green tea",
        "app:facts_remembered": 1,
    }
    assert result["second_session_state"] == {"user:fact": "like green tea", "app:facts_remembered": 1}
    assert result["user_state"] == {"fact": "like green tea"}
    assert "I like green tea, remember that." in result["recalled"]
    assert result["wall_time_s"] > 0


async def test_an_invocation_spanning_a_server_compaction_completes(server_url: str, app_name: str) -> None:
    """The server compacts the session in the middle of a Runner invocation (a tool asks for it, as a scheduled
    sweep would do it unasked): the invocation's next appends, conditional on the version it holds, are stored."""
    from google.adk.agents.llm_agent import LlmAgent
    from google.genai import types

    async with AsyncClient(server_url) as client:
        service = RemoteSessionService(client)
        session = await service.create_session(app_name=app_name, user_id="u1")
        for i in range(12):
            author, role = ("user", "user") if i % 2 == 0 else ("assistant", "model")
            text = f"turn {i}: planning the trip to Lisbon, the museums and the tram lines"
            await client.append_event(
                app_name, "u1", session.id, {"author": author, "content": {"role": role, "parts": [{"text": text}]}}
            )

        compactions: list[bool] = []

        async def tidy_up() -> dict[str, str]:
            """Tidy up the conversation."""
            compactions.append((await client.compact(app_name, "u1", session.id)).compacted)
            return {"status": "done"}

        script = [types.Part(function_call=types.FunctionCall(name="tidy_up", args={})), types.Part(text="All tidy.")]
        agent = LlmAgent(name="assistant", model=adk_agent.ScriptedModel(script=script), tools=[tidy_up])
        runner = Runner(app_name=app_name, agent=agent, session_service=service)
        replies = await adk_agent.ask(runner, "u1", session.id, "Please tidy up.")
        # The next invocation reads the compacted session (ADK puts the summary in place of the turns it replaced).
        model = adk_agent.ScriptedModel(script=[types.Part(text="Lisbon it is.")])
        runner = Runner(app_name=app_name, agent=LlmAgent(name="assistant", model=model), session_service=service)
        replies += await adk_agent.ask(runner, "u1", session.id, "Where were we?")
        prompt = [p.text or "" for c in model.requests[0].contents for p in c.parts or []]

        stored = await RemoteSessionService(client, window=False).get_session(
            app_name=app_name, user_id="u1", session_id=session.id
        )
        window = await service.get_session(app_name=app_name, user_id="u1", session_id=session.id)
    assert compactions == [True]
    assert replies == ["All tidy.", "Lisbon it is."]
    assert prompt[-1] == "Where were we?" and sum("turn 0:" in text for text in prompt) == 1
    assert stored is not None
    kinds = ["compaction" if e.actions.compaction else e.author for e in stored.events[12:]]
    # The user's message and the call before the compaction, the tool's answer and the reply after it.
    assert kinds == ["user", "assistant", "compaction", "assistant", "assistant", "user", "assistant"]
    # What a turn reads: the summary and what follows the events it covers, never the turns it replaced.
    assert window is not None and [e.id for e in window.events] == [
        e.id for e in stored.events if e.actions.compaction or (e.timestamp > _covered_until(stored))
    ]
    assert not any("turn 0:" in (p.text or "") for e in window.events if e.content for p in e.content.parts or [])


def _covered_until(session: Session) -> float:
    ends = [e.actions.compaction.end_timestamp for e in session.events if e.actions.compaction]
    return max(ends) if ends else float("-inf")


def _texts(request: Any) -> list[str]:
    return [p.text or "" for c in request.contents for p in c.parts or []]


async def test_a_turn_reads_the_window_and_a_rewind_never_reaches_the_model(server_url: str, app_name: str) -> None:
    """ADK's Runner on a long session reads the newest summary and what follows it (not the history), and after
    ``rewind_async`` no model request, and no summary made later, holds a rewound turn; the state is rewound as
    InMemorySessionService rewinds it."""
    from google.adk.agents.llm_agent import LlmAgent
    from google.genai import types

    async def scenario(service: BaseSessionService, client: AsyncClient | None) -> tuple[list[str], dict[str, Any]]:
        session = await service.create_session(app_name=app_name, user_id="u1")
        invocations: list[str] = []
        for turn in range(10):
            runner = Runner(
                app_name=app_name,
                agent=LlmAgent(name="assistant", model=adk_agent.ScriptedModel(script=[types.Part(text=f"ok {turn}")])),
                session_service=service,
            )
            text = f"fact {turn}: the code word is word{turn}, long enough to be worth summarising"
            await adk_agent.ask(runner, "u1", session.id, text)
            got = await service.get_session(app_name=app_name, user_id="u1", session_id=session.id)
            assert got is not None
            invocations.append(next(e.invocation_id for e in reversed(got.events) if e.author == "user"))
        if client is not None:  # the summary covers turns 0-4 (the newest 10 events stay raw)
            assert (await client.compact(app_name, "u1", session.id)).compacted
        runner = Runner(
            app_name=app_name,
            agent=LlmAgent(name="assistant", model=adk_agent.ScriptedModel(script=[])),
            session_service=service,
        )
        await runner.rewind_async(user_id="u1", session_id=session.id, rewind_before_invocation_id=invocations[3])
        model = adk_agent.ScriptedModel(script=[types.Part(text="after the rewind")])
        runner = Runner(app_name=app_name, agent=LlmAgent(name="assistant", model=model), session_service=service)
        await adk_agent.ask(runner, "u1", session.id, "What do you know?")
        got = await service.get_session(app_name=app_name, user_id="u1", session_id=session.id)
        assert got is not None
        return _texts(model.requests[0]), dict(got.state)

    expected_prompt, expected_state = await scenario(InMemorySessionService(), None)
    async with AsyncClient(server_url) as client:
        prompt, state = await scenario(RemoteSessionService(client), client)
        # A compaction after the rewind: its summary covers what is left, never the rewound turn.
        sid = (await client.list_sessions(app_name, "u1")).sessions[-1].id
        await client.compact(app_name, "u1", sid)
        full = await client.get_session(app_name, "u1", sid)
    rewound = [f"word{turn}" for turn in range(3, 10)]
    assert not any(word in text for text in expected_prompt for word in rewound)
    assert not any(word in text for text in prompt for word in rewound)
    assert any("word2" in text for text in prompt) and any("word2" in text for text in expected_prompt)
    assert prompt[-1] == expected_prompt[-1] == "What do you know?"
    assert state == expected_state
    # The summary that covered turns 3 and 4 went with them; nothing stored holds a rewound turn.
    stored = [p.text or "" for e in full.events if e.content for p in e.content.parts or []]
    stored += [p.text or "" for e in full.events if e.actions and e.actions.compaction
               for p in e.actions.compaction.compacted_content.parts or []]  # fmt: skip
    assert not any(word in text for text in stored for word in rewound)


def test_the_synchronous_runner_takes_turn_after_turn(server_url: str, app_name: str) -> None:
    """ADK's ``Runner.run`` runs each call's ``asyncio.run`` in a thread of its own: a new event loop per turn.
    The service (and its client, which it owns here) must serve every turn, as InMemorySessionService does."""
    from google.genai import types

    script = [types.Part(text=f"reply {turn}") for turn in range(3)]
    services: list[BaseSessionService] = [InMemorySessionService(), RemoteSessionService(base_url=server_url)]
    stored: list[Session] = []
    for service in services:
        runner = Runner(app_name=app_name, agent=adk_agent.build_agent(script), session_service=service)
        session = asyncio.run(service.create_session(app_name=app_name, user_id="sync"))
        for turn in range(3):
            message = types.Content(role="user", parts=[types.Part(text=f"turn {turn}")])
            events = list(runner.run(user_id="sync", session_id=session.id, new_message=message))
            assert [p.text for e in events if e.content for p in e.content.parts or []] == [f"reply {turn}"]
        got = asyncio.run(service.get_session(app_name=app_name, user_id="sync", session_id=session.id))
        assert got is not None
        stored.append(got)
    assert [_comparable(e) for e in stored[1].events] == [_comparable(e) for e in stored[0].events]
    assert len(stored[1].events) == 6


def test_a_client_serves_one_event_loop_after_another(server_url: str, app_name: str) -> None:
    """``asyncio.run`` twice over one client (ADK's memory thread-safety test does): each loop gets a connection
    pool of its own, and the pools of loops that closed are let go."""
    client = AsyncClient(server_url)
    service = RemoteSessionService(client)
    ids = [asyncio.run(service.create_session(app_name=app_name, user_id="loops")).id for _ in range(3)]
    listed = asyncio.run(service.list_sessions(app_name=app_name, user_id="loops"))
    assert sorted(s.id for s in listed.sessions) == sorted(ids)
    memory = RemoteMemoryService(client)
    for _ in range(2):  # the memory service over the same client, from two more loops
        found = asyncio.run(memory.search_memory(app_name=app_name, user_id="loops", query="green tea"))
        assert found.memories == []
    assert len(client._pools) == 1  # the three closed loops' pools were dropped when the fourth loop came
    asyncio.run(client.close())
    assert client._pools == {}
