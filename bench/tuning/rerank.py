"""The recall@10 candidates on LoCoMo, in process over the service's ranking (a scratch harness; tuning).

    .venv/bin/python -m bench.tuning.rerank --cache FILE [--static WORDLLAMA.npz] [--fusion-grid | --author-fit]

The first pass is the service's ranking (``SearchIndex.search``'s fusion, boosts and the 0.015 cut, rebuilt
here from its parts so that each candidate can be switched on: a static embedder as a third fused signal, a
penalty for memories that are mostly questions, sentence-level max-sim, a length prior, the calibrated score's
author term). Its top ``--depth`` candidates of each question get a feature vector; by default a logistic
regression over them is fitted on two tuning conversations and checked on the third (leave one conversation
out). ``--author-fit``: the calibrated score's author weight, by Platt scaling over the retrieved top 10 with
the other constants' logit as the offset, and tuning recall with the cut at a few weights. ``--fit``: the shipped
rerank's logistic regression (``search.scoring.RERANK``). ``--nonlinear``: reorderers
beyond it (standardised logistic regression, boosted trees in numpy, trees boosted on the logistic regression, more
training questions), held out one tuning conversation at a time, with ``--extra NAME`` for more features;
``--fit-trees``: the tree candidate that was built, measured through ``make run`` and not taken (docs/decisions).
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import numpy.typing as npt

import local  # noqa: F401 - puts the shared layer on sys.path
from agent_memory.providers.embedders import MiniLMEmbedder
from agent_memory.search import SearchIndex, scoring, stored
from agent_memory.search.lexical import tokenize
from agent_memory.search.types import DEFAULT_CONFIG
from bench.quality.locomo import (
    CATEGORIES,
    TUNING,
    CachingEmbedder,
    Conversation,
    documents,
    load_conversations,
    recall_at_k,
)

F = npt.NDArray[np.float64]
DOCS: dict[int, list] = {}  # type: ignore[type-arg]
DENSE_W = 0.5
STATIC_W = 0.0
QPEN = 0.0
AUTH_W = 0.0
LEN_W = 0.0
SENT: dict[str, npt.NDArray[np.float32]] = {}
SENT_MODE = ""  # "", "max", "add"
SENT_W = 0.0
SENT_ROWS: dict[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]] = {}  # doc position per row, rows
_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'])")
QMODE = "half"
QFLAG: dict[int, npt.NDArray[np.float32]] = {}
_SENT = re.compile(r"(?<=[.!?])\s+")


def question_share(text: str) -> float:
    parts = [x for x in _SENT.split(text.strip()) if x]
    return sum(x.endswith("?") for x in parts) / len(parts) if parts else 0.0


def question_flag(text: str) -> float:
    share = question_share(text)
    if QMODE == "half":
        return float(share >= 0.5)
    if QMODE == "ends":
        return float(text.strip().endswith("?"))
    if QMODE == "share":
        return share
    if QMODE == "all":
        return float(share == 1.0)
    raise ValueError(QMODE)


@dataclass
class QuestionRows:
    conversation: str
    category: int
    evidence: set[str]
    ids: list[str]  # candidates, first-pass order
    features: F  # (candidates, features)
    labels: npt.NDArray[np.bool_]


FEATURES = [
    "fused",  # weighted fusion before boosts
    "lex_mm",
    "dense_mm",
    "author",
    "time",
    "month",
    "cos_typed",
    "cos_rank",
    "lex_match",
    "text_share",  # BM25 of the text field alone / ceiling
    "ctx_share",
    "cover_text",  # share of the query's idf mass among the memory's own words
    "cover_all",
    "log_rank",
    "rel_top",  # first-pass ranking / the top's
    "log_len",
    "nb_max",  # best first-pass ranking of the +-1 neighbours (same session)
    "nb_next",
    "wl_cos",  # static (WordLlama) cosine of the query with neutral names and the memory's embedded text
    "wl_mm",
]

STATIC: dict[str, npt.NDArray[np.float32]] = {}


def load_static(path: Path) -> None:
    with np.load(path, allow_pickle=False) as archive:
        STATIC.update(zip(archive["texts"].tolist(), archive["vectors"], strict=True))


def question_rows(
    index: SearchIndex, conversation: Conversation, query: str, embedder: CachingEmbedder, depth: int, cut: float
) -> tuple[list[str], F, npt.NDArray[np.int64]]:
    config = DEFAULT_CONFIG
    n = len(index)
    lexical = index._lexical_scores(query, config)
    rewritten = index._dense_query(query, config)
    rows = index._dense_rows([query] if rewritten == query else [query, rewritten], embedder)
    assert rows is not None
    cosine, dense = rows[0], rows[-1]
    static = np.zeros(n, np.float32)
    if STATIC:
        matrix = np.stack([STATIC[stored.embedding_text(d)] for d in DOCS[id(index)]])
        static = (matrix @ STATIC[rewritten]).astype(np.float32)
    if SENT_MODE:
        owner, matrix = SENT_ROWS[id(index)]
        qv = embedder.embed([rewritten])[0]
        sims = matrix @ qv
        best = dense.copy()
        np.maximum.at(best, owner, sims)
        if SENT_MODE == "max":
            dense = best
        elif SENT_MODE == "add":
            dense = (dense + np.float32(SENT_W) * (best - dense)).astype(np.float32)
    fused = ((1 - DENSE_W - STATIC_W) * scoring.minmax(lexical) + DENSE_W * scoring.minmax(dense)).astype(np.float32)
    if STATIC_W:
        fused = (fused + STATIC_W * scoring.minmax(static)).astype(np.float32)
    authors = index._author_mask(query)
    parts = []
    for a, t, d in ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)):
        only = replace(config, author_boost=a, time_boost=t, date_boost=d)
        b = index._bonus(query, only, authors if a else None)
        parts.append(np.zeros(n, np.float32) if b is None else b)
    bonus = index._bonus(query, config, authors if config.author_boost else None)
    peak = np.float32(fused.max()) if fused.max() > 0 else np.float32(1.0)
    ranking = fused if bonus is None else (fused + peak * bonus).astype(np.float32)
    if LEN_W:
        ranking = (ranking + peak * np.float32(LEN_W) * np.log1p(index._len_text.astype(np.float32))).astype(np.float32)
    if QPEN:
        ranking = (ranking - peak * np.float32(QPEN) * QFLAG[id(index)]).astype(np.float32)
    ceiling = index._lexical_ceiling(query, config)
    match = lexical / np.float32(ceiling) if ceiling > 0 else np.zeros_like(lexical)
    if cut > 0:
        lowest = cut - 0.00005
        logits = scoring.HYBRID_CALIBRATION.logits(match.astype(np.float32), cosine) + np.float32(AUTH_W) * (
            parts[0] > 0
        )
        keep = logits >= np.float32(math.log(lowest / (1 - lowest)))
        ranking = np.where(keep, ranking, np.float32(-np.inf)).astype(np.float32)
    top = index._top_positions(ranking, depth, frozenset(), positive_only=False)
    # per-candidate lexical detail from the doc-major arrays
    term_map = index._term_map()
    post_ptr = index._inverted()[0]
    qterms = {t for t in (term_map.get(tok) for tok in tokenize(query)) if t is not None}
    idf = {
        t: math.log(1.0 + (n - int(post_ptr[t + 1] - post_ptr[t]) + 0.5) / (int(post_ptr[t + 1] - post_ptr[t]) + 0.5))
        for t in qterms
    }
    idf_total = sum(idf.values()) or 1.0
    norm = index._length_norm(config)
    k1p1 = config.k1 + 1.0
    wl_mm = scoring.minmax(static)
    lex_mm = scoring.minmax(lexical)
    dense_mm = scoring.minmax(dense)
    cos_order = np.argsort(-dense)
    cos_rank = np.empty(n, np.int64)
    cos_rank[cos_order] = np.arange(n)
    ids = index._ids
    pos = index._position_map()
    top_rank = float(ranking[top[0]]) if len(top) else 1.0
    feats = np.zeros((len(top), len(FEATURES)))
    for r, p in enumerate(top.tolist()):
        s, e = int(index._doc_ptr[p]), int(index._doc_ptr[p + 1])
        text_score = ctx_score = 0.0
        cover_text = cover_all = 0.0
        for t, tt, tc in zip(
            index._terms[s:e].tolist(), index._tf_text[s:e].tolist(), index._tf_ctx[s:e].tolist(), strict=True
        ):
            if t not in qterms:
                continue
            if tt:
                text_score += idf[t] * tt * k1p1 / (tt + norm[p])
                cover_text += idf[t]
            if tc:
                ctx_score += idf[t] * tc * k1p1 / (tc + norm[p])
            if tt or tc:
                cover_all += idf[t]
        doc_id = ids[p]
        sess, turn = doc_id[1:].split(":")
        nbs = [pos.get(f"D{sess}:{int(turn) + d}") for d in (-1, 1)]
        nbv = [float(ranking[q]) if q is not None and np.isfinite(ranking[q]) else 0.0 for q in nbs]
        feats[r] = [
            fused[p],
            lex_mm[p],
            dense_mm[p],
            parts[0][p] > 0,
            parts[1][p] > 0,
            parts[2][p] > 0,
            cosine[p],
            math.log1p(cos_rank[p]),
            match[p],
            text_score / ceiling if ceiling else 0.0,
            ctx_score / ceiling if ceiling else 0.0,
            cover_text / idf_total,
            cover_all / idf_total,
            math.log1p(r),
            float(ranking[p]) / top_rank if top_rank > 0 else 0.0,
            math.log1p(int(index._len_text[p])),
            max(nbv),
            nbv[1],
            static[p],
            wl_mm[p],
        ]
    return [ids[p] for p in top.tolist()], feats, top


def collect(
    conversations: Sequence[Conversation], embedder: CachingEmbedder, depth: int, cut: float
) -> list[QuestionRows]:
    out: list[QuestionRows] = []
    for conversation in conversations:
        docs = documents(conversation, 2, True)
        index = SearchIndex.build(docs, embedder)
        DOCS[id(index)] = docs
        if SENT:
            owner, vecs = [], []
            for p, t in enumerate(conversation.turns):
                parts = [x for x in _SPLIT.split(t.text) if x.strip()]
                if len(parts) > 1:
                    for x in parts:
                        owner.append(p)
                        vecs.append(SENT[f"{t.speaker}: {x}"])
            SENT_ROWS[id(index)] = (np.array(owner, np.int64), np.stack(vecs).astype(np.float32))
        QFLAG[id(index)] = np.array([question_flag(d.text) for d in docs], np.float32)
        for q in conversation.questions:
            if q.category not in CATEGORIES or not q.evidence:
                continue
            ids, feats, _ = question_rows(index, conversation, q.question, embedder, depth, cut)
            wanted = set(q.evidence)
            out.append(
                QuestionRows(conversation.name, q.category, wanted, ids, feats, np.array([i in wanted for i in ids]))
            )
    return out


def fit_logistic(x: F, y: npt.NDArray[np.bool_], l2: float = 1.0, iters: int = 50) -> F:
    """Newton's method on the L2-regularised log loss; the last column of the returned weights is the bias."""
    xb = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(xb.shape[1])
    yy = y.astype(np.float64)
    reg = np.full(xb.shape[1], l2)
    reg[-1] = 0.0
    for _ in range(iters):
        z = xb @ w
        p = 1.0 / (1.0 + np.exp(-z))
        g = xb.T @ (p - yy) + reg * w
        h = (xb * (p * (1 - p))[:, None]).T @ xb + np.diag(reg) + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(h, g)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w


