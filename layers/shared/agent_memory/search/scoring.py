"""How the search index scores: BM25F, cosine similarity, their fusion, the signals beyond the words, the
calibrated score and the learned rerank. Functions of arrays (scores, postings, rows of the doc-major arrays),
none of an index: ``SearchIndex`` gathers what they read.

Scoring (defaults chosen on the LoCoMo benchmark, ``bench/quality/locomo.py``):

- lexical: BM25F, ``tf = tf_text + w * tf_ctx`` and ``dl = len_text + w * len_ctx`` with the context weight
  ``w``, standard BM25 idf and saturation (``k1``, ``b``): ``bm25``;
- dense: cosine similarity of the query's embedding with each document's (int8 rows x float query, in chunks):
  ``cosines``;
- hybrid: weighted score fusion of the two, each min-max normalised over the index (``fuse``), or reciprocal-rank
  fusion (``rrf``);
- signals beyond the words (``SearchConfig.author_boost`` / ``time_boost`` / ``date_boost``, added to the fused
  ranking: ``bonus``): a query that names an author of the memories (a word of a memory's ``author``) prefers
  that author's memories, a question asking when ("When did ...", "How long ...") prefers memories that place
  something in time ("yesterday", "last week", "in May", "2022"), and a query naming a month prefers the memories
  of that month. Which memories they apply to is read from tags (``stored.tags``); memories indexed before the
  tags existed have none and get no boost;
- the learned rerank below the top 5 (``Rerank``, ``SearchConfig.rerank_depth``), which raises recall@10: the
  rest of the first pass's top 50 reordered by a logistic regression over features of each candidate that the
  first pass already has (``rerank_features``), fitted on LoCoMo's tuning conversations (``bench/tuning/rerank.py
  --fit``).

That fusion ranks; it is not the score a search returns, since min-max normalisation makes it relative to the
query's other candidates (the top hit always near 1, a lone memory 0). The returned score is ``Calibration``'s:
a logistic function of the memory's own lexical match (``lexical_match``) and cosine similarity, fitted on
LoCoMo (``bench/tuning/calibrate.py``) so that it estimates the probability that a retrieved memory is relevant to the
query, the same for every query; a search leaves out memories scoring below ``min_score`` (by default the
calibration's), so that a query that matches nothing finds nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from agent_memory.search.types import SearchConfig

from ..runtime.lazyclass import dataclass  # processed on first instance (lazyclass.py)

__all__ = [
    "HYBRID_CALIBRATION",
    "LEXICAL_CALIBRATION",
    "RERANK",
    "RERANK_FEATURES",
    "Calibration",
    "FirstPass",
    "Rerank",
    "Signals",
]

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
I8 = npt.NDArray[np.int8]
I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
U16 = npt.NDArray[np.uint16]
U32 = npt.NDArray[np.uint32]
Bool = npt.NDArray[np.bool_]
Postings = tuple[I32, U16, U16]  # document positions (ascending), text tf, context tf

_CHUNK_ROWS = 4096  # rows of int8 vectors scored at a time


@dataclass(frozen=True)
class Calibration:
    """A memory's score for a query: ``1 / (1 + exp(-(bias + lexical * lexical_match + dense * cosine + author *
    named)))``, ``named`` 1 for a memory of an author the query names (as ``author_boost`` reads it), else 0.

    Fitted by ``bench/tuning/calibrate.py`` on the tuning conversations of LoCoMo (26, 30, 41): the direction
    (lexical against dense) by a logistic regression over every memory of each question's user (evidence
    turns positive), the scale by Platt scaling over the retrieved top 10, so that among retrieved memories
    the score is the share that is relevant (checked on the validation conversations, 42 and 43). ``min_score``
    is the default cut: the largest that keeps the tuning questions' recall@5 and @10. The dense weights are
    MiniLM's (other embedders' cosines are on similar scales, not calibrated); lexical-only search (no
    vectors, or a query that could not be embedded) has its own fit. ``author`` was fitted after the
    others, which it leaves as they were, by Platt scaling over the retrieved top 10 with their logit as the
    offset (``bench/tuning/rerank.py --author-fit``: 0.399): the memories of a named author are the ones the
    author boost ranks high on little lexical or cosine evidence, and without the term the cut took them out of the
    top 10. A query naming no author (every off-topic one) gets no author term.
    """

    bias: float
    lexical: float
    dense: float
    min_score: float
    author: float = 0.0

    def logits(self, lexical_match: F32, cosine: F32 | None, named: Bool | None = None) -> F32:
        """The scores before the logistic function (monotone in them: a cut on scores is a cut on these)."""
        z: F32 = np.float32(self.bias) + np.float32(self.lexical) * lexical_match
        if cosine is not None:
            z = z + np.float32(self.dense) * cosine
        if named is not None and self.author:
            z = z + np.float32(self.author) * named.astype(np.float32)
        return z

    def scores(self, lexical_match: F32, cosine: F32 | None, named: Bool | None = None) -> F32:
        z = self.logits(lexical_match, cosine, named)
        out: F32 = (1.0 / (1.0 + np.exp(-z.astype(np.float64)))).astype(np.float32)
        return out


HYBRID_CALIBRATION = Calibration(bias=-5.68, lexical=5.345, dense=4.406, min_score=0.015, author=0.4)
# Lexical only, the rule would give 0.03, which still answers half the off-topic queries on LoCoMo (they share
# words with some memory) and, in a small store, where a word's idf swings with every memory, drops real
# matches: without vectors a memory must share a query word, and no score cut applies by default.
LEXICAL_CALIBRATION = Calibration(bias=-3.868, lexical=6.361, dense=0.0, min_score=0.0)


@dataclass(frozen=True)
class Rerank:
    """The learned rerank below the head, which raises recall@10: a logistic regression over ``RERANK_FEATURES`` of
    the first pass's top ``SearchConfig.rerank_depth`` memories; the first pass's top ``rerank_keep`` stay in
    place (so recall at that depth cannot move) and the others are ordered by ``features @ weights``. Fitted on
    LoCoMo's tuning conversations (26, 30, 41) by ``bench/tuning/rerank.py --fit``, which prints these constants; the
    model only orders, it is never a returned score."""

    weights: tuple[float, ...]  # one per RERANK_FEATURES, the last the bias


# Each candidate's features, all from what the first pass has computed or from the candidate's own rows of the
# doc-major arrays: its fused ranking before the signals, whether each signal applies (named author, a time
# expression for a question asking when, the month asked), its cosine with the query as typed, its lexical match,
# the BM25 of its text and of its context field alone (shares of the query's ceiling), the share of the query
# terms' idf among its text's words and among all its words, log(1 + its first-pass rank), its ranking as a share
# of the top's, log(1 + the words of its text), and 1 (the bias).
RERANK_FEATURES = (
    "fused",
    "author",
    "time",
    "month",
    "cosine",
    "lexical_match",
    "text_share",
    "ctx_share",
    "cover_text",
    "cover_all",
    "log_rank",
    "rel_top",
    "log_len",
    "bias",
)
# .venv/bin/python -m bench.tuning.rerank --cache FILE --fit: the best of depth 20 / 30 / 50 x L2 1 / 10 x fitting every
# row or only the reordered ones, by recall@10 with one tuning conversation held out (0.840 -> 0.848; depth 20 and
# 30: 0.846), then fitted on all three tuning conversations.
RERANK = Rerank(
    weights=(
        1.3287,
        0.7012,
        -0.0878,
        0.2527,
        0.5161,
        0.9886,
        0.6334,
        -1.7620,
        -0.4497,
        1.2212,
        -0.8975,
        2.9201,
        0.8422,
        -8.4333,
    )
)


@dataclass(frozen=True)
class Signals:
    """Which memories each of a query's signals applies to (None: to none)."""

    author: Bool | None
    time: Bool | None
    month: Bool | None


