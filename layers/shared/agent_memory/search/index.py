"""The long-term memory search index: BM25F over a memory's text and its context, fused with dense vectors.

One ``SearchIndex`` is immutable. It holds, per document (a saved memory): its term frequencies in two fields
(the memory's own text, and its context: the turns just before it and the session date), and optionally one
int8-quantised embedding with a per-row scale. The canonical form is doc-major (CSR: ``doc_ptr`` into ``terms``,
``tf_text``, ``tf_ctx``), which makes ``without`` and ``combine`` array slicing and concatenation, with no
re-tokenising; the inverted index (term-major postings, document frequencies) is derived from it: from the
entries' term order stored with the index (``term_order``), or, for an index stored without it, with a
linear-time radix sort on the first search, and cached. ``combine`` of parts that share no id searches them in
place (``_PartedIndex``), with the same rankings and scores as the one index of them.

Scoring (defaults chosen on the LoCoMo benchmark, ``bench/locomo.py``):

- lexical: BM25F, ``tf = tf_text + w * tf_ctx`` and ``dl = len_text + w * len_ctx`` with the context weight
  ``w``, standard BM25 idf and saturation (``k1``, ``b``);
- dense: cosine similarity of the query's embedding with each document's (int8 rows x float query, in chunks);
- hybrid: weighted score fusion of the two, each min-max normalised over the index (or reciprocal-rank fusion).
- signals beyond the words (``SearchConfig.author_boost`` / ``time_boost``, added to the fused ranking): a query
  that names an author of the memories (a word of a memory's ``author``) prefers that author's memories, and a
  question asking when ("When did ...", "How long ...") prefers memories that place something in time
  ("yesterday", "last week", "in May", "2022"). Both are tags, terms no query word can produce with zero counts,
  so they ride the postings, merges, forgetting and serialisation of the words; memories indexed before them have
  no tags and get no boost.
- the query's embedding names the memories' authors "they" / "their" (``SearchConfig.dense_names``, the
  service's default): the name is in nearly every memory of a conversation, and in the query's vector it only
  diluted what was asked (``SearchIndex._dense_query``); the lexical side and the calibrated score keep the
  query as typed.

- the learned rerank below the top 5 (``Rerank``, ``SearchConfig.rerank_depth``; issue 13, recall@10): the rest
  of the first pass's top 50 reordered by a logistic regression over features of each candidate that the first
  pass already has (``SearchIndex._rerank_features``), fitted on LoCoMo's tuning conversations
  (``bench/rerank.py --fit``).

That fusion ranks; it is not the score a search returns, since min-max normalisation makes it relative to the
query's other candidates (the top hit always near 1, a lone memory 0). The returned score is ``Calibration``'s:
a logistic function of the memory's own lexical match (``lexical_match``) and cosine similarity, fitted on
LoCoMo (``bench/calibrate.py``) so that it estimates the probability that a retrieved memory is relevant to the
query, the same for every query; a search leaves out memories scoring below ``min_score`` (by default the
calibration's), so that a query that matches nothing finds nothing.

If there is no embedder, no vector, or the query cannot be embedded, search is lexical only (with a warning).
Serialisation is an ``.npz`` archive of plain arrays plus a JSON header (ids, vocabulary, model): no pickle.
"""

from __future__ import annotations

import io
import json
import logging
import math
import zipfile
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from agent_memory.search.feedback import diversify, feedback_ranking
from agent_memory.search.lexical import (
    asked_months,
    author_words,
    mentions_time,
    named_words,
    neutral_names,
    temporal_question,
    tokenize,
)

from ..runtime.lazyclass import dataclass  # processed on first instance (lazyclass.py)

if TYPE_CHECKING:
    from agent_memory.providers.embedders import Embedder

__all__ = ["DEFAULT_CONFIG", "Doc", "SearchConfig", "SearchIndex"]

logger = logging.getLogger(__name__)

FORMAT = "agent-memory-search-index/1"
_MAX_TF = np.iinfo(np.uint16).max
_CHUNK_ROWS = 4096  # rows of int8 vectors scored at a time
# A stored index answers this many term lookups from its term order (a binary search and two gathers each: the
# first searches of a cold function) before it builds the postings of every term from it (gathers, no sort),
# which a warm function's searches then slice.
_GATHERED_LOOKUPS = 8

F32 = npt.NDArray[np.float32]
I8 = npt.NDArray[np.int8]
I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
U16 = npt.NDArray[np.uint16]
U32 = npt.NDArray[np.uint32]
Bool = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Doc:
    """One saved memory as the index sees it.

    ``text`` is the memory itself (e.g. ``"Caroline: I went to the support group yesterday"``); ``context`` is
    optional surrounding text (the turns just before it in the same session, the session date), indexed as a
    second, lower-weighted field and embedded with the text, so that a memory can be found by what it refers to.
    ``reply`` is the turn that answered it (``"Melanie: Are they yours at the festival?"``): embedded after the
    context, never indexed as words, so that a memory's vector holds its exchange while a query word matches only
    what the memory and the turns before it said.
    """

    id: str
    text: str
    context: str = ""
    author: str = ""  # who said it: a query naming the author prefers the author's memories (``author_boost``)
    timestamp: float | None = None  # when it was said (epoch seconds): a query naming its month prefers it
    reply: str = ""


@dataclass(frozen=True)
class SearchConfig:
    """Scoring parameters. ``mode``: hybrid | lexical | dense; ``fusion``: weighted | rrf."""

    mode: str = "hybrid"
    k1: float = 1.2
    b: float = 0.75
    context_weight: float = 0.4
    fusion: str = "weighted"
    dense_weight: float = 0.5
    rrf_k: float = 60.0
    rrf_depth: int = 100
    # Added to the fused ranking (which is in [0, 1]) of the memories of an author the query names, and of
    # memories that place something in time when the query asks when: see ``SearchIndex._bonus``.
    author_boost: float = 0.0
    time_boost: float = 0.0
    date_boost: float = 0.0  # memories of the month (and year) the query names ("in July 2023", "on 7 July")
    # Second-pass steps (``agent_memory.search.feedback``), off at 0: pseudo-relevance feedback from the first
    # pass's top ``feedback_docs`` memories (``feedback_terms`` words, weight ``feedback_weight``), and maximal
    # marginal relevance over the top ``diversity_depth`` (penalty ``diversity`` x cosine to a better hit).
    feedback_docs: int = 0
    feedback_terms: int = 10
    feedback_weight: float = 0.0
    feedback_keep: int = 0  # the first pass's top so many keep their places: feedback reorders the rest only
    feedback_dense: float = 0.0  # Rocchio on the vectors: weight of the cosine with the seeds' mean vector
    diversity: float = 0.0
    diversity_depth: int = 30
    # What the query's embedding is computed from: the query as typed ("keep"), or with the words naming an
    # author of the memories replaced by "they" / "their" ("neutral"; ``SearchIndex._dense_query``).
    dense_names: str = "keep"
    # The learned rerank below the head (``Rerank``, hybrid weighted fusion only; 0: off): the first pass's top
    # ``rerank_keep`` stay where they are and the rest of its top ``rerank_depth`` are reordered by ``RERANK``.
    rerank_depth: int = 0
    rerank_keep: int = 5

    def __post_init__(self) -> None:
        if self.mode not in ("hybrid", "lexical", "dense"):
            raise ValueError(f"unknown search mode {self.mode!r}")
        if self.fusion not in ("weighted", "rrf"):
            raise ValueError(f"unknown fusion {self.fusion!r}")
        if self.dense_names not in ("keep", "neutral"):
            raise ValueError(f"unknown dense_names {self.dense_names!r}")
        if self.k1 < 0 or not 0 <= self.b <= 1 or self.context_weight < 0 or not 0 <= self.dense_weight <= 1:
            raise ValueError("k1 >= 0, 0 <= b <= 1, context_weight >= 0 and 0 <= dense_weight <= 1")
        if self.author_boost < 0 or self.time_boost < 0 or self.date_boost < 0:
            raise ValueError("author_boost, time_boost and date_boost must be >= 0")
        if (
            min(self.feedback_docs, self.feedback_terms, self.feedback_keep, self.diversity_depth) < 0
            or min(self.feedback_weight, self.feedback_dense, self.diversity) < 0
        ):
            raise ValueError("feedback and diversity parameters must be >= 0")
        if self.rerank_depth < 0 or self.rerank_keep < 0:
            raise ValueError("rerank_depth and rerank_keep must be >= 0")


