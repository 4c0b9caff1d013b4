"""A LangGraph agent whose checkpoints and conversation live in agent memory: run it against `make run`.

    make run                                    # in another terminal: the API on http://127.0.0.1:3000
    make example-langgraph                      # or: python clients/python/examples/langgraph_agent.py [--url URL]

A booking graph drafts an answer, stops for the user's approval (``interrupt``), and is resumed by a fresh
checkpointer (nothing kept in the process); then time travel: the approval is changed on an earlier checkpoint
(``update_state``), which forks the thread, and the original branch still reads as it was. The thread's
session holds the conversation as events, so the service's context route reads it as any other session.
No model: the nodes are plain functions.
"""

from __future__ import annotations

import argparse
import operator
import uuid
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, interrupt

from agent_memory_client import Client
from agent_memory_client.langchain import RemoteCheckpointSaver


class Booking(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    approved: bool
    steps: Annotated[list[str], operator.add]


def draft(state: Booking) -> dict[str, Any]:
    return {"messages": [AIMessage(content="I can book TP 1234 to Lisbon at 9:05.")], "steps": ["draft"]}


def approve(state: Booking) -> dict[str, Any]:
    answer = interrupt({"question": "Book TP 1234?"})  # the graph stops here until resumed with an answer
    return {
        "approved": answer == "yes",
        "messages": [HumanMessage(content=f"Approval: {answer}")],
        "steps": ["approve"],
    }


def confirm(state: Booking) -> dict[str, Any]:
    return {"messages": [AIMessage(content="Booked." if state["approved"] else "Cancelled.")], "steps": ["confirm"]}


def build_graph(checkpointer: RemoteCheckpointSaver) -> CompiledStateGraph:
    builder = StateGraph(Booking)
    builder.add_node("draft", draft)
    builder.add_node("approve", approve)
    builder.add_node("confirm", confirm)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "approve")
    builder.add_edge("approve", "confirm")
    builder.add_edge("confirm", END)
    return builder.compile(checkpointer=checkpointer)


def main(url: str, app_name: str = "langgraph_example", user_id: str = "alice") -> dict[str, Any]:
    """Run, interrupt, resume, fork; returns what each step saw (printed when run as a script)."""
    thread = {"configurable": {"thread_id": f"booking-{uuid.uuid4().hex[:8]}"}}
    with Client(url) as client:
        graph = build_graph(RemoteCheckpointSaver(client, app_name=app_name, user_id=user_id))
        graph.invoke({"messages": [HumanMessage(content="Book me a flight to Lisbon")]}, thread)
        asked = graph.get_state(thread).tasks[0].interrupts[0].value["question"]

        # Another process resumes the thread: a new checkpointer reads it back from the service.
        graph = build_graph(RemoteCheckpointSaver(client, app_name=app_name, user_id=user_id))
        graph.invoke(Command(resume="yes"), thread)
        booked = graph.get_state(thread)

        # Time travel: answer "no" on the checkpoint that waited for the approval; the thread forks there.
        waiting = next(s for s in graph.get_state_history(thread) if s.next == ("approve",))
        fork = graph.update_state(waiting.config, {"messages": [HumanMessage(content="Actually, wait.")]})
        graph.invoke(Command(resume="no"), fork)
        forked = graph.get_state(thread)

        context = client.get_context(app_name, user_id, thread["configurable"]["thread_id"], format="openai")
        return {
            "interrupted_with": asked,
            "booked": [m.content for m in booked.values["messages"]],
            "forked": [m.content for m in forked.values["messages"]],
            "original_branch": [m.content for m in graph.get_state(booked.config).values["messages"]],
            "context_messages": len(context.messages),
        }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:3000", help="the API (make run's default)")
    args = parser.parse_args()
    for key, value in main(args.url).items():
        print(f"{key}: {value}")
