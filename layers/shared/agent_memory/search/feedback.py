"""Second-pass ranking steps over a first-pass ranking: pseudo-relevance feedback and diversification.

Both work on one user's ``SearchIndex`` and its first-pass ranking (the fused, boosted one), never on the
calibrated score, which stays the memory's own for the query as typed (``Calibration``):

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
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from agent_memory.search.lexical import tokenize

if TYPE_CHECKING:
    from agent_memory.search.index import SearchConfig, SearchIndex

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]

__all__ = ["FEEDBACK_DEPTH", "diversify", "expansion_terms", "feedback_ranking"]

FEEDBACK_DEPTH = 100  # dense feedback re-scores the first pass's top 100 (recall@10 needs no deeper pool)


def expansion_terms(index: SearchIndex, query: str, seeds: I64, weights: F32, count: int) -> dict[int, float]:
    """The ``count`` best expansion terms (term id -> weight, the weights summing to 1) voted by the memories at
    positions ``seeds`` with first-pass ``weights``: a term's vote is the sum over seeds of weight x its share of
    the seed's text, times its idf. Query terms and tags (``@...``) never expand; empty when no seed has words."""
    if count <= 0 or not len(seeds):
        return {}
    vocab = index._vocab
    term_map = index._term_map()
    post_ptr = index._ptr()
    n = len(index)
    query_terms = {t for t in (term_map.get(tok) for tok in tokenize(query)) if t is not None}
    total = float(weights.sum())
    if total <= 0:
        return {}
    votes: dict[int, float] = {}
    for position, weight in zip(seeds.tolist(), (weights / np.float32(total)).tolist(), strict=True):
        length = int(index._len_text[position])
        if length == 0:
            continue
        start, end = int(index._doc_ptr[position]), int(index._doc_ptr[position + 1])
        for term, tf in zip(index._terms[start:end].tolist(), index._tf_text[start:end].tolist(), strict=True):
            if tf and term not in query_terms and not vocab[term].startswith("@"):
                votes[term] = votes.get(term, 0.0) + weight * tf / length
    scored: list[tuple[float, int]] = []
    for term, vote in votes.items():
        df = int(post_ptr[term + 1] - post_ptr[term])
        scored.append((vote * math.log(1.0 + (n - df + 0.5) / (df + 0.5)), term))
    scored.sort(key=lambda pair: (-pair[0], pair[1]))
    best = [(w, t) for w, t in scored[:count] if w > 0]
    mass = sum(w for w, _ in best)
    return {t: w / mass for w, t in best} if mass > 0 else {}


def _weighted_bm25(index: SearchIndex, terms: dict[int, float], config: SearchConfig) -> F32:
    """BM25F of every document for a weighted bag of term ids (the same formula as the query's)."""
    return index._bm25(terms, config)


def feedback_ranking(
    index: SearchIndex,
    query: str,
    ranking: F32,
    config: SearchConfig,
    exclude: frozenset[str],
    *,
    positive_only: bool,
) -> F32:
    """``ranking`` plus ``feedback_weight`` x the expansion query's BM25F (scaled so its best memory gets the
    ranking's peak); unchanged when feedback is off or finds no term. With ``positive_only`` (lexical-only
    search) a memory still needs a query word: feedback reorders the memories that have one."""
    lexical_on = bool(config.feedback_weight and config.feedback_terms)
    dense_on = bool(config.feedback_dense and index.model is not None and not positive_only)
    if not (config.feedback_docs and (lexical_on or dense_on)) or not len(index):
        return ranking
    seeds = index._top_positions(ranking, config.feedback_docs, exclude, positive_only=positive_only)
    if not len(seeds):
        return ranking
    if dense_on:
        ranking = _dense_feedback(index, ranking, seeds, config, exclude)
    if not lexical_on:
        return ranking
    seed_weights = ranking[seeds].astype(np.float32)
    low = float(seed_weights.min())
    if low <= 0:  # weights must be positive (a fused ranking can be negative only with a failed min-max)
        seed_weights = seed_weights - np.float32(low) + np.float32(1e-3)
    terms = expansion_terms(index, query, seeds, seed_weights, config.feedback_terms)
    if not terms:
        return ranking
    extra = _weighted_bm25(index, terms, config)
    top = float(extra.max())
    if top <= 0:
        return ranking
    finite = ranking[np.isfinite(ranking)]
    peak = float(finite.max()) if len(finite) and float(finite.max()) > 0 else 1.0
    boosted = ranking + np.float32(config.feedback_weight * peak / top) * extra
    out: F32 = (np.where(ranking > 0, boosted, ranking) if positive_only else boosted).astype(np.float32)
    if config.feedback_keep:  # the first pass's head stays as it was, above everything feedback reorders
        head = index._top_positions(ranking, config.feedback_keep, exclude, positive_only=positive_only)
        finite = out[np.isfinite(out)]
        lift = np.float32(float(finite.max()) - float(ranking[head].min()) + 1.0)
        out[head] = ranking[head] + lift
    return out


def _dense_feedback(index: SearchIndex, ranking: F32, seeds: I64, config: SearchConfig, exclude: frozenset[str]) -> F32:
    """Rocchio on the vectors, over the first pass's top ``FEEDBACK_DEPTH`` only (a full pass would cost a second
    scan of every vector): ``feedback_dense`` x the cosine with the seeds' centroid is added to their ranking."""
    vectors, scales = index._vectors, index._scales
    assert vectors is not None and scales is not None
    pool = index._top_positions(ranking, FEEDBACK_DEPTH, exclude, positive_only=False)
    centroid = (vectors[seeds].astype(np.float32) * scales[seeds, None]).mean(axis=0)
    norm = float(np.linalg.norm(centroid))
    if norm <= 0 or not len(pool):
        return ranking
    cosine = (vectors[pool].astype(np.float32) @ (centroid / np.float32(norm))) * scales[pool]
    out = ranking.copy()
    out[pool] += np.float32(config.feedback_dense) * cosine.astype(np.float32)
    return out


def diversify(index: SearchIndex, ranking: F32, candidates: I64, top_k: int, penalty: float) -> I64:
    """The first ``top_k`` of ``candidates`` (best first) reordered by maximal marginal relevance: each next
    pick maximises ranking - ``penalty`` x (largest cosine with a pick so far). The first candidate stays
    first; without vectors, or with no penalty, the candidates are returned as they are (cut to ``top_k``)."""
    if penalty <= 0 or index.model is None or len(candidates) <= 1:  # asks for no vector when off
        return candidates[:top_k]
    vectors, scales = index._vectors, index._scales
    if vectors is None or scales is None:
        return candidates[:top_k]
    rows = vectors[candidates].astype(np.float32) * scales[candidates, None]
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