@dataclass(frozen=True)
class FirstPass:
    """One query's first pass over every memory (``SearchIndex._first_pass``)."""

    lexical: F32
    cosine: F32 | None  # the query as typed: the calibrated score's
    dense: F32 | None  # the query the ranking embedded (``_dense_query``)
    fused: F32 | None  # the weighted fusion before the signals (None unless hybrid weighted fusion)
    ranking: F32  # fusion + signals + feedback, -inf below the cut
    positive_only: bool
    named: Bool | None
    signals: Signals | None
    ceiling: float
    calibration: Calibration

    def calibrated(self, positions: I64) -> npt.NDArray[np.float64]:
        """The calibrated scores of ``positions``, rounded as returned, so that the score a client sees is the one
        ``min_score`` is compared with."""
        ceiling = np.float32(self.ceiling)
        lexical = self.lexical[positions]
        match = lexical / ceiling if ceiling > 0 else np.zeros_like(lexical)
        own = None if self.cosine is None else self.cosine[positions]
        mine = None if self.named is None else self.named[positions]
        scores = self.calibration.scores(match.astype(np.float32), own, mine).astype(np.float64)
        out: npt.NDArray[np.float64] = np.round(scores, 4)
        return out


# ----------------------------------------------------------------------------------------------------------------
# Lexical
# ----------------------------------------------------------------------------------------------------------------