# What the service searches with: the boosts chosen on LoCoMo's tuning conversations (26, 30, 41; bench/locomo.py
# --sweep), best there of a grid from 0.05 to 0.5 and flat within 0.01 around it; the validation conversations
# (42, 43) were only reported. The month boost fires on few questions (9% name a month) and moves recall by a
# question or two across its grid: the smallest that reached the grid's best tuning recall@10. The neutral names
# in the query's embedding (issue 13, for recall@10) were chosen the same way: +0.012 / +0.014 tuning recall@5 /
# @10, and every neighbouring setting of the dense weight, context weight and author boost kept most of it.
# The learned rerank below the top 5 (``RERANK``, issue 13 for recall@10) over the first pass's top 50, chosen the
# same way (``bench/rerank.py --fit``).
DEFAULT_CONFIG = SearchConfig(
    author_boost=0.3, time_boost=0.3, date_boost=0.1, dense_names="neutral", rerank_depth=50, rerank_keep=5
)


@dataclass(frozen=True)
class Calibration:
    """A memory's score for a query: ``1 / (1 + exp(-(bias + lexical * lexical_match + dense * cosine + author *
    named)))``, ``named`` 1 for a memory of an author the query names (as ``author_boost`` reads it), else 0.

    Fitted by ``bench/calibrate.py`` on the tuning conversations of LoCoMo (26, 30, 41): the direction
    (lexical against dense) by a logistic regression over every memory of each question's user (evidence
    turns positive), the scale by Platt scaling over the retrieved top 10, so that among retrieved memories
    the score is the share that is relevant (checked on the validation conversations, 42 and 43). ``min_score``
    is the default cut: the largest that keeps the tuning questions' recall@5 and @10. The dense weights are
    MiniLM's (other embedders' cosines are on similar scales, not calibrated); lexical-only search (no
    vectors, or a query that could not be embedded) has its own fit. ``author`` (issue 13) was fitted after the
    others, which it leaves as they were, by Platt scaling over the retrieved top 10 with their logit as the
    offset (``bench/rerank.py --author-fit``: 0.399): the memories of a named author are the ones the author boost
    ranks high on little lexical or cosine evidence, and without the term the cut took them out of the top 10.
    A query naming no author (every off-topic one) is scored as before.
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
# matches: without vectors a memory must share a query word (as before), and no score cut applies by default.
LEXICAL_CALIBRATION = Calibration(bias=-3.868, lexical=6.361, dense=0.0, min_score=0.0)


# What a document's vector is computed from: its text, then as much of its context and reply as fits in about
# 512 characters (some 128 word pieces, the sequence length all-MiniLM-L6-v2 was trained on), keeping the end:
# the reply, the date and the nearest turn. An embedder's cost grows with its input (MiniLM on two cores: ~10 ms for
# 300 characters, ~29 ms for 900), and auto-save embeds every saved turn; the context's words stay whole in
# the lexical field.
EMBED_CHARS = 512
EMBED_MIN_CONTEXT = 64  # a long text still gets the end of its context (the date, a few words)


def _embedding_text(doc: Doc) -> str:
    context = " ".join(part for part in (doc.context.strip(), doc.reply.strip()) if part)
    if not context:
        return doc.text
    room = max(EMBED_MIN_CONTEXT, EMBED_CHARS - len(doc.text) - 1)
    if len(context) > room:
        cut = context[-room:]
        space = cut.find(" ")
        context = cut[space + 1 :] if 0 <= space < len(cut) - 1 else cut
    return f"{doc.text}\n{context}"


@dataclass(frozen=True)
class Rerank:
    """The learned rerank below the head (issue 13, recall@10): a logistic regression over ``RERANK_FEATURES`` of
    the first pass's top ``SearchConfig.rerank_depth`` memories; the first pass's top ``rerank_keep`` stay in
    place (so recall at that depth cannot move) and the others are ordered by ``features @ weights``. Fitted on
    LoCoMo's tuning conversations (26, 30, 41) by ``bench/rerank.py --fit``, which prints these constants; the
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
# .venv/bin/python -m bench.rerank --cache FILE --fit: the best of depth 20 / 30 / 50 x L2 1 / 10 x fitting every
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
class _Signals:
    """Which memories each of a query's signals applies to (None: to none)."""

    author: Bool | None
    time: Bool | None
    month: Bool | None


@dataclass(frozen=True)
class _FirstPass:
    """One query's first pass over every memory (``SearchIndex._first_pass``)."""

    lexical: F32
    cosine: F32 | None  # the query as typed: the calibrated score's
    dense: F32 | None  # the query the ranking embedded (``_dense_query``)
    fused: F32 | None  # the weighted fusion before the signals (None unless hybrid weighted fusion)
    ranking: F32  # fusion + signals + feedback, -inf below the cut
    positive_only: bool
    named: Bool | None
    signals: _Signals | None
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


