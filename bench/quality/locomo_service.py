"""LoCoMo retrieval through the service: the same evaluation as ``bench.quality.locomo``, end to end.

    .venv/bin/python -m bench.quality.locomo_service [--only 26,30]

Each conversation is one user. Each of its sessions is created and its turns appended as events through
the HTTP handlers (author = speaker, the turn's text plus its image caption, ``custom_metadata.dia_id``, the
session date as the timestamp); each session is saved with policy ``all``; then every question of
categories 1–4 is searched (``POST …/memories/search``, top_k 10) and recall@k is computed from the
``dia_id`` of the returned memories, over all five conversations, then the tuning (26, 30, 41) and the
validation (42, 43) ones apart (choices are made on tuning only). DynamoDB and S3 are moto, in process; the
embedder is the offline MiniLM (``EMBEDDER`` to change it). All conversations share one table and bucket, each
its own user.
"""

from __future__ import annotations

import os
import sys
import time
from datetime import UTC, datetime
from typing import Any

import local  # noqa: F401 - puts the shared layer on sys.path
from bench.quality.locomo import SPLITS, Conversation, evaluate, load_conversations
from bench.quality.off_topic import OFF_TOPIC
from bench.support.environment import bench_environment

TABLE = "agent-memory-locomo"
BUCKET = "agent-memory-locomo-context"