def recalls(rows: Sequence[QuestionRows], order_fn) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    r5, r10 = [], []
    for row in rows:
        order = order_fn(row)
        ranked = [row.ids[i] for i in order]
        r5.append(recall_at_k(ranked, row.evidence, 5))
        r10.append(recall_at_k(ranked, row.evidence, 10))
    return float(np.mean(r5)), float(np.mean(r10))


def model_order(w: F, cols: list[int], depth: int):  # type: ignore[no-untyped-def]
    def order(row: QuestionRows) -> npt.NDArray[np.int64]:
        k = min(depth, len(row.ids))
        x = row.features[:k][:, cols]
        s = x @ w[:-1] + w[-1]
        head = np.argsort(-s, kind="stable")
        return np.concatenate([head, np.arange(k, len(row.ids))])

    return order


def cross_validate(
    rows: Sequence[QuestionRows], cols: list[int], depth: int, l2: float, names: Sequence[str]
) -> tuple[float, float]:
    ordered: list[QuestionRows] = []
    r5s, r10s, counts = [], [], []
    for held in names:
        train = [r for r in rows if r.conversation != held]
        test = [r for r in rows if r.conversation == held]
        x = np.vstack([r.features[:depth][:, cols] for r in train])
        y = np.concatenate([r.labels[:depth] for r in train])
        w = fit_logistic(x, y, l2)
        a, b = recalls(test, model_order(w, cols, depth))
        r5s.append(a * len(test))
        r10s.append(b * len(test))
        counts.append(len(test))
    del ordered
    return sum(r5s) / sum(counts), sum(r10s) / sum(counts)


