"""RemoteCheckpointSaver against `make run`: a StateGraph interrupted (interrupt()) and resumed on the same thread,
by a fresh saver (nothing kept in the process), sync and async; the thread's session holds the conversation as
events the service's context route reads; list, filters and delete_thread."""

from __future__ import annotations

import operator
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import _messages_delta_reducer, add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import create_react_agent
from langgraph.types import Command, interrupt

from agent_memory_client import AsyncClient, Client
from agent_memory_client.langchain import RemoteCheckpointSaver

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    approved: bool
    visits: Annotated[list[str], operator.add]


def draft(state: State) -> dict[str, Any]:
    call = {"id": "call-1", "name": "search_flights", "args": {"to": "Lisbon"}}
    return {
        "messages": [
            AIMessage(content="Let me look.", tool_calls=[call]),
            ToolMessage(content="TP 1234 at 9:05", tool_call_id="call-1", name="search_flights"),
            AIMessage(content="I can book TP 1234 to Lisbon."),
        ],
        "visits": ["draft"],
    }


def approve(state: State) -> dict[str, Any]:
    answer = interrupt({"question": "Book TP 1234?"})
    return {
        "approved": answer == "yes",
        "messages": [HumanMessage(content=f"Approval: {answer}")],
        "visits": ["approve"],
    }


def confirm(state: State) -> dict[str, Any]:
    return {"messages": [AIMessage(content="Booked." if state["approved"] else "Cancelled.")], "visits": ["confirm"]}


def graph(saver: RemoteCheckpointSaver) -> CompiledStateGraph:
    builder = StateGraph(State)
    builder.add_node("draft", draft)
    builder.add_node("approve", approve)
    builder.add_node("confirm", confirm)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "approve")
    builder.add_edge("approve", "confirm")
    builder.add_edge("confirm", END)
    return builder.compile(checkpointer=saver)


@pytest.fixture
def client(server_url: str) -> Iterator[Client]:
    with Client(server_url) as client:
        yield client


def _thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:12]}"}}


EXPECTED = [
    "Book me a flight to Lisbon",
    "Let me look.",
    "TP 1234 at 9:05",
    "I can book TP 1234 to Lisbon.",
    "Approval: yes",
    "Booked.",
]


def test_interrupted_graph_resumes_on_the_same_thread(client: Client, app_name: str) -> None:
    config = _thread()
    first = graph(RemoteCheckpointSaver(client, app_name=app_name, user_id="alice"))
    out = first.invoke({"messages": [HumanMessage(content="Book me a flight to Lisbon")]}, config)
    [pending] = out["__interrupt__"]
    assert pending.value == {"question": "Book TP 1234?"}

    # Another process would start from nothing but the service: a fresh saver, a fresh graph.
    resumed = graph(RemoteCheckpointSaver(client, app_name=app_name, user_id="alice"))
    state = resumed.get_state(config)
    assert state.next == ("approve",)
    assert state.values["visits"] == ["draft"]
    out = resumed.invoke(Command(resume="yes"), config)

    assert [m.content for m in out["messages"]] == EXPECTED
    assert out["approved"] is True
    assert out["visits"] == ["draft", "approve", "confirm"]
    assert isinstance(out["messages"][2], ToolMessage) and out["messages"][2].tool_call_id == "call-1"
    assert resumed.get_state(config).next == ()

    # The session is the conversation: the context route reads it as chat messages, each message once.
    context = client.get_context(app_name, "alice", config["configurable"]["thread_id"])
    texts = [m.get("content") for m in context.messages if m.get("content")]
    assert texts == EXPECTED
    tool_calls = [m for m in context.messages if m.get("tool_calls")]
    assert tool_calls[0]["tool_calls"][0]["function"]["name"] == "search_flights"


