"""LoCoMo retrieval as a user of ``make run`` meets it: HTTP, auto-save with the default policy, no explicit save.

    .venv/bin/python -m bench.quality.locomo_http [--backend embedded|moto] [--only 26,30] [--agent]

The recall figure users meet. The real local server is started in a child process as ``make run`` starts it
(``python -m local.server``, the ``embedded`` SQLite backend by default, ``--backend moto`` for DynamoDB and S3
on moto), with the template's settings: auto-save on with the default policy (``AutoSavePolicy`` default, batches
of up to ``AutoSaveBatchSize`` records). Only the batching window is shortened (``AUTOSAVE_WINDOW_SECONDS``, 300 s
in the template, 10 s in ``make run``, ``--window``, 1 s here): it decides how long a batch waits, not what is
saved (a save's retrieval context is read from the session, whatever the batch holds).

Each conversation is one user. Its sessions are created and its turns appended over HTTP exactly as
``bench.quality.locomo_service`` appends them (``session_events``: content role ``user``, the speaker's name as author,
the session date as the timestamp, ``custom_metadata.dia_id``); nothing is saved explicitly. The bench then
waits until auto-save has stored every turn the default policy keeps (the profile route's ``memory_count``,
polled; it fails, with the server log's tail, when the count stops moving or the deadline passes), and asks
every question (``POST …/memories/search``, top_k 10) and the off-topic queries. The table is
``bench.quality.locomo_service``'s.

``--agent``: one more user per conversation, its second speaker sent as the agent (content role ``model``), to
show what the default policy keeps of an agent conversation (only the user's turns: questions whose evidence
the agent said cannot be found).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

import local  # noqa: F401 - puts the shared layer on sys.path
from agent_memory.policy.autosave import apply_policy, memory_text, parse_policy
from bench.quality.locomo import Conversation, load_conversations
from bench.quality.locomo_service import chosen, print_table, search_answers, session_events
from local.server import spawn

APP = "locomo"
STALL_S = 300.0  # no new memory for this long while some are missing: auto-save is stuck, not slow


def as_agent(conversation: Conversation, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``events`` with the conversation's second speaker sent as the agent (content role ``model``)."""
    agent = next(t.speaker for t in conversation.turns if t.speaker != conversation.turns[0].speaker)
    out = copy.deepcopy(events)
    for event in out:
        if event["author"] == agent:
            event["content"]["role"] = "model"
    return out


def kept_by_default(events: list[dict[str, Any]]) -> int:
    """How many of ``events`` the default auto-save policy turns into a memory."""
    policy = parse_policy("default")
    return sum(1 for e in events if (kept := apply_policy(e, policy)) is not None and memory_text(kept).strip())


def ingest(client: httpx.Client, conversation: Conversation, user: str, agent: bool) -> int:
    """Create the conversation's sessions and append its turns as ``user`` (no save); return how many memories
    auto-save should store."""
    expected = 0
    base = f"/apps/{APP}/users/{user}/sessions"
    for session_id, session in session_events(conversation):
        events = as_agent(conversation, session) if agent else session
        expected += kept_by_default(events)
        _call(client, "POST", base, {"session_id": session_id})
        for b in range(0, len(events), 100):
            _call(client, "POST", f"{base}/{session_id}/events", {"events": events[b : b + 100]})
    return expected


def drained(client: httpx.Client, expected: dict[str, int], deadline_s: float, log: Path) -> None:
    """Wait until auto-save has stored ``expected[user]`` memories for every user; raise when it never does."""
    started = time.monotonic()
    last_total, last_change = -1, started
    while True:
        counts = {u: _call(client, "GET", f"/apps/{APP}/users/{u}/profile")["memory_count"] for u in expected}
        total = sum(counts.values())
        if counts == expected:
            return
        now = time.monotonic()
        if total != last_total:
            last_total, last_change = total, now
        if now - started > deadline_s or now - last_change > STALL_S:
            tail = log.read_text(errors="replace")[-5000:]
            raise SystemExit(
                f"auto-save did not store every turn: {counts} of {expected} after {now - started:.0f} s\n{tail}"
            )
        time.sleep(2)


def _call(client: httpx.Client, method: str, path: str, body: Any = None) -> Any:
    reply = client.request(method, path, json=body)
    if reply.status_code >= 300:
        raise SystemExit(f"{method} {path}: {reply.status_code} {reply.text[:500]}")
    return reply.json() if reply.content else None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--backend", choices=("embedded", "moto"), default="embedded")
    parser.add_argument("--only", help="comma-separated conversation names (e.g. 26), else all five")
    parser.add_argument("--window", type=float, default=1.0, help="AUTOSAVE_WINDOW_SECONDS for the server")
    parser.add_argument("--deadline", type=float, default=3600.0, help="seconds to wait for auto-save to drain")
    parser.add_argument("--agent", action="store_true", help="also a row with the second speaker as the agent")
    args = parser.parse_args(argv)
    conversations = chosen(load_conversations(), ["--only", args.only] if args.only else [])
    embedder = os.environ.get("EMBEDDER", "minilm")
    # The template's settings but the window; quiet logs (the server's log file is read only on failure).
    env = {"AUTOSAVE_WINDOW_SECONDS": str(args.window), "EMBEDDER": embedder, "POWERTOOLS_LOG_LEVEL": "WARNING"}
    os.environ.pop("AUTOSAVE_POLICY", None)  # never a policy from the caller's shell: the default is measured
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="locomo-http-"))
        log = Path(folder) / "server.log"
        server = stack.enter_context(spawn(env, log_path=log, backend=args.backend, data_dir=Path(folder) / "data"))
        with httpx.Client(base_url=server.url, timeout=300) as client:
            users = {f"speaker-pair-{i}": (c, False) for i, c in enumerate(conversations)}
            if args.agent:
                users |= {f"agent-pair-{i}": (c, True) for i, c in enumerate(conversations)}
            expected = {u: ingest(client, c, u, agent) for u, (c, agent) in users.items()}
            appended = time.perf_counter() - started
            drained(client, expected, args.deadline, log)
            saved = time.perf_counter() - started

            def call(method: str, path: str, body: Any = None) -> Any:
                return _call(client, method, path, body)

            answers = {u: search_answers(call, c, u, 10) for u, (c, _) in users.items()}
    total = time.perf_counter() - started
    stored = sum(n for u, n in expected.items() if u.startswith("speaker"))
    as_agents = sum(n for u, n in expected.items() if u.startswith("agent"))
    print(
        f"embedder: {embedder}; backend: {args.backend}; auto-save window {args.window:g} s, default policy; "
        f"{stored} memories stored by auto-save{f' (+ {as_agents} for the agent rows)' if args.agent else ''}; "
        f"appended in {appended:.0f} s, all saved at {saved:.0f} s, total {total:.0f} s\n"
    )
    print_table(
        "through make run's HTTP routes, auto-save",
        [answers[f"speaker-pair-{i}"] for i in range(len(conversations))],
        conversations,
    )
    if args.agent:
        print()
        print_table(
            "second speaker as the agent (role model)",
            [answers[f"agent-pair-{i}"] for i in range(len(conversations))],
            conversations,
        )


if __name__ == "__main__":
    main()