class SearchIndex:
    """An immutable hybrid index over saved memories. Build with :meth:`build`, merge with :meth:`combine`."""

    def __init__(
        self,
        ids: list[str],
        vocab: list[str],
        doc_ptr: I64,
        terms: I32,
        tf_text: U16,
        tf_ctx: U16,
        len_text: U32,
        len_ctx: U32,
        vectors: I8 | None = None,
        scales: F32 | None = None,
        model: str | None = None,
        term_order: I32 | None = None,
    ) -> None:
        n = len(ids)
        if doc_ptr.shape != (n + 1,) or int(doc_ptr[0]) != 0 or int(doc_ptr[-1]) != len(terms):
            raise ValueError("doc_ptr does not match the documents and terms")
        if not (len(terms) == len(tf_text) == len(tf_ctx)) or len_text.shape != (n,) or len_ctx.shape != (n,):
            raise ValueError("term arrays disagree in length")
        if len(terms) and (int(terms.min()) < 0 or int(terms.max()) >= len(vocab)):
            raise ValueError("a term id is outside the vocabulary")
        if vectors is not None and (
            scales is None or vectors.ndim != 2 or vectors.shape[0] != n or scales.shape != (n,) or not model
        ):
            raise ValueError("vectors need one row and one scale per document, and a model name")
        if term_order is not None and (
            term_order.shape != terms.shape
            or (len(term_order) and (int(term_order.min()) < 0 or int(term_order.max()) >= len(terms)))
        ):
            raise ValueError("term_order is not one entry position per term entry")
        self._ids = ids
        self._vocab = vocab
        self._doc_ptr = doc_ptr
        self._terms = terms
        self._tf_text = tf_text
        self._tf_ctx = tf_ctx
        self._len_text = len_text
        self._len_ctx = len_ctx
        self._vectors = vectors
        self._scales = scales if vectors is not None else None
        self._model = model if vectors is not None else None
        # derived lazily
        self._positions: dict[str, int] | None = None
        self._term_ids: dict[str, int] | None = None
        self._postings: tuple[I64, I32, U16, U16] | None = None
        # The entries' positions in term-major order (stable: by term, then document), when stored with the index
        # or computed by ``_inverted``: a term's postings are then read from it without sorting every entry.
        self._order: I32 | None = term_order
        self._term_ptr: I64 | None = None
        self._gathered = 0  # term lookups answered from ``_order``
        self._norms: dict[tuple[float, float, float], F32] = {}

    # ----------------------------------------------------------------------------------------------------------
    # Construction
    # ----------------------------------------------------------------------------------------------------------

    @classmethod
    def empty(cls) -> SearchIndex:
        return cls.build([])

    @classmethod
    def build(cls, docs: Sequence[Doc], embedder: Embedder | None = None) -> SearchIndex:
        """Index ``docs`` (a later duplicate id replaces the earlier one); embed them if ``embedder`` is given.

        Raises ``EmbedderError`` when the embedder fails: the caller decides whether to retry or to index the
        documents without vectors (``build(docs, None)``), which then compete on lexical scores only.
        """
        latest = {doc.id: i for i, doc in enumerate(docs)}
        if len(latest) < len(docs):
            docs = [docs[i] for i in sorted(latest.values())]
        vocab: list[str] = []
        term_ids: dict[str, int] = {}
        terms: list[int] = []
        tf_text: list[int] = []
        tf_ctx: list[int] = []
        row_lengths: list[int] = []
        len_text: list[int] = []
        len_ctx: list[int] = []
        for doc in docs:
            if not isinstance(doc.id, str) or not doc.id:
                raise ValueError("every document needs a non-empty string id")
            text_tokens = tokenize(doc.text)
            ctx_tokens = tokenize(doc.context) if doc.context else []
            counts: dict[str, list[int]] = {}
            for token in text_tokens:
                counts.setdefault(token, [0, 0])[0] += 1
            for token in ctx_tokens:
                counts.setdefault(token, [0, 0])[1] += 1
            for tag in _tags(doc):  # zero counts: a tag is in the postings, never in a BM25 score or a length
                counts.setdefault(tag, [0, 0])
            for token, (in_text, in_ctx) in counts.items():
                tid = term_ids.get(token)
                if tid is None:
                    tid = term_ids[token] = len(vocab)
                    vocab.append(token)
                terms.append(tid)
                tf_text.append(in_text)
                tf_ctx.append(in_ctx)
            row_lengths.append(len(counts))
            len_text.append(len(text_tokens))
            len_ctx.append(len(ctx_tokens))
        doc_ptr = np.zeros(len(docs) + 1, dtype=np.int64)
        np.cumsum(np.asarray(row_lengths, dtype=np.int64), out=doc_ptr[1:])
        index = cls(
            [doc.id for doc in docs],
            vocab,
            doc_ptr,
            np.asarray(terms, dtype=np.int32),
            np.minimum(np.asarray(tf_text, dtype=np.int64), _MAX_TF).astype(np.uint16),
            np.minimum(np.asarray(tf_ctx, dtype=np.int64), _MAX_TF).astype(np.uint16),
            np.asarray(len_text, dtype=np.uint32),
            np.asarray(len_ctx, dtype=np.uint32),
        )
        index._term_ids = term_ids
        if embedder is None or not docs:
            return index
        matrix = _checked_embeddings(embedder, [_embedding_text(doc) for doc in docs], len(docs))
        vectors, scales = _quantise(matrix)
        return index._replace(vectors=vectors, scales=scales, model=_model_name(embedder))

    def _replace(self, **changes: Any) -> SearchIndex:
        fields: dict[str, Any] = {
            "ids": self._ids,
            "vocab": self._vocab,
            "doc_ptr": self._doc_ptr,
            "terms": self._terms,
            "tf_text": self._tf_text,
            "tf_ctx": self._tf_ctx,
            "len_text": self._len_text,
            "len_ctx": self._len_ctx,
            "vectors": self._vectors,
            "scales": self._scales,
            "model": self._model,
        }
        fields.update(changes)
        return SearchIndex(**fields)

    # ----------------------------------------------------------------------------------------------------------
    # Introspection
    # ----------------------------------------------------------------------------------------------------------

    @property
    def ids(self) -> list[str]:
        """Document ids in index order (a copy)."""
        return list(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, doc_id: object) -> bool:
        return isinstance(doc_id, str) and doc_id in self._position_map()

    def __repr__(self) -> str:
        return f"SearchIndex(docs={len(self)}, terms={len(self._vocab)}, model={self._model!r})"

    @property
    def model(self) -> str | None:
        """The name of the embedder that produced the vectors; None when the index is lexical only."""
        return self._model

    @property
    def dim(self) -> int:
        return 0 if self._vectors is None else int(self._vectors.shape[1])

    def missing_vectors(self) -> list[str]:
        """Ids of documents without a vector (indexed lexical-only, or from a part of another model)."""
        if self._scales is None:
            return list(self._ids)
        return [self._ids[i] for i in np.flatnonzero(self._scales == 0)]

    def _position_map(self) -> dict[str, int]:
        if self._positions is None:
            self._positions = dict(zip(self._ids, range(len(self._ids)), strict=True))
        return self._positions

    def _term_map(self) -> dict[str, int]:
        if self._term_ids is None:
            self._term_ids = dict(zip(self._vocab, range(len(self._vocab)), strict=True))  # in C
        return self._term_ids

    # ----------------------------------------------------------------------------------------------------------
    # Set operations
    # ----------------------------------------------------------------------------------------------------------

    def without(self, ids: Iterable[str]) -> SearchIndex:
        """A copy without the given ids (forgotten memories); unknown ids are ignored."""
        positions = self._position_map()
        drop = [positions[i] for i in set(ids) if i in positions]
        if not drop:
            return self
        keep = np.ones(len(self), dtype=bool)
        keep[drop] = False
        # Always prune here: a word only a forgotten memory used must not stay in the stored vocabulary.
        return self._select(keep)._pruned(force=True)

    def _select(self, keep: Bool) -> SearchIndex:
        lengths = np.diff(self._doc_ptr)
        entry_keep = np.repeat(keep, lengths)
        doc_ptr = np.zeros(int(keep.sum()) + 1, dtype=np.int64)
        np.cumsum(lengths[keep], out=doc_ptr[1:])
        dropped = np.flatnonzero(~keep)
        if len(dropped) <= 1024:  # few deletions: copy the list and delete in place (memmove, no per-id work)
            ids = list(self._ids)
            for i in dropped[::-1].tolist():
                del ids[i]
        else:
            ids = [self._ids[i] for i in np.flatnonzero(keep).tolist()]
        return self._replace(
            ids=ids,
            doc_ptr=doc_ptr,
            terms=self._terms[entry_keep],
            tf_text=self._tf_text[entry_keep],
            tf_ctx=self._tf_ctx[entry_keep],
            len_text=self._len_text[keep],
            len_ctx=self._len_ctx[keep],
            vectors=None if self._vectors is None else self._vectors[keep],
            scales=None if self._scales is None else self._scales[keep],
        )

    @classmethod
    def combine(cls, parts: Sequence[SearchIndex]) -> SearchIndex:
        """One index over all ``parts`` (e.g. a snapshot and the segments written since); for an id in several
        parts the last part wins. Costs array concatenation and a vocabulary merge of the smaller parts, no
        re-tokenising. Vectors come from the model of the last part that has vectors; documents of parts
        without vectors, or of another model, keep none (lexical only) and are listed by ``missing_vectors``."""
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls.empty()
        if len(parts) == 1:
            return parts[0]
        # later parts win: drop, from each part, the ids that a later part has
        keeps: list[Bool | None] = [None] * len(parts)
        seen: set[str] = set()
        for k in range(len(parts) - 1, -1, -1):
            part = parts[k]
            if seen and not seen.isdisjoint(part._ids):  # parts seldom share ids: one C-level pass says so
                positions = part._position_map() if len(seen) < len(part) else None
                if positions is not None:
                    drop = [positions[i] for i in seen if i in positions]
                else:
                    drop = [i for i, doc_id in enumerate(part._ids) if doc_id in seen]
                if drop:
                    keep = np.ones(len(part), dtype=bool)
                    keep[drop] = False
                    keeps[k] = keep
            if k:
                seen.update(part._ids)
        selected = [p if keep is None else p._select(keep) for p, keep in zip(parts, keeps, strict=True)]
        selected = [p for p in selected if len(p)]
        if len(selected) == 1:
            return selected[0]
        pruned = any(keep is not None for keep in keeps)
        if not pruned and _PartedIndex.fits(selected):
            return _PartedIndex(selected)
        return cls._concatenate(selected, pruned=pruned)

    @classmethod
    def _concatenate(cls, selected: Sequence[SearchIndex], *, pruned: bool) -> SearchIndex:
        """One index of the documents of ``selected`` (no id in two of them), in their order; with ``pruned``,
        without the vocabulary terms no document uses any more."""
        # vocabulary: extend the largest part's vocabulary with the others' new terms
        base = max(range(len(selected)), key=lambda k: len(selected[k]._vocab))
        vocab = list(selected[base]._vocab)
        term_ids = dict(selected[base]._term_map())
        term_arrays: list[I32] = []
        for k, part in enumerate(selected):
            if k == base:
                term_arrays.append(part._terms)
                continue
            # new terms first, then every term's id: loops in C (a cold search at 100,000 memories merges some
            # 75,000 terms of three parts' vocabularies)
            new_terms = [term for term in dict.fromkeys(part._vocab) if term not in term_ids]
            term_ids.update(zip(new_terms, range(len(vocab), len(vocab) + len(new_terms)), strict=True))
            vocab += new_terms
            mapping = np.fromiter(map(term_ids.__getitem__, part._vocab), dtype=np.int32, count=len(part._vocab))
            term_arrays.append(mapping[part._terms])

        lengths = np.concatenate([np.diff(p._doc_ptr) for p in selected])
        doc_ptr = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=doc_ptr[1:])
        ids = [doc_id for p in selected for doc_id in p._ids]

        vectors: I8 | None = None
        scales: F32 | None = None
        with_vectors = [p for p in selected if p._vectors is not None]
        model = with_vectors[-1]._model if with_vectors else None
        if with_vectors:
            dim = with_vectors[-1].dim
            blocks: list[I8] = []
            scale_blocks: list[F32] = []
            for p in selected:
                if p._vectors is not None and p._scales is not None and p._model == model and p.dim == dim:
                    blocks.append(p._vectors)
                    scale_blocks.append(p._scales)
                else:
                    if p._vectors is not None:
                        logger.warning(
                            "search index part of model %s (%d dims) combined into one of %s (%d dims): "
                            "its %d documents lose their vectors",
                            p._model,
                            p.dim,
                            model,
                            dim,
                            len(p),
                        )
                    blocks.append(np.zeros((len(p), dim), dtype=np.int8))
                    scale_blocks.append(np.zeros(len(p), dtype=np.float32))
            vectors = np.concatenate(blocks)
            scales = np.concatenate(scale_blocks)

        combined = cls(
            ids,
            vocab,
            doc_ptr,
            np.concatenate(term_arrays),
            np.concatenate([p._tf_text for p in selected]),
            np.concatenate([p._tf_ctx for p in selected]),
            np.concatenate([p._len_text for p in selected]),
            np.concatenate([p._len_ctx for p in selected]),
            vectors,
            scales,
            model,
        )
        combined._term_ids = term_ids
        # an id replaced by a later part may leave terms no document uses; check only then (a bincount)
        return combined._pruned() if pruned else combined

    def _pruned(self, *, force: bool = False) -> SearchIndex:
        """Drop vocabulary terms no document uses any more: always with ``force`` (forgetting), else when they
        are many (after merges)."""
        used = np.bincount(self._terms, minlength=len(self._vocab)) > 0
        unused = len(self._vocab) - int(used.sum())
        if unused == 0 or (not force and unused < max(1024, len(self._vocab) // 4)):
            return self
        mapping = np.cumsum(used, dtype=np.int64).astype(np.int32) - 1
        vocab = [term for term, keep in zip(self._vocab, used.tolist(), strict=True) if keep]
        return self._replace(vocab=vocab, terms=mapping[self._terms])

    # ----------------------------------------------------------------------------------------------------------
    # Serialisation (npz of plain arrays + a JSON header; never pickle)
    # ----------------------------------------------------------------------------------------------------------

    def to_bytes(self, compress: bool = False) -> bytes:
        header = {"format": FORMAT, "model": self._model, "ids": self._ids, "vocab": self._vocab}
        arrays: dict[str, Any] = {
            "header": np.frombuffer(json.dumps(header, ensure_ascii=False).encode("utf-8"), dtype=np.uint8),
            "doc_ptr": self._doc_ptr,
            "terms": self._terms,
            "tf_text": self._tf_text,
            "tf_ctx": self._tf_ctx,
            "len_text": self._len_text,
            "len_ctx": self._len_ctx,
        }
        if self._vectors is not None and self._scales is not None:
            arrays["vectors"] = self._vectors
            arrays["scales"] = self._scales
        # the term-major order of the entries, so that a reader's first search does not sort them (a reader of
        # an earlier version ignores it)
        arrays["term_order"] = self._term_order()
        buffer = io.BytesIO()
        (np.savez_compressed if compress else np.savez)(buffer, **arrays)
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes | memoryview) -> SearchIndex:
        """The index ``to_bytes`` wrote (compressed or not). ValueError when ``data`` is not one. The arrays of an
        uncompressed archive are views into ``data`` (read-only; ``data`` stays alive with them), not copies."""
        try:
            arrays = _stored_arrays(data)
            if arrays is None:
                with np.load(io.BytesIO(data), allow_pickle=False) as archive:
                    arrays = {name: archive[name] for name in archive.files}
            header = json.loads(arrays.pop("header").tobytes().decode("utf-8"))
        except Exception as exc:
            raise ValueError(f"not a search index: {type(exc).__name__}: {exc}") from exc
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            raise ValueError("not a search index of format " + FORMAT)
        expected = {
            "doc_ptr": np.int64,
            "terms": np.int32,
            "tf_text": np.uint16,
            "tf_ctx": np.uint16,
            "len_text": np.uint32,
            "len_ctx": np.uint32,
            "vectors": np.int8,
            "scales": np.float32,
            "term_order": np.int32,
        }
        for name, dtype in expected.items():
            if name in arrays and arrays[name].dtype != dtype:
                raise ValueError(f"search index array {name} has dtype {arrays[name].dtype}, expected {dtype}")
        ids, vocab = header.get("ids"), header.get("vocab")
        if not isinstance(ids, list) or not isinstance(vocab, list):
            raise ValueError("search index header lacks ids or vocab")
        return cls(
            ids,
            vocab,
            arrays["doc_ptr"],
            arrays["terms"],
            arrays["tf_text"],
            arrays["tf_ctx"],
            arrays["len_text"],
            arrays["len_ctx"],
            arrays.get("vectors"),
            arrays.get("scales"),
            header.get("model"),
            arrays.get("term_order"),
        )

    # ----------------------------------------------------------------------------------------------------------
    # Search
    # ----------------------------------------------------------------------------------------------------------

    def search(
        self,
        query: str,
        top_k: int,
        embedder: Embedder | None = None,
        exclude: frozenset[str] = frozenset(),
        *,
        config: SearchConfig | None = None,
        min_score: float | None = 0.0,
    ) -> list[tuple[str, float]]:
        """The ``top_k`` best (id, score) pairs for ``query``, in ranking order, among the memories whose
        calibrated score (``Calibration``) is at least ``min_score`` (None: the calibration's default; 0: any).

        The ranking is the configured one (hybrid fusion; lexical only when there are no vectors), below the top
        ``rerank_keep`` the learned rerank's (``Rerank``); the score is each memory's own, so a memory ranked lower
        may score higher, except that below the top ``rerank_keep`` a reranked result shows the least of its own
        score and the one above it (never rising down the list, never below the cut). Never raises for a
        failing embedder: search is then lexical only, and a warning is logged. A blank query gives an empty
        list."""
        config = config or DEFAULT_CONFIG
        if top_k <= 0 or len(self) == 0 or not query or not query.strip():
            return []
        first = self._first_pass(query, embedder, exclude, config, min_score)
        reranked = first.fused is not None and config.rerank_depth > 0 and top_k > config.rerank_keep
        depth = max(top_k, config.diversity_depth) if config.diversity else top_k
        if reranked:
            depth = max(depth, config.rerank_depth)
        top = self._top_positions(first.ranking, depth, exclude, positive_only=first.positive_only)
        if reranked:
            top = self._rerank(query, first, top, config)
        top = diversify(self, first.ranking, top, top_k, config.diversity)[:top_k]
        scores = first.calibrated(top)
        if reranked and len(top) > config.rerank_keep:
            # Below the head the order is the rerank's, not the scores': a reranked position shows the least of its
            # own score and the one above it, so the returned scores never rise down the list from the head's last
            # on, never exceed a memory's own and never fall below the cut (every candidate's own score is at
            # least the cut). The head keeps its own scores, as before.
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
    ) -> _FirstPass:
        """Every memory's ranking for ``query`` (fusion, boosts, feedback; -inf where the calibrated score is below
        the cut), and what the calibrated score and the rerank read of it."""
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
        calibration = LEXICAL_CALIBRATION if dense is None else HYBRID_CALIBRATION
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
            ranking, positive_only = self._rrf(lexical, dense, config, exclude), True
        else:
            fused = ((1.0 - config.dense_weight) * _minmax(lexical) + config.dense_weight * _minmax(dense)).astype(
                np.float32
            )
            ranking, positive_only = fused, False
        signals = self._signals(query, config, named if config.author_boost else None)
        bonus = None if signals is None else self._bonus_of(signals, config)
        if bonus is not None:
            finite = ranking[np.isfinite(ranking)]
            peak = np.float32(finite.max()) if len(finite) and float(finite.max()) > 0 else np.float32(1.0)
            # on the ranking's own scale (fusion: [0, 1]; BM25 alone: its best score); lexical-only search still
            # needs a query word in the memory, so a bonus never makes a candidate of a memory without one
            boosted = ranking + peak * bonus
            ranking = (np.where(ranking > 0, boosted, ranking) if positive_only else boosted).astype(np.float32)
        ranking = feedback_ranking(self, query, ranking, config, exclude, positive_only=positive_only)
        # A score rounds to at least ``cut`` when it is at least ``cut`` - 0.00005: compared as a logit, so that
        # no memory's score but the top_k's is computed.
        lowest = cut - 0.00005
        if lowest > 0:
            match = lexical / ceiling if ceiling > 0 else np.zeros_like(lexical)
            logits = calibration.logits(match.astype(np.float32), cosine, named)
            keep = logits >= np.float32(math.log(lowest / (1 - lowest)))
            ranking = np.where(keep, ranking, np.float32(-np.inf)).astype(np.float32)
        return _FirstPass(
            lexical, cosine, dense, fused, ranking, positive_only, named, signals, float(ceiling), calibration
        )

    def _rerank(self, query: str, first: _FirstPass, top: I64, config: SearchConfig) -> I64:
        """``top`` (the first pass's best, in its order) with its head kept and the rest ordered by ``RERANK``."""
        keep = config.rerank_keep
        if len(top) <= keep + 1:
            return top
        logits = self._rerank_features(query, first, top, config)[keep:] @ RERANK.weights
        tail = keep + np.argsort(-logits, kind="stable")  # ties keep the first pass's order
        out: I64 = np.concatenate([top[:keep], top[tail]])
        return out

    def _rerank_features(
        self, query: str, first: _FirstPass, top: I64, config: SearchConfig
    ) -> npt.NDArray[np.float64]:
        """``RERANK_FEATURES`` of the first pass's ``top`` (in its order; hybrid weighted fusion), one row each,
        from what the first pass computed and the candidates' own rows of the doc-major arrays: a few array
        operations over ``len(top)`` memories, none over the whole index."""
        assert first.fused is not None and first.cosine is not None and first.dense is not None
        m, n = len(top), len(self)
        out = np.zeros((m, len(RERANK_FEATURES)), dtype=np.float64)
        if not m:
            return out
        ceiling = first.ceiling
        # the query's terms' share of the BM25 score in each field, and of their idf mass in the memory's words:
        # from each distinct term's postings (``_token_postings``, which a parted index answers from its parts
        # without building a vocabulary or postings of its own), looked up at the candidates
        text_share, ctx_share, cover_text, cover_all = (np.zeros(m) for _ in range(4))
        postings = [p for p in map(self._token_postings, dict.fromkeys(tokenize(query))) if p is not None]
        if postings:
            idfs = [math.log(1.0 + (n - len(p[0]) + 0.5) / (len(p[0]) + 0.5)) for p in postings]
            norm = self._length_norm(config)[top].astype(np.float64)
            k1p1 = config.k1 + 1.0
            for (docs, tf_text, tf_ctx), w in zip(postings, idfs, strict=True):
                at = np.minimum(np.searchsorted(docs, top), len(docs) - 1)  # docs ascending
                hit = docs[at] == top
                tt = np.where(hit, tf_text[at], 0).astype(np.float64)
                tc = np.where(hit, tf_ctx[at], 0).astype(np.float64)
                text_share += w * tt * k1p1 / (tt + norm)
                ctx_share += w * tc * k1p1 / (tc + norm)
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
            "log_len": np.log1p(self._len_text[top].astype(np.float64)),
            "bias": 1.0,
        }
        for j, name in enumerate(RERANK_FEATURES):
            out[:, j] = columns[name]
        return out

    def _bonus(self, query: str, config: SearchConfig, authors: Bool | None) -> F32 | None:
        """What the query's signals add to each memory's ranking: ``author_boost`` to the memories of every
        author the query names by a word of their name (a query naming both speakers of a conversation adds to
        both; ``authors``, the caller's ``_author_mask``), ``time_boost`` to the memories that place something in
        time when the query asks when, ``date_boost`` to the memories of a month the query names. None when
        nothing applies (the common case costs a few dictionary lookups)."""
        signals = self._signals(query, config, authors)
        return None if signals is None else self._bonus_of(signals, config)

    def _signals(self, query: str, config: SearchConfig, authors: Bool | None) -> _Signals | None:
        """Which memories each of the query's signals applies to (``_bonus``); None when none applies."""
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
        return _Signals(authors, timed, dated)

    @staticmethod
    def _bonus_of(signals: _Signals, config: SearchConfig) -> F32:
        n = len(next(m for m in (signals.time, signals.author, signals.month) if m is not None))
        bonus = np.zeros(n, dtype=np.float32)
        if signals.time is not None:
            bonus[signals.time] += np.float32(config.time_boost)
        if signals.author is not None:  # an author named by two words of the query ("Ann Lee") is boosted once
            bonus[signals.author] += np.float32(config.author_boost)
        if signals.month is not None:  # a memory of two named months is boosted once
            bonus[signals.month] += np.float32(config.date_boost)
        return bonus

    def _dense_query(self, query: str, config: SearchConfig) -> str:
        """What the query's embedding is computed from. With ``dense_names="neutral"``, the words naming an author
        of these memories become "they" / "their" ("What do Melanie's kids like?" -> "What do their kids like?").
        In a conversation nearly every memory holds the names (its author's ``"Melanie: "``, the other speaker's
        "Hi Melanie!", the turns of its context), so a name in the query adds similarity to all of them and
        dilutes what the question asks about; the author boost already prefers the named author's memories. The
        lexical side keeps the query as typed (a name is a frequent, low-idf word there), and so does a query
        naming no author. This vector ranks only: the calibrated score and the ``min_score`` cut keep the cosine of
        the query as typed, which ``Calibration`` was fitted on (``search`` embeds both in one call), since a
        query's vector without the names is further from every memory, and the old constants with it cut tuning
        recall@10 from 0.837 to 0.805, while a refit's rule-chosen cut (0.01) left 1% of the off-topic queries
        empty instead of 96% (``bench.calibrate``)."""
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

    def _bm25(self, terms: dict[int, float], config: SearchConfig) -> F32:
        """BM25F of every document for a weighted bag of term ids (lexical feedback's terms and weights)."""
        return self._bm25_postings([(self._postings_of(term), weight) for term, weight in terms.items()], config)

    def _bm25_postings(self, terms: list[tuple[tuple[I32, U16, U16], float]], config: SearchConfig) -> F32:
        """BM25F of every document for weighted posting lists (documents, text tf, context tf) of distinct terms."""
        n = len(self)
        scores = np.zeros(n, dtype=np.float32)
        if not terms:
            return scores
        norm = self._length_norm(config)
        w = np.float32(config.context_weight)
        k1p1 = np.float32(config.k1 + 1.0)
        for (docs, tf_text, tf_ctx), weight in terms:
            df = len(docs)
            if not df:
                continue
            tf = tf_text.astype(np.float32)
            if w:
                tf += w * tf_ctx
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            scores[docs] += np.float32(weight * idf) * tf * k1p1 / (tf + norm[docs])  # docs unique in a posting list
        return scores

    # Term lookups by the term itself: what a search asks (a combined index of several parts answers them from
    # its parts, without building a vocabulary or postings of its own: ``_PartedIndex``).

    def _has_token(self, token: str) -> bool:
        return token in self._term_map()

    def _token_postings(self, token: str) -> tuple[I32, U16, U16] | None:
        """The postings (document positions ascending, text tf, context tf) of ``token``; None when no document
        holds it."""
        term = self._term_map().get(token)
        return None if term is None else self._postings_of(term)

    def _token_docs(self, token: str) -> I32 | None:
        postings = self._token_postings(token)
        return None if postings is None else postings[0]

    def _token_df(self, token: str) -> int:
        """How many documents hold ``token``."""
        term = self._term_map().get(token)
        if term is None:
            return 0
        ptr = self._ptr()
        return int(ptr[term + 1] - ptr[term])

    def _ptr(self) -> I64:
        """Where each term's entries start in term-major order (by term id, one more for the end)."""
        if self._postings is not None:
            return self._postings[0]
        if self._term_ptr is None:
            ptr = np.zeros(len(self._vocab) + 1, dtype=np.int64)
            np.cumsum(np.bincount(self._terms, minlength=len(self._vocab)), out=ptr[1:])
            self._term_ptr = ptr
        return self._term_ptr

    def _postings_of(self, term: int) -> tuple[I32, U16, U16]:
        """The postings of term id ``term``: sliced from the built postings, or gathered from the stored term
        order (a few thousand entries for a query's term, where building the postings sorts every entry)."""
        if self._postings is None and (self._order is None or self._gathered >= _GATHERED_LOOKUPS):
            self._inverted()  # from the stored order when there is one: gathers, no sort
        if self._postings is not None:
            ptr, post_docs, post_tf_text, post_tf_ctx = self._postings
            start, end = int(ptr[term]), int(ptr[term + 1])
            return post_docs[start:end], post_tf_text[start:end], post_tf_ctx[start:end]
        assert self._order is not None
        self._gathered += 1
        ptr = self._ptr()
        entries = self._order[int(ptr[term]) : int(ptr[term + 1])]
        docs = (np.searchsorted(self._doc_ptr, entries, side="right") - 1).astype(np.int32)
        return docs, self._tf_text[entries], self._tf_ctx[entries]

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
        total = 0.0
        for token in set(tokenize(query)):
            # A term no memory holds weighs as one that a single memory holds: as much as the rarest word can,
            # without the idf of df 0, which in a small index dwarfs every term that does occur.
            df = max(1, self._token_df(token)) if n else 1
            total += math.log(1.0 + (n - df + 0.5) / (df + 0.5)) * (config.k1 + 1.0)
        return total

    def _inverted(self) -> tuple[I64, I32, U16, U16]:
        """Postings by term: (ptr by term id, doc positions, text tf, context tf); built once."""
        if self._postings is None:
            order = self._term_order()
            doc_of_entry = np.repeat(np.arange(len(self), dtype=np.int32), np.diff(self._doc_ptr))
            ptr = np.zeros(len(self._vocab) + 1, dtype=np.int64)
            np.cumsum(np.bincount(self._terms, minlength=len(self._vocab)), out=ptr[1:])
            self._postings = (ptr, doc_of_entry[order], self._tf_text[order], self._tf_ctx[order])
        return self._postings

    def _term_order(self) -> I32:
        """The entries' positions in term-major order (stored, or sorted now and kept)."""
        if self._order is None:
            self._order = _stable_argsort(self._terms, len(self._vocab)).astype(np.int32)
        return self._order

    def _length_norm(self, config: SearchConfig) -> F32:
        """k1 * (1 - b + b * dl / avgdl) per document, for this config's k1, b and context weight."""
        key = (config.k1, config.b, config.context_weight)
        norm = self._norms.get(key)
        if norm is None:
            dl = self._len_text.astype(np.float32) + np.float32(config.context_weight) * self._len_ctx
            avgdl = float(dl.mean()) if len(dl) and float(dl.mean()) > 0 else 1.0
            norm = (config.k1 * (1.0 - config.b + config.b * dl / avgdl)).astype(np.float32)
            self._norms[key] = norm
        return norm

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
        name, dim = _model_name(embedder), int(getattr(embedder, "dim", 0) or 0)
        if name != self._model or (dim and dim != self.dim):
            logger.warning("embedder %s does not match the index vectors (%s); searching lexically", name, self._model)
            return None
        try:
            matrix = _checked_embeddings(embedder, queries, len(queries))
        except Exception as exc:  # any failure of the embedder: lexical only, never fail the search
            logger.warning("could not embed the query (%s: %s); searching lexically", type(exc).__name__, exc)
            return None
        if matrix.shape[1] != self.dim:
            logger.warning("query embedding has %d dimensions, the index %d; searching lexically", *matrix.shape)
            return None
        blocks = self._vector_blocks()
        rows: list[F32] = []
        for query_vector in matrix:
            out = np.empty(len(self), dtype=np.float32)
            for offset, vectors in blocks:
                # einsum widens the int8 rows to float32 in its own small buffers and never calls BLAS: a BLAS
                # product per chunk woke OpenBLAS's thread pool each time, which on a busy or fractional CPU (a
                # Lambda function below 1,769 MB) cost more than the product itself (bench.search_speed).
                for start in range(0, len(vectors), _CHUNK_ROWS):
                    np.einsum(
                        "ij,j->i",
                        vectors[start : start + _CHUNK_ROWS],
                        query_vector,
                        dtype=np.float32,
                        casting="unsafe",
                        out=out[offset + start : offset + min(start + _CHUNK_ROWS, len(vectors))],
                    )
            out *= self._scales
            rows.append(out)
        return rows

    def _vector_blocks(self) -> list[tuple[int, I8]]:
        """The document vectors as (first document's position, rows) blocks covering every document."""
        assert self._vectors is not None
        return [(0, self._vectors)]

    def _rrf(self, lexical: F32, dense: F32, config: SearchConfig, exclude: frozenset[str]) -> F32:
        fused = np.zeros(len(self), dtype=np.float32)
        for scores, weight, positive in (
            (lexical, 1.0 - config.dense_weight, True),
            (dense, config.dense_weight, False),
        ):
            ranked = self._top_positions(scores, config.rrf_depth, exclude, positive_only=positive)
            fused[ranked] += np.float32(2.0 * weight) / (config.rrf_k + 1.0 + np.arange(len(ranked), dtype=np.float32))
        return fused

    def _top_positions(self, scores: F32, k: int, exclude: frozenset[str], *, positive_only: bool) -> I64:
        scores = scores.copy() if exclude else scores
        if exclude:
            positions = self._position_map()
            scores[[positions[i] for i in exclude if i in positions]] = -np.inf
        candidates = np.flatnonzero(scores > 0) if positive_only else np.flatnonzero(np.isfinite(scores))
        if len(candidates) > k:
            part = np.argpartition(-scores[candidates], k - 1)[:k]
            candidates = candidates[part]
        order = np.lexsort((candidates, -scores[candidates]))  # best first; ties: index order
        best: I64 = candidates[order]
        return best