async def test_async_graph_interrupted_and_resumed(server_url: str, app_name: str) -> None:
    config = _thread()
    async with AsyncClient(server_url) as client:
        out = await graph(RemoteCheckpointSaver(app_name=app_name, async_client=client)).ainvoke(
            {"messages": [HumanMessage(content="Book me a flight to Lisbon")]}, config
        )
        assert out["__interrupt__"][0].value == {"question": "Book TP 1234?"}
        resumed = graph(RemoteCheckpointSaver(app_name=app_name, async_client=client))
        out = await resumed.ainvoke(Command(resume="no"), config)
        assert [m.content for m in out["messages"]][-2:] == ["Approval: no", "Cancelled."]
        assert out["approved"] is False
        history = [s async for s in resumed.aget_state_history(config)]
    assert history[0].next == ()
    assert [s.metadata["step"] for s in history] == sorted((s.metadata["step"] for s in history), reverse=True)


def test_list_filters_and_before(client: Client, app_name: str) -> None:
    saver = RemoteCheckpointSaver(client, app_name=app_name, user_id="bob")
    config = _thread()
    graph(saver).invoke({"messages": [HumanMessage(content="Book me a flight to Lisbon")]}, config)
    graph(saver).invoke(Command(resume="yes"), config)

    everything = list(saver.list(config))
    ids = [t.config["configurable"]["checkpoint_id"] for t in everything]
    assert ids == sorted(ids, reverse=True) and len(ids) == len(set(ids)) >= 5
    # Each checkpoint points at its parent, the oldest at none.
    assert [t.parent_config["configurable"]["checkpoint_id"] for t in everything[:-1]] == ids[1:]
    assert everything[-1].parent_config is None

    inputs = [t.config["configurable"]["checkpoint_id"] for t in saver.list(config, filter={"source": "input"})]
    assert inputs == [t.config["configurable"]["checkpoint_id"] for t in everything if t.metadata["source"] == "input"]
    assert 0 < len(inputs) < len(ids)
    assert len(list(saver.list(config, limit=2))) == 2
    before = list(saver.list(config, before=everything[1].config))
    assert [t.config["configurable"]["checkpoint_id"] for t in before] == ids[2:]

    # No config: every thread of the saver's app and user.
    other = _thread()
    graph(saver).invoke({"messages": [HumanMessage(content="hello")]}, other)
    threads = {t.config["configurable"]["thread_id"] for t in saver.list(None)}
    assert threads == {config["configurable"]["thread_id"], other["configurable"]["thread_id"]}


def test_get_tuple_of_a_named_checkpoint_has_its_pending_writes(client: Client, app_name: str) -> None:
    saver = RemoteCheckpointSaver(client, app_name=app_name)
    config = _thread()
    graph(saver).invoke({"messages": [HumanMessage(content="Book me a flight to Lisbon")]}, config)

    latest = saver.get_tuple(config)
    assert latest is not None
    named = saver.get_tuple(latest.config)
    assert named is not None and named.checkpoint["id"] == latest.checkpoint["id"]
    # The interrupt is a pending write of the checkpoint the graph stopped at.
    assert any(channel == "__interrupt__" for _, channel, _ in named.pending_writes or [])
    assert saver.get_tuple({"configurable": {"thread_id": "t-never-used"}}) is None


def test_delete_thread(client: Client, app_name: str) -> None:
    saver = RemoteCheckpointSaver(client, app_name=app_name)
    config = _thread()
    graph(saver).invoke({"messages": [HumanMessage(content="Book me a flight to Lisbon")]}, config)
    assert saver.get_tuple(config) is not None

    saver.delete_thread(config["configurable"]["thread_id"])
    assert saver.get_tuple(config) is None
    assert list(saver.list(config)) == []


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def echo(state: Chat) -> dict[str, Any]:
    return {"messages": [AIMessage(content=f"You said: {state['messages'][-1].content}")]}