def author_fit(tuning: Sequence[Conversation], embedder: CachingEmbedder, cut: float) -> None:
    global AUTH_W
    for weight in (0.0, 0.25, 0.4, 0.5, 1.0):
        AUTH_W = weight
        r5, r10 = recalls(collect(tuning, embedder, 10, cut), lambda r: np.arange(len(r.ids)))
        print(f"author term {weight}: tuning {r5:.3f} / {r10:.3f} with the cut at {cut}", flush=True)
    AUTH_W = 0.0
    rows = collect(tuning, embedder, 10, 0.0)
    c = scoring.HYBRID_CALIBRATION
    lex, cos, named = FEATURES.index("lex_match"), FEATURES.index("cos_typed"), FEATURES.index("author")
    z0 = np.concatenate([c.bias + c.lexical * r.features[:, lex] + c.dense * r.features[:, cos] for r in rows])
    x = np.concatenate([r.features[:, named] for r in rows])
    y = np.concatenate([r.labels for r in rows]).astype(np.float64)
    w = 0.0
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(z0 + w * x)))
        w -= float(((p - y) * x).sum()) / float((p * (1 - p) * x * x).sum())
    print(f"fitted author weight (Platt over the uncut top 10, offset the current logit): {w:.3f}")


EXTRAS: list[str] = []  # --extra: candidate features beyond the shipped ones, appended before the bias


_CONTENT_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)*")


def content_words(query: str) -> str:
    """The query without stop words and the neutral names' "they" / "their" (``--extra content_cos``)."""
    from agent_memory.search.lexical import STOP_WORDS

    words = [w for w in _CONTENT_WORD.findall(query) if w.lower() not in STOP_WORDS | {"they", "their"}]
    return " ".join(words) or query