def idf(n: int, df: int) -> float:
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


def length_norm(len_text: U32, len_ctx: U32, config: SearchConfig) -> F32:
    """k1 * (1 - b + b * dl / avgdl) per document, for this config's k1, b and context weight."""
    dl = len_text.astype(np.float32) + np.float32(config.context_weight) * len_ctx
    avgdl = float(dl.mean()) if len(dl) and float(dl.mean()) > 0 else 1.0
    norm: F32 = (config.k1 * (1.0 - config.b + config.b * dl / avgdl)).astype(np.float32)
    return norm


def bm25(terms: Sequence[tuple[Postings, float]], n: int, norm: F32, config: SearchConfig) -> F32:
    """BM25F of each of ``n`` documents for weighted posting lists of distinct terms (``norm``: ``length_norm``)."""
    scores = np.zeros(n, dtype=np.float32)
    if not terms:
        return scores
    w = np.float32(config.context_weight)
    k1p1 = np.float32(config.k1 + 1.0)
    for (docs, tf_text, tf_ctx), weight in terms:
        df = len(docs)
        if not df:
            continue
        tf = tf_text.astype(np.float32)
        if w:
            tf += w * tf_ctx
        scores[docs] += np.float32(weight * idf(n, df)) * tf * k1p1 / (tf + norm[docs])  # docs unique in a list
    return scores


def lexical_ceiling(dfs: Sequence[int], n: int, config: SearchConfig) -> float:
    """The most the query's distinct terms (their document frequencies ``dfs``) can add to a BM25F score."""
    total = 0.0
    for df in dfs:
        # A term no memory holds weighs as one that a single memory holds: as much as the rarest word can,
        # without the idf of df 0, which in a small index dwarfs every term that does occur.
        total += idf(n, max(1, df) if n else 1) * (config.k1 + 1.0)
    return total


# ----------------------------------------------------------------------------------------------------------------
# Dense
# ----------------------------------------------------------------------------------------------------------------