def test_compaction_and_memory_saves_see_the_conversation(client: Client, app_name: str) -> None:
    """The thread is an ordinary session: the server compacts it and saves it to long-term memory from its message
    events, and the graph still reads its state from its checkpoints afterwards."""
    builder = StateGraph(Chat)
    builder.add_node("echo", echo)
    builder.add_edge(START, "echo")
    builder.add_edge("echo", END)
    chat = builder.compile(checkpointer=RemoteCheckpointSaver(client, app_name=app_name, user_id="carol"))
    config = _thread()
    thread_id = config["configurable"]["thread_id"]
    said = [f"Day {i}: I walked along the river in Lisbon and had a pastel de nata" for i in range(8)]
    for text in said:
        chat.invoke({"messages": [HumanMessage(content=text)]}, config)

    compacted = client.compact(app_name, "carol", thread_id)
    assert compacted.compacted, compacted.reason
    assert compacted.event is not None and "Lisbon" in compacted.event.model_dump_json()

    # make run's auto-save may be saving some of these at the same moment: an event it has claimed is skipped by
    # this save and becomes searchable when auto-save commits it (each event is saved once either way), so the
    # search is asked again until both have landed.
    client.save_memories(app_name, "carol", session_id=thread_id)
    deadline = time.monotonic() + 60
    while True:
        hits = client.search_memories(app_name, "carol", "pastel de nata by the river in Lisbon", top_k=100)
        if sorted(hit.text for hit in hits) == sorted(said) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    # The user's messages (the default policy), all of them, once each, and nothing of the checkpoints.
    assert sorted(hit.text for hit in hits) == sorted(said)

    fresh = builder.compile(checkpointer=RemoteCheckpointSaver(client, app_name=app_name, user_id="carol"))
    out = fresh.invoke({"messages": [HumanMessage(content="bye")]}, config)
    assert [m.content for m in out["messages"]][-4:] == [said[-1], f"You said: {said[-1]}", "bye", "You said: bye"]
    assert len(out["messages"]) == 2 * len(said) + 2