def extra_features(  # type: ignore[no-untyped-def]
    first, top: npt.NDArray[np.int64], names: Sequence[str], index: SearchIndex, query: str, embedder=None
) -> F:
    """Cheap candidate features the service does not compute (yet), from the first pass, the candidates' vectors
    and doc-major rows, and (``content_cos``) one more query embedding."""
    dense, lexical = first.dense[top].astype(np.float64), first.lexical[top].astype(np.float64)
    config = DEFAULT_CONFIG
    vectors = None
    if index._vectors is not None and index._scales is not None:
        vectors = index._vectors[top].astype(np.float64) * index._scales[top, None]
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1), 1e-9)[:, None]
    cols = []
    for name in names:
        if name in ("head_max", "head_mean"):  # likeness to the first pass's top 5 (pseudo-relevance, dense)
            assert vectors is not None
            head = vectors[:5]
            if name == "head_max":
                sim = vectors @ head.T
                sim[np.arange(min(5, len(top))), np.arange(min(5, len(top)))] = -1.0  # not with itself
                cols.append(sim.max(axis=1))
            else:
                centroid = head.mean(axis=0)
                cols.append(vectors @ (centroid / max(float(np.linalg.norm(centroid)), 1e-9)))
        elif name in ("prf3", "prf5"):  # BM25 of the top 3 / 5's expansion terms (as bench/tuning/feedback.py), / best
            from bench.tuning.feedback import expansion_terms, weighted_bm25

            seeds = top[: int(name[-1])]
            weights = first.ranking[seeds].astype(np.float32)
            weights = weights - np.float32(min(0.0, float(weights.min()))) + np.float32(1e-3)
            terms = expansion_terms(index, query, seeds, weights, 10)
            extra = weighted_bm25(index, terms, config)[top].astype(np.float64) if terms else np.zeros(len(top))
            cols.append(extra / extra.max() if extra.max() > 0 else extra)
        elif name in ("pool_cos_z", "pool_lex_z"):  # z-scores among the candidates
            v = dense if name == "pool_cos_z" else lexical
            cols.append((v - v.mean()) / (v.std() + 1e-9))
        elif name == "content_cos":  # the cosine with the (neutral) query's content words alone
            assert vectors is not None and embedder is not None
            qv = embedder.embed([content_words(index._dense_query(query, config))])[0].astype(np.float64)
            cols.append(vectors @ (qv / max(float(np.linalg.norm(qv)), 1e-9)))
        elif name == "dense":  # the neutral query's cosine (the ranking's)
            cols.append(dense)
        elif name == "dense_pool_rank":  # log(1 + rank of the ranking's cosine among the candidates)
            rank = np.empty(len(top))
            rank[np.argsort(-dense, kind="stable")] = np.arange(len(top))
            cols.append(np.log1p(rank))
        elif name == "lex_pool_rank":
            rank = np.empty(len(top))
            rank[np.argsort(-lexical, kind="stable")] = np.arange(len(top))
            cols.append(np.log1p(rank))
        elif name == "dense_rel":  # cosine minus the pool's best
            cols.append(dense - dense.max())
        elif name == "lex_rel":  # BM25 as a share of the pool's best
            cols.append(lexical / lexical.max() if lexical.max() > 0 else np.zeros(len(top)))
        else:
            raise ValueError(name)
    return np.stack(cols, axis=1) if cols else np.zeros((len(top), 0))


def service_indexes(
    conversations: Sequence[Conversation], embedder: CachingEmbedder
) -> list[tuple[SearchIndex, list[str]]]:
    """Each conversation stored through the service (in memory, every session saved with policy ``all``, which
    stores what auto-save's default policy stores of two people's turns), as ``bench.tuning.calibrate`` stores it: the
    user's index and each memory's ``dia_id``, in index order."""
    import os

    from agent_memory.composition import Services
    from agent_memory.config import Settings
    from bench.quality.locomo_service import store_conversation

    os.environ.update({"BACKEND": "memory", "EMBEDDER": "minilm", "POWERTOOLS_METRICS_DISABLED": "true"})
    services = Services(Settings.from_env())
    services._built["embedder"] = embedder
    out = []
    for c, conversation in enumerate(conversations):
        user = f"speaker-pair-{c}"
        store_conversation(services, user, conversation)
        view = services.memory_store.view("locomo", user)
        assert view.index is not None
        dia = [str(view.records[i].custom_metadata["dia_id"]) for i in view.index.ids]  # type: ignore[index]
        out.append((view.index, dia))
    return out


def shipped_rows(
    conversations: Sequence[Conversation],
    embedder: CachingEmbedder,
    depth: int,
    min_score: float | None,
    service: bool = False,
    categories: Sequence[int] = CATEGORIES,
) -> list[QuestionRows]:
    """Each question's first-pass top ``depth`` with the features the service's rerank computes
    (``SearchIndex._first_pass`` and ``_rerank_features``, the shipped code, so that what is fitted is what runs);
    ``service``: over the memories as the service stores them (``service_indexes``), else ``bench.quality.locomo``'s;
    ``categories``: the questions' (category 5, adversarial, only as more training questions: ``--nonlinear``)."""
    config = DEFAULT_CONFIG
    out: list[QuestionRows] = []
    built = (
        service_indexes(conversations, embedder)
        if service
        else [(index := SearchIndex.build(documents(c, 2, True), embedder), index.ids) for c in conversations]
    )
    for conversation, (index, names) in zip(conversations, built, strict=True):
        for q in conversation.questions:
            if q.category not in categories or not q.evidence:
                continue
            first = index._first_pass(q.question, embedder, frozenset(), config, min_score)
            top = index._top_positions(first.ranking, depth, frozenset(), positive_only=first.positive_only)
            feats = index._rerank_features(q.question, first, top, config)
            if EXTRAS:
                extra = extra_features(first, top, EXTRAS, index, q.question, embedder)
                feats = np.hstack([feats[:, :-1], extra, feats[:, -1:]])
            ids = [names[p] for p in top.tolist()]
            wanted = set(q.evidence)
            out.append(
                QuestionRows(conversation.name, q.category, wanted, ids, feats, np.array([i in wanted for i in ids]))
            )
    return out


