"""Second-pass ranking experiments over a first-pass ranking: pseudo-relevance feedback and diversification.

Neither is in the service: on LoCoMo's tuning conversations no setting raised recall@10 by more than noise
without lowering recall@5 (the README's second-pass candidates; ``bench.quality.locomo --sweep --only "service + "``
reruns the rows), so they run here only, through the index's ``SecondPass`` seam
(``agent_memory.search.ranking``) and its read-only hooks, never its arrays:

    index.search(query, 10, embedder, second_pass=Feedback(SecondPassConfig(feedback_docs=3, ...)))

Both work on one user's index and its first-pass ranking (the fused, boosted one), never on the calibrated
score, which stays the memory's own for the query as typed:

- ``feedback_ranking``: RM3-style pseudo-relevance feedback on the lexical side. The top ``feedback_docs``
  memories of the first pass vote for their words (each word's share of the memory's text, weighted by the
  memory's first-pass ranking and by the word's idf); the ``feedback_terms`` best words that are not already
  query terms form an expansion query, whose BM25F score, scaled to the ranking's peak, is added to the ranking
  with weight ``feedback_weight``. A word comes only from memories of this index, so it always has postings.
- dense feedback (``feedback_dense``): the same seeds' mean vector, whose cosine with each of the first pass's
  top ``FEEDBACK_DEPTH`` memories is added to their ranking (Rocchio, without a second pass over every vector).
- ``diversify``: maximal marginal relevance over the first ``diversity_depth`` candidates: each next pick is the
  candidate of best ranking minus ``diversity`` x its largest cosine with those already picked, so that near
  duplicates of a hit make room for evidence from elsewhere. The first pick is always the first-pass top hit.

The cost is bounded by the parameters, not by the index: ``feedback_docs`` rows of the doc-major arrays, the
postings of ``feedback_terms`` words, and ``diversity_depth``² cosines of int8 rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

import local  # noqa: F401 - puts the shared layer on sys.path
from agent_memory.search.lexical import tokenize
from agent_memory.search.ranking import RankedIndex
from agent_memory.search.types import SearchConfig

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]

__all__ = [
    "FEEDBACK_DEPTH",
    "Feedback",
    "SecondPassConfig",
    "diversify",
    "expansion_terms",
    "feedback_ranking",
    "weighted_bm25",
]

FEEDBACK_DEPTH = 100  # dense feedback re-scores the first pass's top 100 (recall@10 needs no deeper pool)


@dataclass(frozen=True)
class SecondPassConfig:
    """Pseudo-relevance feedback from the first pass's top ``feedback_docs`` memories (``feedback_terms`` words,
    weight ``feedback_weight``; Rocchio on the vectors with weight ``feedback_dense``), and maximal marginal
    relevance over the top ``diversity_depth`` (penalty ``diversity`` x cosine to a better hit). 0: off."""

    feedback_docs: int = 0
    feedback_terms: int = 10
    feedback_weight: float = 0.0
    feedback_keep: int = 0  # the first pass's top so many keep their places: feedback reorders the rest only
    feedback_dense: float = 0.0
    diversity: float = 0.0
    diversity_depth: int = 30

    def __post_init__(self) -> None:
        if (
            min(self.feedback_docs, self.feedback_terms, self.feedback_keep, self.diversity_depth) < 0
            or min(self.feedback_weight, self.feedback_dense, self.diversity) < 0
        ):
            raise ValueError("feedback and diversity parameters must be >= 0")


class Feedback:
    """The ``SecondPass`` of ``settings``: feedback on the first-pass ranking, diversification of its top."""

    def __init__(self, settings: SecondPassConfig) -> None:
        self.settings = settings

    def adjust(
        self,
        index: RankedIndex,
        query: str,
        ranking: F32,
        config: SearchConfig,
        exclude: frozenset[str],
        *,
        positive_only: bool,
    ) -> F32:
        return feedback_ranking(index, query, ranking, config, self.settings, exclude, positive_only=positive_only)

    def depth(self, top_k: int) -> int:
        return max(top_k, self.settings.diversity_depth) if self.settings.diversity else top_k

    def reorder(self, index: RankedIndex, ranking: F32, top: I64, top_k: int) -> I64:
        return diversify(index, ranking, top, top_k, self.settings.diversity)


def expansion_terms(index: RankedIndex, query: str, seeds: I64, weights: F32, count: int) -> dict[str, float]:
    """The ``count`` best expansion terms (term -> weight, the weights summing to 1) voted by the memories at
    positions ``seeds`` with first-pass ``weights``: a term's vote is the sum over seeds of weight x its share of
    the seed's text, times its idf. Query terms and tags (``@...``) never expand; empty when no seed has words.
    Ties go to the term the index met first."""
    if count <= 0 or not len(seeds):
        return {}
    n = len(index)
    query_terms = set(tokenize(query))
    total = float(weights.sum())
    if total <= 0:
        return {}
    votes: dict[int, float] = {}
    known: dict[int, tuple[str, int]] = {}  # term id -> (term, document frequency)
    for position, weight in zip(seeds.tolist(), (weights / np.float32(total)).tolist(), strict=True):
        rows, length = index._text_terms(position)
        if length == 0:
            continue
        for term, word, tf, df in rows:
            if tf and word not in query_terms and not word.startswith("@"):
                votes[term] = votes.get(term, 0.0) + weight * tf / length
                known[term] = (word, df)
    scored: list[tuple[float, int]] = []
    for term, vote in votes.items():
        df = known[term][1]
        scored.append((vote * math.log(1.0 + (n - df + 0.5) / (df + 0.5)), term))
    scored.sort(key=lambda pair: (-pair[0], pair[1]))
    best = [(w, t) for w, t in scored[:count] if w > 0]
    mass = sum(w for w, _ in best)
    return {known[t][0]: w / mass for w, t in best} if mass > 0 else {}


def weighted_bm25(index: RankedIndex, terms: dict[str, float], config: SearchConfig) -> F32:
    """BM25F of every document for a weighted bag of terms (the same formula as the query's)."""
    postings = [(index._token_postings(term), weight) for term, weight in terms.items()]
    return index._bm25_postings([(p, w) for p, w in postings if p is not None], config)


def feedback_ranking(
    index: RankedIndex,
    query: str,
    ranking: F32,
    config: SearchConfig,
    settings: SecondPassConfig,
    exclude: frozenset[str],
    *,
    positive_only: bool,
) -> F32:
    """``ranking`` plus ``feedback_weight`` x the expansion query's BM25F (scaled so its best memory gets the
    ranking's peak); unchanged when feedback is off or finds no term. With ``positive_only`` (lexical-only
    search) a memory still needs a query word: feedback reorders the memories that have one."""
    lexical_on = bool(settings.feedback_weight and settings.feedback_terms)
    dense_on = bool(settings.feedback_dense and index.model is not None and not positive_only)
    if not (settings.feedback_docs and (lexical_on or dense_on)) or not len(index):
        return ranking
    seeds = index._top_positions(ranking, settings.feedback_docs, exclude, positive_only=positive_only)
    if not len(seeds):
        return ranking
    if dense_on:
        ranking = _dense_feedback(index, ranking, seeds, settings, exclude)
    if not lexical_on:
        return ranking
    seed_weights = ranking[seeds].astype(np.float32)
    low = float(seed_weights.min())
    if low <= 0:  # weights must be positive (a fused ranking can be negative only with a failed min-max)
        seed_weights = seed_weights - np.float32(low) + np.float32(1e-3)
    terms = expansion_terms(index, query, seeds, seed_weights, settings.feedback_terms)
    if not terms:
        return ranking
    extra = weighted_bm25(index, terms, config)
    top = float(extra.max())
    if top <= 0:
        return ranking
    finite = ranking[np.isfinite(ranking)]
    peak = float(finite.max()) if len(finite) and float(finite.max()) > 0 else 1.0
    boosted = ranking + np.float32(settings.feedback_weight * peak / top) * extra
    out: F32 = (np.where(ranking > 0, boosted, ranking) if positive_only else boosted).astype(np.float32)
    if settings.feedback_keep:  # the first pass's head stays as it was, above everything feedback reorders
        head = index._top_positions(ranking, settings.feedback_keep, exclude, positive_only=positive_only)
        finite = out[np.isfinite(out)]
        lift = np.float32(float(finite.max()) - float(ranking[head].min()) + 1.0)
        out[head] = ranking[head] + lift
    return out


def _dense_feedback(
    index: RankedIndex, ranking: F32, seeds: I64, settings: SecondPassConfig, exclude: frozenset[str]
) -> F32:
    """Rocchio on the vectors, over the first pass's top ``FEEDBACK_DEPTH`` only (a full pass would cost a second
    scan of every vector): ``feedback_dense`` x the cosine with the seeds' centroid is added to their ranking."""
    seed_rows = index._vectors_of(seeds)
    assert seed_rows is not None
    pool = index._top_positions(ranking, FEEDBACK_DEPTH, exclude, positive_only=False)
    centroid = (seed_rows[0].astype(np.float32) * seed_rows[1][:, None]).mean(axis=0)
    norm = float(np.linalg.norm(centroid))
    if norm <= 0 or not len(pool):
        return ranking
    pool_rows = index._vectors_of(pool)
    assert pool_rows is not None
    cosine = (pool_rows[0].astype(np.float32) @ (centroid / np.float32(norm))) * pool_rows[1]
    out = ranking.copy()
    out[pool] += np.float32(settings.feedback_dense) * cosine.astype(np.float32)
    return out


def diversify(index: RankedIndex, ranking: F32, candidates: I64, top_k: int, penalty: float) -> I64:
    """The first ``top_k`` of ``candidates`` (best first) reordered by maximal marginal relevance: each next
    pick maximises ranking - ``penalty`` x (largest cosine with a pick so far). The first candidate stays
    first; without vectors, or with no penalty, the candidates are returned as they are (cut to ``top_k``)."""
    if penalty <= 0 or index.model is None or len(candidates) <= 1:  # asks for no vector when off
        return candidates[:top_k]
    quantised = index._vectors_of(candidates)
    if quantised is None:
        return candidates[:top_k]
    rows = quantised[0].astype(np.float32) * quantised[1][:, None]
    norms = np.linalg.norm(rows, axis=1)
    rows = rows / np.where(norms > 0, norms, 1.0)[:, None]  # a memory without a vector is like nothing else
    similarity = rows @ rows.T
    relevance = ranking[candidates].astype(np.float32)
    picked = [0]
    closest = similarity[0].copy()
    remaining = np.ones(len(candidates), dtype=bool)
    remaining[0] = False
    while len(picked) < min(top_k, len(candidates)):
        gain = np.where(remaining, relevance - np.float32(penalty) * closest, -np.inf)
        best = int(np.argmax(gain))  # ties: the earlier (better-ranked) candidate
        picked.append(best)
        remaining[best] = False
        np.maximum(closest, similarity[best], out=closest)
    out: I64 = candidates[np.asarray(picked, dtype=np.int64)]
    return out
