"""Calibration of the memory search score and the choice of the default ``min_score``, on LoCoMo.

    .venv/bin/python -m bench.tuning.calibrate            # features, fit, threshold, report (about 2 minutes)

Each conversation is stored as the service stores it (one user; its sessions appended as events and saved with
policy ``all``; the in-memory backend, the offline MiniLM embedder), so every memory has the text, context and
vector the service gives it. For every question, every memory of its user yields two features that depend only
on the query and that memory (and the index's term statistics), never on the other candidates:

- ``cosine``: the cosine similarity of the query's and the memory's MiniLM embeddings;
- ``lexical``: the memory's BM25F score as a share of the query's ceiling (``SearchIndex.lexical_match``).

The score is a logistic model of those features, fitted on the TUNING conversations (``fit``): its direction
by a logistic regression with each question's evidence turns as positives and every other memory of the user
as negatives, its scale by Platt scaling over the top 10 the service retrieves, so that among retrieved
memories the score estimates the share that the question needs. The ranking stays the service's (hybrid
fusion); only the score and the cut are new. One model for hybrid search, one for lexical-only search (no
vectors: ``EMBEDDER=none``, or a query that could not be embedded). ``min_score`` is then the largest threshold
(on a grid of ``--step``) at which the tuning questions' recall@5 and @10 stay what the uncut ranking gives; the
VALIDATION conversations are reported with the same threshold, as are queries that should find nothing:
off-topic questions (``OFF_TOPIC``) and the adversarial (category 5) questions, which LoCoMo marks as not
answerable from the conversation (though they are about it: the wrong speaker, a detail never said).
The weights and thresholds printed are ``search.scoring.HYBRID_CALIBRATION`` and ``LEXICAL_CALIBRATION``.
"""

from __future__ import annotations

import argparse
import math
import os
import pickle
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

import local  # noqa: F401 - puts the shared layer on sys.path
from bench.quality.locomo import CATEGORIES, CachingEmbedder, Conversation, load_conversations
from bench.quality.locomo_service import store_conversation
from bench.quality.off_topic import OFF_TOPIC

TUNING = ("26", "30", "41")
VALIDATION = ("42", "43")


@dataclass
class Query:
    """One query against one user's memories: the features of every memory, and which memories it needs."""

    conversation: str
    category: int  # 1-5 as LoCoMo; 0 off-topic
    evidence: frozenset[str]
    ids: list[str]  # dia_ids, in index order
    cosine: npt.NDArray[np.float32]
    lexical: npt.NDArray[np.float32]
    current: list[str]  # the previous ranking's top 10


def collect(conversations: Sequence[Conversation]) -> list[Query]:
    """Store each conversation through the service (in memory) and compute every query's features."""
    os.environ.update({"BACKEND": "memory", "EMBEDDER": "minilm", "POWERTOOLS_METRICS_DISABLED": "true"})
    from agent_memory.composition import Services
    from agent_memory.config import Settings
    from agent_memory.providers.embedders import MiniLMEmbedder

    services = Services(Settings.from_env())
    embedder = CachingEmbedder(MiniLMEmbedder())
    services._built["embedder"] = embedder  # one embedding per text across queries
    out: list[Query] = []
    for c, conversation in enumerate(conversations):
        user = f"speaker-pair-{c}"
        store_conversation(services, user, conversation)
        view = services.memory_store.view("locomo", user)
        index = view.index
        dia = [view.records[i].custom_metadata["dia_id"] for i in index.ids]  # type: ignore[index]
        by_id = {i: d for i, d in zip(index.ids, dia, strict=True)}
        queries = [(q.question, q.category, frozenset(q.evidence)) for q in conversation.questions]
        queries += [(q, 0, frozenset()) for q in OFF_TOPIC]
        for text, category, evidence in queries:
            if category in CATEGORIES and not evidence:
                continue
            cosine = index.dense_scores(text, embedder)
            lexical = index.lexical_match(text)
            current = [by_id[i] for i, _ in index.search(text, 10, embedder)]
            out.append(Query(conversation.name, category, evidence, dia, cosine, lexical, current))
        print(f"conversation {conversation.name}: {len(index)} memories", flush=True)
    return out


# --- the model ---------------------------------------------------------------------------------------------------