def kept_order(w: F, keep: int, depth: int):  # type: ignore[no-untyped-def]
    """The service's order: the first ``keep`` as they are, the rest of the top ``depth`` by the model."""

    def order(row: QuestionRows) -> npt.NDArray[np.int64]:
        k = min(depth, len(row.ids))
        if k <= keep + 1:
            return np.arange(len(row.ids))
        s = row.features[keep:k] @ w
        tail = keep + np.argsort(-s, kind="stable")
        return np.concatenate([np.arange(keep), tail, np.arange(k, len(row.ids))])

    return order


def fit_rows(rows: Sequence[QuestionRows], keep: int, depth: int, l2: float, tail_only: bool) -> F:
    """The logistic regression over the rows' top ``depth`` (or only the positions the rerank orders); the bias is
    the features' last column (``RERANK_FEATURES``' "bias"), so the fit adds none of its own."""
    start = keep if tail_only else 0
    x = np.vstack([r.features[start:depth] for r in rows])
    y = np.concatenate([r.labels[start:depth] for r in rows])
    w = fit_logistic(x[:, :-1], y, l2)  # fit_logistic appends its own unregularised bias column
    return w


def fit(tuning: Sequence[Conversation], embedder: CachingEmbedder, cut: float, keep: int, service: bool) -> None:
    """Leave one tuning conversation out over a small grid (depth, L2, rows fitted), the best by held-out
    recall@10 (ties: the smaller depth, then the larger L2), then that setting fitted on all three: the
    constants ``search.scoring.RERANK`` ships. The validation conversations are not read."""
    rows = shipped_rows(tuning, embedder, 50, cut, service)
    names = sorted({r.conversation for r in rows})
    base = recalls(rows, lambda r: np.arange(len(r.ids)))
    print(f"tuning first pass (min_score {cut}): {base[0]:.3f} / {base[1]:.3f} ({len(rows)} questions)", flush=True)
    results = []
    for depth in (20, 30, 50):
        for l2 in (1.0, 10.0):
            for tail_only in (False, True):
                hits5 = hits10 = 0.0
                per = []
                for held in names:
                    train = [r for r in rows if r.conversation != held]
                    test = [r for r in rows if r.conversation == held]
                    w = fit_rows(train, keep, depth, l2, tail_only)
                    a, b = recalls(test, kept_order(w, keep, depth))
                    hits5 += a * len(test)
                    hits10 += b * len(test)
                    per.append(f"{held} {b:.3f}")
                r5, r10 = hits5 / len(rows), hits10 / len(rows)
                results.append((r10, -depth, l2, tail_only, r5))
                rows_label = "tail rows" if tail_only else "all rows"
                print(f"depth {depth} l2 {l2} {rows_label}: LOCO {r5:.3f} / {r10:.3f} ({', '.join(per)})", flush=True)
    r10, neg_depth, l2, tail_only, r5 = max(results)
    depth = -neg_depth
    w = fit_rows(rows, keep, depth, l2, tail_only)
    fitted = recalls(rows, kept_order(w, keep, depth))
    print(f"chosen: depth {depth}, l2 {l2}, {'tail' if tail_only else 'all'} rows (LOCO {r5:.3f} / {r10:.3f})")
    print(f"fitted on all tuning, in-sample: {fitted[0]:.3f} / {fitted[1]:.3f}")
    names_w = ", ".join(f"{x:.4f}" for x in w)
    print(f"rerank_depth={depth}\nRERANK = Rerank(weights=({names_w}))  # {', '.join(scoring.RERANK_FEATURES)}")


# --------------------------------------------------------------------------------------------------------------
# --nonlinear: reorderers beyond the logistic regression (measured, none taken)
# --------------------------------------------------------------------------------------------------------------

Tree = list[tuple[int, float, int, int, float]]  # nodes: (feature or -1 for a leaf, threshold, left, right, value)


