"""What the client's framework integrations read per step, as history grows: HTTP requests and response bytes.

    .venv-client/bin/python -m bench.perf.integration_reads [--backend embedded|moto] [--turns 100] [--events 10000]

(run by the client's environment, which has LangGraph and ADK; `make test` builds it. The client is imported from
``clients/python/src``, the working tree, ahead of the copy installed in that environment.)

Starts `make run`'s server (``.venv/bin/python -m local.server``, ``--backend`` embedded or moto) in a child
process on free ports and a fresh data folder, the way the client's tests do, and counts every request the client
sends and the bytes of every response body it reads (an httpx transport that counts, passed to the client).

- LangGraph: a chat of ``--turns`` turns through ``RemoteCheckpointSaver`` (sync ``Client``), a graph of one node
  that answers each human message (~100 characters) with an ``AIMessage`` of ~300. For turns 1, 10, 50 and the
  last: the requests and bytes of the turn's ``graph.invoke`` (the whole turn: reads and writes), and of one
  ``graph.get_state`` (a ``get_tuple`` of the latest checkpoint).
- ADK: ``RemoteSessionService`` (an ``AsyncClient``) reads a session of 30 events and one of ``--events``, each
  seeded in batches of 100 chat events and compacted (``POST …/compact``), with ``get_session`` as ADK's Runner
  calls it every turn (no config): with ``window=True`` (the default: the newest summary and what follows it) and
  ``window=False`` (every event).

Flat is the goal: a step of turn 100 reading what a step of turn 1 reads, a 10,000-event session what a 30-event one.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict

import httpx
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

ROOT = Path(__file__).resolve().parents[2]
SERVER_PYTHON = Path(os.environ.get("AGENT_MEMORY_SERVER_PYTHON", ROOT / ".venv" / "bin" / "python"))
sys.path.insert(0, str(ROOT / "clients" / "python" / "src"))  # the working tree's client, not the installed copy

from agent_memory_client import AsyncClient, Client  # noqa: E402
from agent_memory_client.adk import RemoteSessionService  # noqa: E402
from agent_memory_client.langchain import RemoteCheckpointSaver  # noqa: E402

from local.probe import answers, free_port  # noqa: E402

USER_TEXT = "Tell me more about the harbour walk, the museum opening hours and where to eat near the old bridge"


# --- counting -----------------------------------------------------------------------------------------------


@dataclass
class Tally:
    requests: int = 0
    bytes: int = 0

    def since(self, start: Tally) -> Tally:
        return Tally(self.requests - start.requests, self.bytes - start.bytes)

    def copy(self) -> Tally:
        return Tally(self.requests, self.bytes)


class CountingTransport(httpx.HTTPTransport):
    """Counts each request sent and the body bytes of its response (read here, in full)."""

    def __init__(self, tally: Tally) -> None:
        super().__init__()
        self.tally = tally

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        response.read()
        self.tally.requests += 1
        self.tally.bytes += len(response.content)
        return response


class AsyncCountingTransport(httpx.AsyncHTTPTransport):
    """``CountingTransport`` for the ``AsyncClient``."""

    def __init__(self, tally: Tally) -> None:
        super().__init__()
        self.tally = tally

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        await response.aread()
        self.tally.requests += 1
        self.tally.bytes += len(response.content)
        return response


# --- the server (as local.server.spawn starts it, which this environment cannot import) -----------------


@contextlib.contextmanager
def local_server(backend: str = "embedded", startup_s: float = 90) -> Iterator[str]:
    """`make run` in a child process on free ports and a fresh data folder; yields its base URL, then stops it."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "VIRTUAL_ENV", "PYTHON"))}
    env |= {"PYTHONUNBUFFERED": "1"}
    with tempfile.TemporaryDirectory(prefix="agent-memory-bench-") as folder, open(Path(folder) / "log", "w+") as log:
        command = [str(SERVER_PYTHON), "-m", "local.server", "--port", str(port), "--backend", backend]
        command += ["--data-dir", str(Path(folder) / "data"), "--moto-port", str(free_port()), "--auth", "iam"]
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + startup_s
            while not answers(port):
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError(f"local server did not start:\n{log.read()[-5000:]}")
                time.sleep(0.1)
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