class _PartedIndex(SearchIndex):
    """The combination of parts that share no document id, searched through its parts: what ``combine`` returns
    for a cold search's snapshot and segments. A search asks for the postings of its few terms (each part's,
    concatenated: the same arrays a combined index's postings would give, documents ascending) and scores the
    vectors part by part, so no vocabulary is merged, no postings of every term are built and no vector is
    copied; what needs whole arrays (forgetting, serialising, feedback, a merge) reads them from the one index
    built of the parts on first use (``_full``). Its documents, lengths and scales are the parts', in order."""

    # what only the whole index has: read from it (``__getattr__`` is consulted only for attributes this object
    # does not hold)
    _WHOLE = frozenset({"_vocab", "_doc_ptr", "_terms", "_tf_text", "_tf_ctx", "_vectors"})

    _parts: list[SearchIndex]

    def __init__(self, parts: Sequence[SearchIndex]) -> None:  # not super().__init__: it takes the whole arrays
        flat: list[SearchIndex] = []
        for part in parts:
            flat += part._parts if isinstance(part, _PartedIndex) else [part]
        self._parts = flat
        self._offsets = [0]
        for part in flat:
            self._offsets.append(self._offsets[-1] + len(part))
        self._ids = [doc_id for part in flat for doc_id in part._ids]
        self._len_text = np.concatenate([p._len_text for p in flat])
        self._len_ctx = np.concatenate([p._len_ctx for p in flat])
        self._model = flat[-1]._model
        self._scales = None if self._model is None else np.concatenate([p._scales for p in flat])  # type: ignore[misc]
        self._positions = None
        self._term_ptr = None
        self._norms = {}
        self._whole: SearchIndex | None = None

    @staticmethod
    def fits(parts: Sequence[SearchIndex]) -> bool:
        """Whether ``parts`` (sharing no id) can be searched as they are: all with vectors of one model and
        dimension, or none with vectors (a mix loses some parts' vectors: ``combine`` copies those)."""
        models = {(p._model, p.dim) for p in parts}
        return len(models) == 1

    def __getattr__(self, name: str) -> Any:
        if name in _PartedIndex._WHOLE:
            return getattr(self._full(), name)
        raise AttributeError(name)

    def _full(self) -> SearchIndex:
        whole = self._whole
        if whole is None:
            whole = SearchIndex._concatenate(self._parts, pruned=False)
            whole._order = self._merged_order(whole)
            self._whole = whole
        return whole

    def _merged_order(self, whole: SearchIndex) -> I32:
        """The term order of ``whole`` (the parts' entries in order, their terms renumbered) from the parts' own:
        within a term, part after part, each part's entries already by document. A merge's snapshot stores it
        without sorting the 1.75 million entries of 100,000 memories."""
        term_map = whole._term_map()
        ptr = whole._ptr()
        order = np.empty(len(whole._terms), dtype=np.int32)
        start = ptr[:-1].copy()  # where the next part's entries of each term go
        entry_offset = 0
        for part in self._parts:
            mapping = np.fromiter(map(term_map.__getitem__, part._vocab), dtype=np.int64, count=len(part._vocab))
            local_order = part._term_order()
            local_ptr = part._ptr()
            local_terms = part._terms[local_order]  # each entry's term, in the part's term order
            rank = np.arange(len(local_order), dtype=np.int64) - local_ptr[local_terms]
            order[start[mapping[local_terms]] + rank] = local_order + np.int32(entry_offset)
            start[mapping] += np.diff(local_ptr)
            entry_offset += len(part._terms)
        return order

    def __repr__(self) -> str:
        return f"SearchIndex(docs={len(self)}, parts={len(self._parts)}, model={self._model!r})"

    # by term id: the whole index's ids (feedback, tests)
    def _term_map(self) -> dict[str, int]:
        return self._full()._term_map()

    def _ptr(self) -> I64:
        return self._full()._ptr()

    def _postings_of(self, term: int) -> tuple[I32, U16, U16]:
        return self._full()._postings_of(term)

    def _inverted(self) -> tuple[I64, I32, U16, U16]:
        return self._full()._inverted()

    def _term_order(self) -> I32:
        return self._full()._term_order()

    @property
    def dim(self) -> int:
        return self._parts[-1].dim

    def _has_token(self, token: str) -> bool:
        return any(part._has_token(token) for part in self._parts)

    def _token_df(self, token: str) -> int:
        return sum(part._token_df(token) for part in self._parts)

    def _token_postings(self, token: str) -> tuple[I32, U16, U16] | None:
        found = [
            (offset, postings)
            for offset, part in zip(self._offsets, self._parts, strict=False)
            if (postings := part._token_postings(token)) is not None
        ]
        if not found:
            return None
        docs = np.concatenate([postings[0] + np.int32(offset) for offset, postings in found])
        return docs, np.concatenate([p[1] for _, p in found]), np.concatenate([p[2] for _, p in found])

    def _vector_blocks(self) -> list[tuple[int, I8]]:
        blocks = [(offset, part._vectors) for offset, part in zip(self._offsets, self._parts, strict=False)]
        return [(offset, vectors) for offset, vectors in blocks if vectors is not None]  # all, when searched


