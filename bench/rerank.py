"""Issue 13's recall@10 candidates on LoCoMo, in process over the service's ranking (a scratch harness; tuning).

    .venv/bin/python -m bench.rerank --cache FILE [--static WORDLLAMA.npz] [--fusion-grid | --author-fit]

The first pass is the service's ranking (``SearchIndex.search``'s fusion, boosts and the 0.015 cut, rebuilt
here from its parts so that each candidate can be switched on: a static embedder as a third fused signal, a
penalty for memories that are mostly questions, sentence-level max-sim, a length prior, the calibrated score's
author term). Its top ``--depth`` candidates of each question get a feature vector; by default a logistic
regression over them is fitted on two tuning conversations and checked on the third (leave one conversation
out). ``--author-fit``: the calibrated score's author weight, by Platt scaling over the retrieved top 10 with
the other constants' logit as the offset, and tuning recall with the cut at a few weights.
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
from agent_memory.search import SearchIndex
from agent_memory.search import index as im
from agent_memory.search.lexical import tokenize
from bench.locomo import (
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
    config = im.DEFAULT_CONFIG
    n = len(index)
    lexical = index._lexical_scores(query, config)
    rewritten = index._dense_query(query, config)
    rows = index._dense_rows([query] if rewritten == query else [query, rewritten], embedder)
    assert rows is not None
    cosine, dense = rows[0], rows[-1]
    static = np.zeros(n, np.float32)
    if STATIC:
        matrix = np.stack([STATIC[im._embedding_text(d)] for d in DOCS[id(index)]])
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
    fused = ((1 - DENSE_W - STATIC_W) * im._minmax(lexical) + DENSE_W * im._minmax(dense)).astype(np.float32)
    if STATIC_W:
        fused = (fused + STATIC_W * im._minmax(static)).astype(np.float32)
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
        logits = im.HYBRID_CALIBRATION.logits(match.astype(np.float32), cosine) + np.float32(AUTH_W) * (parts[0] > 0)
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
    wl_mm = im._minmax(static)
    lex_mm = im._minmax(lexical)
    dense_mm = im._minmax(dense)
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
    c = im.HYBRID_CALIBRATION
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


def extra_features(first, top: npt.NDArray[np.int64], names: Sequence[str]) -> F:  # type: ignore[no-untyped-def]
    """Cheap candidate features the service does not compute (yet), from the first pass."""
    dense, lexical = first.dense[top].astype(np.float64), first.lexical[top].astype(np.float64)
    cols = []
    for name in names:
        if name == "dense":  # the neutral query's cosine (the ranking's)
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
    stores what auto-save's default policy stores of two people's turns), as ``bench.calibrate`` stores it: the
    user's index and each memory's ``dia_id``, in index order."""
    import os

    from agent_memory.composition import Services
    from agent_memory.config import Settings
    from bench.locomo_service import store_conversation

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
) -> list[QuestionRows]:
    """Each question's first-pass top ``depth`` with the features the service's rerank computes
    (``SearchIndex._first_pass`` and ``_rerank_features``, the shipped code, so that what is fitted is what runs);
    ``service``: over the memories as the service stores them (``service_indexes``), else ``bench.locomo``'s."""
    config = im.DEFAULT_CONFIG
    out: list[QuestionRows] = []
    built = (
        service_indexes(conversations, embedder)
        if service
        else [(index := SearchIndex.build(documents(c, 2, True), embedder), index.ids) for c in conversations]
    )
    for conversation, (index, names) in zip(conversations, built, strict=True):
        for q in conversation.questions:
            if q.category not in CATEGORIES or not q.evidence:
                continue
            first = index._first_pass(q.question, embedder, frozenset(), config, min_score)
            top = index._top_positions(first.ranking, depth, frozenset(), positive_only=first.positive_only)
            feats = index._rerank_features(q.question, first, top, config)
            if EXTRAS:
                feats = np.hstack([feats[:, :-1], extra_features(first, top, EXTRAS), feats[:, -1:]])
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
    constants ``search.index.RERANK`` ships. The validation conversations are not read."""
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
    print(f"rerank_depth={depth}\nRERANK = Rerank(weights=({names_w}))  # {', '.join(im.RERANK_FEATURES)}")


def main() -> None:
    global STATIC_W, DENSE_W
    parser = argparse.ArgumentParser()
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--static", type=Path)
    parser.add_argument("--depth", type=int, default=50)
    parser.add_argument("--cut", type=float, default=0.015)
    parser.add_argument("--author-fit", action="store_true")
    parser.add_argument("--fusion-grid", action="store_true")
    parser.add_argument("--fit", action="store_true", help="fit the service's rerank (search.index.RERANK)")
    parser.add_argument("--keep", type=int, default=5, help="--fit: the first pass's top so many stay in place")
    parser.add_argument("--service", action="store_true", help="--fit: over the memories as the service stores them")
    parser.add_argument("--extra", action="append", default=[], help="--fit: a candidate feature to add")
    args = parser.parse_args()
    EXTRAS.extend(args.extra)
    embedder = CachingEmbedder(MiniLMEmbedder())
    embedder.load(args.cache)
    if args.static:
        load_static(args.static)
    conversations = load_conversations()
    tuning = [c for c in conversations if c.name in TUNING]
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