# --- LangGraph ------------------------------------------------------------------------------------------------


@dataclass
class TurnRow:
    turn: int
    messages: int
    invoke: Tally
    get_state: Tally


class State(TypedDict):
    messages: Annotated[list[Any], add_messages]


def chat_graph() -> StateGraph:
    def agent(state: State) -> dict[str, Any]:
        said = str(state["messages"][-1].content)
        text = f"You said: {said}. " + "Here is a longer answer about that, with some detail. " * 6
        return {"messages": [AIMessage(content=text[:300])]}

    builder = StateGraph(State)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    return builder


@dataclass
class Stored:
    """What a saver stores for a thread: bytes in all, and per checkpoint."""

    saver: str
    checkpoints: int
    bytes: int


def remote_storage(url: str, app: str, thread_id: str) -> Stored:
    """The thread's checkpointer events (checkpoints, values, writes, the messages) as the service stores them:
    each event's JSON, read back by an export."""
    with Client(url) as client:
        document = client.export_session(app, "lg", thread_id)
    assert isinstance(document, dict)
    events = [e for e in document["events"] if str(e.get("id", "")).startswith("lg")]
    size = sum(len(json.dumps(e, separators=(",", ":")).encode()) for e in events)
    return Stored("RemoteCheckpointSaver", sum(str(e["id"]).startswith("lgc-") for e in events), size)


def sqlite_storage(turns: int) -> Stored | None:
    """The same chat on LangGraph's SqliteSaver: the bytes of its checkpoints, metadata and writes."""
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver
    except ImportError:
        return None
    import sqlite3

    connection = sqlite3.connect(":memory:", check_same_thread=False)
    graph = chat_graph().compile(checkpointer=SqliteSaver(connection))
    config: Any = {"configurable": {"thread_id": "t"}}
    for turn in range(1, turns + 1):
        graph.invoke({"messages": [HumanMessage(content=f"Turn {turn}. {USER_TEXT}")]}, config)
    (count, checkpoints) = connection.execute(
        "SELECT COUNT(*), SUM(LENGTH(checkpoint) + LENGTH(metadata)) FROM checkpoints"
    ).fetchone()
    (writes,) = connection.execute("SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes").fetchone()
    return Stored("SqliteSaver", int(count), int(checkpoints) + int(writes))


def langgraph_chat(url: str, app: str, turns: int, reported: set[int]) -> tuple[list[TurnRow], str]:
    builder = chat_graph()

    tally = Tally()
    rows: list[TurnRow] = []
    with Client(url, transport=CountingTransport(tally)) as client:
        graph = builder.compile(checkpointer=RemoteCheckpointSaver(client, app_name=app, user_id="lg"))
        config: Any = {"configurable": {"thread_id": str(uuid.uuid4())}}
        for turn in range(1, turns + 1):
            start = tally.copy()
            result = graph.invoke({"messages": [HumanMessage(content=f"Turn {turn}. {USER_TEXT}")]}, config)
            invoke = tally.since(start)
            if turn in reported:
                start = tally.copy()
                snapshot = graph.get_state(config)
                got = tally.since(start)
                assert len(snapshot.values["messages"]) == len(result["messages"]) == 2 * turn
                rows.append(TurnRow(turn, 2 * turn, invoke, got))
    return rows, str(config["configurable"]["thread_id"])


# --- ADK ------------------------------------------------------------------------------------------------------


@dataclass
class SessionRow:
    events: int
    compacted: str
    window: Tally
    window_events: int
    full: Tally
    full_events: int


def chat_event(i: int) -> dict[str, Any]:
    role = "user" if i % 2 == 0 else "model"
    text = f"Event {i}. " + ("A question about the trip, the hotel and the trains. " * 2 if role == "user" else "")
    if role == "model":
        text += "An answer about the itinerary, with the times and the prices that matter. " * 4
    return {"author": role, "content": {"role": role, "parts": [{"text": text}]}}