# --------------------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------------------


# Tags: terms no query word can produce (``tokenize`` yields letters and digits only), with zero counts in both
# fields, so that they ride the postings, merges, forgetting and serialisation of ordinary terms at no cost to
# BM25. ``@a:<word>`` for each word of the memory's author, ``@t`` for a memory that places something in time.
AUTHOR_TAG = "@a:"
TIME_TAG = "@t"
MONTH_TAG = "@m:"  # @m:2023-07 and @m:07, from the memory's timestamp (UTC)


def post_docs_of(index: SearchIndex, term: int) -> I32:
    """The positions of the documents holding ``term``."""
    return index._postings_of(term)[0]


def _tags(doc: Doc) -> list[str]:
    tags = [AUTHOR_TAG + word for word in dict.fromkeys(author_words(doc.author))] if doc.author else []
    if mentions_time(doc.text):
        tags.append(TIME_TAG)
    if doc.timestamp is not None and math.isfinite(doc.timestamp):
        try:
            when = datetime.fromtimestamp(doc.timestamp, tz=UTC)
        except (OverflowError, OSError, ValueError):  # a timestamp no datetime holds: no month
            return tags
        tags += [f"{MONTH_TAG}{when.year:04d}-{when.month:02d}", f"{MONTH_TAG}{when.month:02d}"]
    return tags