def design(cosine: npt.NDArray[np.float32] | None, lexical: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
    """The model's inputs: intercept, lexical, and (hybrid) cosine."""
    columns = [np.ones_like(lexical, dtype=np.float64), lexical.astype(np.float64)]
    if cosine is not None:
        columns.append(cosine.astype(np.float64))
    return np.stack(columns, axis=1)


def fit_logistic(x: npt.NDArray[np.float64], y: npt.NDArray[np.float64], ridge: float = 1e-4) -> list[float]:
    """Logistic regression by Newton's method (a tiny ridge keeps it defined when a feature separates)."""
    w = np.zeros(x.shape[1])
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(x @ w)))
        gradient = x.T @ (p - y) + ridge * w
        hessian = (x * (p * (1 - p))[:, None]).T @ x + ridge * np.eye(x.shape[1])
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if float(np.abs(step).max()) < 1e-9:
            break
    return [float(v) for v in w]


def scores(q: Query, weights: Sequence[float], hybrid: bool) -> npt.NDArray[np.float64]:
    z = design(q.cosine if hybrid else None, q.lexical) @ np.asarray(weights)
    out: npt.NDArray[np.float64] = 1.0 / (1.0 + np.exp(-z))
    return out


def retrieved(q: Query, hybrid: bool, k: int = 10) -> list[int]:
    """Positions of the memories the service ranks first: its hybrid ranking (unchanged by calibration), or,
    lexical only, BM25F order (``lexical_match`` is BM25F over a per-query constant), matching memories only."""
    position = {d: i for i, d in enumerate(q.ids)}
    if hybrid:
        return [position[d] for d in q.current[:k]]
    order = np.lexsort((np.arange(len(q.lexical)), -q.lexical))[:k]
    return [int(i) for i in order if q.lexical[i] > 0]


def recall(queries: Sequence[Query], pick: Any, k: int) -> float:
    rows = [len(q.evidence & set(pick(q)[:k])) / len(q.evidence) for q in queries]
    return float(np.mean(rows)) if rows else 0.0


def evaluate(queries: Sequence[Query], weights: Sequence[float], hybrid: bool, threshold: float) -> dict[str, float]:
    """Recall@5/@10 of the ranking, before and after the cut at ``threshold``, and the share of queries left
    with nothing: answerable ones (a loss), off-topic and adversarial ones (the point of the cut)."""
    answerable = [q for q in queries if q.category in CATEGORIES]
    cache = {id(q): (retrieved(q, hybrid), scores(q, weights, hybrid)) for q in queries}

    def ranking(q: Query) -> list[str]:
        return [q.ids[i] for i in cache[id(q)][0]]

    def cut(q: Query) -> list[str]:
        positions, s = cache[id(q)]
        return [q.ids[i] for i in positions if s[i] >= threshold]

    def empty_share(category: int) -> float:
        chosen = [q for q in queries if q.category == category]
        return float(np.mean([not cut(q) for q in chosen])) if chosen else math.nan

    return {
        "questions": len(answerable),
        "before@5": recall(answerable, ranking, 5),
        "before@10": recall(answerable, ranking, 10),
        "after@5": recall(answerable, cut, 5),
        "after@10": recall(answerable, cut, 10),
        "answerable_empty": float(np.mean([not cut(q) for q in answerable])),
        "off_topic_empty": empty_share(0),
        "adversarial_empty": empty_share(5),
    }


def choose_threshold(queries: Sequence[Query], weights: Sequence[float], hybrid: bool, step: float) -> float:
    """The largest multiple of ``step`` that keeps recall@5 and @10 at least what the uncut ranking gives."""
    base = evaluate(queries, weights, hybrid, 0.0)
    best = 0.0
    for n in range(1, int(1 / step)):
        result = evaluate(queries, weights, hybrid, n * step)
        if result["after@5"] + 1e-9 < base["before@5"] or result["after@10"] + 1e-9 < base["before@10"]:
            break
        best = n * step
    return round(best, 6)


