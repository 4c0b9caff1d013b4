"""How the retrieval context a memory is stored with is written, measured on the TUNING conversations.

    .venv/bin/python -m bench.tuning.context_format --cache FILE [--format NAME ...] [--refit]

The service stores each memory's context as its two previous turns then the session date ("Caroline: … Melanie:
… Monday 08 May 2023"), ``bench.quality.locomo``'s documents as the LoCoMo date string then the turns ("1:56 pm on 8
May, 2023\\nCaroline: …\\nMelanie: …"). Each format below rebuilds the tuning conversations' memories as the
service stores them (the same texts, authors and timestamps: a session's start plus the turn's index), with
only the context written differently, and searches every question as the service does (``SearchIndex.search``,
top 10, the calibrated cut, the shipped rerank). ``service`` is checked against the memories stored through
the service itself (``bench.tuning.rerank.service_indexes``): the same rankings. ``--refit``: also the rerank refitted
on each format's rows (held out one tuning conversation at a time, as ``bench.tuning.rerank --fit``). The validation
conversations are never read.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

import local  # noqa: F401 - puts the shared layer on sys.path
from agent_memory.providers.embedders import MiniLMEmbedder
from agent_memory.search import Doc, SearchIndex, scoring, stored
from agent_memory.search.types import DEFAULT_CONFIG
from bench.quality.locomo import CATEGORIES, TUNING, CachingEmbedder, Conversation, load_conversations, recall_at_k
from bench.quality.locomo_service import session_time

PREVIOUS = 2
CONFIG = [DEFAULT_CONFIG]  # --set: a neighbouring setting of the service's configuration
CURRENT = [""]
PER_QUESTION: dict[str, dict[tuple[str, str], float]] = {}  # format -> (conversation, question) -> recall@10


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=UTC)


def service_date(ts: float) -> str:  # service/memories.py's _date_text
    return _dt(ts).strftime("%A %d %B %Y")


def locomo_date(ts: float) -> str:  # LoCoMo's own session string, "1:56 pm on 8 May, 2023"
    d = _dt(ts)
    return f"{d.hour % 12 or 12}:{d.minute:02d} {'am' if d.hour < 12 else 'pm'} on {d.day} {d:%B}, {d.year}"


def plain_date(ts: float) -> str:  # "8 May 2023"
    d = _dt(ts)
    return f"{d.day} {d:%B} {d.year}"


def weekday_date(ts: float) -> str:  # "Monday 8 May 2023"
    d = _dt(ts)
    return f"{d:%A} {d.day} {d:%B} {d.year}"


# name -> (date text of a timestamp, date first?, joiner); "service" also has the turn's reply (the next turn, by
# the other speaker: ``Doc.reply``, embedded after the context) as the service stores it with the reply
# context; the others have none
FORMATS: dict[str, tuple[Callable[[float], str], bool, str]] = {
    "service": (service_date, False, " "),
    "service, no reply (before the reply context)": (service_date, False, " "),
    "service, date first": (service_date, True, " "),
    "service, newline-joined": (service_date, False, "\n"),
    "locomo date, first (bench.quality.locomo's documents)": (locomo_date, True, "\n"),
    "locomo date, first, space-joined": (locomo_date, True, " "),
    "locomo date, last": (locomo_date, False, " "),
    "plain date, first": (plain_date, True, " "),
    "plain date, last": (plain_date, False, " "),
    "weekday date, first": (weekday_date, True, " "),
    "no date": (lambda ts: "", False, " "),
    "locomo day, first": (lambda ts: f"{_dt(ts).day} {_dt(ts):%B}, {_dt(ts).year}", True, "\n"),
    "locomo time and day, last, newline-joined": (locomo_date, False, "\n"),
}

# --dense-format: the embedded text's context written in another format than the lexical field's (a diagnosis:
# which side a format's gain comes from)
DENSE_CONTEXT: dict[str, str] = {}
_EMBEDDING_TEXT = stored.embedding_text


def _embedding_text(doc: Doc) -> str:
    context = DENSE_CONTEXT.get(doc.id)
    return _EMBEDDING_TEXT(doc if context is None else replace(doc, context=context))


stored.embedding_text = _embedding_text


def memories(conversation: Conversation, fmt: str) -> tuple[list[Doc], list[str]]:
    """The conversation's memories as the service stores them (``bench.quality.locomo_service.session_events``: a
    session's start plus the turn's index as the timestamp; ``"{author}: {text}"``), context in format ``fmt``."""
    date_of, first, join = FORMATS[fmt]
    docs: list[Doc] = []
    names: list[str] = []
    for s in sorted({t.session for t in conversation.turns}):
        turns = [t for t in conversation.turns if t.session == s]
        start = session_time(turns[0].date) if turns[0].date else 0.0
        history: list[str] = []
        said = [f"{t.speaker}: {t.text}" + (f" [image: {t.caption}]" if t.caption else "") for t in turns]
        for i, t in enumerate(turns):
            ts = start + i
            memory = said[i]
            date = date_of(ts)
            parts = ([date] if first else []) + history + ([] if first else [date])
            reply = fmt == "service" and i + 1 < len(turns) and turns[i + 1].speaker != t.speaker
            context = join.join(p for p in parts if p)
            docs.append(Doc(t.dia_id, memory, context, t.speaker, ts, said[i + 1] if reply else ""))
            names.append(t.dia_id)
            history = [*history, memory][-PREVIOUS:]
    return docs, names


def search_recalls(
    built: Sequence[tuple[SearchIndex, list[str]]], conversations: Sequence[Conversation], embedder: CachingEmbedder
) -> dict[str, tuple[float, float, int]]:
    """Per conversation and overall: recall@5, recall@10 and the number of questions, as the service searches."""
    per: dict[str, list[tuple[float, float]]] = {}
    for conversation, (index, names) in zip(conversations, built, strict=True):
        for q in conversation.questions:
            if q.category not in CATEGORIES or not q.evidence:
                continue
            found = index.search(q.question, 10, embedder, config=CONFIG[0], min_score=None)
            position = {doc_id: k for k, doc_id in enumerate(index.ids)}
            hits = [names[position[doc_id]] for doc_id, _ in found]
            PER_QUESTION.setdefault(CURRENT[0], {})[(conversation.name, q.question)] = recall_at_k(hits, q.evidence, 10)
            per.setdefault(conversation.name, []).append(
                (recall_at_k(hits, q.evidence, 5), recall_at_k(hits, q.evidence, 10))
            )
    out = {
        name: (float(np.mean([a for a, _ in r])), float(np.mean([b for _, b in r])), len(r)) for name, r in per.items()
    }
    every = [x for r in per.values() for x in r]
    out["tuning"] = (float(np.mean([a for a, _ in every])), float(np.mean([b for _, b in every])), len(every))
    return out


def line(label: str, result: dict[str, tuple[float, float, int]]) -> str:
    cells = " | ".join(f"{result[n][0]:.3f} / {result[n][1]:.3f}" for n in (*TUNING, "tuning"))
    return f"| {label} | {cells} |"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--format", action="append", default=[], help="a format of FORMATS (default: all)")
    parser.add_argument("--check-service", action="store_true", help="also search the service's own memories")
    parser.add_argument("--dense-format", help="the embedded text's context in this format (diagnosis)")
    parser.add_argument("--set", action="append", default=[], help="NAME=VALUE of SearchConfig, e.g. dense_weight=0.4")
    parser.add_argument("--refit", action="store_true", help="also the rerank refitted on each format's rows")
    args = parser.parse_args()
    embedder = CachingEmbedder(MiniLMEmbedder())
    embedder.load(args.cache)
    if args.set:
        changes = {k: float(v) for k, v in (item.split("=", 1) for item in args.set)}
        CONFIG[0] = replace(DEFAULT_CONFIG, **changes)  # type: ignore[arg-type]
        print(f"SearchConfig: {changes}")
    tuning = [c for c in load_conversations() if c.name in TUNING]  # the validation conversations are not read
    print(f"| context format (tuning recall@5 / @10) | {' | '.join(TUNING)} | tuning |")
    print("|---|" + "---:|" * (len(TUNING) + 1))
    if args.check_service:
        from bench.tuning.rerank import service_indexes

        built = service_indexes(tuning, embedder)
        CURRENT[0] = "the service's own memories"
        print(
            line(
                "the service's own memories (bench.tuning.rerank.service_indexes)",
                search_recalls(built, tuning, embedder),
            )
        )
        embedder.save(args.cache)
    for fmt in args.format or list(FORMATS):
        built = []
        for c in tuning:
            docs, names = memories(c, fmt)
            DENSE_CONTEXT.clear()  # by dia_id: one conversation at a time
            if args.dense_format:
                DENSE_CONTEXT.update((d.id, d.context) for d in memories(c, args.dense_format)[0])
            built.append((SearchIndex.build(docs, embedder), names))
        CURRENT[0] = fmt
        label = fmt if not args.dense_format else f"lexical: {fmt}; embedded: {args.dense_format}"
        print(line(label, search_recalls(built, tuning, embedder)), flush=True)
        embedder.save(args.cache)
        if args.refit:
            refit(built, tuning, embedder)
    first = next(iter(PER_QUESTION))
    for fmt, recall in PER_QUESTION.items():
        if fmt == first:
            continue
        diff = [recall[k] - PER_QUESTION[first][k] for k in recall]
        better, worse = sum(d > 0 for d in diff), sum(d < 0 for d in diff)
        print(f"    {fmt} against {first}: recall@10 better on {better} questions, worse on {worse}")


def refit(
    built: Sequence[tuple[SearchIndex, list[str]]], tuning: Sequence[Conversation], embedder: CachingEmbedder
) -> None:
    """The shipped rerank against one refitted on these rows (depth 50, L2 1, every row, as shipped), held out one
    tuning conversation at a time."""
    from bench.tuning.rerank import QuestionRows, fit_rows, kept_order, recalls

    config = DEFAULT_CONFIG
    rows: list[QuestionRows] = []
    for conversation, (index, names) in zip(tuning, built, strict=True):
        for q in conversation.questions:
            if q.category not in CATEGORIES or not q.evidence:
                continue
            first = index._first_pass(q.question, embedder, frozenset(), config, None)
            top = index._top_positions(first.ranking, 50, frozenset(), positive_only=first.positive_only)
            feats = index._rerank_features(q.question, first, top, config)
            ids = [names[p] for p in top.tolist()]
            wanted = set(q.evidence)
            rows.append(
                QuestionRows(conversation.name, q.category, wanted, ids, feats, np.array([i in wanted for i in ids]))
            )
    shipped = recalls(rows, kept_order(np.asarray(scoring.RERANK.weights), 5, 50))
    first_pass = recalls(rows, lambda r: np.arange(len(r.ids)))
    held = []
    for name in TUNING:
        train = [r for r in rows if r.conversation != name]
        test = [r for r in rows if r.conversation == name]
        w = fit_rows(train, 5, 50, 1.0, False)
        held.append((name, len(test), recalls(test, kept_order(w, 5, 50))))
    total = sum(n for _, n, _ in held)
    r10 = sum(n * r[1] for _, n, r in held) / total
    per = ", ".join(f"{name} {r[1]:.3f}" for name, _, r in held)
    print(
        f"    first pass {first_pass[0]:.3f} / {first_pass[1]:.3f}; shipped rerank {shipped[0]:.3f} / {shipped[1]:.3f};"
        f" refitted, held out: recall@10 {r10:.3f} ({per})",
        flush=True,
    )


if __name__ == "__main__":
    main()