def _model_name(embedder: Embedder) -> str:
    return str(getattr(embedder, "name", "") or type(embedder).__name__)


def _checked_embeddings(embedder: Embedder, texts: list[str], rows: int) -> F32:
    from agent_memory.providers.embedders import EmbedderError, normalize_rows

    try:
        matrix = embedder.embed(texts)
    except EmbedderError:
        raise
    except Exception as exc:
        raise EmbedderError(f"embedder {_model_name(embedder)} failed: {type(exc).__name__}: {exc}") from exc
    matrix = np.asarray(matrix)
    if matrix.ndim != 2 or matrix.shape[0] != rows or matrix.shape[1] < 1 or not np.all(np.isfinite(matrix)):
        raise EmbedderError(f"embedder {_model_name(embedder)} returned an array of shape {matrix.shape}")
    return normalize_rows(matrix)


def _quantise(matrix: F32) -> tuple[I8, F32]:
    """int8 rows with a per-row scale: row ~= int8 row * scale (max abs error scale / 2)."""
    peak = np.abs(matrix).max(axis=1)
    scales = (peak / 127.0).astype(np.float32)
    safe = np.where(scales > 0, scales, 1.0).astype(np.float32)
    vectors = np.clip(np.rint(matrix / safe[:, None]), -127, 127).astype(np.int8)
    return vectors, scales