def cosines(blocks: Sequence[tuple[int, I8]], scales: F32, n: int, queries: F32) -> list[F32]:
    """Cosine similarity of each of ``n`` documents (int8 rows in (first position, rows) ``blocks``, row scales
    ``scales``) with each row of ``queries`` (unit vectors)."""
    rows: list[F32] = []
    for query_vector in queries:
        out = np.empty(n, dtype=np.float32)
        for offset, vectors in blocks:
            # einsum widens the int8 rows to float32 in its own small buffers and never calls BLAS: a BLAS
            # product per chunk woke OpenBLAS's thread pool each time, which on a busy or fractional CPU (a
            # Lambda function below 1,769 MB) cost more than the product itself (bench.perf.search_speed).
            for start in range(0, len(vectors), _CHUNK_ROWS):
                np.einsum(
                    "ij,j->i",
                    vectors[start : start + _CHUNK_ROWS],
                    query_vector,
                    dtype=np.float32,
                    casting="unsafe",
                    out=out[offset + start : offset + min(start + _CHUNK_ROWS, len(vectors))],
                )
        out *= scales
        rows.append(out)
    return rows


# ----------------------------------------------------------------------------------------------------------------
# Fusion and signals
# ----------------------------------------------------------------------------------------------------------------


def minmax(scores: F32) -> F32:
    finite = scores[np.isfinite(scores)]
    if not len(finite):
        return np.zeros_like(scores)
    low, high = float(finite.min()), float(finite.max())
    if high <= low:
        return np.zeros_like(scores)
    return ((scores - np.float32(low)) / np.float32(high - low)).astype(np.float32)


def fuse(lexical: F32, dense: F32, config: SearchConfig) -> F32:
    """Weighted score fusion of the two sides, each min-max normalised: in [0, 1]."""
    fused: F32 = ((1.0 - config.dense_weight) * minmax(lexical) + config.dense_weight * minmax(dense)).astype(
        np.float32
    )
    return fused


def top_positions(scores: F32, k: int, *, positive_only: bool, excluded: Sequence[int] = ()) -> I64:
    """The positions of the ``k`` best ``scores`` (best first; ties: by position), of positive scores only with
    ``positive_only`` (else of finite ones), never one of ``excluded``."""
    if excluded:
        scores = scores.copy()
        scores[list(excluded)] = -np.inf
    candidates = np.flatnonzero(scores > 0) if positive_only else np.flatnonzero(np.isfinite(scores))
    if len(candidates) > k:
        part = np.argpartition(-scores[candidates], k - 1)[:k]
        candidates = candidates[part]
    order = np.lexsort((candidates, -scores[candidates]))  # best first; ties: index order
    best: I64 = candidates[order]
    return best


def rrf(lexical: F32, dense: F32, config: SearchConfig, excluded: Sequence[int] = ()) -> F32:
    """Reciprocal-rank fusion of each side's top ``rrf_depth``."""
    fused = np.zeros(len(lexical), dtype=np.float32)
    for scores, weight, positive in (
        (lexical, 1.0 - config.dense_weight, True),
        (dense, config.dense_weight, False),
    ):
        ranked = top_positions(scores, config.rrf_depth, positive_only=positive, excluded=excluded)
        fused[ranked] += np.float32(2.0 * weight) / (config.rrf_k + 1.0 + np.arange(len(ranked), dtype=np.float32))
    return fused


def bonus(signals: Signals, config: SearchConfig) -> F32:
    """What the signals add to each memory's ranking (before scaling to the ranking's peak)."""
    n = len(next(m for m in (signals.time, signals.author, signals.month) if m is not None))
    out = np.zeros(n, dtype=np.float32)
    if signals.time is not None:
        out[signals.time] += np.float32(config.time_boost)
    if signals.author is not None:  # an author named by two words of the query ("Ann Lee") is boosted once
        out[signals.author] += np.float32(config.author_boost)
    if signals.month is not None:  # a memory of two named months is boosted once
        out[signals.month] += np.float32(config.date_boost)
    return out


def boosted(ranking: F32, extra: F32, *, positive_only: bool) -> F32:
    """``ranking`` plus ``extra`` on the ranking's own scale (fusion: [0, 1]; BM25 alone: its best score).
    Lexical-only search (``positive_only``) still needs a query word in the memory, so a bonus never makes a
    candidate of a memory without one."""
    finite = ranking[np.isfinite(ranking)]
    peak = np.float32(finite.max()) if len(finite) and float(finite.max()) > 0 else np.float32(1.0)
    raised = ranking + peak * extra
    out: F32 = (np.where(ranking > 0, raised, ranking) if positive_only else raised).astype(np.float32)
    return out