def grow_tree(binned: npt.NDArray[np.int64], cuts: list[F], g: F, h: F, depth: int, min_leaf: int, l2: float) -> Tree:
    """One regression tree on the gradients ``g`` and hessians ``h`` (``fit_trees``), best split first."""
    nodes: Tree = []
    f = binned.shape[1]

    def grow(rows: npt.NDArray[np.int64], level: int) -> int:
        gs, hs = float(g[rows].sum()), float(h[rows].sum())
        leaf = -gs / (hs + l2)
        best: tuple[float, int, int] = (1e-12, -1, -1)
        if level < depth and len(rows) >= 2 * min_leaf:
            parent = gs * gs / (hs + l2)
            for j in range(f):
                width = len(cuts[j]) + 1
                if width < 2:
                    continue
                b = binned[rows, j]
                gl = np.cumsum(np.bincount(b, g[rows], width))[:-1]
                hl = np.cumsum(np.bincount(b, h[rows], width))[:-1]
                cl = np.cumsum(np.bincount(b, None, width))[:-1]
                gain = gl * gl / (hl + l2) + (gs - gl) ** 2 / (hs - hl + l2) - parent
                gain[(cl < min_leaf) | (len(rows) - cl < min_leaf)] = -np.inf
                k = int(np.argmax(gain))
                if gain[k] > best[0]:
                    best = (float(gain[k]), j, k)
        me = len(nodes)
        if best[1] < 0:
            nodes.append((-1, 0.0, -1, -1, leaf))
            return me
        j, k = best[1], best[2]
        nodes.append((j, 0.0, -1, -1, 0.0))
        left = binned[rows, j] <= k
        nodes[me] = (j, float(cuts[j][k]), grow(rows[left], level + 1), grow(rows[~left], level + 1), 0.0)
        return me

    grow(np.arange(len(binned)), 0)
    return nodes


def fit_trees(
    x: F,
    y: npt.NDArray[np.bool_],
    trees: int,
    depth: int,
    rate: float,
    min_leaf: int,
    l2: float = 1.0,
    bins: int = 32,
    init: F | None = None,
) -> tuple[float, float, list[Tree]]:
    """Gradient-boosted regression trees on the log loss (Newton leaves, L2 ``l2``), splits at the features'
    quantiles (``bins``), each leaf at least ``min_leaf`` rows: (bias, rate, trees). ``init``: each row's starting
    logit (boosting on top of another model, e.g. the logistic regression's), else the base rate's."""
    n, f = x.shape
    cuts = [np.unique(np.quantile(x[:, j], np.linspace(0, 1, bins + 1)[1:-1])) for j in range(f)]
    binned = np.stack([np.searchsorted(cuts[j], x[:, j], side="left") for j in range(f)], axis=1)  # bin <= k: <= cut
    rate_y = float(np.clip(y.mean(), 1e-6, 1 - 1e-6))
    bias = 0.0 if init is not None else math.log(rate_y / (1 - rate_y))
    z = np.full(n, bias) if init is None else init.astype(np.float64).copy()
    target = y.astype(np.float64)
    out: list[Tree] = []
    for _ in range(trees):
        p = 1.0 / (1.0 + np.exp(-z))
        g, h = p - target, p * (1 - p)
        nodes = grow_tree(binned, cuts, g, h, depth, min_leaf, l2)
        out.append(nodes)
        z += rate * tree_values(nodes, x)
    return bias, rate, out


def tree_values(nodes: Tree, x: F) -> F:
    values = np.zeros(len(x))

    def walk(i: int, rows: npt.NDArray[np.int64]) -> None:
        j, cut, left, right, value = nodes[i]
        if j < 0:
            values[rows] = value
            return
        below = x[rows, j] <= cut
        walk(left, rows[below])
        walk(right, rows[~below])

    walk(0, np.arange(len(x)))
    return values


def loco_scores(rows: Sequence[QuestionRows], train_rows: Sequence[QuestionRows], fitter, keep: int, depth: int):  # type: ignore[no-untyped-def]
    """Held-out recall@5 / @10 (one tuning conversation out) of the order ``fitter`` gives below the top ``keep``
    (the service's order), and each question's held-out recall@10; ``fitter(x, y)`` returns a scoring function of
    feature rows (the last column the bias); ``train_rows`` may hold more questions than ``rows``."""
    names = sorted({r.conversation for r in rows})
    r5: dict[int, float] = {}
    r10: dict[int, float] = {}
    for held in names:
        train = [r for r in train_rows if r.conversation != held]
        x = np.vstack([r.features[:depth] for r in train])
        y = np.concatenate([r.labels[:depth] for r in train])
        score = fitter(x, y)
        for i, row in enumerate(rows):
            if row.conversation != held:
                continue
            k = min(depth, len(row.ids))
            order = np.arange(len(row.ids))
            if k > keep + 1:
                tail = keep + np.argsort(-score(row.features[keep:k]), kind="stable")
                order = np.concatenate([np.arange(keep), tail, np.arange(k, len(row.ids))])
            ranked = [row.ids[j] for j in order]
            r5[i], r10[i] = recall_at_k(ranked, row.evidence, 5), recall_at_k(ranked, row.evidence, 10)
    return float(np.mean(list(r5.values()))), float(np.mean(list(r10.values()))), [r10[i] for i in range(len(rows))]


def logistic_fitter(l2: float, standardise: bool = False):  # type: ignore[no-untyped-def]
    def fitter(x: F, y: npt.NDArray[np.bool_]):  # type: ignore[no-untyped-def]
        mu = x[:, :-1].mean(axis=0) if standardise else np.zeros(x.shape[1] - 1)
        sd = x[:, :-1].std(axis=0) + 1e-9 if standardise else np.ones(x.shape[1] - 1)
        w = fit_logistic((x[:, :-1] - mu) / sd, y, l2)
        return lambda rows: ((rows[:, :-1] - mu) / sd) @ w[:-1] + w[-1]

    return fitter