def training_rows(queries: Sequence[Query], hybrid: bool) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The retrieved top 10 of every answerable question: the population whose precision the score estimates."""
    xs, ys = [], []
    for q in queries:
        if q.category not in CATEGORIES:
            continue
        positions = retrieved(q, hybrid)
        xs.append(design(q.cosine[positions] if hybrid else None, q.lexical[positions]))
        ys.append(np.array([q.ids[i] in q.evidence for i in positions], dtype=np.float64))
    return np.concatenate(xs), np.concatenate(ys)


def fit(tuning: Sequence[Query], hybrid: bool) -> list[float]:
    """The score's weights (bias, lexical, cosine): the direction that tells evidence from every other memory
    of the user (a logistic fit over all memories; it separates off-topic queries best), then Platt scaling of
    that direction over the retrieved top 10, so that the score is the share of retrieved memories that are
    evidence."""
    train = [q for q in tuning if q.category in CATEGORIES]
    x_all = np.concatenate([design(q.cosine if hybrid else None, q.lexical) for q in train])
    y_all = np.concatenate([np.array([i in q.evidence for i in q.ids], dtype=np.float64) for q in train])
    direction = np.asarray(fit_logistic(x_all, y_all)[1:])
    x, y = training_rows(tuning, hybrid)
    z = x[:, 1:] @ direction
    bias, scale = fit_logistic(np.stack([np.ones_like(z), z], axis=1), y)
    return [bias, *(scale * direction).tolist()]


def reliability(
    queries: Sequence[Query], weights: Sequence[float], hybrid: bool
) -> list[tuple[str, int, float, float]]:
    """By score band, over the retrieved top 10 of the answerable questions: how many memories, their mean
    score, and the share of them that are evidence (a calibrated score has the two close)."""
    x, y = training_rows(queries, hybrid)
    predicted = 1.0 / (1.0 + np.exp(-(x @ np.asarray(weights))))
    rows = []
    for low, high in ((0, 0.05), (0.05, 0.1), (0.1, 0.2), (0.2, 0.4), (0.4, 0.6), (0.6, 1.01)):
        band = (predicted >= low) & (predicted < high)
        if band.any():
            label = f"{low:g}-{min(high, 1):g}"
            rows.append((label, int(band.sum()), float(predicted[band].mean()), float(y[band].mean())))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", help="keep the features in this file (pickle) and reuse them")
    parser.add_argument("--step", type=float, default=0.005, help="the threshold grid (default 0.005)")
    args = parser.parse_args()
    started = time.perf_counter()
    if args.cache and os.path.exists(args.cache):
        with open(args.cache, "rb") as f:
            queries = pickle.load(f)
    else:
        queries = collect(load_conversations())
        if args.cache:
            with open(args.cache, "wb") as f:
                pickle.dump(queries, f)
    tuning = [q for q in queries if q.conversation in TUNING]
    validation = [q for q in queries if q.conversation in VALIDATION]
    for hybrid in (True, False):
        weights = fit(tuning, hybrid)
        threshold = choose_threshold(tuning, weights, hybrid, args.step)
        names = "bias, lexical, cosine" if hybrid else "bias, lexical"
        print(f"\n{'hybrid' if hybrid else 'lexical only'}: weights ({names}) {[round(w, 3) for w in weights]}")
        print(f"min_score: {threshold}\n")
        print(
            "| split | questions | recall@5 | recall@10 | recall@5 cut | recall@10 cut | answerable with nothing "
            "| off-topic with nothing | adversarial with nothing |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        # lexical only, the service cuts nothing by default (index.LEXICAL_CALIBRATION says why): both rows
        for cut in (threshold,) if hybrid else (threshold, 0.0):
            for name, split in (("tuning", tuning), ("validation", validation)):
                r = evaluate(split, weights, hybrid, cut)
                print(
                    f"| {name}, min_score {cut:g} | {r['questions']} | {r['before@5']:.3f} | {r['before@10']:.3f} | "
                    f"{r['after@5']:.3f} | {r['after@10']:.3f} | {r['answerable_empty']:.3f} | "
                    f"{r['off_topic_empty']:.3f} | {r['adversarial_empty']:.3f} |"
                )
        # what the service scores with today (search.scoring's constants), on the same ranking: a refit is adopted
        # only when it is worth it, and these rows say what keeping the constants costs
        from agent_memory.search.scoring import HYBRID_CALIBRATION, LEXICAL_CALIBRATION

        current = HYBRID_CALIBRATION if hybrid else LEXICAL_CALIBRATION
        kept = [current.bias, current.lexical, current.dense] if hybrid else [current.bias, current.lexical]
        for name, split in (("tuning", tuning), ("validation", validation)):
            r = evaluate(split, kept, hybrid, current.min_score)
            print(
                f"| {name}, the service's constants, min_score {current.min_score:g} | {r['questions']} | "
                f"{r['before@5']:.3f} | {r['before@10']:.3f} | {r['after@5']:.3f} | {r['after@10']:.3f} | "
                f"{r['answerable_empty']:.3f} | {r['off_topic_empty']:.3f} | {r['adversarial_empty']:.3f} |"
            )
        print("\nvalidation, retrieved top 10 by score band: memories, mean score, share that is evidence")
        for band, count, mean, share in reliability(validation, weights, hybrid):
            print(f"  {band}: {count} memories, mean score {mean:.3f}, evidence {share:.3f}")
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
