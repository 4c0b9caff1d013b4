"""Searching an index: ``RankedIndex``, what ``SearchIndex`` searches with (its first pass, the signals, the
learned rerank), and ``SecondPass``, the seam a ranking experiment plugs into ``search``.

- the query's embedding names the memories' authors "they" / "their" (``SearchConfig.dense_names``, the
  service's default): the name is in nearly every memory of a conversation, and in the query's vector it only
  diluted what was asked (``RankedIndex._dense_query``); the lexical side and the calibrated score keep the query
  as typed.
- if there is no embedder, no vector, or the query cannot be embedded, search is lexical only (with a warning).

The formulas (BM25F, cosine, fusion, calibration, rerank) are ``scoring``'s; this gathers what they read.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

from agent_memory.search import scoring
from agent_memory.search.arrays import IndexArrays
from agent_memory.search.lexical import asked_months, named_words, neutral_names, temporal_question, tokenize
from agent_memory.search.scoring import FirstPass, Postings, Signals
from agent_memory.search.stored import AUTHOR_TAG, MONTH_TAG, TIME_TAG
from agent_memory.search.types import DEFAULT_CONFIG, SearchConfig

if TYPE_CHECKING:
    from agent_memory.providers.embedders import Embedder

__all__ = ["RankedIndex", "SecondPass"]

logger = logging.getLogger(__name__)

F32 = npt.NDArray[np.float32]
I8 = npt.NDArray[np.int8]
I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
U16 = npt.NDArray[np.uint16]
Bool = npt.NDArray[np.bool_]


class SecondPass(Protocol):
    """A ranking step after the first pass, for ranking experiments (``bench/tuning/feedback.py``); the service
    searches with none. ``RankedIndex.search`` calls ``adjust`` on every memory's first-pass ranking (fusion and
    signals, before the ``min_score`` cut), takes the ``depth(top_k)`` best of the result (at least ``top_k``;
    the learned rerank's depth when deeper), and has ``reorder`` order them before they are cut to ``top_k``.
    The calibrated scores stay each memory's own. A step reads the index through its documented hooks:
    ``_top_positions``, ``_text_terms``, ``_token_postings``, ``_bm25_postings``, ``_vectors_of``."""

    def adjust(
        self,
        index: RankedIndex,
        query: str,
        ranking: F32,
        config: SearchConfig,
        exclude: frozenset[str],
        *,
        positive_only: bool,
    ) -> F32: ...

    def depth(self, top_k: int) -> int: ...

    def reorder(self, index: RankedIndex, ranking: F32, top: I64, top_k: int) -> I64: ...


class RankedIndex(IndexArrays):
    """An index's search (``SearchIndex`` is one: build, merge and store it there)."""

    def search(
        self,
        query: str,
        top_k: int,
        embedder: Embedder | None = None,
        exclude: frozenset[str] = frozenset(),
        *,
        config: SearchConfig | None = None,
        min_score: float | None = 0.0,
        second_pass: SecondPass | None = None,
    ) -> list[tuple[str, float]]:
        """The ``top_k`` best (id, score) pairs for ``query``, in ranking order, among the memories whose
        calibrated score (``Calibration``) is at least ``min_score`` (None: the calibration's default; 0: any).

        The ranking is the configured one (hybrid fusion; lexical only when there are no vectors), below the top
        ``rerank_keep`` the learned rerank's (``Rerank``); the score is each memory's own, so a memory ranked lower
        may score higher, except that below the top ``rerank_keep`` a reranked result shows the least of its own
        score and the one above it (never rising down the list, never below the cut). Never raises for a
        failing embedder: search is then lexical only, and a warning is logged. A blank query gives an empty
        list. ``second_pass``: a ranking experiment's step after the first pass (``SecondPass``)."""
        config = config or DEFAULT_CONFIG
        if top_k <= 0 or len(self) == 0 or not query or not query.strip():
            return []
        first = self._first_pass(query, embedder, exclude, config, min_score, second_pass)
        reranked = first.fused is not None and config.rerank_depth > 0 and top_k > config.rerank_keep
        depth = top_k if second_pass is None else max(top_k, second_pass.depth(top_k))
        if reranked:
            depth = max(depth, config.rerank_depth)
        top = self._top_positions(first.ranking, depth, exclude, positive_only=first.positive_only)
        if reranked:
            top = self._rerank(query, first, top, config)
        if second_pass is not None:
            top = second_pass.reorder(self, first.ranking, top, top_k)
        top = top[:top_k]
        scores = first.calibrated(top)
        if reranked and len(top) > config.rerank_keep:
            # Below the head the order is the rerank's, not the scores': a reranked position shows the least of its
            # own score and the one above it, so the returned scores never rise down the list from the head's last
            # on, never exceed a memory's own and never fall below the cut (every candidate's own score is at
            # least the cut). The head keeps its own scores.
            keep = config.rerank_keep
            head = scores[keep - 1] if keep else np.inf
            scores[keep:] = np.minimum.accumulate(np.minimum(scores[keep:], head))
        return [(self._ids[i], float(score)) for i, score in zip(top, scores, strict=True)]

    def _first_pass(
        self,
        query: str,
        embedder: Embedder | None,
        exclude: frozenset[str],
        config: SearchConfig,
        min_score: float | None,
        second_pass: SecondPass | None = None,
    ) -> FirstPass:
        """Every memory's ranking for ``query`` (fusion, signals, a second pass's adjustment; -inf where the
        calibrated score is below the cut), and what the calibrated score and the rerank read of it."""
        # Lexical first: on a cold function its first call builds the postings while the model may still be
        # loading in the background (``MiniLMEmbedder.preload``), which the query's embedding then waits for.
        lexical = self._lexical_scores(query, config)
        # ``dense`` ranks; ``cosine`` (the query as typed) is what the calibrated score and the cut are fitted on.
        # They differ only when ``_dense_query`` rewrote the query: both are then embedded in one call.
        dense = cosine = None
        if config.mode != "lexical":
            rewritten = self._dense_query(query, config)
            rows = self._dense_rows([query] if rewritten == query else [query, rewritten], embedder)
            if rows is not None:
                cosine, dense = rows[0], rows[-1]
        calibration = scoring.LEXICAL_CALIBRATION if dense is None else scoring.HYBRID_CALIBRATION
        ceiling = np.float32(self._lexical_ceiling(query, config))
        cut = calibration.min_score if min_score is None else min_score

        # the memories of an author the query names: boosted in the ranking and a term of the calibrated score
        named = self._author_mask(query) if calibration.author or config.author_boost else None

        fused = None
        if dense is None:  # lexical only: a document must match a query term
            ranking, positive_only = lexical, True
        elif config.mode == "dense":
            ranking, positive_only = dense, False
        elif config.fusion == "rrf":
            ranking, positive_only = scoring.rrf(lexical, dense, config, self._excluded(exclude)), True
        else:
            fused = scoring.fuse(lexical, dense, config)
            ranking, positive_only = fused, False
        signals = self._signals(query, config, named if config.author_boost else None)
        if signals is not None:
            ranking = scoring.boosted(ranking, scoring.bonus(signals, config), positive_only=positive_only)
        if second_pass is not None:
            ranking = second_pass.adjust(self, query, ranking, config, exclude, positive_only=positive_only)
        # A score rounds to at least ``cut`` when it is at least ``cut`` - 0.00005: compared as a logit, so that
        # no memory's score but the top_k's is computed.
        lowest = cut - 0.00005
        if lowest > 0:
            match = lexical / ceiling if ceiling > 0 else np.zeros_like(lexical)
            logits = calibration.logits(match.astype(np.float32), cosine, named)
            keep = logits >= np.float32(math.log(lowest / (1 - lowest)))
            ranking = np.where(keep, ranking, np.float32(-np.inf)).astype(np.float32)
        return FirstPass(
            lexical, cosine, dense, fused, ranking, positive_only, named, signals, float(ceiling), calibration
        )

    def _rerank(self, query: str, first: FirstPass, top: I64, config: SearchConfig) -> I64:
        """``top`` (the first pass's best, in its order) with its head kept and the rest ordered by ``RERANK``."""
        keep = config.rerank_keep
        if len(top) <= keep + 1:
            return top
        return scoring.reranked(top, self._rerank_features(query, first, top, config), keep)

    def _rerank_features(self, query: str, first: FirstPass, top: I64, config: SearchConfig) -> npt.NDArray[np.float64]:
        """``RERANK_FEATURES`` of the first pass's ``top`` (``scoring.rerank_features``). The query's terms'
        postings come from ``_token_postings``, which a parted index answers from its parts without building a
        vocabulary or postings of its own."""
        postings = [p for p in map(self._token_postings, dict.fromkeys(tokenize(query))) if p is not None]
        norm = self._length_norm(config)[top] if postings else np.zeros(0, dtype=np.float32)
        return scoring.rerank_features(first, top, postings, len(self), norm, self._len_text[top], config)

    def _bonus(self, query: str, config: SearchConfig, authors: Bool | None) -> F32 | None:
        """What the query's signals add to each memory's ranking (``scoring.bonus``); None when nothing applies."""
        signals = self._signals(query, config, authors)
        return None if signals is None else scoring.bonus(signals, config)

    def _signals(self, query: str, config: SearchConfig, authors: Bool | None) -> Signals | None:
        """Which memories each of the query's signals applies to: ``authors`` (the caller's ``_author_mask``: the
        memories of every author the query names by a word of their name; a query naming both speakers of a
        conversation names both), with ``time_boost`` the memories that place something in time when the query
        asks when, with ``date_boost`` the memories of a month the query names. None when none applies (the
        common case costs a few dictionary lookups)."""
        if not (config.author_boost or config.time_boost or config.date_boost) or not len(self):
            return None
        timed = None
        if config.time_boost and temporal_question(query):
            docs = self._token_docs(TIME_TAG)
            if docs is not None:
                timed = np.zeros(len(self), dtype=bool)
                timed[docs] = True
        dated = None
        if config.date_boost:
            for year, month in asked_months(query):
                tag = f"{MONTH_TAG}{month:02d}" if year is None else f"{MONTH_TAG}{year:04d}-{month:02d}"
                docs = self._token_docs(tag)
                if docs is not None:
                    if dated is None:
                        dated = np.zeros(len(self), dtype=bool)
                    dated[docs] = True
        if timed is None and dated is None and authors is None:
            return None
        return Signals(authors, timed, dated)

    def _dense_query(self, query: str, config: SearchConfig) -> str:
        """What the query's embedding is computed from. With ``dense_names="neutral"``, the words naming an author
        of these memories become "they" / "their" ("What do Melanie's kids like?" -> "What do their kids like?").
        In a conversation nearly every memory holds the names (its author's ``"Melanie: "``, the other speaker's
        "Hi Melanie!", the turns of its context), so a name in the query adds similarity to all of them and
        dilutes what the question asks about; the author boost already prefers the named author's memories. The
        lexical side keeps the query as typed (a name is a frequent, low-idf word there), and so does a query
        naming no author. This vector ranks only: the calibrated score and the ``min_score`` cut keep the cosine of
        the query as typed, which ``Calibration`` was fitted on (``search`` embeds both in one call), since a
        query's vector without the names is further from every memory, and the fitted constants applied to it cut tuning
        recall@10 from 0.837 to 0.805, while a refit's rule-chosen cut (0.01) left 1% of the off-topic queries
        empty instead of 96% (``bench.tuning.calibrate``)."""
        if config.dense_names == "keep" or not len(self):
            return query
        names = self._named_authors(query)
        return neutral_names(query, names) if names else query

    def _author_mask(self, query: str) -> Bool | None:
        """Which memories are of an author ``query`` names by a word of the name (``author_boost``, and the
        calibrated score's ``author`` term); None when it names none."""
        words = self._named_authors(query)
        if not words:
            return None
        mask = np.zeros(len(self), dtype=bool)
        for word in words:
            docs = self._token_docs(AUTHOR_TAG + word)
            if docs is not None:
                mask[docs] = True
        return mask

    def _named_authors(self, query: str) -> list[str]:
        """The words of ``query`` that name an author of some memory here."""
        return [word for word in dict.fromkeys(named_words(query)) if self._has_token(AUTHOR_TAG + word)]

    def lexical_scores(self, query: str, config: SearchConfig | None = None) -> F32:
        """BM25F score of every document for ``query`` (0 where no query term occurs)."""
        return self._lexical_scores(query, config or DEFAULT_CONFIG)

    def dense_scores(self, query: str, embedder: Embedder) -> F32 | None:
        """Cosine similarity of every document with ``query`` as typed (the cosine of the calibrated score; the
        ranking's may be of the query with neutral names, ``_dense_query``); None when dense scoring is not
        possible."""
        return self._dense_scores(query, embedder)

    def _lexical_scores(self, query: str, config: SearchConfig) -> F32:
        # a repeated query term counts once; terms in the order of their first occurrence
        postings = [self._token_postings(token) for token in dict.fromkeys(tokenize(query))]
        return self._bm25_postings([(p, 1.0) for p in postings if p is not None], config)

    def _bm25_postings(self, terms: list[tuple[Postings, float]], config: SearchConfig) -> F32:
        """BM25F of every document for weighted posting lists (documents, text tf, context tf) of distinct terms."""
        norm = self._length_norm(config) if terms else np.zeros(0, dtype=np.float32)
        return scoring.bm25(terms, len(self), norm, config)

    def lexical_match(self, query: str, config: SearchConfig | None = None) -> F32:
        """Each document's BM25F score as a share of the query's ceiling, in [0, 1): 0 when no query term
        occurs, near 1 when every query term occurs often. The ceiling sums, over the query's distinct terms,
        the most a term can add (idf x (k1 + 1)), terms this index has never seen included (as rare as a term
        one memory holds): a query whose words no memory holds matches every memory little."""
        config = config or DEFAULT_CONFIG
        scores = self._lexical_scores(query, config)
        ceiling = self._lexical_ceiling(query, config)
        if ceiling <= 0:
            return np.zeros(len(self), dtype=np.float32)
        return (scores / np.float32(ceiling)).astype(np.float32)

    def _lexical_ceiling(self, query: str, config: SearchConfig) -> float:
        n = len(self)
        return scoring.lexical_ceiling([self._token_df(token) if n else 1 for token in set(tokenize(query))], n, config)

    def _dense_scores(self, query: str, embedder: Embedder | None) -> F32 | None:
        rows = self._dense_rows([query], embedder)
        return None if rows is None else rows[0]

    def _dense_rows(self, queries: list[str], embedder: Embedder | None) -> list[F32] | None:
        """Cosine similarity of every document with each of ``queries`` (embedded in one call); None when dense
        scoring is not possible."""
        if self._model is None or self._scales is None:
            if embedder is not None:
                logger.warning("search index has no vectors; searching lexically")
            return None
        if embedder is None:
            logger.warning("search index has %s vectors but no embedder was given; searching lexically", self._model)
            return None
        name, dim = model_name(embedder), int(getattr(embedder, "dim", 0) or 0)
        if name != self._model or (dim and dim != self.dim):
            logger.warning("embedder %s does not match the index vectors (%s); searching lexically", name, self._model)
            return None
        try:
            matrix = checked_embeddings(embedder, queries, len(queries))
        except Exception as exc:  # any failure of the embedder: lexical only, never fail the search
            logger.warning("could not embed the query (%s: %s); searching lexically", type(exc).__name__, exc)
            return None
        if matrix.shape[1] != self.dim:
            logger.warning("query embedding has %d dimensions, the index %d; searching lexically", *matrix.shape)
            return None
        assert self._scales is not None
        return scoring.cosines(self._vector_blocks(), self._scales, len(self), matrix)

    def _top_positions(self, scores: F32, k: int, exclude: frozenset[str], *, positive_only: bool) -> I64:
        """The positions of the ``k`` best ``scores`` (best first; ties: by position), never of an ``exclude``d id;
        of positive scores only with ``positive_only`` (lexical-only search), else of finite ones. A documented
        hook for ranking experiments (``bench/tuning/feedback.py``)."""
        return scoring.top_positions(scores, k, positive_only=positive_only, excluded=self._excluded(exclude))

    def _excluded(self, exclude: frozenset[str]) -> list[int]:
        if not exclude:
            return []
        positions = self._position_map()
        return [positions[i] for i in exclude if i in positions]

    # Read-only views for ranking experiments (``SecondPass``, ``bench/tuning/feedback.py``): what a second pass
    # may read of a memory without reaching into the arrays.

    def _text_terms(self, position: int) -> tuple[list[tuple[int, str, int, int]], int]:
        """The terms of the memory at ``position`` as (term id, term, count in its text, document frequency), in
        its row's order, tags (``@...``) included, and the length of its text in words."""
        ptr = self._ptr()
        start, end = int(self._doc_ptr[position]), int(self._doc_ptr[position + 1])
        terms = self._terms[start:end].tolist()
        rows = [
            (term, self._vocab[term], tf, int(ptr[term + 1] - ptr[term]))
            for term, tf in zip(terms, self._tf_text[start:end].tolist(), strict=True)
        ]
        return rows, int(self._len_text[position])

    def _vectors_of(self, positions: I64) -> tuple[I8, F32] | None:
        """The int8 vectors and scales of the memories at ``positions`` (a row ~= vector * scale); None when the
        index has no vectors."""
        if self._vectors is None or self._scales is None:
            return None
        vectors: I8 = self._vectors[positions]
        scales: F32 = self._scales[positions]
        return vectors, scales


def model_name(embedder: Embedder) -> str:
    return str(getattr(embedder, "name", "") or type(embedder).__name__)


def checked_embeddings(embedder: Embedder, texts: list[str], rows: int) -> F32:
    from agent_memory.providers.embedders import EmbedderError, normalize_rows

    try:
        matrix = embedder.embed(texts)
    except EmbedderError:
        raise
    except Exception as exc:
        raise EmbedderError(f"embedder {model_name(embedder)} failed: {type(exc).__name__}: {exc}") from exc
    matrix = np.asarray(matrix)
    if matrix.ndim != 2 or matrix.shape[0] != rows or matrix.shape[1] < 1 or not np.all(np.isfinite(matrix)):
        raise EmbedderError(f"embedder {model_name(embedder)} returned an array of shape {matrix.shape}")
    return normalize_rows(matrix)