def trees_fitter(trees: int, depth: int, rate: float, min_leaf: int, on_logistic: bool):  # type: ignore[no-untyped-def]
    """Boosted trees over the features (not the bias column); ``on_logistic``: boosting from the logistic
    regression's logits (L2 1, the shipped fit), so the trees only correct it."""

    def fitter(x: F, y: npt.NDArray[np.bool_]):  # type: ignore[no-untyped-def]
        w = fit_logistic(x[:, :-1], y, 1.0) if on_logistic else None
        init = None if w is None else x[:, :-1] @ w[:-1] + w[-1]
        bias, rate_, model = fit_trees(x[:, :-1], y, trees, depth, rate, min_leaf, init=init)

        def score(rows: F) -> F:
            z = np.full(len(rows), bias) if w is None else rows[:, :-1] @ w[:-1] + w[-1]
            for nodes in model:
                z = z + rate_ * tree_values(nodes, rows[:, :-1])
            return z

        return score

    return fitter


def nonlinear(tuning: Sequence[Conversation], embedder: CachingEmbedder, cut: float, keep: int, service: bool) -> None:
    """Reorderers of the top 50 beyond the shipped logistic regression, by held-out
    recall@10 (one tuning conversation out) on the same rows: the logistic regression standardised, boosted trees
    (numpy, log loss), trees boosted on top of the logistic regression, and the logistic regression trained with
    the tuning conversations' category 5 (adversarial) questions too, which have evidence but are not scored. With
    ``--extra NAME`` the rows carry more features (``extra_features``). The validation conversations are not read."""
    depth = 50
    rows = shipped_rows(tuning, embedder, depth, cut, service)
    adversarial = shipped_rows(tuning, embedder, depth, cut, service, categories=(5,))
    base = recalls(rows, lambda r: np.arange(len(r.ids)))
    label = "service's memories" if service else "bench.quality.locomo's documents"
    extras = f", extra features {', '.join(EXTRAS)}" if EXTRAS else ""
    print(f"{label}{extras}: first pass (min_score {cut}) {base[0]:.3f} / {base[1]:.3f} ({len(rows)} questions)")
    _, shipped10, shipped = loco_scores(rows, rows, logistic_fitter(1.0), keep, depth)
    candidates: list[tuple[str, Sequence[QuestionRows], object]] = [("logistic regression, L2 1 (shipped)", rows, None)]
    candidates += [
        (f"logistic regression, standardised, L2 {l2:g}", rows, logistic_fitter(l2, True)) for l2 in (1, 10, 100)
    ]
    candidates.append(("logistic regression, L2 1, + category 5 questions in training", rows + adversarial, None))
    for trees, tree_depth, rate, min_leaf in (
        (50, 2, 0.1, 50),
        (100, 2, 0.1, 50),
        (300, 2, 0.05, 100),
        (100, 3, 0.1, 200),
    ):
        name = f"boosted trees, {trees} x depth {tree_depth}, rate {rate:g}, leaves >= {min_leaf}"
        candidates.append((name, rows, trees_fitter(trees, tree_depth, rate, min_leaf, False)))
    for trees, min_leaf in ((50, 200), (100, 100), (100, 200), (100, 400), (200, 200)):
        name = f"trees on the logistic regression, {trees} x depth 2, rate 0.05, leaves >= {min_leaf}"
        candidates.append((name, rows, trees_fitter(trees, 2, 0.05, min_leaf, True)))
    for name, train, fitter in candidates:
        r5, r10, per = loco_scores(rows, train, fitter or logistic_fitter(1.0), keep, depth)
        better = sum(a > b + 1e-9 for a, b in zip(per, shipped, strict=True))
        worse = sum(a < b - 1e-9 for a, b in zip(per, shipped, strict=True))
        print(
            f"{name}: held out {r5:.3f} / {r10:.4f} ({r10 - shipped10:+.4f}; {better} questions better, {worse} worse)",
            flush=True,
        )


TREE_GRID = tuple((trees, leaf) for trees in (50, 100, 200) for leaf in (100, 200, 400))  # depth 2, rate 0.05


