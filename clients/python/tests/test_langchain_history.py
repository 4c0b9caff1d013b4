"""RemoteChatMessageHistory against `make run`: messages in, the same messages out, clear; sync and async; and an
ADK agent's session read as LangChain messages."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from agent_memory_client import AsyncClient, Client
from agent_memory_client.langchain import RemoteChatMessageHistory


@pytest.fixture
def client(server_url: str) -> Iterator[Client]:
    with Client(server_url) as client:
        yield client


def conversation() -> list[BaseMessage]:
    return [
        SystemMessage(content="You are a travel agent."),
        HumanMessage(content="Find me a flight to Lisbon", id="m1"),
        AIMessage(
            content="",
            tool_calls=[{"id": "call-1", "name": "search_flights", "args": {"to": "Lisbon"}, "type": "tool_call"}],
            id="m2",
        ),
        ToolMessage(content="TP 1234 at 9:05", tool_call_id="call-1", name="search_flights", id="m3"),
        AIMessage(
            content=[{"type": "text", "text": "TP 1234 leaves at 9:05."}],
            response_metadata={"model_name": "scripted"},
            id="m4",
        ),
        HumanMessage(content="Book it", additional_kwargs={"source": "voice"}),
    ]


def _same(got: list[BaseMessage], sent: list[BaseMessage]) -> None:
    assert [type(m) for m in got] == [type(m) for m in sent]
    for g, s in zip(got, sent, strict=True):
        assert g.content == s.content
        if s.id is not None:
            assert g.id == s.id
        assert getattr(g, "tool_calls", None) == getattr(s, "tool_calls", None)
        assert getattr(g, "tool_call_id", None) == getattr(s, "tool_call_id", None)
        assert g.additional_kwargs == s.additional_kwargs
        assert g.response_metadata == s.response_metadata


def test_messages_in_messages_out_clear(client: Client, app_name: str) -> None:
    history = RemoteChatMessageHistory(client, app_name=app_name, user_id="alice", session_id="chat-1")
    assert history.messages == []

    history.add_messages(conversation()[:3])
    history.add_messages(conversation()[3:])
    _same(history.messages, conversation())
    # A second reader (another process) sees the same thing.
    _same(
        RemoteChatMessageHistory(client, app_name=app_name, user_id="alice", session_id="chat-1").messages,
        conversation(),
    )
    # Other sessions and users are untouched.
    assert RemoteChatMessageHistory(client, app_name=app_name, user_id="bob", session_id="chat-1").messages == []

    history.clear()
    assert history.messages == []
    # The session stays (state and all): only its messages went, and the same messages can come back.
    session = client.get_session(app_name, "alice", "chat-1")
    assert session.events == [] and session.version > 0
    history.add_messages(conversation())
    _same(history.messages, conversation())
    RemoteChatMessageHistory(client, app_name=app_name, user_id="carol", session_id="never").clear()  # no session


async def test_async_history(server_url: str, app_name: str) -> None:
    async with AsyncClient(server_url) as client:
        history = RemoteChatMessageHistory(async_client=client, app_name=app_name, user_id="alice", session_id="chat-2")
        await history.aadd_messages(conversation())
        _same(await history.aget_messages(), conversation())
        await history.aclear()
        assert await history.aget_messages() == []


def test_an_adk_session_reads_as_messages(client: Client, app_name: str) -> None:
    """Events another client wrote (ADK's JSON: authors, model role, function call and response parts)."""
    session_id = f"adk-{uuid.uuid4().hex[:8]}"
    client.create_session(app_name, "u1", session_id=session_id)
    client.append_events(
        app_name,
        "u1",
        session_id,
        [
            {"author": "user", "content": {"role": "user", "parts": [{"text": "What's the weather?"}]}},
            {
                "author": "agent",
                "content": {"role": "model", "parts": [{"function_call": {"id": "f1", "name": "weather", "args": {}}}]},
            },
            {
                "author": "agent",
                "content": {
                    "role": "user",
                    "parts": [{"function_response": {"id": "f1", "name": "weather", "response": {"result": "sunny"}}}],
                },
            },
            {"author": "agent", "content": {"role": "model", "parts": [{"text": "It is sunny."}]}},
            {"author": "agent", "actions": {"state_delta": {"k": 1}}},  # nothing to say
        ],
    )
    messages = RemoteChatMessageHistory(client, app_name=app_name, user_id="u1", session_id=session_id).messages
    assert [type(m).__name__ for m in messages] == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]
    assert messages[1].tool_calls[0]["name"] == "weather"
    assert messages[2].content == "sunny" and messages[2].tool_call_id == "f1"
    assert messages[3].content == "It is sunny."


def every_field() -> list[BaseMessage]:
    """A message of every type langchain-core defines, each field set to something other than its default."""
    from langchain_core.messages import ChatMessage, FunctionMessage

    return [
        SystemMessage(content="Be brief.", id="s1", name="rules", additional_kwargs={"k": 1}),
        HumanMessage(content="Hi", id="h1", name="alice", example=True, response_metadata={"lang": "en"}),
        AIMessage(
            content="Let me check.",
            id="a1",
            name="agent",
            example=True,
            tool_calls=[{"id": "c1", "name": "lookup", "args": {"q": "x"}, "type": "tool_call"}],
            invalid_tool_calls=[
                {"id": "c2", "name": "lookup", "args": "{not json", "error": "bad JSON", "type": "invalid_tool_call"}
            ],
            usage_metadata={"input_tokens": 12, "output_tokens": 5, "total_tokens": 17},
            response_metadata={"model_name": "m", "finish_reason": "tool_calls"},
        ),
        ToolMessage(
            content="found",
            tool_call_id="c1",
            name="lookup",
            id="t1",
            artifact={"rows": [1, 2, 3]},
            status="error",
            additional_kwargs={"trace": "abc"},
        ),
        FunctionMessage(content="42", name="answer", id="f1"),
        ChatMessage(content="aside", role="narrator", id="x1", name="n"),
    ]


def test_every_message_field_round_trips_as_in_memory(client: Client, app_name: str) -> None:
    from langchain_core.chat_history import InMemoryChatMessageHistory

    reference = InMemoryChatMessageHistory()
    reference.add_messages(every_field())
    remote = RemoteChatMessageHistory(client, app_name=app_name, user_id="fields", session_id="all")
    remote.add_messages(every_field())
    read = RemoteChatMessageHistory(client, app_name=app_name, user_id="fields", session_id="all").messages
    assert [m.model_dump() for m in read] == [m.model_dump() for m in reference.messages]