async def adk_reads(url: str, app: str, sizes: list[int]) -> list[SessionRow]:
    tally = Tally()
    rows: list[SessionRow] = []
    async with AsyncClient(url, transport=AsyncCountingTransport(tally)) as client:
        windowed = RemoteSessionService(client)
        whole = RemoteSessionService(client, window=False)
        for size in sizes:
            session_id = f"s{size}-{uuid.uuid4().hex[:8]}"
            await client.create_session(app, "adk", session_id=session_id)
            for first in range(0, size, 100):
                batch = [chat_event(i) for i in range(first, min(first + 100, size))]
                await client.append_events(app, "adk", session_id, batch)
            outcome = await client.compact(app, "adk", session_id)
            compacted = "yes" if outcome.compacted else f"no ({outcome.reason})"
            reads = []
            for service in (windowed, whole):
                start = tally.copy()
                session = await service.get_session(app_name=app, user_id="adk", session_id=session_id)
                assert session is not None
                reads.append((tally.since(start), len(session.events)))
            (window, window_events), (full, full_events) = reads
            rows.append(SessionRow(size, compacted, window, window_events, full, full_events))
    return rows


# --- report ---------------------------------------------------------------------------------------------------


def kib(n: int) -> str:
    return f"{n / 1024:,.1f} KiB"


def report(turns: list[TurnRow], sessions: list[SessionRow], stored: list[Stored]) -> None:
    print("\nLangGraph `RemoteCheckpointSaver`: one chat turn (`graph.invoke`) and one `graph.get_state`\n")
    print("| turn | messages | invoke requests | invoke bytes | get_state requests | get_state bytes |")
    print("|---:|---:|---:|---:|---:|---:|")
    for t in turns:
        print(
            f"| {t.turn} | {t.messages} | {t.invoke.requests} | {kib(t.invoke.bytes)} "
            f"| {t.get_state.requests} | {kib(t.get_state.bytes)} |"
        )
    print("\nWhat the chat's thread stores, against LangGraph's SqliteSaver on the same graph and turns\n")
    print("| saver | checkpoints | bytes | bytes per checkpoint |")
    print("|---|---:|---:|---:|")
    for kept in stored:
        per = kept.bytes / max(1, kept.checkpoints)
        print(f"| {kept.saver} | {kept.checkpoints} | {kib(kept.bytes)} | {kib(int(per))} |")
    print("\nADK `RemoteSessionService.get_session` (no config, as the Runner asks each turn), after a compaction\n")
    print("| session events | compacted | window: requests | window: bytes | window: events |", end="")
    print(" window=False: requests | window=False: bytes | window=False: events |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for s in sessions:
        print(
            f"| {s.events:,} | {s.compacted} | {s.window.requests} | {kib(s.window.bytes)} | {s.window_events} "
            f"| {s.full.requests} | {kib(s.full.bytes)} | {s.full_events:,} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["embedded", "moto"], default="embedded", help="make run's backend")
    parser.add_argument("--turns", type=int, default=100, help="LangGraph chat turns")
    parser.add_argument("--events", type=int, default=10_000, help="events of the large ADK session")
    args = parser.parse_args()
    reported = {t for t in (1, 10, 50, args.turns) if t <= args.turns}
    app = f"bench-reads-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    with local_server(args.backend) as url:
        turns, thread_id = langgraph_chat(url, app, args.turns, reported)
        stored = [remote_storage(url, app, thread_id)]
        sessions = asyncio.run(adk_reads(url, app, [30, args.events]))
    baseline = sqlite_storage(args.turns)
    if baseline is None:
        print("(langgraph-checkpoint-sqlite is not installed: no SqliteSaver line)")
    else:
        stored.append(baseline)
    report(turns, sessions, stored)
    print(f"\n{args.backend} backend, app {app}, {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