def _minmax(scores: F32) -> F32:
    finite = scores[np.isfinite(scores)]
    if not len(finite):
        return np.zeros_like(scores)
    low, high = float(finite.min()), float(finite.max())
    if high <= low:
        return np.zeros_like(scores)
    return ((scores - np.float32(low)) / np.float32(high - low)).astype(np.float32)


class _BufferReader:
    """A read-only file over a buffer, without copying it (``io.BytesIO`` copies a memoryview): what ``zipfile``
    needs to list an archive's members."""

    def __init__(self, view: memoryview) -> None:
        self._view = view
        self._pos = 0

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = (0, self._pos, len(self._view))[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def read(self, size: int | None = -1) -> bytes:
        end = len(self._view) if size is None or size < 0 else min(len(self._view), self._pos + size)
        out = self._view[self._pos : end].tobytes()
        self._pos = max(self._pos, end)
        return out


_LOCAL_HEADER = 30  # a zip member's local header before its name and extra field
_NPY_MAGIC = b"\x93NUMPY"


def _stored_arrays(data: bytes | memoryview) -> dict[str, npt.NDArray[Any]] | None:
    """The arrays of an ``.npz`` written without compression (``to_bytes``' default) as views into ``data``: no
    copy of the 38 MB of vectors of 100,000 memories, and no CRC pass over them (``np.load`` does both; the part
    came whole from S3, whose transfer is checksummed). An array not aligned for its type is copied. None when a
    member is compressed or not a plain ``.npy`` array of version 1 or 2: ``np.load`` then reads the archive."""
    view = memoryview(data).cast("B") if isinstance(data, memoryview) else memoryview(data)
    with zipfile.ZipFile(_BufferReader(view)) as archive:  # type: ignore[arg-type]
        members = archive.infolist()
    arrays: dict[str, npt.NDArray[Any]] = {}
    for info in members:
        if info.compress_type != zipfile.ZIP_STORED or not info.filename.endswith(".npy"):
            return None
        at = info.header_offset
        local = view[at : at + _LOCAL_HEADER].tobytes()
        if len(local) < _LOCAL_HEADER or local[:4] != b"PK\x03\x04":
            raise ValueError(f"archive member {info.filename} has no local header")
        start = at + _LOCAL_HEADER + int.from_bytes(local[26:28], "little") + int.from_bytes(local[28:30], "little")
        member = view[start : start + info.file_size]
        preamble = member[:12].tobytes()
        if preamble[:6] != _NPY_MAGIC or preamble[6] not in (1, 2):
            return None
        length, end = (
            (int.from_bytes(preamble[8:10], "little"), 10)
            if preamble[6] == 1
            else (int.from_bytes(preamble[8:12], "little"), 12)
        )
        header = io.BytesIO(member[: end + length].tobytes())
        version = np.lib.format.read_magic(header)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran_order, dtype = read_header(header)
        if fortran_order or dtype.hasobject:
            return None
        count = math.prod(shape)
        array = np.frombuffer(member, dtype=dtype, count=count, offset=end + length).reshape(shape)
        arrays[info.filename[: -len(".npy")]] = array if array.flags.aligned else array.copy()
    return arrays


def _stable_argsort(keys: I32, bound: int) -> I64:
    """Stable argsort of non-negative int32 keys below ``bound``: one or two radix (uint16) passes."""
    order: I64 = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
    if bound > 1 << 16:
        order = order[np.argsort((keys[order] >> 16).astype(np.uint16), kind="stable")]
    return order