def fit_rerank_trees(tuning: Sequence[Conversation], embedder: CachingEmbedder, cut: float, keep: int) -> None:
    """The tree candidate (built, measured through ``make run``, not taken; docs/decisions): the logistic regression (L2
    1, every row of the top 50) and trees of depth 2 boosted on its logits (rate 0.05), fitted on the tuning questions'
    rows over both representations of the conversations, ``bench.quality.locomo``'s documents and the memories as the
    service stores them (what ``make run`` searches); the trees' count and least leaf by the mean of the two held-out
    recall@10 (one tuning conversation out; ties: fewer trees, then larger leaves), then fitted on all three. The
    validation conversations are not read."""
    depth = 50
    docs = shipped_rows(tuning, embedder, depth, cut, False)
    service = shipped_rows(tuning, embedder, depth, cut, True)
    both = docs + service
    for label, rows in (("bench.quality.locomo's documents", docs), ("the service's memories", service)):
        base = recalls(rows, lambda r: np.arange(len(r.ids)))
        r5, r10, _ = loco_scores(rows, both, logistic_fitter(1.0), keep, depth)
        print(f"{label}: first pass {base[0]:.3f} / {base[1]:.4f}; logistic regression held out {r5:.3f} / {r10:.4f}")
    results = []
    for trees, leaf in TREE_GRID:
        fitter = trees_fitter(trees, 2, 0.05, leaf, True)
        held = [loco_scores(rows, both, fitter, keep, depth)[1] for rows in (docs, service)]
        results.append((float(np.mean(held)), -trees, leaf))
        print(
            f"{trees} trees, leaves >= {leaf}: held out recall@10 {held[0]:.4f} / {held[1]:.4f},"
            f" mean {np.mean(held):.4f}",
            flush=True,
        )
    mean, neg_trees, leaf = max(results)
    trees = -neg_trees
    x = np.vstack([r.features[:depth] for r in both])
    y = np.concatenate([r.labels[:depth] for r in both])
    w = fit_logistic(x[:, :-1], y, 1.0)
    bias, rate, model = fit_trees(x[:, :-1], y, trees, 2, 0.05, leaf, init=x[:, :-1] @ w[:-1] + w[-1])
    assert bias == 0.0
    del bias, rate
    scores = []
    for rows in (docs, service):

        def order(row: QuestionRows) -> npt.NDArray[np.int64]:
            k = min(depth, len(row.ids))
            if k <= keep + 1:
                return np.arange(len(row.ids))
            f = row.features[keep:k]
            z = f[:, :-1] @ w[:-1] + w[-1] + sum(0.05 * tree_values(nodes, f[:, :-1]) for nodes in model)
            tail = keep + np.argsort(-z, kind="stable")
            return np.concatenate([np.arange(keep), tail, np.arange(k, len(row.ids))])

        scores.append(recalls(rows, order)[1])
    print(f"chosen: {trees} trees, leaves >= {leaf} (held out mean {mean:.4f}); fitted on all tuning, in-sample")
    print(f"recall@10 {scores[0]:.4f} / {scores[1]:.4f} (documents / service's memories)")


def main() -> None:
    global STATIC_W, DENSE_W
    parser = argparse.ArgumentParser()
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--static", type=Path)
    parser.add_argument("--depth", type=int, default=50)
    parser.add_argument("--cut", type=float, default=0.015)
    parser.add_argument("--author-fit", action="store_true")
    parser.add_argument("--fusion-grid", action="store_true")
    parser.add_argument("--fit", action="store_true", help="fit the service's rerank (search.scoring.RERANK)")
    parser.add_argument("--keep", type=int, default=5, help="--fit: the first pass's top so many stay in place")
    parser.add_argument("--service", action="store_true", help="--fit: over the memories as the service stores them")
    parser.add_argument("--extra", action="append", default=[], help="--fit / --nonlinear: a feature to add")
    parser.add_argument("--nonlinear", action="store_true", help="reorderers beyond the logistic regression")
    parser.add_argument("--fit-trees", action="store_true", help="fit the shipped rerank (logistic + trees)")
    args = parser.parse_args()
    EXTRAS.extend(args.extra)
    embedder = CachingEmbedder(MiniLMEmbedder())
    embedder.load(args.cache)
    if args.static:
        load_static(args.static)
    conversations = load_conversations()
    tuning = [c for c in conversations if c.name in TUNING]
    if args.fit_trees:
        fit_rerank_trees(tuning, embedder, args.cut, args.keep)
        embedder.save(args.cache)
        return
    if args.nonlinear:
        nonlinear(tuning, embedder, args.cut, args.keep, args.service)
        embedder.save(args.cache)
        return
    if args.fit:
        fit(tuning, embedder, args.cut, args.keep, args.service)
        if args.service:
            embedder.save(args.cache)
        return
    if args.author_fit:
        author_fit(tuning, embedder, args.cut)
        return
    if args.fusion_grid:
        for dw, sw in (
            (0.5, 0.0),
            (0.45, 0.1),
            (0.4, 0.2),
            (0.5, 0.1),
            (0.5, 0.2),
            (0.4, 0.1),
            (0.3, 0.3),
            (0.35, 0.2),
        ):
            DENSE_W, STATIC_W = dw, sw
            rows = collect(tuning, embedder, 10, args.cut)
            base = recalls(rows, lambda r: np.arange(len(r.ids)))
            print(f"dense {dw} static {sw}: tuning {base[0]:.3f} / {base[1]:.3f}", flush=True)
        return
    rows = collect(tuning, embedder, args.depth, args.cut)
    names = sorted({r.conversation for r in rows})
    base = recalls(rows, lambda r: np.arange(len(r.ids)))
    print(f"tuning first pass: {base[0]:.3f} / {base[1]:.3f} ({len(rows)} questions)", flush=True)
    nwl = [i for i, f in enumerate(FEATURES) if not f.startswith("wl")]
    sets = {"all": list(range(len(FEATURES))), "no static": nwl}
    for label, cols in sets.items():
        for depth in (20, 30, 50):
            for l2 in (1.0, 10.0):
                r = cross_validate(rows, cols, depth, l2, names)
                print(f"{label} depth {depth} l2 {l2}: LOCO {r[0]:.3f} / {r[1]:.3f}", flush=True)


if __name__ == "__main__":
    main()