def session_time(text: str) -> float:
    """LoCoMo's "1:56 pm on 8 May, 2023" as epoch seconds (UTC)."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC).timestamp()


def session_events(conversation: Conversation) -> list[tuple[str, list[dict[str, Any]]]]:
    """Each LoCoMo session as ``(session id, events)``: one event per turn, as an agent would append it (the
    speaker as author, the session's date plus the turn's index as its time, an image's caption in the text,
    the turn's ``dia_id`` as the event id and in ``custom_metadata``, where recall is scored)."""
    out = []
    for s in sorted({t.session for t in conversation.turns}):
        turns = [t for t in conversation.turns if t.session == s]
        start = session_time(turns[0].date) if turns[0].date else 0.0
        events = [
            {
                "id": t.dia_id,
                "author": t.speaker,
                "timestamp": start + i,
                "content": {
                    "role": "user",
                    "parts": [{"text": t.text + (f" [image: {t.caption}]" if t.caption else "")}],
                },
                "custom_metadata": {"dia_id": t.dia_id},
            }
            for i, t in enumerate(turns)
        ]
        out.append((f"session_{s}", events))
    return out


def store_conversation(services: Any, user: str, conversation: Conversation) -> None:
    """Each of the conversation's sessions created, appended in batches of 100 and saved to ``user``'s memory with
    policy ``all`` (what auto-save's default policy stores of two people's turns), through a ``Services``'
    session and memory services: how ``bench.tuning.calibrate`` and ``bench.tuning.rerank --service`` store LoCoMo."""
    from agent_memory.models import Event

    for session_id, events in session_events(conversation):
        services.sessions.create_session(app_name="locomo", user_id=user, session_id=session_id)
        for b in range(0, len(events), 100):
            services.sessions.append_events(
                app_name="locomo",
                user_id=user,
                session_id=session_id,
                events=[Event.model_validate(e) for e in events[b : b + 100]],
            )
        services.memories.save_session(app_name="locomo", user_id=user, session_id=session_id, policy="all")


def ingest_and_search(api: Any, conversation: Conversation, user: str, k: int) -> dict[str, list[str]]:
    """Ingest one conversation through the API as ``user`` and answer its questions: question -> dia_ids, best
    first."""

    def call(method: str, path: str, body: Any = None) -> Any:
        status, reply = api.call(method, path, body)
        assert status < 300, (method, path, status, reply)
        return reply

    base = f"/apps/locomo/users/{user}/sessions"
    for session_id, events in session_events(conversation):
        call("POST", base, {"session_id": session_id})
        for b in range(0, len(events), 100):
            call("POST", f"{base}/{session_id}/events", {"events": events[b : b + 100]})
        call("POST", f"/apps/locomo/users/{user}/memories", {"session_id": session_id, "policy": "all"})
    return search_answers(call, conversation, user, k)


def search_answers(call: Any, conversation: Conversation, user: str, k: int) -> dict[str, list[str]]:
    """Every question of ``conversation``, then the off-topic queries, searched as ``user`` with
    ``call(method, path, body) -> reply``: question -> dia_ids, best first."""
    answers: dict[str, list[str]] = {}
    for q in conversation.questions:
        hits = call("POST", f"/apps/locomo/users/{user}/memories/search", {"query": q.question, "top_k": k})
        answers[q.question] = [h["custom_metadata"]["dia_id"] for h in hits["memories"]]
    # Queries that should find nothing (answered under their own keys): off-topic ones, and LoCoMo's
    # adversarial questions (category 5: not answerable from the conversation)
    for text in OFF_TOPIC:
        hits = call("POST", f"/apps/locomo/users/{user}/memories/search", {"query": text, "top_k": k})
        answers[f"off-topic: {text}"] = [h["custom_metadata"]["dia_id"] for h in hits["memories"]]
    return answers


def empty_shares(answers: list[dict[str, list[str]]], conversations: list[Conversation]) -> tuple[float, float]:
    """The share of off-topic queries, and of adversarial questions, answered with no memory at all."""
    off_topic = [not a[key] for a in answers for key in a if key.startswith("off-topic: ")]
    adversarial = [
        not answers[c][q.question] for c, conv in enumerate(conversations) for q in conv.questions if q.category == 5
    ]
    return sum(off_topic) / len(off_topic), sum(adversarial) / len(adversarial)


def chosen(conversations: list[Conversation], argv: list[str]) -> list[Conversation]:
    """The conversations named after ``--only`` (comma-separated, e.g. ``--only 26``), else all of them."""
    if "--only" not in argv:
        return conversations
    names = set(argv[argv.index("--only") + 1].split(","))
    picked = [c for c in conversations if c.name in names]
    if not picked:
        raise SystemExit(f"--only names none of {[c.name for c in conversations]}")
    return picked


def main() -> None:
    bench_environment(TABLE, BUCKET, EMBEDDER=os.environ.get("EMBEDDER", "minilm"))
    conversations = chosen(load_conversations(), sys.argv[1:])
    started = time.perf_counter()
    from agent_memory.composition import services
    from agent_memory.config import settings
    from local.inprocess import in_process_aws
    from local.server import LocalApi
    from local.template import load_template

    for cached in (settings, services):
        cached.cache_clear()
    api = LocalApi(load_template())
    with in_process_aws(TABLE, BUCKET):  # one table and bucket for every conversation, each its own user
        answers = [ingest_and_search(api, c, f"speaker-pair-{i}", 10) for i, c in enumerate(conversations)]
    print(f"embedder: {os.environ['EMBEDDER']}; {time.perf_counter() - started:.0f} s\n")
    print_table("through the service", answers, conversations)


def print_table(title: str, answers: list[dict[str, list[str]]], conversations: list[Conversation]) -> None:
    """The recall table (all, tuning, validation, per category) and the shares answered with no memory, from each
    conversation's answers (``search_answers``)."""
    result = evaluate(lambda c, question, k: answers[c][question][:k], conversations)
    print(f"{result['questions']} questions\n")
    print(f"| {title} | recall@5 | recall@10 |")
    print("|---|---:|---:|")
    print(f"| all categories 1–4 | {result['recall@5']:.3f} | {result['recall@10']:.3f} |")
    names = {c.name for c in conversations}
    for split, members in SPLITS:  # chosen on tuning; validation is what an unseen conversation can expect
        row = result["by_split"].get(split)
        if row is None:  # none of its conversations in this run
            continue
        print(
            f"| {split} ({', '.join(m for m in members if m in names)}; {row['questions']} questions) | "
            f"{row['recall@5']:.3f} | "
            f"{row['recall@10']:.3f} |"
        )
    for category, row in result["by_category"].items():
        print(
            f"| category {category} ({row['questions']} questions) | {row['recall@5']:.3f} | {row['recall@10']:.3f} |"
        )
    off_topic, adversarial = empty_shares(answers, conversations)
    print(
        f"\nanswered with no memory: off-topic queries {off_topic:.3f} ({len(OFF_TOPIC)} per user), "
        f"adversarial (category 5) questions {adversarial:.3f}"
    )


if __name__ == "__main__":
    main()
