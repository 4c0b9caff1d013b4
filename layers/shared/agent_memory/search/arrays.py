"""The arrays of a search index, and what is derived from them on first use: positions by id, term ids by term,
the postings of a term, length norms. ``SearchIndex`` (``index.py``) builds, merges and stores them;
``RankedIndex`` (``ranking.py``) searches them.

The canonical form is doc-major (CSR: ``doc_ptr`` into ``terms``, ``tf_text``, ``tf_ctx``; ``stored``), which
makes forgetting and merging array slicing and concatenation, with no re-tokenising. The inverted index
(term-major postings, document frequencies) is derived from it: from the entries' term order stored with the
index (``term_order``), or, for an index stored without it, with a linear-time radix sort on the first search,
and cached.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from agent_memory.search.scoring import length_norm
from agent_memory.search.types import SearchConfig

__all__ = ["IndexArrays"]

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


class IndexArrays:
    """One immutable index's arrays (``stored``) and the lookups derived from them."""

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
        """k1 * (1 - b + b * dl / avgdl) per document, for this config's k1, b and context weight (cached)."""
        key = (config.k1, config.b, config.context_weight)
        norm = self._norms.get(key)
        if norm is None:
            norm = self._norms[key] = length_norm(self._len_text, self._len_ctx, config)
        return norm

    def _vector_blocks(self) -> list[tuple[int, I8]]:
        """The document vectors as (first document's position, rows) blocks covering every document."""
        assert self._vectors is not None
        return [(0, self._vectors)]


def _stable_argsort(keys: I32, bound: int) -> I64:
    """Stable argsort of non-negative int32 keys below ``bound``: one or two radix (uint16) passes."""
    order: I64 = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
    if bound > 1 << 16:
        order = order[np.argsort((keys[order] >> 16).astype(np.uint16), kind="stable")]
    return order