# ----------------------------------------------------------------------------------------------------------------
# The learned rerank
# ----------------------------------------------------------------------------------------------------------------


def rerank_features(
    first: FirstPass,
    top: I64,
    postings: Sequence[Postings],
    n: int,
    norm: F32,
    len_text: U32,
    config: SearchConfig,
) -> F64:
    """``RERANK_FEATURES`` of the first pass's ``top`` (in its order; hybrid weighted fusion), one row each, from
    what the first pass computed, the postings of the query's distinct terms, and the candidates' own rows of the
    doc-major arrays (``norm``: the ``length_norm`` of ``top``, ``len_text``: their text lengths): a few array
    operations over ``len(top)`` memories, none over the whole index of ``n``."""
    assert first.fused is not None and first.cosine is not None and first.dense is not None
    m = len(top)
    out = np.zeros((m, len(RERANK_FEATURES)), dtype=np.float64)
    if not m:
        return out
    ceiling = first.ceiling
    # the query's terms' share of the BM25 score in each field, and of their idf mass in the memory's words,
    # looked up at the candidates in each term's postings
    text_share, ctx_share, cover_text, cover_all = (np.zeros(m) for _ in range(4))
    if postings:
        idfs = [idf(n, len(p[0])) for p in postings]
        norm64 = norm.astype(np.float64)
        k1p1 = config.k1 + 1.0
        for (docs, tf_text, tf_ctx), w in zip(postings, idfs, strict=True):
            at = np.minimum(np.searchsorted(docs, top), len(docs) - 1)  # docs ascending
            hit = docs[at] == top
            tt = np.where(hit, tf_text[at], 0).astype(np.float64)
            tc = np.where(hit, tf_ctx[at], 0).astype(np.float64)
            text_share += w * tt * k1p1 / (tt + norm64)
            ctx_share += w * tc * k1p1 / (tc + norm64)
            cover_text += w * (tt > 0)
            cover_all += w * ((tt > 0) | (tc > 0))
        if ceiling > 0:
            text_share /= ceiling
            ctx_share /= ceiling
        else:
            text_share[:] = ctx_share[:] = 0.0
        total = float(sum(idfs)) or 1.0
        cover_text /= total
        cover_all /= total
    signals = first.signals
    ranking = first.ranking[top].astype(np.float64)
    best = float(ranking[0])
    columns = {
        "fused": first.fused[top],
        "author": 0.0 if signals is None or signals.author is None else signals.author[top],
        "time": 0.0 if signals is None or signals.time is None else signals.time[top],
        "month": 0.0 if signals is None or signals.month is None else signals.month[top],
        "cosine": first.cosine[top],
        "lexical_match": first.lexical[top] / ceiling if ceiling > 0 else 0.0,
        "text_share": text_share,
        "ctx_share": ctx_share,
        "cover_text": cover_text,
        "cover_all": cover_all,
        "log_rank": np.log1p(np.arange(m)),
        "rel_top": ranking / best if best > 0 else 0.0,
        "log_len": np.log1p(len_text.astype(np.float64)),
        "bias": 1.0,
    }
    for j, name in enumerate(RERANK_FEATURES):
        out[:, j] = columns[name]
    return out


def reranked(top: I64, features: F64, keep: int) -> I64:
    """``top`` with its first ``keep`` kept and the rest ordered by ``RERANK`` over their ``features`` rows."""
    logits = features[keep:] @ RERANK.weights
    tail = keep + np.argsort(-logits, kind="stable")  # ties keep the first pass's order
    out: I64 = np.concatenate([top[:keep], top[tail]])
    return out