class ScriptedChatModel(GenericFakeChatModel):
    """A chat model answering from a script (no network); tools are bound by the agent, the script calls them."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        return self


def test_prebuilt_react_agent_interrupted_before_its_tool_and_resumed(client: Client, app_name: str) -> None:
    """LangGraph's prebuilt agent, stopped before running a tool (a human reviews the call), resumed by a fresh
    saver on the same thread."""
    booked: list[str] = []

    def book_flight(flight: str) -> str:
        """Book a flight."""
        booked.append(flight)
        return f"booked {flight}"

    script = iter(
        [
            AIMessage(content="", tool_calls=[{"id": "c1", "name": "book_flight", "args": {"flight": "TP 1234"}}]),
            AIMessage(content="Your flight TP 1234 is booked."),
        ]
    )
    model = ScriptedChatModel(messages=script)

    def agent(saver: RemoteCheckpointSaver) -> Any:
        return create_react_agent(model, [book_flight], checkpointer=saver, interrupt_before=["tools"])

    config = _thread()
    agent(RemoteCheckpointSaver(client, app_name=app_name)).invoke({"messages": [("user", "Book TP 1234")]}, config)
    assert booked == []

    resumed = agent(RemoteCheckpointSaver(client, app_name=app_name))
    state = resumed.get_state(config)
    assert state.next == ("tools",)
    assert state.values["messages"][-1].tool_calls[0]["args"] == {"flight": "TP 1234"}
    out = resumed.invoke(None, config)
    assert booked == ["TP 1234"]
    assert [m.content for m in out["messages"]] == [
        "Book TP 1234",
        "",
        "booked TP 1234",
        "Your flight TP 1234 is booked.",
    ]


class Letters(TypedDict):
    letters: Annotated[list[str], operator.add]


def _letters_graph(saver: Any) -> CompiledStateGraph:
    builder = StateGraph(Letters)
    for name in ("a", "b", "c"):
        builder.add_node(name, lambda state, name=name: {"letters": [name]})
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", "c")
    builder.add_edge("c", END)
    return builder.compile(checkpointer=saver)


def test_a_fork_leaves_the_old_branch_as_it_was(client: Client, app_name: str) -> None:
    """Time travel: ``update_state`` on an earlier checkpoint starts a branch; the original branch's checkpoints
    still read their own values (channel versions never collide across branches), as with InMemorySaver."""
    from langgraph.checkpoint.memory import InMemorySaver

    def travel(saver: Any) -> tuple[list[str], list[str], list[Any]]:
        app = _letters_graph(saver)
        config = {"configurable": {"thread_id": f"fork-{uuid.uuid4().hex[:8]}"}}
        app.invoke({"letters": []}, config)
        history = list(app.get_state_history(config))
        tip = history[0].config
        after_a = next(s for s in history if s.values.get("letters") == ["a"])
        forked = app.update_state(after_a.config, {"letters": ["x"]})
        app.invoke(None, forked)
        return app.get_state(tip).values["letters"], app.get_state(config).values["letters"], app.get_state(tip).next

    expected = travel(InMemorySaver())
    assert expected == (["a", "b", "c"], ["a", "x", "b", "c"], ())
    assert travel(RemoteCheckpointSaver(client, app_name=app_name)) == expected


def test_the_example_agent_interrupts_resumes_and_forks(server_url: str, app_name: str) -> None:
    import langgraph_agent

    result = langgraph_agent.main(server_url, app_name=app_name)
    asked = ["Book me a flight to Lisbon", "I can book TP 1234 to Lisbon at 9:05."]
    assert result["interrupted_with"] == "Book TP 1234?"
    assert result["booked"] == [*asked, "Approval: yes", "Booked."]
    assert result["forked"] == [*asked, "Actually, wait.", "Approval: no", "Cancelled."]
    assert result["original_branch"] == result["booked"]
    assert result["context_messages"] >= len(result["booked"])


class DeltaChat(TypedDict):
    messages: Annotated[list[AnyMessage], DeltaChannel(_messages_delta_reducer, snapshot_frequency=4)]


def test_a_delta_channel_thread_reads_as_in_memory_and_its_messages_reach_the_session(
    server_url: str, app_name: str
) -> None:
    """LangGraph's DeltaChannel stores a value only every few updates and rebuilds the rest from the ancestors'
    writes (``get_delta_channel_history``): the values, the history and the conversation read as on InMemorySaver,
    and the messages, which no checkpoint holds, reach the session as events (context, compaction, memory)."""

    def reply(state: DeltaChat) -> dict[str, Any]:
        last = state["messages"][-1]
        return {"messages": [AIMessage(content=f"echo: {last.content}", id=f"ai-{len(state['messages'])}")]}

    def run(saver: Any) -> tuple[list[tuple[str, str]], int]:
        builder = StateGraph(DeltaChat)
        builder.add_node("reply", reply)
        builder.add_edge(START, "reply")
        graph = builder.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "delta"}}
        for turn in range(9):
            graph.invoke({"messages": [HumanMessage(content=f"turn {turn}", id=f"h-{turn}")]}, config)
        values = graph.get_state(config).values["messages"]
        return [(m.type, str(m.content)) for m in values], len(list(graph.get_state_history(config)))

    expected = run(InMemorySaver())
    with Client(server_url) as client:
        got = run(RemoteCheckpointSaver(client, app_name=app_name))
        session = client.get_session(app_name, "langgraph", "delta")
    assert got == expected and len(got[0]) == 18
    texts = [p.text for e in session.events if e.content and e.author != "langgraph" for p in e.content.parts if p.text]
    assert texts == [text for _, text in expected[0]]


def test_writes_do_not_draw_on_uuid4_which_applications_patch(
    server_url: str, app_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An application (LangGraph's own tests) may make uuid4 deterministic: the saver's writes events must neither
    take the ids meant for the graph nor collide with each other (two tasks' writes to one checkpoint)."""
    fixed = uuid.UUID("00000000-0000-4000-8000-000000000001")
    monkeypatch.setattr(uuid, "uuid4", lambda: fixed)
    with Client(server_url) as client:
        saver = RemoteCheckpointSaver(client, app_name=app_name)
        config = saver.put(
            {"configurable": {"thread_id": "patched", "checkpoint_ns": ""}},
            {
                "v": 4,
                "id": "1ef00000-0000-6000-8000-000000000001",
                "ts": "2026-01-01T00:00:00+00:00",
                "channel_values": {},
                "channel_versions": {},
                "versions_seen": {},
                "updated_channels": None,
            },
            {"source": "input", "step": -1, "parents": {}},
            {},
        )
        saver.put_writes(config, [("a", 1)], "task-1")
        saver.put_writes(config, [("b", 2)], "task-2")
        found = saver.get_tuple(config)
    assert found is not None and sorted(found.pending_writes) == [("task-1", "a", 1), ("task-2", "b", 2)]
